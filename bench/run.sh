#!/bin/sh
# bench/run.sh - rhea's benchmark suite (`make bench`; not part of `make test`).
#
#   sh bench/run.sh              full run (5 rounds, W2 15, about 9-12 minutes on 2 cores)
#   QUICK=1 sh bench/run.sh      short run (3 rounds, W2 7, smaller workloads, ~3 min)
#   ROUNDS=N                     override the number of rounds (W2's too)
#   W2_ROUNDS=N                  override W2's alone
#   W1L_ROUNDS=N                 override the long W1 series at 16 threads (default 2 x W2's + 1)
#   ATTR_RUNS=N                  runs of W2's and W4's perf-attributed direct cost (default 3, QUICK 1)
#   ONLY="micro convert w0 w1 w2 w3 w4 w5 w6 redis attach"  run only these parts (w5 also
#                                runs W0's empty set: its start-up costs)
#   KEEP=1                       keep the work directory (raw data, recordings)
#
# What it measures (see bench/README.md for the method and the targets):
#  1. micro-benchmarks: hook fast path in ns per call (bench/hookloop.c run
#     bare and under rhea, interleaved), capture cost per stack for both
#     unwinders at depth 10/30/60 and of a whole synchronous capture
#     (bench/micro.c, linked with the agent's objects), stack-table
#     throughput, record encoding (bytes per sample before/after zstd);
#  2. whole-program overhead: W0 start-up (the fixed cost of each tool on
#     a process that does nothing, for each set of modules), W1 allocation storm (1/4/16 threads), W2
#     server-like pipeline, W3 CPU-bound recursion (8 threads), W4 sqlite3,
#     W5 mostly idle server (a short request every 10 ms: the tool's extra
#     CPU per second of run, start-up excluded, is its number) and
#     redis-server under redis-benchmark; each bare and under rhea
#     (defaults, --unwind fp on the frame-pointer build, --sample 0,
#     --hooks all), perf record -g / --call-graph dwarf, heaptrack,
#     gperftools' CPU profiler.  Runs are interleaved (bare, tool1, tool2,
#     ..., bare, tool1, ...) so that the machine's slow drifts hit every
#     column alike; ratios are medians of per-round ratios to the bare run
#     of the same round, each with a 95 % confidence interval of that
#     median (order statistics, bench/report.sh); W2, the noisiest, runs
#     more rounds;
#  3. direct cost: three more runs of W2 (ten times the requests) and of
#     W4, one of W1 at 16 threads under rhea, profiled by perf record --call-graph
#     dwarf; bench/attribute.py sorts the samples into rhea's and the
#     program's (a lower bound of the overhead, much less noisy than the
#     whole-run ratios).
#
# The table is printed and written to bench/results/<UTC date-time>.txt with
# a description of the machine, the raw measurements to <same>.tsv.
#
# rhea and librhea.so are copied at the start, so that a rebuild in the
# tree while the suite runs does not change what is measured.

set -u
cd "$(dirname "$0")/.." || exit 2
QUICK=${QUICK:-0}
[ "$QUICK" = 1 ] && DEF_ROUNDS=3 DEF_W2_ROUNDS=7 DEF_ATTR_RUNS=1 || DEF_ROUNDS=5 DEF_W2_ROUNDS=15 DEF_ATTR_RUNS=3
ATTR_RUNS=${ATTR_RUNS:-$DEF_ATTR_RUNS}
# W2 gets more rounds: its bare CPU time varies by +-10 % from run to run
# on a 2-core shared VM (70 % of it is kernel time), which pairing adjacent
# runs does not remove; 15 rounds give a 96.5 % interval of the median
# from the 4th to the 12th ratio.  ROUNDS sets every part, W2 included.
W2_ROUNDS=${W2_ROUNDS:-${ROUNDS:-$DEF_W2_ROUNDS}}
# W1's target series at 16 threads: a 10% bound on a ratio whose rounds
# spread by +-5%; 31 rounds put the interval of the median between the 10th
# and the 22nd ratio (about 30% narrower than 15 rounds; 40 s more).
W1L_ROUNDS=${W1L_ROUNDS:-$((W2_ROUNDS * 2 + 1))}
ROUNDS=${ROUNDS:-$DEF_ROUNDS}
ONLY=${ONLY:-"micro convert w0 w1 w2 w3 w4 w5 w6 redis attach"}
CC=${CC:-gcc}
CFLAGS_BENCH="-O2 -g -Wall -Wextra"
TIMEOUT=300
PROFILER=/usr/lib/x86_64-linux-gnu/libprofiler.so

say() { printf '%s\n' "$*" >&2; }
die() { say "bench: $*"; exit 2; }
want() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

for f in rhea librhea.so build/librhea_core.a; do
	[ -e "$f" ] || die "$f is missing: run make first (make bench builds it)"
done

START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
WORK=$(mktemp -d /tmp/rhea-bench.XXXXXX) || die "cannot create a work directory"
REDIS_PORT=""
cleanup() {
	if [ -n "$REDIS_PORT" ]; then
		redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1
	fi
	if [ "${KEEP:-0}" = 1 ]; then say "bench: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BIN=$WORK/bin
mkdir -p "$BIN" "$WORK/out" || exit 2
cp rhea librhea.so build/librhea_core.a "$BIN/" || die "cannot copy the binaries"
RHEA=$BIN/rhea
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no -- agent core cli 2>/dev/null)" ]; then
	COMMIT="$COMMIT+dirty(agent/core/cli)"
fi

# ---- tools: install what is missing (root only), else skip the column ----
NOTES=$WORK/notes.txt
: >"$NOTES"
note() { printf '%s\n' "$*" >>"$NOTES"; }
pkg_of() {
	case $1 in
	perf) echo linux-perf ;;
	heaptrack) echo heaptrack ;;
	profiler) echo libgoogle-perftools-dev ;;
	sqlite3) echo sqlite3 ;;
	redis-server) echo redis-server ;;
	redis-benchmark | redis-cli) echo redis-tools ;;
	esac
}
have() {
	if [ "$1" = profiler ]; then [ -e "$PROFILER" ]; else command -v "$1" >/dev/null 2>&1; fi
}
ensure() { # ensure TOOL: 0 when usable, after an apt-get install if root
	have "$1" && return 0
	pkg=$(pkg_of "$1")
	if [ "$(id -u)" = 0 ] && [ -n "$pkg" ] && command -v apt-get >/dev/null 2>&1; then
		say "bench: installing $pkg for $1"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" \
			>/dev/null 2>&1 ||
			{ DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
				DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
					--no-install-recommends "$pkg" >/dev/null 2>&1; }
	fi
	have "$1" && return 0
	note "skipped: $1 not available (package ${pkg:-?}); its column is left out"
	return 1
}
HAVE_PERF=0 HAVE_HT=0 HAVE_GPERF=0 HAVE_SQLITE=0 HAVE_REDIS=0
if ensure perf; then
	if perf record -q -o "$WORK/probe.data" -- true >/dev/null 2>&1; then
		HAVE_PERF=1
	else
		note "skipped: perf record does not work here (perf_event_paranoid, container?)"
	fi
	rm -f "$WORK/probe.data"
fi
ensure heaptrack && HAVE_HT=1
ensure profiler && HAVE_GPERF=1
ensure sqlite3 && HAVE_SQLITE=1
ensure redis-server && ensure redis-benchmark && ensure redis-cli && HAVE_REDIS=1
HAVE_PY=0
if command -v python3 >/dev/null 2>&1; then
	HAVE_PY=1
else
	note "skipped: the perf-attributed direct cost needs python3 (bench/attribute.py)"
fi

# ---- build the bench programs -------------------------------------------
build() { # build OUT SRC EXTRA-FLAGS...
	out=$1 src=$2
	shift 2
	$CC $CFLAGS_BENCH "$@" -pthread -o "$BIN/$out" "$src" 2>"$WORK/cc.log" ||
		{ cat "$WORK/cc.log" >&2; die "cannot build $src"; }
	[ -s "$WORK/cc.log" ] && cat "$WORK/cc.log" >&2
	return 0
}
say "bench: building the benchmark programs"
build runstat bench/runstat.c
build hookloop bench/hookloop.c
build w1 bench/w1_alloc.c -fomit-frame-pointer
build w1fp bench/w1_alloc.c -fno-omit-frame-pointer
build w2 bench/w2_server.c -fomit-frame-pointer
build w2fp bench/w2_server.c -fno-omit-frame-pointer
build w3 bench/w3_cpu.c -fomit-frame-pointer
build w3fp bench/w3_cpu.c -fno-omit-frame-pointer
build w5 bench/w5_idle.c -fomit-frame-pointer
build attachee bench/attachee.c
$CC $CFLAGS_BENCH -fomit-frame-pointer -DCHAIN=chain_nofp -c bench/micro_chain.c \
	-o "$BIN/chain_nofp.o" &&
	$CC $CFLAGS_BENCH -fno-omit-frame-pointer -DCHAIN=chain_fp -c bench/micro_chain.c \
		-o "$BIN/chain_fp.o" &&
	$CC $CFLAGS_BENCH -fno-omit-frame-pointer -Iagent -Icore -o "$BIN/micro" \
		bench/micro.c "$BIN/chain_nofp.o" "$BIN/chain_fp.o" "$BIN/librhea_core.a" \
		-ldw -lelf -lzstd -lz -lpthread || die "cannot build bench/micro.c"
$CC $CFLAGS_BENCH -std=gnu11 -D_GNU_SOURCE -Icore -o "$BIN/convert_gen" bench/convert_gen.c \
	"$BIN/librhea_core.a" -lzstd -lz || die "cannot build bench/convert_gen.c"
RUNSTAT=$BIN/runstat

# ---- workload sizes ------------------------------------------------------
if [ "$QUICK" = 1 ]; then
	W1_N=3000000 W1_THREADS="1 16" W2_N=30000 W3_N=100 W4_N=100000 W5_S=1 REDIS_N=10000 W6_N=8
	HOOK_N=1000000 HOOK_R=9 MICRO_N=5000 CONV_N=200000
else
	W1_N=6000000 W1_THREADS="1 4 16" W2_N=100000 W3_N=200 W4_N=300000 W5_S=3 REDIS_N=25000 W6_N=24
	HOOK_N=2000000 HOOK_R=15 MICRO_N=20000 CONV_N=1000000
fi

RAW=$WORK/raw.tsv   # wl cfg tool base round wall user sys rss status outbytes extra csw
RSTATS=$WORK/rhea.tsv # wl cfg tool samples dropped captures bytes_raw file_bytes stack_nodes
: >"$RAW"
: >"$RSTATS"
LOG=$WORK/stderr.log
: >"$LOG"

# The value of KEY in the "stats" object of `rhea report --json`.
json_stat() {
	awk -v k="\"$2\":" '/"stats":[ ]*\{/ { s = 1; next }
		s && /\}/ { exit }
		s { gsub(/[ ,]/, ""); if (index($0, k) == 1) { print substr($0, length(k) + 1); exit } }' "$1"
}

# Prefix the command in "$@" with TOOL's wrapper, writing into OUT; sets
# CMD_OK=0 when the tool is not available.
out_bytes() { find "$1" -type f -exec stat -c %s {} + 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

# run_one WL CFG TOOL BASE ROUND STDIN prog args... : one measured run.
run_one() {
	wl=$1 cfg=$2 tool=$3 base=$4 round=$5 input=$6
	shift 6
	out=$WORK/out/$wl-$cfg-$tool
	rm -rf "$out"
	mkdir -p "$out"
	case $tool in
	bare | bare-fp) ;;
	rhea) set -- "$RHEA" record -q -o "$out/rec.rhea" -- "$@" ;;
	rhea-fp) set -- "$RHEA" record -q --unwind fp -o "$out/rec.rhea" -- "$@" ;;
	rhea-sync) set -- "$RHEA" record -q --sample 0 -o "$out/rec.rhea" -- "$@" ;;
	rhea-all) set -- "$RHEA" record -q --hooks all -o "$out/rec.rhea" -- "$@" ;;
	perf-g) set -- perf record -q -g -F 1000 -o "$out/perf.data" -- "$@" ;;
	perf-dwarf) set -- perf record -q --call-graph dwarf -F 1000 -o "$out/perf.data" -- "$@" ;;
	heaptrack) set -- heaptrack -r -o "$out/ht" "$@" ;;
	gperf) set -- env LD_PRELOAD="$PROFILER" CPUPROFILE="$out/cpu.prof" CPUPROFILE_FREQUENCY=1000 "$@" ;;
	*) die "unknown tool $tool" ;;
	esac
	# PIN: the whole tree (the tool, the program, the agent's threads) on
	# that one CPU, as in a container given one
	[ -z "${PIN:-}" ] || set -- taskset -c "$PIN" "$@"
	rm -f "$WORK/res"
	"$RUNSTAT" -q -t "$TIMEOUT" -o "$WORK/res" -- "$@" <"$input" 2>>"$LOG"
	[ -s "$WORK/res" ] || echo "0 0 0 0 failed" >"$WORK/res"
	set -- $(cat "$WORK/res")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$wl" "$cfg" "$tool" "$base" \
		"$round" "$1" "$2" "$3" "$4" "$5" "$(out_bytes "$out")" "${EXTRA:--}" "${6:--}" >>"$RAW"
}

# After the last round: samples and drops of the rhea recordings.
rhea_stats() { # rhea_stats WL CFG TOOLS...
	wl=$1 cfg=$2
	shift 2
	for tool in "$@"; do
		case $tool in rhea*) ;; *) continue ;; esac
		f=$WORK/out/$wl-$cfg-$tool/rec.rhea
		[ -s "$f" ] || continue
		"$RHEA" report --json "$f" >"$WORK/report.json" 2>>"$LOG" || continue
		j=$WORK/report.json
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$wl" "$cfg" "$tool" \
			"$(json_stat "$j" samples)" "$(json_stat "$j" dropped)" \
			"$(json_stat "$j" captures)" "$(json_stat "$j" bytes_raw)" \
			"$(json_stat "$j" file_bytes)" "$(json_stat "$j" stack_nodes)" >>"$RSTATS"
	done
}

# shuffled ROUND WORDS...: the words in an order of their own for each
# round (seeded by the round: the same in every run), so that no column
# always follows the same neighbour (a bare run right after heaptrack's
# writes or perf's exit) or sits at the same place in its round.
shuffled() {
	seed=$1
	shift
	echo "$@" | awk -v seed="$seed" '{ srand(seed); n = split($0, a, " ")
		for (i = n; i > 1; i--) { j = int(rand() * i) + 1; t = a[i]; a[i] = a[j]; a[j] = t }
		for (i = 1; i <= n; i++) printf "%s ", a[i] }'
}

tools_for() { # the columns of a workload, given which builds exist
	t="bare rhea rhea-sync"
	[ "$1" = w0 ] && t="bare rhea"
	[ "$2" = fp ] && t="bare bare-fp rhea rhea-fp rhea-sync"
	case $1 in w1 | w2) t="$t rhea-all" ;; esac
	# W5 (idle server): perf -g only (perf-dwarf would add ~4 s a round)
	[ $HAVE_PERF = 1 ] && { [ "$1" = w5 ] && t="$t perf-g" || t="$t perf-g perf-dwarf"; }
	case $1 in w0 | w1 | w2) [ $HAVE_HT = 1 ] && t="$t heaptrack" ;; esac
	[ $HAVE_GPERF = 1 ] && t="$t gperf"
	echo "$t"
}

# run_workload WL CFG "TOOLS" PROG PROG_FP ARGS... (PROG_FP "-": no fp build);
# $RR rounds when set, else $ROUNDS.
run_workload() {
	wl=$1 cfg=$2 tools=$3 prog=$4 progfp=$5
	shift 5
	rounds=${RR:-$ROUNDS}
	say "bench: $wl $cfg: $rounds rounds of: $tools"
	r=1
	while [ "$r" -le "$rounds" ]; do
		for tool in $(shuffled "$r" $tools); do
			case $tool in
			bare-fp | rhea-fp) run_one "$wl" "$cfg" "$tool" bare-fp "$r" /dev/null "$progfp" "$@" ;;
			*) run_one "$wl" "$cfg" "$tool" bare "$r" /dev/null "$prog" "$@" ;;
			esac
		done
		r=$((r + 1))
	done
	rhea_stats "$wl" "$cfg" $tools
}

# attribute_run NAME TITLE RUNS FREQ PROG ARGS...: RUNS more runs of PROG
# under rhea (defaults), each itself profiled by perf with DWARF call graphs
# at FREQ Hz; the samples are sorted into rhea's and the program's by
# bench/attribute.py.  One run's sampling interval says nothing of how much
# the next run differs (W2's direct cost moved by 0.2 points between runs
# whose intervals were +-0.15), so there are several: the run with the
# median overhead is reported in full, all of them on one line.  Into
# $WORK/attr-NAME: title.txt, report.txt and summary.txt (the median run's)
# or errors.txt, runs.txt (one line per run: overhead, its interval, the
# ticker's wake-ups a second and % of the run coasting).
# ATTR_BEFORE, when set: a command evaluated before each run.
attribute_run() {
	name=$1 title=$2 runs=$3 freq=$4
	shift 4
	[ $HAVE_PERF = 1 ] && [ $HAVE_PY = 1 ] || return 0
	d=$WORK/attr-$name
	mkdir -p "$d"
	echo "$title" >"$d/title.txt"
	: >"$d/runs.txt"
	i=1
	while [ "$i" -le "$runs" ]; do
		say "bench: $name: run $i of $runs under rhea, profiled by perf (direct cost)"
		[ -z "${ATTR_BEFORE:-}" ] || eval "$ATTR_BEFORE"
		r=$d/r$i
		mkdir -p "$r"
		perf record -q --call-graph dwarf -F "$freq" -o "$r/perf.data" -- \
			"$RHEA" record -q -o "$r/rec.rhea" -- "$@" </dev/null >/dev/null 2>>"$d/errors.txt" &&
			perf script -i "$r/perf.data" --no-inline -F comm,pid,tid,period,event,ip,sym,dso \
				>"$r/script.txt" 2>>"$d/errors.txt" &&
			perf report -i "$r/perf.data" --no-children --sort dso --stdio -g none \
				>"$r/dso.txt" 2>>"$d/errors.txt" &&
			# the agent threads' CPU, and the ticker's mode in this run (wake-ups a
			# second, % of the run coasting): perf's slowdown can tip it from
			# ticking to coasting (agent.c)
			st=$("$RHEA" report --json "$r/rec.rhea" 2>>"$d/errors.txt" | python3 -c '
import json, sys
d = json.load(sys.stdin)
s, wall = d["stats"], d["recording"]["duration_ns"] or 1
print(s["agent_cpu_ns"], "%.0f %.0f" % (s["ticker_wakes"] * 1e9 / wall, 100.0 * s["ticker_coast_ns"] / wall))') &&
			tcpu=${st%% *} &&
			python3 bench/attribute.py --agent "$BIN/librhea.so" --check-dso "$r/dso.txt" \
				--threads-cpu-ns "$tcpu" --summary "$r/summary.txt" "$r/script.txt" \
				>"$r/report.txt" 2>>"$d/errors.txt" &&
			awk -F= -v run="$i" -v tk="${st#* }" '{ v[$1] = $2 }
				END { print run, v["overhead_pct"], v["overhead_lo"], v["overhead_hi"], tk }' \
				"$r/summary.txt" >>"$d/runs.txt" ||
			say "bench: $name: direct cost, run $i failed"
		[ "${KEEP:-0}" = 1 ] || rm -f "$r/perf.data" "$r/script.txt"
		i=$((i + 1))
	done
	med=$(sort -k2,2g "$d/runs.txt" | awk '{ r[NR] = $1 } END { if (NR) print r[int((NR + 1) / 2)] }')
	if [ -n "$med" ]; then
		cp "$d/r$med/report.txt" "$d/report.txt"
		cp "$d/r$med/summary.txt" "$d/summary.txt"
	fi
}

# ---- 1. micro-benchmarks -------------------------------------------------
MICRO=$WORK/micro.txt
: >"$MICRO"
if want micro; then
	say "bench: micro: capture cost, stack table, emit"
	"$BIN/micro" -n "$MICRO_N" >"$WORK/micro.out" 2>>"$LOG" || say "bench: micro failed"
	say "bench: micro: hook fast path ($ROUNDS rounds, interleaved)"
	HL=$WORK/hookloop.tsv
	: >"$HL"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		for v in $(shuffled "$r" bare fast default); do
			case $v in
			bare) set -- ;;
			fast) set -- "$RHEA" record -q --interval 10s --sample 0 -o "$WORK/out/hl.rhea" -- ;;
			default) set -- "$RHEA" record -q -o "$WORK/out/hl.rhea" -- ;;
			esac
			"$@" "$BIN/hookloop" -n "$HOOK_N" -r "$HOOK_R" 2>>"$LOG" |
				awk -v v="$v" '{ print v "\t" $1 "\t" $2 "\t" $3 }' >>"$HL"
		done
		r=$((r + 1))
	done
fi

# Conversion and symbolization: `rhea convert --timing` of a synthetic
# recording (bench/convert_gen.c: 8 threads, realistic stack churn, the
# generator's own functions as symbols, so symbolization is real) to every
# format, ROUNDS times each, interleaved; the load, symbolization and
# conversion times it prints, CPU and peak RSS from runstat.
CONV=$WORK/convert.tsv # fmt round load sym conv records nodes wall user sys rss outbytes
: >"$CONV"
# conv_row LABEL ROUND: one line of $CONV from the --timing line in
# $WORK/conv.err, runstat's $WORK/res and the output $WORK/conv.out.
conv_row() {
	awk -v fmt="$1" -v r="$2" -v out="$(stat -c %s "$WORK/conv.out" 2>/dev/null || echo 0)" \
		-v res="$(cat "$WORK/res")" '
		/timing:/ { for (i = 1; i <= NF; i++) {
			if ($i == "load") l = $(i + 1); if ($i == "symbolize") sy = $(i + 1)
			if ($i == "convert") c = $(i + 1); if ($i == "records,") n = $(i - 1)
			if ($i == "nodes,") nd = $(i - 2) } }
		END { split(res, x, " "); if (x[5] != "0") exit
			printf "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", fmt, r, l, sy, c, n,
			       nd, x[1], x[2], x[3], x[4], out }' "$WORK/conv.err" >>"$CONV"
}
if want convert; then
	say "bench: convert: $CONV_N records to every format ($ROUNDS rounds, interleaved)"
	"$BIN/convert_gen" "$WORK/conv.rhea" "$CONV_N" 8 >/dev/null 2>>"$LOG" || say "bench: convert_gen failed"
	r=1
	while [ -s "$WORK/conv.rhea" ] && [ "$r" -le "$ROUNDS" ]; do
		for fmt in $(shuffled "$r" perfetto chrome pprof folded); do
			rm -f "$WORK/res" "$WORK/conv.out"
			"$RUNSTAT" -q -t "$TIMEOUT" -o "$WORK/res" -- "$RHEA" convert --timing -q -f "$fmt" \
				-o "$WORK/conv.out" "$WORK/conv.rhea" 2>"$WORK/conv.err"
			[ -s "$WORK/res" ] || echo "0 0 0 0 failed" >"$WORK/res"
			conv_row "$fmt" "$r"
		done
		r=$((r + 1))
	done
fi

# ---- 2. workloads ----------------------------------------------------------
if want w0 || want w5; then
	# What every tool costs a process that does nothing: agent start-up
	# (CFI tables for every module), perf's set-up and tear-down...  Per
	# set of modules: the bench programs (exe + libc), sqlite3 (W4) and
	# redis-server (its libssl/libcrypto...).  report.sh subtracts these to
	# give the steady-state ratios (x* columns) and W5's extra CPU per
	# second start-up excluded: W5 alone runs the empty set, for its tools.
	if want w0; then
		run_workload w0 empty "$(tools_for w0 nofp)" "$BIN/w1" - -t 1 -n 0
	else
		run_workload w0 empty "$(tools_for w5 nofp | sed 's/ rhea-sync//')" "$BIN/w1" - -t 1 -n 0
	fi
fi
if want w0; then
	[ $HAVE_SQLITE = 1 ] &&
		run_workload w0 sqlite3 "$(tools_for w0 nofp)" "$(command -v sqlite3)" - -version
	[ $HAVE_REDIS = 1 ] && want redis &&
		run_workload w0 redis "$(tools_for w0 nofp)" "$(command -v redis-server)" - --version
fi
if want w1; then
	for t in $W1_THREADS; do
		run_workload w1 "t=$t" "$(tools_for w1 fp)" "$BIN/w1" "$BIN/w1fp" -t "$t" -n "$W1_N"
	done
	case " $W1_THREADS " in *" 16 "*)
		# 16 threads carries a target: judged on runs four times longer
		# (a fixed cost of a few ms weighs less, so does a scheduling
		# hiccup) of rhea alone, W1L_ROUNDS rounds (see above)
		RR=$W1L_ROUNDS
		run_workload w1 "t=16,long" "bare rhea rhea-all" "$BIN/w1" - -t 16 -n $((W1_N * 4))
		RR=
		attribute_run w1 "== W1 t=16 direct cost (perf-attributed): rhea record (defaults) -- w1 -t 16 -n $((W1_N * 4))" \
			1 2000 "$BIN/w1" -t 16 -n $((W1_N * 4)) ;;
	esac
fi
if want w1 && [ "$QUICK" != 1 ]; then
	# depth sensitivity: one depth per run, 16 threads, both unwinders
	for d in 10 30 60; do
		run_workload w1 "t=16,d=$d" "bare bare-fp rhea rhea-fp" "$BIN/w1" "$BIN/w1fp" \
			-t 16 -d "$d" -n "$W1_N"
	done
fi
if want w2; then
	RR=$W2_ROUNDS
	run_workload w2 "r=$W2_N" "$(tools_for w2 fp)" "$BIN/w2" "$BIN/w2fp" -r "$W2_N"
	# W2 again on one CPU: on two, its own regime (how its threads meet on
	# the CPUs, the cross-CPU wake-ups a VM pays dearly for) moves its CPU
	# time by up to twice from run to run and swamps any tool's cost; on
	# one it varies by a few percent, and the ratio is what the tool adds
	if command -v taskset >/dev/null 2>&1; then
		t="bare rhea"
		[ $HAVE_PERF = 1 ] && t="$t perf-g"
		[ $HAVE_GPERF = 1 ] && t="$t gperf"
		PIN=0
		run_workload w2 "r=$W2_N,cpu=1" "$t" "$BIN/w2" - -r "$W2_N"
		PIN=
	fi
	RR=
	# ten times the requests at 4 kHz: 50k samples a run, a sampling
	# interval of about +-0.15 points; three runs (one when QUICK)
	attribute_run w2 "== W2 direct cost (perf-attributed): rhea record (defaults) -- w2 -r $((W2_N * 10)), $ATTR_RUNS runs" \
		"$ATTR_RUNS" 4000 "$BIN/w2" -r $((W2_N * 10))
fi
if want w3; then
	run_workload w3 "t=8" "$(tools_for w3 fp)" "$BIN/w3" "$BIN/w3fp" -t 8 -n "$W3_N"
fi
if want w4 && [ $HAVE_SQLITE = 1 ]; then
	# The SQL: @n rows, the query mix, @n/100 one-row transactions.
	SQL=$WORK/w4.sql
	{
		echo ".parameter set @n $W4_N"
		cat bench/w4_sqlite.sql
		awk -v k=$((W4_N / 100)) 'BEGIN { for (i = 0; i < k; i++)
			printf "INSERT INTO log(msg) VALUES(%cm%d%c);\n", 39, i, 39 }'
		echo "SELECT count(*) FROM log;"
	} >"$SQL"
	tools=$(tools_for w4 nofp)
	cfg="rows=$W4_N"
	say "bench: w4 sqlite3 $cfg: $ROUNDS rounds of: $tools"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		for tool in $(shuffled "$r" $tools); do
			rm -f "$WORK/w4.db" "$WORK/w4.db-wal" "$WORK/w4.db-shm"
			run_one w4 "$cfg" "$tool" bare "$r" "$SQL" sqlite3 -bail -init /dev/null "$WORK/w4.db"
		done
		r=$((r + 1))
	done
	rm -f "$WORK/w4.db" "$WORK/w4.db-wal" "$WORK/w4.db-shm"
	rhea_stats w4 "$cfg" $tools
	# five rounds of a 2 s run say little here (the bare runs alone
	# spread over +-25%): its direct cost, like W2's, is measured too,
	# ATTR_RUNS times on a fresh database each (ATTR_BEFORE)
	ATTR_BEFORE='rm -f "$WORK/w4a.db" "$WORK/w4a.db-wal" "$WORK/w4a.db-shm"'
	attribute_run w4 "== W4 sqlite3 direct cost (perf-attributed): rhea record (defaults) -- sqlite3, $W4_N rows, $ATTR_RUNS runs" \
		"$ATTR_RUNS" 2000 sqlite3 -bail -init /dev/null "$WORK/w4a.db" ".read $SQL"
	eval "$ATTR_BEFORE"
	ATTR_BEFORE=
fi
if want w5; then
	# A mostly idle server: a ~20 us request every 10 ms for W5_S seconds
	# of wall time (not a fixed amount of work: a fixed schedule), so CPU
	# ratios mean little; report.sh gives each tool's extra CPU per second.
	run_workload w5 "p=10ms,s=$W5_S" "$(tools_for w5 nofp)" "$BIN/w5" - -p 10000 -s "$W5_S"
fi
if want w6 && command -v make >/dev/null; then
	# Many short processes: make -j2 rebuilds (-B) a program of W6_N
	# generated C files, each a driver, cc1 and as, then the link: every
	# process is traced from its start to its end, which W1-W5's single
	# processes never show (per-process start-up and exit, a build's
	# allocation-heavy compilers).  Not perf-dwarf or gperftools: the first
	# writes hundreds of MB for a build, the second one file for all.
	P=$WORK/w6
	rm -rf "$P"
	mkdir -p "$P"
	i=0
	objs=""
	while [ "$i" -lt "$W6_N" ]; do
		awk -v k="$i" 'BEGIN { for (f = 0; f < 60; f++) {
			printf "int f%d_%d(int x) { int s = 0; for (int i = 0; i < x; i++) s += (i ^ %d) * %d; return s; }\n", k, f, f, k + 1
			printf "static int g%d_%d[%d] = { %d };\nint h%d_%d(int i) { return g%d_%d[i %% %d] + f%d_%d(i); }\n", k, f, f + 1, f, k, f, k, f, f + 1, k, f } }' >"$P/u$i.c"
		objs="$objs u$i.o"
		i=$((i + 1))
	done
	echo 'int main(void) { return 0; }' >"$P/main.c"
	printf 'OBJS =%s main.o\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n%%.o: %%.c\n\t$(CC) -O2 -c $< -o $@\n' "$objs" >"$P/Makefile"
	t="bare rhea rhea-sync"
	[ $HAVE_PERF = 1 ] && t="$t perf-g"
	run_workload w6 "files=$W6_N" "$t" "$(command -v make)" - -s -B -j2 -C "$P" prog
fi

# redis-server under each tool, driven by redis-benchmark on 127.0.0.1: the
# server's CPU/wall/RSS/output, and requests per second in the extra column.
redis_one() { # redis_one TOOL ROUND CFG
	tool=$1 round=$2 cfg=$3
	# below the kernel's ephemeral range (32768 up): a port a client socket
	# holds there made a server fail to bind (exit 1) and the run hang
	port=$((20000 + ($$ + round * 7) % 12000))
	while redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; do port=$((port + 1)); done
	REDIS_PORT=$port
	(
		EXTRA=""
		run_one redis "$cfg" "$tool" bare "$round" /dev/null redis-server --port "$port" \
			--bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning
	) &
	rpid=$!
	i=0
	until redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -gt 200 ] && break
		sleep 0.05
	done
	# A server that did not start (it says why in the log) gets no
	# benchmark: redis-benchmark would retry against nothing for ever.
	: >"$WORK/rb.csv"
	if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
		timeout 600 redis-benchmark -h 127.0.0.1 -p "$port" -n "$REDIS_N" -c 16 \
			-t set,get,lpush,lpop --csv 2>>"$LOG" >"$WORK/rb.csv"
	else
		say "bench: redis under $tool, round $round: the server did not answer on port $port"
	fi
	redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1
	wait "$rpid"
	REDIS_PORT=""
	# mean requests/s of the tests, patched into the run's extra field
	rps=$(awk -F'"' 'NR > 1 && $4 + 0 > 0 { s += $4; n++ } END { if (n) printf "%.0f", s / n; else print "-" }' "$WORK/rb.csv")
	awk -v rps="$rps" 'BEGIN { FS = OFS = "\t" } { if (NR == last) $12 = "rps=" rps; print }' \
		last="$(wc -l <"$RAW")" "$RAW" >"$RAW.new" && mv "$RAW.new" "$RAW"
}
if want redis && [ $HAVE_REDIS = 1 ]; then
	tools=$(tools_for redis nofp)
	cfg="n=$REDIS_N"
	say "bench: redis $cfg: $ROUNDS rounds of: $tools"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		for tool in $(shuffled "$r" $tools); do redis_one "$tool" "$r" "$cfg"; done
		r=$((r + 1))
	done
	rhea_stats redis "$cfg" $tools
fi

# rhea attach's cost to a running process (bench/attachee.c, one thread in
# a 200 us loop): how long the attach stopped it (its longest iteration,
# against a bare run's), rhea attach's own time, and the recording's length
# for -d 1s.  Rounds alternate bare and attached runs.
if want attach; then
	say "bench: attach: $ROUNDS rounds of: bare, rhea attach -d 1s"
	: >"$WORK/attach.tsv"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		"$BIN/attachee" 3 >"$WORK/att.bare"
		"$BIN/attachee" 3 >"$WORK/att.out" &
		apid=$!
		sleep 1
		t0=$(date +%s%N)
		"$RHEA" attach -q -o "$WORK/att.rhea" -d 1s "$apid" 2>>"$LOG"
		t1=$(date +%s%N)
		wait "$apid"
		dur=$("$RHEA" report --json "$WORK/att.rhea" 2>>"$LOG" |
			awk -F'[:,]' '/"duration_ns":/ { print $2; exit }')
		printf '%s\t%s\t%s\t%s\t%s\n' "$(awk '{ print $2 }' "$WORK/att.bare")" \
			"$(awk '{ print $2 }' "$WORK/att.out")" "$(awk '{ print $4 }' "$WORK/att.out")" \
			"$((t1 - t0))" "${dur:-0}" >>"$WORK/attach.tsv"
		rm -f "$WORK/att.rhea" "$WORK/att.rhea.old"
		r=$((r + 1))
	done
fi

END=$(date +%s)
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# Symbolization of real programs: the recordings of the workloads' last
# rounds (an executable, libc, and for sqlite3 and redis-server their
# stripped Debian binaries and libraries), converted to pprof.
if want convert; then
	for wl in w1 w2 w3 w4 redis; do
		for rec in "$WORK"/out/"$wl"-*-rhea/rec.rhea; do
			[ -s "$rec" ] || continue
			rm -f "$WORK/res" "$WORK/conv.out" # runstat appends
			"$RUNSTAT" -q -t "$TIMEOUT" -o "$WORK/res" -- "$RHEA" convert --timing -q -f pprof \
				-o "$WORK/conv.out" "$rec" 2>"$WORK/conv.err" || continue
			conv_row "pprof:$wl" 1
			break
		done
	done
fi

# ---- 3. the report ---------------------------------------------------------
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
mkdir -p bench/results
TXT=bench/results/$STAMP.txt
TSV=bench/results/$STAMP.tsv
REPORT=$WORK/report.txt
. bench/report.sh >"$REPORT"
cp "$REPORT" "$TXT"
{
	printf 'workload\tconfig\ttool\tbaseline\tround\twall_ns\tuser_ns\tsys_ns\tmaxrss_kb\tstatus\toutput_bytes\textra\n'
	cat "$RAW"
} >"$TSV"
cat "$REPORT"
say "bench: written $TXT and $TSV ($((END - START)) s)"
