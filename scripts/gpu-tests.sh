#!/usr/bin/env bash
# Every bundled test on a GPU machine, the ignored GPU and NVRTC ones included (they fail, not
# skip, where there is no GPU). Run from the repository root after `scripts/gpu-bundle.sh` here:
#   bash scripts/gpu-tests.sh [extra test-binary arguments]
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for t in .gpu-bundle/tests/*; do
  echo "== $t"
  "$t" --include-ignored --test-threads=1 "$@" || status=1
done
exit $status
