#!/usr/bin/env python3
"""The timer sweep's table (scripts/timer-sweep.sh), from timer_check.py's JSON: one row a case,
with kbench's events, kbench's CUPTI profiler and Nsight Compute, and the verdict.

The target, max(2%, 0.5 µs) of ncu, is stated for runs of one kernel. A run of several kernels
is timed by ncu one kernel at a time, each with the caches flushed and nothing before it, so
ncu's sum is an upper bound of a run's kernels that leaves out the gaps between them: those rows
are marked `multi` and judged against kbench's CUPTI activity span of the same runs instead (the
events of the runs CUPTI traced, where kbench records them apart from its untraced samples), as
are the cases timed with `--reference cupti-span`, which ncu did not run."""
import json
import sys

from timer_check import within_target


def us(s):
    return "-" if s is None else (f"{s * 1e6:.2f} µs" if s < 1e-3 else f"{s * 1e3:.3f} ms")


def within(a, b):
    return a is not None and b is not None and within_target(a, b)


def main(paths):
    rows = [r for p in paths for r in json.load(open(p))]
    print("| case | launches a run | kbench events | kbench profiler | Nsight Compute | events / ncu | verdict |")
    print("|---|---|---|---|---|---|---|")
    single = agree = multi = multi_agree = 0
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        case = f"{r['variant']} {params}"
        launches = r.get("launches_per_run", 1)
        ncu = r["ncu_median_s"]
        ratio = "-" if ncu is None else f"{r['kbench_median_s'] / ncu:.3f}"
        if launches == 1:
            single += 1
            ok = within(r["kbench_median_s"], ncu)
            agree += ok
            verdict = "within" if ok else f"OFF by {100 * (r['kbench_median_s'] / ncu - 1):+.1f}%"
        else:
            # Judged against CUPTI's span: the events of the same (traced) runs where kbench
            # recorded them apart, else its samples' (files from before it did).
            multi += 1
            span = r.get("cupti_median_s")
            traced = r.get("traced_events_median_s")
            if r.get("reference") == "cupti_span":
                # timer_check.py judged it (the traced runs' events, none if there were none).
                ok = r["within_target"]
            else:
                ok = within(traced or r["kbench_median_s"], span)
            multi_agree += ok
            timed = f"traced runs {us(traced)}" if traced else f"samples {us(r['kbench_median_s'])}"
            verdict = "multi, " + ("within" if ok else "OFF") + f" the CUPTI span {us(span)}, {timed}"
            if r.get("reference") == "cupti_span":
                verdict += " (no ncu: the host relaunches until done)"
        launches_text = "varies" if launches is None else str(launches)
        print(f"| {case} | {launches_text} | {us(r['kbench_median_s'])} | {us(r.get('profiler_median_s'))} | "
              f"{us(ncu)} | {ratio} | {verdict} |")
    print(f"\n{agree} of {single} single-kernel cases within max(2%, 0.5 µs) of Nsight Compute; "
          f"{multi_agree} of {multi} cases of several launches a run within it of CUPTI's span.")


if __name__ == "__main__":
    main(sys.argv[1:])
