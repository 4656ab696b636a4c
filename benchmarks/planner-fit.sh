#!/usr/bin/env bash
# The memory planner's fit: `seqlab bench memory` (the training step that
# `seqlab train` runs, each cell a fresh process) at 37 settings, then the
# planner's coefficients fitted to the measured peaks (fit_planner.py).
#   benchmarks/planner-fit.sh [OUT.jsonl]        (default /tmp/planner-fit.jsonl)
#   SEQLAB=path/to/seqlab benchmarks/planner-fit.sh   (a binary already built)
# Takes 10-20 minutes on 2 cores; needs about 6 GiB of memory at its largest cell.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/planner-fit.jsonl}"
: > "$out"
seqlab=${SEQLAB:-}
if [ -z "$seqlab" ]; then
    cargo build --release --locked -q -p runner
    seqlab=target/release/seqlab
fi
c=experiments/configs
run() { "$seqlab" bench memory --json "$@" | tee -a "$out"; }
# BiLSTM-CRF and attention-CRF (dense, chunked, local, relative): batch 8 and 32 x L 32, 128, 512.
run --config $c/bilstm-crf.toml --batch 8,32 --seq-len 32,128,512
run --config $c/attention-crf.toml --batch 8,32 --seq-len 32,128,512
run --config $c/attention-crf.toml --set model.encoder.attention.impl=chunked --batch 8,32 --seq-len 32,128,512
run --config $c/attention-crf.toml --set model.encoder.attention.impl=local --batch 8,32 --seq-len 32,128,512
run --config $c/attention-relative-crf.toml --batch 8,32 --seq-len 32,128,512
# Wider models: attention d_model 512 with 8 heads, BiLSTM hidden 100; batch 4 to 64, L 64 to 2048.
wide=(--set model.encoder.attention.d_model=512 --set model.encoder.attention.heads=8)
run --config $c/attention-crf.toml "${wide[@]}" --batch 4 --seq-len 2048
run --config $c/attention-crf.toml "${wide[@]}" --batch 8 --seq-len 1024
run --config $c/attention-crf.toml "${wide[@]}" --batch 16 --seq-len 256
run --config $c/attention-crf.toml "${wide[@]}" --set model.encoder.attention.impl=chunked --batch 4 --seq-len 2048
run --config $c/bilstm-crf.toml --set model.encoder.bilstm.hidden=100 --batch 64 --seq-len 64
run --config $c/bilstm-crf.toml --set model.encoder.bilstm.hidden=100 --batch 16 --seq-len 512
run --config $c/bilstm-crf.toml --set model.encoder.bilstm.hidden=100 --batch 4 --seq-len 2048
python3 benchmarks/fit_planner.py "$out" 0.2
