#!/usr/bin/env bash
# Forty placements by default, behind one backlog per sample that grows after a sample runs out: do the issue-9
# case list and the quick preset now meet the goal (every row p80/p20 <= 1.10, runs in separate processes within
# 3%)? From the repository root with OUT set, on one GPU:  bash results/h200-forty-placements/one-backlog/run.sh
# The timer's GPU tests first; then the issue-9 list (Triton, default timers host-free and graph, default budget)
# three times and `kernels --quick` twice, each its own process; then the spread of each.
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
ISSUE9=(--impl triton --mode greedy,probabilistic --draft logits,probs,none --target logits,probs -l 3,full
        --shapes 1x3@llama3,8x3@llama3,64x4@qwen3,256x7@qwen3,512x7@llama3)
for run in 1 2 3; do timed issue9-$run "${ISSUE9[@]}"; done
for run in 1 2; do timed quick-$run --quick; done
python3 tests/gpu_timer_check.py spread "$out/issue9-1" "$out/issue9-2" "$out/issue9-3" > "$out/spread-issue9.txt" 2>&1
python3 tests/gpu_timer_check.py spread "$out/quick-1" "$out/quick-2" > "$out/spread-quick.txt" 2>&1
tail -n 2 "$out/spread-issue9.txt" "$out/spread-quick.txt"
