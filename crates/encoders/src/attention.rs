//! Multi-head attention, shared by the self-attention encoder and the
//! cross-attention block: one place for the projections, the head split and
//! merge, the mask, the optional relative-position scores, and the attention
//! implementations.
//!
//! Shapes: `B` batch, `H` heads, `Lq`/`Lk` query/key lengths, `Dh` head size,
//! `D` model size (`H·Dh`).

use crate::positional::relative_sinusoids;
use burn::module::{Param, ParamId};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::softmax;
use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

/// Score given to padded keys before the softmax (finite, so that a fully
/// padded row is a uniform softmax that the key mask then zeroes, never NaN).
const MASKED: f32 = -1.0e9;

/// How attention weights are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AttentionImpl {
    /// The plain formula: the full `[B, H, Lq, Lk]` score matrix.
    #[default]
    Dense,
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
    pub relative: bool,
    pub scaled: bool,
}

impl MultiHeadConfig {
    pub fn init<B: Backend>(&self, device: &B::Device) -> MultiHeadAttention<B> {
        let d = self.heads * self.head_dim;
        let relative = self.relative.then(|| RelativeTerms {
            u: Param::initialized(ParamId::new(), Tensor::zeros([self.heads, self.head_dim], device)),
            v: Param::initialized(ParamId::new(), Tensor::zeros([self.heads, self.head_dim], device)),
        });
        MultiHeadAttention {
            query: LinearConfig::new(self.d_query, d).init(device),
            key: LinearConfig::new(self.d_key, d).init(device),
            value: LinearConfig::new(self.d_key, d).init(device),
            output: LinearConfig::new(d, self.d_query).init(device),
            relative,
            dropout: DropoutConfig::new(self.dropout).init(),
            heads: self.heads,
            head_dim: self.head_dim,
            scaled: self.scaled,
        }
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
    /// `query [B, Lq, Dq]` attends over `memory [B, Lk, Dk]`; `key_mask
    /// [B, Lk]` is true at real keys. Padded keys get zero weight; a query
    /// with no real key gets a zero context.
    pub fn forward(
        &self,
        query: Tensor<B, 3>,
        memory: Tensor<B, 3>,
        key_mask: Tensor<B, 2, Bool>,
        imp: AttentionImpl,
        want_weights: bool,
    ) -> AttentionOutput<B> {
        let q = self.split_heads(self.query.forward(query)); // [B, H, Lq, Dh]
        let k = self.split_heads(self.key.forward(memory.clone())); // [B, H, Lk, Dh]
        let v = self.split_heads(self.value.forward(memory)); // [B, H, Lk, Dh]
        let (ctx, weights) = match imp {
            AttentionImpl::Dense => self.dense(q, k, v, key_mask, want_weights),
        };
        AttentionOutput { context: self.output.forward(self.merge_heads(ctx)), weights }
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
        let mut s = match &self.relative {
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
        if self.scaled {
            s = s.div_scalar((dh as f64).sqrt());
        }
        s
    }

    /// The plain formula over the whole `[B, H, Lq, Lk]` score matrix.
    fn dense(
        &self,
        q: Tensor<B, 4>,
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
        key_mask: Tensor<B, 2, Bool>,
        want_weights: bool,
    ) -> (Tensor<B, 4>, Option<Tensor<B, 4>>) {
        let [b, h, lq, _] = q.dims();
        let lk = k.dims()[2];
        let scores = self.scores(q, k, 0, 0); // [B, H, Lq, Lk]
        let keys = key_mask.unsqueeze_dims::<4>(&[1, 2]).expand([b, h, lq, lk]); // [B, H, Lq, Lk]
        let scores = scores.mask_fill(keys.clone().bool_not(), MASKED);
        // Zero the weights of padded keys: a row with no real key becomes 0.
        let weights = softmax(scores, 3) * keys.float(); // [B, H, Lq, Lk]
        let ctx = self.dropout.forward(weights.clone()).matmul(v); // [B, H, Lq, Dh]
        (ctx, want_weights.then_some(weights))
    }
}
