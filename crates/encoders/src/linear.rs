//! A linear layer applied to every token of a batch as one matrix product.
//!
//! burn's `Linear` on a `[B, L, D]` input runs a batched product: B small
//! `[L, D]·[D, O]` products forward, and in the backward pass a `[B, D, O]`
//! weight gradient (one `[D, L]·[L, O]` product per sentence) that is then
//! summed over B. Flattening the tokens to one `[B·L, D]` matrix gives the
//! same values with one large product each way and no `[B, D, O]`
//! intermediate: for the reference attention tagger (batch 32) this made a
//! training step several times faster.
//!
//! The product itself is [`SeqBackend::fused_linear`]: Burn's `linear` by
//! default; on burn-flex ([`crate::ops::flex_linear`]) one GEMM that
//! accumulates into rows pre-filled with the bias.

use crate::ops::SeqBackend;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;

/// `x [B, L, D]` → `[B, L, O]`, as `linear.forward(x)` computes it.
pub fn per_token<B: SeqBackend>(linear: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [b, l, d] = x.dims();
    let x = x.reshape([b * l, d]).into_primitive().tensor(); // [B·L, D]
    let w = linear.weight.val().into_primitive().tensor(); // [D, O]
    let bias = linear.bias.as_ref().map(|b| b.val().into_primitive().tensor()); // [O]
    let y = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(B::fused_linear(x, w, bias))); // [B·L, O]
    let o = y.dims()[1];
    y.reshape([b, l, o])
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, NdArray};
    use burn::nn::LinearConfig;
    use burn::tensor::Distribution;

    type B = Autodiff<NdArray>;

    #[test]
    fn per_token_matches_burns_linear_in_values_and_gradients() {
        let device = Default::default();
        let linear = LinearConfig::new(6, 5).init::<B>(&device);
        let x = Tensor::<B, 3>::random([3, 4, 6], Distribution::Normal(0.0, 1.0), &device).require_grad();
        let ours = per_token(&linear, x.clone());
        let theirs = linear.forward(x.clone());
        ours.clone().into_data().assert_approx_eq::<f32>(&theirs.clone().into_data(), Default::default());
        let w = Tensor::<B, 3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        let g1 = (ours * w.clone()).sum().backward();
        let g2 = (theirs * w).sum().backward();
        x.grad(&g1).unwrap().into_data().assert_approx_eq::<f32>(&x.grad(&g2).unwrap().into_data(), Default::default());
        let (w1, w2) = (linear.weight.grad(&g1).unwrap(), linear.weight.grad(&g2).unwrap());
        w1.into_data().assert_approx_eq::<f32>(&w2.into_data(), Default::default());
        let (b1, b2) =
            (linear.bias.as_ref().unwrap().grad(&g1).unwrap(), linear.bias.as_ref().unwrap().grad(&g2).unwrap());
        b1.into_data().assert_approx_eq::<f32>(&b2.into_data(), Default::default());
    }
}
