#!/usr/bin/env bash
# For the GPU machine (issue 24), from the repository root with OUT set: the one-program tree path (B = 64, 256) at
# fewer tokens a chunk, where the launcher's 8192 x 32 warps spills (results/h200-tree-spills/, section 3), beside
# the launcher's own, in one `specbench kernels` process: the 2x2 tree and a chain given as a tree, with the chains
# of K = 2 and 6, both children of node 0 rejected (L = 2) and the path accepted, from draft logits and
# probabilities. TIME_LIMIT: seconds for the process; IMPLS replaces the implementations.
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
write_machine "$out/machine.txt"
IMPLS=${IMPLS:-triton,triton-sequential-4096x32,triton-sequential-4096x16,triton-sequential-2048x16}
timeout ${TIME_LIMIT:-400} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
  --model llama3 --tree 2x2,chain:6 -b 64,256 -l 2,full --mode probabilistic --draft logits,probs --impl "$IMPLS" \
  -o "$out/shapes" > "$out/shapes.txt" 2>&1
echo "shapes exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/shapes.txt | cut -c1-200 | head -20
