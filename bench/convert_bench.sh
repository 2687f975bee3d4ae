#!/bin/sh
# convert_bench.sh - throughput and memory of `rhea convert`, compared with
# `perf script` (not part of `make test`).
#
#   sh bench/convert_bench.sh            (after make; as root for perf)
#   RECORDS=4000000 DUR=5 sh bench/convert_bench.sh
#
# 1. Synthetic recordings of RECORDS/4 and RECORDS records (default 2M) from
#    bench/convert_gen.c (8 threads, 100 us apart, realistic stack churn,
#    the generator's own functions as symbols; see its top comment), each
#    converted to Perfetto and pprof under /usr/bin/time -v: records/s
#    excluding symbolization (load + convert, from `rhea convert --timing`),
#    symbolization time on its own, peak RSS.  Two sizes show how memory
#    grows with the recording's length.
# 2. A real program (a small allocation-heavy multi-threaded workload, built
#    with frame pointers so that perf's default unwinding works) recorded for
#    DUR seconds (default 4) by `rhea record --interval 100us`, converted
#    the same way; and recorded for the same duration by
#    `perf record -F 10000 -g` (10 kHz = 100 us), then read back by
#    `perf script` (which symbolizes as it goes: its time includes that).
#
# Prints a table; results and logs stay in build/bench-convert/.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/bench-convert"
RECORDS=${RECORDS:-2000000}
DUR=${DUR:-4}
CC=${CC:-cc}
rhea="$root/rhea"
[ -x "$rhea" ] && [ -f "$root/build/librhea_core.a" ] || { echo "convert_bench: run make first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "convert_bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
mkdir -p "$out"

$CC -O2 -g -std=gnu11 -D_GNU_SOURCE -I"$root/core" -o "$out/convert_gen" "$root/bench/convert_gen.c" \
	"$root/build/librhea_core.a" -lzstd -lz

cat >"$out/work.c" <<'EOF'
/* A busy, allocating, 4-thread program: call chains of depth ~8 under
 * each thread, malloc/free at the leaves, for argv[1] seconds. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
static volatile uint64_t sink;
static double secs;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) static void leaf(int i) { void *p = malloc(32 + (size_t)(i & 255)); sink += (uintptr_t)p; free(p); for (int k = 0; k < 200; k++) sink += (uint64_t)k * (uint64_t)i; }
__attribute__((noinline)) static void mid(int d, int i) { if (d == 0) { leaf(i); return; } if (i & (1 << d)) mid(d - 1, i); else mid(d - 1, i + 1); }
__attribute__((noinline)) static void top_a(int i) { mid(6, i); }
__attribute__((noinline)) static void top_b(int i) { mid(5, i * 3); }
static void *run(void *arg) { double end = now() + secs; for (int i = (int)(intptr_t)arg; now() < end; i++) { if (i % 3) top_a(i); else top_b(i); } return NULL; }
int main(int argc, char **argv) { secs = argc > 1 ? atof(argv[1]) : 2; pthread_t t[4]; for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, run, (void *)(intptr_t)i); for (int i = 0; i < 4; i++) pthread_join(t[i], NULL); return 0; }
EOF
$CC -O2 -g -fno-omit-frame-pointer -pthread -o "$out/work" "$out/work.c"

rows="$out/rows.txt"
: >"$rows"

# rhea_case NAME FORMAT RECORDING: one table row from --timing and time -v
rhea_case() {
	log="$out/$1.$2.log"
	/usr/bin/time -v "$rhea" convert --timing -q -f "$2" -o "$out/$1.$2.out" "$3" >"$log" 2>&1
	awk -v name="$1" -v fmt="$2" -v size="$(stat -c %s "$out/$1.$2.out")" '
		/^rhea: timing:/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "load") load = $(i + 1)
				if ($i == "symbolize") sym = $(i + 1)
				if ($i == "convert") conv = $(i + 1)
				if ($i == "records,") recs = $(i - 1)
			}
		}
		/Maximum resident set size/ { rss = $NF }
		END {
			printf "%-22s %-9s %9d %8.3f %8.3f %8.3f %12.0f %8.0f %8.1f\n", name, fmt, recs, load, sym, conv,
			       recs / (load + conv), rss / 1024, size / 1048576
		}' "$log" >>"$rows"
}

echo "convert_bench: synthetic recordings ($((RECORDS / 4)) and $RECORDS records)" >&2
for n in $((RECORDS / 4)) "$RECORDS"; do
	"$out/convert_gen" "$out/synthetic-$n.rhea" "$n" 8 >/dev/null
	for fmt in perfetto pprof; do
		rhea_case "synthetic-$n" "$fmt" "$out/synthetic-$n.rhea"
	done
done

echo "convert_bench: recording the workload for ${DUR} s with rhea (100 us) and perf (10 kHz)" >&2
rm -f "$out/real.rhea" "$out/real.rhea.old"
"$rhea" record -q --interval 100us --buffer 64M -o "$out/real.rhea" -- "$out/work" "$DUR"
for fmt in perfetto pprof; do
	rhea_case "real-${DUR}s" "$fmt" "$out/real.rhea"
done

perf_row="perf: not measured (perf record failed: not root, or perf_event_paranoid)"
if perf record -q -F 10000 -g -o "$out/perf.data" -- "$out/work" "$DUR" >"$out/perf-record.log" 2>&1; then
	/usr/bin/time -v perf script -i "$out/perf.data" >"$out/perf-script.txt" 2>"$out/perf-script.log"
	samples=$(grep -c '^[^[:space:]]' "$out/perf-script.txt" || true)
	perf_row=$(awk -v n="$samples" -v size="$(stat -c %s "$out/perf-script.txt")" '
		/Elapsed \(wall clock\)/ { split($NF, a, ":"); t = (length(a) == 3) ? a[1] * 3600 + a[2] * 60 + a[3] : a[1] * 60 + a[2] }
		/Maximum resident set size/ { rss = $NF }
		END {
			printf "%-22s %-9s %9d %8s %8s %8.3f %12.0f %8.0f %8.1f\n", "real-perf-script", "text", n, "-", "(incl.)",
			       t, n / t, rss / 1024, size / 1048576
		}' "$out/perf-script.log")
fi

printf '\n%-22s %-9s %9s %8s %8s %8s %12s %8s %8s\n' "recording" "format" "records" "load s" "symb. s" \
	"conv. s" "records/s" "RSS MB" "out MB"
cat "$rows"
echo "$perf_row"
cat <<EOF

records/s = records / (load + convert), symbolization excluded (rhea); for
perf script, samples / wall time, symbolization included (it cannot be
separated).  RSS = peak resident set (/usr/bin/time -v).  Target: > 1M
records/s.  Logs and outputs: $out
EOF
