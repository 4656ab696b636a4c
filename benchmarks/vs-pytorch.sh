#!/usr/bin/env bash
# seqlab against the PyTorch reference, side by side on the same batches.
#
# Both run the reference configs (benchmarks/configs) on the batches seqlab
# writes with `bench train --dump`: ROUNDS rounds, each timing every
# workload (train, predict) × model (bilstm, attention) once per
# implementation:
#   seqlab            seqlab at THREADS threads
#   pytorch           PyTorch at THREADS threads, OpenMP's default wait policy
#   pytorch-passive   the same with OMP_WAIT_POLICY=PASSIVE
#   pytorch-workers   predict only: THREADS single-threaded PyTorch processes,
#                     one batch each at a time (seqlab's inference runs
#                     batches concurrently)
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
for model in bilstm attention; do
    "$SEQLAB" --threads "$THREADS" bench train --config "benchmarks/configs/ref-$model-crf.toml" \
        "${data_args[@]}" --steps "$STEPS" --dump "$out/batches-$model.json"
done
impls=(seqlab pytorch pytorch-passive pytorch-workers)
measure() { # impl model workload cfg
    local py=("$VENV/bin/python" -W ignore benchmarks/pytorch/bench.py "$3" --config "$4" --batches "$out/batches-$2.json")
    case "$1" in
        seqlab) "$SEQLAB" --threads "$THREADS" bench "$3" --config "$4" "${data_args[@]}" --steps "$STEPS" --json ;;
        pytorch) "${py[@]}" --threads "$THREADS" ;;
        pytorch-passive) OMP_WAIT_POLICY=PASSIVE "${py[@]}" --threads "$THREADS" ;;
        pytorch-workers) "${py[@]}" --workers "$THREADS" ;;
    esac
}
for round in $(seq 1 "$ROUNDS"); do
    k=$(( (round - 1) % ${#impls[@]} ))
    order=("${impls[@]:k}" "${impls[@]:0:k}")
    for model in bilstm attention; do
        cfg="benchmarks/configs/ref-$model-crf.toml"
        for workload in train predict; do
            for impl in "${order[@]}"; do
                if [ "$impl" = pytorch-workers ] && [ "$workload" = train ]; then continue; fi
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
