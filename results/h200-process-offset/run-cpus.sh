#!/usr/bin/env bash
# The same study with each process pinned (before CUDA starts) to the CPUs on the GPU's NUMA node or off it,
# alternating, plus processes left where the scheduler puts them (recording the CPU each started on); and the
# machine's topology. From the repository root with OUT set, on one GPU.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
PROCESSES=${PROCESSES:-5}
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,clocks.max.sm,pci.bus_id --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD; nproc; date -u; nvidia-smi topo -m; lscpu; numactl -H
  for f in /sys/bus/pci/devices/*/numa_node; do d=$(dirname "$f"); grep -q 0x10de "$d/vendor" 2>/dev/null && \
    echo "$d numa_node $(cat "$f") local_cpulist $(cat "$d/local_cpulist")"; done; } > "$out/machine.txt" 2>&1
python3 tests/gpu_timer_check.py process > /dev/null 2> "$out/warm-up.txt"  # compiles into the Triton cache
for n in $(seq 1 "$PROCESSES"); do
  for cpus in local far any; do
    python3 tests/gpu_timer_check.py process --cpus $cpus >> "$out/processes.jsonl" 2>> "$out/stderr.txt"
  done
done
python3 tests/gpu_timer_check.py offsets "$out/processes.jsonl" | tee "$out/offsets.txt"
