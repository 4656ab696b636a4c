//! The recurrence of a bidirectional LSTM layer as one operation, with its
//! own backward pass (backpropagation through time).
//!
//! Both directions of a layer run in one call: `xw [2, B, L, 4H]` holds the
//! input projections `x·W_ih + b` of every position (computed beforehand in
//! one matrix product per direction), `w [2, H, 4H]` the recurrent weights;
//! direction 0 reads positions 0 → L−1, direction 1 reads L−1 → 0. Gates
//! are in PyTorch's order (input, forget, cell, output):
//!
//! ```text
//! z = xw_t + h_{t∓1}·W        i, f, o = σ(z_i, z_f, z_o), g = tanh(z_g)
//! c_t = f·c_{t∓1} + i·g       h_t = o·tanh(c_t)
//! ```
//!
//! At padded positions (`mask = 0`) both state vectors are reset to zero, so
//! the reverse direction of each sentence starts at its own last real token
//! and padded outputs are zero.
//!
//! Composed from Burn tensor operations, one step is about ten small
//! operations per direction, each allocating; under autodiff every one is
//! also recorded. Here the forward pass saves only the gate activations and
//! cell states, and the backward pass is written by hand. The generic
//! versions ([`composed_forward`], [`composed_backward`]) use the tensor API
//! of any backend (CUDA included); the CPU backends override them with the
//! host loops of [`host`], which run each step as one GEMM and one fused
//! pass over the gates, the two directions on two threads. The operation
//! itself is [`SeqBackend::lstm_scan`].
//!
//! [`SeqBackend::lstm_scan`]: super::SeqBackend::lstm_scan

use burn::prelude::*;
use burn::tensor::activation::{sigmoid, tanh};

/// What the forward pass keeps for the backward pass.
pub struct Saved<B: Backend> {
    /// `[2, B, L, H]` outputs (zero at padding).
    pub h: Tensor<B, 4>,
    /// `[2, B, L, 4H]` gate activations i, f, g, o.
    pub act: Tensor<B, 4>,
    /// `[2, B, L, H]` cell states before the padding reset.
    pub c: Tensor<B, 4>,
}

/// The position direction `dir` reads at step `s` of `l`.
fn position(dir: usize, s: usize, l: usize) -> usize {
    if dir == 0 {
        s
    } else {
        l - 1 - s
    }
}

/// Direction `dir`'s row of position `t` of a `[2, B, L, N]` tensor: `[B, N]`.
fn at<B: Backend>(x: &Tensor<B, 4>, dir: usize, t: usize) -> Tensor<B, 2> {
    let [_, b, _, n] = x.dims();
    x.clone().slice([dir..dir + 1, 0..b, t..t + 1, 0..n]).reshape([b, n])
}

/// Direction `dir`'s recurrent weights `[H, 4H]` of `w [2, H, 4H]`.
fn weights<B: Backend>(w: &Tensor<B, 3>, dir: usize) -> Tensor<B, 2> {
    let [_, hd, g4] = w.dims();
    w.clone().slice([dir..dir + 1, 0..hd, 0..g4]).reshape([hd, g4])
}

/// Forward pass with Burn tensor operations, step by step.
/// `xw [2, B, L, 4H]`, `w [2, H, 4H]`, `mask [B, L]` (1 real, 0 padding).
pub fn composed_forward<B: Backend>(xw: Tensor<B, 4>, w: Tensor<B, 3>, mask: Tensor<B, 2>) -> Saved<B> {
    let [_, b, l, g4] = xw.dims();
    let hd = g4 / 4;
    let device = xw.device();
    let (mut hs, mut acts, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for dir in 0..2 {
        let wd = weights(&w, dir); // [H, 4H]
        let mut h = Tensor::<B, 2>::zeros([b, hd], &device);
        let mut c = Tensor::<B, 2>::zeros([b, hd], &device);
        let mut out = vec![None; l];
        for s in 0..l {
            let t = position(dir, s, l);
            let x = at(&xw, dir, t); // [B, 4H]
            let m = mask.clone().slice([0..b, t..t + 1]); // [B, 1]
            let z = x + h.matmul(wd.clone()); // [B, 4H]
            let i = sigmoid(z.clone().slice([0..b, 0..hd]));
            let f = sigmoid(z.clone().slice([0..b, hd..2 * hd]));
            let g = tanh(z.clone().slice([0..b, 2 * hd..3 * hd]));
            let o = sigmoid(z.slice([0..b, 3 * hd..4 * hd]));
            let c_raw = f.clone() * c + i.clone() * g.clone(); // [B, H]
            let h_raw = o.clone() * tanh(c_raw.clone());
            h = h_raw * m.clone();
            c = c_raw.clone() * m;
            out[t] = Some((h.clone(), Tensor::cat(vec![i, f, g, o], 1), c_raw));
        }
        let (h, (a, c)): (Vec<_>, (Vec<_>, Vec<_>)) =
            out.into_iter().map(|o| o.expect("every step ran")).map(|(h, a, c)| (h, (a, c))).unzip();
        hs.push(Tensor::stack::<3>(h, 1)); // [B, L, H]
        acts.push(Tensor::stack::<3>(a, 1)); // [B, L, 4H]
        cs.push(Tensor::stack::<3>(c, 1)); // [B, L, H]
    }
    Saved { h: Tensor::stack(hs, 0), act: Tensor::stack(acts, 0), c: Tensor::stack(cs, 0) }
}

/// Backward pass with Burn tensor operations: `grad [2, B, L, H]` of the
/// outputs → gradients of `xw [2, B, L, 4H]` and `w [2, H, 4H]`.
pub fn composed_backward<B: Backend>(
    w: Tensor<B, 3>,
    mask: Tensor<B, 2>,
    saved: Saved<B>,
    grad: Tensor<B, 4>,
) -> (Tensor<B, 4>, Tensor<B, 3>) {
    let [_, b, l, hd] = saved.h.dims();
    let g4 = 4 * hd;
    let device = grad.device();
    let (mut dxws, mut dws) = (Vec::new(), Vec::new());
    for dir in 0..2 {
        let wd = weights(&w, dir);
        let mut dh_next = Tensor::<B, 2>::zeros([b, hd], &device);
        let mut dc_next = Tensor::<B, 2>::zeros([b, hd], &device);
        let mut dz_at = vec![None; l];
        let mut dw = Tensor::<B, 2>::zeros([hd, g4], &device);
        for s in (0..l).rev() {
            let t = position(dir, s, l);
            let m = mask.clone().slice([0..b, t..t + 1]); // [B, 1]
            let act = at(&saved.act, dir, t);
            let part = |k: usize| act.clone().slice([0..b, k * hd..(k + 1) * hd]);
            let (i, f, g, o) = (part(0), part(1), part(2), part(3));
            let c_raw = at(&saved.c, dir, t);
            // The state the step started from (zero before the first step).
            let (h_prev, c_prev) = if s == 0 {
                (Tensor::zeros([b, hd], &device), Tensor::zeros([b, hd], &device))
            } else {
                let p = position(dir, s - 1, l);
                let pm = mask.clone().slice([0..b, p..p + 1]);
                (at(&saved.h, dir, p), at(&saved.c, dir, p) * pm)
            };
            let dh = (at(&grad, dir, t) + dh_next) * m.clone(); // into h_raw
            let tc = tanh(c_raw);
            let dc = dc_next * m + dh.clone() * o.clone() * (tc.clone().powi_scalar(2).neg() + 1.0);
            let dzi = dc.clone() * g.clone() * i.clone() * (i.clone().neg() + 1.0);
            let dzf = dc.clone() * c_prev * f.clone() * (f.clone().neg() + 1.0);
            let dzg = dc.clone() * i * (g.powi_scalar(2).neg() + 1.0);
            let dzo = dh * tc * o.clone() * (o.neg() + 1.0);
            let dz = Tensor::cat(vec![dzi, dzf, dzg, dzo], 1); // [B, 4H]
            dw = dw + h_prev.transpose().matmul(dz.clone());
            dh_next = dz.clone().matmul(wd.clone().transpose());
            dc_next = dc * f;
            dz_at[t] = Some(dz);
        }
        dxws.push(Tensor::stack::<3>(dz_at.into_iter().map(|d| d.expect("every step ran")).collect(), 1));
        dws.push(dw);
    }
    (Tensor::stack(dxws, 0), Tensor::stack(dws, 0))
}

/// The same passes as host loops over `f32` buffers, for the CPU backends.
pub mod host {
    use super::*;
    use crate::ops::host::{exp, matmul, tensor, to_vec};

    #[inline(always)]
    fn sigmoid(x: f32) -> f32 {
        1.0 / (1.0 + exp(-x))
    }

    /// tanh(x) = 1 − 2/(e^{2x} + 1): one `exp` (libm's `tanhf` goes through
    /// `expm1f` and cost more than the GEMMs here); ±1 in the limits, error
    /// below 1e-6.
    #[inline(always)]
    fn tanh(x: f32) -> f32 {
        1.0 - 2.0 / (exp(2.0 * x) + 1.0)
    }

    /// One direction's forward pass. `xw [B, L, 4H]`, `w [H, 4H]`, `mask [B, L]`;
    /// fills `h`, `c` `[B, L, H]` and `act [B, L, 4H]`.
    #[allow(clippy::too_many_arguments)]
    fn forward_dir(
        dir: usize,
        (b, l, hd): (usize, usize, usize),
        xw: &[f32],
        w: &[f32],
        mask: &[f32],
        h: &mut [f32],
        c: &mut [f32],
        act: &mut [f32],
    ) {
        let g4 = 4 * hd;
        let mut z = vec![0.0f32; b * g4];
        let mut h_prev = vec![0.0f32; b * hd];
        let mut c_prev = vec![0.0f32; b * hd];
        for s in 0..l {
            let t = position(dir, s, l);
            for r in 0..b {
                z[r * g4..(r + 1) * g4].copy_from_slice(&xw[(r * l + t) * g4..(r * l + t + 1) * g4]);
            }
            matmul(b, g4, hd, &mut z, g4, true, &h_prev, hd, false, w, g4, false); // z += h·W
            for r in 0..b {
                let m = mask[r * l + t];
                let zr = &z[r * g4..(r + 1) * g4];
                let a = &mut act[(r * l + t) * g4..(r * l + t + 1) * g4];
                let (hp, cp) = (&mut h_prev[r * hd..(r + 1) * hd], &mut c_prev[r * hd..(r + 1) * hd]);
                let (ho, co) =
                    (&mut h[(r * l + t) * hd..(r * l + t + 1) * hd], &mut c[(r * l + t) * hd..(r * l + t + 1) * hd]);
                // Gate activations [i | f | g | o], each a simple loop that vectorises.
                for (a, &z) in a[..2 * hd].iter_mut().zip(&zr[..2 * hd]) {
                    *a = sigmoid(z);
                }
                for (a, &z) in a[2 * hd..3 * hd].iter_mut().zip(&zr[2 * hd..3 * hd]) {
                    *a = tanh(z);
                }
                for (a, &z) in a[3 * hd..].iter_mut().zip(&zr[3 * hd..]) {
                    *a = sigmoid(z);
                }
                let (i, rest) = a.split_at(hd);
                let (f, rest) = rest.split_at(hd);
                let (g, o) = rest.split_at(hd);
                for j in 0..hd {
                    let c_raw = f[j] * cp[j] + i[j] * g[j];
                    co[j] = c_raw;
                    ho[j] = m * o[j] * tanh(c_raw);
                    hp[j] = ho[j];
                    cp[j] = m * c_raw;
                }
            }
        }
    }

    /// One direction's backward pass; fills `dxw [B, L, 4H]` and `dw [H, 4H]`.
    #[allow(clippy::too_many_arguments)]
    fn backward_dir(
        dir: usize,
        (b, l, hd): (usize, usize, usize),
        w: &[f32],
        mask: &[f32],
        h: &[f32],
        c: &[f32],
        act: &[f32],
        grad: &[f32],
        dxw: &mut [f32],
        dw: &mut [f32],
    ) {
        let g4 = 4 * hd;
        let mut dh_next = vec![0.0f32; b * hd];
        let mut dc_next = vec![0.0f32; b * hd];
        let mut dz = vec![0.0f32; b * g4];
        // h_{t∓1} of every position, row-major [B·L, H]: dW = Σ h_prevᵀ·dz in one product.
        let mut h_prev_all = vec![0.0f32; b * l * hd];
        let zeros = vec![0.0f32; hd];
        for s in (0..l).rev() {
            let t = position(dir, s, l);
            let p = (s > 0).then(|| position(dir, s - 1, l));
            for r in 0..b {
                let m = mask[r * l + t];
                let at = r * l + t;
                let a = &act[at * g4..(at + 1) * g4];
                let (i, rest) = a.split_at(hd);
                let (f, rest) = rest.split_at(hd);
                let (g, o) = rest.split_at(hd);
                // c_{t∓1} (zero before the first position and at padding).
                let (m_prev, c_prev) =
                    p.map_or((0.0, &zeros[..]), |p| (mask[r * l + p], &c[(r * l + p) * hd..(r * l + p + 1) * hd]));
                let (ct, gt) = (&c[at * hd..(at + 1) * hd], &grad[at * hd..(at + 1) * hd]);
                let (dh_n, dc_n) = (&dh_next[r * hd..(r + 1) * hd], &mut dc_next[r * hd..(r + 1) * hd]);
                let (dzi, rest) = dz[r * g4..(r + 1) * g4].split_at_mut(hd);
                let (dzf, rest) = rest.split_at_mut(hd);
                let (dzg, dzo) = rest.split_at_mut(hd);
                for j in 0..hd {
                    let dh = (gt[j] + dh_n[j]) * m;
                    let tc = tanh(ct[j]);
                    let dc = dc_n[j] * m + dh * o[j] * (1.0 - tc * tc);
                    dzi[j] = dc * g[j] * i[j] * (1.0 - i[j]);
                    dzf[j] = dc * m_prev * c_prev[j] * f[j] * (1.0 - f[j]);
                    dzg[j] = dc * i[j] * (1.0 - g[j] * g[j]);
                    dzo[j] = dh * tc * o[j] * (1.0 - o[j]);
                    dc_n[j] = dc * f[j];
                }
                let dzr = &dz[r * g4..(r + 1) * g4];
                dxw[at * g4..(at + 1) * g4].copy_from_slice(dzr);
                if let Some(p) = p {
                    h_prev_all[at * hd..(at + 1) * hd].copy_from_slice(&h[(r * l + p) * hd..(r * l + p + 1) * hd]);
                }
            }
            matmul(b, hd, g4, &mut dh_next, hd, false, &dz, g4, false, w, g4, true);
            // dh = dz·Wᵀ
        }
        matmul(hd, g4, b * l, dw, g4, false, &h_prev_all, hd, true, dxw, g4, false);
        // dW = Hprevᵀ·dZ
    }

    /// [`composed_forward`] on the host.
    pub fn forward<B: Backend>(xw: Tensor<B, 4>, w: Tensor<B, 3>, mask: Tensor<B, 2>) -> Saved<B> {
        let [_, b, l, g4] = xw.dims();
        let hd = g4 / 4;
        let device = xw.device();
        let (xw, w, mask) = (to_vec(xw), to_vec(w), to_vec(mask));
        let (n_h, n_a) = (b * l * hd, b * l * g4);
        let (mut h, mut c, mut act) = (vec![0.0f32; 2 * n_h], vec![0.0f32; 2 * n_h], vec![0.0f32; 2 * n_a]);
        {
            let (h0, h1) = h.split_at_mut(n_h);
            let (c0, c1) = c.split_at_mut(n_h);
            let (a0, a1) = act.split_at_mut(n_a);
            let dims = (b, l, hd);
            let (w0, w1) = w.split_at(hd * g4);
            let (x0, x1) = xw.split_at(n_a);
            rayon::join(
                || forward_dir(0, dims, x0, w0, &mask, h0, c0, a0),
                || forward_dir(1, dims, x1, w1, &mask, h1, c1, a1),
            );
        }
        Saved {
            h: tensor(h, [2, b, l, hd], &device),
            act: tensor(act, [2, b, l, g4], &device),
            c: tensor(c, [2, b, l, hd], &device),
        }
    }

    /// [`composed_backward`] on the host.
    pub fn backward<B: Backend>(
        w: Tensor<B, 3>,
        mask: Tensor<B, 2>,
        saved: Saved<B>,
        grad: Tensor<B, 4>,
    ) -> (Tensor<B, 4>, Tensor<B, 3>) {
        let [_, b, l, hd] = saved.h.dims();
        let g4 = 4 * hd;
        let device = grad.device();
        let (w, mask, grad) = (to_vec(w), to_vec(mask), to_vec(grad));
        let (h, c, act) = (to_vec(saved.h), to_vec(saved.c), to_vec(saved.act));
        let (n_h, n_a) = (b * l * hd, b * l * g4);
        let (mut dxw, mut dw) = (vec![0.0f32; 2 * n_a], vec![0.0f32; 2 * hd * g4]);
        {
            let dims = (b, l, hd);
            let (dx0, dx1) = dxw.split_at_mut(n_a);
            let (dw0, dw1) = dw.split_at_mut(hd * g4);
            let (w0, w1) = w.split_at(hd * g4);
            let (h0, h1) = h.split_at(n_h);
            let (c0, c1) = c.split_at(n_h);
            let (a0, a1) = act.split_at(n_a);
            let (g0, g1) = grad.split_at(n_h);
            rayon::join(
                || backward_dir(0, dims, w0, &mask, h0, c0, a0, g0, dx0, dw0),
                || backward_dir(1, dims, w1, &mask, h1, c1, a1, g1, dx1, dw1),
            );
        }
        (tensor(dxw, [2, b, l, g4], &device), tensor(dw, [2, hd, g4], &device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::host::close;
    use crate::ops::SeqBackend;
    use burn::backend::{Autodiff, Flex, NdArray};
    use burn::tensor::{Distribution, TensorData, TensorPrimitive};

    /// Inputs with padding: sentence lengths 5, 2, 4 (and 0 for a fully padded row when asked).
    fn inputs<B: Backend>(
        lengths: &[usize],
        hd: usize,
        device: &B::Device,
    ) -> (Tensor<B, 4>, Tensor<B, 3>, Tensor<B, 2>) {
        let (b, l) = (lengths.len(), lengths.iter().copied().max().unwrap_or(1));
        let xw = Tensor::random([2, b, l, 4 * hd], Distribution::Normal(0.0, 1.0), device);
        let w = Tensor::random([2, hd, 4 * hd], Distribution::Normal(0.0, 0.5), device);
        let m: Vec<f32> = lengths.iter().flat_map(|&n| (0..l).map(move |t| if t < n { 1.0 } else { 0.0 })).collect();
        (xw, w, Tensor::from_data(TensorData::new(m, [b, l]), device))
    }

    /// The textbook cell, one sentence, one direction, written out by hand.
    #[test]
    fn one_step_is_the_textbook_lstm_cell() {
        let device = Default::default();
        let (xw, w, mask) = inputs::<NdArray>(&[1], 3, &device);
        let h = composed_forward(xw.clone(), w, mask).h; // zero start state: z = xw
        let z = xw.into_data().to_vec::<f32>().unwrap();
        let s = |x: f32| 1.0 / (1.0 + (-x).exp());
        let h = h.into_data().to_vec::<f32>().unwrap();
        for dir in 0..2 {
            for j in 0..3 {
                let zj = |k: usize| z[dir * 12 + k * 3 + j];
                let c = s(zj(0)) * zj(2).tanh(); // f·0 + i·g
                let want = s(zj(3)) * c.tanh();
                assert!((h[dir * 3 + j] - want).abs() < 1e-6, "direction {dir} unit {j}: {} vs {want}", h[dir * 3 + j]);
            }
        }
    }

    /// The host loops compute what the composed operations compute, forward
    /// and backward, padding and an empty row included.
    #[test]
    fn host_passes_equal_the_composed_ones() {
        let device = Default::default();
        <NdArray as Backend>::seed(&device, 3);
        let (xw, w, mask) = inputs::<NdArray>(&[5, 2, 0, 4], 6, &device);
        let a = composed_forward(xw.clone(), w.clone(), mask.clone());
        let b = host::forward(xw.clone(), w.clone(), mask.clone());
        close(a.h.clone(), b.h.clone(), "h");
        close(a.act.clone(), b.act.clone(), "gate activations");
        close(a.c.clone(), b.c.clone(), "cell states");
        let grad = Tensor::random(a.h.dims(), Distribution::Normal(0.0, 1.0), &device);
        let (dxa, dwa) = composed_backward(w.clone(), mask.clone(), a, grad.clone());
        let (dxb, dwb) = host::backward(w, mask, b, grad);
        close(dxa, dxb, "d xw");
        close(dwa, dwb, "d w");
    }

    /// The operation's gradients (hand-written backward, host loops on Flex
    /// and NdArray) equal Burn's autodiff through the composed forward pass.
    fn gradients_match_autodiff<B: SeqBackend>() {
        type A<B> = Autodiff<B>;
        let device = Default::default();
        B::seed(&device, 9);
        let (xw, w, mask) = inputs::<A<B>>(&[4, 1, 3], 5, &device);
        let weights = Tensor::<A<B>, 4>::random([2, 3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        let run = |custom: bool| {
            let (xw, w) = (xw.clone().detach().require_grad(), w.clone().detach().require_grad());
            let h = if custom {
                let prim = A::<B>::lstm_scan(
                    xw.clone().into_primitive().tensor(),
                    w.clone().into_primitive().tensor(),
                    mask.clone().into_primitive().tensor(),
                );
                Tensor::from_primitive(TensorPrimitive::Float(prim))
            } else {
                composed_forward(xw.clone(), w.clone(), mask.clone()).h
            };
            let grads = (h.clone() * weights.clone()).sum().backward();
            (h.inner(), xw.grad(&grads).unwrap(), w.grad(&grads).unwrap())
        };
        let (h1, dx1, dw1) = run(true);
        let (h2, dx2, dw2) = run(false);
        close(h1, h2, "outputs");
        close(dx1, dx2, "d xw");
        close(dw1, dw2, "d w");
    }

    #[test]
    fn gradients_match_autodiff_on_ndarray() {
        gradients_match_autodiff::<NdArray>();
    }

    #[test]
    fn gradients_match_autodiff_on_flex() {
        gradients_match_autodiff::<Flex>();
    }
}
