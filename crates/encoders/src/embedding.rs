//! An embedding lookup whose gradient is [`SeqBackend::embedding_grad`]:
//! Burn's `Embedding::forward` values, and on burn-flex a dense gradient
//! written in one pass instead of three ([`crate::ops::embedding`]).

use crate::ops::SeqBackend;
use burn::nn::Embedding;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;

/// `ids [B, L]` → `[B, L, D]`, as `emb.forward(ids)` computes it.
pub fn lookup<B: SeqBackend>(emb: &Embedding<B>, ids: Tensor<B, 2, Int>) -> Tensor<B, 3> {
    let table = emb.weight.val().into_primitive().tensor(); // [V, D]
    Tensor::from_primitive(TensorPrimitive::Float(B::embedding_lookup(table, ids.into_primitive())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::TrainBackend;
    use burn::backend::{Autodiff, Flex, NdArray};
    use burn::nn::EmbeddingConfig;
    use burn::tensor::{Distribution, TensorData};

    /// Values and the table's gradient are `Embedding::forward`'s, bit for
    /// bit (repeated ids included), on NdArray (Burn's gradient) and on
    /// burn-flex (the host pass); without autodiff, the same values.
    #[test]
    fn lookup_is_burns_embedding_to_the_bit() {
        same_as_burns::<Autodiff<NdArray>>();
        same_as_burns::<Autodiff<Flex>>();
        let device = Default::default();
        let emb = EmbeddingConfig::new(9, 5).init::<Flex>(&device);
        let ids = Tensor::<Flex, 2, Int>::from_data(TensorData::new(vec![3i32, 3, 0, 8], [2, 2]), &device);
        assert_eq!(lookup(&emb, ids.clone()).into_data(), emb.forward(ids).into_data());
    }

    fn same_as_burns<B: TrainBackend>() {
        let device = Default::default();
        let emb = EmbeddingConfig::new(11, 6).init::<B>(&device);
        let ids: Vec<i64> = (0..4 * 7).map(|i| (i * 5 % 11) as i64 % 4 + (i % 3) as i64).collect();
        let ids = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [4, 7]).convert::<B::IntElem>(), &device);
        let w = Tensor::<B, 3>::random([4, 7, 6], Distribution::Normal(0.0, 1.0), &device);
        let (ours, theirs) = (lookup(&emb, ids.clone()), emb.forward(ids));
        assert_eq!(ours.clone().into_data(), theirs.clone().into_data());
        let (g1, g2) = ((ours * w.clone()).sum().backward(), (theirs * w).sum().backward());
        assert_eq!(emb.weight.grad(&g1).unwrap().into_data(), emb.weight.grad(&g2).unwrap().into_data());
    }
}
