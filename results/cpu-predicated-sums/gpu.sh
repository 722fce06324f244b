#!/usr/bin/env bash
# For the GPU machine, from the repository root with OUT set (issue 20): the predicated adds checked, then timed
# beside the launcher's own path under its Triton 3.6, in one call, in this order:
#   bash results/cpu-predicated-sums/gpu.sh check   # the GPU tests of the summing variants alone (tests.txt): the
#                                                   # helpers on hostile floats, -pred against -nopred bit for
#                                                   # bit, and -ftz against -noftz (each
#                                                   # compiles its kernels cold: 100-200 s; run nothing beside it)
#   bash results/cpu-predicated-sums/gpu.sh time    # every shape compiled at once, then top_p 0.95 at B = 8, 64, 256,
#                                                   # 512, draft logits and probs, `triton` beside -pred
#                                                   # (results/h200-histogram-variants/run.sh warm and time)
# (CHECK_LIMIT, WARM_LIMIT, TIME_LIMIT: seconds for the tests, the compiles, a batch's timings; IMPLS and BATCHES
# replace the implementations and batches.) The inline PTX reads and writes no memory, so the launches' memory
# accesses are those of -nopred, which the sanitizers have run.
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-pred} BATCHES=${BATCHES:-8 64 256 512}
for step in "$@"; do
  case $step in
    check)
      timeout ${CHECK_LIMIT:-400} python3 -m pytest -q -p no:cacheprovider tests/test_predicated_adds.py \
        tests/test_launch.py -k "predicated or one_instruction" > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt" ;;
    time)
      LIMIT=${WARM_LIMIT:-200} bash results/h200-histogram-variants/run.sh warm
      LIMIT=${TIME_LIMIT:-75} bash results/h200-histogram-variants/run.sh time ;;
    *) echo "usage: gpu.sh check|time ..." >&2; exit 2 ;;
  esac
done
