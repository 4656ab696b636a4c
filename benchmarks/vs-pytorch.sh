#!/usr/bin/env bash
# seqlab against the PyTorch reference, side by side on the same batches.
#
# Both run the reference configs (benchmarks/configs) on the batches seqlab
# writes with `bench train --dump`: ROUNDS rounds, each timing every
# workload (train, predict) × model (bilstm, attention) once per
# implementation, the order of the two alternating from round to round.
# Writes benchmarks/out/raw.jsonl and benchmarks/results.md (medians, the
# seqlab/PyTorch ratio, the machine).
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
# PyTorch's OpenMP threads spin while waiting by default; on a machine with
# as many busy threads as cores that collapses its throughput.
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS="$THREADS"
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
for round in $(seq 1 "$ROUNDS"); do
    if (( round % 2 )); then order="seqlab pytorch"; else order="pytorch seqlab"; fi
    for model in bilstm attention; do
        cfg="benchmarks/configs/ref-$model-crf.toml"
        for workload in train predict; do
            for impl in $order; do
                if [ "$impl" = seqlab ]; then
                    line=$("$SEQLAB" --threads "$THREADS" bench "$workload" --config "$cfg" "${data_args[@]}" --steps "$STEPS" --json)
                else
                    line=$("$VENV/bin/python" -W ignore benchmarks/pytorch/bench.py "$workload" --config "$cfg" \
                        --batches "$out/batches-$model.json" --threads "$THREADS")
                fi
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
