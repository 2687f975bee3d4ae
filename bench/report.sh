# bench/report.sh - the text report of bench/run.sh, sourced by it once all
# measurements are in (reads $RAW, $RSTATS, $HL, $WORK/micro.out,
# $NOTES and the variables run.sh set; prints the report on stdout).
#
# Conventions: CPU = user + system time of the whole process tree (the
# program and the tool's own processes: `rhea record`, perf, heaptrack's
# compressor); "x" columns are medians of per-round ratios to the baseline
# run of the same round (bare, or bare-fp for rhea-fp); RSS is the peak of
# the largest process of the tree; output is the bytes the tool wrote.

# awk helpers shared by the summaries: median of a[1..n] (sorts a), the
# 95 % confidence interval of a median (ci).
AWK_MEDIAN='
function median(a, n,    i, j, v) {
	for (i = 2; i <= n; i++) {
		v = a[i]
		for (j = i - 1; j >= 1 && a[j] > v; j--)
			a[j + 1] = a[j]
		a[j + 1] = v
	}
	if (n == 0) return -1
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function medof(A, f, m,    a, k) { # median of A[f, 1..m]
	for (k = 1; k <= m; k++)
		a[k] = A[f, k]
	return median(a, m)
}
# 95 % confidence interval of the median of a[1..n] (sorts a), free of any
# assumption on the distribution: the order statistics a[k] and
# a[n + 1 - k], with k the largest such that P(B <= k - 1) <= 2.5 % for
# B ~ Binomial(n, 1/2) (the number of values below the true median).
# Sets clo, chi and cov, their coverage: 1 - 2 P(B <= k - 1), at least
# 95 % from n = 6 on; below that no pair reaches 95 % and the interval is
# the whole range (n = 5: 93.8 %, n = 3: 75 %).
function ci(a, n,    k, pmf, cum, nxt) {
	median(a, n)
	if (n == 0) { clo = chi = -1; cov = 0; return }
	k = 1; pmf = 0.5 ^ n; cum = pmf
	while (k + 1 <= (n + 1) / 2) {
		nxt = pmf * (n - k + 1) / k
		if (cum + nxt > 0.025) break
		cum += nxt; pmf = nxt; k++
	}
	clo = a[k]; chi = a[n + 1 - k]; cov = 1 - 2 * cum
	cik[n] = k; cicov[n] = cov
}
function human(b) {
	if (b < 0) return "-"
	if (b < 10240) return sprintf("%d B", b)
	if (b < 10485760) return sprintf("%.0f KB", b / 1024)
	return sprintf("%.1f MB", b / 1048576)
}'

echo "rhea benchmarks, $STAMP"
echo
echo "machine:  $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)," \
	"$(awk '/^MemTotal/ { printf "%.0f GB RAM", $2 / 1048576 }' /proc/meminfo)"
echo "kernel:   $(uname -sr); clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo ?)"
echo "rhea:     commit $COMMIT"
echo "tools:    $(perf --version 2>/dev/null | head -1 || echo 'no perf'); heaptrack $(heaptrack --version 2>/dev/null | awk '{ print $2 }'); sqlite3 $(sqlite3 --version 2>/dev/null | awk '{ print $1 }'); redis $(redis-server --version 2>/dev/null | sed -n 's/.*v=\([^ ]*\).*/\1/p'); $($CC --version | head -1)"
echo "run:      QUICK=$QUICK, $ROUNDS rounds interleaved (W2: $W2_ROUNDS, W1 at 16 threads, long: $W1L_ROUNDS), $((END - START)) s; load average $LOAD0 at start, $LOAD1 at end"
echo

if [ -s "${HL:-/nonexistent}" ]; then
	echo "== Hook fast path (bench/hookloop.c, ns per iteration, median of $ROUNDS runs x $HOOK_R reps)"
	echo "   fast = rhea record --interval 10s --sample 0 (hooks, no capture); default = rhea record"
	echo "   per call = (t_with - t_bare) / hooked calls per iteration, median of per-round differences;"
	echo "   every run has an idle thread (glibc's wrappers then cost the same bare as under the agent)"
	awk -v work="$WORK" "$AWK_MEDIAN"'
	BEGIN { FS = "\t" }
	{ v = $1; l = $2; k[v, l, ++cnt[v, l]] = $3; calls[l] = $4
	  if (!(l in seen)) { seen[l] = 1; order[++nl] = l } }
	END {
		printf "   %-12s %8s %8s %9s | %9s %11s\n", "loop", "bare", "fast", "default", "fast/call", "default/call"
		for (i = 1; i <= nl; i++) {
			l = order[i]
			for (vi = 1; vi <= 3; vi++) {
				v = vi == 1 ? "bare" : vi == 2 ? "fast" : "default"
				n = 0; for (r = 1; r <= cnt[v, l]; r++) a[++n] = k[v, l, r]
				med[v] = median(a, n)
				if (v != "bare") {
					n = 0
					for (r = 1; r <= cnt[v, l] && r <= cnt["bare", l]; r++)
						a[++n] = (k[v, l, r] - k["bare", l, r]) / calls[l]
					d[v] = median(a, n)
				}
			}
			printf "   %-12s %8.2f %8.2f %9.2f | %9.2f %11.2f\n", l, med["bare"], med["fast"], med["default"], d["fast"], d["default"]
			print l, d["fast"], d["default"] > (work "/hook_deltas.txt")
		}
	}' "$HL"
	echo
fi

if [ -s "$WORK/micro.out" ]; then
	echo "== Capture cost, stack table, emit (bench/micro.c, agent objects outside the agent)"
	sed 's/^/   /' "$WORK/micro.out"
	echo
fi

if [ -s "${CONV:-/nonexistent}" ]; then
	echo "== Conversion and symbolization (rhea convert --timing of a synthetic recording,"
	echo "   bench/convert_gen.c: 8 threads, the generator's own functions as symbols;"
	echo "   medians of $ROUNDS runs per format, interleaved)"
	awk -v work="$WORK" "$AWK_MEDIAN"'
	BEGIN { FS = "\t" }
	{ f = $1; if (!(f in n)) order[++nf] = f; k = ++n[f]
	  L[f, k] = $3; S[f, k] = $4; C[f, k] = $5; REC[f] = $6; NODES[f] = $7
	  CPU[f, k] = ($9 + $10) / 1e9; RSS[f, k] = $11 / 1024; OUT[f, k] = $12
	  RPS[f, k] = ($3 + $5) > 0 ? $6 / ($3 + $5) : 0; NPS[f, k] = $4 > 0 ? $7 / $4 : 0 }
	END {
		printf "   %-9s %9s %8s %8s %8s %12s %14s %7s %7s %9s\n", "format", "records", "load s", "symb. s",
		       "conv. s", "records/s", "nodes symb./s", "CPU s", "RSS MB", "output"
		for (i = 1; i <= nf; i++) {
			f = order[i]
			m = n[f]
			l = medof(L, f, m); sy = medof(S, f, m); c = medof(C, f, m); rps = medof(RPS, f, m)
			nps = medof(NPS, f, m); cpu = medof(CPU, f, m); rss = medof(RSS, f, m); out = medof(OUT, f, m)
			printf "   %-9s %9d %8.3f %8.3f %8.3f %12.0f %14.0f %7.3f %7.1f %9s\n", f, REC[f], l, sy, c, rps,
			       nps, cpu, rss, human(out)
			if (f == "perfetto") print rps / 1e6 > (work "/convert_rps.txt")
		}
		print "   records/s = records / (load + convert), symbolization excluded; nodes symb./s ="
		print "   the recording'"'"'s stack nodes / symbolization time (libdwfl: symbols, lines, inlines);"
		print "   pprof:WL = the recording of workload WL'"'"'s last round (real binaries and libraries), once"
	}' "$CONV"
	echo
fi

if [ -s "$WORK/attach.tsv" ]; then
	echo "== rhea attach -d 1s on a running loop (bench/attachee.c: one thread, a 200 us sleep"
	echo "   an iteration; medians of $ROUNDS rounds, each with a bare run of its own)"
	awk "$AWK_MEDIAN"'
	BEGIN { FS = "\t" }
	{ k = ++n; B[1, k] = $1 / 1000; A[1, k] = $2 / 1000; S[1, k] = $3; W[1, k] = $4 / 1e9; D[1, k] = $5 / 1e9 }
	END {
		printf "   longest iteration: %.1f ms bare, %.1f ms while attached (the thread stood still\n", \
		       medof(B, 1, n), medof(A, 1, n)
		printf "   for the ptrace stop, the agent'"'"'s load and start and the detach); %.0f over 5 ms\n", \
		       medof(S, 1, n)
		printf "   rhea attach took %.3f s; the recording lasts %.3f s\n", medof(W, 1, n), medof(D, 1, n)
	}' "$WORK/attach.tsv"
	echo
fi

if [ -s "$RAW" ]; then
	echo "== Whole-program overhead (medians; x = ratio to the bare run of the same round;"
	echo "   x* = the same with each tool's fixed start-up cost, measured by W0 on the same"
	echo "   modules, taken out: the steady-state overhead of a longer run)"
	awk -v work="$WORK" "$AWK_MEDIAN"'
	BEGIN { FS = "\t" }
	FILENAME == ARGV[1] { st[$1, $2, $3] = $4 "\t" $5; next }
	{
		wl = $1; cfg = $2; tool = $3; base = $4; r = $5
		key = wl SUBSEP cfg SUBSEP tool
		if (!(key in seen)) {
			seen[key] = 1; order[++nk] = key; bases[key] = base
			# rows in a fixed order whatever order the rounds ran in:
			# workloads as they came, tools as listed here
			if (!((wl, cfg) in group)) group[wl, cfg] = ++ngroups
			rank = index(" bare bare-fp rhea rhea-fp rhea-sync rhea-all perf-g perf-dwarf heaptrack gperf ", " " tool " ")
			sortkey[key] = group[wl, cfg] * 1000 + (rank ? rank : 999)
		}
		ok = ($10 == "0")
		if (!ok) fails[key]++
		nr[key]++
		CPU[key, r] = ($7 + $8) / 1e9; WALL[key, r] = $6 / 1e9; RSS[key, r] = $9 / 1024
		OUT[key, r] = $11; OK[key, r] = ok
		if ($12 ~ /^rps=/) RPS[key, r] = substr($12, 5) + 0
		rounds[key, nr[key]] = r
	}
	# medians of the successful runs of key: mc (CPU), mw (wall)
	function meds(key,    j, r, n, m, a, b) {
		n = m = 0
		for (j = 1; j <= nr[key]; j++) {
			r = rounds[key, j]
			if (OK[key, r]) { a[++n] = CPU[key, r]; b[++m] = WALL[key, r] }
		}
		mc = median(a, n); mw = median(b, m)
		return n
	}
	# fixed start-up cost of tool for workload wl, from W0 (sets fc, fw)
	function fixed(wl, tool,    set, t) {
		fc = fw = 0
		set = wl == "w4" ? "sqlite3" : wl == "redis" ? "redis" : "empty"
		t = tool ~ /^rhea/ ? "rhea" : tool ~ /^bare/ ? "bare" : tool
		if (wl == "w0" || !(("w0" SUBSEP set SUBSEP t) in seen) || !(("w0" SUBSEP set SUBSEP "bare") in seen)) return 0
		if (!meds("w0" SUBSEP set SUBSEP "bare")) return 0
		bc = mc; bw = mw
		if (!meds("w0" SUBSEP set SUBSEP t)) return 0
		fc = mc - bc; fw = mw - bw
		return 1
	}
	function num(x) { return sprintf(x < 10 ? "%.3f" : x < 100 ? "%.2f" : "%.0f", x) }
	function cistr(lo, hi) { return num(lo) ".." num(hi) }
	END {
		fmt = "   %-5s %-10s %-10s %7s %6s %12s %6s %7s %6s %12s %6s %6s %9s %7s %5s %s\n"
		printf fmt, "wl", "config", "tool", "CPU s", "x", "95% CI", "x*", "wall s", "x", "95% CI", "x*", "RSS MB", "output", "samples", "drop", "note"
		for (i = 2; i <= nk; i++) { # insertion sort by sortkey
			v = order[i]
			for (j = i - 1; j >= 1 && sortkey[order[j]] > sortkey[v]; j--)
				order[j + 1] = order[j]
			order[j + 1] = v
		}
		prev = ""
		for (i = 1; i <= nk; i++) {
			key = order[i]; split(key, p, SUBSEP)
			if (p[1] SUBSEP p[2] != prev && prev != "") print ""
			prev = p[1] SUBSEP p[2]
			bkey = p[1] SUBSEP p[2] SUBSEP bases[key]
			n1 = n2 = n3 = n4 = n5 = n6 = n7 = n8 = n9 = n10 = 0
			# steady state, per round: (run - fixed cost of the tool) / bare run
			hasfix = p[1] != "w0" && fixed(p[1], p[3])
			for (j = 1; j <= nr[key]; j++) {
				r = rounds[key, j]
				if (!OK[key, r]) continue
				c1[++n1] = CPU[key, r]; w1[++n2] = WALL[key, r]; m1[++n3] = RSS[key, r]; o1[++n4] = OUT[key, r]
				if (((bkey, r) in OK) && OK[bkey, r] && CPU[bkey, r] > 0 && WALL[bkey, r] > 0) {
					cr[++n5] = CPU[key, r] / CPU[bkey, r]
					wr[++n6] = WALL[key, r] / WALL[bkey, r]
					if (hasfix) {
						xs[++n9] = (CPU[key, r] - fc) / CPU[bkey, r]
						xw[++n10] = (WALL[key, r] - fw) / WALL[bkey, r]
					}
				}
				if ((key, r) in RPS) {
					rp[++n7] = RPS[key, r]
					if (((bkey, r) in RPS) && RPS[bkey, r] > 0) rr[++n8] = RPS[key, r] / RPS[bkey, r]
				}
			}
			note = ""
			if (fails[key]) note = note sprintf("%d/%d runs failed ", fails[key], nr[key])
			if (n7) note = note sprintf("%.0f req/s", median(rp, n7)) (n8 ? sprintf(" (x%.3f)", median(rr, n8)) : "")
			if (n1 == 0) {
				printf fmt, p[1], p[2], p[3], "-", "-", "", "-", "-", "-", "", "-", "-", "-", "", "", note
				continue
			}
			cm = median(c1, n1); wm = median(w1, n2); mm = median(m1, n3); om = median(o1, n4)
			crm = wrm = crlo = crhi = wrlo = wrhi = -1
			if (n5) { crm = median(cr, n5); ci(cr, n5); crlo = clo; crhi = chi; ncov = cov }
			if (n6) { wrm = median(wr, n6); ci(wr, n6); wrlo = clo; wrhi = chi }
			cs = ws = "-"; csv = wsv = cslo = cshi = wslo = wshi = -1
			if (n9) {
				csv = median(xs, n9); ci(xs, n9); cslo = clo; cshi = chi
				wsv = median(xw, n10); ci(xw, n10); wslo = clo; wshi = chi
				cs = sprintf("%.3f", csv); ws = sprintf("%.3f", wsv)
			}
			if (p[1] == "w0" && p[3] !~ /^bare/ && meds(bkey))
				note = note sprintf("fixed cost: %+.0f ms CPU, %+.0f ms wall", (cm - mc) * 1000, (wm - mw) * 1000)
			split((key in st) ? st[key] : "\t", s, "\t")
			self = p[3] == bases[key]
			printf fmt, p[1], p[2], p[3], sprintf("%.3f", cm), sprintf("%.3f", crm),
				(self || n5 < 2 ? "-" : cistr(crlo, crhi)), cs, sprintf("%.3f", wm), sprintf("%.3f", wrm),
				(self || n6 < 2 ? "-" : cistr(wrlo, wrhi)), ws, sprintf("%.1f", mm),
				(p[3] ~ /^bare/ ? "-" : human(om)), s[1], s[2], note
			print p[1], p[2], p[3], cm, crm, wm, wrm, mm, om, (n8 ? median(rr, n8) : -1), csv, wsv,
				crlo, crhi, wrlo, wrhi, cslo, cshi, wslo, wshi, n5, (n5 ? ncov : 0) > (work "/summary.txt")
		}
		for (n = 2; n <= 1000; n++)
			if (n in cik)
				printf "%d %d %.4f\n", n, cik[n], cicov[n] > (work "/ci_cover.txt")
	}' "$RSTATS" "$RAW"
	echo
	echo "   x = median of the per-round ratios to the bare run of the same round; 95% CI = a"
	echo "   95 % confidence interval of that median, distribution-free: two order statistics of"
	echo "   the per-round ratios chosen with the binomial distribution (no bootstrap, nothing random)."
	echo "   x* is the median of (run - fixed cost) / bare run, per round.  Rounds and coverage:"
	if [ -s "$WORK/ci_cover.txt" ]; then
		awk '{ printf "     %2d rounds: ratios number %d and %d of %d in order, covers the median with %.1f %%%s\n",
			$1, $2, $1 + 1 - $2, $1, $3 * 100, $3 < 0.95 ? " (below 95 %: too few rounds)" : "" }' "$WORK/ci_cover.txt"
	fi
	echo
fi

# W5, a mostly idle server: what matters is each tool's extra CPU in absolute
# terms, per second of the program's run (a ratio to a bare CPU time of a few
# ms a second says little).  Per round: (CPU_tool - CPU_bare) / wall_bare,
# in ms of CPU per second; "start-up excl." subtracts the tool's fixed cost
# from W0 (the median CPU of its empty run minus bare's; rhea-sync uses
# rhea's), as x* does.  Medians of the rounds with the CI of the table.
# Writes $WORK/w5.txt (rhea's numbers) for the Targets.
if [ -s "$RAW" ] && awk -F'\t' '$1 == "w5" { f = 1 } END { exit !f }' "$RAW"; then
	echo "== W5 idle server (bench/w5_idle.c: a ~20 us request every 10 ms, asleep in between):"
	echo "   each tool's extra CPU in ms per second of run = (CPU_tool - CPU_bare) / wall_bare of the"
	echo "   same round, median and 95% CI over the rounds; start-up excl. = the tool's fixed"
	echo "   start-up cost (W0, empty) taken out first: what a long-running idle server pays"
	awk -v work="$WORK" "$AWK_MEDIAN"'
	BEGIN { FS = "\t" }
	FILENAME == ARGV[1] { split($0, f, " "); if (f[1] == "w0" && f[2] == "empty") w0cpu[f[3]] = f[4]; next }
	$1 == "w5" && $10 == "0" {
		cfg = $2; t = $3; r = $5
		if (!(t in seen)) { # in the order of the table, whatever order the rounds ran in
			seen[t] = 1
			rank = index(" bare bare-fp rhea rhea-fp rhea-sync rhea-all perf-g perf-dwarf heaptrack gperf ", " " t " ")
			for (j = ++nt; j > 1 && rk[order[j - 1]] > rank; j--) order[j] = order[j - 1]
			order[j] = t; rk[t] = rank
		}
		CPU[t, r] = ($7 + $8) / 1e9; WALL[t, r] = $6 / 1e9; HAS[t, r] = 1
		if (r > maxr) maxr = r
	}
	END {
		n = 0
		for (r = 1; r <= maxr; r++)
			if (HAS["bare", r] && WALL["bare", r] > 0) a[++n] = CPU["bare", r] / WALL["bare", r] * 1000
		if (n == 0) { print "   no successful bare run"; exit }
		bare = median(a, n)
		printf "   %s, %d rounds: bare %.2f ms of CPU per second of run (the program itself)\n", cfg, n, bare
		printf "   %-10s %10s %14s   %14s %14s   %s\n", "tool", "extra ms/s", "95% CI",
			"start-up excl.", "95% CI", "start-up (W0)"
		for (i = 1; i <= nt; i++) {
			t = order[i]
			if (t == "bare") continue
			ft = t ~ /^rhea/ ? "rhea" : t
			hasfc = (ft in w0cpu) && ("bare" in w0cpu)
			fc = hasfc ? w0cpu[ft] - w0cpu["bare"] : 0
			n1 = n2 = 0
			for (r = 1; r <= maxr; r++) {
				if (!HAS[t, r] || !HAS["bare", r] || WALL["bare", r] <= 0) continue
				d = CPU[t, r] - CPU["bare", r]
				x[++n1] = d / WALL["bare", r] * 1000
				if (hasfc) y[++n2] = (d - fc) / WALL["bare", r] * 1000
			}
			if (n1 == 0) { printf "   %-10s %10s\n", t, "-"; continue }
			xm = median(x, n1); ci(x, n1); xlo = clo; xhi = chi; xcov = cov
			ys = ycis = fcs = "-"
			if (n2) {
				ym = median(y, n2); ci(y, n2)
				ys = sprintf("%.2f", ym); ycis = n2 < 2 ? "-" : sprintf("%.2f..%.2f", clo, chi)
				fcs = sprintf("%+.0f ms CPU", fc * 1000)
			}
			printf "   %-10s %10.2f %14s   %14s %14s   %s\n", t, xm,
				n1 < 2 ? "-" : sprintf("%.2f..%.2f", xlo, xhi), ys, ycis, fcs
			if (t == "rhea")
				print bare, xm, xlo, xhi, (n2 ? ym : "-"), (n2 ? clo : "-"), (n2 ? chi : "-"), n1, xcov > (work "/w5.txt")
			if (n1 > 1 && xcov < 0.95) few = n1
		}
		if (few)
			printf "   (%d rounds: a CI is the range of the rounds, coverage below 95 %%, see above)\n", few
	}' "$([ -s "$WORK/summary.txt" ] && echo "$WORK/summary.txt" || echo /dev/null)" "$RAW"
	echo
fi

# The perf-attributed direct cost (run.sh: attribute_run, bench/attribute.py).
for a in w2 w1 w4; do
	d=$WORK/attr-$a
	[ -s "$d/title.txt" ] || continue
	cat "$d/title.txt"
	if [ -s "$d/report.txt" ]; then
		cat "$d/report.txt"
		# every run, by overhead, with the ticker's mode in it (runs.txt's
		# columns 5-6: perf's slowdown can tip it from ticking to coasting)
		sort -k2,2g "$d/runs.txt" | awk '{ o[NR] = $2; l[NR] = $3; h[NR] = $4; w[NR] = $5; c[NR] = $6 }
			function tk(i) { return w[i] == "" ? "" : sprintf("; ticker %d wake-ups/s, coasting %d %%", w[i], c[i]) }
			END {
				if (NR == 1) {
					if (w[1] != "")
						printf "   (%s)\n", substr(tk(1), 3)
					exit
				}
				printf "   runs (the one above is the median): direct CPU overhead"
				for (i = 1; i <= NR; i++)
					printf "%s %.2f %% (%.2f..%.2f%s)", (i > 1 ? "," : ""), o[i], l[i], h[i], tk(i)
				printf "\n   (each interval is that run'"'"'s sampling error alone; the spread between runs is the machine'"'"'s)\n"
			}'
	else
		echo "   failed: $(tail -n 1 "$d/errors.txt" 2>/dev/null)"
	fi
	echo
done

if [ -s "$RSTATS" ]; then
	echo "== Record encoding (from the recordings of the last round)"
	awk 'BEGIN { FS = "\t"; printf "   %-5s %-10s %-10s %8s %9s %10s %10s %9s %9s %6s\n", "wl", "config", "tool", "samples", "captures", "raw B", "file B", "raw/smp", "file/smp", "zstd x" }
	$4 > 0 { printf "   %-5s %-10s %-10s %8d %9d %10d %10d %9.1f %9.1f %6.2f\n", $1, $2, $3, $4, $6, $7, $8, $7 / $4, $8 / $4, ($8 > 0 ? $7 / $8 : 0) }' "$RSTATS"
	echo "   raw B = bytes of entries before compression (samples, stack nodes, sites, modules, meta);"
	echo "   file B = the .rhea file; per sample = divided by the samples the report counts."
	echo
fi

echo "== Targets"
target() { # target NAME VALUE OP LIMIT UNIT
	awk -v n="$1" -v v="$2" -v op="$3" -v lim="$4" -v u="$5" 'BEGIN {
		if (v == "") { printf "   %-58s %12s   n/a\n", n, "-"; exit }
		pass = op == "<" ? v < lim : op == ">" ? v > lim : v <= lim
		printf "   %-58s %12s   %s (target %s %s%s)\n", n, sprintf("%.2f%s", v, u), pass ? "PASS" : "MISS", op, lim, u }'
}
info() { # info NAME VALUE UNIT: a measurement shown beside the targets
	awk -v n="$1" -v v="$2" -v u="$3" 'BEGIN {
		printf "   %-58s %12s   information, no target\n", n, v == "" ? "-" : sprintf("%.2f%s", v, u) }'
}
sumval() { # sumval WL CFG TOOL FIELD
	[ -s "$WORK/summary.txt" ] || return 0
	awk -v w="$1" -v c="$2" -v t="$3" -v f="$4" '$1 == w && $2 == c && $3 == t { print $f; exit }' "$WORK/summary.txt"
}
# target_ci NAME WL CFG TOOL FIELD LIMIT: an overhead in % (the median ratio in
# FIELD of summary.txt, its CI in the fields that follow, see the END of the
# overhead table) judged on the CI: PASS when the whole CI is under LIMIT,
# MISS when it is all over it, UNDECIDED when it straddles it.
target_ci() {
	[ -s "$WORK/summary.txt" ] || return 0
	awk -v name="$1" -v w="$2" -v c="$3" -v t="$4" -v f="$5" -v lim="$6" '
	$1 == w && $2 == c && $3 == t {
		found = 1; m = $f; n = $21; cov = $22
		if (f == 5) { lo = $13; hi = $14 }
		else if (f == 7) { lo = $15; hi = $16 }
		else if (f == 11) { lo = $17; hi = $18 }
		else { lo = $19; hi = $20 }
		exit
	}
	END {
		if (!found || m < 0 || lo < 0) { printf "   %-58s %12s   n/a\n", name, "-"; exit }
		m = (m - 1) * 100; lo = (lo - 1) * 100; hi = (hi - 1) * 100
		v = n < 2 ? "UNDECIDED" : hi < lim ? "PASS" : lo > lim ? "MISS" : "UNDECIDED"
		k = n < 2 ? ", 1 round" : cov < 0.95 ? sprintf(", %d rounds: coverage %.0f %%", n, cov * 100) : ""
		printf "   %-58s %12s   %s (CI %.2f..%.2f %%%s; target < %s %%)\n", name, sprintf("%.2f %%", m), v,
			lo, hi, k, lim
	}' "$WORK/summary.txt"
}
# at_equal_switches WL CFG TOOL: TOOL's CPU overhead against the bare runs
# at equal context switches.  W2's own CPU time follows its switches (~5
# us each here; its bare runs switch 55k to 125k times, one run to the
# next, as its threads happen to meet on the CPUs), and that regime, not
# the tool, makes most of the spread of its whole-run ratios.  A common
# slope is fitted to each tool's runs (CPU against switches; the switches
# of the tool's own threads included) and the two lines compared at the
# runs' mean switches: the overhead with its 95% interval (1.96 standard
# errors).  Information: a tool that made the program switch more would
# have that cost taken out here, which is why the raw ratio stays the
# target; the tool's mean switches are shown beside it.
at_equal_switches() {
	awk -F'\t' -v w="$1" -v c="$2" -v t="$3" '
	$1 == w && $2 == c && $10 == "0" && $13 ~ /^[0-9]+$/ && ($3 == "bare" || $3 == t) {
		g = $3 == "bare" ? 0 : 1; y = ($7 + $8) / 1e6; x = $13 + 0
		n[g]++; sx[g] += x; sy[g] += y; sxx[g] += x * x; sxy[g] += x * y; syy[g] += y * y
	}
	END {
		name = "W2 defaults: CPU overhead % at equal context switches"
		if (n[0] < 3 || n[1] < 3) { printf "   %-58s %12s   n/a\n", name, "-"; exit }
		for (g = 0; g < 2; g++) {
			mx[g] = sx[g] / n[g]; my[g] = sy[g] / n[g]
			cxx += sxx[g] - n[g] * mx[g] * mx[g]; cxy += sxy[g] - n[g] * mx[g] * my[g]
			cyy += syy[g] - n[g] * my[g] * my[g]
		}
		b = cxx > 0 ? cxy / cxx : 0
		sd = sqrt((cyy - b * cxy) / (n[0] + n[1] - 3))
		X = (sx[0] + sx[1]) / (n[0] + n[1])
		a0 = my[0] + b * (X - mx[0]); a1 = my[1] + b * (X - mx[1])
		se = sd * sqrt(1 / n[0] + 1 / n[1] + (cxx > 0 ? (mx[1] - mx[0]) ^ 2 / cxx : 0))
		d = (a1 / a0 - 1) * 100; h = 1.96 * se / a0 * 100
		printf "   %-58s %12s   information (CI %.2f..%.2f %%; %.1f us a switch, %s and bare %.0fk and %.0fk switches a run, %d and %d runs)\n",
			name, sprintf("%.2f %%", d), d - h, d + h, b * 1000, t, mx[1] / 1000, mx[0] / 1000, n[1], n[0]
	}' "$RAW"
}
# target_attr NAME DIR LIMIT: the perf-attributed direct overhead (the
# median run's), a lower bound of the overhead: MISS when every run's
# sampling interval is over LIMIT, never PASS.
target_attr() {
	[ -s "$2/summary.txt" ] || return 0
	awk -v name="$1" -v lim="$3" '
	FILENAME ~ /summary/ { split($0, kv, "="); v[kv[1]] = kv[2]; next }
	{ n++; if ($3 > lim) over++; if (n == 1 || $2 < rmin) rmin = $2; if (n == 1 || $2 > rmax) rmax = $2 }
	END {
		m = v["overhead_pct"]; lo = v["overhead_lo"]; hi = v["overhead_hi"]
		runs = n > 1 ? sprintf("; %d runs %.2f..%.2f %%", n, rmin, rmax) : ""
		printf "   %-58s %12s   %s (sampling CI %.2f..%.2f %%%s, a lower bound; target < %s %%)\n", name,
			sprintf("%.2f %%", m), ((n ? over == n : lo > lim) ? "MISS" : "UNDECIDED"), lo, hi, runs, lim
	}' "$2/summary.txt" "$2/runs.txt"
}
if [ -s "$WORK/hook_deltas.txt" ]; then
	target "hook fast path, malloc/free, ns per hook call (fast)" \
		"$(awk '$1 == "malloc_free" { print $2 }' "$WORK/hook_deltas.txt")" "<" 5 " ns"
	target "hook fast path, malloc/free, ns per hook call (default)" \
		"$(awk '$1 == "malloc_free" { print $3 }' "$WORK/hook_deltas.txt")" "<" 5 " ns"
	target "uncontended lock+unlock pair, ns (default)" \
		"$(awk '$1 == "mutex" { print $3 * 2 }' "$WORK/hook_deltas.txt")" "<" 10 " ns"
	info "uncontended lock+unlock pair once the program has waited, ns (default)" \
		"$(awk '$1 == "mutex_waited" { print $3 * 2 }' "$WORK/hook_deltas.txt")" " ns"
fi
if [ -s "$WORK/micro.out" ]; then
	target "30-frame CFI unwind (no-fp code), median us" \
		"$(awk '$1 == "cfi" && $2 == "no-fp" && $4 == 30 { print $7 / 1000; exit }' "$WORK/micro.out")" "<" 2 " us"
	target "30-frame CFI unwind + intern (no-fp code), median us" \
		"$(awk '$1 == "cfi" && $2 == "no-fp" && $4 == 30 { print $13 / 1000; exit }' "$WORK/micro.out")" "<" 2 " us"
	target "30-frame CFI unwind, cold caches, median us" \
		"$(awk '$1 == "cfi" && /cold caches/ { print $7 / 1000; exit }' "$WORK/micro.out")" "<" 2 " us"
	target "30-frame CFI unwind + intern, cold caches, median us" \
		"$(awk '$1 == "cfi" && /cold caches/ { print $13 / 1000; exit }' "$WORK/micro.out")" "<" 2 " us"
	target "30-frame CFI unwind + intern, row cache (agent), median us" \
		"$(awk '$1 == "cfi+rc" && $2 == "no-fp" && $4 == 30 { print $13 / 1000; exit }' "$WORK/micro.out")" "<" 2 " us"
	target "30-frame CFI unwind + intern, row cache, cold, median us" \
		"$(awk '$1 == "cfi+rc" && /cold caches/ { print $13 / 1000; exit }' "$WORK/micro.out")" "<" 2 " us"
fi
if [ -s "$WORK/convert_rps.txt" ]; then
	target "rhea convert to Perfetto, M records/s (symbolization excl.)" "$(cat "$WORK/convert_rps.txt")" ">" 1 " M/s"
fi
if [ -s "$WORK/summary.txt" ]; then
	w2cfg=$(awk '$1 == "w2" && $2 !~ /cpu=/ { print $2; exit }' "$WORK/summary.txt")
	w2pin=$(awk '$1 == "w2" && $2 ~ /cpu=1/ { print $2; exit }' "$WORK/summary.txt")
	if [ -n "$w2cfg" ]; then
		target_ci "W2 defaults: CPU overhead % (ideal)" w2 "$w2cfg" rhea 5 3
		target_ci "W2 defaults: CPU overhead % (issue 2, mixed workload)" w2 "$w2cfg" rhea 5 5
		target_ci "W2 defaults: CPU overhead %, start-up excluded (x*)" w2 "$w2cfg" rhea 11 5
		target_ci "W2 defaults: wall overhead %" w2 "$w2cfg" rhea 7 5
		target_attr "W2 defaults: direct CPU overhead % (perf-attributed)" "$WORK/attr-w2" 3
		at_equal_switches w2 "$w2cfg" rhea
		o_r=$(sumval w2 "$w2cfg" rhea 9)
		o_p=$(sumval w2 "$w2cfg" perf-g 9)
		[ -n "$o_r" ] && [ -n "$o_p" ] &&
			target "W2 output: rhea / perf -g perf.data" "$(awk -v a="$o_r" -v b="$o_p" 'BEGIN { print (b > 0 ? a / b : -1) }')" "<=" 0.1 ""
	fi
	if [ -n "$w2pin" ]; then
		target_ci "W2 on one CPU (taskset): CPU overhead %" w2 "$w2pin" rhea 5 3
		target_ci "W2 on one CPU (taskset): wall overhead %" w2 "$w2pin" rhea 7 5
	fi
	w4cfg=$(awk '$1 == "w4" { print $2; exit }' "$WORK/summary.txt")
	if [ -n "$w4cfg" ]; then
		target_ci "W4 sqlite3 defaults: CPU overhead %" w4 "$w4cfg" rhea 5 5
		target_ci "W4 sqlite3 defaults: CPU overhead %, start-up excluded (x*)" w4 "$w4cfg" rhea 11 5
		target_attr "W4 sqlite3 defaults: direct CPU overhead % (perf-attributed)" "$WORK/attr-w4" 5
		o_r=$(sumval w4 "$w4cfg" rhea 9)
		o_p=$(sumval w4 "$w4cfg" perf-g 9)
		[ -n "$o_r" ] && [ -n "$o_p" ] &&
			target "W4 output: rhea / perf -g perf.data (smaller: < 1)" "$(awk -v a="$o_r" -v b="$o_p" 'BEGIN { print (b > 0 ? a / b : -1) }')" "<" 1 ""
	fi
	if awk '$1 == "w1" && $2 == "t=16,long" { f = 1 } END { exit !f }' "$WORK/summary.txt"; then
		target_ci "W1 16 threads, --hooks all: CPU overhead %" w1 "t=16,long" rhea-all 5 10
		target_ci "W1 16 threads, --hooks all: CPU overhead %, start-up excl." w1 "t=16,long" rhea-all 11 10
		target_ci "W1 16 threads, --hooks all: wall overhead %" w1 "t=16,long" rhea-all 7 10
	fi
fi
# W5: information only (no target): rhea's extra CPU per second of an idle
# server's run, start-up excluded when W0 ran (see the W5 block above).
if [ -s "$WORK/w5.txt" ]; then
	awk '{ st = $5 != "-"; v = st ? $5 : $2; lo = st ? $6 : $3; hi = st ? $7 : $4
		printf "   %-58s %12s   information, no target (%sCI %.2f..%.2f%s; %.2f ms/s with start-up)\n",
			sprintf("W5 idle server: rhea'"'"'s extra CPU, ms per second of run (bare %.1f ms/s)", $1),
			sprintf("%.2f ms/s", v), st ? "start-up excl., " : "", lo, hi,
			$8 < 2 ? ", 1 round" : $9 < 0.95 ? sprintf(", %d rounds: coverage %.0f %%", $8, $9 * 100) : "", $2 }' "$WORK/w5.txt"
fi
echo

echo "== Notes"
echo "   - rhea rows include the \`rhea record -q\` process and the agent's start-up (W0 shows"
echo "     that fixed cost alone); samples/dropped are from \`rhea report --json\`."
echo "   - heaptrack runs with -r (record only, as rhea and perf record do: symbolization"
echo "     later); output is its compressed raw trace.  (Its interpreter, heaptrack 1.4's"
echo "     heaptrack_interpret, grew to 18 GB and died with std::bad_alloc on W1 here.)"
echo "   - perf -g walks frame pointers: on the no-fp builds and Debian's binaries its"
echo "     stacks are truncated; perf-dwarf copies 8 KB of stack per sample instead."
echo "   - perf record's exit takes about a second of wall time here whatever the run's"
echo "     length, so its wall x* (start-up removed) can come out below 1: read its"
echo "     wall overhead in W0."
echo "   - The 95% CI columns and the Targets that judge overheads: see under the table.  W2"
echo "     runs more rounds than the rest (W2_ROUNDS, 15; 7 with QUICK=1; here $W2_ROUNDS): its"
echo "     CPU time varies by about +-10 % from run to run here (70 % of it is kernel:"
echo "     switches, socket reads and writes), and pairing adjacent runs does not remove that."
echo "   - \"direct cost (perf-attributed)\": more runs under rhea (defaults; W2: $ATTR_RUNS of ten times"
echo "     the requests at 4 kHz, the median one shown; W4: as many at 2 kHz; W1: one at 2 kHz), profiled by perf"
echo "     record --call-graph dwarf; bench/attribute.py sorts their samples into the agent's"
echo "     (its code on the program's threads, the libraries and the kernel it calls, its"
echo "     signals, its threads, the CLI) and the program's.  It is a lower bound of the"
echo "     overhead: cache, TLB and branch-predictor pollution, extra scheduling and perf's own"
echo "     sampling land on the program's samples.  Being shares of one run, it varies far"
echo "     less than whole-run ratios; a run's interval is its sampling error only, and the"
echo "     runs show what it does not cover (0.2-0.3 points between runs here)."
echo "   - gperf = gperftools' CPU profiler (LD_PRELOAD=libprofiler.so, 1 kHz); it sees CPU"
echo "     time only (no allocations, no blocking)."
echo "   - W5 runs on a fixed schedule (a request every 10 ms for a number of seconds), not a"
echo "     fixed amount of work: its wall x is 1 by construction (perf's exit aside) and its CPU"
echo "     x is large on a small base; its number is the extra ms of CPU per second of run."
echo "   - redis: the server is the traced program; its CPU/wall run from start to"
echo "     shutdown; req/s is the mean of redis-benchmark's SET/GET/LPUSH/LPOP rates."
[ -s "$NOTES" ] && sed 's/^/   - /' "$NOTES"
if [ -s "$LOG" ] && grep -qv -e '^$' -e '^PROFILE: interrupts' "$LOG"; then
	echo "   - stderr of the runs (first lines):"
	grep -v -e '^$' -e '^PROFILE: interrupts' "$LOG" | sort | uniq -c | sort -rn | head -8 | sed 's/^/       /'
fi
