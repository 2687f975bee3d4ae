#!/usr/bin/env python3
"""
attribute.py - rhea's direct CPU cost in one run, read from a perf profile
of that run (bench/run.sh: "W2 direct cost (perf-attributed)").

    perf record --call-graph dwarf -F 2000 -o perf.data -- rhea record -- PROG...
    perf script -i perf.data --no-inline \\
        -F comm,pid,tid,period,event,ip,sym,dso >script.txt
    perf report -i perf.data --no-children --sort dso --stdio -g none >dso.txt
    python3 bench/attribute.py [--title T] [--check-dso dso.txt] \\
        [--summary OUT] script.txt

Why: on a 2-core shared VM a server-like program's CPU time varies by +-10 %
from run to run, so "rhea run / bare run" cannot decide a 3 % target without
many rounds.  The samples of a single profiled run, sorted by who spent them,
do not depend on that noise: the share that is rhea's is stable from run to
run.  It is a lower bound of the overhead: cache and TLB pollution, the
branch predictor, the scheduler's extra switches and the cost of delivering
the sampler's timer interrupts land on the program's own samples.

Every sample (weighted by its period, as perf report does) goes to exactly
one of these, in this order:

  cli      the process named "rhea" (the CLI, and its child until exec)
  threads  threads whose name starts with "rhea-" (rhea-ticker, rhea-writer,
           rhea-sampler): the agent's own threads, whatever they run
  hooks    program threads, innermost frame in librhea.so: agent code run
           on the program's threads (hook bodies, captures and unwinding,
           the sampler's signal handler, start-up and exit)
  libs     program threads, innermost frame in another user-space library
           (libc, libdw, the vDSO...) called by agent code
  kernel   program threads, innermost frame in the kernel, entered from
           agent code (getrusage, timer_settime, mmap, page faults of
           agent memory...)
  signals  program threads, kernel samples of the program whose kernel
           stack is signal delivery, sigreturn or the POSIX CPU-timer
           machinery: the sampler's signals, as long as the program has no
           signals or CPU timers of its own (true of W1 and W2)
  program  the rest

"Called by agent code" is decided on the user-space stack, walked from the
innermost frame outwards: frames in other libraries are skipped; the first
frame in the executable (any file not named *.so*) or in an unknown place
makes the sample the program's; the first librhea.so frame that is agent
code makes it the agent's.  A librhea.so frame that is a hook entry point
(a function the library exports, e.g. read, malloc, or the slow half a
fast path jumps to, hooks_*_other) is the hook forwarding the call to the
real function: the walk goes on past it, so that
program -> read hook -> libc read -> kernel is the program's, and
agent_init -> mmap hook -> libc mmap -> kernel is the agent's.  A libc call
written directly in a hook's body (not through an agent function: errno)
counts as the program's; with optimization and no LTO the agent's
syscalls are all made from capture.c, sampler.c and agent.c functions.

The top functions list, for each agent sample, the librhea.so function it
was attributed to (the innermost agent-code frame; for a sample in a hook's
own code, the hook; for an agent thread outside librhea.so, the thread).
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HEADER = re.compile(r"^(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<period>\d+)\s+(?P<event>\S+):\s*$")
FRAME = re.compile(r"^\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")
SHARED = re.compile(r"\.so(\.[0-9][0-9.]*)?$")

# Kernel functions of signal delivery and of POSIX CPU timers (the
# sampler's timers and signals, for a program that has none of its own).
SIGNAL_FNS = (
    "arch_do_signal_or_restart",
    "get_signal",
    "handle_signal",
    "setup_rt_frame",
    "x64_setup_rt_frame",
    "__x64_sys_rt_sigreturn",
    "__ia32_sys_rt_sigreturn",
    "run_posix_cpu_timers",
    "handle_posix_cpu_timers",
    "posix_cpu_timers_work",
    "cpu_timer_fire",
    "send_sigqueue",
)

CATEGORIES = (
    ("hooks", "in hooks: agent code on the program's threads (leaf in librhea.so)"),
    ("libs", "libraries called by agent code (libc, libdw, vDSO...)"),
    ("kernel", "kernel, entered from agent code (syscalls, page faults)"),
    ("signals", "kernel, delivering the sampler's signals and CPU timers"),
    ("threads", "the agent's threads (rhea-ticker, rhea-writer, rhea-sampler)"),
    ("cli", "the rhea CLI process"),
)


class Frame:
    __slots__ = ("ip", "sym", "dso")

    def __init__(self, ip, sym, dso):
        self.ip, self.sym, self.dso = ip, sym, dso

    @property
    def kernel(self):
        return self.dso.startswith("[kernel") or self.ip >= 0xFFFF800000000000


def samples(lines):
    """Yields (comm, pid, tid, period, event, frames innermost first)."""
    head, frames = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if not line[0].isspace():
            if head:
                yield head + (frames,)
            m = HEADER.match(line)
            if not m:
                raise SystemExit("attribute.py: not a sample header (use perf script "
                                 "-F comm,pid,tid,period,event,ip,sym,dso): " + line)
            head = (m["comm"], int(m["pid"]), int(m["tid"]), int(m["period"]),
                    m["event"].split(":")[0])
            frames = []
            continue
        m = FRAME.match(line)
        if not m or head is None:
            continue
        ip = int(m["ip"], 16)
        if ip == 0xFFFFFFFFFFFFFFFF:  # end of a callchain perf could not unwind
            continue
        frames.append(Frame(ip, m["sym"].split("@")[0], m["dso"]))
    if head:
        yield head + (frames,)


def wilson(k, n, z=1.96):
    """95 % interval of a proportion k/n (Wilson score): the sampling error."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / d
    return max(0.0, mid - half), min(1.0, mid + half)


def exported(path):
    """The function names a shared library exports (its hook entry points)."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("attribute.py: cannot list the exports of %s (%s)" % (path, e))
    names = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TWi":
            names.add(f[2].split("@")[0])
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("script", help="perf script output (- for stdin)")
    ap.add_argument("--agent", help="librhea.so (default: the one the samples name)")
    ap.add_argument("--title", default="", help="first line of the output")
    ap.add_argument("--check-dso", help="perf report --no-children --sort dso --stdio output")
    ap.add_argument("--summary", help="write key=value lines here")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--threads-cpu-ns", type=int,
                    help="the agent threads' CPU time by their own clocks (the recording's STATS "
                         "agent_cpu_ns): replaces perf's samples of them")
    a = ap.parse_args()

    with (sys.stdin if a.script == "-" else open(a.script, errors="replace")) as f:
        data = list(samples(f))
    if not data:
        raise SystemExit("attribute.py: %s: no samples" % a.script)

    agent_dso = a.agent
    if not agent_dso:
        for *_, frames in data:
            for fr in frames:
                if os.path.basename(fr.dso) == "librhea.so":
                    agent_dso = fr.dso
                    break
            if agent_dso:
                break
    agent_base = os.path.basename(agent_dso) if agent_dso else "librhea.so"
    if not agent_dso or not os.path.exists(agent_dso):
        # without the hook names every forwarded call would count as rhea's
        raise SystemExit("attribute.py: cannot find librhea.so to list its hooks: use --agent")
    hooks = exported(agent_dso)

    def is_agent(fr):
        return os.path.basename(fr.dso) == agent_base

    def owner(user):
        """'agent' and the agent function, or 'program' and None."""
        for fr in user:
            if is_agent(fr):
                # a hook (or a part GCC split off it: read.part.0, .cold)
                # forwarding to the real function: its caller decides
                base = fr.sym.split(".")[0]
                if base in hooks or (base.startswith("hooks_") and base.endswith("_other")):
                    continue
                return "agent", fr.sym
            if fr.dso.startswith("[unknown") or not SHARED.search(fr.dso) and fr.dso != "[vdso]":
                return "program", None
        return "program", None

    cat = collections.Counter()  # category -> period
    ncat = collections.Counter()  # category -> samples
    fn_total = collections.Counter()  # agent function -> period
    fn_self = collections.Counter()
    fn_n = collections.Counter()  # agent function -> samples
    leaf_agent_all = 0
    total = 0
    events = set()
    for comm, pid, tid, period, event, frames in data:
        total += period
        events.add(event)
        leaf = frames[0] if frames else None
        in_agent = leaf is not None and not leaf.kernel and is_agent(leaf)
        if in_agent:
            leaf_agent_all += period
        user = [fr for fr in frames if not fr.kernel]
        fn = None
        if comm == "rhea":
            c = "cli"
        elif comm.startswith("rhea-"):
            c = "threads"
            fn = next((fr.sym for fr in user if is_agent(fr)), "(%s thread, no %s frame)" % (comm, agent_base))
        elif in_agent:
            c, fn = "hooks", leaf.sym
        else:
            who, fn = owner(user)
            if who == "agent":
                c = "kernel" if leaf is not None and leaf.kernel else "libs"
            elif leaf is not None and leaf.kernel and any(
                    fr.kernel and fr.sym in SIGNAL_FNS for fr in frames):
                c, fn = "signals", "(kernel: signal delivery, CPU timers)"
            else:
                c = "program"
        cat[c] += period
        ncat[c] += 1
        if fn is not None:
            fn_total[fn] += period
            fn_n[fn] += 1
            if in_agent:
                fn_self[fn] += period

    def pct(x, of=total):
        return 100.0 * x / of if of else 0.0

    n = len(data)
    agent = sum(cat[c] for c, _ in CATEGORIES)
    nagent = sum(ncat[c] for c, _ in CATEGORIES)
    prog = total - agent
    lo, hi = wilson(nagent, n)
    # The agent's threads wake up every millisecond for a few microseconds:
    # a sampling profiler misses most of those (perf saw a third of what
    # their CPU clocks say under W2).  Their exact CPU time, when given,
    # replaces perf's samples of them; the interval is then the sampling
    # error of the rest plus that exact part.
    threads_sampled = cat["threads"]
    if a.threads_cpu_ns and events <= {"cpu-clock", "task-clock"}:
        exact = float(a.threads_cpu_ns)
        lo_r, hi_r = wilson(nagent - ncat["threads"], n)
        total = total - threads_sampled + exact
        agent = agent - threads_sampled + exact
        cat["threads"] = exact
        lo = (lo_r * (total - exact + threads_sampled) + exact) / total
        hi = (hi_r * (total - exact + threads_sampled) + exact) / total
    out = []
    if a.title:
        out.append(a.title)
    if events <= {"cpu-clock", "task-clock"}:  # periods in ns
        cpu = ", %.3f s of CPU" % (total / 1e9)
    else:
        cpu = " (%s)" % ", ".join(sorted(events))
    out.append("   %d samples%s; rhea's share of all of them:" % (n, cpu))
    fmt = "     %-66s %6.2f %% %6d samples"
    for c, label in CATEGORIES:
        if c == "threads" and a.threads_cpu_ns and cat[c] != threads_sampled:
            out.append("     %-66s %6.2f %% by their CPU clocks (perf's %d samples: %.2f %%)"
                       % (label, pct(cat[c]), ncat[c], pct(threads_sampled)))
            continue
        out.append(fmt % (label, pct(cat[c]), ncat[c]))
    out.append(fmt % ("total: rhea's direct cost", pct(agent), nagent))
    out.append("     = %.2f %% of the program's own samples: the direct CPU overhead, a lower bound"
               % pct(agent, prog))
    out.append("       (95 %% sampling interval, Wilson: share %.2f..%.2f %%, overhead %.2f..%.2f %%)"
               % (100 * lo, 100 * hi, 100 * lo / (1 - lo), 100 * hi / (1 - hi) if hi < 1 else float("inf")))
    if a.threads_cpu_ns:
        out.append("       (the agent's threads by their own CPU clocks, from the recording)")
    if a.check_dso:
        rep = None
        with open(a.check_dso, errors="replace") as f:
            for line in f:
                m = re.match(r"^\s*([0-9.]+)%\s+(\S+)\s*$", line)
                if m and os.path.basename(m.group(2)) == agent_base:
                    rep = float(m.group(1))
        out.append("   check: perf report --no-children --sort dso: %s %s; leaf in %s here:"
                   % (agent_base, "%.2f %%" % rep if rep is not None else "absent", agent_base))
        out.append("          %.2f %% on all threads, %.2f %% on the program's (\"in hooks\")"
                   % (pct(leaf_agent_all), pct(cat["hooks"])))
    out.append("   top %d agent functions (the librhea.so function each agent sample is charged to;"
               % a.top)
    out.append("   self: the sample is in its own code)")
    out.append("     %-48s %7s %7s %8s" % ("function", "all %", "self %", "samples"))
    for fn, p in fn_total.most_common(a.top):
        out.append("     %-48s %7.2f %7.2f %8d" % (fn[:48], pct(p), pct(fn_self[fn]), fn_n[fn]))
    print("\n".join(out))

    if a.summary:
        with open(a.summary, "w") as f:
            f.write("samples=%d\n" % n)
            f.write("total_pct=%.4f\ntotal_lo=%.4f\ntotal_hi=%.4f\n" % (pct(agent), 100 * lo, 100 * hi))
            f.write("overhead_pct=%.4f\noverhead_lo=%.4f\noverhead_hi=%.4f\n"
                    % (pct(agent, prog), 100 * lo / (1 - lo), 100 * hi / (1 - hi) if hi < 1 else 1e9))
            for c, _ in CATEGORIES:
                f.write("%s_pct=%.4f\n" % (c, pct(cat[c])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
