#!/usr/bin/env bash
# For the GPU machine (issue 24), from the repository root with OUT set: the tree split path (B <= 8) at larger blocks
# than the launcher's 512 tokens x 4 warps (results/h200-tree-spills/ found 1024 x 4 4%-8% faster at B = 1 for the
# rejected case, before the finish kernel's cap of 128 slices), beside the launcher's own, in one `specbench kernels`
# process: the 2x2 tree (and the chain of its depth), both children of node 0 rejected and the path accepted, one-hot
# drafts, draft logits and probabilities. TIME_LIMIT: seconds for the process; IMPLS replaces the implementations.
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
write_machine "$out/machine.txt"
IMPLS=${IMPLS:-triton,triton-split-1024x4,triton-split-2048x4,triton-split-1024x8}
timeout ${TIME_LIMIT:-400} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
  --model llama3 --tree 2x2 -b 1,2,4,8 -l 2,full --mode probabilistic --draft none,logits,probs --impl "$IMPLS" \
  -o "$out/shapes" > "$out/shapes.txt" 2>&1
echo "shapes exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/shapes.txt | cut -c1-200 | head -20
