#!/usr/bin/env bash
# The split histogram path's launch variants (issue 20): its last level counted by atomics (-atomic; the launcher's
# own since this folder) or by tl.histogram (-noatomic, the launcher's before), and its programs taking N slices of
# a row in turn (-slicesN), beside the launcher's own path (`triton`), on the GPU machine from the repository root
# with OUT set:
#   bash results/h200-histogram-variants/run.sh warm      # every shape of `time` at --max-ms 1, all at once (compiled)
#   bash results/h200-histogram-variants/run.sh time      # each of KNOBS (default top_p 0.95) at B = BATCHES
#                                                         # (8 64 256 512), draft logits and probs, IMPLS side by side
#   bash results/h200-histogram-variants/run.sh check     # the truncation GPU tests
#   bash results/h200-histogram-variants/run.sh sanitize  # --part radix under memcheck, initcheck and racecheck,
#                                                         # SHARDS (default 9) shards each, every process at once,
#                                                         # LIMIT seconds each; VARIANTS=1: --histogram-variants;
#                                                         # the logs in sanitize.tgz (a call returns few files);
#                                                         # first every shard's workload without the tools, all
#                                                         # at once (to fill Triton's cache; on a fresh machine
#                                                         # none finished in 150 s, and the step needed a second
#                                                         # call on the still-warm machine: default-sanitize/)
# With SITE set, that folder comes first on PYTHONPATH (another Triton: results/h200-triton39/run.sh).
set -uo pipefail
export PYTHONPATH=${SITE:+$SITE:}$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
H=triton-histogram-4096x1024x4
impls=${IMPLS:-triton,$H-atomic,$H-slices2,$H-slices4,$H-atomic-slices2,$H-atomic-slices4}
IFS=';' read -ra knobs <<< "${KNOBS:---top-p 0.95}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git log -1 --format='commit %H'; date -u; } > "$out/machine.txt" 2>&1
shape_of() {
  case $1 in
    1|8) echo "-k 3 --model llama3" ;;
    16|32|64) echo "-k 4 --model qwen3" ;;
    128|256) echo "-k 7 --model qwen3" ;;
    512) echo "-k 7 --model llama3" ;;
  esac
}
K="$S kernels --no-charts --timer graph --mode probabilistic --target logits -l 3 --draft logits,probs"
for step in "$@"; do
  case $step in
    warm)
      scratch=$(mktemp -d)
      for knob in "${knobs[@]}"; do
        for b in ${BATCHES:-8 64 256 512}; do
          for impl in ${impls//,/ }; do
            name=$(echo "$knob $b $impl" | tr -d ' -')
            timeout ${LIMIT:-200} $K $knob --max-ms 1 --impl $impl -b $b $(shape_of $b) -o $scratch/$name \
              > $scratch/$name.txt 2>&1 &
          done
        done
      done
      wait; echo "warm done: $(cat $scratch/*.txt | grep -c ' ok *$') rows ok" ;;
    time)
      for knob in "${knobs[@]}"; do
        name=$(echo "$knob" | tr -d ' -')
        for b in ${BATCHES:-8 64 256 512}; do
          timeout ${LIMIT:-150} $K $knob --max-ms 40 --impl $impls -b $b $(shape_of $b) -o $out/time-$name --resume \
            >> "$out/time-$name.txt" 2>&1
          echo "kernels B=$b $knob exit $?"
        done
      done ;;
    check)
      timeout ${LIMIT:-240} python3 -m pytest -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_launch.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt" ;;
    sanitize)
      shards=${SHARDS:-9}
      mkdir -p "$out/s"
      for shard in $(seq 1 $shards); do
        timeout ${WARM_LIMIT:-240} python3 tests/sanitize_kernels.py --workload --part radix \
          ${VARIANTS:+--histogram-variants} --shard $shard/$shards > "$out/s/warm-$shard.txt" 2>&1 &
      done
      wait; echo "workloads without the tools: $(grep -l 'workload done' "$out"/s/warm-*.txt | wc -l) of $shards done"
      for tool in memcheck initcheck racecheck; do
        for shard in $(seq 1 $shards); do
          timeout ${LIMIT:-500} python3 tests/sanitize_kernels.py --part radix ${VARIANTS:+--histogram-variants} \
            --tools $tool --shard $shard/$shards --out "$out/s/radix-$tool-$shard" \
            > "$out/s/radix-$tool-$shard.txt" 2>&1 &
        done
      done
      wait
      for f in "$out"/s/radix-*.txt; do echo "$(basename $f .txt): $(tail -n 1 $f)"; done \
        | tee "$out/sanitize-summary.txt"
      tar czf "$out/sanitize.tgz" -C "$out" s && rm -rf "$out/s" ;;
    *) echo "usage: run.sh warm|time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
