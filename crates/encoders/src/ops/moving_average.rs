//! One step of a moving average of weights ([`SeqBackend::average_step`]):
//! `avg ← keep·avg + (1 − keep)·w`, the weight averaging of training
//! (`runner::average`). Composed from tensor operations that is three
//! passes and three fresh tensors per parameter at every training step
//! ([`composed`]); burn-flex updates the average in place in one pass
//! ([`flex`]), with the same floating-point operations, so the results are
//! identical.
//!
//! [`SeqBackend::average_step`]: super::SeqBackend::average_step

use super::host::{is_whole_f32, CHUNK};
use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;

/// `keep·avg + (1 − keep)·current` with tensor operations.
pub fn composed<B: Backend, const D: usize>(avg: Tensor<B, D>, current: Tensor<B, D>, keep: f64) -> Tensor<B, D> {
    avg * keep + current * (1.0 - keep)
}

/// burn-flex: [`composed`] as one pass over the average's own buffer,
/// chunks on the thread pool (a
/// buffer shared with another tensor is copied first; a tensor that is not
/// a contiguous f32 buffer takes the composed path).
pub fn flex<const D: usize>(avg: Tensor<Flex, D>, current: Tensor<Flex, D>, keep: f64) -> Tensor<Flex, D> {
    let n = avg.shape().num_elements();
    if !(is_whole_f32(&avg, n) && is_whole_f32(&current, n)) {
        return composed(avg, current, keep);
    }
    // The scalars as Burn converts them (f64 → f32), `1 − keep` in f64 first.
    let (k, rest) = (keep as f32, (1.0 - keep) as f32);
    let (mut a, c) = (avg.into_primitive().tensor(), current.into_primitive().tensor());
    use rayon::prelude::*;
    let step = |(a, c): (&mut [f32], &[f32])| a.iter_mut().zip(c).for_each(|(a, &c)| *a = *a * k + c * rest);
    a.storage_mut::<f32>().par_chunks_mut(CHUNK).zip(c.storage::<f32>().par_chunks(CHUNK)).for_each(step);
    Tensor::from_primitive(TensorPrimitive::Float(a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Distribution;

    fn bits(x: Tensor<Flex, 2>) -> Vec<u32> {
        x.into_data().to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect()
    }

    /// The in-place pass gives the composed values bit for bit, leaves a
    /// tensor that shares the average's buffer alone, and takes the
    /// composed path for a strided tensor.
    #[test]
    fn fused_average_step_equals_the_composed_one() {
        let device = Default::default();
        let random = |shape: [usize; 2]| Tensor::<Flex, 2>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        for keep in [0.25, 0.9, 0.999] {
            let (avg, current) = (random([40_000, 3]), random([40_000, 3]));
            let before = bits(avg.clone());
            let want = bits(composed(avg.clone(), current.clone(), keep));
            assert_eq!(bits(flex(avg.clone(), current.clone(), keep)), want, "keep {keep}");
            assert_eq!(bits(avg.clone()), before, "the shared buffer changed");
            let (a, c) = (avg.transpose(), current.transpose());
            assert_eq!(bits(flex(a.clone(), c.clone(), keep)), bits(composed(a, c, keep)));
        }
    }
}
