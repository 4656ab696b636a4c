//! Host-side helpers for the CPU backends' hand-written operations
//! ([`super::lstm_scan::host`], [`super::dense_attention::host`],
//! [`super::flex_linear`]): tensors to `f32` buffers and back, a strided
//! GEMM call, a vectorisable `exp`, and for the in-place passes on
//! burn-flex ([`super::adam`], [`super::moving_average`]) their chunk size
//! and buffer check.

use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::{DType, TensorData};

/// Values per rayon task of the element-wise in-place passes
/// ([`super::adam`], [`super::moving_average`]).
pub(crate) const CHUNK: usize = 1 << 15;

/// Whether a burn-flex tensor is exactly its buffer: `n` contiguous f32
/// values from offset 0, so that a pass over the storage is a pass over the
/// tensor (what the in-place passes need).
pub(crate) fn is_whole_f32<const D: usize>(x: &Tensor<Flex, D>, n: usize) -> bool {
    let x = x.clone().into_primitive().tensor();
    x.dtype() == DType::F32 && x.as_slice::<f32>().is_some() && x.storage::<f32>().len() == n
}

pub(crate) fn to_vec<B: Backend, const D: usize>(x: Tensor<B, D>) -> Vec<f32> {
    x.into_data().convert::<f32>().into_vec::<f32>().expect("f32 data")
}

pub(crate) fn tensor<B: Backend, const D: usize>(v: Vec<f32>, shape: [usize; D], device: &B::Device) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(v, shape), device)
}

/// `dst[m, n] (+)= a[m, k] · b[k, n]`, all row-major with the given row strides.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    ld_dst: usize,
    accumulate: bool,
    a: &[f32],
    ld_a: usize,
    a_transposed: bool,
    b: &[f32],
    ld_b: usize,
    b_transposed: bool,
) {
    gemm_with(m, n, k, dst, ld_dst, accumulate, a, ld_a, a_transposed, b, ld_b, b_transposed, gemm::Parallelism::None)
}

/// [`matmul`] with gemm's own threading (`Parallelism::Rayon(0)`: the
/// current rayon pool) or none.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_with(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    ld_dst: usize,
    accumulate: bool,
    a: &[f32],
    ld_a: usize,
    a_transposed: bool,
    b: &[f32],
    ld_b: usize,
    b_transposed: bool,
    parallelism: gemm::Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= (m - 1) * ld_dst + n);
    let (a_rs, a_cs) = if a_transposed { (1, ld_a as isize) } else { (ld_a as isize, 1) };
    let (b_rs, b_cs) = if b_transposed { (1, ld_b as isize) } else { (ld_b as isize, 1) };
    assert!(a.len() >= if a_transposed { (k - 1) * ld_a + m } else { (m - 1) * ld_a + k });
    assert!(b.len() >= if b_transposed { (n - 1) * ld_b + k } else { (k - 1) * ld_b + n });
    // SAFETY: the asserts above keep every index gemm reads or writes
    // inside the slices; dst does not alias a or b (distinct borrows).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            ld_dst as isize,
            accumulate,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            if accumulate { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `e^x` without a libm call or a branch, so that the gate loops
/// vectorise (libm's `expf` was a tenth of inference time, one call per
/// gate value): `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, `e^r` by Cephes'
/// degree-6 polynomial, `2^n` written into the exponent bits. `x` is
/// clamped to [−87, 88] (`e^x` stays a normal f32); relative error
/// below 3e-7 inside.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5·2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    // `clamp` keeps a NaN (max/min would turn it into a bound and hide a diverged model).
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2E + ROUND;
    let n = shifted - ROUND;
    // The integer n sits in the low mantissa bits of `shifted` (no
    // float-to-int conversion, whose NaN handling stops vectorisation).
    let n_int = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let er = p * r * r + r + 1.0;
    er * f32::from_bits(n_int.wrapping_add(127) << 23)
}

/// Asserts two tensors have the same shape and values within
/// `tol·(1 + |b|)` (tests of the host operations against their composed
/// versions): `tol` is 1e-5 (Flex: 3.4e-7 at most here), or 1e-3 where the
/// backend's f32 reciprocal is approximate. burn-ndarray's is the CPU's
/// (about 12 bits, 3e-4 relative error), and Burn's autodiff takes a
/// reciprocal for the gradient of every division, softmax's too: there
/// the composed attention gradients `dq`, `dk` differ by up to 2.6e-4
/// (AMD EPYC). The mistakes these tests catch (a lost dropout scale, a
/// wrong mask) are off by 10 % or more.
#[cfg(test)]
pub(crate) fn close<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>, what: &str) {
    let tol = if exact_reciprocal::<B>(&a.device()) { 1e-5 } else { 1e-3 };
    let (a, b) = (a.into_data(), b.into_data());
    assert_eq!(a.shape, b.shape, "{what}");
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0f32, f32::max);
    assert!(worst < tol, "{what}: largest difference {worst} (relative to 1 + |value|) ≥ {tol}");
}

/// Whether `B` computes f32 reciprocals correctly rounded, checked on 64
/// values (burn-ndarray takes its SIMD path from 32 elements on).
#[cfg(test)]
pub(crate) fn exact_reciprocal<B: Backend>(device: &B::Device) -> bool {
    let xs: Vec<f32> = (1..=64).map(|i| i as f32 * 0.37).collect();
    let got = Tensor::<B, 1>::from_data(TensorData::new(xs.clone(), [xs.len()]), device).recip();
    got.into_data().iter::<f32>().zip(xs).all(|(r, x)| r == 1.0 / x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_is_exact_to_single_precision() {
        let mut worst = 0.0f64;
        for k in 0..=175_000 {
            let x = (-87.0 + k as f64 * 0.001) as f32;
            let want = f64::from(x).exp();
            worst = worst.max((f64::from(exp(x)) - want).abs() / want);
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        // Clamped outside [-87, 88]: finite, positive, monotone.
        assert!(exp(-1e4) > 0.0 && exp(-1e4) <= exp(-87.0));
        assert!(exp(1e4).is_finite() && exp(1e4) >= exp(88.0));
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(f32::NAN).is_nan(), "a NaN must propagate");
    }

    /// [`close`] holds Flex, the default backend, to 1e-5 only while its
    /// reciprocal is exact.
    #[test]
    fn flex_reciprocals_are_exact() {
        assert!(exact_reciprocal::<Flex>(&Default::default()));
    }
}
