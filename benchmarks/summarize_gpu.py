"""Markdown tables from a `benchmarks/gpu.sh` run: OUT/coldstart.jsonl,
OUT/throughput.jsonl and OUT/attention.jsonl (one measurement per line) → stdout.

    python3 benchmarks/summarize_gpu.py benchmarks/out/gpu
"""

import json
import sys
from pathlib import Path


def lines(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def mib(row):
    v = row.get("gpu_memory_mib")
    return "" if v is None else f"{v:,}"


def main():
    out = Path(sys.argv[1])
    gpu = (out / "gpu.txt").read_text().strip() if (out / "gpu.txt").exists() else "unknown GPU"
    wgpu = (out / "device.txt").exists() and (out / "device.txt").read_text().strip() == "wgpu"
    print(f"# seqlab on a GPU ({gpu})\n")
    rows = lines(out / "coldstart.jsonl")
    if rows:
        print("## Cold start: process start to the first finished training batch (BiLSTM-CRF, generated data)\n")
        print("| kernel cache | seconds | kernels compiled | kernels loaded from the cache |")
        print("|---|---:|---:|---:|")
        for r in rows:
            secs = r.get("first_batch_seconds")
            secs = f"{secs:.1f}" if secs is not None else f"no first batch within {r.get('limit', '?')} s"
            print(f"| {r['cache']} | {secs} | {r.get('compiled', '')} | {r.get('loaded', '')} |")
        print()
    rows = lines(out / "throughput.jsonl")
    if rows:
        print("## Throughput, reference taggers (generated CoNLL-like batches of 32)\n")
        print("| model | workload | seqlab tokens/s | PyTorch tokens/s | seqlab / PyTorch | seqlab GPU MiB | PyTorch GPU MiB |")
        print("|---|---|---:|---:|---:|---:|---:|")
        cells = {}
        for r in rows:
            res = r["result"]
            key = (r["model"], res.get("workload", "?"))
            cells.setdefault(key, {})[r["impl"]] = res
        for (model, workload), by in cells.items():
            s, p = by.get("seqlab", {}), by.get("pytorch", {})
            st, pt = s.get("tokens_per_second"), p.get("tokens_per_second")
            ratio = f"{st / pt:.2f}×" if st and pt else ""
            fmt = lambda v, r: f"{v:,.0f}" if v else r.get("error", "not run")
            print(f"| {model} | {workload} | {fmt(st, s)} | {fmt(pt, p)} | {ratio} | {mib(s)} | {mib(p)} |")
        print()
    rows = lines(out / "f1.jsonl")
    if rows:
        print("## `seqlab train` on a dataset (compare with the same config, seed and epochs on the CPU)\n")
        print("| config | data | seed | epochs (best) | test F1 | tokens/s | first batch s | wall s |")
        print("|---|---|---:|---|---:|---:|---:|---:|")
        for r in rows:
            f1 = f"{r['test_f1']:.4f}" if "test_f1" in r else r.get("error", "failed")
            tps = f"{r['tokens_per_second']:,.0f}" if r.get("tokens_per_second") else ""
            fb = f"{r['first_batch_seconds']:.1f}" if r.get("first_batch_seconds") is not None else ""
            print(f"| {r['config']} | {r['data']} | {r['seed']} | {r.get('epochs', '')} ({r.get('best_epoch', '')}) "
                  f"| {f1} | {tps} | {fb} | {r['wall_seconds']} |")
        print()
    rows = lines(out / "attention.jsonl")
    if rows:
        first = next((r["result"] for r in rows if "batch" in r["result"]), {})
        shape = f"batch {first.get('batch', '?')}, {first.get('heads', '?')} heads, d_model {first.get('d_model', '?')}"
        print(f"## One self-attention layer, forward + backward ({shape})\n")
        if wgpu:
            print("Memory: seqlab's allocator's own figure (CubeCL's memory pool after the step, which keeps")
            print("its high-water mark, less the tensors alive before it). No nvidia-smi on wgpu, no PyTorch.\n")
        else:
            print("GPU memory: the device's memory.used at its peak during the process less the idle reading")
            print("(nvidia-smi every 20 ms; CUDA context and allocator pools included, same for both).\n")
        print("| implementation | L | seconds (median) | GPU MiB | allocator peak of the step MiB |")
        print("|---|---:|---:|---:|---:|")
        for row in rows:
            r = row["result"]
            secs = f"{r['seconds']:.4f}" if "seconds" in r else r.get("error", "failed")
            # seqlab's peak_bytes is the device allocator's on a GPU backend (its "memory" says
            # which), the host's resident set on the CPU; PyTorch's is its allocator's.
            on_device = row["impl"] == "pytorch" or r.get("memory") == "device allocator pool"
            step = r.get("peak_bytes") if on_device else None
            step = f"{step / 2**20:,.0f}" if step is not None else ""
            name = r.get("impl", row["impl"]) if row["impl"] == "pytorch" else f"seqlab {row['impl']}"
            print(f"| {name} | {row['seq_len']} | {secs} | {'' if wgpu else mib(r)} | {step} |")
        print()


if __name__ == "__main__":
    main()
