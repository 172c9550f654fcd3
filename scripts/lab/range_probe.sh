#!/usr/bin/env bash
# Builds and runs range_profiler_probe.cu on the GPU machine, then the same binary under ncu.
set -u
cu=/usr/local/cuda; cupti=$cu/extras/CUPTI
[ -d $cupti/include ] || cupti=$cu
nvcc -O2 -arch=sm_90 -I$cupti/include scripts/lab/range_profiler_probe.cu -L$cupti/lib64 -lcupti -lcuda -o /tmp/probe 2>&1 | tail -5
export LD_LIBRARY_PATH=$cupti/lib64:${LD_LIBRARY_PATH:-}
/tmp/probe
NO_ACTIVITY=1 /tmp/probe | tail -3
# ncu's own reading of the same kernel (its profiler session, so ours cannot run: only the kernels)
NO_PROBE=1 ncu --cache-control all --clock-control none --metrics gpu__time_duration.sum -k regex:sum4 --csv --print-units base /tmp/probe 2>/dev/null > /tmp/ncu.csv
python3 - <<'PY'
import csv, statistics
rows = [r for r in csv.reader(open('/tmp/ncu.csv')) if len(r) > 5 and 'sum4' in ''.join(r)]
vals = [float(r[-1].replace(',', '')) for r in rows]
for i, n in enumerate((16, 20, 24, 28)):
    print(f"ncu n=2^{n} median {statistics.median(vals[7*i:7*i+7])/1e3:.3f} us of {len(vals[7*i:7*i+7])}")
PY
echo
