#!/usr/bin/env bash
# Why the bracket race after the first level is the slower at B = 8 from draft logits (issue 20,
# results/h200-first-level-bound/): tests/gpu_kernel_breakdown.py (CUPTI durations of each launch, cold calls after an
# L2 flush) on Llama 3 B = 8, K = 3, L = 3, target and draft logits, float32, top_p 0.95, for the launcher (the race
# after the second level there), -race1 and -norace. On the GPU machine from the repository root with OUT set; each
# variant first compiled by one call, all at once, then timed one after another. (LIMIT: seconds a variant.)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh; write_machine "$out/machine.txt"
H=triton-histogram-4096x1024x4
B="python3 tests/gpu_kernel_breakdown.py --batch 8 --k 3 --model llama3 --draft logits --acceptance 3 --top-p 0.95"
for impl in triton $H-race1 $H-norace; do
  timeout ${LIMIT:-150} $B --impl $impl --calls 1 --warmup 1 > /dev/null 2>&1 &
done
wait; echo "compiled at ${SECONDS}s"
for impl in triton $H-race1 $H-norace; do
  echo "== $impl"; timeout ${LIMIT:-150} $B --impl $impl --calls 30 2>&1 | tail -40
done > "$out/breakdown.txt" 2>&1
echo "breakdown at ${SECONDS}s"
