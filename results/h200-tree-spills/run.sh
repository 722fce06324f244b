#!/usr/bin/env bash
# The tree walk's rejected case (README.md): versions of the tree kernels side by side (IMPLS: today's triton and
# before.py's copies, or launch shape variants), ncu, the checks; on one GPU machine from the repository root with
# OUT set and .old/tree_head.py (git show d9959e6:specbench/kernels/tree.py) and .old/tree_hoisted.py carried:
#   bash results/h200-tree-spills/run.sh time    # issue 24's case (`specbench kernels --tree 2x2,chain:6`, Llama 3
#                                                # rows, the path accepted and stopping at node 0 after both its
#                                                # children are rejected, draft logits and probabilities), at each
#                                                # batch in BATCHES (64 and 256), every implementation in IMPLS in one
#                                                # process per batch (the kernels compiled first, every batch and
#                                                # implementation at once, then timed alone)
#   bash results/h200-tree-spills/run.sh check   # the tree tests on the GPU, `verify --tree 2x2`, and memcheck,
#                                                # initcheck and racecheck (two shards each) on the tree workload
#   bash results/h200-tree-spills/run.sh profile # ncu on one step's one-program kernel, the tree and the chain K = 6,
#                                                # both stopping at depth 2, B = 64 and 256, draft logits
#   bash results/h200-tree-spills/run.sh sanitize  # groups SHARDS of the tree workload under memcheck, initcheck and racecheck
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
export PATH=$PATH:/usr/local/cuda/bin
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
IMPLS=${IMPLS:-triton,results/h200-tree-spills/before.py:triton_before}
K="kernels --no-charts --timer graph --max-ms 40 --model llama3 --tree 2x2,chain:6 -l 2,full --mode probabilistic
   --draft logits,probs --impl $IMPLS"
for step in "$@"; do
  case $step in
    time)
      mkdir -p /tmp/warm
      for b in ${BATCHES:-64 256}; do  # (the kernels compiled, a process per batch and implementation; thrown away)
        for impl in ${IMPLS//,/ }; do
          w=/tmp/warm/$b-${impl//[^a-z0-9]/_}
          timeout ${WARM:-240} $S $K --impl $impl -b $b --max-ms 1 -o $w > $w.txt 2>&1 &
        done
      done
      wait; echo "warm: $(date -u)"
      for b in ${BATCHES:-64 256}; do
        timeout ${LIMIT:-120} $S $K -b $b -o "$out/large" --resume >> "$out/large.txt" 2>&1
        echo "B = $b exit $? at ${SECONDS}s"
      done
      grep -h "FAIL\|skipped\|rror" "$out"/large.txt | cut -c1-200 | head -20 ;;
    check)
      timeout ${LIMIT:-420} python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py > "$out/pytest-trees.txt" 2>&1 &
      timeout ${LIMIT:-420} $S verify --tree 2x2 --impl triton > "$out/verify-tree.txt" 2>&1 &
      for tool in memcheck initcheck racecheck; do
        for shard in 1 2; do
          timeout ${LIMIT:-420} python3 tests/sanitize_kernels.py --part trees --tools $tool --shard $shard/2 \
            --out "$out/trees-$tool-$shard" > "$out/trees-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 3 "$out/pytest-trees.txt" "$out/verify-tree.txt"; tail -n 1 "$out"/trees-*.txt ;;
    profile)
      # one step's kernel under ncu (the fourth call: after the warm-up and compile), tree 2x2 with both children of
      # node 0 rejected at B = 64 and 256, beside the chain K = 6 stopping at the same depth in one program
      N="ncu --clock-control none --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats
         --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
      P="kernels --no-charts --timer events --max-ms 1 --model llama3 --mode probabilistic --draft logits -l 2"
      for b in 64 256; do
        timeout 150 $N --kernel-name regex:_verify_tree_kernel $S $P --tree 2x2 --impl triton -b $b \
          -o /tmp/prof-tree-$b > "$out/ncu-tree-$b.txt" 2>&1; echo "ncu tree B = $b exit $?"
        timeout 150 $N --kernel-name regex:_verify_sequential_kernel $S $P -k 6 --impl triton-sequential -b $b \
          -o /tmp/prof-chain-$b > "$out/ncu-chain-$b.txt" 2>&1; echo "ncu chain B = $b exit $?"
      done ;;
    sanitize)
      # groups of the tree workload (tests/sanitize_kernels.py --part trees: 20 groups), one process per group and
      # tool: SHARDS="9 10 11 12" (draft logits), "13 14 15 16" (draft probabilities)
      for tool in memcheck initcheck racecheck; do
        for g in ${SHARDS:-9 10 11 12}; do
          timeout ${LIMIT:-290} python3 tests/sanitize_kernels.py --part trees --tools $tool --shard $g/20 \
            --out "$out/trees-$tool-$g" > "$out/trees-$tool-$g.txt" 2>&1 &
        done
      done
      wait; for f in "$out"/trees-*.txt; do echo "$(basename $f): $(tail -n 1 $f)"; done ;;
    *) echo "usage: run.sh time|check|profile|sanitize ..." >&2; exit 2 ;;
  esac
done
