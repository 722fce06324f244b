#!/usr/bin/env bash
# The split radix path's passes with each chunk loaded one iteration ahead (launch variants
# triton-radix-SLICExBLOCKxWARPS-prefetch, launch.RADIX_PREFETCH) beside the plain passes, on the GPU machine from
# the repository root with OUT set:
#   bash results/h200-radix-prefetch/run.sh time      # top_p 0.95 alone, draft logits and probs, four shapes
#   bash results/h200-radix-prefetch/run.sh sanitize  # after RADIX_PREFETCH is turned on: --part radix under the
#                                                     # three tools (three shards each)
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3"
SHAPES=("-b 1,8 -k 3 --model llama3" "-b 64 -k 4 --model qwen3" "-b 256 -k 7 --model qwen3" "-b 512 -k 7 --model llama3")
for step in "$@"; do
  case $step in
    time)
      impls=triton-radix-4096x512x4,triton-radix-4096x512x4-prefetch,triton-radix-4096x1024x8-prefetch
      for shape in "${SHAPES[@]}"; do
        timeout ${LIMIT:-100} $K --top-p 0.95 --draft logits,probs --impl $impls $shape -o $out/time --resume \
          >> "$out/time.txt" 2>&1; echo "time $shape exit $?"
      done ;;
    sanitize)
      for tool in memcheck initcheck racecheck; do
        for shard in 1 2 3; do
          timeout ${LIMIT:-480} python3 tests/sanitize_kernels.py --part radix --tools $tool --shard $shard/3 \
            --out "$out/radix-$tool-$shard" > "$out/radix-$tool-$shard.txt" 2>&1 &
        done
      done
      wait; tail -n 1 "$out"/radix-*.txt ;;
    *) echo "usage: run.sh time|sanitize ..." >&2; exit 2 ;;
  esac
done
