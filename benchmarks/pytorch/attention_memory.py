"""PyTorch's own self-attention layer, forward and backward, at the sizes
`seqlab bench attention` measures: wall time and peak memory of one step.

The counterpart of `seqlab bench attention --train --json`: the same input
(batch × L × d_model, every position real), one `nn.MultiheadAttention`
layer with `need_weights=False` as taggers call it, the sum of its output
backpropagated. One JSON line per length, in seqlab's field names:

    python attention_memory.py --device cuda --batch 32 --heads 8 --d-model 512 --seq-len 512,2048,4096

Peak memory is `torch.cuda.max_memory_allocated` above what was allocated
before the step (the step's own memory, as seqlab reports its step peak);
a length that runs out of memory prints `"error": "out of memory"`. CUDA
only: on the CPU, PyTorch's allocator has no peak counter to compare.
"""

import argparse
import json
import time

import torch
from torch import nn


def step(layer, x):
    out, _ = layer(x, x, x, need_weights=False)
    out.sum().backward()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--seq-len", default="512,2048,4096")
    p.add_argument("--iters", type=int, default=3)
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type != "cuda" or not torch.cuda.is_available():
        raise SystemExit("attention_memory.py measures CUDA memory: needs a GPU and a CUDA build of torch")
    torch.manual_seed(1)
    layer = nn.MultiheadAttention(args.d_model, args.heads, batch_first=True).to(device)
    for L in (int(v) for v in args.seq_len.split(",")):
        row = {"impl": f"pytorch {torch.__version__} nn.MultiheadAttention", "seq_len": L, "batch": args.batch,
               "heads": args.heads, "d_model": args.d_model, "train": True,
               "device": torch.cuda.get_device_name(device)}
        try:
            x = torch.randn(args.batch, L, args.d_model, device=device, requires_grad=True)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            step(layer, x)
            torch.cuda.synchronize()
            times = []
            for _ in range(max(args.iters, 1)):
                layer.zero_grad(set_to_none=True)
                x.grad = None
                started = time.perf_counter()
                step(layer, x)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - started)
            times.sort()
            row.update(seconds=times[len(times) // 2],
                       peak_bytes=torch.cuda.max_memory_allocated(device) - before)
        except torch.cuda.OutOfMemoryError:
            row["error"] = "out of memory"
        x = None
        layer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
