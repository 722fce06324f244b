#!/usr/bin/env bash
# Is the spread of host-free rows at B <= 8 between processes the sampling error of their ten placements?
# Each process draws its placements afresh (other addresses), so a row's mean over ten of them varies from
# process to process by the placements' own spread over sqrt(10); forty should halve it. From the repository
# root with OUT set, on one GPU:  bash results/h200-placement-count/run.sh
# The issue-9 B <= 8 group, host-free only, 400 ms a row, three processes each with 10 and with 40 placements
# (--placements, which sets as many flush windows), alternating; then spread.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
A=(--format plain kernels --no-charts --impl triton --mode greedy,probabilistic --draft logits,probs,none
   --target logits,probs -l 3,full --timer host-free --max-ms 400 --shapes 1x3@llama3,8x3@llama3)
python3 -m specbench "${A[@]}" -o "$out/warm-up" > "$out/warm-up.txt" 2>&1; echo "warm-up exit $?"
for n in 1 2 3; do
  for count in 10 40; do
    start=$SECONDS
    python3 -m specbench "${A[@]}" --placements $count -o "$out/p$count-$n" > "$out/p$count-$n.txt" 2>&1
    echo "p$count-$n exit $? wall $((SECONDS - start)) s"
  done
done
for count in 10 40; do
  python3 tests/gpu_timer_check.py spread "$out/p$count-1" "$out/p$count-2" "$out/p$count-3" > "$out/spread-p$count.txt" 2>&1
  echo "$count placements:"; tail -n 1 "$out/spread-p$count.txt"
done
