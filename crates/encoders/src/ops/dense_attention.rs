//! Dense multi-head attention as one operation, with its own backward pass.
//!
//! Queries, keys and values stay in the layout their projections produce,
//! heads side by side: `q [B, Lq, H·Dh]`, `k`/`v [B, Lk, H·Dh]`, and the
//! context comes back in that layout, ready for the output projection. Per
//! sentence `b` and head `h` (`Q_h` the columns `h·Dh .. (h+1)·Dh`):
//!
//! ```text
//! S = scale · Q_h K_hᵀ                       [Lq, Lk]
//! P = softmax of S over the real keys        0 at padded keys; a row with none is all 0
//! O_h = (P ⊙ keep) V_h                       keep: the dropout mask [B, H, Lq, Lk], or 1
//! ```
//!
//! and the backward pass, with `dP = (dO_h V_hᵀ) ⊙ keep`:
//!
//! ```text
//! dV_h = (P ⊙ keep)ᵀ dO_h     dS = scale · P ⊙ (dP − rowsum(dP ⊙ P))
//! dQ_h = dS K_h               dK_h = dSᵀ Q_h
//! ```
//!
//! Composed from tensor operations ([`composed_forward`],
//! [`composed_backward`], any backend), the heads are split by a reshape
//! and a transpose, which the CPU backends copy element by element into
//! contiguous memory (a sixth of the reference attention tagger's
//! inference), the mask is broadcast to `[B, H, Lq, Lk]`, and under
//! autodiff every step is recorded. The host version ([`host`], the CPU
//! backends) addresses each head by stride inside the GEMM calls, fuses
//! scale, mask and softmax into one pass over each row, keeps only `P` for
//! the backward pass, and runs sentences (and, at inference, blocks of
//! queries) in parallel. The operation itself is
//! [`SeqBackend::dense_attention`].
//!
//! [`SeqBackend::dense_attention`]: super::SeqBackend::dense_attention

use burn::prelude::*;
use burn::tensor::activation::softmax;
use burn::tensor::module::attention as fused_attention;
use burn::tensor::ops::AttentionModuleOptions;

/// The score of a padded key before the softmax: far below any real one,
/// and finite, so that no `inf − inf` occurs and a row without a real key
/// is a uniform softmax that the key mask then zeroes, never NaN. Shared by
/// every attention implementation ([`crate::attention`] and the flash
/// attention op).
pub(crate) const MASKED: f32 = -1.0e9;

/// `[B, L, H·Dh]` → `[B, H, L, Dh]`.
fn split<B: Backend>(x: Tensor<B, 3>, heads: usize) -> Tensor<B, 4> {
    let [b, l, d] = x.dims();
    x.reshape([b, l, heads, d / heads]).swap_dims(1, 2)
}

/// `[B, H, L, Dh]` → `[B, L, H·Dh]`.
fn merge<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 3> {
    let [b, h, l, dh] = x.dims();
    x.swap_dims(1, 2).reshape([b, l, h * dh])
}

/// The forward pass with tensor operations: the context `[B, Lq, H·Dh]` and
/// the weights `P [B, H, Lq, Lk]` (before dropout), which the backward pass
/// needs. `key_mask [B, Lk]` is 1 at real keys, 0 at padding.
pub fn composed_forward<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    key_mask: Tensor<B, 2>,
    keep: Option<Tensor<B, 4>>,
    heads: usize,
    scale: f32,
) -> (Tensor<B, 3>, Tensor<B, 4>) {
    let (q, k, v) = (split(q, heads), split(k, heads), split(v, heads)); // [B, H, L, Dh]
    let keys = key_mask.unsqueeze_dims::<4>(&[1, 2]); // [B, 1, 1, Lk]
    let bias = (keys.clone() - 1.0).mul_scalar(-MASKED); // 0 at real keys, MASKED at padding
    let s = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale) + bias; // [B, H, Lq, Lk]
    let p = softmax(s, 3) * keys; // [B, H, Lq, Lk]
    let dropped = match keep {
        Some(keep) => p.clone() * keep,
        None => p.clone(),
    };
    (merge(dropped.matmul(v)), p) // [B, Lq, H·Dh]
}

/// The backward pass with tensor operations: gradients of `q`, `k`, `v`
/// (`[B, L, H·Dh]`) given the context's gradient `grad [B, Lq, H·Dh]`.
#[allow(clippy::too_many_arguments)]
pub fn composed_backward<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    keep: Option<Tensor<B, 4>>,
    p: Tensor<B, 4>,
    grad: Tensor<B, 3>,
    heads: usize,
    scale: f32,
) -> (Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 3>) {
    let (q, k, v, grad) = (split(q, heads), split(k, heads), split(v, heads), split(grad, heads));
    let dropped = match &keep {
        Some(keep) => p.clone() * keep.clone(),
        None => p.clone(),
    };
    let dv = dropped.swap_dims(2, 3).matmul(grad.clone()); // [B, H, Lk, Dh]
    let mut dp = grad.matmul(v.swap_dims(2, 3)); // [B, H, Lq, Lk]
    if let Some(keep) = keep {
        dp = dp * keep;
    }
    let ds = (p.clone() * (dp.clone() - (dp * p).sum_dim(3))).mul_scalar(scale); // [B, H, Lq, Lk]
    let dq = ds.clone().matmul(k); // [B, H, Lq, Dh]
    let dk = ds.swap_dims(2, 3).matmul(q); // [B, H, Lk, Dh]
    (merge(dq), merge(dk), merge(dv))
}

/// Inference without dropout on a backend without host loops: Burn's fused
/// attention op (flash attention on CUDA), unless a sentence has no real
/// key (Burn's op would give it NaN; [`composed_forward`] gives 0).
pub fn inference<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    key_mask: Tensor<B, 2>,
    heads: usize,
    scale: f32,
) -> Tensor<B, 3> {
    let [b, lq, _] = q.dims();
    let lk = k.dims()[1];
    // One small copy to the host ([B, Lk]) answers both questions.
    let m: Vec<f32> = key_mask.clone().into_data().convert::<f32>().to_vec().expect("f32 mask");
    let empty = lk == 0 || m.chunks(lk).any(|row| row.iter().all(|&x| x < 0.5));
    if empty {
        return composed_forward(q, k, v, key_mask, None, heads, scale).0;
    }
    let (q, k, v) = (split(q, heads), split(k, heads), split(v, heads));
    // Burn's mask marks the positions to hide; skip it when nothing is padded.
    let mask = m
        .iter()
        .any(|&x| x < 0.5)
        .then(|| key_mask.lower_elem(0.5).unsqueeze_dims::<4>(&[1, 2]).expand([b, heads, lq, lk]));
    let options = AttentionModuleOptions { scale: Some(scale as f64), softcap: None, is_causal: false };
    merge(fused_attention(q, k, v, mask, None, options))
}

/// The same passes as host loops over `f32` buffers, for the CPU backends.
pub mod host {
    use super::*;
    use crate::ops::host::{exp, matmul, tensor, to_vec};
    use rayon::prelude::*;

    /// Queries per parallel task at inference (bounds the score buffer to
    /// `ROWS × Lk` per task for long sequences).
    const ROWS: usize = 64;

    /// Sizes, and the inputs as host buffers.
    struct Inputs {
        b: usize,
        lq: usize,
        lk: usize,
        heads: usize,
        dh: usize,
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        /// `[B, H, Lq, Lk]`.
        keep: Option<Vec<f32>>,
        scale: f32,
    }

    impl Inputs {
        fn new<B: Backend>(
            q: Tensor<B, 3>,
            k: Tensor<B, 3>,
            v: Tensor<B, 3>,
            keep: Option<Tensor<B, 4>>,
            heads: usize,
            scale: f32,
        ) -> Self {
            let [b, lq, d] = q.dims();
            let lk = k.dims()[1];
            assert!(heads > 0 && d % heads == 0, "{d} features do not split into {heads} heads");
            Inputs {
                b,
                lq,
                lk,
                heads,
                dh: d / heads,
                q: to_vec(q),
                k: to_vec(k),
                v: to_vec(v),
                keep: keep.map(to_vec),
                scale,
            }
        }

        fn d(&self) -> usize {
            self.heads * self.dh
        }

        /// Head `h` of sentence `b` of `x [B, L, H·Dh]`, from row `row` on:
        /// a slice whose rows are `d()` apart.
        fn head<'a>(&self, x: &'a [f32], l: usize, b: usize, h: usize, row: usize) -> &'a [f32] {
            &x[(b * l + row) * self.d() + h * self.dh..]
        }

        /// `keep` rows `rows` of sentence `b`, head `h`: `[rows, Lk]`.
        fn keep_rows(&self, b: usize, h: usize, rows: std::ops::Range<usize>) -> Option<&[f32]> {
            let at = |i: usize| ((b * self.heads + h) * self.lq + i) * self.lk;
            self.keep.as_deref().map(|keep| &keep[at(rows.start)..at(rows.end)])
        }

        /// Queries `rows` of sentence `b`: the weights of every head into
        /// `p [H, rows, Lk]` and the context into `out [rows, H·Dh]` (the
        /// rows' slice of the output). `dropped` is scratch of `rows × Lk`.
        fn forward_rows(
            &self,
            mask: &[f32],
            b: usize,
            rows: std::ops::Range<usize>,
            p: &mut [f32],
            dropped: &mut [f32],
            out: &mut [f32],
        ) {
            let (lk, dh, d, n) = (self.lk, self.dh, self.d(), rows.len());
            let mask = &mask[b * lk..(b + 1) * lk];
            for h in 0..self.heads {
                let s = &mut p[h * n * lk..(h + 1) * n * lk]; // [rows, Lk]
                let q = self.head(&self.q, self.lq, b, h, rows.start);
                matmul(n, lk, dh, s, lk, false, q, d, false, self.head(&self.k, lk, b, h, 0), d, true); // S = Q·Kᵀ
                for row in s.chunks_exact_mut(lk) {
                    softmax_row(row, mask, self.scale);
                }
                let weights: &[f32] = match self.keep_rows(b, h, rows.clone()) {
                    Some(keep) => {
                        for ((x, &w), &k) in dropped.iter_mut().zip(&*s).zip(keep) {
                            *x = w * k;
                        }
                        &dropped[..n * lk]
                    }
                    None => s,
                };
                let v = self.head(&self.v, lk, b, h, 0);
                matmul(n, dh, lk, &mut out[h * dh..], d, false, weights, lk, false, v, d, false);
                // O_h = P·V
            }
        }
    }

    /// `row ← softmax(scale · row)` over the keys with `mask = 1`; 0 at the
    /// others, and 0 everywhere when there is none.
    fn softmax_row(row: &mut [f32], mask: &[f32], scale: f32) {
        let max = row.iter().zip(mask).filter(|(_, &m)| m > 0.0).map(|(&x, _)| x).fold(f32::NEG_INFINITY, f32::max);
        if max == f32::NEG_INFINITY {
            row.fill(0.0);
            return;
        }
        let mut sum = 0.0;
        for (x, &m) in row.iter_mut().zip(mask) {
            *x = exp(scale * (*x - max)) * m;
            sum += *x;
        }
        let inv = 1.0 / sum;
        row.iter_mut().for_each(|x| *x *= inv);
    }

    /// [`composed_forward`] on the host; the weights only when `save` (the
    /// backward pass needs them), else computed `ROWS` queries at a time.
    #[allow(clippy::too_many_arguments)]
    pub fn forward<B: Backend>(
        q: Tensor<B, 3>,
        k: Tensor<B, 3>,
        v: Tensor<B, 3>,
        key_mask: Tensor<B, 2>,
        keep: Option<Tensor<B, 4>>,
        heads: usize,
        scale: f32,
        save: bool,
    ) -> (Tensor<B, 3>, Option<Tensor<B, 4>>) {
        let device = q.device();
        let x = Inputs::new(q, k, v, keep, heads, scale);
        let mask = to_vec(key_mask);
        let (b, lq, lk, d) = (x.b, x.lq, x.lk, x.d());
        let mut out = vec![0.0f32; b * lq * d];
        if lq == 0 || lk == 0 {
            let p = save.then(|| tensor(vec![], [b, heads, lq, lk], &device));
            return (tensor(out, [b, lq, d], &device), p);
        }
        let p = if save {
            // One task per sentence: its weights [H, Lq, Lk] are one contiguous slice.
            let mut p = vec![0.0f32; b * heads * lq * lk];
            out.par_chunks_mut(lq * d).zip(p.par_chunks_mut(heads * lq * lk)).enumerate().for_each_init(
                || vec![0.0f32; lq * lk],
                |dropped, (s, (out, p))| x.forward_rows(&mask, s, 0..lq, p, dropped, out),
            );
            Some(tensor(p, [b, heads, lq, lk], &device))
        } else {
            // One task per block of ROWS queries of a sentence.
            let rows = ROWS.min(lq);
            out.par_chunks_mut(lq * d).enumerate().for_each(|(s, out)| {
                out.par_chunks_mut(rows * d).enumerate().for_each_init(
                    || (vec![0.0f32; heads * rows * lk], vec![0.0f32; rows * lk]),
                    |(p, dropped), (i, out)| {
                        let r0 = i * rows;
                        x.forward_rows(&mask, s, r0..(r0 + rows).min(lq), p, dropped, out)
                    },
                )
            });
            None
        };
        (tensor(out, [b, lq, d], &device), p)
    }

    /// [`composed_backward`] on the host, one task per sentence.
    #[allow(clippy::too_many_arguments)]
    pub fn backward<B: Backend>(
        q: Tensor<B, 3>,
        k: Tensor<B, 3>,
        v: Tensor<B, 3>,
        keep: Option<Tensor<B, 4>>,
        p: Tensor<B, 4>,
        grad: Tensor<B, 3>,
        heads: usize,
        scale: f32,
    ) -> (Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 3>) {
        let device = q.device();
        let x = Inputs::new(q, k, v, keep, heads, scale);
        let (p, grad) = (to_vec(p), to_vec(grad));
        let (b, lq, lk, dh, d) = (x.b, x.lq, x.lk, x.dh, x.d());
        let (mut dq, mut dk, mut dv) = (vec![0.0f32; b * lq * d], vec![0.0f32; b * lk * d], vec![0.0f32; b * lk * d]);
        if lq > 0 && lk > 0 {
            let tasks = dq.par_chunks_mut(lq * d).zip(dk.par_chunks_mut(lk * d)).zip(dv.par_chunks_mut(lk * d));
            tasks.enumerate().for_each_init(
                || (vec![0.0f32; lq * lk], vec![0.0f32; lq * lk]),
                |(dropped, ds), (s, ((dq, dk), dv))| {
                    for h in 0..heads {
                        let at = (s * heads + h) * lq * lk;
                        let p = &p[at..at + lq * lk]; // [Lq, Lk]
                        let keep = x.keep_rows(s, h, 0..lq);
                        let weights: &[f32] = match keep {
                            Some(keep) => {
                                dropped.iter_mut().zip(p).zip(keep).for_each(|((x, &w), &k)| *x = w * k);
                                dropped
                            }
                            None => p,
                        };
                        let go = x.head(&grad, lq, s, h, 0);
                        let (qh, kh, vh) =
                            (x.head(&x.q, lq, s, h, 0), x.head(&x.k, lk, s, h, 0), x.head(&x.v, lk, s, h, 0));
                        matmul(lk, dh, lq, &mut dv[h * dh..], d, false, weights, lk, true, go, d, false); // dV = Pᵀ·dO
                        matmul(lq, lk, dh, ds, lk, false, go, d, false, vh, d, true); // dP = dO·Vᵀ
                        if let Some(keep) = keep {
                            ds.iter_mut().zip(keep).for_each(|(x, &k)| *x *= k);
                        }
                        for (dsr, pr) in ds.chunks_exact_mut(lk).zip(p.chunks_exact(lk)) {
                            let dot: f32 = dsr.iter().zip(pr).map(|(a, b)| a * b).sum();
                            dsr.iter_mut().zip(pr).for_each(|(x, &w)| *x = scale * w * (*x - dot));
                        }
                        matmul(lq, dh, lk, &mut dq[h * dh..], d, false, ds, lk, false, kh, d, false); // dQ = dS·K
                        matmul(lk, dh, lq, &mut dk[h * dh..], d, false, ds, lk, true, qh, d, false);
                        // dK = dSᵀ·Q
                    }
                },
            );
        }
        (tensor(dq, [b, lq, d], &device), tensor(dk, [b, lk, d], &device), tensor(dv, [b, lk, d], &device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::host::close;
    use crate::ops::SeqBackend;
    use burn::backend::{Autodiff, Flex, NdArray};
    use burn::tensor::{Distribution, TensorData, TensorPrimitive};

    const HEADS: usize = 3;
    const DH: usize = 4;

    /// `q [B, Lq, H·Dh]`, `k`, `v [B, Lk, H·Dh]` and the key mask of these
    /// key lengths (0: a sentence without a real key).
    fn inputs<B: Backend>(
        lq: usize,
        key_lengths: &[usize],
        lk: usize,
        device: &B::Device,
    ) -> (Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 2>) {
        let b = key_lengths.len();
        let r = |l: usize| Tensor::random([b, l, HEADS * DH], Distribution::Normal(0.0, 1.0), device);
        let m: Vec<f32> = key_lengths.iter().flat_map(|&n| (0..lk).map(move |j| f32::from(j < n))).collect();
        (r(lq), r(lk), r(lk), Tensor::from_data(TensorData::new(m, [b, lk]), device))
    }

    /// A dropout mask: 0 or 2, as `Dropout` draws them at p = 0.5.
    fn keep<B: Backend>(b: usize, lq: usize, lk: usize, device: &B::Device) -> Tensor<B, 4> {
        Tensor::<B, 4>::random([b, HEADS, lq, lk], Distribution::Bernoulli(0.5), device).mul_scalar(2.0)
    }

    /// The composed formula, checked once against attention written out
    /// per sentence, head and query with plain loops.
    #[test]
    fn composed_forward_is_masked_softmax_attention() {
        let device = Default::default();
        <NdArray as Backend>::seed(&device, 1);
        let (lq, lk, lens) = (3, 4, [4, 2, 0]);
        let (q, k, v, mask) = inputs::<NdArray>(lq, &lens, lk, &device);
        let scale = 0.7;
        let (ctx, p) = composed_forward(q.clone(), k.clone(), v.clone(), mask, None, HEADS, scale);
        let [q, k, v, ctx] = [q, k, v, ctx].map(|x| x.into_data().to_vec::<f32>().unwrap());
        let p = p.into_data().to_vec::<f32>().unwrap();
        let d = HEADS * DH;
        for (b, &n) in lens.iter().enumerate() {
            for h in 0..HEADS {
                for i in 0..lq {
                    let at = |x: &[f32], l: usize, t: usize, c: usize| x[(b * l + t) * d + h * DH + c];
                    let s: Vec<f32> = (0..n)
                        .map(|j| scale * (0..DH).map(|c| at(&q, lq, i, c) * at(&k, lk, j, c)).sum::<f32>())
                        .collect();
                    let z: f32 = s.iter().map(|x| x.exp()).sum();
                    for j in 0..lk {
                        let want = if j < n { s[j].exp() / z } else { 0.0 };
                        let got = p[((b * HEADS + h) * lq + i) * lk + j];
                        assert!((got - want).abs() < 1e-5, "weight b{b} h{h} i{i} j{j}: {got} vs {want}");
                    }
                    for c in 0..DH {
                        let want: f32 = (0..n).map(|j| s[j].exp() / z * at(&v, lk, j, c)).sum();
                        let got = at(&ctx, lq, i, c);
                        assert!((got - want).abs() < 1e-5, "context b{b} h{h} i{i} c{c}: {got} vs {want}");
                    }
                }
            }
        }
    }

    /// The host loops compute what the composed operations compute, forward
    /// (with and without the saved weights, more queries than one block)
    /// and backward, with padding, an empty sentence, a dropout mask, and
    /// different query and key lengths (cross-attention).
    #[test]
    fn host_passes_equal_the_composed_ones() {
        let device = Default::default();
        <NdArray as Backend>::seed(&device, 2);
        for (lq, lk, lens, dropout) in
            [(5, 5, vec![5, 3, 0], false), (4, 6, vec![2, 6], true), (70, 3, vec![3, 1], true)]
        {
            let (q, k, v, mask) = inputs::<NdArray>(lq, &lens, lk, &device);
            let keep = dropout.then(|| keep::<NdArray>(lens.len(), lq, lk, &device));
            let (ctx, p) = composed_forward(q.clone(), k.clone(), v.clone(), mask.clone(), keep.clone(), HEADS, 0.5);
            let (hctx, hp) =
                host::forward(q.clone(), k.clone(), v.clone(), mask.clone(), keep.clone(), HEADS, 0.5, true);
            close(ctx.clone(), hctx, "context (saving the weights)");
            close(p.clone(), hp.unwrap(), "weights");
            let (hctx, none) = host::forward(q.clone(), k.clone(), v.clone(), mask, keep.clone(), HEADS, 0.5, false);
            assert!(none.is_none());
            close(ctx.clone(), hctx, "context (blocks of queries)");
            let grad = Tensor::random(ctx.dims(), Distribution::Normal(0.0, 1.0), &device);
            let a =
                composed_backward(q.clone(), k.clone(), v.clone(), keep.clone(), p.clone(), grad.clone(), HEADS, 0.5);
            let b = host::backward(q, k, v, keep, p, grad, HEADS, 0.5);
            close(a.0, b.0, "d q");
            close(a.1, b.1, "d k");
            close(a.2, b.2, "d v");
        }
    }

    /// The operation's gradients (hand-written backward, host loops on Flex
    /// and NdArray) equal Burn's autodiff through the composed forward pass.
    fn gradients_match_autodiff<B: SeqBackend>() {
        type A<B> = Autodiff<B>;
        let device = Default::default();
        B::seed(&device, 9);
        let (lq, lk, lens) = (4, 5, [5, 2, 0]);
        let (q, k, v, mask) = inputs::<A<B>>(lq, &lens, lk, &device);
        let keep = keep::<A<B>>(lens.len(), lq, lk, &device);
        let weights = Tensor::<A<B>, 3>::random([lens.len(), lq, HEADS * DH], Distribution::Normal(0.0, 1.0), &device);
        let prim = |x: Tensor<A<B>, 3>| x.into_primitive().tensor();
        for keep in [None, Some(keep)] {
            let run = |custom: bool| {
                let [q, k, v] = [&q, &k, &v].map(|x| x.clone().detach().require_grad());
                let ctx = if custom {
                    Tensor::<A<B>, 3>::from_primitive(TensorPrimitive::Float(A::<B>::dense_attention(
                        prim(q.clone()),
                        prim(k.clone()),
                        prim(v.clone()),
                        mask.clone().into_primitive().tensor(),
                        keep.clone().map(|m| m.into_primitive().tensor()),
                        HEADS,
                        0.5,
                    )))
                } else {
                    composed_forward(q.clone(), k.clone(), v.clone(), mask.clone(), keep.clone(), HEADS, 0.5).0
                };
                let grads = (ctx.clone() * weights.clone()).sum().backward();
                (ctx.inner(), [&q, &k, &v].map(|x| x.grad(&grads).unwrap()))
            };
            let (c1, [dq1, dk1, dv1]) = run(true);
            let (c2, [dq2, dk2, dv2]) = run(false);
            close(c1, c2, "context");
            close(dq1, dq2, "d q");
            close(dk1, dk2, "d k");
            close(dv1, dv2, "d v");
        }
    }

    #[test]
    fn gradients_match_autodiff_on_ndarray() {
        gradients_match_autodiff::<NdArray>();
    }

    #[test]
    fn gradients_match_autodiff_on_flex() {
        gradients_match_autodiff::<Flex>();
    }

    /// Inference on a backend without host loops (Burn's fused op) gives
    /// the composed result, also when a sentence has no real key.
    #[test]
    fn fused_inference_equals_the_composed_formula() {
        let device = Default::default();
        <NdArray as Backend>::seed(&device, 4);
        for lens in [vec![4, 4], vec![4, 2], vec![4, 0]] {
            let (q, k, v, mask) = inputs::<NdArray>(3, &lens, 4, &device);
            let want = composed_forward(q.clone(), k.clone(), v.clone(), mask.clone(), None, HEADS, 0.5).0;
            close(inference(q, k, v, mask, HEADS, 0.5), want, "fused inference");
        }
    }
}
