#!/usr/bin/env bash
# seqlab on a CUDA GPU, beside PyTorch on the same GPU where a CUDA build of
# torch is importable (PYTHON, default python3; else benchmarks/pytorch/.venv).
#
# 0. Cold start: process start to the first finished training batch, with
#    an empty and with a warm kernel cache.
# 1. Throughput: `bench train` / `bench predict` of both reference taggers
#    (benchmarks/configs) on generated CoNLL-like batches (PyTorch times the
#    same batches: BATCHES_DIR/batches-{bilstm,attention}.json, written by
#    `seqlab bench train --dump` when missing).
# 2. One self-attention layer, forward + backward, batch 32 × 8 heads ×
#    d_model 512 at each length in LENGTHS: seqlab's dense, chunked and local
#    attention and PyTorch's nn.MultiheadAttention, one process per cell.
#    GPU memory is the device's `memory.used` (nvidia-smi, sampled every
#    20 ms) at its highest during the process, less the idle reading: the
#    same yardstick for both, CUDA context and allocator pools included.
#
# Every measurement has its own time limit and the whole run a DEADLINE
# (seconds), so a slow first kernel compilation cannot eat the rest; results
# go to OUT (default benchmarks/out/gpu) as JSON lines as they come, and
# OUT/summary.md at the end.
#
#   SEQLAB=target/release/seqlab benchmarks/gpu.sh      # a `--features cuda` build
#   PATH=benchmarks/dry-run:$PATH DEVICE=cpu STEPS=3 LENGTHS=64 benchmarks/gpu.sh   # dry run, no GPU (~1 min)
set -uo pipefail
cd "$(dirname "$0")/.."
SEQLAB=${SEQLAB:-target/release/seqlab}
OUT=${OUT:-benchmarks/out/gpu}
STEPS=${STEPS:-50}
LENGTHS=${LENGTHS:-512 2048 4096}
DEADLINE=${DEADLINE:-480}
DEVICE=${DEVICE:-cuda}   # cpu: a dry run without a GPU, with PATH=benchmarks/dry-run:$PATH (a stand-in nvidia-smi)
BATCHES_DIR=${BATCHES_DIR:-$OUT}
PYTHON=${PYTHON:-python3}   # the one with torch; helpers run on python3
mkdir -p "$OUT" "$BATCHES_DIR"
started=$SECONDS
log="$OUT/log.txt"
: > "$log"
left() { echo $((DEADLINE - (SECONDS - started))); }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>>"$log" ||
    { echo "no GPU: nvidia-smi failed" | tee -a "$log"; exit 1; }
idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
echo "GPU: $(cat "$OUT/gpu.txt"); idle memory.used ${idle} MiB" | tee -a "$log"

torch_ok=0
if ! "$PYTHON" -c "import torch; assert torch.cuda.is_available()" 2>>"$log"; then
    PYTHON=benchmarks/pytorch/.venv/bin/python
    [ -x "$PYTHON" ] && "$PYTHON" -c "import torch; assert torch.cuda.is_available()" 2>>"$log" && torch_ok=1
else
    torch_ok=1
fi
echo "PyTorch with CUDA: $([ $torch_ok = 1 ] && "$PYTHON" -c 'import torch; print(torch.__version__)' || echo 'not available')" | tee -a "$log"

# Runs "$@" under `timeout` while sampling the GPU's memory.used; prints the
# command's last JSON line with "gpu_memory_mib" (peak less idle) added.
sampled() {
    local limit=$1; shift
    local samples
    samples=$(mktemp)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 20 > "$samples" 2>/dev/null &
    local sampler=$!
    local line
    line=$(timeout "$limit" "$@" 2>>"$log" | grep '^{' | tail -1)
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    local peak
    peak=$(sort -n "$samples" | tail -1)
    rm -f "$samples"
    if [ -z "$line" ]; then line="{\"error\": \"no result within ${limit} s (see log.txt)\"}"; fi
    echo "$line" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['gpu_memory_mib']=int('${peak:-0}' or 0)-int('$idle'); print(json.dumps(d))" 2>/dev/null ||
        echo "$line"
}

# 0. Cold start: seconds from process start to the first finished training
#    batch of the BiLSTM-CRF reference on generated data (`seqlab train
#    --verbose` prints when, with the kernels compiled and those loaded from
#    CubeCL's on-disk cache). In a fresh working directory whose cubecl.toml
#    keeps compiled kernels and autotune results there: first with both
#    caches empty, then again with them warm.
seqlab_abs=$(realpath "$SEQLAB")
root=$(pwd)
cold=$(mktemp -d)
printf '[compilation]\ncache = { file = "%s/kernels" }\n[autotune]\ncache = { file = "%s/autotune" }\n' "$cold" "$cold" > "$cold/cubecl.toml"
"$seqlab_abs" data toy --out "$cold/toy" --lang en >>"$log" 2>&1
for cache in empty warm; do
    [ "$(left)" -gt 30 ] || { echo "deadline: skipped cold start ($cache cache)" | tee -a "$log"; continue; }
    limit=$(( $(left) < 120 ? $(left) : 120 ))
    # In the background, stopped (SIGTERM: it writes a checkpoint and exits) once the line is out.
    (cd "$cold" && exec timeout "$limit" "$seqlab_abs" train --config "$root/benchmarks/configs/ref-bilstm-crf.toml" \
        --data toy --out "run-$cache" --device "$DEVICE" --epochs 1 --verbose > "train-$cache.log" 2>&1) &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && ! grep -q 'first batch done' "$cold/train-$cache.log" 2>/dev/null; do sleep 0.5; done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    cat "$cold/train-$cache.log" >> "$log"
    line=$(grep -m1 'first batch done' "$cold/train-$cache.log")
    echo "$line" | python3 -c "
import json, re, sys
line = sys.stdin.read().strip()
m = re.search(r'first batch done ([0-9.]+) s', line)
k = re.search(r'kernels compiled (\d+), loaded from the disk cache (\d+)', line)
d = {'cache': '$cache', 'seconds': float(m.group(1)) if m else None, 'line': line or 'no first batch within $limit s'}
if k: d.update(compiled=int(k.group(1)), loaded=int(k.group(2)))
print(json.dumps(d))" >> "$OUT/coldstart.jsonl"
    echo "cold start, $cache cache: ${line:-no first batch within $limit s}" | tee -a "$log"
done
rm -rf "$cold"

# 1. Throughput.
for model in bilstm attention; do
    cfg="benchmarks/configs/ref-$model-crf.toml"
    batches="$BATCHES_DIR/batches-$model.json"
    [ -e "$batches" ] || "$SEQLAB" bench train --config "$cfg" --steps "$STEPS" --dump "$batches" >>"$log" 2>&1
    for workload in train predict; do
        for impl in seqlab pytorch; do
            [ "$(left)" -gt 30 ] || { echo "deadline: skipped $model $workload $impl" | tee -a "$log"; continue; }
            limit=$(( $(left) < 150 ? $(left) : 150 ))
            if [ "$impl" = seqlab ]; then
                line=$(sampled "$limit" "$SEQLAB" bench "$workload" --config "$cfg" --device "$DEVICE" --steps "$STEPS" --json)
            elif [ $torch_ok = 1 ]; then
                line=$(sampled "$limit" "$PYTHON" -W ignore benchmarks/pytorch/bench.py "$workload" --config "$cfg" \
                    --batches "$batches" --device cuda)
            else
                continue
            fi
            echo "{\"impl\": \"$impl\", \"model\": \"$model\", \"result\": $line}" >> "$OUT/throughput.jsonl"
            echo "$model $workload $impl: $line" | tee -a "$log"
        done
    done
done

# 2. One attention layer, forward + backward.
for len in $LENGTHS; do
    for impl in dense chunked local pytorch; do
        [ "$(left)" -gt 20 ] || { echo "deadline: skipped attention $impl L=$len" | tee -a "$log"; continue; }
        limit=$(( $(left) < 90 ? $(left) : 90 ))
        if [ "$impl" = pytorch ]; then
            [ $torch_ok = 1 ] || continue
            line=$(sampled "$limit" "$PYTHON" benchmarks/pytorch/attention_memory.py --device cuda --batch 32 \
                --heads 8 --d-model 512 --seq-len "$len")
        else
            line=$(sampled "$limit" "$SEQLAB" bench attention --device "$DEVICE" --impl "$impl" --seq-len "$len" \
                --batch 32 --heads 8 --d-model 512 --train --json)
        fi
        echo "{\"impl\": \"$impl\", \"seq_len\": $len, \"result\": $line}" >> "$OUT/attention.jsonl"
        echo "attention $impl L=$len: $line" | tee -a "$log"
    done
done

python3 benchmarks/summarize_gpu.py "$OUT" > "$OUT/summary.md.tmp" 2>>"$log" && mv "$OUT/summary.md.tmp" "$OUT/summary.md"
cat "$OUT/summary.md" 2>/dev/null
echo "done in $((SECONDS - started)) s" | tee -a "$log"
