#!/usr/bin/env bash
# Where a B = 1 truncated step's time goes (issue 20, whose goals at B = 1 are the furthest away): tests/
# gpu_kernel_breakdown.py (CUPTI durations of each launch, cold calls after an L2 flush) on Llama 3 B = 1, K = 3, L = 3,
# target logits, float32, draft logits and probabilities, top_p 0.95 alone and top_k 50 + top_p 0.9, launched without
# dependent launches (triton-nopdl: with them a kernel's duration would include its wait for the one before). On the
# GPU machine from the repository root with OUT set; every case first compiled by one call, all at once, then timed one
# after another, cold, then warm (--warm: no L2 flush before a call). (LIMIT: seconds a case; TIMINGS: "cold warm",
# or one of them.)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
mkdir -p "$out"
source results/gpu-lib.sh; write_machine "$out/machine.txt"
B="python3 tests/gpu_kernel_breakdown.py --batch 1 --k 3 --model llama3 --acceptance 3 --impl triton-nopdl"
cases=("--draft logits --top-p 0.95" "--draft probs --top-p 0.95" "--draft logits --top-k 50 --top-p 0.9"
       "--draft probs --top-k 50 --top-p 0.9")
for c in "${cases[@]}"; do
  timeout ${LIMIT:-150} $B $c --calls 1 --warmup 1 > /dev/null 2>&1 < /dev/null &
done
wait; echo "compiled at ${SECONDS}s"
for timing in ${TIMINGS:-cold warm}; do
  flag=; [ "$timing" = warm ] && flag=--warm
  for c in "${cases[@]}"; do
    echo "== $c $flag"; timeout ${LIMIT:-150} $B $c $flag --calls 30 2>&1 < /dev/null | grep -v Warning | grep -v _warn_once
  done > "$out/breakdown${flag:+-warm}.txt" 2>&1
done
echo "breakdown at ${SECONDS}s"
