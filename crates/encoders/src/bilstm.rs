//! A bidirectional LSTM that respects sentence lengths.
//!
//! burn-nn's `BiLstm` takes no lengths, so in a padded batch its backward
//! direction would start on padding. Here the backward direction runs from
//! the last position to the first and its state is reset to zero at every
//! padded position, so for each sentence it effectively starts at its own
//! last real token: a sentence's output is the same alone and inside a
//! padded batch. (The forward direction reads real tokens first anyway.)
//!
//! The recurrence works on one tensor per time step: Burn's autodiff gives a
//! slice of a big tensor a gradient as large as the whole tensor, so slicing
//! `[B, L, ·]` at every step would make the backward pass quadratic in `L`.
//! Layers pass per-step tensors to each other, and only the input features
//! are sliced once per step.

use crate::dropout::Dropout;
use burn::module::Param;
use burn::nn::{Linear, LinearConfig};
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
        BiLstm { layers, dropout: Dropout::new(self.dropout) }
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
        let [b, l, d] = x.dims();
        let maskf = mask.float(); // [B, L]
        let masks: Vec<Tensor<B, 2>> = (0..l).map(|t| maskf.clone().slice([0..b, t..t + 1])).collect(); // [B, 1] each
        let mut steps: Vec<Tensor<B, 2>> =
            (0..l).map(|t| x.clone().slice([0..b, t..t + 1, 0..d]).reshape([b, d])).collect();
        for (i, layer) in self.layers.iter().enumerate() {
            if i > 0 {
                steps = steps.into_iter().map(|s| self.dropout.forward(s)).collect();
            }
            let (fwd, bwd) = layer.forward(&steps, &masks);
            steps = fwd.into_iter().zip(bwd).map(|(f, b)| Tensor::cat(vec![f, b], 1)).collect();
            // [B, 2H] each
        }
        let y = Tensor::stack::<3>(steps, 1); // [B, L, 2H]
        let h2 = y.dims()[2];
        // Past a sentence's end the forward states ran on over padding: zero them.
        self.dropout.forward(y * maskf.unsqueeze_dim::<3>(2).expand([b, l, h2]))
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

    /// One step: `x [B, D]`, state `(h, c)` `[B, H]` each → new `(h, c)`.
    /// `scale [1, 4H]` is 1 on the sigmoid gates and 2 on the cell gate, so
    /// that all four activations are one sigmoid over the contiguous gate
    /// pre-activations, with tanh(x) = 2·sigmoid(2x) − 1 for the cell gate
    /// (one pass instead of four over strided column slices; see [`gate_scale`]).
    fn step(
        &self,
        x: Tensor<B, 2>,
        h: Tensor<B, 2>,
        c: Tensor<B, 2>,
        w: &Tensor<B, 2>,
        scale: &Tensor<B, 2>,
    ) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let [b, hd] = h.dims();
        let gates = self.input.forward(x) + h.matmul(w.clone()); // [B, 4H]
        let act = sigmoid(gates * scale.clone()); // [B, 4H]
        let i = act.clone().slice([0..b, 0..hd]);
        let f = act.clone().slice([0..b, hd..2 * hd]);
        let g = act.clone().slice([0..b, 2 * hd..3 * hd]).mul_scalar(2.0).sub_scalar(1.0); // tanh
        let o = act.slice([0..b, 3 * hd..4 * hd]);
        let c = f * c + i * g;
        let h = o * tanh(c.clone());
        (h, c)
    }
}

/// `[1, 4H]`: 1 for the input, forget and output gates, 2 for the cell gate.
fn gate_scale<B: Backend>(hidden: usize, device: &B::Device) -> Tensor<B, 2> {
    let v: Vec<f32> = (0..4 * hidden).map(|j| if (2 * hidden..3 * hidden).contains(&j) { 2.0 } else { 1.0 }).collect();
    Tensor::from_data(burn::tensor::TensorData::new(v, [1, 4 * hidden]), device)
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

    /// Per-step inputs `[B, D]` and masks `[B, 1]` → per-step outputs of
    /// each direction, `[B, H]`, in reading order.
    pub fn forward(&self, steps: &[Tensor<B, 2>], masks: &[Tensor<B, 2>]) -> (Vec<Tensor<B, 2>>, Vec<Tensor<B, 2>>) {
        let l = steps.len();
        let (b, hd) = (steps[0].dims()[0], self.forward.recurrent.dims()[0]);
        let device = steps[0].device();
        let zeros = || Tensor::<B, 2>::zeros([b, hd], &device);
        let (wf, wb) = (self.forward.recurrent.val(), self.backward.recurrent.val());
        let scale = gate_scale::<B>(hd, &device);
        let (mut hf, mut cf) = (zeros(), zeros());
        let (mut hb, mut cb) = (zeros(), zeros());
        let mut fwd = Vec::with_capacity(l);
        let mut bwd = Vec::with_capacity(l);
        for t in 0..l {
            (hf, cf) = self.forward.step(steps[t].clone(), hf, cf, &wf, &scale);
            fwd.push(hf.clone());
            // Backward direction at position l−1−t; zero state on padding.
            let r = l - 1 - t;
            let (h, c) = self.backward.step(steps[r].clone(), hb, cb, &wb, &scale);
            hb = h * masks[r].clone();
            cb = c * masks[r].clone();
            bwd.push(hb.clone());
        }
        bwd.reverse();
        (fwd, bwd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    type B = NdArray;

    /// The one-sigmoid step against the textbook cell: i, f, o = σ(·),
    /// g = tanh(·) on PyTorch's gate order, c' = f·c + i·g, h' = o·tanh(c').
    #[test]
    fn step_is_the_textbook_lstm_cell() {
        let device = Default::default();
        B::seed(&device, 11);
        let (b, d, hd) = (3, 5, 4);
        let dir = LstmDirection::<B>::new(d, hd, &device);
        let x = Tensor::<B, 2>::random([b, d], Distribution::Normal(0.0, 1.0), &device);
        let h = Tensor::<B, 2>::random([b, hd], Distribution::Normal(0.0, 1.0), &device);
        let c = Tensor::<B, 2>::random([b, hd], Distribution::Normal(0.0, 1.0), &device);
        let w = dir.recurrent.val();
        let (h1, c1) = dir.step(x.clone(), h.clone(), c.clone(), &w, &gate_scale::<B>(hd, &device));
        let gates = dir.input.forward(x) + h.matmul(w);
        let part = |k: usize| gates.clone().slice([0..b, k * hd..(k + 1) * hd]);
        let (i, f, g, o) = (sigmoid(part(0)), sigmoid(part(1)), tanh(part(2)), sigmoid(part(3)));
        let c2 = f * c + i * g;
        let h2 = o * tanh(c2.clone());
        let tol = burn::tensor::Tolerance::absolute(1e-5);
        c1.into_data().assert_approx_eq::<f32>(&c2.into_data(), tol);
        h1.into_data().assert_approx_eq::<f32>(&h2.into_data(), tol);
    }
}
