#!/usr/bin/env bash
# Two seqlab binaries side by side (a change against the commit before it):
# `bench train` and `bench predict` of both reference taggers on the same
# data, ROUNDS rounds, the order of the two binaries alternating from round
# to round. Prints one line per run and the median tokens/s of each cell.
#
#   benchmarks/ab-seqlab.sh OLD_BINARY NEW_BINARY [DATA]
#   ROUNDS=3 THREADS=2 STEPS=50 benchmarks/ab-seqlab.sh /tmp/seqlab-old target/release/seqlab ../shared/datasets/conll2003
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 data=${3:-}
ROUNDS=${ROUNDS:-3} THREADS=${THREADS:-2} STEPS=${STEPS:-50}
data_args=()
if [ -n "$data" ]; then data_args=(--data "$data"); fi
raw=$(mktemp)
for round in $(seq 1 "$ROUNDS"); do
    if (( round % 2 )); then order="old new"; else order="new old"; fi
    for model in bilstm attention; do
        for workload in train predict; do
            for side in $order; do
                bin=$old; [ "$side" = new ] && bin=$new
                tps=$("$bin" --threads "$THREADS" bench "$workload" --config "benchmarks/configs/ref-$model-crf.toml" \
                    "${data_args[@]}" --steps "$STEPS" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["tokens_per_second"])')
                echo "round $round $model $workload $side $tps" | tee -a "$raw"
            done
        done
    done
done
python3 - "$raw" <<'PY'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    _, r, model, workload, side, tps = line.split()
    cells.setdefault((model, workload), {}).setdefault(side, []).append(float(tps))
print(f"{'tagger':<10} {'workload':<8} {'old tok/s':>10} {'new tok/s':>10} {'new/old':>8}  per round")
for (model, workload), s in cells.items():
    o, n = statistics.median(s["old"]), statistics.median(s["new"])
    rounds = " ".join(f"{b / a:.2f}" for a, b in zip(s["old"], s["new"]))
    print(f"{model:<10} {workload:<8} {o:>10.0f} {n:>10.0f} {n / o:>8.3f}  {rounds}")
PY
