#!/usr/bin/env bash
# Drafts decided before the search (histogram.STEP_DECIDE: a batch given top_p or min_p without top_k decides its
# requests' first drafts from bounds after the split histogram path's first level and searches only the rows its
# step reads) beside every row searched (the launch variant triton-histogram-4096x1024x4-nodecide), on the GPU
# machine from the repository root with OUT set:
#   bash results/h200-decide/run.sh time      # top_p 0.95 alone, draft logits and probs, the five shapes
#   bash results/h200-decide/run.sh check     # the GPU tests and `verify` of the Triton kernels (probabilistic)
#   bash results/h200-decide/run.sh sanitize  # --part radix (the calls given no top_k, histogram path) under
#                                             # memcheck, initcheck and racecheck, SHARDS shards each (3)
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
for step in "$@"; do
  case $step in
    time)
      for shape in "${SHAPES[@]}"; do
        timeout ${LIMIT:-75} $K --top-p 0.95 --draft logits,probs --impl ${IMPLS:-triton-histogram-4096x1024x4-nodecide,triton} \
          $shape -o $out/topp0.95 --resume >> "$out/topp0.95.txt" 2>&1; echo "topp0.95 $shape exit $?"
      done ;;
    check)
      timeout ${LIMIT:-240} python3 -m pytest -x -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_launch.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt"
      timeout ${LIMIT:-240} $S verify --impl triton -m probabilistic --json "$out/verify.json" > "$out/verify.txt" 2>&1
      echo "verify exit $?"; tail -n 2 "$out/verify.txt" ;;
    sanitize)
      shards=${SHARDS:-3}  # (this folder's run: 3, each cut at 450 s after its first group; more shards finish sooner)
      for tool in memcheck initcheck racecheck; do
        for shard in $(seq 1 $shards); do
          timeout ${LIMIT:-420} python3 tests/sanitize_kernels.py --part radix --tools $tool --shard $shard/$shards \
            --split-search histogram --out "$out/radix-$tool-$shard" > "$out/radix-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 1 "$out"/radix-*.txt ;;
    *) echo "usage: run.sh time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
