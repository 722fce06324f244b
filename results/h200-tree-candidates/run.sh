#!/usr/bin/env bash
# The race after a place's two rejected children from the candidates kept by the pass over the mass between them,
# against the kernels before (5e5a053, before.py), side by side in one process on one GPU machine. From the
# repository root with OUT set and .old/tree_before.py carried
# (git show 5e5a053:specbench/kernels/tree.py > .old/tree_before.py):
#   bash results/h200-tree-candidates/run.sh time check
# time: issue 24's case (`specbench kernels --tree 2x2,chain:6`, Llama 3 rows, the path accepted and stopping at
#   node 0 after both its children are rejected, draft logits and probabilities; chain K = 6 reads as many rows as
#   the 2x2 tree), the probabilistic mode, `triton` and `triton-before` in each process, B = 1 and 8 (the split
#   path), then B = 64 and 256 (one program per request); then the kernels one by one at B = 1 (cold calls).
# check: the tree tests on the GPU, `verify --tree 2x2` of both Triton paths, and memcheck, initcheck and racecheck
#   (two shards each) on the tree workload of tests/sanitize_kernels.py, at once.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
export PATH=$PATH:/usr/local/cuda/bin
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
K="kernels --no-charts --timer graph --max-ms 40 --model llama3 --tree 2x2,chain:6 -l 2,full --mode probabilistic
   --draft logits,probs --impl triton,results/h200-tree-candidates/before.py:triton_before"
for step in "$@"; do
  case $step in
    time)
      timeout ${TIME_LIMIT:-200} $S $K -b 1,8 -o "$out/small" > "$out/small.txt" 2>&1
      echo "B = 1, 8 exit $? at ${SECONDS}s"
      timeout ${TIME_LIMIT:-200} $S $K -b 64,256 -o "$out/large" > "$out/large.txt" 2>&1
      echo "B = 64, 256 exit $? at ${SECONDS}s"
      for acceptance in 3 2; do
        timeout 120 python3 tests/gpu_kernel_breakdown.py --batch 1 --model llama3 --draft logits --tree 2x2 \
          --acceptance $acceptance
      done > "$out/breakdown.txt" 2>&1; grep -v "^  \|Warning" "$out/breakdown.txt"
      grep -h "FAIL\|skipped\|rror" "$out"/small.txt "$out"/large.txt | cut -c1-200 | head -20 ;;
    check)
      timeout ${LIMIT:-420} python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py > "$out/pytest-trees.txt" 2>&1 &
      timeout ${LIMIT:-420} $S verify --tree 2x2 --impl triton-split,triton > "$out/verify-tree.txt" 2>&1 &
      for tool in memcheck initcheck racecheck; do
        for shard in 1 2; do
          timeout ${LIMIT:-420} python3 tests/sanitize_kernels.py --part trees --tools $tool --shard $shard/2 \
            --out "$out/trees-$tool-$shard" > "$out/trees-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 3 "$out/pytest-trees.txt" "$out/verify-tree.txt"; tail -n 1 "$out"/trees-*.txt ;;
    *) echo "usage: run.sh time|check ..." >&2; exit 2 ;;
  esac
done
