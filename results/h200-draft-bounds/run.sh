#!/usr/bin/env bash
# Drafts decided from one pass's bounds before the search (specbench/kernels/draft_bounds.py, the launch variants
# triton-histogram-...-bounds) beside drafts decided after the search's first level (histogram.STEP_DECIDE,
# triton-histogram-...-decide), on the GPU machine from the repository root with OUT set:
#   bash results/h200-draft-bounds/run.sh time      # top_p 0.95 alone, draft logits and probs, the five
#                                                   # shapes (each shape compiled first in parallel, then timed alone)
#   bash results/h200-draft-bounds/run.sh check     # the GPU tests and `verify` of the -bounds variant
#   bash results/h200-draft-bounds/run.sh sanitize  # sanitize_bounds.py under memcheck, initcheck and racecheck,
#                                                   # one process per tool and draft form
#   bash results/h200-draft-bounds/run.sh breakdown # each launch's time, both ways, top_p 0.95, draft logits, B = 8,
#                                                   # 64 and 256 (tests/gpu_kernel_breakdown.py: cold calls)
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3"
SHAPES=("-b 1,8 -k 3 --model llama3" "-b 64 -k 4 --model qwen3" "-b 256 -k 7 --model qwen3" "-b 512 -k 7 --model llama3")
IMPLS=${IMPLS:-triton-histogram-4096x1024x4-decide,triton-histogram-4096x1024x4-bounds}
for step in "$@"; do
  case $step in
    time)
      mkdir -p /tmp/warm
      for i in "${!SHAPES[@]}"; do  # (the kernels compiled, shapes side by side; these timings are thrown away)
        timeout ${WARM:-240} $K --top-p 0.95 --draft logits,probs --impl $IMPLS ${SHAPES[$i]} --max-ms 1 \
          -o /tmp/warm/$i > /tmp/warm/$i.txt 2>&1 &
      done
      wait; echo "warm: $(date -u)"
      for shape in "${SHAPES[@]}"; do
        timeout ${LIMIT:-75} $K --top-p 0.95 --draft logits,probs --impl $IMPLS \
          $shape -o $out/topp0.95 --resume >> "$out/topp0.95.txt" 2>&1; echo "topp0.95 $shape exit $?"
      done ;;
    check)
      timeout ${LIMIT:-240} python3 -m pytest -x -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_launch.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt"
      timeout ${LIMIT:-240} $S verify --impl triton-histogram-4096x1024x4-bounds -m probabilistic \
        --json "$out/verify.json" > "$out/verify.txt" 2>&1
      echo "verify exit $?"; tail -n 2 "$out/verify.txt" ;;
    sanitize)
      for tool in memcheck initcheck racecheck; do
        for draft in none logits probs; do
          timeout ${LIMIT:-420} compute-sanitizer --tool $tool --error-exitcode 99 \
            python3 results/h200-draft-bounds/sanitize_bounds.py $draft > "$out/$tool-$draft.txt" 2>&1 &
        done
      done
      wait; for f in "$out"/*check-*.txt; do echo "$f: $(tail -n 1 $f)"; done ;;
    breakdown)
      for impl in ${IMPLS//,/ }; do
        for shape in "--batch 8 --k 3 --model llama3" "--batch 64 --k 4 --model qwen3" "--batch 256 --k 7 --model qwen3"; do
          timeout ${LIMIT:-120} python3 tests/gpu_kernel_breakdown.py $shape --draft logits --top-p 0.95 --impl $impl \
            --calls 10 >> "$out/breakdown.txt" 2>&1; echo "breakdown $impl $shape exit $?"
        done
      done ;;
    *) echo "usage: run.sh time|check|sanitize|breakdown ..." >&2; exit 2 ;;
  esac
done
