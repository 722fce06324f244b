#!/usr/bin/env bash
# Issue "Timings that repeat": one process in four read every host-free B <= 8 row 150-200 ns slower
# (../h200-two-states/). Is that offset the timer's own (a tiny kernel shows it too) or the step's, and does a
# stream of the process's own (instead of torch's default stream) remove it? From the repository root with OUT
# set, on one GPU: `tests/gpu_timer_check.py process` in PROCESSES processes of each of VARIANTS, alternating
# (torch's default stream, a side stream, or the placements spread over N streams: xN), then each process's
# offset row by row.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
PROCESSES=${PROCESSES:-8}
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD; nproc; date -u; } > "$out/machine.txt" 2>&1
python3 tests/gpu_timer_check.py process > /dev/null 2> "$out/warm-up.txt"  # compiles into the Triton cache
for n in $(seq 1 "$PROCESSES"); do
  for variant in ${VARIANTS:-default side}; do  # default, side (one stream of its own), or xN (N streams)
    case $variant in x*) args="--streams ${variant#x}" ;; *) args="--stream $variant" ;; esac
    python3 tests/gpu_timer_check.py process $args >> "$out/processes.jsonl" 2>> "$out/stderr.txt"
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >> "$out/clocks.txt"
  done
done
python3 tests/gpu_timer_check.py offsets "$out/processes.jsonl" | tee "$out/offsets.txt"
