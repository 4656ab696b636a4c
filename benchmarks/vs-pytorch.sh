#!/usr/bin/env bash
# seqlab against the PyTorch reference, side by side on the same batches.
#
# Both run the reference configs (benchmarks/configs/ref-*) and the shipped
# taggers (experiments/configs/bilstm-crf.toml, attention-relative-crf.toml;
# MODELS picks) on the batches seqlab writes with `bench train --dump`:
# ROUNDS rounds, each timing every workload (train, predict) × model once per
# implementation:
#   seqlab            seqlab at THREADS threads
#   pytorch           PyTorch at THREADS threads, OpenMP's default wait policy
#   pytorch-passive   the same with OMP_WAIT_POLICY=PASSIVE
#   pytorch-workers   predict only: THREADS single-threaded PyTorch processes,
#                     one batch each at a time (seqlab's inference runs
#                     batches concurrently)
# and, where the CPU has AVX-512 BF16 (BF16=auto; BF16=0 leaves them out),
# predict only, bf16 products with f32 sums on both sides:
#   seqlab-bf16             seqlab --precision bf16
#   pytorch-bf16-autocast   PyTorch under torch.autocast(dtype=bfloat16)
#   pytorch-bf16-cast       PyTorch with the encoder's weights cast to bf16
# The order of the implementations rotates from round to round. Writes
# benchmarks/out/raw.jsonl and benchmarks/results.md (medians, seqlab over
# the faster of PyTorch's two OpenMP settings, every round, the machine).
#
#   ROUNDS=5 THREADS=2 DATA=../shared/datasets/conll2003 benchmarks/vs-pytorch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
STEPS=${STEPS:-50}
DATA=${DATA:-}
SEQLAB=${SEQLAB:-target/release/seqlab}
BF16=${BF16:-auto}
if [ "$BF16" = auto ]; then
    if grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then BF16=1; else BF16=0; fi
fi
VENV=benchmarks/pytorch/.venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -r benchmarks/pytorch/requirements.txt
fi
"$VENV/bin/python" benchmarks/pytorch/bench.py selftest >&2
unset OMP_WAIT_POLICY OMP_NUM_THREADS
out=benchmarks/out
mkdir -p "$out"
raw="$out/raw.jsonl"
: > "$raw"
data_args=()
if [ -n "$DATA" ]; then data_args=(--data "$DATA"); fi
# The reference configs (benchmarks/configs), then the shipped taggers as
# shipped (experiments/configs).
MODELS=${MODELS:-ref-bilstm-crf ref-attention-crf bilstm-crf attention-relative-crf}
config() { # model → its config file
    if [ -e "benchmarks/configs/$1.toml" ]; then echo "benchmarks/configs/$1.toml"; else echo "experiments/configs/$1.toml"; fi
}
for model in $MODELS; do
    "$SEQLAB" --threads "$THREADS" bench train --config "$(config "$model")" \
        "${data_args[@]}" --steps "$STEPS" --dump "$out/batches-$model.json"
done
impls=(seqlab pytorch pytorch-passive pytorch-workers)
if [ "$BF16" = 1 ]; then impls+=(seqlab-bf16 pytorch-bf16-autocast pytorch-bf16-cast); fi
measure() { # impl model workload cfg
    local py=("$VENV/bin/python" -W ignore benchmarks/pytorch/bench.py "$3" --config "$4" --batches "$out/batches-$2.json")
    case "$1" in
        seqlab) "$SEQLAB" --threads "$THREADS" bench "$3" --config "$4" "${data_args[@]}" --steps "$STEPS" --json ;;
        pytorch) "${py[@]}" --threads "$THREADS" ;;
        pytorch-passive) OMP_WAIT_POLICY=PASSIVE "${py[@]}" --threads "$THREADS" ;;
        pytorch-workers) "${py[@]}" --workers "$THREADS" ;;
        seqlab-bf16) "$SEQLAB" --threads "$THREADS" --precision bf16 bench "$3" --config "$4" "${data_args[@]}" --steps "$STEPS" --json ;;
        pytorch-bf16-autocast) "${py[@]}" --threads "$THREADS" --bf16 autocast ;;
        pytorch-bf16-cast) "${py[@]}" --threads "$THREADS" --bf16 cast ;;
    esac
}
for round in $(seq 1 "$ROUNDS"); do
    k=$(( (round - 1) % ${#impls[@]} ))
    order=("${impls[@]:k}" "${impls[@]:0:k}")
    for model in $MODELS; do
        cfg=$(config "$model")
        for workload in train predict; do
            for impl in "${order[@]}"; do
                case "$impl" in pytorch-workers | *bf16*) [ "$workload" = train ] && continue ;; esac
                line=$(measure "$impl" "$model" "$workload" "$cfg")
                echo "{\"round\": $round, \"impl\": \"$impl\", \"model\": \"$model\", \"result\": $line}" >> "$raw"
                echo "round $round $model $workload $impl: $(echo "$line" | sed -E 's/.*"tokens_per_second": ?([0-9.]+).*/\1/') tokens/s" >&2
            done
        done
    done
done
trap 'rm -f benchmarks/results.md.tmp' EXIT
"$VENV/bin/python" benchmarks/summarize.py "$raw" --data "${DATA:-generated}" > benchmarks/results.md.tmp
mv benchmarks/results.md.tmp benchmarks/results.md
cat benchmarks/results.md
