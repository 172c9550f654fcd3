#!/usr/bin/env bash
# Builds what a GPU machine without a Rust toolchain needs to run kbench and its GPU tests, into
# .gpu-bundle/ (ignored by git):
#   .gpu-bundle/kbench        the release binary (kernels embedded)
#   .gpu-bundle/tests/it      the integration tests (one binary; scripts/gpu-tests.sh picks the
#                             modules that need no build tree)
#   .gpu-bundle/tests/kbench-lib  the library's unit tests
# On the GPU machine, from the repository root:
#   .gpu-bundle/kbench run experiments/reduction.toml
#   bash scripts/gpu-tests.sh                    # every test, the GPU ones included
#   python3 scripts/peers.py --only reduce       # the peers, in the same command as kbench
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=.gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle/tests"
cargo build --release --locked
cp target/release/kbench "$bundle/kbench"
# Test binaries, release profile; cargo prints their paths as JSON messages. The CLI tests run
# the kbench binary from target/, which does not travel; these find .gpu-bundle/kbench themselves.
cargo test --release --locked --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = m["target"]["name"] + ("" if kind == "test" else "-" + kind)
        if name in ("it", "kbench-lib"):
            shutil.copy(m["executable"], os.path.join(sys.argv[1], name))
' "$bundle/tests"
strip "$bundle/kbench" "$bundle"/tests/* 2>/dev/null || true
du -sh "$bundle"; ls "$bundle" "$bundle/tests"
