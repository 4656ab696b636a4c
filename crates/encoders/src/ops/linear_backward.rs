//! The backward pass of a linear layer `y = x·W + b`
//! ([`SeqBackend::linear_backward`]), for `x [..., K]`, `W [K, O]`, the
//! output's gradient `dy [..., O]` and `M` rows in `x`:
//!
//! ```text
//! dx = dy · Wᵀ      [M, K]
//! dW = xᵀ · dy      [K, O]
//! db = Σ_rows dy    [O]
//! ```
//!
//! Burn's own passes by default ([`composed`]: `ModuleOps`'s
//! `linear_*_backward`, any backend). On burn-flex those transpose `W` and
//! `x` into fresh tensors' views, allocate each product's output zeroed and
//! copy it once more to align it, and reduce `dy` per dimension: in the
//! reference attention tagger a twentieth of a training step beside the
//! GEMMs. [`flex`] runs the two GEMMs on the buffers as they are (gemm reads
//! the transposes by stride) into outputs they overwrite, and sums `dy`'s
//! rows in one pass.
//!
//! [`SeqBackend::linear_backward`]: super::SeqBackend::linear_backward

use super::host;
use burn::backend::flex::FlexTensor;
use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Shape, TensorData, TensorMetadata};

/// Which gradients the graph asks for (the tracked inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needed {
    pub x: bool,
    pub weight: bool,
    pub bias: bool,
}

/// The gradients asked for, shaped like `x`, `W` and `b`.
pub struct Grads<B: Backend> {
    pub x: Option<FloatTensor<B>>,
    pub weight: Option<FloatTensor<B>>,
    pub bias: Option<FloatTensor<B>>,
}

/// Burn's backward pass of `linear`, as its autodiff runs it.
pub fn composed<B: Backend>(x: FloatTensor<B>, w: FloatTensor<B>, dy: FloatTensor<B>, needed: Needed) -> Grads<B> {
    Grads {
        x: needed.x.then(|| B::linear_x_backward(w, dy.clone())),
        weight: needed.weight.then(|| B::linear_weight_backward(x, dy.clone())),
        bias: needed.bias.then(|| B::linear_bias_backward(dy)),
    }
}

/// The same gradients as host GEMMs on burn-flex's buffers; [`composed`]
/// where a tensor is not a contiguous f32 buffer.
pub fn flex(x: FlexTensor, w: FlexTensor, dy: FlexTensor, needed: Needed) -> Grads<Flex> {
    match host_grads(&x, &w, &dy, needed) {
        Some(grads) => grads,
        None => composed::<Flex>(x, w, dy, needed),
    }
}

fn host_grads(x: &FlexTensor, w: &FlexTensor, dy: &FlexTensor, needed: Needed) -> Option<Grads<Flex>> {
    let (xs, ws, dys) = (x.as_slice::<f32>()?, w.as_slice::<f32>()?, dy.as_slice::<f32>()?);
    let x_shape = x.shape();
    let wd = w.shape();
    let k = *x_shape.as_slice().last()?;
    if wd.num_dims() != 2 || wd[0] != k {
        return None;
    }
    let o = wd[1];
    let m = x_shape.num_elements() / k.max(1);
    if dys.len() != m * o || xs.len() != m * k {
        return None;
    }
    let parallelism = |work: usize| {
        if work >= super::flex_linear::PARALLEL_WORK {
            gemm::Parallelism::Rayon(0)
        } else {
            gemm::Parallelism::None
        }
    };
    let tensor = |v: Vec<f32>, shape: Shape| FlexTensor::from_data(TensorData::new(v, shape));
    // dx [M, K] = dy [M, O] · Wᵀ (W read by stride as [O, K]).
    let dx = needed.x.then(|| {
        let dx = product(m, k, o, |dst| {
            host::gemm_with(m, k, o, dst, k, false, dys, o, false, ws, o, true, parallelism(m * k * o))
        });
        tensor(dx, x_shape.clone())
    });
    // dW [K, O] = xᵀ (x read by stride as [K, M]) · dy [M, O].
    let dw = needed.weight.then(|| {
        let dw = product(k, o, m, |dst| {
            host::gemm_with(k, o, m, dst, o, false, xs, k, true, dys, o, false, parallelism(m * k * o))
        });
        tensor(dw, Shape::new([k, o]))
    });
    // db [O] = the sum of dy's rows.
    let db = needed.bias.then(|| {
        let mut db = vec![0.0f32; o];
        for row in dys.chunks_exact(o.max(1)) {
            db.iter_mut().zip(row).for_each(|(s, &g)| *s += g);
        }
        tensor(db, Shape::new([o]))
    });
    Some(Grads { x: dx, weight: dw, bias: db })
}

/// A `rows × cols` product over `depth` terms written by `gemm` (which
/// overwrites every entry when `depth > 0`); zeros when `depth` is 0.
fn product(rows: usize, cols: usize, depth: usize, gemm: impl FnOnce(&mut [f32])) -> Vec<f32> {
    let mut out = vec![0.0f32; rows * cols];
    if depth > 0 {
        gemm(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::prelude::*;
    use burn::tensor::{Distribution, TensorPrimitive};

    fn random(shape: [usize; 2]) -> Tensor<Flex, 2> {
        Tensor::random(shape, Distribution::Normal(0.0, 1.0), &Default::default())
    }

    fn t<const D: usize>(p: FloatTensor<Flex>) -> Tensor<Flex, D> {
        Tensor::from_primitive(TensorPrimitive::Float(p))
    }

    fn p<const D: usize>(x: Tensor<Flex, D>) -> FloatTensor<Flex> {
        x.into_primitive().tensor()
    }

    #[test]
    fn host_gradients_match_burns_on_any_shape_and_layout() {
        // One row, one feature, gemm's threads (m·k·o ≥ 192³), a rank-3 x,
        // and transposed (not contiguous: Burn's own passes) inputs.
        for (m, k, o, case) in
            [(1, 1, 1, ""), (12, 6, 5, ""), (200, 192, 192, ""), (12, 6, 5, "rank 3"), (7, 9, 4, "transposed")]
        {
            let x = if case == "transposed" { random([k, m]).transpose() } else { random([m, k]) };
            let (w, dy) = (random([k, o]), random([m, o]));
            let (x, dy) = if case == "rank 3" {
                (p(x.reshape([3, m / 3, k])), p(dy.reshape([3, m / 3, o])))
            } else {
                (p(x), p(dy))
            };
            for needed in [
                Needed { x: true, weight: true, bias: true },
                Needed { x: false, weight: true, bias: false },
                Needed { x: true, weight: false, bias: false },
            ] {
                let ours = flex(x.clone(), p(w.clone()), dy.clone(), needed);
                let theirs = composed::<Flex>(x.clone(), p(w.clone()), dy.clone(), needed);
                let pairs =
                    [(ours.x, theirs.x, "dx"), (ours.weight, theirs.weight, "dW"), (ours.bias, theirs.bias, "db")];
                for (a, b, what) in pairs {
                    match (a, b) {
                        (Some(a), Some(b)) => {
                            assert_eq!(a.shape(), b.shape(), "{what} {case} {m}×{k}×{o}");
                            let (a, b) = (t::<1>(reshape_flat(a)), t::<1>(reshape_flat(b)));
                            a.into_data().assert_approx_eq::<f32>(&b.into_data(), Default::default());
                        }
                        (None, None) => {}
                        _ => panic!("{what}: one side computed it, the other not ({needed:?})"),
                    }
                }
            }
        }
    }

    #[test]
    fn empty_products_are_zeros() {
        // K = 0: dW is [0, O]; O = 0: dx is zeros [M, K] (no GEMM term).
        let device = Default::default();
        let (w, dy) = (Tensor::<Flex, 2>::zeros([4, 0], &device), Tensor::<Flex, 2>::zeros([3, 0], &device));
        let g = flex(p(random([3, 4])), p(w), p(dy), Needed { x: true, weight: true, bias: true });
        let dx = t::<2>(g.x.unwrap());
        assert_eq!(dx.dims(), [3, 4]);
        assert_eq!(dx.into_data().to_vec::<f32>().unwrap(), vec![0.0; 12]);
        assert_eq!(t::<2>(g.weight.unwrap()).dims(), [4, 0]);
        assert_eq!(t::<1>(g.bias.unwrap()).dims(), [0]);
    }

    fn reshape_flat(x: FloatTensor<Flex>) -> FloatTensor<Flex> {
        let n = x.shape().num_elements();
        <Flex as burn::tensor::ops::FloatTensorOps<Flex>>::float_reshape(x, Shape::new([n]))
    }
}
