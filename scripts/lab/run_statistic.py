#!/usr/bin/env python3
"""Which per-run statistic spreads least from run to run? For each case of a set of results files
(runs of one study), the run-to-run spread (standard deviation of the log statistic over runs,
as exp(sd) - 1) of the median, the mean, the interquartile mean and the Hodges-Lehmann estimate.

    python3 scripts/lab/run_statistic.py FILE.json...   [--group-copies]

--group-copies: variants named NAME_1 .. NAME_4 (scripts/lab/gate_noise.toml) are the same kernel;
each copy in each file counts as one run of NAME.
"""
import json, math, re, statistics, sys
from collections import defaultdict

def iqm(s):
    s = sorted(s); n = len(s); lo, hi = n // 4, n - n // 4
    return statistics.fmean(s[lo:hi])

def hodges_lehmann(s):
    s = sorted(s); n = len(s)
    # the median of the pairwise (Walsh) averages; subsample large runs evenly
    if n > 120:
        s = [s[int(i * (n - 1) / 119)] for i in range(120)]; n = 120
    return statistics.median((s[i] + s[j]) / 2 for i in range(n) for j in range(i, n))

STATS = {"median": statistics.median, "mean": statistics.fmean, "iqm": iqm, "hl": hodges_lehmann}

def bimodal(s):
    """even/odd alternation, or two modes > 3% apart each holding >= 20%."""
    lo, hi = min(s), max(s)
    srt = sorted(s)
    gaps = [(srt[i + 1] - srt[i], i) for i in range(len(srt) - 1)]
    gap, i = max(gaps)
    frac = (i + 1) / len(srt)
    two = gap / statistics.median(s) > 0.03 and 0.2 <= frac <= 0.8
    return two

def main():
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    group = "--group-copies" in sys.argv
    runs = defaultdict(list)  # case -> [samples per run]
    for f in files:
        d = json.load(open(f))
        for c in d["cases"]:
            m = c.get("measurement") or {}
            s = m.get("samples_s") or []
            if c["status"] != "passed" or len(s) < 4:
                continue
            v = c["variant"]
            if group and v.rsplit("_", 1)[-1].isdigit():
                v = v.rsplit("_", 1)[0]
            params = " ".join(f"{k}={c['params'][k]}" for k in sorted(c["params"]))
            runs[(v, params)].append(s)
    print(f"{'case':44} {'runs':>4} {'bimodal':>7} " + " ".join(f"{k:>7}" for k in STATS))
    totals = defaultdict(list)
    for key, rs in sorted(runs.items()):
        if len(rs) < 2:
            continue
        spreads = {}
        for name, f in STATS.items():
            logs = [math.log(f(s)) for s in rs]
            spreads[name] = math.exp(statistics.stdev(logs)) - 1
            totals[name].append(spreads[name])
        bi = sum(bimodal(s) for s in rs)
        print(f"{key[0] + ' ' + key[1]:44} {len(rs):>4} {bi:>4}/{len(rs):<2} " +
              " ".join(f"{100 * spreads[k]:6.2f}%" for k in STATS))
    groups = defaultdict(lambda: defaultdict(list))
    for key, rs in sorted(runs.items()):
        if len(rs) < 2:
            continue
        v, params = key
        n = re.search(r"n=(\d+)", params).group(1)
        kind = ("cpu" if v.startswith("cpu") else "program" if v.endswith("_program")
                else "gpu fast" if v.startswith("fast") else "gpu multi-kernel") + f" n={n}"
        for name, f in STATS.items():
            logs = [math.log(f(s)) for s in rs]
            groups[kind][name].append(math.exp(statistics.stdev(logs)) - 1)
    print("median spread by kind of case:")
    for kind, by in sorted(groups.items()):
        print(f"  {kind:28} ({len(by['median'])} cases) " + ", ".join(
            f"{k} {100 * statistics.median(v):.2f}%" for k, v in by.items()))
    print("median over cases: " + ", ".join(f"{k} {100 * statistics.median(v):.2f}%" for k, v in totals.items()))

main()
