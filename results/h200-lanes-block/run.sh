#!/usr/bin/env bash
# The tree's candidate lanes of a thread's own tokens (results/cpu-tree-lanes/lanes.patch, applied) against the tree
# kernels before (c965e6d), and block verification's passes by products (c965e6d) against its passes by division
# (e54963f), on one GPU machine, from the repository root with OUT set and these files carried:
#   git show c965e6d:specbench/kernels/tree.py > .old/tree_before_lanes.py
#   mkdir -p .old/block_before_products
#   git show e54963f:specbench/kernels/decide.py > .old/block_before_products/decide_before_products.py
#   git show e54963f:specbench/kernels/block.py | sed 's/^from specbench.kernels.decide import (/from decide_before_products import (/' \
#     > .old/block_before_products/block_before_products.py
# Steps, in this order (the later ones on the warm machine, whose kernels the earlier ones compiled):
#   time-tree: issue 24's case (`specbench kernels --tree 2x2,chain:6`, Llama 3 rows, B = 1, 8, 64, 256, the path
#             accepted and both children of node 0 rejected, one-hot drafts and draft logits), `triton` beside
#             `triton-before-lanes`
#   time-block: block verification (`--method token,block`, issue 22's three shapes,
#             target and draft logits, L = 3 and natural inputs), `triton` beside `triton-before-products`
#   work:     the tree workload of tests/sanitize_kernels.py (two shards) and the block workload, with no tool, at once
#   sanitize: those workloads under memcheck, initcheck and racecheck, all at once (twelve processes)
#   check:    the GPU tests of trees and methods, and `verify --method block` of the Triton backend
# (TIME_LIMIT, WORK_LIMIT, LIMIT, CHECK_LIMIT: seconds for each step's processes.)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
S="python3 -m specbench --format plain"
write_machine "$out/machine.txt"
B="kernels --no-charts --mode probabilistic --method token,block --dtype float32 --timer graph --max-ms 40
   --shapes 64x4@qwen3,256x7@qwen3,512x7@llama3 --draft logits --target logits
   --impl triton,results/h200-lanes-block/before.py:triton_before_products"
for step in "$@"; do
  case $step in
    time-tree)
      timeout ${TIME_LIMIT:-240} $S kernels --no-charts --timer graph --max-ms 40 --model llama3 --tree 2x2,chain:6 \
        -b 1,8,64,256 -l 2,full --mode probabilistic --draft none,logits \
        --impl triton,results/h200-lanes-block/before.py:triton_before_lanes -o "$out/tree" \
        > "$out/tree.txt" 2>&1; echo "tree exit $? at ${SECONDS}s"
      grep -h "FAIL\|skipped\|rror" "$out"/tree.txt | cut -c1-200 | head -20 ;;
    time-block)
      timeout ${TIME_LIMIT:-240} $S $B -l 3 -o "$out/block-planned" > "$out/block-planned.txt" 2>&1
      echo "block planned exit $? at ${SECONDS}s"
      timeout ${TIME_LIMIT:-240} $S $B --inputs natural --draft-noise 1 -o "$out/block-natural" \
        > "$out/block-natural.txt" 2>&1; echo "block natural exit $? at ${SECONDS}s"
      grep -h "FAIL\|skipped\|rror" "$out"/block-*.txt | cut -c1-200 | head -20 ;;
    work)
      for shard in 1 2; do
        timeout ${WORK_LIMIT:-200} python3 tests/sanitize_kernels.py --part trees --workload --shard $shard/2 \
          > "$out/work-trees-$shard.txt" 2>&1 &
      done
      timeout ${WORK_LIMIT:-200} python3 tests/sanitize_kernels.py --part block --workload > "$out/work-block.txt" 2>&1 &
      wait; echo "work at ${SECONDS}s"; tail -n 1 "$out"/work-*.txt ;;
    sanitize)
      sanitize_shards trees "1/2 2/2" ${LIMIT:-300} "$out/sanitize-trees" &
      sanitize_shards block "1/2 2/2" ${LIMIT:-300} "$out/sanitize-block" &
      wait; echo "sanitize at ${SECONDS}s" ;;
    check)
      timeout ${CHECK_LIMIT:-400} python3 -m pytest -q -p no:cacheprovider tests/test_methods.py tests/test_trees_triton.py \
        > "$out/pytest.txt" 2>&1; echo "pytest exit $? at ${SECONDS}s"; tail -n 2 "$out/pytest.txt"
      timeout ${CHECK_LIMIT:-400} $S verify --impl triton --method block -m probabilistic > "$out/verify-block.txt" 2>&1
      echo "verify exit $? at ${SECONDS}s"; tail -n 4 "$out/verify-block.txt" ;;
    *) echo "usage: run.sh time-tree|time-block|work|sanitize|check ..." >&2; exit 2 ;;
  esac
done
