#!/usr/bin/env bash
# The second call (issue 20): the launcher with HISTOGRAM_SMALL_BATCH_DECIDE (`triton`) beside the variants it chose
# between, where run.sh left rows missing or the table guesses: draft probabilities at B = 1 and 2 (run.sh's B = 1 and
# 2 runs ran out of time after their draft-logits rows), B = 3 and 6 (not timed before) from both draft forms. Same
# case as run.sh (top_p 0.95, L = 3, Llama 3, target logits, float32, CUDA graph). On the GPU machine from the
# repository root with OUT set:  bash results/h200-small-batch-decide/confirm.sh
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh; write_machine "$out/machine.txt"
H=triton-histogram-4096x1024x4
K="python3 -m specbench --format plain kernels --no-charts --timer graph --mode probabilistic --target logits -l 3
   -k 3 --model llama3 --top-p 0.95"
# batch, draft form, implementations
runs=("1 probs triton,$H-bounds-race1,$H-bounds-race2,$H-decide-race1"
      "2 probs triton,$H-bounds-race1,$H-bounds-race2,$H-decide-race1"
      "3 logits triton,$H-decide-race1,$H-bounds-race2" "3 probs triton,$H-bounds-race1,$H-decide-race1"
      "6 logits triton,$H-decide-race1" "6 probs triton,$H-bounds-race1")
scratch=$(mktemp -d)
for run in "${runs[@]}"; do
  read -r b draft impls <<< "$run"
  for impl in ${impls//,/ }; do
    timeout ${WARM_LIMIT:-200} $K --draft $draft --max-ms 1 --impl $impl -b $b -o $scratch/$b-$draft-$impl \
      > $scratch/$b-$draft-$impl.txt 2>&1 &
  done
done
wait; echo "compiled: $(cat $scratch/*.txt | grep -c ' ok *$') rows ok"
for run in "${runs[@]}"; do
  read -r b draft impls <<< "$run"
  timeout ${LIMIT:-100} $K --draft $draft --max-ms 40 --impl $impls -b $b -o "$out/time" --resume >> "$out/time.txt" 2>&1
  echo "B=$b $draft exit $?"
done
