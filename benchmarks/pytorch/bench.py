"""PyTorch reference for `seqlab bench train|predict`, written the way a
competent PyTorch user writes it.

Builds the tagger of a seqlab config (benchmarks/configs/ref-*.toml, the shipped
experiments/configs/bilstm-crf.toml and attention-relative-crf.toml;
read here with tomllib so both sides use the same sizes): nn.Embedding + a
character CNN, then two one-way nn.LSTMs over the padded batch, the
backward one over each sentence reversed within its length (bilstm: the
fused oneDNN LSTM both ways, exact; `--lstm packed` runs one bidirectional
nn.LSTM over a PackedSequence instead, a time step at a time on the CPU,
1.28× slower to train here, 1.09× to tag) or pre-norm
nn.TransformerEncoderLayer(norm_first=True) blocks, whose fused fast path runs
at inference (attention; `--layer blocks` builds them from
nn.MultiheadAttention instead; TENER's relative attention from parts where
the config has `position = "relative"`), a linear layer and a linear-chain CRF whose
gold-path score and Viterbi backtrace are vectorised over the batch (only the
forward recursions loop over time, as in pytorch-crf). The position table is
computed once. Training steps run seqlab's token dropout at the rates the
dump names, and Adam's fused implementation.

It runs the exact batches seqlab wrote with `seqlab bench train --dump`, the
same warm-up and timed batches, and prints one JSON line in seqlab's format.
The timer covers what seqlab's does, less the building of the batch tensors
(done before it starts here):

    python bench.py train   --config ref-bilstm-crf.toml --batches batches.json --threads 2
    python bench.py predict --config ref-bilstm-crf.toml --batches batches.json --threads 2
    python bench.py predict --config ref-bilstm-crf.toml --batches batches.json --workers 2

`--workers N` tags in N single-threaded processes, one batch each at a time,
as seqlab's inference runs batches concurrently. benchmarks/vs-pytorch.sh runs
every workload with OpenMP's default wait policy and with
OMP_WAIT_POLICY=PASSIVE and compares seqlab with the faster.
`python bench.py selftest` checks the CRF against brute-force enumeration.

`--bf16 autocast` (predict) computes the emissions under
`torch.autocast(dtype=torch.bfloat16)`; `--bf16 cast` converts the encoder's
weights to bf16 instead (the CRF stays f32 in both), as PyTorch users make
inference cheaper on CPUs with AVX-512 BF16 or AMX. seqlab's counterpart is
`seqlab --precision bf16`.
"""

import argparse
import json
import math
import multiprocessing as mp
import os
import time
import tomllib

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class CRF(nn.Module):
    """Linear-chain CRF (batch_first, masked), written as a PyTorch user would:
    the gold-path score and the Viterbi backtrace vectorised over the batch,
    only the forward recursions looping over time."""

    def __init__(self, num_tags):
        super().__init__()
        self.start = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.trans = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

    def gold_score(self, em, tags, mask, lengths):
        # em [B, L, T], tags [B, L], mask [B, L] (bool, a prefix of each row)
        maskf = mask.to(em.dtype)
        emit = em.gather(2, tags.unsqueeze(2)).squeeze(2)  # [B, L]
        trans = self.trans[tags[:, :-1], tags[:, 1:]]  # [B, L-1]
        last = tags.gather(1, (lengths - 1).unsqueeze(1)).squeeze(1)  # [B]
        return (
            self.start[tags[:, 0]]
            + (emit * maskf).sum(1)
            + (trans * maskf[:, 1:]).sum(1)
            + self.end[last]
        )

    def log_partition(self, em, mask):
        alpha = self.start + em[:, 0]  # [B, T]
        for i in range(1, em.shape[1]):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.trans + em[:, i].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, i].unsqueeze(1), nxt, alpha)
        return torch.logsumexp(alpha + self.end, dim=1)  # [B]

    def nll(self, em, tags, mask, lengths):
        return (self.log_partition(em, mask) - self.gold_score(em, tags, mask, lengths)).mean()

    def decode(self, em, mask, lengths):
        """Best tag sequence of each sentence, as lists of its length."""
        B, L, _ = em.shape
        score = self.start + em[:, 0]  # [B, T]
        history = []
        for i in range(1, L):
            nxt, idx = (score.unsqueeze(2) + self.trans + em[:, i].unsqueeze(1)).max(dim=1)
            score = torch.where(mask[:, i].unsqueeze(1), nxt, score)
            history.append(idx)  # [B, T]: best previous tag for each tag at i
        cur = (score + self.end).argmax(dim=1)  # [B]: the last real token's tag
        path = torch.empty(B, L, dtype=torch.long, device=em.device)
        for i in range(L - 1, 0, -1):
            path[:, i] = cur
            prev = history[i - 1].gather(1, cur.unsqueeze(1)).squeeze(1)
            cur = torch.where(lengths > i, prev, cur)  # past a sentence's end its tag stays put
        path[:, 0] = cur
        return [row[:n] for row, n in zip(path.tolist(), lengths.tolist())]


UNK = 1  # corpus::vocab::UNK_ID: what word and character dropout turn ids into
CAPS_CLASSES = 6  # corpus::shape::CAPS_CLASSES


class Features(nn.Module):
    """Word embedding + character CNN (max over real characters), then the
    capitalisation and character-bigram embeddings where the config has them
    (seqlab's order)."""

    def __init__(self, words, chars, bigrams, f):
        super().__init__()
        self.word = nn.Embedding(words, f["word_dim"])
        self.char = nn.Embedding(chars, f["char_dim"], padding_idx=0)
        k = f["char_kernel"]
        self.cnn = nn.Conv1d(f["char_dim"], f["char_filters"], k, padding=k // 2)
        caps, bigram = f.get("caps_dim", 0), f.get("bigram_dim", 0) if bigrams else 0
        self.caps = nn.Embedding(CAPS_CLASSES, caps) if caps else None
        self.bigram = nn.Embedding(bigrams, bigram) if bigram else None
        self.dropout = nn.Dropout(f["dropout"])
        self.dim = f["word_dim"] + f["char_filters"] + caps + bigram

    def forward(self, b):
        B, L, W = b["chars"].shape
        flat = b["chars"].view(B * L, W)
        real = flat > 0
        c = self.cnn(self.char(flat).transpose(1, 2))  # [N, F, W]
        c = c.masked_fill(~real.unsqueeze(1), -1e4).max(dim=2).values
        c = c * real.any(dim=1, keepdim=True).to(c.dtype)
        parts = [self.word(b["words"]), c.view(B, L, -1)]
        if self.caps is not None:
            parts.append(self.caps(b["caps"]))
        if self.bigram is not None:
            parts.append(self.bigram(b["bigrams"]))
        return self.dropout(torch.cat(parts, dim=2))


def reverse_within(x, lengths):
    """Each sequence of x [B, L, ...] reversed within its length (padding
    stays behind it): index t reads t's mirror image len − 1 − t."""
    t = torch.arange(x.shape[1], device=x.device)
    n = lengths.to(x.device).unsqueeze(1)
    index = torch.where(t < n, n - 1 - t, t)  # [B, L]
    return x.gather(1, index.view(*index.shape, *[1] * (x.dim() - 2)).expand_as(x))


class BiLstmTagger(nn.Module):
    """`lstm="padded"` (the default): two one-way nn.LSTMs over the padded
    batch, the backward one over each sentence reversed within its length
    (exact, padding only ever follows a sentence), so that both run
    PyTorch's fused oneDNN LSTM on the CPU; `lstm="packed"`: one
    bidirectional nn.LSTM over a PackedSequence, which PyTorch's CPU
    kernels run a time step at a time (measured slower)."""

    def __init__(self, meta, cfg, lstm="padded"):
        super().__init__()
        m = cfg["model"]
        h = m["encoder"]["bilstm"]
        self.features = Features(meta["words"], meta["chars"], meta.get("bigrams", 0), m["features"])
        tags = meta["tags"]
        self.packed = lstm == "packed"
        layers = h.get("layers", 1)
        if self.packed:
            self.lstm = nn.LSTM(self.features.dim, h["hidden"], num_layers=layers, bidirectional=True, batch_first=True)
        else:
            if layers != 1:
                raise SystemExit("--lstm padded runs one layer; use --lstm packed")
            self.forward_lstm = nn.LSTM(self.features.dim, h["hidden"], batch_first=True)
            self.backward_lstm = nn.LSTM(self.features.dim, h["hidden"], batch_first=True)
        self.dropout = nn.Dropout(h["dropout"])
        self.emit = nn.Linear(2 * h["hidden"], tags)
        self.crf = CRF(tags)

    def emissions(self, b):
        x = self.features(b)
        if self.packed:
            packed = pack_padded_sequence(x, b["lengths"].cpu(), batch_first=True, enforce_sorted=False)
            y, _ = self.lstm(packed)
            y, _ = pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        else:
            lengths = b["lengths"]
            forward, _ = self.forward_lstm(x)  # [B, L, H]
            backward, _ = self.backward_lstm(reverse_within(x, lengths))
            y = torch.cat([forward, reverse_within(backward, lengths)], dim=2)  # [B, L, 2H]
        return self.emit(self.dropout(y))


class Block(nn.Module):
    """A pre-norm Transformer block from parts (`--layer blocks`)."""

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


class EncoderLayer(nn.TransformerEncoderLayer):
    """PyTorch's own pre-norm layer (`--layer encoder-layer`, the default): in
    eval mode without autograd it runs the fused fast path
    (torch._transformer_encoder_layer_fwd)."""

    def __init__(self, d, heads, ffn, dropout, attention_dropout):
        super().__init__(d, heads, ffn, dropout, activation="relu", batch_first=True, norm_first=True)
        # The attention weights' dropout, as seqlab's config has it apart.
        self.self_attn.dropout = attention_dropout

    def forward(self, x, pad):
        return super().forward(x, src_key_padding_mask=pad)


def sinusoids(length, d, first=0):
    """Sinusoids of positions first, first + 1, … (length of them)."""
    pos = torch.arange(first, first + length, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(length, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def tener_shift(bd):
    """TENER's `_shift` (fastNLP's RelativeMultiHeadAttn): [B, H, L, 2L]
    scores against the relative positions −L … L−1 to [B, H, L, L], row i
    column j the one of position j − i."""
    B, H, L, _ = bd.shape
    bd = torch.cat([bd, bd.new_zeros(B, H, L, 1)], dim=-1).view(B, H, -1, L)  # [B, H, 2L+1, L]
    bd = bd[:, :, :-1].reshape(B, H, L, -1)  # [B, H, L, 2L]
    return bd[:, :, :, L:]


class RelativeAttention(nn.Module):
    """TENER's relative multi-head attention (Yan et al. 2019) written as its
    code writes it (einsum against a table of 2L relative positions, then
    `tener_shift`), with seqlab's terms: scores (q_i + u)·k_j + (q_i + v)·r_{i−j},
    r the sinusoids of the distance, divided by √d_head only when `scaled`;
    q, k, v and output projections with biases, dropout on the weights."""

    def __init__(self, d, heads, attention_dropout, scaled):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.u = nn.Parameter(nn.init.xavier_normal_(torch.zeros(heads, self.dh)))
        self.v = nn.Parameter(nn.init.xavier_normal_(torch.zeros(heads, self.dh)))
        self.dropout = nn.Dropout(attention_dropout)
        self.scale = 1 / math.sqrt(self.dh) if scaled else 1.0
        self.table = {}

    def relative(self, L, device):
        """[2L, Dh]: row c the sinusoids of distance L − c (so that after
        the shift, column j of row i reads distance i − j)."""
        if L not in self.table:
            self.table[L] = sinusoids(2 * L, self.dh, first=-L + 1).flip(0).to(device)
        return self.table[L]

    def scores(self, q, k):
        """[B, H, L, L] scores of q, k [B, H, L, Dh], before the mask."""
        L = q.shape[2]
        ac = torch.einsum("bhqd,bhkd->bhqk", q + self.u[:, None], k)  # [B, H, L, L]
        bd = torch.einsum("bhqd,ld->bhql", q + self.v[:, None], self.relative(L, q.device))  # [B, H, L, 2L]
        return (ac + tener_shift(bd)) * self.scale

    def forward(self, x, pad):
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)  # 3 × [B, H, L, Dh]
        scores = self.scores(q, k).masked_fill(pad[:, None, None, :], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return self.out(torch.matmul(weights, v).transpose(1, 2).reshape(B, L, D))


class RelativeBlock(Block):
    """`Block` with TENER's relative attention instead of nn.MultiheadAttention."""

    def __init__(self, d, heads, ffn, dropout, attention_dropout, scaled):
        super().__init__(d, heads, ffn, dropout, attention_dropout)
        self.attention = RelativeAttention(d, heads, attention_dropout, scaled)

    def forward(self, x, pad):
        x = x + self.dropout(self.attention(self.norm1(x), pad))
        return x + self.dropout(self.ff(self.norm2(x)))


class AttentionTagger(nn.Module):
    def __init__(self, meta, cfg, layer="encoder-layer"):
        super().__init__()
        m = cfg["model"]
        a = m["encoder"]["attention"]
        d = a["d_model"]
        self.position = a.get("position", "sinusoidal")
        if self.position not in ("sinusoidal", "relative"):
            raise SystemExit(f"position {self.position!r}: the reference has sinusoidal and relative")
        if self.position == "sinusoidal" and not a.get("scaled", True):
            raise SystemExit("unscaled attention: the reference has it with relative positions")
        args = (d, a["heads"], a["ffn"], a["dropout"], a["attention_dropout"])
        self.features = Features(meta["words"], meta["chars"], meta.get("bigrams", 0), m["features"])
        self.input = nn.Linear(self.features.dim, d)
        if self.position == "relative":
            self.blocks = nn.ModuleList([RelativeBlock(*args, a.get("scaled", True)) for _ in range(a["layers"])])
        else:
            Layer = {"encoder-layer": EncoderLayer, "blocks": Block}[layer]
            self.blocks = nn.ModuleList([Layer(*args) for _ in range(a["layers"])])
        self.norm = nn.LayerNorm(d)
        self.dropout = nn.Dropout(a["dropout"])
        self.emit = nn.Linear(d, meta["tags"])
        self.crf = CRF(meta["tags"])
        self.d = d
        # The position table, computed once (grown if a batch is longer).
        self.register_buffer("pe", sinusoids(512, d), persistent=False)

    def positions(self, L):
        if L > self.pe.shape[0]:
            self.pe = sinusoids(2 * L, self.d).to(self.pe.device)
        return self.pe[:L]

    def emissions(self, b):
        h = self.input(self.features(b))
        if self.position == "sinusoidal":
            h = h + self.positions(h.shape[1])
        h = self.dropout(h)
        mask = b["mask"]
        pad = ~mask
        for block in self.blocks:
            h = block(h, pad)
        h = self.norm(h) * mask.unsqueeze(2).to(h.dtype)
        return self.emit(h)


def load_batches(path, device):
    """The dumped batches as dicts of tensors (words, chars, caps, bigrams,
    tags, lengths, mask)."""
    with open(path) as f:
        d = json.load(f)
    out = []
    for b in d["batches"]:
        B, L, W = b["batch"], b["len"], b["word_len"]
        t = {
            "words": torch.tensor(b["words"], dtype=torch.long).view(B, L),
            "chars": torch.tensor(b["chars"], dtype=torch.long).view(B, L, W),
            "tags": torch.tensor(b["tags"], dtype=torch.long).view(B, L),
            "lengths": torch.tensor(b["lengths"], dtype=torch.long),
        }
        # Bigram ids only where the tagger reads bigrams (elsewhere the dump's
        # are padding, which token dropout must not touch, as in seqlab).
        for key in ("caps", "bigrams") if d.get("bigrams") else ("caps",):
            if b.get(key):
                t[key] = torch.tensor(b[key], dtype=torch.long).view(B, L)
        t["mask"] = torch.arange(L).unsqueeze(0) < t["lengths"].unsqueeze(1)
        out.append({k: v.to(device) for k, v in t.items()})
    return d, out


def token_dropout(b, word, char):
    """seqlab's training-time token dropout: each real word (and bigram)
    becomes <unk> with probability `word`, each real character with `char`."""
    if word == 0 and char == 0:
        return b
    b = dict(b)
    if word > 0:
        for key in ("words", "bigrams"):
            if key in b:
                drop = (torch.rand(b[key].shape, device=b[key].device) < word) & b["mask"]
                b[key] = b[key].masked_fill(drop, UNK)
    if char > 0:
        chars = b["chars"]
        drop = (torch.rand(chars.shape, device=chars.device) < char) & (chars != 0)
        b["chars"] = chars.masked_fill(drop, UNK)
    return b


def selftest():
    """The CRF's gold score, partition function and Viterbi path against
    brute-force enumeration of every tag sequence, on ragged batches."""
    import itertools

    torch.manual_seed(0)
    T, B, L = 4, 10, 5
    crf = CRF(T)
    with torch.no_grad():  # transitions as strong as the emissions
        for p in crf.parameters():
            p.normal_()
    em = torch.randn(B, L, T)
    lengths = torch.tensor([5, 1, 3, 2, 4, 1, 2, 3, 4, 5])
    mask = torch.arange(L).unsqueeze(0) < lengths.unsqueeze(1)
    tags = torch.randint(0, T, (B, L))

    def path_score(b, path):
        s = crf.start[path[0]] + crf.end[path[-1]] + sum(em[b, i, t] for i, t in enumerate(path))
        return s + sum(crf.trans[path[i - 1], path[i]] for i in range(1, len(path)))

    with torch.no_grad():
        gold, log_z, best = crf.gold_score(em, tags, mask, lengths), crf.log_partition(em, mask), crf.decode(em, mask, lengths)
        for b in range(B):
            n = int(lengths[b])
            paths = list(itertools.product(range(T), repeat=n))
            scores = torch.stack([path_score(b, p) for p in paths])
            assert torch.allclose(gold[b], path_score(b, tags[b, :n].tolist()), atol=1e-5), b
            assert torch.allclose(log_z[b], torch.logsumexp(scores, 0), atol=1e-5), b
            assert best[b] == list(paths[int(scores.argmax())]), (b, best[b])
    print("CRF gold score, partition function and Viterbi match brute force")
    # TENER's shifted scores against the formula, term by term.
    att = RelativeAttention(12, 3, 0.0, scaled=False)
    q, k = torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4)
    with torch.no_grad():
        got = att.scores(q, k)
        for i in range(6):
            for j in range(6):
                r = sinusoids(1, 4, first=i - j)[0]
                want = ((q[:, :, i] + att.u) * k[:, :, j]).sum(-1) + (q[:, :, i] + att.v) @ r  # [B, H]
                assert torch.allclose(got[:, :, i, j], want, atol=1e-5), (i, j)
    print("relative attention scores match (q_i + u)·k_j + (q_i + v)·r_(i−j)")
    # The padded BiLSTM against the packed one with the same weights.
    cfg = {"model": {"features": {"word_dim": 6, "char_dim": 4, "char_filters": 5, "char_kernel": 3, "dropout": 0.0},
                     "encoder": {"bilstm": {"hidden": 7, "dropout": 0.0}}}}
    meta = {"words": 20, "chars": 12, "tags": 5}
    padded, packed = BiLstmTagger(meta, cfg, "padded").eval(), BiLstmTagger(meta, cfg, "packed").eval()
    packed.load_state_dict(padded.state_dict(), strict=False)
    with torch.no_grad():
        for suffix, one in (("", padded.forward_lstm), ("_reverse", padded.backward_lstm)):
            for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                getattr(packed.lstm, name + suffix).copy_(getattr(one, name))
    lengths = torch.tensor([5, 1, 3, 4])
    mask = torch.arange(5).unsqueeze(0) < lengths.unsqueeze(1)
    b = {"words": torch.randint(2, 20, (4, 5)) * mask, "chars": torch.randint(1, 12, (4, 5, 3)) * mask.unsqueeze(2),
         "lengths": lengths, "mask": mask}
    with torch.no_grad():
        got, want = padded.emissions(b), packed.emissions(b)
    assert torch.allclose(got[mask], want[mask], atol=1e-5), (got[mask] - want[mask]).abs().max()
    print("the padded BiLSTM (backward LSTM over reversed sentences) equals the packed one")


def build(args, device):
    """The reference config's tagger, and its batches."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    meta, batches = load_batches(args.batches, device)
    kind = cfg["model"]["encoder"]["kind"]
    if kind == "bilstm":
        model = BiLstmTagger(meta, cfg, lstm=args.lstm)
    else:
        model = AttentionTagger(meta, cfg, layer=args.layer)
    model = model.to(device)
    model.bf16 = getattr(args, "bf16", None)
    if model.bf16 == "cast":
        model.to(torch.bfloat16)
        model.crf.float()
    return cfg, meta, batches, model


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_train(cfg, meta, model, batches, warmup, device):
    """seqlab's training step: token dropout at the rates seqlab's dump
    names, the loss, its gradients, clipping and Adam."""
    t = cfg["train"]
    # The fused implementation (one kernel over every parameter, CPU and
    # CUDA): 1.24× the default for-loop Adam's training steps of the
    # reference BiLSTM-CRF (one thread, CoNLL-2003 batches, 2026-12-07).
    opt = torch.optim.Adam(model.parameters(), lr=t["lr"], fused=True)
    word, char = meta.get("word_dropout", 0.0), meta.get("char_dropout", 0.0)
    model.train()

    def step(b):
        b = token_dropout(b, word, char)
        opt.zero_grad(set_to_none=True)
        loss = model.crf.nll(model.emissions(b), b["tags"], b["mask"], b["lengths"])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), t.get("grad_clip", 5.0))
        opt.step()

    for b in batches[:warmup]:
        step(b)
    sync(device)
    started = time.perf_counter()
    for b in batches[warmup:]:
        step(b)
    sync(device)
    return time.perf_counter() - started


def tag(model, b):
    """Tags of one batch: the number of tags decoded."""
    autocast = getattr(model, "bf16", None) == "autocast"
    with torch.inference_mode():
        with torch.autocast(b["words"].device.type, dtype=torch.bfloat16, enabled=autocast):
            em = model.emissions(b)
        return sum(map(len, model.crf.decode(em.float(), b["mask"], b["lengths"])))


def time_predict(model, batches, warmup, device):
    model.eval()
    for b in batches[:warmup]:
        tag(model, b)
    sync(device)
    started = time.perf_counter()
    decoded = sum(tag(model, b) for b in batches[warmup:])
    sync(device)
    return time.perf_counter() - started, decoded


def worker(args, rank, barrier, results):
    """One single-threaded inference process: warms up on every worker's
    share of the warm-up batches, waits for the others, then tags batches
    rank, rank + workers, ... of the timed ones."""
    args.threads = 1
    device = torch.device(args.device)
    _, meta, batches, model = build(args, device)
    warmup = meta["warmup"]
    model.eval()
    for b in batches[:warmup]:
        tag(model, b)
    barrier.wait(timeout=600)
    decoded = sum(tag(model, b) for b in batches[warmup:][rank :: args.workers])
    results.put((decoded, time.perf_counter()))


def time_workers(args):
    """Wall time of `args.workers` single-threaded processes sharing the timed
    batches, from the moment all of them are warm to the last one's end."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(args.workers + 1), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(args, r, barrier, results)) for r in range(args.workers)]
    for p in procs:
        p.start()
    barrier.wait(timeout=600)  # a worker that died breaks the barrier instead of hanging here
    started = time.perf_counter()
    done = [results.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
    return max(end for _, end in done) - started, sum(n for n, _ in done)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["train", "predict", "selftest"])
    p.add_argument("--config")
    p.add_argument("--batches", help="written by `seqlab bench train --dump`")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument(
        "--layer",
        choices=["encoder-layer", "blocks"],
        default="encoder-layer",
        help="attention blocks: nn.TransformerEncoderLayer(norm_first=True) or LayerNorm + MultiheadAttention + FFN",
    )
    p.add_argument(
        "--lstm",
        choices=["padded", "packed"],
        default="padded",
        help="BiLSTM: two one-way LSTMs over the padded batch, the backward one over reversed sentences, or a packed sequence",
    )
    p.add_argument(
        "--bf16",
        choices=["autocast", "cast"],
        help="predict: bf16 emissions, under torch.autocast or with the encoder's weights cast to bf16",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="predict in this many single-threaded processes, one batch each at a time (0: one process, --threads)",
    )
    args = p.parse_args()
    if args.workload == "selftest":
        return selftest()
    if not args.config or not args.batches:
        p.error("train and predict need --config and --batches")
    device = torch.device(args.device)
    if args.workers and args.workload != "predict":
        p.error("--workers is for predict")
    if args.bf16 and args.workload != "predict":
        p.error("--bf16 is for predict")
    if args.workers:
        with open(args.batches) as f:
            meta = json.load(f)
        timed = meta["batches"][meta["warmup"] :]
        tokens = sum(sum(b["lengths"]) for b in timed)
        batch = timed[0]["batch"] if timed else 0
        with open(args.config, "rb") as f:
            cfg = tomllib.load(f)
        seconds, decoded = time_workers(args)
        threads = args.workers
    else:
        cfg, meta, batches, model = build(args, device)
        warmup = meta["warmup"]
        timed = batches[warmup:]
        tokens = int(sum(b["lengths"].sum().item() for b in timed))
        batch = timed[0]["words"].shape[0] if timed else 0
        if args.workload == "train":
            seconds, decoded = time_train(cfg, meta, model, batches, warmup, device), tokens
        else:
            seconds, decoded = time_predict(model, batches, warmup, device)
        threads = torch.get_num_threads()
    assert decoded == tokens, (decoded, tokens)
    kind = cfg["model"]["encoder"]["kind"]
    print(
        json.dumps(
            {
                "workload": args.workload,
                "encoder": kind,
                "decoder": cfg["model"].get("decoder", "crf"),
                "batch": batch,
                "steps": len(timed),
                "tokens": tokens,
                "seconds": seconds,
                "tokens_per_second": tokens / max(seconds, 1e-12),
                "threads": threads,
                "workers": args.workers,
                "layer": args.layer if kind == "attention" else None,
                "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
                "impl": f"pytorch {torch.__version__}",
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                "precision": f"bf16 ({args.bf16})" if args.bf16 else "f32",
            }
        )
    )


if __name__ == "__main__":
    main()
