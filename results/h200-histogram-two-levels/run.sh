#!/usr/bin/env bash
# (branch issue20-two-levels, untimed) The split histogram path in two levels of 128 or 256 parts instead of three of
# 64 (results/cpu-histogram-levels/: every modelled row finishes in the list so), beside the launcher's own, through
# results/h200-histogram-variants/run.sh, on the GPU machine from the repository root with OUT set:
#   bash results/h200-histogram-two-levels/run.sh warm time check   # top_p 0.95, B = 8, 64, 256, 512
#   bash results/h200-histogram-two-levels/run.sh sanitize          # (VARIANTS are not these: add them first)
set -uo pipefail
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-bins128-levels2,$H-bins256} KNOBS=${KNOBS:---top-p 0.95}
export BATCHES=${BATCHES:-8 64 256 512}
exec bash results/h200-histogram-variants/run.sh "$@"
