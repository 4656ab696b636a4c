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
    use crate::ops::TrainBackend;
    use burn::backend::{Autodiff, Flex, NdArray};
    use burn::nn::LinearConfig;
    use burn::tensor::Distribution;

    /// On NdArray the graph's linear node runs Burn's backward passes; on
    /// burn-flex, the host GEMMs of `ops::linear_backward`.
    #[test]
    fn per_token_matches_burns_linear_in_values_and_gradients() {
        matches_burns::<Autodiff<NdArray>>();
        matches_burns::<Autodiff<Flex>>();
    }

    /// Trained on burn-flex, the layer gives Burn's values and gradients to
    /// the last bit, with K long enough for the GEMM to sum it in several
    /// blocks: a seed trains the same run as before the host backward.
    #[test]
    fn trained_on_flex_it_is_burns_linear_to_the_bit() {
        type A = Autodiff<Flex>;
        let device = Default::default();
        let linear = LinearConfig::new(1100, 7).init::<A>(&device);
        let x = Tensor::<A, 3>::random([2, 3, 1100], Distribution::Normal(0.0, 1.0), &device).require_grad();
        // Burn's linear on the rows, as `per_token` called it before (Burn's
        // rank-3 linear sums the weight's gradient per batch first).
        let theirs = linear.forward(x.clone().reshape([6, 1100])).reshape([2, 3, 7]);
        let ours = per_token(&linear, x.clone());
        let bits = |t: Tensor<Flex, 3>| {
            t.into_data().to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect::<Vec<_>>()
        };
        assert_eq!(bits(ours.clone().inner()), bits(theirs.clone().inner()), "values");
        let w = Tensor::<A, 3>::random([2, 3, 7], Distribution::Normal(0.0, 1.0), &device);
        let (g1, g2) = ((ours * w.clone()).sum().backward(), (theirs * w).sum().backward());
        assert_eq!(bits(x.grad(&g1).unwrap()), bits(x.grad(&g2).unwrap()), "dx");
        let dw = |g| linear.weight.grad(g).unwrap().unsqueeze::<3>();
        assert_eq!(bits(dw(&g1)), bits(dw(&g2)), "dW");
        let db = |g| linear.bias.as_ref().unwrap().grad(g).unwrap().unsqueeze::<3>();
        assert_eq!(bits(db(&g1)), bits(db(&g2)), "db");
    }

    fn matches_burns<B: TrainBackend>() {
        let device = Default::default();
        // With and without a bias; x tracked or a constant (the weight's
        // gradient only).
        for (bias, tracked) in [(true, true), (false, true), (true, false)] {
            let linear = LinearConfig::new(6, 5).with_bias(bias).init::<B>(&device);
            let x = Tensor::<B, 3>::random([3, 4, 6], Distribution::Normal(0.0, 1.0), &device);
            let x = if tracked { x.require_grad() } else { x };
            let ours = per_token(&linear, x.clone());
            let theirs = linear.forward(x.clone());
            ours.clone().into_data().assert_approx_eq::<f32>(&theirs.clone().into_data(), Default::default());
            let w = Tensor::<B, 3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
            let g1 = (ours * w.clone()).sum().backward();
            let g2 = (theirs * w).sum().backward();
            match (x.grad(&g1), x.grad(&g2)) {
                (Some(a), Some(b)) => a.into_data().assert_approx_eq::<f32>(&b.into_data(), Default::default()),
                (None, None) => assert!(!tracked),
                _ => panic!("x's gradient on one side only"),
            }
            let (w1, w2) = (linear.weight.grad(&g1).unwrap(), linear.weight.grad(&g2).unwrap());
            w1.into_data().assert_approx_eq::<f32>(&w2.into_data(), Default::default());
            if let Some(b) = &linear.bias {
                b.grad(&g1)
                    .unwrap()
                    .into_data()
                    .assert_approx_eq::<f32>(&b.grad(&g2).unwrap().into_data(), Default::default());
            }
        }
    }
}
