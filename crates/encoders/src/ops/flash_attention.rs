//! Exact softmax attention over key blocks with an online softmax
//! (FlashAttention's algorithm): the `[Lq, Lk]` weight matrix never exists,
//! only one `[Lq, block]` slab at a time ([`SeqBackend::flash_attention`]).
//!
//! Composed from ordinary tensor operations, the forward pass
//! ([`flash_forward`]) alone already saves that memory; but under autodiff
//! every block's intermediates would be kept for the backward pass, which
//! adds up to the full matrix again. So on an autodiff backend the
//! operation records only its inputs, its output and the per-row
//! log-sum-exp, and its backward pass ([`flash_backward`]) recomputes each
//! block's weights (FlashAttention-2's backward). Training memory is then
//! O(L·d) instead of O(L²).
//!
//! Both passes are written once, generically, with the tensor API of the
//! inner backend, so the same code runs on every backend (no host loops).
//!
//! [`SeqBackend::flash_attention`]: super::SeqBackend::flash_attention

use super::dense_attention::MASKED;
use burn::prelude::*;

/// Smallest normaliser: a row with no real key gets zero weights, not NaN.
const TINY: f32 = 1.0e-30;

/// The key blocks `[start, end)` of a sequence of `lk` keys.
fn blocks(lk: usize, block: usize) -> impl Iterator<Item = (usize, usize)> {
    let block = block.max(1);
    (0..lk.div_ceil(block)).map(move |j| (j * block, ((j + 1) * block).min(lk)))
}

/// Scores of all queries against keys `k0..k1`, padded keys pushed to
/// [`MASKED`]: `[B, H, Lq, bk]`, and the block's mask `[B, 1, 1, bk]`.
fn block_scores<B: Backend>(
    q: &Tensor<B, 4>,
    k: &Tensor<B, 4>,
    mask: &Tensor<B, 4>,
    (k0, k1): (usize, usize),
    scale: f32,
) -> (Tensor<B, 4>, Tensor<B, 4>) {
    let [b, h, _, dh] = k.dims();
    let kj = k.clone().slice([0..b, 0..h, k0..k1, 0..dh]); // [B, H, bk, Dh]
    let mj = mask.clone().slice([0..b, 0..1, 0..1, k0..k1]); // [B, 1, 1, bk]
    let bias = (mj.clone() - 1.0).mul_scalar(-MASKED); // 0 at real keys, MASKED at padding
    let s = q.clone().matmul(kj.swap_dims(2, 3)).mul_scalar(scale) + bias; // [B, H, Lq, bk]
    (s, mj)
}

/// Forward pass: the output `[B, H, Lq, Dh]` and the per-row log-sum-exp of
/// the scores `[B, H, Lq, 1]` (what the backward pass needs).
pub fn flash_forward<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Tensor<B, 4>,
    scale: f32,
    block: usize,
) -> (Tensor<B, 4>, Tensor<B, 4>) {
    let [b, h, lq, _] = q.dims();
    let [_, _, lk, dv] = v.dims();
    let device = q.device();
    let mut m = Tensor::<B, 4>::full([b, h, lq, 1], -1.0e30, &device); // running max
    let mut l = Tensor::<B, 4>::zeros([b, h, lq, 1], &device); // running normaliser
    let mut o = Tensor::<B, 4>::zeros([b, h, lq, dv], &device); // running numerator
    for (k0, k1) in blocks(lk, block) {
        let (s, mj) = block_scores(&q, &k, &mask, (k0, k1), scale);
        let m_new = m.clone().max_pair(s.clone().max_dim(3)); // [B, H, Lq, 1]
        let pj = (s - m_new.clone()).exp() * mj; // [B, H, Lq, bk]
        let alpha = (m - m_new.clone()).exp(); // rescales what came before
        l = l * alpha.clone() + pj.clone().sum_dim(3);
        let vj = v.clone().slice([0..b, 0..h, k0..k1, 0..dv]);
        o = o * alpha + pj.matmul(vj);
        m = m_new;
    }
    let l = l.clamp_min(TINY);
    (o / l.clone(), m + l.log())
}

/// Backward pass: gradients of `q`, `k`, `v` given the output's gradient,
/// recomputing each key block's weights from the saved log-sum-exp.
#[allow(clippy::too_many_arguments)]
pub fn flash_backward<B: Backend>(
    q: Tensor<B, 4>,
    k: Tensor<B, 4>,
    v: Tensor<B, 4>,
    mask: Tensor<B, 4>,
    out: Tensor<B, 4>,
    lse: Tensor<B, 4>,
    grad: Tensor<B, 4>,
    scale: f32,
    block: usize,
) -> (Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 4>) {
    let [b, h, _, dh] = q.dims();
    let [_, _, lk, dv] = v.dims();
    // D_i = Σ_d dO_id · O_id: [B, H, Lq, 1].
    let d = (grad.clone() * out).sum_dim(3);
    let mut dq = q.zeros_like();
    let mut dks = Vec::new();
    let mut dvs = Vec::new();
    for (k0, k1) in blocks(lk, block) {
        let (s, mj) = block_scores(&q, &k, &mask, (k0, k1), scale);
        // The block's weights; for real keys s ≤ lse, so the clamp changes
        // nothing but keeps padded keys of empty rows from overflowing.
        let pj = (s - lse.clone()).clamp_max(0.0).exp() * mj; // [B, H, Lq, bk]
        let kj = k.clone().slice([0..b, 0..h, k0..k1, 0..dh]);
        let vj = v.clone().slice([0..b, 0..h, k0..k1, 0..dv]);
        dvs.push(pj.clone().swap_dims(2, 3).matmul(grad.clone())); // [B, H, bk, Dv]
        let dp = grad.clone().matmul(vj.swap_dims(2, 3)); // [B, H, Lq, bk]
        let ds = pj * (dp - d.clone()); // [B, H, Lq, bk]
        dq = dq + ds.clone().matmul(kj).mul_scalar(scale);
        dks.push(ds.swap_dims(2, 3).matmul(q.clone()).mul_scalar(scale)); // [B, H, bk, Dh]
    }
    (dq, Tensor::cat(dks, 2), Tensor::cat(dvs, 2))
}
