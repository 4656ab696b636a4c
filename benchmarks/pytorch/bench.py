"""PyTorch reference for `seqlab bench train|predict`.

Builds the tagger of a seqlab reference config (benchmarks/configs/*.toml,
read here with tomllib so both sides use the same sizes) as a PyTorch user
would write it: nn.Embedding + a character CNN, then nn.LSTM over packed
sequences (bilstm) or pre-norm Transformer blocks with nn.MultiheadAttention
(attention), a linear layer and a linear-chain CRF written like pytorch-crf
(forward algorithm for the NLL, Viterbi with a Python backtrace).

It runs the exact batches seqlab wrote with `seqlab bench train --dump`, the
same warm-up and timed batches, and prints one JSON line in seqlab's format:

    python bench.py train   --config ref-bilstm-crf.toml --batches batches.json --threads 2
    python bench.py predict --config ref-bilstm-crf.toml --batches batches.json --threads 2

Set OMP_WAIT_POLICY=PASSIVE on a shared machine (see benchmarks/README.md).
"""

import argparse
import json
import math
import os
import time
import tomllib

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class CRF(nn.Module):
    """Linear-chain CRF as in pytorch-crf (batch_first, masked)."""

    def __init__(self, num_tags):
        super().__init__()
        self.start = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.trans = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

    def nll(self, em, tags, mask):
        # em [B, L, T], tags [B, L], mask [B, L] (bool, prefix of each row)
        em, tags, mask = em.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)
        L, B = tags.shape
        maskf = mask.float()
        ar = torch.arange(B, device=em.device)
        # gold path score
        score = self.start[tags[0]] + em[0, ar, tags[0]]
        for i in range(1, L):
            score = score + (self.trans[tags[i - 1], tags[i]] + em[i, ar, tags[i]]) * maskf[i]
        last = tags[mask.long().sum(0) - 1, ar]
        score = score + self.end[last]
        # partition function
        alpha = self.start + em[0]  # [B, T]
        for i in range(1, L):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.trans + em[i].unsqueeze(1), dim=1)
            alpha = torch.where(mask[i].unsqueeze(1), nxt, alpha)
        log_z = torch.logsumexp(alpha + self.end, dim=1)
        return (log_z - score).mean()

    def decode(self, em, mask):
        em, mask = em.transpose(0, 1), mask.transpose(0, 1)
        L, B = mask.shape
        score = self.start + em[0]
        history = []
        for i in range(1, L):
            nxt, idx = (score.unsqueeze(2) + self.trans + em[i].unsqueeze(1)).max(dim=1)
            score = torch.where(mask[i].unsqueeze(1), nxt, score)
            history.append(idx)
        score = score + self.end
        # Back-pointers to the host once (a no-op on CPU): per-element .item()
        # on a GPU would time synchronisations, not decoding.
        score, history = score.cpu(), [h.cpu() for h in history]
        lengths = (mask.long().sum(0) - 1).cpu()
        best = []
        for b in range(B):
            tag = score[b].argmax().item()
            path = [tag]
            for hist in reversed(history[: lengths[b]]):
                tag = hist[b][path[-1]].item()
                path.append(tag)
            path.reverse()
            best.append(path)
        return best


class Features(nn.Module):
    """Word embedding + character CNN (max over real characters)."""

    def __init__(self, words, chars, f):
        super().__init__()
        self.word = nn.Embedding(words, f["word_dim"])
        self.char = nn.Embedding(chars, f["char_dim"], padding_idx=0)
        k = f["char_kernel"]
        self.cnn = nn.Conv1d(f["char_dim"], f["char_filters"], k, padding=k // 2)
        self.dropout = nn.Dropout(f["dropout"])
        self.dim = f["word_dim"] + f["char_filters"]

    def forward(self, words, chars):
        B, L, W = chars.shape
        flat = chars.view(B * L, W)
        real = flat > 0
        c = self.cnn(self.char(flat).transpose(1, 2))  # [N, F, W]
        c = c.masked_fill(~real.unsqueeze(1), -1e4).max(dim=2).values
        c = c * real.any(dim=1, keepdim=True).float()
        x = torch.cat([self.word(words), c.view(B, L, -1)], dim=2)
        return self.dropout(x)


class BiLstmTagger(nn.Module):
    def __init__(self, words, chars, tags, cfg):
        super().__init__()
        m = cfg["model"]
        h = m["encoder"]["bilstm"]
        self.features = Features(words, chars, m["features"])
        self.lstm = nn.LSTM(
            self.features.dim, h["hidden"], num_layers=h.get("layers", 1), bidirectional=True, batch_first=True
        )
        self.dropout = nn.Dropout(h["dropout"])
        self.emit = nn.Linear(2 * h["hidden"], tags)
        self.crf = CRF(tags)

    def emissions(self, words, chars, lengths, mask):
        x = self.features(words, chars)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        y, _ = self.lstm(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=words.shape[1])
        return self.emit(self.dropout(y))


class Block(nn.Module):
    def __init__(self, d, heads, ffn, dropout, attention_dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attention = nn.MultiheadAttention(d, heads, dropout=attention_dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ffn), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ffn, d))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, pad):
        h = self.norm1(x)
        a, _ = self.attention(h, h, h, key_padding_mask=pad, need_weights=False)
        x = x + self.dropout(a)
        return x + self.dropout(self.ff(self.norm2(x)))


class AttentionTagger(nn.Module):
    def __init__(self, words, chars, tags, cfg):
        super().__init__()
        m = cfg["model"]
        a = m["encoder"]["attention"]
        d = a["d_model"]
        self.features = Features(words, chars, m["features"])
        self.input = nn.Linear(self.features.dim, d)
        self.blocks = nn.ModuleList(
            [Block(d, a["heads"], a["ffn"], a["dropout"], a["attention_dropout"]) for _ in range(a["layers"])]
        )
        self.norm = nn.LayerNorm(d)
        self.dropout = nn.Dropout(a["dropout"])
        self.emit = nn.Linear(d, tags)
        self.crf = CRF(tags)
        self.d = d

    def sinusoids(self, L):
        pos = torch.arange(L, dtype=torch.float32).unsqueeze(1)
        div = torch.exp(torch.arange(0, self.d, 2, dtype=torch.float32) * (-math.log(10000.0) / self.d))
        pe = torch.zeros(L, self.d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        return pe

    def emissions(self, words, chars, lengths, mask):
        h = self.input(self.features(words, chars)) + self.sinusoids(words.shape[1]).to(words.device)
        h = self.dropout(h)
        pad = ~mask
        for block in self.blocks:
            h = block(h, pad)
        h = self.norm(h) * mask.unsqueeze(2).float()
        return self.emit(h)


def load_batches(path, device):
    with open(path) as f:
        d = json.load(f)
    out = []
    for b in d["batches"]:
        B, L, W = b["batch"], b["len"], b["word_len"]
        words = torch.tensor(b["words"], dtype=torch.long).view(B, L)
        chars = torch.tensor(b["chars"], dtype=torch.long).view(B, L, W)
        tags = torch.tensor(b["tags"], dtype=torch.long).view(B, L)
        lengths = torch.tensor(b["lengths"], dtype=torch.long)
        mask = torch.arange(L).unsqueeze(0) < lengths.unsqueeze(1)
        out.append(tuple(t.to(device) for t in (words, chars, tags, lengths, mask)))
    return d, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["train", "predict"])
    p.add_argument("--config", required=True)
    p.add_argument("--batches", required=True, help="written by `seqlab bench train --dump`")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    device = torch.device(args.device)
    meta, batches = load_batches(args.batches, device)
    kind = cfg["model"]["encoder"]["kind"]
    Model = {"bilstm": BiLstmTagger, "attention": AttentionTagger}[kind]
    model = Model(meta["words"], meta["chars"], meta["tags"], cfg).to(device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()
    warmup = meta["warmup"]
    timed = batches[warmup:]
    tokens = int(sum(b[3].sum().item() for b in timed))
    if args.workload == "train":
        t = cfg["train"]
        opt = torch.optim.Adam(model.parameters(), lr=t["lr"])
        model.train()

        def step(b):
            words, chars, tags, lengths, mask = b
            opt.zero_grad()
            loss = model.crf.nll(model.emissions(words, chars, lengths, mask), tags, mask)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), t.get("grad_clip", 5.0))
            opt.step()

        for b in batches[:warmup]:
            step(b)
        sync()
        started = time.perf_counter()
        for b in timed:
            step(b)
        sync()
        seconds = time.perf_counter() - started
    else:
        model.eval()

        def step(b):
            words, chars, tags, lengths, mask = b
            with torch.inference_mode():
                return sum(map(len, model.crf.decode(model.emissions(words, chars, lengths, mask), mask)))

        for b in batches[:warmup]:
            step(b)
        sync()
        started = time.perf_counter()
        decoded = sum(step(b) for b in timed)
        seconds = time.perf_counter() - started
        assert decoded == tokens, (decoded, tokens)
    print(
        json.dumps(
            {
                "workload": args.workload,
                "encoder": kind,
                "decoder": cfg["model"].get("decoder", "crf"),
                "batch": timed[0][0].shape[0] if timed else 0,
                "steps": len(timed),
                "tokens": tokens,
                "seconds": seconds,
                "tokens_per_second": tokens / max(seconds, 1e-12),
                "threads": torch.get_num_threads(),
                "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
                "impl": f"pytorch {torch.__version__}",
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
            }
        )
    )


if __name__ == "__main__":
    main()
