#!/usr/bin/env bash
# Where a top_p 0.95 step's time goes launch by launch under CUPTI (tests/gpu_kernel_breakdown.py: cold calls after an
# L2 flush, the launches as a server makes them, not a graph replay), on one GPU machine, from the repository root
# with OUT set: the shapes (Llama 3 B = 1, 8, K = 3; Qwen3 B = 64, K = 4 and B = 256, K = 7), L = 3, draft
# logits and draft probabilities, target logits, float32. (LIMIT: seconds for each case.)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh; write_machine "$out/machine.txt"
for case in "1 3 llama3" "8 3 llama3" "64 4 qwen3" "256 7 qwen3"; do set -- $case
  for draft in logits probs; do
    echo "== B=$1 K=$2 $3 draft=$draft"
    timeout ${LIMIT:-120} python3 tests/gpu_kernel_breakdown.py --batch $1 --k $2 --model $3 --draft $draft \
      --acceptance 3 --top-p 0.95 --calls 30 2>&1 | tail -40
  done
done > "$out/breakdown.txt" 2>&1
echo "breakdown at ${SECONDS}s"
