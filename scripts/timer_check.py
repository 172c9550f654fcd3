#!/usr/bin/env python3
"""The work of scripts/timer-check.sh (see there): kbench's median per CUDA kernel-scope case,
beside Nsight Compute's median gpu__time_duration of the same kernels, run one case at a time."""
import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys
import tomllib

# kbench's own kernels (the stream hold, the L2 flush): not part of any case.
TIMER_KERNELS = ("kbench_hold_stream", "kbench_flush_l2")


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def one_case_manifest(manifest, case, samples, folder):
    """The study reduced to one variant at one grid point, with a fixed number of samples. A
    custom study's `[custom]` table comes along whole, its sources and include folders made
    absolute (`folder`: the manifest's), as the reduced manifest is written elsewhere."""
    variant = next(v for v in manifest["variant"] if v["name"] == case["variant"])
    variant = {k: x for k, x in variant.items() if k != "params"}
    lines = []
    if "custom" in manifest:
        custom = dict(manifest["custom"])
        for key in ("sources", "include_dirs"):
            if key in custom:
                custom[key] = [os.path.join(folder, p) for p in custom[key]]
        lines.append(f"custom = {toml_value(custom)}")
    lines.append("[study]")
    study = dict(manifest["study"], name=manifest["study"]["name"] + "_ncu")
    lines += [f"{k} = {toml_value(x)}" for k, x in study.items()]
    lines.append("[grid]")
    lines += [f"{k} = {toml_value(x)}" for k, x in case["params"].items()]
    lines.append("[[variant]]")
    lines += [f"{k} = {toml_value(x)}" for k, x in variant.items()]
    measure = dict(manifest.get("measure", {}), warmup=1, min_samples=samples,
                   max_samples=samples, max_time_s=600.0, timeout_s=600.0)
    lines.append("[measure]")
    lines += [f"{k} = {toml_value(x)}" for k, x in measure.items()]
    return "\n".join(lines) + "\n"


def ncu_durations_s(kbench, manifest_path, out_dir, cache_control, graph_profiling):
    """Every kernel launch's gpu__time_duration under ncu, in launch order, as (kernel, seconds),
    the kernel named with its grid size (`name<<<grid>>>`): one kernel launched on different
    work in one run (a colour at a time) is then told apart."""
    cmd = ["ncu", "--target-processes", "all", "--cache-control", cache_control, "--clock-control", "none",
           "--graph-profiling", graph_profiling,
           "--metrics", "gpu__time_duration.sum,launch__grid_size", "--csv",
           kbench, "run", manifest_path, "--out-dir", out_dir]
    # Without the device's peaks and energy windows, whose launches ncu would each replay (28 of
    # a small case's 33 s): the case's own launches are all this run is for.
    env = dict(os.environ, KBENCH_SKIP_PEAKS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    text = done.stdout
    start = text.find('"ID"')
    if start < 0:
        raise RuntimeError(f"ncu printed no metrics (exit {done.returncode}):\n{text[-2000:]}\n{done.stderr[-2000:]}")
    launches = {}
    for r in csv.DictReader(io.StringIO(text[start:])):
        # A whole CUDA graph profiled as one (--graph-profiling graph) may carry no kernel name.
        name = (r.get("Kernel Name") or "graph").split("(")[0]
        if name in TIMER_KERNELS:
            continue
        launch = launches.setdefault(int(r["ID"]), {"name": name})
        value = float(r["Metric Value"].replace(",", ""))
        if r.get("Metric Name") == "gpu__time_duration.sum":
            unit = r["Metric Unit"]
            scale = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3,
                     "ms": 1e-3, "second": 1.0, "s": 1.0}[unit]
            launch["s"] = value * scale
        elif r.get("Metric Name") == "launch__grid_size":
            launch["grid"] = int(value)
    return [(f"{l['name']}<<<{l.get('grid', '?')}>>>", l["s"])
            for _, l in sorted(launches.items()) if "s" in l]


def run_length(names, samples):
    """The launches of one run. The shortest period with which the last launches repeat may be a
    part of a run that launches the same kernels twice (a sweep forward, then back), so the
    period is widened to the most whole repeats of it that still leave `samples` runs: every
    case runs at least its samples. The launcher's set-up before the runs (a library's
    analysis) is left out."""
    shortest = len(names)
    for period in range(1, len(names) // 3 + 1):
        tail = names[-3 * period:]
        if all(tail[i] == tail[i + period] for i in range(len(tail) - period)):
            shortest = period
            break
    repeats = len(run_sums([(n, 0.0) for n in names], shortest))
    return shortest * max(1, repeats // samples)


def run_sums(launches, period):
    """Each whole run's summed time, counting back from the last launch while runs repeat."""
    names = [name for name, _ in launches]
    pattern = names[-period:]
    sums = []
    end = len(launches)
    while end - period >= 0 and names[end - period:end] == pattern:
        sums.append(sum(s for _, s in launches[end - period:end]))
        end -= period
    return sums


def kbench_row(study, case):
    """What kbench's own record says of a case: its median and its second and third timers."""
    timer = case["measurement"].get("gpu_timer") or {}
    cupti = timer.get("cupti_samples_s") or []
    # kbench traces runs of its own after the (untraced) samples: CUPTI's span is to be
    # compared with their events.
    traced = timer.get("traced_events_s") or []
    profiler = timer.get("profiler_samples_s") or []
    return {
        "study": study,
        "case": case["index"],
        "variant": case["variant"],
        "params": case["params"],
        "kbench_median_s": case["summary"]["median_s"],
        "cupti_median_s": statistics.median(cupti) if cupti else None,
        "traced_events_median_s": statistics.median(traced) if traced else None,
        "profiler_median_s": statistics.median(profiler) if profiler else None,
        "timer_method": timer.get("method"),
        "event_overhead_s": timer.get("event_overhead_s"),
    }


def within_target(measured_s, reference_s):
    return abs(measured_s - reference_s) <= max(0.02 * reference_s, 0.5e-6)


def span_row(study, case):
    """A case judged against CUPTI's activity span (`--reference cupti-span`): the traced runs'
    events against their span, with no ncu figure."""
    row = kbench_row(study, case)
    traced, span = row["traced_events_median_s"], row["cupti_median_s"]
    row.update({"reference": "cupti_span", "ncu_median_s": None, "launches_per_run": None,
                "within_target": traced is not None and span is not None and within_target(traced, span)})
    return row


def save_report(out, report):
    with open(os.path.join(out, "timer-check.json"), "w") as f:
        json.dump(report, f, indent=1)


def fmt_s(s):
    return f"{s * 1e6:10.2f} µs" if s < 1e-3 else f"{s * 1e3:10.3f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kbench", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=20)
    # "all" flushes the caches before every kernel, as kbench's cold mode does before every run:
    # the same for one kernel a run, more for several (each starts cold under ncu, only the
    # first under kbench); "none" leaves them warm, a lower bound for those.
    ap.add_argument("--cache-control", choices=["all", "none"], default="all")
    # A sweep stopped part-way (a device call's time limit) goes on from its timer-check.json:
    # the cases in it are kept and not measured again.
    ap.add_argument("--resume", metavar="TIMER_CHECK_JSON")
    # "graph" times a CUDA graph launch as one workload (its caches flushed once, before it, as
    # kbench's cold mode does), the reference for a case that runs as one graph (SYMGS colours);
    # "node", ncu's default, times each of its kernels apart.
    ap.add_argument("--graph-profiling", choices=["node", "graph"], default="node")
    # "cupti-span" runs no ncu and records each case against CUPTI's activity span of its traced
    # runs: the reference for a run whose host reads the device back between launches to decide
    # whether to launch again (SYMGS lock). Its launch count then depends on how the launches
    # overlap, which ncu changes by serializing and replaying each one, so ncu's sum is not of
    # the same run (and ncu did not finish hpcg:16 in 300 s).
    ap.add_argument("--reference", choices=["ncu", "cupti-span"], default="ncu")
    ap.add_argument("manifests", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    report = []
    if a.resume:
        with open(a.resume) as f:
            report = json.load(f)
    done = {(r["study"], r["case"]) for r in report}
    save_report(a.out, report)
    failed = []
    for path in a.manifests:
        with open(path, "rb") as f:
            manifest = tomllib.load(f)
        study = manifest["study"]["name"]
        subprocess.run([a.kbench, "run", path, "--out-dir", a.out, "--json"],
                       check=False, stdout=subprocess.DEVNULL, timeout=600)
        runs = sorted(os.listdir(os.path.join(a.out, study)))
        with open(os.path.join(a.out, study, runs[-1])) as f:
            doc = json.load(f)
        for case in doc["cases"]:
            if case["backend"] != "cuda" or case["scope"] != "kernel" or not case.get("summary"):
                continue
            if (study, case["index"]) in done:
                continue
            if a.reference == "cupti-span":
                report.append(span_row(study, case))
                save_report(a.out, report)
                continue
            one = os.path.join(a.out, f"{study}-case{case['index']}.toml")
            with open(one, "w") as f:
                f.write(one_case_manifest(manifest, case, a.samples,
                                          os.path.dirname(os.path.abspath(path))))
            try:
                launches = ncu_durations_s(a.kbench, one, os.path.join(a.out, "ncu-runs"),
                                           a.cache_control, a.graph_profiling)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                # One case that ncu could not time leaves the others to be checked.
                print(f"{study} case {case['index']}: {e}", file=sys.stderr)
                failed.append({"study": study, "case": case["index"], "variant": case["variant"],
                               "params": case["params"], "error": str(e)[:2000]})
                continue
            by_kernel = {}
            for name, s in launches:
                by_kernel.setdefault(name, []).append(s)
            per_kernel = {k: statistics.median(v) for k, v in by_kernel.items()}
            period = run_length([name for name, _ in launches], a.samples)
            if period == len(by_kernel):
                # One run launches each of its kernels once (warm-up and samples alike), so per
                # kernel the median is its time in a run; their sum is the run's.
                ncu_s = sum(per_kernel.values())
            else:
                # A run launches a kernel several times on different work (SYMGS: one launch a
                # colour): the median over runs of each run's sum.
                ncu_s = statistics.median(run_sums(launches, period))
            row = kbench_row(study, case)
            row.update({
                "reference": "ncu",
                "ncu_per_kernel_median_s": per_kernel,
                "ncu_median_s": ncu_s,
                # Launches a run, from ncu's record: 1 for a single-kernel case, the one kind
                # the max(2%, 0.5 µs) target is stated for.
                "launches_per_run": period,
            })
            row["ratio"] = row["kbench_median_s"] / ncu_s
            row["within_target"] = within_target(row["kbench_median_s"], ncu_s)
            if row["profiler_median_s"] is not None:
                row["profiler_within_target"] = within_target(row["profiler_median_s"], ncu_s)
            report.append(row)
            # Written after every case, so that a sweep stopped part-way keeps what it measured.
            save_report(a.out, report)
    with open(os.path.join(a.out, "timer-check-failed.json"), "w") as f:
        json.dump(failed, f, indent=1)
    # CUPTI: its activity records' span (from the first block); profiler: CUPTI's range
    # profiler's gpu__time_duration, Nsight Compute's own metric, with its verdict against ncu.
    print(f"{'case':44s} {'runs':>4s} {'kbench':>13s} {'ncu':>13s} {'ratio':>7s} {'CUPTI':>13s} "
          f"{'profiler':>13s}  within max(2%, 0.5 µs): kbench, profiler")
    dash = "         -   "
    for r in report:
        label = f"{r['study']} #{r['case']} {' '.join(f'{k}={v}' for k, v in r['params'].items())}"
        cupti = fmt_s(r["cupti_median_s"]) if r["cupti_median_s"] else dash
        profiler = fmt_s(r["profiler_median_s"]) if r["profiler_median_s"] else dash
        verdict = {True: "yes", False: "NO", None: "-"}
        if r.get("reference") == "cupti_span":
            # No ncu: the traced runs' events stand in the ncu column, judged against the span.
            traced = fmt_s(r["traced_events_median_s"]) if r["traced_events_median_s"] else dash
            print(f"{label[:44]:44s} {'-':>4s} {fmt_s(r['kbench_median_s'])} {traced} {'-':>7s} {cupti} "
                  f"{profiler}  traced runs' events within CUPTI's span: {verdict[r['within_target']]}")
            continue
        print(f"{label[:44]:44s} {r['launches_per_run']:4d} {fmt_s(r['kbench_median_s'])} {fmt_s(r['ncu_median_s'])} "
              f"{r['ratio']:7.3f} {cupti} {profiler}  {verdict[r['within_target']]}, "
              f"{verdict[r.get('profiler_within_target')]}")
    for r in failed:
        print(f"{r['study']} #{r['case']}: ncu gave no time: {r['error'][:200]}")
    # Exit 0 when every case held to a target meets it: single-kernel cases against ncu, and
    # the cases timed against CUPTI's span. Runs of several launches against ncu have no target
    # (ncu's sum is an upper bound); timer_sweep_summary.py judges them against the span.
    judged = [r for r in report if r["launches_per_run"] == 1 or r.get("reference") == "cupti_span"]
    return 0 if all(r["within_target"] for r in judged) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
