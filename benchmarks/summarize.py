"""benchmarks/results.md from the raw lines of benchmarks/vs-pytorch.sh.

Medians over rounds of tokens/s per model × workload × implementation, the
seqlab/PyTorch ratio of the medians, the targets, and the machine.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import datetime, timezone

TARGETS = {"train": 1.5, "predict": 1.5}


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def cpu_flags():
    """The CPU flags that matter to GEMM speed."""
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return " ".join(w for w in wanted if w in have) or "none of " + " ".join(wanted)
    except OSError:
        pass
    return "?"


PYTORCH = ("pytorch", "pytorch-passive")
PYTORCH_BF16 = ("pytorch-bf16-autocast", "pytorch-bf16-cast")
LABEL = {
    "pytorch": "PyTorch, OMP default",
    "pytorch-passive": "PyTorch, OMP PASSIVE",
    "pytorch-workers": "PyTorch, single-threaded workers",
    "seqlab-bf16": "seqlab bf16",
    "pytorch-bf16-autocast": "PyTorch bf16 (autocast)",
    "pytorch-bf16-cast": "PyTorch bf16 (cast)",
}


def best_pytorch(tps, model, workload, impls=PYTORCH):
    """(median, impl) of the fastest of PyTorch's settings `impls` (by
    default its two OpenMP settings)."""
    meds = [(statistics.median(tps[(model, workload, i)]), i) for i in impls if (model, workload, i) in tps]
    return max(meds) if meds else None


def bf16_section(tps, by_round, rounds, names):
    """The bf16 inference table: seqlab --precision bf16 against its own f32
    and against PyTorch's bf16 and f32 (the faster of each)."""
    models = [m for m in names if (m, "predict", "seqlab-bf16") in tps]
    if not models:
        return []
    out = ["\n## bf16 inference\n"]
    out.append(
        "Predict with bf16 products and f32 sums on both sides, where the CPU has AVX-512 BF16: "
        "`seqlab --precision bf16` (its linear layers; the recurrence, the attention weights and "
        "the CRF stay f32), PyTorch under `torch.autocast(dtype=torch.bfloat16)` and with the "
        "encoder's weights cast to bf16 (CRF in f32), both with OpenMP's default wait policy. "
        "The last column is seqlab bf16 over the fastest PyTorch of any precision.\n"
    )
    out.append(
        "| model | seqlab f32 | seqlab bf16 | bf16 / f32 | PyTorch bf16, autocast | PyTorch bf16, cast "
        "| best PyTorch f32 | seqlab bf16 / best PyTorch bf16 | seqlab bf16 / best PyTorch |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in models:
        key = lambda i: (model, "predict", i)  # noqa: E731
        med = lambda i: statistics.median(tps[key(i)]) if key(i) in tps else None  # noqa: E731
        fmt = lambda v: f"{v:,.0f}" if v is not None else "–"  # noqa: E731
        bf, f32 = med("seqlab-bf16"), med("seqlab")
        py_bf = best_pytorch(tps, model, "predict", PYTORCH_BF16)
        py_f32 = best_pytorch(tps, model, "predict")
        best_any = max([x for x in (py_bf, py_f32) if x], default=None)
        out.append(
            f"| {model} | {fmt(f32)} | {fmt(bf)} | {bf / f32:.2f}× | {fmt(med(PYTORCH_BF16[0]))} | "
            f"{fmt(med(PYTORCH_BF16[1]))} | {fmt(py_f32[0] if py_f32 else None)} | "
            f"{f'{bf / py_bf[0]:.2f}×' if py_bf else '–'} | **{f'{bf / best_any[0]:.2f}×' if best_any else '–'}** |"
        )
    out.append("\nEvery round (tokens/s; seqlab bf16 over the fastest PyTorch of that round, any precision):\n")
    for model in models:
        parts = []
        for r in range(1, rounds + 1):
            got = by_round.get((model, "predict", r), {})
            py = [got[i] for i in (*PYTORCH, *PYTORCH_BF16) if i in got]
            if "seqlab-bf16" not in got or not py:
                continue
            detail = " / ".join(f"{LABEL[i]} {got[i]:,.0f}" for i in PYTORCH_BF16 if i in got)
            parts.append(f"round {r}: seqlab bf16 {got['seqlab-bf16']:,.0f}; {detail}: {got['seqlab-bf16'] / max(py):.2f}×")
        out.append(f"- {model} predict: " + "; ".join(parts))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("raw")
    p.add_argument("--data", default="generated")
    a = p.parse_args()
    rows = [json.loads(l) for l in open(a.raw) if l.strip()]
    if not rows:
        sys.exit("no measurements")
    tps, meta, by_round = {}, {}, {}
    for r in rows:
        res = r["result"]
        key = (r["model"], res["workload"], r["impl"])
        tps.setdefault(key, []).append(res["tokens_per_second"])
        by_round.setdefault((r["model"], res["workload"], r["round"]), {})[r["impl"]] = res["tokens_per_second"]
        meta[r["impl"]] = res
    rounds = max(r["round"] for r in rows)
    threads = meta.get("seqlab", {}).get("threads", "?")
    workers = meta.get("pytorch-workers", {}).get("threads", threads)
    # The models in the order they ran (the reference configs, then the shipped ones).
    names = list(dict.fromkeys(r["model"] for r in rows))
    cases = [(m, w) for m in names for w in ["train", "predict"] if (m, w, "seqlab") in tps]
    out = []
    out.append("# seqlab vs PyTorch: tokens per second, side by side\n")
    out.append(
        f"Written by `just bench-vs-pytorch` on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. "
        f"{rounds} rounds; in each, every workload ran once in each implementation, the order rotating "
        "from round to round. All ran the same batches (written by `seqlab bench train --dump`: "
        f"{meta['seqlab']['batch']} sentences, length-bucketed, {meta['seqlab']['steps']} timed after warm-up), "
        "with the reference configs of `benchmarks/configs` (ref-*) and the shipped ones of `experiments/configs`, "
        f"seqlab and PyTorch at {threads} threads each; "
        f"PyTorch with OpenMP's default wait policy and with `OMP_WAIT_POLICY=PASSIVE`, and for predict also as "
        f"{workers} single-threaded processes tagging one batch each at a time. The ratio is seqlab over the "
        f"faster of PyTorch's two OpenMP settings. Data: {a.data}.\n"
    )
    out.append(
        "| model | workload | seqlab | PyTorch, OMP default | PyTorch, PASSIVE | PyTorch, single-threaded workers "
        "| seqlab / best PyTorch | target | met | seqlab / workers |"
    )
    out.append("|---|---|---:|---:|---:|---:|---:|---:|:---:|---:|")

    def med(key):
        return f"{statistics.median(tps[key]):,.0f}" if key in tps else "–"

    for model, workload in cases:
        ms = statistics.median(tps[(model, workload, "seqlab")])
        best = best_pytorch(tps, model, workload)
        if best is None:
            continue
        ratio = ms / best[0]
        target = TARGETS[workload]
        w = tps.get((model, workload, "pytorch-workers"))
        vs_workers = f"{ms / statistics.median(w):.2f}×" if w else "–"
        out.append(
            f"| {model} | {workload} | {ms:,.0f} | {med((model, workload, 'pytorch'))} | "
            f"{med((model, workload, 'pytorch-passive'))} | {med((model, workload, 'pytorch-workers'))} | "
            f"**{ratio:.2f}×** | ≥ {target:.1f}× | {'yes' if ratio >= target else 'no'} | {vs_workers} |"
        )
    out.append("\nEvery round (tokens/s; seqlab over the faster PyTorch setting of that round):\n")
    for model, workload in cases:
        parts = []
        for r in range(1, rounds + 1):
            got = by_round.get((model, workload, r), {})
            py = [got[i] for i in PYTORCH if i in got]
            if "seqlab" not in got or not py:
                continue
            detail = " / ".join(f"{LABEL.get(i, i)} {got[i]:,.0f}" for i in (*PYTORCH, "pytorch-workers") if i in got)
            parts.append(f"round {r}: seqlab {got['seqlab']:,.0f}; {detail}: {got['seqlab'] / max(py):.2f}×")
        out.append(f"- {model} {workload}: " + "; ".join(parts))
    out.extend(bf16_section(tps, by_round, rounds, names))
    out.append("\n## Machine\n")
    out.append(f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; {platform.system()} {platform.release()}")
    out.append(f"- CPU flags: {cpu_flags()}")
    out.append(f"- seqlab: {meta['seqlab'].get('device', '?')}, release build, {run(['rustc', '-V'])}, commit {run(['git', 'rev-parse', '--short', 'HEAD'])}"
        + (" with uncommitted changes" if run(["git", "status", "--porcelain", "--untracked-files=no"]) else ""))
    py = meta.get("pytorch") or meta.get("pytorch-passive") or {}
    layers = sorted({r["result"]["layer"] for r in rows if r["result"].get("layer")})
    out.append(
        f"- PyTorch: {py.get('impl', '?')}, Python {platform.python_version()}, "
        f"attention blocks: {', '.join(layers) or '–'} (`bench.py --layer`)"
    )
    out.append(f"- load average when written: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
