#!/usr/bin/env bash
# The split histogram path (specbench/kernels/histogram.py: a batch given top_p or min_p without top_k finds its
# cutoffs from histograms of counts; the default since fd953c5, before it the launch variants
# triton-histogram-...) beside the split radix path (the default before fd953c5, since then the launch variants
# triton-radix-...), on the GPU machine from the repository root with OUT set:
#   bash results/h200-histogram/run.sh cutoffs   # check_cutoffs.py: both paths' cutoffs on rows of 151936 tokens
#   bash results/h200-histogram/run.sh time      # KNOBS (default top_p 0.95; min_p 0.05), draft logits and probs:
#                                                # IMPLS (default: the radix variant, then triton; before
#                                                # fd953c5 this folder ran triton,triton-histogram-4096x1024x4)
#   bash results/h200-histogram/run.sh shapes    # top_p 0.95, draft logits: the default (`triton`) beside other
#                                                # shapes and parts a level (SHAPE_IMPLS); min_p 0.05 at B <= 8
#   bash results/h200-histogram/run.sh check     # the GPU tests and `verify` of the Triton kernels (probabilistic)
#   bash results/h200-histogram/run.sh sanitize  # --part radix (the calls given no top_k) under memcheck,
#                                                # initcheck and racecheck, three shards each; SEARCH=radix
#                                                # or histogram forces a path (before fd953c5 the default was
#                                                # the radix path, so its runs here set SEARCH=histogram)
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
    cutoffs)
      timeout ${LIMIT:-200} python3 results/h200-histogram/check_cutoffs.py > "$out/cutoffs.txt" 2>&1
      echo "cutoffs exit $?"; tail -n 3 "$out/cutoffs.txt" ;;
    time)
      IFS=';' read -ra sets <<< "${KNOBS:---top-p 0.95;--min-p 0.05}"
      for knobs in "${sets[@]}"; do
        name=$(echo "$knobs" | tr -d ' -')
        for shape in "${SHAPES[@]}"; do
          impls=${IMPLS:-triton-radix-4096x512x4,triton}
          timeout ${LIMIT:-100} $K $knobs --draft logits,probs --impl $impls $shape -o $out/$name --resume \
            >> "$out/$name.txt" 2>&1; echo "$name $shape exit $?"
        done
      done ;;
    shapes)
      impls=${SHAPE_IMPLS:-triton,triton-histogram-4096x1024x4-bins32,triton-histogram-8192x1024x4,triton-histogram-4096x2048x8,triton-histogram-4096x512x4,triton-histogram-2048x1024x4,triton-histogram-8192x2048x8}
      for shape in "${SHAPES[@]:1:2}" "${SHAPES[0]}"; do
        timeout ${LIMIT:-170} $K --top-p 0.95 --draft logits --impl $impls $shape -o $out/shapes --resume \
          >> "$out/shapes.txt" 2>&1; echo "shapes $shape exit $?"
      done
      timeout ${LIMIT:-170} $K --min-p 0.05 --draft logits,probs --impl triton,triton-radix-4096x512x4 ${SHAPES[0]} \
        -o $out/minp-small --resume >> "$out/minp-small.txt" 2>&1; echo "min_p ${SHAPES[0]} exit $?" ;;
    check)
      timeout 300 python3 -m pytest -x -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_launch.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt"
      timeout 200 $S verify --impl triton -m probabilistic --json "$out/verify.json" > "$out/verify.txt" 2>&1
      echo "verify exit $?"; tail -n 2 "$out/verify.txt" ;;
    sanitize)
      for tool in memcheck initcheck racecheck; do
        for shard in 1 2 3; do
          timeout ${LIMIT:-420} python3 tests/sanitize_kernels.py --part radix --tools $tool --shard $shard/3 \
            ${SEARCH:+--split-search $SEARCH} --out "$out/radix-$tool-$shard" > "$out/radix-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 1 "$out"/radix-*.txt ;;
    *) echo "usage: run.sh cutoffs|time|shapes|check|sanitize ..." >&2; exit 2 ;;
  esac
done
