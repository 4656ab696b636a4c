//! BiDAF's attention flow layer (Seo, Kembhavi, Farhadi and Hajishirzi,
//! "Bidirectional Attention Flow for Machine Comprehension", ICLR 2017,
//! section 2.4): every context position reads the question (context to
//! query) and the question picks the context positions that matter most to
//! it (query to context); the two are fused per context position as
//! `[c; a; c∘a; c∘b]` for the modelling layer.
//!
//! Shapes: `B` batch, `L` context length, `Lq` question length, `D` the
//! contextual encoder's output size. Masks are float, 1 at real tokens and
//! 0 at padding.

use crate::ops::dense_attention::MASKED;
use burn::module::Param;
use burn::prelude::*;
use burn::tensor::activation::softmax;
use burn::tensor::Distribution;

/// The trainable similarity `α(c, q) = w_c·c + w_q·q + w_cq·(c∘q)`, the
/// paper's `w_(S)ᵀ [c; q; c∘q]` split in three so that the `[B, L, Lq, 3D]`
/// tensor of concatenations is never built.
#[derive(Module, Debug)]
pub struct AttentionFlow<B: Backend> {
    /// `[D]`.
    pub w_c: Param<Tensor<B, 1>>,
    /// `[D]`.
    pub w_q: Param<Tensor<B, 1>>,
    /// `[D]`.
    pub w_cq: Param<Tensor<B, 1>>,
}

/// The fused context and the context-to-query weights.
pub struct Flowed<B: Backend> {
    /// `[B, L, 4D]`: `[c; a; c∘a; c∘b]`.
    pub g: Tensor<B, 3>,
    /// `[B, L, Lq]`: each context position's attention over the question.
    pub c2q: Tensor<B, 3>,
}

impl<B: Backend> AttentionFlow<B> {
    /// `d`: the size of a contextual vector. Uniform in ±1/√(3d), the
    /// fan-in initialisation of the paper's single `3d → 1` projection.
    pub fn new(d: usize, device: &B::Device) -> Self {
        let k = 1.0 / ((3 * d) as f64).sqrt();
        let w = || Param::from_tensor(Tensor::random([d], Distribution::Uniform(-k, k), device));
        AttentionFlow { w_c: w(), w_q: w(), w_cq: w() }
    }

    /// Similarity `S [B, L, Lq]` of every context and question position.
    pub fn similarity(&self, c: Tensor<B, 3>, q: Tensor<B, 3>) -> Tensor<B, 3> {
        let [_, _, d] = c.dims();
        let column = |w: &Param<Tensor<B, 1>>| w.val().reshape([1, d, 1]); // [1, D, 1]
        let s_c = c.clone().matmul(column(&self.w_c)); // [B, L, 1]
        let s_q = q.clone().matmul(column(&self.w_q)).swap_dims(1, 2); // [B, 1, Lq]
        let s_cq = (c * self.w_cq.val().reshape([1, 1, d])).matmul(q.swap_dims(1, 2)); // [B, L, Lq]
        s_cq + s_c + s_q // [B, L, Lq]
    }

    /// `c [B, L, D]` (zero at padding), `c_mask [B, L]`, `q [B, Lq, D]`,
    /// `q_mask [B, Lq]` → `g [B, L, 4D]` and the context-to-query weights.
    pub fn forward(&self, c: Tensor<B, 3>, c_mask: Tensor<B, 2>, q: Tensor<B, 3>, q_mask: Tensor<B, 2>) -> Flowed<B> {
        let [b, l, d] = c.dims();
        let keys = q_mask.unsqueeze_dim::<3>(1); // [B, 1, Lq]

        // The similarity, MASKED at padded question tokens: both directions read it.
        let s = self.similarity(c.clone(), q.clone()) + padding_bias(keys.clone()); // [B, L, Lq]

        // Context to query: a_t = Σ_j softmax_j(S_tj) q_j.
        let c2q = softmax(s.clone(), 2) * keys; // [B, L, Lq]
        let a = c2q.clone().matmul(q); // [B, L, D]

        // Query to context: b = Σ_t softmax_t(max_j S_tj) c_t, the same for every t.
        let best = s.max_dim(2).swap_dims(1, 2); // [B, 1, L]
        let q2c = masked_softmax(best, c_mask); // [B, 1, L]
        let h = q2c.matmul(c.clone()).expand([b, l, d]); // [B, L, D]
        let g = Tensor::cat(vec![c.clone(), a.clone(), c.clone() * a, c * h], 2); // [B, L, 4D]
        Flowed { g, c2q }
    }
}

/// `keys [B, 1, K]` (1 real, 0 padding) → 0 at real keys, MASKED at padding,
/// to add to scores before a softmax over K.
fn padding_bias<B: Backend>(keys: Tensor<B, 3>) -> Tensor<B, 3> {
    (keys - 1.0).mul_scalar(-MASKED)
}

/// Softmax of `scores [B, R, K]` over its last axis, restricted to the
/// real keys of `keys [B, K]` (1 real, 0 padding): padded keys get weight
/// 0, and a row with no real key gets all zeros, not NaN.
pub fn masked_softmax<B: Backend>(scores: Tensor<B, 3>, keys: Tensor<B, 2>) -> Tensor<B, 3> {
    let keys = keys.unsqueeze_dim::<3>(1); // [B, 1, K]
    softmax(scores + padding_bias(keys.clone()), 2) * keys // [B, R, K]
}
