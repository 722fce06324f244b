#!/usr/bin/env bash
# What made this folder, run on the GPU machine from the repository root with OUT set:
#   bash results/h200-trees/run.sh
# The tree kernel's tests on the GPU, its timing beside the chain (tests/gpu_tree_timing.py), then the tree
# kernel under the three sanitizers (tests/sanitize_kernels.py --part trees, two shards each, side by side).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py > "$out/pytest-trees.txt" 2>&1
echo "pytest exit $?"; tail -n 2 "$out/pytest-trees.txt"
timeout 120 python3 tests/gpu_tree_timing.py --shapes --out "$out/tree-timing.json" > "$out/tree-timing.txt" 2>&1
echo "timing exit $?"
for tool in memcheck initcheck racecheck; do for shard in 1 2; do
  timeout ${LIMIT:-200} python3 tests/sanitize_kernels.py --part trees --tools $tool --shard $shard/2 \
    --out "$out/sanitize-$tool-$shard" > "$out/sanitize-$tool-$shard.txt" 2>&1 &
done; done
wait; tail -n 1 "$out"/sanitize-*.txt
