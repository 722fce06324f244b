#!/usr/bin/env bash
# For the GPU machine (issue 24), from the repository root with OUT set: the tree split path's finish kernel at fewer
# slices of a row a request, with and without the race after two rejected siblings from the masses' candidates,
# beside the launcher's own, in one `specbench kernels` process (the variants: specbench/implementations/builtin.py,
# triton-tree-finishN[-cand|-nocand]). The 2x2 tree over Llama 3 rows at B = 1, 2, 4 and 8 (the split path), the
# path accepted (L = full) and both children of node 0 rejected (L = 2), from draft logits and probabilities.
# TIME_LIMIT: seconds for the process; IMPLS replaces the implementations.
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
write_machine "$out/machine.txt"
IMPLS=${IMPLS:-triton,triton-tree-finish128,triton-tree-finish64,triton-tree-cand,triton-tree-finish128-cand,triton-tree-finish64-cand,triton-tree-finish32-cand}
timeout ${TIME_LIMIT:-400} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
  --model llama3 --tree 2x2 -b 1,2,4,8 -l 2,full --mode probabilistic --draft logits,probs --impl "$IMPLS" \
  -o "$out/tree" > "$out/tree.txt" 2>&1
echo "tree exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/tree.txt | cut -c1-200 | head -20
