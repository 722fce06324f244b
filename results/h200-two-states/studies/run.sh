#!/usr/bin/env bash
# The studies of this folder, each its own call on a fresh H200, from the repository root (the code each ran is in
# ../README.md): toggle-1 to -5 are `toggle` as it stood at each call (the later calls added ways).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
python3 tests/gpu_timer_check.py outputs > "$out/outputs.txt" 2>&1
python3 tests/gpu_timer_check.py backlog > "$out/backlog.txt" 2>&1
python3 tests/gpu_timer_check.py toggle > "$out/toggle.txt" 2>&1
for w in 3 2; do
  python3 tests/gpu_timer_check.py placement --warmup $w > "$out/placement-warmup-$w.txt" 2>&1
  python3 tests/gpu_timer_check.py code --warmup $w > "$out/code-warmup-$w.txt" 2>&1
done
