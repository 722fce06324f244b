#!/usr/bin/env bash
# Ran with the alternation variant (not kept; ../README.md): each placement's timed call followed by one untimed call.
# Successive measurements of one cold row alternate between two levels about 6% apart (B = 1, draft logits: 15.6
# and 16.6 µs). `tests/gpu_timer_check.py toggle` measures the row ten times in a row in several ways to find what
# flips it; then, with each placement's timed call followed by one untimed call (so the placements alternate
# between the two states), the issue-9 B <= 8 group, host-free, in four processes, and the issue-9 list twice.
# From the repository root with OUT set:  bash results/h200-two-states/alternation/run.sh
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  nproc; date -u; } > "$out/machine.txt" 2>&1
python3 tests/gpu_timer_check.py toggle > "$out/toggle.txt" 2>&1; echo "toggle exit $?"; tail -n 20 "$out/toggle.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py > "$out/gpu-tests.txt" 2>&1
echo "gpu tests exit $?"; tail -n 1 "$out/gpu-tests.txt"
timed() {  # timed NAME OPTIONS...: one kernels invocation into $out/NAME
  local name=$1; shift; local start=$SECONDS
  $S kernels --no-charts "$@" -o "$out/$name" > "$out/$name.txt" 2>&1
  echo "$name exit $? wall $((SECONDS - start)) s" | tee -a "$out/walls.txt"
}
CASES=(--impl triton --mode greedy,probabilistic --draft logits,probs,none --target logits,probs -l 3,full)
for n in 1 2 3 4; do timed small-$n "${CASES[@]}" --timer host-free --shapes 1x3@llama3,8x3@llama3; done
python3 tests/gpu_timer_check.py spread "$out/small-1" "$out/small-2" "$out/small-3" "$out/small-4" \
  > "$out/spread-small.txt" 2>&1; tail -n 2 "$out/spread-small.txt"
for n in 1 2; do timed issue9-$n "${CASES[@]}" --shapes 1x3@llama3,8x3@llama3,64x4@qwen3,256x7@qwen3,512x7@llama3; done
python3 tests/gpu_timer_check.py spread "$out/issue9-1" "$out/issue9-2" > "$out/spread-issue9.txt" 2>&1
tail -n 2 "$out/spread-issue9.txt"
