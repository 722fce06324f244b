#!/usr/bin/env bash
# The split histogram path's first launch taking the largest value of each row searched at a request's stop from the
# bounds pass (BOUNDS_MAX, the launcher's own: `triton`) beside reading those rows again (-noboundsmax), and with 256
# parts a level (two levels; -bins256), through results/h200-histogram-variants/run.sh, on the GPU machine from the
# repository root with OUT set:
#   bash results/h200-bounds-max/run.sh warm time check   # top_p 0.95, B = 8, 64, 256, 512, draft logits and probs
#   bash results/h200-bounds-max/run.sh sanitize          # --part radix under the three tools
set -uo pipefail
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-noboundsmax,$H-bins256} KNOBS=${KNOBS:---top-p 0.95}
export BATCHES=${BATCHES:-8 64 256 512}
exec bash results/h200-histogram-variants/run.sh "$@"
