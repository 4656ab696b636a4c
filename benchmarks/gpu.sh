#!/usr/bin/env bash
# seqlab on a GPU: DEVICE=cuda (an NVIDIA GPU, beside PyTorch on the same GPU
# where a CUDA build of torch is importable: PYTHON, default python3; else
# benchmarks/pytorch/.venv) or DEVICE=wgpu (burn-wgpu: Vulkan, Metal, DX12;
# PyTorch has no such backend, so seqlab runs alone; on a machine without a
# GPU, Mesa's software Vulkan driver, lavapipe: a CPU emulating a GPU, whose
# figures are correctness, kernel counts and memory, never speed).
# Sections, in the order SECTIONS names them (default: all four):
#
# coldstart  Process start to the first finished training batch, with an
#            empty and with a warm kernel cache.
# throughput `bench train` / `bench predict` of both reference taggers
#            (benchmarks/configs) on generated CoNLL-like batches, WARMUP
#            untimed then STEPS timed (PyTorch times the same batches,
#            warm-up included: BATCHES_DIR/batches-{bilstm,attention}.json,
#            written by `seqlab bench train --dump` when missing).
# f1         Only with F1_DATA (a dataset folder): `seqlab train` of
#            F1_CONFIG (default the shipped bilstm-crf.toml) on it, seed
#            F1_SEED, for the epochs that end past F1_MINUTES minutes (at
#            most F1_LIMIT seconds); test
#            F1, epochs, tokens/s and the first batch's time go to f1.jsonl
#            (train the same config for the same epochs on the CPU to compare).
# attention  One self-attention layer, forward + backward, batch 32 × 8 heads
#            × d_model 512 at each length in LENGTHS: seqlab's dense, chunked
#            and local attention (ATTENTION_IMPLS) and PyTorch's
#            nn.MultiheadAttention, one process per cell. GPU memory is the
#            device's `memory.used` (nvidia-smi, sampled every 20 ms) at its
#            highest during the process, less the idle reading: the same
#            yardstick for both, CUDA context and allocator pools included.
#            seqlab also reports its allocator's own pool (peak_bytes: the
#            pool after the step less the tensors alive before it), the
#            only GPU figure on wgpu. Batch,
#            heads and d_model: ATTENTION_SHAPE (default "32 8 512"; on
#            wgpu "1 8 512", which lavapipe's memory, the host's, holds).
#
# Every seqlab process runs in one working directory whose cubecl.toml keeps
# compiled kernels and autotune results there: the cold start begins with it
# empty, and each later process finds what the earlier ones compiled, as a
# user's second run would.
#
# Every measurement has its own time limit and the whole run a DEADLINE
# (seconds), so a slow first kernel compilation cannot eat the rest; results
# go to OUT (default benchmarks/out/gpu) as JSON lines as they come, and
# OUT/summary.md at the end.
#
#   SEQLAB=target/release/seqlab benchmarks/gpu.sh      # a `--features cuda` build
#   PATH=benchmarks/dry-run:$PATH DEVICE=cpu STEPS=3 LENGTHS=64 benchmarks/gpu.sh   # dry run, no GPU (~1 min)
#   SEQLAB=target/release/seqlab DEVICE=wgpu benchmarks/gpu.sh   # wgpu is a default feature
set -uo pipefail
cd "$(dirname "$0")/.."
SEQLAB=${SEQLAB:-target/release/seqlab}
OUT=${OUT:-benchmarks/out/gpu}
STEPS=${STEPS:-}     # default 50 (5 on wgpu)
WARMUP=${WARMUP:-}   # default 3 (1 on wgpu)
SECTIONS=${SECTIONS:-coldstart throughput f1 attention}
F1_DATA=${F1_DATA:-}
F1_CONFIG=${F1_CONFIG:-experiments/configs/bilstm-crf.toml}
F1_SEED=${F1_SEED:-1}
F1_MINUTES=${F1_MINUTES:-2}
F1_LIMIT=${F1_LIMIT:-300}   # seconds at most for the f1 run
ATTENTION_IMPLS=${ATTENTION_IMPLS:-dense chunked local}
DEVICE=${DEVICE:-cuda}   # cpu: a dry run without a GPU, with PATH=benchmarks/dry-run:$PATH (a stand-in nvidia-smi)
if [ "$DEVICE" = wgpu ]; then
    # lavapipe runs the kernels on the CPU: fewer timed steps, a batch of one, longer limits.
    LENGTHS=${LENGTHS:-1024 2048 4096}
    ATTENTION_SHAPE=${ATTENTION_SHAPE:-1 8 512}
    ATTENTION_LIMIT=${ATTENTION_LIMIT:-600}
    DEADLINE=${DEADLINE:-3600}
    STEPS=${STEPS:-5}
    WARMUP=${WARMUP:-1}
else
    LENGTHS=${LENGTHS:-512 2048 4096}
    ATTENTION_SHAPE=${ATTENTION_SHAPE:-32 8 512}
    ATTENTION_LIMIT=${ATTENTION_LIMIT:-90}
    DEADLINE=${DEADLINE:-480}
    STEPS=${STEPS:-50}
    WARMUP=${WARMUP:-3}
fi
read -r ATT_BATCH ATT_HEADS ATT_D <<< "$ATTENTION_SHAPE"
BATCHES_DIR=${BATCHES_DIR:-$OUT}
PYTHON=${PYTHON:-python3}   # the one with torch; helpers run on python3
mkdir -p "$OUT" "$BATCHES_DIR"
started=$SECONDS
log="$OUT/log.txt"
: > "$log"
left() { echo $((DEADLINE - (SECONDS - started))); }

if [ "$DEVICE" = wgpu ]; then
    # No nvidia-smi: the adapter as seqlab names it; memory is seqlab's allocator's own figure.
    export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
    nvidia-smi() { [[ "$*" == *-lms* ]] && exec sleep 100000; echo 0; }
    "$SEQLAB" bench crf --device wgpu --batch 2 --len 4 --iters 1 2>>"$log" | sed -n 's/.* on wgpu (burn-wgpu): \(.*\), [0-9]* threads.*/\1/p' | head -1 > "$OUT/gpu.txt"
    [ -s "$OUT/gpu.txt" ] || { echo "no wgpu adapter (see log.txt)" | tee -a "$log"; exit 1; }
    idle=0
elif nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>>"$log"; then
    idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
else
    echo "no GPU: nvidia-smi failed" | tee -a "$log"; exit 1
fi
echo "GPU: $(cat "$OUT/gpu.txt"); idle memory.used ${idle} MiB" | tee -a "$log"
echo "$DEVICE" > "$OUT/device.txt"

torch_ok=0
if [ "$DEVICE" = wgpu ]; then
    : # PyTorch has no Vulkan/Metal/DX12 backend to compare with
elif ! "$PYTHON" -c "import torch; assert torch.cuda.is_available()" 2>>"$log"; then
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

# Every seqlab process runs in $work: its cubecl.toml keeps the compiled
# kernels and autotune results there, empty at the start.
seqlab_abs=$(realpath "$SEQLAB")
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[compilation]\ncache = { file = "%s/kernels" }\n[autotune]\ncache = { file = "%s/autotune" }\n' "$work" "$work" > "$work/cubecl.toml"
in_work=(env -C "$work" "$seqlab_abs")   # seqlab, run in $work

# Starts `seqlab train ARGS…` (with --verbose) in the background, logging to
# $work/NAME.log, and stops it (SIGTERM: it writes a checkpoint and exits)
# once its first batch is done; prints that line, or nothing.
first_batch() {
    local name=$1 limit=$2; shift 2
    (exec timeout "$limit" "${in_work[@]}" train "$@" --verbose > "$work/$name.log" 2>&1) &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null && ! grep -q 'first batch done' "$work/$name.log" 2>/dev/null; do sleep 0.5; done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    cat "$work/$name.log" >> "$log"
    grep -m1 'first batch done' "$work/$name.log"
}

# The seconds and kernel counts of a 'first batch done' line, as JSON fields.
first_batch_json() {
    python3 -c "
import json, re, sys
line = sys.argv[1]
m = re.search(r'first batch done ([0-9.]+) s', line)
k = re.search(r'kernels compiled (\d+), loaded from the disk cache (\d+)', line)
d = {'first_batch_seconds': float(m.group(1)) if m else None, 'first_batch_line': line}
if k: d.update(compiled=int(k.group(1)), loaded=int(k.group(2)))
print(json.dumps(d)[1:-1])" "$1"
}

# Process start to the first finished training batch of the BiLSTM-CRF
# reference on generated data (`seqlab train --verbose` prints when, with
# the kernels compiled and those loaded from CubeCL's on-disk cache): first
# with the caches empty, then again with them warm.
section_coldstart() {
    "${in_work[@]}" data toy --out toy --lang en >>"$log" 2>&1
    local cache limit line
    for cache in empty warm; do
        [ "$(left)" -gt 30 ] || { echo "deadline: skipped cold start ($cache cache)" | tee -a "$log"; continue; }
        limit=$(( $(left) < 120 ? $(left) : 120 ))
        line=$(first_batch "train-$cache" "$limit" --config "$root/benchmarks/configs/ref-bilstm-crf.toml" \
            --data toy --out "run-$cache" --device "$DEVICE" --epochs 1)
        echo "{\"cache\": \"$cache\", \"limit\": $limit, $(first_batch_json "$line")}" >> "$OUT/coldstart.jsonl"
        echo "cold start, $cache cache: ${line:-no first batch within $limit s}" | tee -a "$log"
    done
}

section_throughput() {
    local model cfg batches workload impl limit line
    for model in bilstm attention; do
        cfg="benchmarks/configs/ref-$model-crf.toml"
        batches="$BATCHES_DIR/batches-$model.json"
        [ -e "$batches" ] || "$SEQLAB" bench train --config "$cfg" --steps "$STEPS" --warmup "$WARMUP" --dump "$batches" >>"$log" 2>&1
        for workload in train predict; do
            for impl in seqlab pytorch; do
                [ "$(left)" -gt 30 ] || { echo "deadline: skipped $model $workload $impl" | tee -a "$log"; continue; }
                limit=$(( $(left) < 150 ? $(left) : 150 ))
                if [ "$impl" = seqlab ]; then
                    line=$(sampled "$limit" "${in_work[@]}" bench "$workload" --config "$root/$cfg" --device "$DEVICE" \
                        --steps "$STEPS" --warmup "$WARMUP" --json)
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
}

# `seqlab train` on a real dataset: test F1 of what the device trains, to
# compare with the same config trained for as many epochs on the CPU.
section_f1() {
    [ -n "$F1_DATA" ] || { echo "f1: skipped (no F1_DATA)" | tee -a "$log"; return; }
    [ "$(left)" -gt 60 ] || { echo "deadline: skipped f1" | tee -a "$log"; return; }
    local limit=$(( $(left) - 10 < F1_LIMIT ? $(left) - 10 : F1_LIMIT )) run="$work/run-f1" data config
    data=$(realpath "$F1_DATA"); config=$(realpath "$F1_CONFIG")
    local t0=$SECONDS
    timeout "$limit" "${in_work[@]}" train --config "$config" --data "$data" --out "$run" \
        --device "$DEVICE" --seed "$F1_SEED" --set "train.max_minutes=$F1_MINUTES" --verbose > "$work/f1.log" 2>&1
    local rc=$? wall=$((SECONDS - t0))
    cat "$work/f1.log" >> "$log"
    [ -f "$run/metrics.csv" ] && cp "$run/metrics.csv" "$OUT/f1-metrics.csv"
    local first="{$(first_batch_json "$(grep -m1 'first batch done' "$work/f1.log")")}"
    python3 - "$run" "$rc" "$wall" "$first" "$F1_CONFIG" "$F1_DATA" "$F1_SEED" <<'PY' >> "$OUT/f1.jsonl"
import csv, json, os, sys
run, rc, wall, first, config, data, seed = sys.argv[1:]
d = {"config": config, "data": os.path.basename(data.rstrip("/")), "seed": int(seed), "rc": int(rc), "wall_seconds": int(wall)}
d.update(json.loads(first))
try:
    s = json.load(open(os.path.join(run, "summary.json")))
    d.update(test_f1=s["test"]["f1"], best_epoch=s.get("best_epoch"), tokens_per_second=s.get("tokens_per_second"))
except (OSError, KeyError, ValueError) as e:
    d["error"] = f"no summary.json: {e}"
try:
    rows = list(csv.DictReader(open(os.path.join(run, "metrics.csv"))))
    d["epochs"] = len(rows)
    d["dev_f1"] = [float(r["dev_f1"]) for r in rows]
except (OSError, KeyError, ValueError):
    pass
print(json.dumps(d))
PY
    echo "f1: $(tail -1 "$OUT/f1.jsonl")" | tee -a "$log"
}

section_attention() {
    local len impl limit line
    for len in $LENGTHS; do
        for impl in $ATTENTION_IMPLS pytorch; do
            [ "$(left)" -gt 20 ] || { echo "deadline: skipped attention $impl L=$len" | tee -a "$log"; continue; }
            limit=$(( $(left) < ATTENTION_LIMIT ? $(left) : ATTENTION_LIMIT ))
            if [ "$impl" = pytorch ]; then
                [ $torch_ok = 1 ] || continue
                line=$(sampled "$limit" "$PYTHON" benchmarks/pytorch/attention_memory.py --device cuda --batch "$ATT_BATCH" \
                    --heads "$ATT_HEADS" --d-model "$ATT_D" --seq-len "$len")
            else
                line=$(sampled "$limit" "${in_work[@]}" bench attention --device "$DEVICE" --impl "$impl" --seq-len "$len" \
                    --batch "$ATT_BATCH" --heads "$ATT_HEADS" --d-model "$ATT_D" --train --json)
            fi
            echo "{\"impl\": \"$impl\", \"seq_len\": $len, \"result\": $line}" >> "$OUT/attention.jsonl"
            echo "attention $impl L=$len: $line" | tee -a "$log"
        done
    done
}

for section in $SECTIONS; do
    echo "== $section ($(left) s left)" | tee -a "$log"
    "section_$section"
done

python3 benchmarks/summarize_gpu.py "$OUT" > "$OUT/summary.md.tmp" 2>>"$log" && mv "$OUT/summary.md.tmp" "$OUT/summary.md"
cat "$OUT/summary.md" 2>/dev/null
