#!/usr/bin/python3
"""
Cross-check rhea's sampler against perf on a real CPU-bound program nobody
here wrote (Debian's python3 running tests/crosscheck/workload.py).

Both profile the same workload, in separate runs: perf at 999 Hz on the
cpu-clock event, rhea's sampler every 4 ms of CPU (the scheduler tick: a
shorter period coalesces; each sample is weighted by the periods it stands
for), so that both have enough samples for a 5-point tolerance (rhea's
~700 samples give a standard error near 1.5 points at a 20% share).  For each of perf's 10 most sampled user-space
functions that have a symbol (stripped code is per address in perf and not
comparable), its share of user-space samples in perf and its self share in
rhea's CPU profile must be within 5 percentage points.

Prints "ok ..." / "FAIL ..." lines and "crosscheck: N passed, M failed";
skips (passes, saying so) when perf cannot record here.
"""
import json, os, re, subprocess, sys, tempfile

root = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
rhea = os.path.join(root, "rhea")
work = os.path.join(root, "tests", "crosscheck", "workload.py")
py = "/usr/bin/python3"
scale = os.environ.get("CROSSCHECK_SCALE", "30")
TOL = 5.0

def perf_shares(tmp):
    data = os.path.join(tmp, "perf.data")
    r = subprocess.run(["perf", "record", "-q", "-F", "999", "-e", "cpu-clock", "-o", data,
                        "--", py, work, scale], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1:] or ["perf failed"]
    r = subprocess.run(["perf", "report", "-i", data, "--sort", "sym", "--no-children",
                        "--stdio", "-F", "overhead,sym"], capture_output=True, text=True, timeout=300)
    shares, user_total = {}, 0.0
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(.*\S)", line)
        if not m:
            continue
        pct, space, sym = float(m.group(1)), m.group(2), m.group(3)
        if space != ".":
            continue
        user_total += pct
        shares[sym] = shares.get(sym, 0.0) + pct
    if user_total <= 0:
        return None, ["perf recorded no user-space samples"]
    return {k: 100.0 * v / user_total for k, v in shares.items()}, None

def rhea_shares(tmp):
    out = os.path.join(tmp, "x.rhea")
    r = subprocess.run([rhea, "record", "-q", "--sample", "4ms", "-o", out, "--", py, work, scale],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit("rhea record failed: " + r.stderr)
    rep = json.loads(subprocess.run([rhea, "report", "--json", out], capture_output=True,
                                    text=True, timeout=300, check=True).stdout)
    cp = rep["cpu_profile"]
    total = cp["samples"]
    return {f["name"]: 100.0 * f["self"] / total for f in cp["functions"]}, total

def pooled(a, b):
    """The mean share per function of two runs (0 where a run lacks it)."""
    return {k: (a.get(k, 0.0) + b.get(k, 0.0)) / 2 for k in set(a) | set(b)}


def judge(perf, mine, quiet):
    """The 10 most sampled named functions of perf against rhea: the
    failures, printing each line unless quiet."""
    named = [(s, p) for s, p in sorted(perf.items(), key=lambda kv: -kv[1])
             if not re.match(r"0x[0-9a-f]+$", s)][:10]
    lines = []
    for sym, p in named:
        # perf may name a libc variant (__memcmp_evex_movbe) as rhea does.
        q = mine.get(sym, 0.0)
        ok = abs(p - q) <= TOL
        lines.append((ok, "%s crosscheck %-40s perf %5.1f%%  rhea %5.1f%%  (within %.0f points)" %
                      ("ok" if ok else "FAIL", sym[:40], p, q, TOL)))
    if not quiet:
        for _, l in lines:
            print(l)
    return lines


def main():
    with tempfile.TemporaryDirectory() as tmp:
        perf, why = perf_shares(tmp)
        if perf is None:
            print("ok crosscheck-perf (skipped: %s)" % "; ".join(why))
            print("crosscheck: 1 passed, 0 failed")
            return 0
        mine, periods = rhea_shares(tmp)
        lines = judge(perf, mine, quiet=True)
        if all(ok for ok, _ in lines):
            print("# rhea: %d sampling periods; perf user-space shares vs rhea self shares:" % periods)
        else:
            # Both profiles of one run each move by a few points on this
            # shared machine (rhea's share of the interpreter loop: 35 to
            # 44% over 9 runs, perf's 36 to 40%).  Before failing, a second
            # pair of runs, judged on the means of the two: a real bias
            # stays, a noisy run is halved.
            print("# first runs: %s; judged on the means of two runs each" %
                  "; ".join(l.split(" crosscheck ")[1].strip() for ok, l in lines if not ok))
            perf2, why = perf_shares(tmp)
            if perf2 is None:
                raise SystemExit("perf failed on its second run: " + "; ".join(why))
            mine2, periods2 = rhea_shares(tmp)
            perf, mine = pooled(perf, perf2), pooled(mine, mine2)
            print("# rhea: %d + %d sampling periods; perf user-space shares vs rhea self shares (means):"
                  % (periods, periods2))
        lines = judge(perf, mine, quiet=False)
    passed = sum(ok for ok, _ in lines)
    failed = len(lines) - passed
    print("crosscheck: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0

sys.exit(main())
