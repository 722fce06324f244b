#!/usr/bin/env bash
# What is to make this folder, on the GPU machine from the repository root with OUT set (one call):
#   bash results/h200-placements/run.sh diagnose
#     1. tests/gpu_timer_check.py scratch: with a row's inputs fixed, its host-free median across six
#        placements of the Triton kernels' scratch and arrival counters, then of the L2 flush buffer (B = 1, 8;
#        one-hot and logit drafts; two rounds each).
#     2. The issue-9 list's B = 1, 8 group (K = 3, Llama 3, greedy and probabilistic, every draft and target
#        form, L = 3 and all accepted, host-free and graph, 200 ms a row), five processes one after another:
#        old-1, new-1, old-2, new-2, new-3. "old" is the code before scratch sets (.old/specbench_old, a copy
#        of 1620a2b's specbench, whose chain kernels and timer are this commit's: only inputs are placed);
#        "new" is the working tree (each placement also takes its own scratch set). Then the spread of the
#        old runs and of the new runs (tests/gpu_timer_check.py spread: worst p80/p20 and ratio of medians).
#   bash results/h200-placements/run.sh validate
#     The same list in three processes after 72afbca (each placement flushes its own window too), and their spread.
set -uo pipefail
export PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
small="kernels --no-charts --max-ms 200 --impl triton --mode greedy,probabilistic --draft logits,probs,none
       --target logits,probs -l 3,full --timer host-free,graph -b 1,8 -k 3 --model llama3"
timed() {  # timed NAME COMMAND...: run, log, and print the exit status and wall seconds
  local name=$1; shift; local start=$SECONDS
  "$@" > "$out/$name.txt" 2>&1; echo "$name exit $? wall $((SECONDS - start)) s"
}
case ${1:-} in
  validate)  # after 72afbca (each placement also flushes its own window of the flush buffer): the same small
             # list in three processes, one after another, and their spread
    for run in flush-1 flush-2 flush-3; do
      PYTHONPATH=$PWD timed $run python3 -m specbench --format plain $small -o "$out/$run"
    done
    PYTHONPATH=$PWD python3 tests/gpu_timer_check.py spread "$out/flush-1" "$out/flush-2" "$out/flush-3" \
      > "$out/spread-flush.txt" 2>&1
    tail -n 1 "$out/spread-flush.txt" ;;
  diagnose)
    PYTHONPATH=$PWD timed scratch python3 tests/gpu_timer_check.py scratch
    for run in old-1 new-1 old-2 new-2 new-3; do
      if [[ $run == old-* ]]; then
        PYTHONPATH=$PWD/.old timed $run python3 -m specbench_old --format plain $small -o "$out/$run"
      else
        PYTHONPATH=$PWD timed $run python3 -m specbench --format plain $small -o "$out/$run"
      fi
    done
    PYTHONPATH=$PWD python3 tests/gpu_timer_check.py spread "$out/old-1" "$out/old-2" > "$out/spread-old.txt" 2>&1
    PYTHONPATH=$PWD python3 tests/gpu_timer_check.py spread "$out/new-1" "$out/new-2" "$out/new-3" \
      > "$out/spread-new.txt" 2>&1
    tail -n 1 "$out/spread-old.txt" "$out/spread-new.txt" ;;
  *) echo "usage: run.sh diagnose|validate" >&2; exit 2 ;;
esac
