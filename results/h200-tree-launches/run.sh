#!/usr/bin/env bash
# The tree split path in two launches (the rows and the walk; then the masses the walk stopped for and the race, a
# program's role by the ticket it draws) against the three launches before it (ddb235b: rows, every place's masses
# and the walk, the race), side by side on one GPU machine; then its GPU tests, its exactness suite and the
# sanitizers. From the
# repository root with OUT set, and for `time` the code before the change unpacked in ab_old/, e.g.
#   mkdir ab_old && git archive ddb235b specbench tests | tar -x -C ab_old
#   bash results/h200-tree-launches/run.sh time check
# (`breakdown` needs no ab_old/.)
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
# the 2x2 tree beside the chain of its depth, and a 6-chain given as a tree beside chain K = 6 (as many rows as
# the 2x2 tree reads): the goal is the tree at most 1.2x that chain
K="kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --model llama3 --tree 2x2,chain:6 -b 1,8
   -l 2,full --draft logits,probs --impl triton"
for step in "$@"; do
  case $step in
    time)
      for code in new old; do
        dir=$PWD; [ $code = old ] && dir=$PWD/ab_old
        (cd "$dir" && PYTHONPATH=$dir timeout ${LIMIT:-200} $S $K -o "$out/kernels-$code" > "$out/kernels-$code.txt" 2>&1
         echo "kernels $code exit $?")
        (cd "$dir" && PYTHONPATH=$dir timeout ${LIMIT:-200} python3 tests/gpu_tree_timing.py --batches 1,8 \
           --out "$out/tree-timing-$code.json" > "$out/tree-timing-$code.txt" 2>&1; echo "tree timing $code exit $?")
      done ;;
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
    breakdown)  # kernel by kernel (tests/gpu_kernel_breakdown.py: cold calls, torch.profiler), the 2x2 tree with
                # its path accepted (L = 3) and stopping at node 0 (L = 2), beside chain K = 6
      for batch in 1 8; do
        for acceptance in 3 2; do
          timeout 120 python3 tests/gpu_kernel_breakdown.py --batch $batch --model llama3 --draft logits --tree 2x2 \
            --acceptance $acceptance
        done
        timeout 120 python3 tests/gpu_kernel_breakdown.py --batch $batch --k 6 --model llama3 --draft logits \
          --acceptance full
      done > "$out/breakdown.txt" 2>&1; grep -v "^  \|Warning" "$out/breakdown.txt" ;;
    *) echo "usage: run.sh time|check|breakdown ..." >&2; exit 2 ;;
  esac
done
