#!/usr/bin/env bash
# Whether batches below launch.HISTOGRAM_DECIDE_MIN_BATCH (8) should decide their drafts first and race each clean
# stop from a level's bracket (issue 20: B = 1 from draft logits is 47.8 µs against a goal of 23, every row searched;
# the threshold was set before the bracket race existed). On the GPU machine from the repository root with OUT set:
#   bash results/h200-small-batch-decide/run.sh
# times top_p 0.95, L = 3, Llama 3 (K = 3, V = 128256), target logits, draft logits and probabilities, float32, CUDA
# graph, at B = 1, 2, 4 and 8: the launcher (`triton`: no draft decided first below B = 8) beside the drafts decided
# from one pass's bounds with the race after the first level and after the second, and decided after the first level
# with the race after it. Each batch is first compiled by a short run of every implementation at once. (LIMIT:
# seconds for each batch's timed run; WARM_LIMIT for the compiling runs.)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh; write_machine "$out/machine.txt"
H=triton-histogram-4096x1024x4
impls=${IMPLS:-triton,$H-bounds-race1,$H-bounds-race2,$H-decide-race1}
K="python3 -m specbench --format plain kernels --no-charts --timer graph --mode probabilistic --target logits -l 3
   --draft logits,probs -k 3 --model llama3 --top-p 0.95"
scratch=$(mktemp -d)
for b in ${BATCHES:-1 2 4 8}; do
  for impl in ${impls//,/ }; do
    timeout ${WARM_LIMIT:-200} $K --max-ms 1 --impl $impl -b $b -o $scratch/$b-$impl > $scratch/$b-$impl.txt 2>&1 &
  done
done
wait; echo "compiled: $(cat $scratch/*.txt | grep -c ' ok *$') rows ok"
for b in ${BATCHES:-1 2 4 8}; do
  timeout ${LIMIT:-80} $K --max-ms 40 --impl $impls -b $b -o "$out/time" --resume >> "$out/time.txt" 2>&1
  echo "B=$b exit $?"
done
