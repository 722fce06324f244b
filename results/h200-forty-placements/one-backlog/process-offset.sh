#!/usr/bin/env bash
# After forty placements (run.sh), one of three issue-9 runs was 3% slower on every host-free B = 1 row (1.7% at
# B = 8) while its graph rows matched within 0.04%: an offset fixed per process. Which placement is it? The B <= 8
# group, host-free only, in four processes for each of three variants, alternating:
#   base:  as committed (one load of each kernel's code per process, the flush windows in one buffer)
#   code:  ../h200-code-placement/code-per-placement.patch applied (a load of the code per scratch set)
#   pages: own_flush_pages.py (each flush window its own 256 MiB allocation)
# From the repository root with OUT set:  bash results/h200-forty-placements/one-backlog/process-offset.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
here=$PWD
rm -rf /tmp/code-variant && cp -r "$here" /tmp/code-variant
(cd /tmp/code-variant && patch -p1 -s < results/h200-code-placement/code-per-placement.patch) || exit 1
A=(--format plain kernels --no-charts --impl triton --mode greedy,probabilistic --draft logits,probs,none
   --target logits,probs -l 3,full --timer host-free --shapes 1x3@llama3,8x3@llama3)
PYTHONPATH=$here python3 -m specbench "${A[@]}" -o "$out/warm-up" > "$out/warm-up.txt" 2>&1; echo "warm-up exit $?"
for n in 1 2 3 4; do
  for variant in base code pages; do
    start=$SECONDS
    case $variant in
      base) PYTHONPATH=$here python3 -m specbench "${A[@]}" -o "$out/$variant-$n" ;;
      code) (cd /tmp/code-variant && PYTHONPATH=/tmp/code-variant python3 -m specbench "${A[@]}" -o "$out/$variant-$n") ;;
      pages) PYTHONPATH=$here python3 results/h200-forty-placements/one-backlog/own_flush_pages.py "${A[@]}" -o "$out/$variant-$n" ;;
    esac > "$out/$variant-$n.txt" 2>&1
    echo "$variant-$n exit $? wall $((SECONDS - start)) s"
  done
done
for variant in base code pages; do
  PYTHONPATH=$here python3 tests/gpu_timer_check.py spread "$out/$variant-1" "$out/$variant-2" "$out/$variant-3" \
    "$out/$variant-4" > "$out/spread-$variant.txt" 2>&1
  echo "$variant:"; tail -n 2 "$out/spread-$variant.txt"
done
