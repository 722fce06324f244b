#!/usr/bin/env bash
# Does a graph row depend on what ran before it in its process? Greedy B=1 K=3 L=3 (llama3) graph rows, target
# logits then probabilities in one process, and probabilities alone, with timing._capture before the fix
# (capture_before.py beside this script: captured on torch's own capture stream) and after it (the warm-up's stream).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:?set OUT}
A=(--format plain kernels --no-charts --impl triton --mode greedy -l 3 --timer graph --shapes 1x3@llama3)
for variant in before after; do
  for targets in logits,probs probs; do
    if [ $variant = before ]; then run=(python3 results/devices-x2/capture_before.py); else run=(python3 -m specbench); fi
    "${run[@]}" "${A[@]}" --target $targets -o "$out/order-$variant-$targets" > "$out/order-$variant-$targets.txt" 2>&1
    echo "$variant, targets $targets (exit $?):"; grep -E "^triton" "$out/order-$variant-$targets.txt" | awk '{print "   ", $0}' | cut -c1-110
  done
done
