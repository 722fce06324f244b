#!/usr/bin/env bash
# Forty placements by default, each call behind its own backlog, a placement's backlog doubling (twice at most)
# after it ran out: do the B <= 8 rows and the issue-9 case list now meet the goal (every row p80/p20 <= 1.10,
# runs in separate processes within 3%)? From the repository root with OUT set, on one GPU:
#   bash results/h200-forty-placements/run.sh
# The timer's GPU tests; the issue-9 B <= 8 group host-free only in four processes (as one-backlog/process-offset.sh
# timed its variants); the whole issue-9 list (Triton, default timers host-free and graph, default budget) twice;
# then the spread of each.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  nproc; date -u; } > "$out/machine.txt" 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_bench.py -k "placement or timing or \
backlog or host_free or graph or scratch" > "$out/gpu-tests.txt" 2>&1; echo "gpu tests exit $?"; tail -n 1 "$out/gpu-tests.txt"
timed() {  # timed NAME OPTIONS...: one kernels invocation into $out/NAME
  local name=$1; shift; local start=$SECONDS
  $S kernels --no-charts "$@" -o "$out/$name" > "$out/$name.txt" 2>&1
  echo "$name exit $? wall $((SECONDS - start)) s" | tee -a "$out/walls.txt"
}
CASES=(--impl triton --mode greedy,probabilistic --draft logits,probs,none --target logits,probs -l 3,full)
timed warm-up "${CASES[@]}" --timer host-free --shapes 1x3@llama3,8x3@llama3
for n in 1 2 3 4; do timed small-$n "${CASES[@]}" --timer host-free --shapes 1x3@llama3,8x3@llama3; done
for n in 1 2; do timed issue9-$n "${CASES[@]}" --shapes 1x3@llama3,8x3@llama3,64x4@qwen3,256x7@qwen3,512x7@llama3; done
python3 tests/gpu_timer_check.py spread "$out/small-1" "$out/small-2" "$out/small-3" "$out/small-4" \
  > "$out/spread-small.txt" 2>&1
python3 tests/gpu_timer_check.py spread "$out/issue9-1" "$out/issue9-2" > "$out/spread-issue9.txt" 2>&1
tail -n 2 "$out/spread-small.txt" "$out/spread-issue9.txt"
