//! A bidirectional LSTM that respects sentence lengths.
//!
//! burn-nn's `BiLstm` takes no lengths, so in a padded batch its backward
//! direction would start on padding. Here the backward direction runs from
//! the last position to the first and its state is reset to zero at every
//! padded position, so for each sentence it effectively starts at its own
//! last real token: a sentence's output is the same alone and inside a
//! padded batch. (The forward direction reads real tokens first anyway.)
//!
//! The recurrence itself is one operation with a hand-written backward
//! pass ([`SeqBackend::lstm_scan`], [`crate::ops::lstm_scan`]): the input
//! projections of all positions are one matrix product per direction, and
//! only `h·W_hh` stays in the loop.

use crate::dropout::Dropout;
use crate::linear::per_token;
use crate::ops::SeqBackend;
use burn::module::Param;
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::{Distribution, TensorPrimitive};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BiLstmConfig {
    /// Hidden size per direction (the output is twice this).
    pub hidden: usize,
    pub layers: usize,
    /// Dropout between layers and on the output.
    pub dropout: f64,
}

impl Default for BiLstmConfig {
    fn default() -> Self {
        BiLstmConfig { hidden: 200, layers: 1, dropout: 0.5 }
    }
}

impl BiLstmConfig {
    pub fn output_dim(&self) -> usize {
        2 * self.hidden
    }

    pub fn init<B: Backend>(&self, d_input: usize, device: &B::Device) -> BiLstm<B> {
        let layers = (0..self.layers.max(1))
            .map(|i| {
                let d_in = if i == 0 { d_input } else { 2 * self.hidden };
                BiLstmLayer::new(d_in, self.hidden, device)
            })
            .collect();
        BiLstm { layers, dropout: Dropout::new(self.dropout) }
    }
}

#[derive(Module, Debug)]
pub struct BiLstm<B: Backend> {
    pub layers: Vec<BiLstmLayer<B>>,
    pub dropout: Dropout,
}

impl<B: SeqBackend> BiLstm<B> {
    /// `x [B, L, D]`, `mask [B, L]` → `[B, L, 2H]`, zero at padding.
    pub fn forward(&self, x: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let maskf = mask.float(); // [B, L]
        let mut y = x;
        for (i, layer) in self.layers.iter().enumerate() {
            if i > 0 {
                y = self.dropout.forward(y);
            }
            y = layer.forward(y, maskf.clone()); // [B, L, 2H]
        }
        self.dropout.forward(y)
    }
}

/// One direction of one layer; gates in PyTorch's order (input, forget, cell, output).
#[derive(Module, Debug)]
pub struct LstmDirection<B: Backend> {
    /// `D → 4H`, with the (single) bias.
    pub input: Linear<B>,
    /// `[H, 4H]`.
    pub recurrent: Param<Tensor<B, 2>>,
}

impl<B: Backend> LstmDirection<B> {
    /// PyTorch's initialisation: every weight and bias uniform in ±1/√H.
    fn new(d_input: usize, hidden: usize, device: &B::Device) -> Self {
        let k = 1.0 / (hidden as f64).sqrt();
        let init = burn::nn::Initializer::Uniform { min: -k, max: k };
        LstmDirection {
            input: LinearConfig::new(d_input, 4 * hidden).with_initializer(init).init(device),
            recurrent: Param::from_tensor(Tensor::random([hidden, 4 * hidden], Distribution::Uniform(-k, k), device)),
        }
    }
}

/// One bidirectional layer.
#[derive(Module, Debug)]
pub struct BiLstmLayer<B: Backend> {
    pub forward: LstmDirection<B>,
    pub backward: LstmDirection<B>,
}

impl<B: Backend> BiLstmLayer<B> {
    pub fn new(d_input: usize, hidden: usize, device: &B::Device) -> Self {
        BiLstmLayer {
            forward: LstmDirection::new(d_input, hidden, device),
            backward: LstmDirection::new(d_input, hidden, device),
        }
    }

    /// `x [B, L, D]`, `mask [B, L]` (1 real, 0 padding) → `[B, L, 2H]`:
    /// the forward direction's states, then the backward direction's.
    pub fn forward(&self, x: Tensor<B, 3>, mask: Tensor<B, 2>) -> Tensor<B, 3>
    where
        B: SeqBackend,
    {
        let xw =
            Tensor::stack::<4>(vec![per_token(&self.forward.input, x.clone()), per_token(&self.backward.input, x)], 0); // [2, B, L, 4H]
        let w = Tensor::stack::<3>(vec![self.forward.recurrent.val(), self.backward.recurrent.val()], 0); // [2, H, 4H]
        let h = lstm_scan(xw, w, mask); // [2, B, L, H]
        let [_, b, l, hd] = h.dims();
        let fwd = h.clone().slice([0..1, 0..b, 0..l, 0..hd]).reshape([b, l, hd]);
        let bwd = h.slice([1..2, 0..b, 0..l, 0..hd]).reshape([b, l, hd]);
        Tensor::cat(vec![fwd, bwd], 2) // [B, L, 2H]
    }
}

/// `h [2, B, L, H]` of both directions of a layer: [`SeqBackend::lstm_scan`]
/// of `xw [2, B, L, 4H]`, `w [2, H, 4H]` and `mask [B, L]`.
fn lstm_scan<B: SeqBackend>(xw: Tensor<B, 4>, w: Tensor<B, 3>, mask: Tensor<B, 2>) -> Tensor<B, 4> {
    let out = B::lstm_scan(xw.into_primitive().tensor(), w.into_primitive().tensor(), mask.into_primitive().tensor());
    Tensor::from_primitive(TensorPrimitive::Float(out))
}
