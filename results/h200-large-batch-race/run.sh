#!/usr/bin/env bash
# The truncated step's race at batches that do not split (issue 20): a batch given no top_k races in the step, one
# program per request, unless it splits (B <= 66 on an H200), where one more launch races each row split across
# programs (the deferred race). `triton-split` forces the split rule, so its rows are the deferred race at every
# batch (first/ ran at 46e68b7, where `triton` raced in the step at B >= 128; since 0f67cb4 both defer). On the GPU
# machine from the repository root with OUT set:
#   bash results/h200-large-batch-race/run.sh warm       # every shape of `time` at --max-ms 1, all at once (compiled)
#   bash results/h200-large-batch-race/run.sh time       # top_p 0.95 alone and min_p 0.05 alone at B = BATCHES
#                                                        # (128 256 512), draft logits and probs, IMPLS side by side
#   bash results/h200-large-batch-race/run.sh breakdown  # each launch's time at B = 256, top_p 0.95, draft logits,
#                                                        # each of IMPLS (tests/gpu_kernel_breakdown.py: cold calls)
#   bash results/h200-large-batch-race/run.sh check      # the truncation GPU tests
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
impls=${IMPLS:-triton,triton-split}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git log -1 --format='commit %H'; date -u; } > "$out/machine.txt" 2>&1
shape_of() {
  case $1 in
    64) echo "-k 4 --model qwen3" ;;
    128|256) echo "-k 7 --model qwen3" ;;
    512) echo "-k 7 --model llama3" ;;
  esac
}
K="$S kernels --no-charts --timer graph --mode probabilistic --target logits -l 3 --draft logits,probs"
KNOBS=("--top-p 0.95" "--min-p 0.05")
for step in "$@"; do
  case $step in
    warm)
      scratch=$(mktemp -d)
      for b in ${BATCHES:-128 256 512}; do
        for i in "${!KNOBS[@]}"; do
          timeout ${LIMIT:-200} $K ${KNOBS[$i]} --max-ms 1 --impl $impls -b $b $(shape_of $b) -o $scratch/warm-$b-$i \
            > $scratch/warm-$b-$i.txt 2>&1 &
        done
      done
      wait; echo "warm done: $(grep -c ' ok' $scratch/warm-*.txt | tr '\n' ' ')" ;;
    time)
      for b in ${BATCHES:-128 256 512}; do
        for i in "${!KNOBS[@]}"; do
          $K ${KNOBS[$i]} --max-ms 40 --impl $impls -b $b $(shape_of $b) -o $out/time-$i --resume \
            >> "$out/time-$i.txt" 2>&1
          echo "kernels B=$b ${KNOBS[$i]} exit $?"
        done
      done ;;
    breakdown)
      for impl in ${impls//,/ }; do
        timeout ${LIMIT:-120} python3 tests/gpu_kernel_breakdown.py --batch 256 --k 7 --model qwen3 --draft logits \
          --top-p 0.95 --impl $impl --calls 10 >> "$out/breakdown.txt" 2>&1; echo "breakdown $impl exit $?"
      done ;;
    check)
      timeout ${LIMIT:-240} python3 -m pytest -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_launch.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt" ;;
    *) echo "usage: run.sh warm|time|breakdown|check ..." >&2; exit 2 ;;
  esac
done
