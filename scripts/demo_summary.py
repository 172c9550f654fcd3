#!/usr/bin/env python3
"""Summarises `kbench compare --json` output for the regression demos, by kind of case.

usage: demo_summary.py COMPARE_JSON NEW_RESULTS_JSON
Prints one line per kind (CPU, GPU program scope, GPU kernel scope by n) with the verdict
counts, the GPU kernel cases of 5 us or more judged `same`, and the detectable changes of the
undecided cases (min..max), then the cases called slower.
"""
import json
import sys
from collections import Counter, defaultdict


def main():
    compared = json.load(open(sys.argv[1]))
    new = json.load(open(sys.argv[2]))
    kind_of = {}
    for case in new["cases"]:
        params = " ".join(f"{k}={v}" for k, v in sorted(case["params"].items()))
        if case["backend"] == "cpu":
            kind = "CPU"
        elif case.get("scope") in ("program", "transfers"):
            kind = f"GPU {case['scope']} scope"
        else:
            kind = f"GPU kernel scope n={case['params'].get('n', '?')}"
        kind_of[(case["variant"], params)] = kind
    counts = defaultdict(Counter)
    detectable = defaultdict(list)
    long_kernels = Counter()
    slower = []
    for c in compared["cases"]:
        kind = kind_of.get((c["variant"], c["params"]), "other")
        counts[kind][c["verdict"]] += 1
        if c.get("detectable_change") is not None:
            detectable[kind].append(c["detectable_change"])
        if kind.startswith("GPU kernel") and (c.get("base_median_s") or 0) >= 5e-6:
            long_kernels["all"] += 1
            long_kernels["same"] += c["verdict"] == "same"
            long_kernels["undecided without detectable change"] += (
                c["verdict"] == "inconclusive" and c.get("detectable_change") is None
            )
        if c["verdict"] == "slower":
            slower.append(f"  SLOWER {c['variant']} {c['params']}: {100 * (c['ratio'] - 1):+.1f}%")
    for kind in sorted(counts):
        d = detectable[kind]
        extra = f"; detectable {100 * min(d):.0f}%..{100 * max(d):.0f}%" if d else ""
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(counts[kind].items()))
        print(f"  {kind}: {verdicts}{extra}")
    print(
        f"  GPU kernel cases of 5 us or more: {long_kernels['same']} of {long_kernels['all']} same"
        f" ({long_kernels['undecided without detectable change']} undecided without a detectable change)"
    )
    load = compared.get("load")
    if load:
        print(
            f"  host load: others kept {load['new_other_busy_cpus']:.2f} CPUs busy"
            f" (baselines at most {load['baseline_max_other_busy_cpus']:.2f}); loaded: {load['loaded']}"
        )
    print("\n".join(slower) if slower else "  no case slower")


if __name__ == "__main__":
    main()
