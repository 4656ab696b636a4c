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

TARGETS = {"train": 1.0, "predict": 1.5}


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("raw")
    p.add_argument("--data", default="generated")
    a = p.parse_args()
    rows = [json.loads(l) for l in open(a.raw) if l.strip()]
    if not rows:
        sys.exit("no measurements")
    tps = {}
    meta = {}
    for r in rows:
        res = r["result"]
        key = (r["model"], res["workload"], r["impl"])
        tps.setdefault(key, []).append(res["tokens_per_second"])
        meta[r["impl"]] = res
    rounds = max(r["round"] for r in rows)
    threads = meta.get("seqlab", {}).get("threads", "?")
    out = []
    out.append("# seqlab vs PyTorch: tokens per second, side by side\n")
    out.append(
        f"Written by `just bench-vs-pytorch` on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. "
        f"{rounds} rounds; in each, every workload ran once in each implementation, the order alternating "
        "from round to round. Both ran the same batches (written by `seqlab bench train --dump`: "
        f"{meta['seqlab']['batch']} sentences, length-bucketed, {meta['seqlab']['steps']} timed after warm-up), "
        f"with the reference configs of `benchmarks/configs`, at {threads} threads each. Data: {a.data}.\n"
    )
    out.append("| model | workload | seqlab tok/s (median) | PyTorch tok/s (median) | seqlab / PyTorch | target | met |")
    out.append("|---|---|---:|---:|---:|---:|:---:|")
    for model in ["bilstm", "attention"]:
        for workload in ["train", "predict"]:
            s = tps.get((model, workload, "seqlab"))
            t = tps.get((model, workload, "pytorch"))
            if not s or not t:
                continue
            ms, mt = statistics.median(s), statistics.median(t)
            ratio = ms / mt
            target = TARGETS[workload]
            out.append(
                f"| {model}-CRF | {workload} | {ms:,.0f} | {mt:,.0f} | {ratio:.2f}× | ≥ {target:.1f}× | "
                f"{'yes' if ratio >= target else 'no'} |"
            )
    out.append("\nEvery round (tokens/s, seqlab / PyTorch):\n")
    for model in ["bilstm", "attention"]:
        for workload in ["train", "predict"]:
            s = tps.get((model, workload, "seqlab"), [])
            t = tps.get((model, workload, "pytorch"), [])
            out.append(
                f"- {model} {workload}: "
                + ", ".join(f"{x:,.0f} / {y:,.0f}" for x, y in zip(s, t))
            )
    out.append("\n## Machine\n")
    out.append(f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; {platform.system()} {platform.release()}")
    out.append(f"- seqlab: {meta['seqlab'].get('device', '?')}, release build, {run(['rustc', '-V'])}, commit {run(['git', 'rev-parse', '--short', 'HEAD'])}"
        + (" with uncommitted changes" if run(["git", "status", "--porcelain", "--untracked-files=no"]) else ""))
    out.append(
        f"- PyTorch: {meta['pytorch'].get('impl', '?')}, Python {platform.python_version()}, "
        f"OMP_WAIT_POLICY={meta['pytorch'].get('omp_wait_policy') or '(unset)'}"
    )
    out.append(f"- load average when written: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
