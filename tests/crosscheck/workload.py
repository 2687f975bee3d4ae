# CPU-bound pure-Python work for the perf cross-check (tests/crosscheck):
# interpreter loop, dict and string work, integer maths; no large
# allocations, so kernel time (page clearing) stays small and user-space
# shares are comparable between a signal-based and a PMU-based profiler.
import sys
def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)
def strs(n):
    d = {}
    for i in range(n):
        d[str(i % 5000)] = i
    return len(d)
scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for _ in range(scale):
    fib(27)
    strs(800000)
print("done")
