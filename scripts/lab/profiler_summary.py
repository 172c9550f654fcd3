"""Statuses and the profiler's record per variant of results files (a check that the range
profiler runs, or says why not, on every kind of launch)."""
import collections
import json
import sys

for path in sys.argv[1:]:
    doc = json.load(open(path))
    print(path, dict(collections.Counter(c["status"] for c in doc["cases"])))
    seen = collections.Counter()
    for c in doc["cases"]:
        t = (c.get("measurement") or {}).get("gpu_timer")
        if not t:
            continue
        what = (f"profiled, {t['profiler_kernels_per_run']} kernels, vs events {t['profiler_vs_events']:+.3f}"
                if t.get("profiler_samples_s") else f"skipped: {(t.get('profiler_skipped') or 'not kernel scope')[:90]}")
        seen[(c["variant"], c["status"], what.split(" vs ")[0])] += 1
        if t.get("profiler_samples_s") and seen[(c["variant"], c["status"], what.split(" vs ")[0])] == 1:
            print("  ", c["variant"], what)
    for k, v in sorted(seen.items()):
        print("  ", k, v)
