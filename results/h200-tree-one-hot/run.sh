#!/usr/bin/env bash
# A one-hot draft's rejection leaving the next sibling's mass as R - r(x) (no pass over the row), against the tree
# kernels before (4e366ed, results/h200-tree-one-hot/before.py), side by side in one process on one GPU machine.
# From the repository root with OUT set and .old/tree_before_one_hot.py carried
# (git show 4e366ed:specbench/kernels/tree.py > .old/tree_before_one_hot.py):
#   bash results/h200-tree-one-hot/run.sh time check
# time: issue 24's case (`specbench kernels --tree 2x2,chain:6`, Llama 3 rows, B = 1, 8, 64 and 256, the path
#   accepted and both children of node 0 rejected), one-hot candidates (`--draft none`, the changed path) and draft
#   logits (unchanged: a sampled draft's mass is still its sum), `triton` and `triton-before` in one process.
# check: the tree tests on the GPU, `verify --tree 2x2` of both Triton paths, and memcheck, initcheck and racecheck
#   (two shards each) on the tree workload of tests/sanitize_kernels.py, at once.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
for step in "$@"; do
  case $step in
    time)
      timeout ${TIME_LIMIT:-240} $S kernels --no-charts --timer graph --max-ms 40 --model llama3 --tree 2x2,chain:6 \
        -b 1,8,64,256 -l 2,full --mode probabilistic --draft none,logits \
        --impl ${IMPLS:-triton,results/h200-tree-one-hot/before.py:triton_before} -o "$out/probabilistic" \
        > "$out/probabilistic.txt" 2>&1; echo "probabilistic exit $? at ${SECONDS}s"
      grep -h "FAIL\|skipped\|rror" "$out"/probabilistic.txt | cut -c1-200 | head -20 ;;
    check)
      timeout ${LIMIT:-360} python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py tests/test_trees.py \
        > "$out/pytest-trees.txt" 2>&1 &
      timeout ${LIMIT:-360} $S verify --tree 2x2 --impl triton-split,triton > "$out/verify-tree.txt" 2>&1 &
      for tool in memcheck initcheck racecheck; do
        for shard in 1 2; do
          timeout ${LIMIT:-360} python3 tests/sanitize_kernels.py --part trees --tools $tool --shard $shard/2 \
            --out "$out/trees-$tool-$shard" > "$out/trees-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 3 "$out/pytest-trees.txt" "$out/verify-tree.txt"; tail -n 1 "$out"/trees-*.txt ;;
    *) echo "usage: run.sh time|check ..." >&2; exit 2 ;;
  esac
done
