//! burn-flex's linear layer ([`SeqBackend::fused_linear`]) without its
//! matmul's overheads. Flex allocates a product's output zeroed as bytes
//! and then copies it once more to align it (`FlexTensor::empty`), and adds
//! the bias in a second pass: with the page faults of those fresh buffers,
//! a tenth of attention inference beside the GEMM itself. Here the output
//! is allocated once, each row starts as the bias, and the GEMM accumulates
//! `x · W` into it. With [`precision`] at bf16, the product is
//! [`bf16_gemm::matmul`] instead (bias added as it stores).
//!
//! [`SeqBackend::fused_linear`]: super::SeqBackend::fused_linear

use super::precision::{self, Precision};
use super::{bf16_gemm, host};
use burn::backend::flex::FlexTensor;
use burn::backend::Flex;
use burn::tensor::ops::{FloatTensor, ModuleOps};
use burn::tensor::{Shape, TensorData, TensorMetadata};

/// Products at least this large (m·n·k) let gemm use the thread pool,
/// as burn-flex's own matmul does.
const PARALLEL_WORK: usize = 192 * 192 * 192;

/// `x [..., K] · w [K, O] + b [O]`; Burn's `linear` where an input is
/// not a contiguous f32 buffer.
pub fn linear(x: FloatTensor<Flex>, w: FloatTensor<Flex>, b: Option<FloatTensor<Flex>>) -> FloatTensor<Flex> {
    linear_in(precision::current(), x, w, b)
}

/// [`linear`] at the given precision (bf16 where the CPU has it, on
/// contiguous f32 inputs, like the f32 GEMM).
pub fn linear_in(
    precision: Precision,
    x: FloatTensor<Flex>,
    w: FloatTensor<Flex>,
    b: Option<FloatTensor<Flex>>,
) -> FloatTensor<Flex> {
    match fused(precision, &x, &w, b.as_ref()) {
        Some(y) => y,
        None => <Flex as ModuleOps<Flex>>::linear(x, w, b),
    }
}

fn fused(precision: Precision, x: &FlexTensor, w: &FlexTensor, b: Option<&FlexTensor>) -> Option<FlexTensor> {
    let (xs, ws) = (x.as_slice::<f32>()?, w.as_slice::<f32>()?);
    let dims = x.shape().to_vec();
    let wd = w.shape();
    let (&k, rows) = dims.split_last()?;
    if wd.num_dims() != 2 || wd[0] != k {
        return None;
    }
    let (m, o) = (rows.iter().product::<usize>(), wd[1]);
    let bias = match b {
        Some(b) => Some(b.as_slice::<f32>().filter(|s| s.len() == o)?),
        None => None,
    };
    let parallel = m * o * k >= PARALLEL_WORK;
    let y = match precision {
        Precision::Bf16 if bf16_gemm::available() => {
            bf16_gemm::matmul(xs, m, &bf16_gemm::Packed::new(ws, k, o), bias, parallel)
        }
        _ => {
            let mut y = Vec::with_capacity(m * o);
            match bias {
                Some(bias) => (0..m).for_each(|_| y.extend_from_slice(bias)),
                None => y.resize(m * o, 0.0),
            }
            let parallelism = if parallel { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None };
            host::gemm_with(m, o, k, &mut y, o, bias.is_some(), xs, k, false, ws, o, false, parallelism);
            y
        }
    };
    let mut shape = rows.to_vec();
    shape.push(o);
    Some(FlexTensor::from_data(TensorData::new(y, Shape::from(shape))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::prelude::*;
    use burn::tensor::{Distribution, TensorPrimitive};

    #[test]
    fn flex_linear_matches_burns_with_and_without_bias_on_any_layout() {
        let device = Default::default();
        let random = |shape: Vec<usize>| {
            Tensor::<Flex, 1>::random([shape.iter().product::<usize>()], Distribution::Normal(0.0, 1.0), &device)
                .reshape::<2, _>([shape[0], shape[1..].iter().product::<usize>()])
        };
        // Small (one thread), large enough for gemm's threads (m·n·k ≥ 192³),
        // and a transposed input (not contiguous: Burn's own path).
        for (m, k, o, transposed) in [(12, 6, 5, false), (200, 192, 192, false), (7, 9, 4, true)] {
            let x = if transposed { random(vec![k, m]).transpose() } else { random(vec![m, k]) };
            let (w, b) = (random(vec![k, o]), random(vec![1, o]).reshape([o]));
            for bias in [Some(b.clone()), None] {
                let p = |t: Tensor<Flex, 2>| t.into_primitive().tensor();
                let bias_p = bias.clone().map(|b: Tensor<Flex, 1>| b.into_primitive().tensor());
                let ours = Tensor::<Flex, 2>::from_primitive(TensorPrimitive::Float(linear(
                    p(x.clone()),
                    p(w.clone()),
                    bias_p.clone(),
                )));
                let bias_p = bias.map(|b| b.into_primitive().tensor());
                let theirs = Tensor::<Flex, 2>::from_primitive(TensorPrimitive::Float(
                    <Flex as ModuleOps<Flex>>::linear(p(x.clone()), p(w.clone()), bias_p),
                ));
                assert_eq!(ours.dims(), [m, o]);
                ours.into_data().assert_approx_eq::<f32>(&theirs.into_data(), Default::default());
            }
        }
    }

    #[test]
    fn bf16_linear_is_within_bf16_rounding_of_f32() {
        if !bf16_gemm::available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        let device = Default::default();
        let p = |t: Tensor<Flex, 2>| t.into_primitive().tensor();
        let (m, k, o) = (45, 96, 70);
        let x = Tensor::<Flex, 2>::random([m, k], Distribution::Normal(0.0, 1.0), &device);
        let w = Tensor::<Flex, 2>::random([k, o], Distribution::Normal(0.0, 0.1), &device);
        let b = Tensor::<Flex, 1>::random([o], Distribution::Normal(0.0, 1.0), &device);
        let run = |precision| {
            let y = linear_in(precision, p(x.clone()), p(w.clone()), Some(b.clone().into_primitive().tensor()));
            Tensor::<Flex, 2>::from_primitive(TensorPrimitive::Float(y)).into_data().to_vec::<f32>().unwrap()
        };
        let (half, full) = (run(Precision::Bf16), run(Precision::F32));
        // |x|·|w| summed over k bounds each entry's rounding error (2^-8 of it).
        let scale = x.abs().matmul(w.abs()).into_data().to_vec::<f32>().unwrap();
        let mut differs = false;
        for ((h, f), s) in half.iter().zip(&full).zip(&scale) {
            assert!((h - f).abs() <= s * 2f32.powi(-8) + 1e-5, "{h} vs {f} (scale {s})");
            differs |= h != f;
        }
        assert!(differs, "bf16 gave exactly the f32 values: was the bf16 path taken?");
    }
}
