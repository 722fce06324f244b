#!/usr/bin/env bash
# Block verification's split path as this folder leaves it (the rows kernel one program per request where no weight
# needs row statistics; the masses kernel's programs row by row from the last, skipping rows below a passed stop test
# from BLOCK_SKIP_MIN_BATCH requests; the race screened at large batches) against its three launches before
# (bc4144a, results/h200-block-decide/before.py), on one GPU machine. From the repository root with OUT set and
# .old/block_before.py carried (git show bc4144a:specbench/kernels/block.py > .old/block_before.py):
#   bash results/h200-block-decide/run.sh time check
# check: the method tests on the GPU, `verify --method block` of the Triton backend against the oracle's laws, and
#   memcheck, initcheck and racecheck (two shards) on the block workload of tests/sanitize_kernels.py, at once.
# time: `specbench kernels --method token,block --timer graph` on issue 22's three shapes (64 x 4 Qwen3, 256 x 7
#   Qwen3, 512 x 7 Llama 3), float32, target and draft both probabilities, then both logits; natural inputs (draft
#   logits = target logits + N(0, 1), drafts drawn from q) and planned ones (L = 3 and all accepted); `triton` and
#   `triton-before` side by side in each process, so their token rows are one code timed twice (SHAPES and IMPLS
#   replace the shapes and the implementations).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
export PATH=$PATH:/usr/local/cuda/bin
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
K="kernels --no-charts --mode probabilistic --method token,block --dtype float32 --timer graph --max-ms 40
   --shapes ${SHAPES:-64x4@qwen3,256x7@qwen3,512x7@llama3}
   --impl ${IMPLS:-triton,results/h200-block-decide/before.py:triton_before}"
for step in "$@"; do
  case $step in
    check)
      timeout ${LIMIT:-240} python3 -m pytest -q -p no:cacheprovider tests/test_methods.py > "$out/pytest-methods.txt" 2>&1 &
      timeout ${LIMIT:-240} $S verify --impl triton --method block -m probabilistic > "$out/verify-block.txt" 2>&1 &
      for job in memcheck:1/1 initcheck:1/1 racecheck:1/2 racecheck:2/2; do
        tool=${job%%:*}; shard=${job#*:}
        timeout ${LIMIT:-240} python3 tests/sanitize_kernels.py --part block --tools $tool --shard $shard \
          --out "$out/block-$tool-${shard%/*}" > "$out/block-$tool-${shard%/*}.txt" 2>&1 &
      done
      wait; tail -n 2 "$out/pytest-methods.txt"; tail -n 4 "$out/verify-block.txt"; tail -n 1 "$out"/block-*.txt ;;
    time)
      for form in probs logits; do
        timeout ${TIME_LIMIT:-110} $S $K --draft $form --target $form --inputs natural --draft-noise 1 \
          -o "$out/natural-$form" > "$out/natural-$form.txt" 2>&1; echo "natural $form exit $? at ${SECONDS}s"
        timeout ${TIME_LIMIT:-110} $S $K --draft $form --target $form -l 3,full \
          -o "$out/planned-$form" > "$out/planned-$form.txt" 2>&1; echo "planned $form exit $? at ${SECONDS}s"
      done
      grep -h "FAIL\|skipped\|rror" "$out"/natural-*.txt "$out"/planned-*.txt | cut -c1-200 | head -20 ;;
    *) echo "usage: run.sh check|time ..." >&2; exit 2 ;;
  esac
done
