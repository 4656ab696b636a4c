//! Multi-head attention, shared by the self-attention encoder and the
//! cross-attention block: one place for the projections, the head split and
//! merge, the mask, the position terms of the scores (TENER's relative
//! scores, RoPE's rotation, ALiBi's and T5's biases), and the attention
//! implementations.
//!
//! Shapes: `B` batch, `H` heads, `Lq`/`Lk` query/key lengths, `Dh` head size,
//! `D` model size (`H·Dh`).

use crate::dropout::Dropout;
use crate::linear::per_token;
use crate::ops::dense_attention::{RelativeTerm, Terms, MASKED};
use crate::ops::SeqBackend;
use crate::positional::{alibi_slopes, relative_sinusoids, rotate, t5_bucket, Position, T5_BUCKETS};
use burn::module::Param;
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::softmax;
use burn::tensor::{TensorData, TensorPrimitive};
use serde::{Deserialize, Serialize};

/// How attention weights are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AttentionImpl {
    /// The plain formula: the full `[B, H, Lq, Lk]` score matrix. Unless
    /// the weights are asked for, it runs as one operation, the position
    /// terms of the scores included ([`SeqBackend::dense_attention`]): host
    /// loops with a hand-written backward on the CPU backends; Burn's fused
    /// `attention` op (with the terms as its bias) at inference elsewhere.
    #[default]
    Dense,
    /// Exact attention over key blocks with an online softmax
    /// ([`SeqBackend::flash_attention`]): O(L·block) memory forward, and in
    /// training a hand-written backward that recomputes the blocks. No
    /// dropout on the weights; not with positions that bias the scores
    /// (relative, ALiBi, T5).
    Chunked,
    /// Each query attends to the keys within ±`window` positions only,
    /// computed in blocks of `window` queries against their own and the two
    /// neighbouring key blocks: O(L·window) memory and time.
    Local,
}

/// An attention implementation with its sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionPlan {
    pub imp: AttentionImpl,
    /// Keys per block (chunked).
    pub block: usize,
    /// Half-width of the window (local).
    pub window: usize,
    /// Dense: run as one operation ([`SeqBackend::dense_attention`])
    /// instead of the plain formula composed from tensor operations. On by
    /// default; off only to measure the plain formula (`seqlab bench
    /// attention --impl dense`).
    pub fused: bool,
}

impl AttentionPlan {
    pub fn dense() -> Self {
        AttentionPlan { imp: AttentionImpl::Dense, block: 64, window: 16, fused: true }
    }
}

/// Multi-head attention: queries from one sequence, keys and values from
/// another (the same one for self-attention).
#[derive(Module, Debug)]
pub struct MultiHeadAttention<B: Backend> {
    pub query: Linear<B>,
    pub key: Linear<B>,
    pub value: Linear<B>,
    pub output: Linear<B>,
    /// TENER-style relative position terms, when enabled.
    pub relative: Option<RelativeTerms<B>>,
    /// T5's learned bias per distance bucket and head `[T5_BUCKETS, H]`,
    /// when enabled.
    pub t5: Option<Param<Tensor<B, 2>>>,
    /// RoPE: queries and keys rotated by their position.
    rope: bool,
    /// ALiBi: `−m_h·|i − j|` added to each head's scores.
    alibi: bool,
    pub dropout: Dropout,
    heads: usize,
    head_dim: usize,
    /// Whether scores are divided by √Dh (TENER found unscaled sharper
    /// attention better for NER).
    scaled: bool,
}

/// The learned biases `u` and `v` of Transformer-XL/TENER relative
/// attention: `score(i, j) = (q_i + u)·k_j + (q_i + v)·r_{i−j}` with `r` a
/// direction-aware sinusoid of the signed distance.
#[derive(Module, Debug)]
pub struct RelativeTerms<B: Backend> {
    /// `[H, Dh]`, content bias.
    pub u: Param<Tensor<B, 2>>,
    /// `[H, Dh]`, position bias.
    pub v: Param<Tensor<B, 2>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MultiHeadConfig {
    pub d_query: usize,
    pub d_key: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub dropout: f64,
    /// Which position terms the scores get: relative, rope, alibi or t5
    /// (the others add positions to the input, not here).
    pub position: Position,
    pub scaled: bool,
}

impl MultiHeadConfig {
    pub fn init<B: Backend>(&self, device: &B::Device) -> MultiHeadAttention<B> {
        let d = self.heads * self.head_dim;
        let relative = (self.position == Position::Relative).then(|| RelativeTerms {
            u: Param::from_tensor(Tensor::zeros([self.heads, self.head_dim], device)),
            v: Param::from_tensor(Tensor::zeros([self.heads, self.head_dim], device)),
        });
        MultiHeadAttention {
            query: LinearConfig::new(self.d_query, d).init(device),
            key: LinearConfig::new(self.d_key, d).init(device),
            value: LinearConfig::new(self.d_key, d).init(device),
            output: LinearConfig::new(d, self.d_query).init(device),
            relative,
            t5: (self.position == Position::T5)
                .then(|| Param::from_tensor(Tensor::zeros([T5_BUCKETS, self.heads], device))),
            rope: self.position == Position::Rope,
            alibi: self.position == Position::Alibi,
            dropout: Dropout::new(self.dropout),
            heads: self.heads,
            head_dim: self.head_dim,
            scaled: self.scaled,
        }
    }
}

impl MultiHeadConfig {
    /// Cross-attention with these sizes (`d_query` for the attending
    /// sequence, `d_key` for the attended one; no position terms: the two
    /// sequences share no axis).
    pub fn init_cross<B: Backend>(&self, device: &B::Device) -> CrossAttention<B> {
        CrossAttention { attention: MultiHeadConfig { position: Position::None, ..self.clone() }.init(device) }
    }
}

/// Multi-head cross-attention: each position of sequence A (the queries,
/// e.g. a context) attends over sequence B (keys and values, e.g. a
/// question). The same [`MultiHeadAttention`] as self-attention, with masks
/// on both sides: padded keys get zero weight, and padded queries (and
/// queries with no real key) get a zero output and zero weights.
///
/// Shapes: `a [B, La, Da]` → `q [B, H, La, Dh]`; `b [B, Lb, Db]` → `k, v
/// [B, H, Lb, Dh]`; weights `[B, H, La, Lb]`; context `[B, La, Da]`.
#[derive(Module, Debug)]
pub struct CrossAttention<B: Backend> {
    pub attention: MultiHeadAttention<B>,
}

impl<B: Backend> CrossAttention<B> {
    /// `a [B, La, Da]` with `a_mask [B, La]` attends over `b [B, Lb, Db]`
    /// with `b_mask [B, Lb]` → context `[B, La, Da]` and, when asked,
    /// weights `[B, H, La, Lb]`. Local attention needs one shared axis, so
    /// it runs as dense here; chunked runs chunked.
    pub fn forward(
        &self,
        a: Tensor<B, 3>,
        a_mask: Tensor<B, 2, Bool>,
        b: Tensor<B, 3>,
        b_mask: Tensor<B, 2, Bool>,
        plan: AttentionPlan,
        want_weights: bool,
    ) -> AttentionOutput<B>
    where
        B: SeqBackend,
    {
        let plan = match plan.imp {
            AttentionImpl::Local => AttentionPlan { imp: AttentionImpl::Dense, ..plan },
            _ => plan,
        };
        let [n, la, d] = a.dims();
        let lb = b.dims()[1];
        let h = self.attention.heads();
        let out = self.attention.forward(a, b, b_mask.clone(), plan, want_weights);
        // Real queries of sentences with at least one real key (else the
        // output projection's bias would leak into a "zero" context).
        let any_key = b_mask.float().sum_dim(1).greater_elem(0.0).float(); // [B, 1]
        let queries = a_mask.float() * any_key.expand([n, la]); // [B, La]
        let context = out.context * queries.clone().unsqueeze_dim::<3>(2).expand([n, la, d]); // [B, La, D]
        let weights = out.weights.map(|w| w * queries.unsqueeze_dims::<4>(&[1, 3]).expand([n, h, la, lb]));
        AttentionOutput { context, weights }
    }
}

/// The attended values, and the weights when asked for.
pub struct AttentionOutput<B: Backend> {
    /// `[B, Lq, D]`.
    pub context: Tensor<B, 3>,
    /// `[B, H, Lq, Lk]`.
    pub weights: Option<Tensor<B, 4>>,
}

impl<B: Backend> MultiHeadAttention<B> {
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// `query [B, Lq, Dq]` attends over `memory [B, Lk, Dk]`; `key_mask
    /// [B, Lk]` is true at real keys. Padded keys get zero weight; a query
    /// with no real key gets a zero context. Asking for the weights runs the
    /// dense formula (with the window's band for local attention), which
    /// gives the same context.
    pub fn forward(
        &self,
        query: Tensor<B, 3>,
        memory: Tensor<B, 3>,
        key_mask: Tensor<B, 2, Bool>,
        plan: AttentionPlan,
        want_weights: bool,
    ) -> AttentionOutput<B>
    where
        B: SeqBackend,
    {
        let mut q = per_token(&self.query, query); // [B, Lq, H·Dh]
        let mut k = per_token(&self.key, memory.clone()); // [B, Lk, H·Dh]
        let v = per_token(&self.value, memory); // [B, Lk, H·Dh]
        if self.rope {
            (q, k) = (rotate(q, self.heads), rotate(k, self.heads)); // each position turned by its angle
        }
        if plan.imp == AttentionImpl::Dense && plan.fused && !want_weights {
            let ctx = self.one_op(q, k, v, key_mask); // [B, Lq, H·Dh]
            return AttentionOutput { context: per_token(&self.output, ctx), weights: None };
        }
        let (q, k, v) = (self.split_heads(q), self.split_heads(k), self.split_heads(v)); // [B, H, L, Dh]
        let band = (plan.imp == AttentionImpl::Local).then_some(plan.window);
        let (ctx, weights) = match plan.imp {
            _ if want_weights => self.dense(q, k, v, key_mask, band, true),
            AttentionImpl::Dense => self.dense(q, k, v, key_mask, None, false),
            AttentionImpl::Chunked => (self.chunked(q, k, v, key_mask, plan.block), None),
            AttentionImpl::Local => (self.local(q, k, v, key_mask, plan.window), None),
        };
        AttentionOutput { context: per_token(&self.output, self.merge_heads(ctx)), weights }
    }

    /// Whether the scores get a position term of their own (relative,
    /// ALiBi, T5), which chunked attention does not support.
    fn biases_scores(&self) -> bool {
        self.relative.is_some() || self.t5.is_some() || self.alibi
    }

    /// ALiBi's or T5's bias for a block of `rows × cols` scores, whose
    /// query `r` and key `c` are `distance(r, c)` apart (`i − j`):
    /// `[H, rows, cols]`; `None` (and nothing computed) without either.
    fn distance_bias(
        &self,
        rows: usize,
        cols: usize,
        distance: impl Fn(usize, usize) -> i64,
        device: &B::Device,
    ) -> Option<Tensor<B, 3>> {
        if !self.alibi && self.t5.is_none() {
            return None;
        }
        let distance = &distance;
        let dist: Vec<i64> = (0..rows).flat_map(|r| (0..cols).map(move |c| distance(r, c))).collect();
        let h = self.heads;
        if self.alibi {
            let slopes = alibi_slopes(h);
            let bias: Vec<f32> =
                slopes.iter().flat_map(|&m| dist.iter().map(move |&d| -m * d.unsigned_abs() as f32)).collect();
            return Some(Tensor::from_data(TensorData::new(bias, [h, rows, cols]), device));
        }
        let table = self.t5.as_ref()?.val(); // [T5_BUCKETS, H]
        let buckets: Vec<i64> = dist.iter().map(|&d| t5_bucket(d) as i64).collect();
        let buckets = Tensor::<B, 1, Int>::from_data(TensorData::new(buckets, [rows * cols]), device);
        Some(table.select(0, buckets).transpose().reshape([h, rows, cols])) // [H, rows, cols]
    }

    fn scale(&self) -> f32 {
        if self.scaled {
            1.0 / (self.head_dim as f32).sqrt()
        } else {
            1.0
        }
    }

    /// `[B, L, H·Dh]` → `[B, H, L, Dh]`.
    fn split_heads(&self, x: Tensor<B, 3>) -> Tensor<B, 4> {
        let [b, l, _] = x.dims();
        x.reshape([b, l, self.heads, self.head_dim]).swap_dims(1, 2)
    }

    /// `[B, H, L, Dh]` → `[B, L, H·Dh]`.
    fn merge_heads(&self, x: Tensor<B, 4>) -> Tensor<B, 3> {
        let [b, h, l, dh] = x.dims();
        x.swap_dims(1, 2).reshape([b, l, h * dh])
    }

    /// Raw scores of a block of queries (starting at position `q0`) against
    /// a block of keys (starting at `k0`): `[B, H, bq, bk]`, before masking.
    fn scores(&self, q: Tensor<B, 4>, k: Tensor<B, 4>, q0: usize, k0: usize) -> Tensor<B, 4> {
        let [b, h, bq, dh] = q.dims();
        let bk = k.dims()[2];
        let kt = k.swap_dims(2, 3); // [B, H, Dh, bk]
        let s = match &self.relative {
            None => q.clone().matmul(kt), // [B, H, bq, bk]
            Some(rel) => {
                let u = rel.u.val().reshape([1, h, 1, dh]);
                let v = rel.v.val().reshape([1, h, 1, dh]);
                let content = (q.clone() + u).matmul(kt); // [B, H, bq, bk]

                // Distances i − j in this block run from q0 − (k0 + bk − 1)
                // to q0 + bq − 1 − k0: bq + bk − 1 of them.
                let dmin = q0 as i64 - (k0 + bk - 1) as i64;
                let r = relative_sinusoids::<B>(dmin, bq + bk - 1, dh, &q.device()); // [bq+bk−1, Dh]
                let qr = (q + v).matmul(r.transpose().unsqueeze_dims::<4>(&[0, 1])); // [B, H, bq, bq+bk−1]

                // Row i, column j takes distance (q0+i) − (k0+j), at offset i − j + bk − 1.
                let idx: Vec<i64> = (0..bq).flat_map(|i| (0..bk).map(move |j| (i + bk - 1 - j) as i64)).collect();
                let idx = Tensor::<B, 2, Int>::from_data(TensorData::new(idx, [bq, bk]), &qr.device())
                    .unsqueeze_dims::<4>(&[0, 1])
                    .expand([b, h, bq, bk]);
                content + qr.gather(3, idx)
            }
        };
        let s = s.mul_scalar(self.scale()); // [B, H, bq, bk]
        match self.distance_bias(bq, bk, |i, j| (q0 + i) as i64 - (k0 + j) as i64, &s.device()) {
            Some(bias) => s + bias.unsqueeze_dim::<4>(0), // [B, H, bq, bk]
            None => s,
        }
    }

    /// The plain formula over the whole `[B, H, Lq, Lk]` score matrix; with
    /// `band`, keys further than that from the query are masked too.
    fn dense(
        &self,
        q: Tensor<B, 4>,
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
        key_mask: Tensor<B, 2, Bool>,
        band: Option<usize>,
        want_weights: bool,
    ) -> (Tensor<B, 4>, Option<Tensor<B, 4>>) {
        let [b, h, lq, _] = q.dims();
        let lk = k.dims()[2];
        let scores = self.scores(q, k, 0, 0); // [B, H, Lq, Lk]
        let mut keys = key_mask.unsqueeze_dims::<4>(&[1, 2]).expand([b, h, lq, lk]); // [B, H, Lq, Lk]
        if let Some(w) = band {
            let near: Vec<bool> = (0..lq).flat_map(|i| (0..lk).map(move |j| i.abs_diff(j) <= w)).collect();
            let near = Tensor::<B, 2, Bool>::from_data(TensorData::new(near, [lq, lk]), &scores.device());
            keys = keys.bool_and(near.unsqueeze_dims::<4>(&[0, 1]).expand([b, h, lq, lk]));
        }
        let scores = scores.mask_fill(keys.clone().bool_not(), MASKED);
        // Zero the weights of padded keys: a row with no real key becomes 0.
        let weights = softmax(scores, 3) * keys.float(); // [B, H, Lq, Lk]
        let ctx = self.dropout.forward(weights.clone()).matmul(v); // [B, H, Lq, Dh]
        (ctx, want_weights.then_some(weights))
    }

    /// [`SeqBackend::dense_attention`]: the dense formula as one operation
    /// on heads side by side (host loops on the CPU backends, Burn's fused
    /// op at inference elsewhere), the position terms of the scores
    /// included, dropout on the weights in training.
    fn one_op(&self, q: Tensor<B, 3>, k: Tensor<B, 3>, v: Tensor<B, 3>, key_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3>
    where
        B: SeqBackend,
    {
        let [b, lq, d] = q.dims();
        let lk = k.dims()[1];
        let device = q.device();
        let terms = Terms {
            // score(i, j) gains ALiBi's or T5's bias of the distance i − j ...
            bias: self.distance_bias(lq, lk, |i, j| i as i64 - j as i64, &device), // [H, Lq, Lk]
            // ... or TENER's (q_i + v)·r_{i−j}, distances −(Lk − 1) ..= Lq − 1.
            relative: self.relative.as_ref().map(|rel| RelativeTerm {
                qv: q.clone() + rel.v.val().reshape([1, 1, d]), // [B, Lq, H·Dh]
                r: relative_sinusoids::<B>(1 - lk as i64, (lq + lk).saturating_sub(1), self.head_dim, &device),
            }),
        };
        // TENER's content term: (q_i + u)·k_j.
        let q = match &self.relative {
            Some(rel) => q + rel.u.val().reshape([1, 1, d]), // [B, Lq, H·Dh]
            None => q,
        };
        let keep = self.dropout.mask::<B, 4>([b, self.heads, lq, lk], &device); // [B, H, Lq, Lk]
        let prim = |x: Tensor<B, 3>| x.into_primitive().tensor();
        Tensor::from_primitive(TensorPrimitive::Float(B::dense_attention(
            prim(q),
            prim(k),
            prim(v),
            key_mask.float().into_primitive().tensor(),
            keep.map(|m| m.into_primitive().tensor()),
            self.heads,
            self.scale(),
            terms,
        )))
    }

    /// [`SeqBackend::flash_attention`]: exact, blocked, O(L·block) memory.
    fn chunked(
        &self,
        q: Tensor<B, 4>,
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
        key_mask: Tensor<B, 2, Bool>,
        block: usize,
    ) -> Tensor<B, 4>
    where
        B: SeqBackend,
    {
        assert!(!self.biases_scores(), "chunked attention does not support positions that bias the scores");
        let mask = key_mask.float().unsqueeze_dims::<4>(&[1, 2]); // [B, 1, 1, Lk]
        let prim = |x: Tensor<B, 4>| x.into_primitive().tensor();
        Tensor::from_primitive(TensorPrimitive::Float(B::flash_attention(
            prim(q),
            prim(k),
            prim(v),
            prim(mask),
            self.scale(),
            block,
        )))
    }

    /// Windowed attention: queries in blocks of `w`, each block against its
    /// own and the two neighbouring key blocks (`3w` keys), then the band
    /// `|i − j| ≤ w` and the key mask. Self-attention only (`Lq = Lk`).
    fn local(
        &self,
        q: Tensor<B, 4>,
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
        key_mask: Tensor<B, 2, Bool>,
        w: usize,
    ) -> Tensor<B, 4> {
        let [b, h, l, dh] = q.dims();
        assert_eq!(l, k.dims()[2], "local attention is for self-attention");
        let w = w.max(1);
        let nb = l.div_ceil(w);
        let lp = nb * w;
        let device = q.device();
        // Pad the sequence to a whole number of blocks.
        let pad4 = |x: Tensor<B, 4>| {
            if lp == l {
                x
            } else {
                Tensor::cat(vec![x, Tensor::zeros([b, h, lp - l, dh], &device)], 2)
            }
        };
        let blocks = |x: Tensor<B, 4>| pad4(x).reshape([b, h, nb, w, dh]); // [B, H, nb, w, Dh]

        // Each block next to its neighbours: [B, H, nb, 3w, Dh].
        let around = |x: Tensor<B, 5>| {
            let zero = Tensor::<B, 5>::zeros([b, h, 1, w, dh], &device);
            let prev = Tensor::cat(vec![zero.clone(), x.clone().slice([0..b, 0..h, 0..nb - 1])], 2);
            let next = Tensor::cat(vec![x.clone().slice([0..b, 0..h, 1..nb]), zero], 2);
            Tensor::cat(vec![prev, x, next], 3)
        };
        let qb = blocks(q); // [B, H, nb, w, Dh]
        let k3 = around(blocks(k)); // [B, H, nb, 3w, Dh]
        let v3 = around(blocks(v));
        let k3t = k3.swap_dims(3, 4); // [B, H, nb, Dh, 3w]
        let scores = match &self.relative {
            None => qb.matmul(k3t),
            Some(rel) => {
                let u = rel.u.val().reshape([1, h, 1, 1, dh]);
                let vb = rel.v.val().reshape([1, h, 1, 1, dh]);
                let content = (qb.clone() + u).matmul(k3t); // [B, H, nb, w, 3w]

                // Query r of a block and key c of its 3w neighbours are
                // r + w − c apart: from −(2w−1) to 2w−1.
                let r = relative_sinusoids::<B>(-(2 * w as i64 - 1), 4 * w - 1, dh, &device); // [4w−1, Dh]
                let qr = (qb + vb).matmul(r.transpose().unsqueeze_dims::<5>(&[0, 1, 2])); // [B, H, nb, w, 4w−1]
                let idx: Vec<i64> = (0..w).flat_map(|r| (0..3 * w).map(move |c| (r + 3 * w - 1 - c) as i64)).collect();
                let idx = Tensor::<B, 2, Int>::from_data(TensorData::new(idx, [w, 3 * w]), &device)
                    .unsqueeze_dims::<5>(&[0, 1, 2])
                    .expand([b, h, nb, w, 3 * w]);
                content + qr.gather(4, idx)
            }
        }
        .mul_scalar(self.scale()); // [B, H, nb, w, 3w]

        // Query r of a block and key c of its 3w neighbours are r + w − c apart.
        let scores = match self.distance_bias(w, 3 * w, |r, c| (r + w) as i64 - c as i64, &device) {
            Some(bias) => scores + bias.reshape([1, h, 1, w, 3 * w]),
            None => scores,
        };

        // Real keys among the 3w neighbours, and the band |i − j| ≤ w.
        let mut m = key_mask.float();
        if lp > l {
            m = Tensor::cat(vec![m, Tensor::zeros([b, lp - l], &device)], 1);
        }
        let mb = m.reshape([b, nb, w]);
        let zero = Tensor::<B, 3>::zeros([b, 1, w], &device);
        let m3 = Tensor::cat(
            vec![
                Tensor::cat(vec![zero.clone(), mb.clone().slice([0..b, 0..nb - 1])], 1),
                mb.clone(),
                Tensor::cat(vec![mb.slice([0..b, 1..nb]), zero], 1),
            ],
            2,
        ); // [B, nb, 3w]
        let band: Vec<f32> =
            (0..w).flat_map(|r| (0..3 * w).map(move |c| f32::from((r + w).abs_diff(c) <= w))).collect();
        let band = Tensor::<B, 2>::from_data(TensorData::new(band, [w, 3 * w]), &device);
        let valid = m3.unsqueeze_dims::<5>(&[1, 3]) * band.unsqueeze_dims::<5>(&[0, 1, 2]); // [B, 1, nb, w, 3w]
        let valid = valid.expand([b, h, nb, w, 3 * w]);
        let scores = scores.mask_fill(valid.clone().lower_elem(0.5), MASKED);
        let weights = softmax(scores, 4) * valid; // [B, H, nb, w, 3w]
        let ctx = self.dropout.forward(weights).matmul(v3); // [B, H, nb, w, Dh]
        ctx.reshape([b, h, lp, dh]).slice([0..b, 0..h, 0..l])
    }
}
