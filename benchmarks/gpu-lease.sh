#!/usr/bin/env bash
# A lent GPU, used in one call of a few minutes. Two steps:
#
#   benchmarks/gpu-lease.sh prepare   # here, no GPU needed (~10 min on 2 cores)
#       a `--features cuda` release build of seqlab, stripped and
#       xz-compressed (~10 MB), and a copy of DATA (default
#       ../shared/datasets/resume-ner, for gpu.sh's f1 section) into
#       benchmarks/out/lease/ (ignored by git; carried to the GPU machine).
#
#   benchmarks/gpu-lease.sh run       # on the GPU machine, from the repo root
#       unpacks that seqlab and runs benchmarks/gpu.sh sized to finish in
#       DEADLINE seconds (default 530): cold start (empty, warm kernel
#       cache), throughput of both reference taggers beside PyTorch (30
#       warm-up + 50 timed batches), `seqlab train` of the shipped BiLSTM-CRF
#       on DATA for the epochs that end past 1.5 minutes, and one attention
#       layer at L 512 and 4096 (dense, chunked, PyTorch). Results go to OUT
#       (8 files at most: what a device call brings back).
#
# Dry run of `run` without a GPU, after `prepare` (3 min 20 s on 2 cores;
# the deadline skips attention at L 4096, which the CPU takes long over):
#   PATH=$PWD/benchmarks/dry-run:$PATH DEVICE=cpu DEADLINE=200 OUT=/tmp/gpu-dry benchmarks/gpu-lease.sh run
# The f1 section's test F1 is compared with the same config, seed and
# epochs trained on the CPU (`seqlab train … --epochs N`).
set -uo pipefail
cd "$(dirname "$0")/.."
LEASE=benchmarks/out/lease

case "${1:-}" in
prepare)
    DATA=${DATA:-../shared/datasets/resume-ner}
    set -e
    cargo build --release --locked -p runner --features cuda
    mkdir -p "$LEASE"
    strip -o "$LEASE/seqlab" target/release/seqlab
    xz -T0 -6 -f "$LEASE/seqlab"
    rm -rf "$LEASE/data" && mkdir -p "$LEASE/data"
    cp -r "$DATA" "$LEASE/data/"
    du -sh "$LEASE"
    echo "carry $LEASE; run: bash benchmarks/gpu-lease.sh run"
    ;;
run)
    [ -e "$LEASE/seqlab.xz" ] || { echo "no $LEASE/seqlab.xz: run '$0 prepare' first" >&2; exit 1; }
    echo "start $(date -u +%FT%TZ)"
    bin=$(mktemp -d)
    xz -dc "$LEASE/seqlab.xz" > "$bin/seqlab" 2>/dev/null ||
        python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
            "$LEASE/seqlab.xz" "$bin/seqlab" || exit 1
    chmod +x "$bin/seqlab"
    # NVRTC, which CubeCL compiles kernels with, where the CUDA toolkit keeps it.
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    ldd "$bin/seqlab" | grep -i 'not found'
    "$bin/seqlab" --version
    data=$(find "$LEASE/data" -mindepth 1 -maxdepth 1 -type d | head -1)
    batches=$(mktemp -d)
    SEQLAB="$bin/seqlab" OUT=${OUT:-benchmarks/out/gpu} BATCHES_DIR="$batches" DEADLINE=${DEADLINE:-530} \
        STEPS=50 WARMUP=30 LENGTHS="512 4096" ATTENTION_IMPLS="dense chunked" \
        SECTIONS="coldstart throughput f1 attention" F1_DATA="$data" F1_MINUTES=1.5 F1_LIMIT=200 \
        bash benchmarks/gpu.sh
    echo "end $(date -u +%FT%TZ)"
    ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
