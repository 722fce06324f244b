#!/usr/bin/env bash
# Do host-free rows at B <= 8 travel between processes once each placement runs its own load of the kernels'
# code? From the repository root with OUT set, on one GPU:  bash results/h200-code-placement/run.sh
# 1. tests/gpu_timer_check.py code: one process, each kernel's code loaded six times, the row timed on each.
# 2. The issue-9 B <= 8 group (host-free and graph, 400 ms a row) in three processes each way, alternating:
#    one load of the code per process (one_code_load.py beside this script) and a load per placement (the
#    code as committed); then spread.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
A=(--format plain kernels --no-charts --impl triton --mode greedy,probabilistic --draft logits,probs,none
   --target logits,probs -l 3,full --timer host-free,graph --max-ms 400 --shapes 1x3@llama3,8x3@llama3)
python3 -m specbench "${A[@]}" -o "$out/warm-up" > "$out/warm-up.txt" 2>&1; echo "warm-up exit $?"
python3 tests/gpu_timer_check.py code > "$out/code.txt" 2>&1; echo "code exit $?"; cat "$out/code.txt"
for n in 1 2 3; do
  python3 results/h200-code-placement/one_code_load.py "${A[@]}" -o "$out/one-$n" > "$out/one-$n.txt" 2>&1
  echo "one-$n exit $?"
  python3 -m specbench "${A[@]}" -o "$out/placed-$n" > "$out/placed-$n.txt" 2>&1; echo "placed-$n exit $?"
done
for kind in one placed; do
  python3 tests/gpu_timer_check.py spread "$out/$kind-1" "$out/$kind-2" "$out/$kind-3" > "$out/spread-$kind.txt" 2>&1
  echo "$kind:"; tail -n 1 "$out/spread-$kind.txt"
done
