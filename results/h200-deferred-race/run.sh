#!/usr/bin/env bash
# The truncated step's deferred race (a race over a whole row split across programs, DEFER) and the split radix
# path's skipped chunks, on the GPU machine from the repository root with OUT set:
#   bash results/h200-deferred-race/run.sh check     # the GPU tests and `verify` of the Triton kernels (probabilistic)
#   bash results/h200-deferred-race/run.sh time      # top_p 0.95 / min_p 0.05 alone, top_k 50 + top_p 0.9: triton,
#                                                    # triton-sequential (no deferred race), and the kernels of
#                                                    # e74aef1 (BASELINE: a folder holding that commit's specbench/);
#                                                    # KNOBS: the knob sets, separated by ';' (default: those three)
#   bash results/h200-deferred-race/run.sh sanitize  # the calls given no top_k (both strategies) under memcheck,
#                                                    # initcheck and racecheck
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
here=$PWD
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3"
SMALL=("-b 1,8 -k 3 --model llama3" "-b 64 -k 4 --model qwen3")
LARGE=("-b 256 -k 7 --model qwen3" "-b 512 -k 7 --model llama3")
for step in "$@"; do
  case $step in
    check)
      PYTHONPATH=$here timeout 300 python3 -m pytest -x -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_launch.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt"
      PYTHONPATH=$here timeout 200 $S verify --impl triton -m probabilistic --json "$out/verify.json" \
        > "$out/verify.txt" 2>&1
      echo "verify exit $?"; tail -n 2 "$out/verify.txt" ;;
    time)
      IFS=';' read -ra sets <<< "${KNOBS:---top-p 0.95;--min-p 0.05;--top-k 50 --top-p 0.9}"
      for knobs in "${sets[@]}"; do
        name=$(echo "$knobs" | tr -d ' -')
        for shape in "${SMALL[@]}" "${LARGE[@]}"; do
          impls=triton
          case "$shape" in "-b 2"*|"-b 5"*) ;; *) [ "$name" = topp0.95 ] && impls=triton,triton-sequential ;; esac
          PYTHONPATH=$here timeout ${LIMIT:-100} $K $knobs --draft logits,probs --impl $impls $shape \
            -o $out/$name --resume >> "$out/$name.txt" 2>&1; echo "$name $shape exit $?"
          [ -n "${BASELINE:-}" ] || continue
          (cd "$BASELINE" && PYTHONPATH=$BASELINE timeout ${LIMIT:-100} $K $knobs --draft logits,probs --impl triton \
            $shape -o $out/$name-e74aef1 --resume >> "$out/$name-e74aef1.txt" 2>&1); echo "$name e74aef1 $shape exit $?"
        done
      done ;;
    sanitize)
      for tool in memcheck initcheck racecheck; do
        for shard in 1 2 3; do
          PYTHONPATH=$here timeout ${LIMIT:-400} python3 tests/sanitize_kernels.py --part radix --tools $tool \
            --shard $shard/3 --out "$out/radix-$tool-$shard" > "$out/radix-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 1 "$out"/radix-*.txt ;;
    *) echo "usage: run.sh check|time|sanitize ..." >&2; exit 2 ;;
  esac
done
