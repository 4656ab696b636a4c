#!/usr/bin/env bash
# Tokens/s of each position bias on the CPU: `bench train` and `bench predict`
# of attention-relative-crf.toml changed in its position only, on DATA's
# training batches, ROUNDS rounds, the order of the positions rotating from
# round to round. Prints one line per run and the median tokens/s of each
# position with its ratio to the shipped `relative`.
#
#   benchmarks/positions.sh SEQLAB DATA
#   ROUNDS=3 THREADS=1 STEPS=50 POSITIONS="relative rope alibi t5 sinusoidal learned" \
#     benchmarks/positions.sh target/release/seqlab ../shared/datasets/resume-ner
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 data=$2
ROUNDS=${ROUNDS:-3} THREADS=${THREADS:-1} STEPS=${STEPS:-50}
read -r -a positions <<< "${POSITIONS:-relative rope alibi t5 sinusoidal learned}"
raw=$(mktemp)
n=${#positions[@]}
for round in $(seq 1 "$ROUNDS"); do
    for workload in train predict; do
        for i in $(seq 0 $((n - 1))); do
            p=${positions[$(( (i + round - 1) % n ))]}
            tps=$("$bin" --threads "$THREADS" bench "$workload" --config experiments/configs/attention-relative-crf.toml \
                --set "model.encoder.attention.position=$p" --data "$data" --steps "$STEPS" --json \
                | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["tokens_per_second"])')
            echo "round $round $workload $p $tps" | tee -a "$raw"
        done
    done
done
python3 - "$raw" "${positions[0]}" <<'PY'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    _, r, workload, p, tps = line.split()
    cells.setdefault(workload, {}).setdefault(p, []).append(float(tps))
base = sys.argv[2]
print(f"{'workload':<8} {'position':<11} {'median tok/s':>12} {'vs ' + base:>12}  per round")
for workload, s in cells.items():
    b = statistics.median(s[base])
    for p, v in s.items():
        m = statistics.median(v)
        print(f"{workload:<8} {p:<11} {m:>12.0f} {m / b:>12.3f}  {' '.join(f'{x:.0f}' for x in v)}")
PY
