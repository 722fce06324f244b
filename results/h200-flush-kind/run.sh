#!/usr/bin/env bash
# Does the L2 flush's kind decide whether host-free rows at B <= 8 travel between processes? From the
# repository root with OUT set, on one GPU:  bash results/h200-flush-kind/run.sh
# 1. tests/gpu_timer_check.py flush-kind: within one process, the flush buffer and the inputs at six places,
#    write flush against read flush.
# 2. The issue-9 B <= 8 group (host-free and graph, 400 ms a row) in three processes with each flush kind,
#    alternating (write: specbench as committed; read: flush_read.py beside this script), then spread.
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
python3 tests/gpu_timer_check.py flush-kind > "$out/flush-kind.txt" 2>&1; echo "flush-kind exit $?"
cat "$out/flush-kind.txt"
for n in 1 2 3; do
  python3 -m specbench "${A[@]}" -o "$out/write-$n" > "$out/write-$n.txt" 2>&1; echo "write-$n exit $?"
  python3 results/h200-flush-kind/flush_read.py "${A[@]}" -o "$out/read-$n" > "$out/read-$n.txt" 2>&1
  echo "read-$n exit $?"
done
for kind in write read; do
  python3 tests/gpu_timer_check.py spread "$out/$kind-1" "$out/$kind-2" "$out/$kind-3" > "$out/spread-$kind.txt" 2>&1
  echo "$kind:"; tail -n 1 "$out/spread-$kind.txt"
done
