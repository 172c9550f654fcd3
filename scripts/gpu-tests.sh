#!/usr/bin/env bash
# Every bundled test on a GPU machine, the ignored GPU and NVRTC ones included (they fail, not
# skip, where there is no GPU). Run from anywhere after `scripts/gpu-bundle.sh` built the bundle
# and the repository (with .gpu-bundle/) was copied to the GPU machine:
#   bash scripts/gpu-tests.sh [extra test-binary arguments]
# Nothing to set: the tests run .gpu-bundle/kbench (KBENCH_EXE, unless already set) from the
# repository root, where they find experiments/, kernels/ and datasets/.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=.gpu-bundle
if [ ! -x "$bundle/kbench" ] || ! compgen -G "$bundle/tests/*" >/dev/null; then
  echo "error: no test bundle in $PWD/$bundle: run 'bash scripts/gpu-bundle.sh' on a machine with Rust, then copy the repository here" >&2
  exit 2
fi
export KBENCH_EXE="${KBENCH_EXE:-$PWD/$bundle/kbench}"
status=0
failed=()
# The integration tests' modules that need no build tree (tests/it.rs lists them all).
modules=(gpu:: gpu_fault:: gpu_guard:: gpu_custom_guard:: gpu_energy:: gpu_peaks:: gpu_tune::
  full_disk_symgs:: harness:: kernels_compile:: manifest_errors:: reliability::)
for t in "$bundle"/tests/*; do
  echo "== $t"
  filters=()
  [ "$(basename "$t")" = it ] && filters=("${modules[@]}")
  if ! "$t" --include-ignored --test-threads=1 "$@" "${filters[@]}"; then
    status=1
    failed+=("$(basename "$t")")
  fi
done
if [ "$status" -ne 0 ]; then
  echo "failed: ${failed[*]}" >&2
else
  echo "every bundled test passed"
fi
exit $status
