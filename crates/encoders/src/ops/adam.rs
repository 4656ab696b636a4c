//! One Adam update of one parameter ([`SeqBackend::adam_step`]), the
//! arithmetic of Burn's `Adam` (`burn::optim::Adam`: L2 weight decay added
//! to the gradient, bias-corrected moments, ε scaled as Burn scales it):
//!
//! ```text
//! g  = grad + λ·θ                          (with weight decay λ)
//! m  = β₁·m + (1−β₁)·g                     v = β₂·v + (1−β₂)·g²
//! θ  = θ − lr · (m·c) / (√v + ε·√(1−β₂ᵗ))   c = √(1−β₂ᵗ) / (1−β₁ᵗ)
//! ```
//!
//! Composed from tensor operations, that is a dozen passes over the
//! parameter, each allocating a tensor ([`composed`]: any backend). For the
//! word embeddings of a CoNLL-2003 tagger (2.4 M values) those passes were
//! a sixth of a training step at one thread, and more at two, because the
//! update runs after the concurrent parts of a batch are joined. burn-flex
//! runs it as one pass that updates θ, m and v in place ([`flex`]),
//! chunks on the thread pool, with the same floating-point operations in
//! the same order as the composed version: the results are identical.
//!
//! [`SeqBackend::adam_step`]: super::SeqBackend::adam_step

use super::host::{is_whole_f32, CHUNK};
use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;

/// The constants of one update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// The learning rate.
    pub lr: f32,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    /// L2 penalty added to the gradient (0: none).
    pub weight_decay: f32,
    /// The update's number, from 1.
    pub time: i32,
}

impl AdamStep {
    /// `c` and `ε·√(1−β₂ᵗ)` of the update, as Burn computes them (f32).
    fn factors(&self) -> (f32, f32) {
        let bias_correction2_sqrt = (1.0 - self.beta_2.powi(self.time)).sqrt();
        let combined = bias_correction2_sqrt / (1.0 - self.beta_1.powi(self.time));
        (combined, self.epsilon * bias_correction2_sqrt)
    }
}

/// The update with tensor operations: `(θ, m, v)` after it. `moments` are
/// `None` at the first update (zeros).
pub fn composed<B: Backend, const D: usize>(
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    s: &AdamStep,
) -> (Tensor<B, D>, Tensor<B, D>, Tensor<B, D>) {
    let grad = if s.weight_decay != 0.0 { param.clone().mul_scalar(s.weight_decay).add(grad) } else { grad };
    let (f1, f2) = (1.0 - s.beta_1, 1.0 - s.beta_2);
    let (m, v) = match moments {
        Some((m, v)) => (
            m.mul_scalar(s.beta_1).add(grad.clone().mul_scalar(f1)),
            v.mul_scalar(s.beta_2).add(grad.square().mul_scalar(f2)),
        ),
        None => (grad.clone().mul_scalar(f1), grad.square().mul_scalar(f2)),
    };
    let (combined, eps) = s.factors();
    let update = m.clone().mul_scalar(combined).div(v.clone().sqrt().add_scalar(eps));
    (param - update.mul_scalar(s.lr), m, v)
}

/// The update of one value: `(θ, m, v)` in place. Each operation as in
/// [`composed`] (no fused multiply-add), so the two agree bit for bit.
#[inline(always)]
fn update(p: &mut f32, g: f32, m: &mut f32, v: &mut f32, s: &AdamStep, (combined, eps): (f32, f32)) {
    let g = if s.weight_decay != 0.0 { *p * s.weight_decay + g } else { g };
    *m = *m * s.beta_1 + g * (1.0 - s.beta_1);
    *v = *v * s.beta_2 + g * g * (1.0 - s.beta_2);
    *p -= *m * combined / (v.sqrt() + eps) * s.lr;
}

/// The update over host buffers (all the same length), chunks on the
/// current rayon pool.
pub fn host(param: &mut [f32], grad: &[f32], m: &mut [f32], v: &mut [f32], s: &AdamStep) {
    use rayon::prelude::*;
    assert!(grad.len() == param.len() && m.len() == param.len() && v.len() == param.len());
    let factors = s.factors();
    let run = |(((p, g), m), v): (((&mut [f32], &[f32]), &mut [f32]), &mut [f32])| {
        for i in 0..p.len() {
            update(&mut p[i], g[i], &mut m[i], &mut v[i], s, factors);
        }
    };
    param
        .par_chunks_mut(CHUNK)
        .zip(grad.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK))
        .zip(v.par_chunks_mut(CHUNK))
        .for_each(run);
}

/// burn-flex: [`host`] on the tensors' own buffers, `θ`, `m` and `v`
/// updated in place (a buffer shared with another tensor is copied
/// first); [`composed`] where a tensor is not a contiguous f32 buffer.
pub fn flex<const D: usize>(
    param: Tensor<Flex, D>,
    grad: Tensor<Flex, D>,
    moments: Option<(Tensor<Flex, D>, Tensor<Flex, D>)>,
    s: &AdamStep,
) -> (Tensor<Flex, D>, Tensor<Flex, D>, Tensor<Flex, D>) {
    let n = param.shape().num_elements();
    let whole = |x: &Tensor<Flex, D>| is_whole_f32(x, n);
    let fits = [&param, &grad].into_iter().chain(moments.iter().flat_map(|(m, v)| [m, v])).all(whole);
    if !fits {
        return composed(param, grad, moments, s);
    }
    let (m, v) = moments.unwrap_or_else(|| (param.zeros_like(), param.zeros_like()));
    let prim = |x: Tensor<Flex, D>| x.into_primitive().tensor();
    let (mut p, g, mut m, mut v) = (prim(param), prim(grad), prim(m), prim(v));
    host(p.storage_mut(), g.storage(), m.storage_mut(), v.storage_mut(), s);
    let t = |x| Tensor::from_primitive(TensorPrimitive::Float(x));
    (t(p), t(m), t(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Distribution;

    fn bits<const D: usize>(x: Tensor<Flex, D>) -> Vec<u32> {
        x.into_data().to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect()
    }

    /// Five updates of a [40000, 3] parameter (several chunks) with and
    /// without weight decay: the fused pass gives the composed version's
    /// values bit for bit, the first update (no moments yet) included.
    #[test]
    fn fused_adam_equals_the_composed_update_bit_for_bit() {
        let device = Default::default();
        let shape = [40_000, 3];
        let random = || Tensor::<Flex, 2>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        for weight_decay in [0.0, 0.01] {
            let s = |time| AdamStep { lr: 0.001, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-5, weight_decay, time };
            let mut a = random();
            let mut b = a.clone() + 0.0; // the same values in a buffer of its own
            let (mut ma, mut mb) = (None, None);
            for time in 1..=5 {
                let grad = random().mul_scalar(time as f32);
                let (p, m, v) = composed(a, grad.clone(), ma, &s(time));
                (a, ma) = (p, Some((m, v)));
                let (p, m, v) = flex(b, grad, mb, &s(time));
                (b, mb) = (p, Some((m, v)));
                assert_eq!(bits(a.clone()), bits(b.clone()), "θ after update {time}, decay {weight_decay}");
                let ((m1, v1), (m2, v2)) = (ma.clone().unwrap(), mb.clone().unwrap());
                assert_eq!(bits(m1), bits(m2), "m after update {time}");
                assert_eq!(bits(v1), bits(v2), "v after update {time}");
            }
        }
    }

    /// A parameter whose buffer another tensor shares is copied, not
    /// changed under that tensor; a strided one takes the composed path.
    #[test]
    fn fused_adam_leaves_shared_and_strided_tensors_alone() {
        let device = Default::default();
        let s = AdamStep { lr: 0.1, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-5, weight_decay: 0.0, time: 1 };
        let x = Tensor::<Flex, 2>::random([3, 4], Distribution::Normal(0.0, 1.0), &device);
        let before = bits(x.clone());
        let grad = Tensor::<Flex, 2>::ones([3, 4], &device);
        let (p, _, _) = flex(x.clone(), grad.clone(), None, &s);
        assert_eq!(bits(x.clone()), before, "the shared tensor changed");
        assert!(bits(p).iter().zip(&before).all(|(a, b)| a != b), "no update");
        let strided = x.transpose();
        let (p, _, _) = flex(strided.clone(), grad.clone().transpose(), None, &s);
        let (want, _, _) = composed(strided, grad.transpose(), None, &s);
        assert_eq!(bits(p), bits(want));
    }
}
