//! A bidirectional LSTM that respects sentence lengths.
//!
//! burn-nn's `BiLstm` takes no lengths, so in a padded batch its backward
//! direction would start on padding. Here each sentence is reversed within
//! its own length before the backward pass (and its output reversed back),
//! so both directions read real tokens first and padding last: a sentence's
//! output is the same alone and inside a padded batch.
//!
//! Both directions run in one loop as a batch of two (`[2, B, ·]`), and the
//! input projections of all time steps are one matmul up front; only
//! `h · W_hh` stays in the recurrence.

use crate::input::reverse_index;
use burn::module::{Param, ParamId};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::{sigmoid, tanh};
use burn::tensor::Distribution;
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
        BiLstm { layers, dropout: DropoutConfig::new(self.dropout).init() }
    }
}

#[derive(Module, Debug)]
pub struct BiLstm<B: Backend> {
    pub layers: Vec<BiLstmLayer<B>>,
    pub dropout: Dropout,
}

impl<B: Backend> BiLstm<B> {
    /// `x [B, L, D]`, `mask [B, L]` → `[B, L, 2H]`, zero at padding.
    pub fn forward(&self, x: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let rev = reverse_index(&mask);
        let mut h = x;
        for (i, layer) in self.layers.iter().enumerate() {
            if i > 0 {
                h = self.dropout.forward(h);
            }
            h = layer.forward(h, &mask, &rev);
        }
        self.dropout.forward(h)
    }
}

/// One bidirectional layer: gates in PyTorch's order (input, forget, cell, output).
#[derive(Module, Debug)]
pub struct BiLstmLayer<B: Backend> {
    /// `D → 8H`: the input projections of both directions, biases included.
    pub input: Linear<B>,
    /// `[2, H, 4H]`: the recurrent weights of each direction.
    pub recurrent: Param<Tensor<B, 3>>,
    hidden: usize,
}

impl<B: Backend> BiLstmLayer<B> {
    /// PyTorch's initialisation: every weight and bias uniform in ±1/√H.
    pub fn new(d_input: usize, hidden: usize, device: &B::Device) -> Self {
        let k = 1.0 / (hidden as f64).sqrt();
        let init = burn::nn::Initializer::Uniform { min: -k, max: k };
        let input = LinearConfig::new(d_input, 8 * hidden).with_initializer(init).init(device);
        let recurrent = Tensor::random([2, hidden, 4 * hidden], Distribution::Uniform(-k, k), device);
        BiLstmLayer { input, recurrent: Param::initialized(ParamId::new(), recurrent), hidden }
    }

    pub fn forward(&self, x: Tensor<B, 3>, mask: &Tensor<B, 2, Bool>, rev: &Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [b, l, _] = x.dims();
        let h4 = 4 * self.hidden;
        let device = x.device();
        // Input projections for every step at once: [B, L, 8H].
        let proj = self.input.forward(x);
        let fwd = proj.clone().slice([0..b, 0..l, 0..h4]); // [B, L, 4H]
        let bwd = gather_time(proj.slice([0..b, 0..l, h4..2 * h4]), rev); // reversed within length
                                                                          // [2, B, L, 4H] → [L, 2, B, 4H]: one contiguous slab per step.
        let steps = Tensor::stack::<4>(vec![fwd, bwd], 0).permute([2, 0, 1, 3]);
        let w = self.recurrent.val(); // [2, H, 4H]
        let hd = self.hidden;
        let mut h = Tensor::<B, 3>::zeros([2, b, hd], &device);
        let mut c = Tensor::<B, 3>::zeros([2, b, hd], &device);
        let mut outs = Vec::with_capacity(l);
        for t in 0..l {
            let x_t = steps.clone().slice([t..t + 1]).squeeze_dim::<3>(0); // [2, B, 4H]
            let gates = x_t + h.matmul(w.clone()); // [2, B, 4H]
            let i = sigmoid(gates.clone().slice([0..2, 0..b, 0..hd]));
            let f = sigmoid(gates.clone().slice([0..2, 0..b, hd..2 * hd]));
            let g = tanh(gates.clone().slice([0..2, 0..b, 2 * hd..3 * hd]));
            let o = sigmoid(gates.slice([0..2, 0..b, 3 * hd..4 * hd]));
            c = f * c + i * g;
            h = o * tanh(c.clone());
            outs.push(h.clone());
        }
        let out = Tensor::stack::<4>(outs, 2); // [2, B, L, H]
        let fwd = out.clone().slice([0..1]).squeeze_dim::<3>(0); // [B, L, H]
        let bwd = gather_time(out.slice([1..2]).squeeze_dim::<3>(0), rev); // back to reading order
        let y = Tensor::cat(vec![fwd, bwd], 2); // [B, L, 2H]
                                                // Past a sentence's end the forward states ran on over padding: zero them.
        y * mask.clone().float().unsqueeze_dim::<3>(2).expand([b, l, 2 * hd])
    }
}

/// Reorders the time axis of `x [B, L, D]` by `index [B, L]`.
fn gather_time<B: Backend>(x: Tensor<B, 3>, index: &Tensor<B, 2, Int>) -> Tensor<B, 3> {
    let [b, l, d] = x.dims();
    x.gather(1, index.clone().unsqueeze_dim::<3>(2).expand([b, l, d]))
}
