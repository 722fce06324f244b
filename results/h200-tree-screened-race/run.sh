#!/usr/bin/env bash
# One program's residual race screened (this branch) against the kernels of 1204975 (unscreened), side by side in
# one process, then the checks. From the repository root with OUT set and .old/tree_unscreened.py carried
# (git show 1204975:specbench/kernels/tree.py > .old/tree_unscreened.py):
#   bash results/h200-tree-screened-race/run.sh time check
# time: `specbench kernels --tree 2x2,chain:6 -b 64,256 -l 2,full` (one program per request; Llama 3 rows), one-hot
#   candidates and draft logits (whose race after two rejected children runs from candidates, so mostly
#   unchanged), `triton` and `triton-unscreened`.
# check: the tree tests on the GPU and `verify --tree 2x2` of both Triton paths, then memcheck, initcheck and
#   racecheck on the tree workload (two shards each). On a fresh machine the sanitizers need Triton's cache
#   filled first (results/h200-tree-one-hot/: none finished in 330 s beside the tests, all in 291 s on the warm
#   machine after): run `check` twice, or `time check` then `sanitize` alone.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
sanitize() {
  for tool in memcheck initcheck racecheck; do
    for shard in 1 2; do
      timeout ${LIMIT:-320} python3 tests/sanitize_kernels.py --part trees --tools $tool --shard $shard/2 \
        --out "$out/trees-$tool-$shard" > "$out/trees-$tool-$shard.txt" 2>&1 &
    done
  done
  wait; tail -n 1 "$out"/trees-*.txt
}
for step in "$@"; do
  case $step in
    time)
      timeout ${TIME_LIMIT:-200} $S kernels --no-charts --timer graph --max-ms 40 --model llama3 --tree 2x2,chain:6 \
        -b 64,256 -l 2,full --mode probabilistic --draft none,logits \
        --impl triton,results/h200-tree-screened-race/before.py:triton_unscreened -o "$out/probabilistic" \
        > "$out/probabilistic.txt" 2>&1; echo "probabilistic exit $? at ${SECONDS}s"
      grep -h "FAIL\|skipped\|rror" "$out"/probabilistic.txt | cut -c1-200 | head -20 ;;
    check)
      timeout ${LIMIT:-320} python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py tests/test_trees.py \
        > "$out/pytest-trees.txt" 2>&1 &
      timeout ${LIMIT:-320} $S verify --tree 2x2 --impl triton-split,triton > "$out/verify-tree.txt" 2>&1 &
      wait; tail -n 3 "$out/pytest-trees.txt" "$out/verify-tree.txt" ;;
    sanitize) sanitize ;;
    *) echo "usage: run.sh time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
