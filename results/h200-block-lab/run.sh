#!/usr/bin/env bash
# What is to make this folder (issue 22's lab table: verification methods side by side), on the GPU machine from the
# repository root with OUT set, and with .sgl/ carried (SGLang 0.5.23's kernel file and an empty sglang/__init__.py,
# kept out of git: see kernels below):
#   PYTHONPATH=$PWD:$PWD/.sgl bash results/h200-block-lab/run.sh time
#       specbench kernels --mode probabilistic --method token,block --timer graph --max-ms 40, float32, one results
#       folder ($OUT/lab, --resume), on the issue's three shapes: B=64 K=4 --model qwen3, B=256 K=7 --model qwen3,
#       B=512 K=7 --model llama3; each shape and form once with target and draft both logits, then both probs:
#       (a) natural inputs (--inputs natural --draft-noise 1), --impl ${NATURAL_IMPLS:-triton,sglang}, $OUT/natural-*.txt;
#       (b) planned inputs -l ${LENGTHS:-3,full}, --impl ${PLANNED_IMPLS:-triton}, $OUT/planned-*.txt.
#       BUDGET (default 135 s): an invocation that would start later is skipped, and one still running at BUDGET + 10 s
#       gets SIGINT (finished rows stay in $OUT/lab). Over budget: LENGTHS=3 drops (b)'s full rows first.
#   PYTHONPATH=$PWD:$PWD/.sgl bash results/h200-block-lab/run.sh floor
#       results/h200-block-lab/floor.py --show 3 on the same cases: the bytes the token rule, block as the contract
#       writes it and the least an exact block reads, and each one's DRAM floor at the measured copy bandwidth.
#
# sglang is the built-in adapter (specbench/implementations/adapters.py): SGLang's chain_speculative_sampling_triton,
# the token rule and block_verification=True, loaded from .sgl/ by path; its uniforms are drawn with torch.rand each
# step, as SGLang's server draws them, so on natural inputs its accepted counts are its own draws (one sample per
# request: its `measured L` estimates the rule's expected length, which `expected L` gives exactly). It takes
# probabilities: on a logits case they are converted outside the timed call, so its logits rows time the same work
# as its probs rows; compare them with triton's probs rows (triton's logits rows include the softmax statistics a
# caller holding logits pays). Planned inputs fix acceptance whatever the rule: block there accepts what token
# accepts, and its rows show only the price of the rule's extra reads (natural inputs show its gain).
set -uo pipefail
export PYTHONPATH=$PWD:$PWD/.sgl PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
budget=${BUDGET:-135}
shapes=("64 4 qwen3" "256 7 qwen3" "512 7 llama3")

lab() {  # lab NAME ARGS...: one kernels invocation into $out/lab, its stdout in $out/NAME.txt, unless out of time
  local name=$1; shift
  if (( SECONDS >= budget )); then echo "$name skipped at ${SECONDS}s (BUDGET=$budget)"; return; fi
  timeout -s INT $(( budget + 10 - SECONDS )) $S kernels --no-charts --mode probabilistic --method token,block \
    --dtype float32 --timer graph --max-ms 40 -o "$out/lab" --resume "$@" > "$out/$name.txt" 2>&1
  echo "$name exit $? at ${SECONDS}s"
}

case ${1:-} in
  time)
    for form in logits probs; do
      for shape in "${shapes[@]}"; do
        read -r b k model <<< "$shape"
        lab natural-$form-b$b-k$k -b $b -k $k --model $model --draft $form --target $form --inputs natural \
          --draft-noise 1 --impl ${NATURAL_IMPLS:-triton,sglang}
      done
    done
    for form in logits probs; do
      for shape in "${shapes[@]}"; do
        read -r b k model <<< "$shape"
        lab planned-$form-b$b-k$k -b $b -k $k --model $model --draft $form --target $form -l "${LENGTHS:-3,full}" \
          --impl ${PLANNED_IMPLS:-triton}
      done
    done
    grep -h "FAIL\|skipped" "$out"/natural-*.txt "$out"/planned-*.txt | cut -c1-200 | head -20 ;;
  floor)
    python3 results/h200-block-lab/floor.py --show 3 > "$out/floor.txt" 2>&1
    echo "floor exit $?"; grep -v "^    request" "$out/floor.txt" | head -80 ;;
  *) echo "usage: run.sh time|floor" >&2; exit 2 ;;
esac
