#!/usr/bin/env bash
# The cold-graph timer (each placement's call replayed from a CUDA graph of its own, host-free otherwise) against
# host-free, on the issue-9 B <= 8 group (32 rows), each timer in PROCESSES processes, alternating: do two runs of
# one commit agree within 3% on every row? From the repository root with OUT set, on one GPU; `run.sh lists`
# instead runs the whole issue-9 list and the quick preset twice each with --timer cold-graph,graph.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
PROCESSES=${PROCESSES:-4}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD; nproc; date -u; } > "$out/machine.txt" 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py > "$out/gpu-tests.txt" 2>&1
echo "timing tests exit $?"; tail -n 1 "$out/gpu-tests.txt"
timed() {  # timed NAME OPTIONS...: one kernels invocation into $out/NAME
  local name=$1; shift; local start=$SECONDS
  $S kernels --no-charts "$@" -o "$out/$name" > "$out/$name.txt" 2>&1
  echo "$name exit $? wall $((SECONDS - start)) s" | tee -a "$out/walls.txt"
}
CASES=(--impl triton --mode greedy,probabilistic --draft logits,probs,none --target logits,probs -l 3,full
       --shapes 1x3@llama3,8x3@llama3)
if [ "${1:-small}" = lists ]; then  # `run.sh lists`: the issue-9 list and the quick preset, twice each, cold-graph
  for n in 1 2; do timed issue9-$n "${CASES[@]:0:10}" --shapes 1x3@llama3,8x3@llama3,64x4@qwen3,256x7@qwen3,512x7@llama3 \
    --timer cold-graph,graph; done
  for n in 1 2; do timed quick-$n --quick --timer cold-graph,graph; done
  for set in issue9 quick; do
    python3 tests/gpu_timer_check.py spread "$out/$set-1" "$out/$set-2" > "$out/spread-$set.txt" 2>&1
    echo "== $set"; tail -n 2 "$out/spread-$set.txt"
  done
  exit 0
fi
timed warm-up "${CASES[@]}" --timer cold-graph
for n in $(seq 1 "$PROCESSES"); do
  for timer in host-free cold-graph; do timed "$timer-$n" "${CASES[@]}" --timer "$timer"; done
done
for timer in host-free cold-graph; do
  python3 tests/gpu_timer_check.py spread $(for n in $(seq 1 "$PROCESSES"); do echo "$out/$timer-$n"; done) \
    > "$out/spread-$timer.txt" 2>&1
  echo "== $timer"; tail -n 2 "$out/spread-$timer.txt"
done
