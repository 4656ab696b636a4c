//! Dense multi-head attention as one operation, with its own backward pass.
//!
//! Queries, keys and values stay in the layout their projections produce,
//! heads side by side: `q [B, Lq, H·Dh]`, `k`/`v [B, Lk, H·Dh]`, and the
//! context comes back in that layout, ready for the output projection. Per
//! sentence `b` and head `h` (`Q_h` the columns `h·Dh .. (h+1)·Dh`):
//!
//! ```text
//! S = scale · (Q_h K_hᵀ + shift(QV_h Rᵀ)) + bias_h   [Lq, Lk]
//! P = softmax of S over the real keys                0 at padded keys; a row with none is all 0
//! O_h = (P ⊙ keep) V_h                               keep: the dropout mask [B, H, Lq, Lk], or 1
//! ```
//!
//! The two position terms ([`Terms`]) are optional: TENER's relative term
//! (`QV` the queries plus its bias `v`, `R` the sinusoids of the signed
//! distances, `shift` putting distance `i − j` at row `i`, column `j`) and
//! a bias per head and query–key pair (ALiBi's, T5's). The backward pass,
//! with `dP = (dO_h V_hᵀ) ⊙ keep`:
//!
//! ```text
//! dV_h = (P ⊙ keep)ᵀ dO_h     G = P ⊙ (dP − rowsum(dP ⊙ P))     dS = scale · G
//! dQ_h = dS K_h               dK_h = dSᵀ Q_h
//! dQV_h = shiftᵀ(dS) R        dbias_h = Σ over sentences of G
//! ```
//!
//! Composed from tensor operations ([`composed_forward`],
//! [`composed_backward`], any backend), the heads are split by a reshape
//! and a transpose, which the CPU backends copy element by element into
//! contiguous memory (a sixth of the reference attention tagger's
//! inference), the mask is broadcast to `[B, H, Lq, Lk]`, and under
//! autodiff every step is recorded. The host version ([`host`], the CPU
//! backends) addresses each head by stride inside the GEMM calls, fuses
//! scale, position terms, mask and softmax into one pass over each row,
//! keeps only `P` for the backward pass, and runs sentences (and, at
//! inference, blocks of queries) in parallel. The operation itself is
//! [`SeqBackend::dense_attention`].
//!
//! [`SeqBackend::dense_attention`]: super::SeqBackend::dense_attention

use burn::prelude::*;
use burn::tensor::activation::softmax;
use burn::tensor::module::attention as fused_attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{IndexingUpdateOp, TensorData};

/// The score of a padded key before the softmax: far below any real one,
/// and finite, so that no `inf − inf` occurs and a row without a real key
/// is a uniform softmax that the key mask then zeroes, never NaN. Shared by
/// every attention implementation ([`crate::attention`] and the flash
/// attention op).
pub(crate) const MASKED: f32 = -1.0e9;

/// The position terms the operation adds to the scores (none for plain
/// attention, RoPE and the absolute positions).
#[derive(Clone, Debug)]
pub struct Terms<B: Backend> {
    /// `[H, Lq, Lk]`, added to every sentence's scaled scores: ALiBi's
    /// fixed penalty, T5's learned bias.
    pub bias: Option<Tensor<B, 3>>,
    /// TENER's relative term.
    pub relative: Option<RelativeTerm<B>>,
}

/// TENER's relative term of the scores: `scale · qv_i · r_{i−j}`.
#[derive(Clone, Debug)]
pub struct RelativeTerm<B: Backend> {
    /// `[B, Lq, H·Dh]`: the queries plus TENER's position bias `v`.
    pub qv: Tensor<B, 3>,
    /// `[Lq + Lk − 1, Dh]`: the sinusoids of the distances `i − j` from
    /// `−(Lk − 1)` to `Lq − 1`, distance `i − j` in row `i − j + Lk − 1`.
    /// A constant: no gradient flows to it.
    pub r: Tensor<B, 2>,
}

/// The gradients of the operation's inputs.
pub struct Grads<B: Backend> {
    /// `[B, Lq, H·Dh]`.
    pub q: Tensor<B, 3>,
    /// `[B, Lk, H·Dh]`.
    pub k: Tensor<B, 3>,
    /// `[B, Lk, H·Dh]`.
    pub v: Tensor<B, 3>,
    /// `[H, Lq, Lk]`, when asked for.
    pub bias: Option<Tensor<B, 3>>,
    /// `[B, Lq, H·Dh]`, with the relative term.
    pub qv: Option<Tensor<B, 3>>,
}

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

/// Where score `(i, j)` reads the relative term: column `i − j + Lk − 1`
/// of `QV·Rᵀ [B, H, Lq, Lq + Lk − 1]`, as gather indices `[B, H, Lq, Lk]`.
fn shift_index<B: Backend>([b, h, lq, lk]: [usize; 4], device: &B::Device) -> Tensor<B, 4, Int> {
    let idx: Vec<i64> = (0..lq).flat_map(|i| (0..lk).map(move |j| (i + lk - 1 - j) as i64)).collect();
    Tensor::<B, 2, Int>::from_data(TensorData::new(idx, [lq, lk]), device)
        .unsqueeze_dims::<4>(&[0, 1])
        .expand([b, h, lq, lk])
}

/// The position terms of the scaled scores alone, `[B, H, Lq, Lk]` (none
/// without any).
fn position_scores<B: Backend>(
    terms: &Terms<B>,
    [b, h, lq, lk]: [usize; 4],
    scale: f32,
    device: &B::Device,
) -> Option<Tensor<B, 4>> {
    let relative = terms.relative.as_ref().map(|rel| {
        let r = rel.r.clone().transpose().unsqueeze_dims::<4>(&[0, 1]); // [1, 1, Dh, Lq+Lk−1]
        let qr = split(rel.qv.clone(), h).matmul(r); // [B, H, Lq, Lq+Lk−1]
        let at = shift_index::<B>([b, h, lq, lk], device);
        qr.gather(3, at).mul_scalar(scale) // [B, H, Lq, Lk]
    });
    let bias = terms.bias.as_ref().map(|bias| bias.clone().unsqueeze_dim::<4>(0).expand([b, h, lq, lk]));
    match (relative, bias) {
        (Some(relative), Some(bias)) => Some(relative + bias),
        (relative, bias) => relative.or(bias),
    }
}

/// The scaled scores with the position terms, before the mask:
/// `q [B, H, Lq, Dh]`, `k [B, H, Lk, Dh]` → `[B, H, Lq, Lk]`.
fn scores<B: Backend>(q: Tensor<B, 4>, k: Tensor<B, 4>, terms: &Terms<B>, scale: f32) -> Tensor<B, 4> {
    let [b, h, lq, _] = q.dims();
    let lk = k.dims()[2];
    let s = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale); // [B, H, Lq, Lk]
    match position_scores(terms, [b, h, lq, lk], scale, &s.device()) {
        Some(terms) => s + terms,
        None => s,
    }
}

/// The forward pass with tensor operations: the context `[B, Lq, H·Dh]` and
/// the weights `P [B, H, Lq, Lk]` (before dropout), which the backward pass
/// needs. `key_mask [B, Lk]` is 1 at real keys, 0 at padding.
#[allow(clippy::too_many_arguments)]
pub fn composed_forward<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    key_mask: Tensor<B, 2>,
    keep: Option<Tensor<B, 4>>,
    heads: usize,
    scale: f32,
    terms: &Terms<B>,
) -> (Tensor<B, 3>, Tensor<B, 4>) {
    let (q, k, v) = (split(q, heads), split(k, heads), split(v, heads)); // [B, H, L, Dh]
    let keys = key_mask.unsqueeze_dims::<4>(&[1, 2]); // [B, 1, 1, Lk]
    let bias = (keys.clone() - 1.0).mul_scalar(-MASKED); // 0 at real keys, MASKED at padding
    let s = scores(q, k, terms, scale) + bias; // [B, H, Lq, Lk]
    let p = softmax(s, 3) * keys; // [B, H, Lq, Lk]
    let dropped = match keep {
        Some(keep) => p.clone() * keep,
        None => p.clone(),
    };
    (merge(dropped.matmul(v)), p) // [B, Lq, H·Dh]
}

/// The backward pass with tensor operations: the gradients of `q`, `k`,
/// `v` (`[B, L, H·Dh]`) given the context's gradient `grad [B, Lq, H·Dh]`;
/// with `r` (the relative term's sinusoids) that of `qv`, and with
/// `bias_grad` that of the bias `[H, Lq, Lk]`.
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
    r: Option<Tensor<B, 2>>,
    bias_grad: bool,
) -> Grads<B> {
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
    let g = p.clone() * (dp.clone() - (dp * p).sum_dim(3)); // [B, H, Lq, Lk]: the scaled scores' gradient
    let bias = bias_grad.then(|| g.clone().sum_dim(0).squeeze_dim::<3>(0)); // [H, Lq, Lk]
    let ds = g.mul_scalar(scale); // [B, H, Lq, Lk]
    let qv = r.map(|r| {
        let [b, h, lq, lk] = ds.dims();
        let at = shift_index::<B>([b, h, lq, lk], &ds.device());
        let shifted =
            Tensor::zeros([b, h, lq, lq + lk - 1], &ds.device()).scatter(3, at, ds.clone(), IndexingUpdateOp::Add);
        merge(shifted.matmul(r.unsqueeze_dims::<4>(&[0, 1]))) // [B, Lq, H·Dh]
    });
    let dq = ds.clone().matmul(k); // [B, H, Lq, Dh]
    let dk = ds.swap_dims(2, 3).matmul(q); // [B, H, Lk, Dh]
    Grads { q: merge(dq), k: merge(dk), v: merge(dv), bias, qv }
}

/// Inference without dropout on a backend without host loops: Burn's fused
/// attention op (flash attention on CUDA) with the position terms as its
/// additive bias, unless a sentence has no real key (Burn's op would give
/// it NaN; [`composed_forward`] gives 0).
pub fn inference<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    key_mask: Tensor<B, 2>,
    heads: usize,
    scale: f32,
    terms: &Terms<B>,
) -> Tensor<B, 3> {
    let [b, lq, _] = q.dims();
    let lk = k.dims()[1];
    // One small copy to the host ([B, Lk]) answers both questions.
    let m: Vec<f32> = key_mask.clone().into_data().convert::<f32>().to_vec().expect("f32 mask");
    let empty = lk == 0 || m.chunks(lk).any(|row| row.iter().all(|&x| x < 0.5));
    if empty {
        return composed_forward(q, k, v, key_mask, None, heads, scale, terms).0;
    }
    let (q, k, v) = (split(q, heads), split(k, heads), split(v, heads));
    // The position terms go in as Burn's additive bias: [B, H, Lq, Lk].
    let bias = position_scores(terms, [b, heads, lq, lk], scale, &q.device());
    // Burn's mask marks the positions to hide; skip it when nothing is padded.
    let mask = m
        .iter()
        .any(|&x| x < 0.5)
        .then(|| key_mask.lower_elem(0.5).unsqueeze_dims::<4>(&[1, 2]).expand([b, heads, lq, lk]));
    let options = AttentionModuleOptions { scale: Some(scale as f64), softcap: None, is_causal: false };
    merge(fused_attention(q, k, v, mask, bias, options))
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
        /// `[H, Lq, Lk]`.
        bias: Option<Vec<f32>>,
        /// `[B, Lq, H·Dh]`.
        qv: Option<Vec<f32>>,
        /// `[Lq + Lk − 1, Dh]`.
        r: Option<Vec<f32>>,
    }

    impl Inputs {
        #[allow(clippy::too_many_arguments)]
        fn new<B: Backend>(
            q: Tensor<B, 3>,
            k: Tensor<B, 3>,
            v: Tensor<B, 3>,
            keep: Option<Tensor<B, 4>>,
            heads: usize,
            scale: f32,
            bias: Option<Tensor<B, 3>>,
            qv: Option<Tensor<B, 3>>,
            r: Option<Tensor<B, 2>>,
        ) -> Self {
            let [b, lq, d] = q.dims();
            let lk = k.dims()[1];
            assert!(heads > 0 && d % heads == 0, "{d} features do not split into {heads} heads");
            if let Some(bias) = &bias {
                assert_eq!(bias.dims(), [heads, lq, lk], "the score bias is [H, Lq, Lk]");
            }
            if let Some(r) = &r {
                assert_eq!(
                    r.dims(),
                    [(lq + lk).saturating_sub(1), d / heads],
                    "the relative sinusoids are [Lq + Lk − 1, Dh]"
                );
            }
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
                bias: bias.map(to_vec),
                qv: qv.map(to_vec),
                r: r.map(to_vec),
            }
        }

        fn d(&self) -> usize {
            self.heads * self.dh
        }

        /// Whether the scores get a position term.
        fn has_terms(&self) -> bool {
            self.bias.is_some() || self.r.is_some()
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

        /// Scratch for the relative term of `rows` queries: `rows × (rows + Lk − 1)`.
        fn relative_scratch(&self, rows: usize) -> Vec<f32> {
            vec![0.0f32; if self.r.is_some() { rows * (rows + self.lk - 1) } else { 0 }]
        }

        /// Scores `s [rows, Lk]` of head `h` (raw `Q·Kᵀ`) → the softmax's
        /// weights, with the position terms. `qr` is scratch of
        /// [`Self::relative_scratch`].
        fn weights(
            &self,
            mask: &[f32],
            b: usize,
            h: usize,
            rows: std::ops::Range<usize>,
            s: &mut [f32],
            qr: &mut [f32],
        ) {
            let (lk, dh, d, n) = (self.lk, self.dh, self.d(), rows.len());
            if !self.has_terms() {
                for row in s.chunks_exact_mut(lk) {
                    softmax_row(row, mask, self.scale);
                }
                return;
            }
            if let (Some(qv), Some(r)) = (&self.qv, &self.r) {
                // Query i (of these rows) and key j are at distance i − j:
                // R's rows rows.start .. rows.start + n + Lk − 1 cover them.
                let w = n + lk - 1;
                let qr = &mut qr[..n * w];
                let qv = self.head(qv, self.lq, b, h, rows.start);
                matmul(n, w, dh, qr, w, false, qv, d, false, &r[rows.start * dh..], dh, true); // QV·Rᵀ [n, w]
                for (i, row) in s.chunks_exact_mut(lk).enumerate() {
                    // Column j takes distance offset i − j + Lk − 1.
                    row.iter_mut().zip(qr[i * w + i..i * w + i + lk].iter().rev()).for_each(|(x, &t)| *x += t);
                }
            }
            for (i, row) in s.chunks_exact_mut(lk).enumerate() {
                match &self.bias {
                    Some(bias) => {
                        let at = (h * self.lq + rows.start + i) * lk;
                        row.iter_mut().zip(&bias[at..at + lk]).for_each(|(x, &c)| *x = self.scale * *x + c);
                    }
                    None => row.iter_mut().for_each(|x| *x *= self.scale),
                }
                softmax_row(row, mask, 1.0);
            }
        }

        /// Queries `rows` of sentence `b`: the weights of every head into
        /// `p [H, rows, Lk]` and the context into `out [rows, H·Dh]` (the
        /// rows' slice of the output). `dropped` is scratch of `rows × Lk`,
        /// `qr` of [`Self::relative_scratch`].
        #[allow(clippy::too_many_arguments)]
        fn forward_rows(
            &self,
            mask: &[f32],
            b: usize,
            rows: std::ops::Range<usize>,
            p: &mut [f32],
            dropped: &mut [f32],
            qr: &mut [f32],
            out: &mut [f32],
        ) {
            let (lk, dh, d, n) = (self.lk, self.dh, self.d(), rows.len());
            let mask = &mask[b * lk..(b + 1) * lk];
            for h in 0..self.heads {
                let s = &mut p[h * n * lk..(h + 1) * n * lk]; // [rows, Lk]
                let q = self.head(&self.q, self.lq, b, h, rows.start);
                matmul(n, lk, dh, s, lk, false, q, d, false, self.head(&self.k, lk, b, h, 0), d, true); // S = Q·Kᵀ
                self.weights(mask, b, h, rows.clone(), s, qr);
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

    /// A buffer of `per` floats for each of `b` sentences when `wanted`,
    /// else one float each (so that it still zips with the others, one
    /// chunk per sentence), and its chunk size.
    fn per_sentence(b: usize, per: usize, wanted: bool) -> (Vec<f32>, usize) {
        let per = if wanted { per } else { 1 };
        (vec![0.0f32; b * per], per)
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
        terms: Terms<B>,
        save: bool,
    ) -> (Tensor<B, 3>, Option<Tensor<B, 4>>) {
        let device = q.device();
        let (qv, r) = terms.relative.map(|rel| (rel.qv, rel.r)).unzip();
        let x = Inputs::new(q, k, v, keep, heads, scale, terms.bias, qv, r);
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
                || (vec![0.0f32; lq * lk], x.relative_scratch(lq)),
                |(dropped, qr), (s, (out, p))| x.forward_rows(&mask, s, 0..lq, p, dropped, qr, out),
            );
            Some(tensor(p, [b, heads, lq, lk], &device))
        } else {
            // One task per block of ROWS queries of a sentence.
            let rows = ROWS.min(lq);
            out.par_chunks_mut(lq * d).enumerate().for_each(|(s, out)| {
                out.par_chunks_mut(rows * d).enumerate().for_each_init(
                    || (vec![0.0f32; heads * rows * lk], vec![0.0f32; rows * lk], x.relative_scratch(rows)),
                    |(p, dropped, qr), (i, out)| {
                        let r0 = i * rows;
                        x.forward_rows(&mask, s, r0..(r0 + rows).min(lq), p, dropped, qr, out)
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
        r: Option<Tensor<B, 2>>,
        bias_grad: bool,
    ) -> Grads<B> {
        let device = q.device();
        let relative = r.is_some();
        let x = Inputs::new(q, k, v, keep, heads, scale, None, None, r);
        let (p, grad) = (to_vec(p), to_vec(grad));
        let (b, lq, lk, dh, d) = (x.b, x.lq, x.lk, x.dh, x.d());
        let (mut dq, mut dk, mut dv) = (vec![0.0f32; b * lq * d], vec![0.0f32; b * lk * d], vec![0.0f32; b * lk * d]);
        let (mut dbias, bias_chunk) = per_sentence(b, heads * lq * lk, bias_grad);
        let (mut dqv, qv_chunk) = per_sentence(b, lq * d, relative);
        let w = (lq + lk).saturating_sub(1); // columns of the relative term's gradient (with Lq, Lk > 0)
        if lq > 0 && lk > 0 {
            let tasks = dq
                .par_chunks_mut(lq * d)
                .zip(dk.par_chunks_mut(lk * d))
                .zip(dv.par_chunks_mut(lk * d))
                .zip(dbias.par_chunks_mut(bias_chunk))
                .zip(dqv.par_chunks_mut(qv_chunk));
            tasks.enumerate().for_each_init(
                || (vec![0.0f32; lq * lk], vec![0.0f32; lq * lk], vec![0.0f32; if relative { lq * w } else { 0 }]),
                |(dropped, ds, shifted), (s, ((((dq, dk), dv), dbias), dqv))| {
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
                        for (i, (dsr, pr)) in ds.chunks_exact_mut(lk).zip(p.chunks_exact(lk)).enumerate() {
                            let dot: f32 = dsr.iter().zip(pr).map(|(a, b)| a * b).sum();
                            if bias_grad {
                                // G = P ⊙ (dP − dot), summed over sentences for the bias; dS = scale · G.
                                let g = &mut dbias[(h * lq + i) * lk..(h * lq + i + 1) * lk];
                                for ((x, &w), g) in dsr.iter_mut().zip(pr).zip(g) {
                                    *g = w * (*x - dot);
                                    *x = scale * *g;
                                }
                            } else {
                                dsr.iter_mut().zip(pr).for_each(|(x, &w)| *x = scale * w * (*x - dot));
                            }
                        }
                        matmul(lq, dh, lk, &mut dq[h * dh..], d, false, ds, lk, false, kh, d, false); // dQ = dS·K
                        matmul(lk, dh, lq, &mut dk[h * dh..], d, false, ds, lk, true, qh, d, false); // dK = dSᵀ·Q
                        if let Some(r) = &x.r {
                            // dQV = shiftᵀ(dS)·R: row i, column i − j + Lk − 1 takes dS[i, j].
                            shifted.fill(0.0);
                            for (i, dsr) in ds.chunks_exact(lk).enumerate() {
                                let row = &mut shifted[i * w + i..i * w + i + lk];
                                row.iter_mut().rev().zip(dsr).for_each(|(t, &g)| *t = g);
                            }
                            matmul(lq, dh, w, &mut dqv[h * dh..], d, false, shifted, w, false, r, dh, false);
                        }
                    }
                },
            );
        }
        let bias = bias_grad.then(|| {
            // Σ over sentences: [H, Lq, Lk].
            let mut sum = vec![0.0f32; heads * lq * lk];
            for part in dbias.chunks_exact(heads * lq * lk) {
                sum.iter_mut().zip(part).for_each(|(s, &g)| *s += g);
            }
            tensor(sum, [heads, lq, lk], &device)
        });
        Grads {
            q: tensor(dq, [b, lq, d], &device),
            k: tensor(dk, [b, lk, d], &device),
            v: tensor(dv, [b, lk, d], &device),
            bias,
            qv: relative.then(|| tensor(dqv, [b, lq, d], &device)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::host::close;
    use crate::ops::SeqBackend;
    use burn::backend::{Autodiff, Flex, NdArray};
    use burn::tensor::{Distribution, TensorPrimitive};

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

    /// Random position terms for `b` sentences of `lq` queries and `lk`
    /// keys: a bias, a relative term, or both.
    fn terms<B: Backend>(bias: bool, relative: bool, b: usize, lq: usize, lk: usize, device: &B::Device) -> Terms<B> {
        let n = |shape: [usize; 3]| Tensor::<B, 3>::random(shape, Distribution::Normal(0.0, 1.0), device);
        Terms {
            bias: bias.then(|| n([HEADS, lq, lk])),
            relative: relative.then(|| RelativeTerm {
                qv: n([b, lq, HEADS * DH]),
                r: Tensor::random([lq + lk - 1, DH], Distribution::Normal(0.0, 1.0), device),
            }),
        }
    }

    /// The three kinds of terms (and none).
    const KINDS: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

    /// The composed formula, checked against attention written out per
    /// sentence, head and query with plain loops, with each kind of
    /// position term.
    #[test]
    fn composed_forward_is_masked_softmax_attention() {
        let device = Default::default();
        <NdArray as Backend>::seed(&device, 1);
        let (lq, lk, lens) = (3, 4, [4, 2, 0]);
        let (q, k, v, mask) = inputs::<NdArray>(lq, &lens, lk, &device);
        let scale = 0.7;
        for (with_bias, relative) in KINDS {
            let terms = terms::<NdArray>(with_bias, relative, lens.len(), lq, lk, &device);
            let (ctx, p) = composed_forward(q.clone(), k.clone(), v.clone(), mask.clone(), None, HEADS, scale, &terms);
            let [q, k, v, ctx] = [&q, &k, &v, &ctx].map(|x| x.clone().into_data().to_vec::<f32>().unwrap());
            let p = p.into_data().to_vec::<f32>().unwrap();
            let bias = terms.bias.map(|x| x.into_data().to_vec::<f32>().unwrap());
            let rel = terms.relative.map(|t| [t.qv, t.r.reshape([1, lq + lk - 1, DH])]);
            let rel = rel.map(|[qv, r]| [qv, r].map(|x| x.into_data().to_vec::<f32>().unwrap()));
            let d = HEADS * DH;
            for (b, &n) in lens.iter().enumerate() {
                for h in 0..HEADS {
                    for i in 0..lq {
                        let at = |x: &[f32], l: usize, t: usize, c: usize| x[(b * l + t) * d + h * DH + c];
                        let s: Vec<f32> = (0..n)
                            .map(|j| {
                                let mut dot: f32 = (0..DH).map(|c| at(&q, lq, i, c) * at(&k, lk, j, c)).sum();
                                if let Some([qv, r]) = &rel {
                                    let row = i + lk - 1 - j; // distance i − j
                                    dot += (0..DH).map(|c| at(qv, lq, i, c) * r[row * DH + c]).sum::<f32>();
                                }
                                scale * dot + bias.as_ref().map_or(0.0, |x| x[(h * lq + i) * lk + j])
                            })
                            .collect();
                        let top = s.iter().copied().fold(f32::MIN, f32::max);
                        let z: f32 = s.iter().map(|x| (x - top).exp()).sum();
                        let what = format!("bias {with_bias} relative {relative} b{b} h{h} i{i}");
                        for j in 0..lk {
                            let want = if j < n { (s[j] - top).exp() / z } else { 0.0 };
                            let got = p[((b * HEADS + h) * lq + i) * lk + j];
                            assert!((got - want).abs() < 1e-5, "weight {what} j{j}: {got} vs {want}");
                        }
                        for c in 0..DH {
                            let want: f32 = (0..n).map(|j| (s[j] - top).exp() / z * at(&v, lk, j, c)).sum();
                            let got = at(&ctx, lq, i, c);
                            assert!((got - want).abs() < 1e-5, "context {what} c{c}: {got} vs {want}");
                        }
                    }
                }
            }
        }
    }

    /// The host loops compute what the composed operations compute, forward
    /// (with and without the saved weights, more queries than one block)
    /// and backward, with padding, an empty sentence, a dropout mask,
    /// different query and key lengths (cross-attention), and each kind of
    /// position term.
    #[test]
    fn host_passes_equal_the_composed_ones() {
        let device = Default::default();
        <NdArray as Backend>::seed(&device, 2);
        for (lq, lk, lens, dropout) in [
            (5, 5, vec![5, 3, 0], false),
            (4, 6, vec![2, 6], true),
            (70, 3, vec![3, 1], true),
            (67, 67, vec![67, 9], false),
        ] {
            for (with_bias, relative) in KINDS {
                let what = |x: &str| format!("Lq {lq} Lk {lk} bias {with_bias} relative {relative}: {x}");
                let (q, k, v, mask) = inputs::<NdArray>(lq, &lens, lk, &device);
                let keep = dropout.then(|| keep::<NdArray>(lens.len(), lq, lk, &device));
                let terms = terms::<NdArray>(with_bias, relative, lens.len(), lq, lk, &device);
                let (ctx, p) =
                    composed_forward(q.clone(), k.clone(), v.clone(), mask.clone(), keep.clone(), HEADS, 0.5, &terms);
                let forward = |save: bool| {
                    host::forward(
                        q.clone(),
                        k.clone(),
                        v.clone(),
                        mask.clone(),
                        keep.clone(),
                        HEADS,
                        0.5,
                        terms.clone(),
                        save,
                    )
                };
                let (hctx, hp) = forward(true);
                close(ctx.clone(), hctx, &what("context (saving the weights)"));
                close(p.clone(), hp.unwrap(), &what("weights"));
                let (hctx, none) = forward(false);
                assert!(none.is_none());
                close(ctx.clone(), hctx, &what("context (blocks of queries)"));
                let grad = Tensor::random(ctx.dims(), Distribution::Normal(0.0, 1.0), &device);
                let r = terms.relative.map(|t| t.r);
                let backward = |host: bool| {
                    let (q, k, v, keep, p, grad, r) =
                        (q.clone(), k.clone(), v.clone(), keep.clone(), p.clone(), grad.clone(), r.clone());
                    if host {
                        host::backward(q, k, v, keep, p, grad, HEADS, 0.5, r, with_bias)
                    } else {
                        composed_backward(q, k, v, keep, p, grad, HEADS, 0.5, r, with_bias)
                    }
                };
                let (a, b) = (backward(false), backward(true));
                close(a.q, b.q, &what("d q"));
                close(a.k, b.k, &what("d k"));
                close(a.v, b.v, &what("d v"));
                assert_eq!(a.bias.is_some(), with_bias);
                assert_eq!(b.bias.is_some(), with_bias);
                if let (Some(x), Some(y)) = (a.bias, b.bias) {
                    close(x, y, &what("d bias"));
                }
                assert_eq!(a.qv.is_some(), relative);
                assert_eq!(b.qv.is_some(), relative);
                if let (Some(x), Some(y)) = (a.qv, b.qv) {
                    close(x, y, &what("d qv"));
                }
            }
        }
    }

    /// The operation's gradients (hand-written backward, host loops on Flex
    /// and NdArray) equal Burn's autodiff through the composed forward pass,
    /// the position terms' included.
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
            for (with_bias, relative) in KINDS {
                let terms = terms::<A<B>>(with_bias, relative, lens.len(), lq, lk, &device);
                let run = |custom: bool| {
                    let [q, k, v] = [&q, &k, &v].map(|x| x.clone().detach().require_grad());
                    let bias = terms.bias.clone().map(|x| x.detach().require_grad());
                    let relative = terms
                        .relative
                        .clone()
                        .map(|t| RelativeTerm { qv: t.qv.detach().require_grad(), r: t.r.detach() });
                    let tracked = Terms { bias: bias.clone(), relative: relative.clone() };
                    let ctx = if custom {
                        Tensor::<A<B>, 3>::from_primitive(TensorPrimitive::Float(A::<B>::dense_attention(
                            prim(q.clone()),
                            prim(k.clone()),
                            prim(v.clone()),
                            mask.clone().into_primitive().tensor(),
                            keep.clone().map(|m| m.into_primitive().tensor()),
                            HEADS,
                            0.5,
                            tracked,
                        )))
                    } else {
                        composed_forward(
                            q.clone(),
                            k.clone(),
                            v.clone(),
                            mask.clone(),
                            keep.clone(),
                            HEADS,
                            0.5,
                            &tracked,
                        )
                        .0
                    };
                    let grads = (ctx.clone() * weights.clone()).sum().backward();
                    let mut out: Vec<Tensor<B, 3>> = [&q, &k, &v].map(|x| x.grad(&grads).unwrap()).into();
                    out.extend(bias.map(|x| x.grad(&grads).unwrap()));
                    out.extend(relative.map(|t| t.qv.grad(&grads).unwrap()));
                    (ctx.inner(), out)
                };
                let (c1, g1) = run(true);
                let (c2, g2) = run(false);
                let what = |x: &str| format!("bias {with_bias} relative {relative}: {x}");
                close(c1, c2, &what("context"));
                assert_eq!(g1.len(), 3 + usize::from(with_bias) + usize::from(relative));
                for (i, (a, b)) in g1.into_iter().zip(g2).enumerate() {
                    close(a, b, &what(&format!("gradient of input {i}")));
                }
            }
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

    /// Inference on a backend without host loops (Burn's fused op, the
    /// position terms as its additive bias) gives the composed result, also
    /// when a sentence has no real key.
    #[test]
    fn fused_inference_equals_the_composed_formula() {
        let device = Default::default();
        <NdArray as Backend>::seed(&device, 4);
        for lens in [vec![4, 4], vec![4, 2], vec![4, 0]] {
            for (with_bias, relative) in KINDS {
                let (q, k, v, mask) = inputs::<NdArray>(3, &lens, 4, &device);
                let terms = terms::<NdArray>(with_bias, relative, lens.len(), 3, 4, &device);
                let want = composed_forward(q.clone(), k.clone(), v.clone(), mask.clone(), None, HEADS, 0.5, &terms).0;
                let what = format!("fused inference, lengths {lens:?}, bias {with_bias} relative {relative}");
                close(inference(q, k, v, mask, HEADS, 0.5, &terms), want, &what);
            }
        }
    }
}
