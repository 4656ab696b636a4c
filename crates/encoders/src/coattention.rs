//! The co-attention encoder of the Dynamic Coattention Network (Xiong,
//! Zhong and Socher, "Dynamic Coattention Networks for Question
//! Answering", ICLR 2017, section 2.2): one affinity matrix between context
//! and question, normalised both ways; the question reads a summary of the
//! context, and each context position reads the question together with
//! those summaries (attention of attention). The result `[c; s_c]` goes
//! to the modelling (the paper's temporal fusion) BiLSTM.
//!
//! Not carried over from the paper: its sentinel vectors (a learned
//! "attend to nothing" column and row) and its dynamic pointing decoder;
//! seqlab's pointer decoder reads the fused context as for every reader.
//!
//! Shapes: `B` batch, `L` context length, `Lq` question length, `D` the
//! contextual encoder's output size. Masks are float, 1 real, 0 padding.

use crate::flow::masked_softmax;
use crate::linear::per_token;
use crate::ops::SeqBackend;
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;

#[derive(Module, Debug)]
pub struct Coattention<B: Backend> {
    /// `D → D`, then tanh: the paper's question projection `Q = tanh(W Q' + b)`,
    /// which lets the question's encoding differ from the context's although
    /// both come from the same encoder.
    pub question: Linear<B>,
}

/// The fused context and the context-to-question weights.
pub struct Coattended<B: Backend> {
    /// `[B, L, 3D]`: `[c; s_c]`.
    pub u: Tensor<B, 3>,
    /// `[B, L, Lq]`: each context position's attention over the question.
    pub c2q: Tensor<B, 3>,
}

impl<B: Backend> Coattention<B> {
    pub fn new(d: usize, device: &B::Device) -> Self {
        Coattention { question: LinearConfig::new(d, d).init(device) }
    }
}

impl<B: SeqBackend> Coattention<B> {
    /// `c [B, L, D]` (zero at padding), `c_mask [B, L]`, `q [B, Lq, D]`,
    /// `q_mask [B, Lq]` → `u [B, L, 3D]` and the context-to-question weights.
    pub fn forward(
        &self,
        c: Tensor<B, 3>,
        c_mask: Tensor<B, 2>,
        q: Tensor<B, 3>,
        q_mask: Tensor<B, 2>,
    ) -> Coattended<B> {
        let q = per_token(&self.question, q).tanh(); // [B, Lq, D]
        let affinity = c.clone().matmul(q.clone().swap_dims(1, 2)); // [B, L, Lq]

        // Each question word's attention over the context, and its summary of it.
        let q2c = masked_softmax(affinity.clone().swap_dims(1, 2), c_mask); // [B, Lq, L]
        let s_q = q2c.matmul(c.clone()); // [B, Lq, D]

        // Each context position's attention over the question, reading the
        // question word and that word's summary of the context.
        let c2q = masked_softmax(affinity, q_mask); // [B, L, Lq]
        let s_c = c2q.clone().matmul(Tensor::cat(vec![q, s_q], 2)); // [B, L, 2D]
        Coattended { u: Tensor::cat(vec![c, s_c], 2), c2q } // [B, L, 3D]
    }
}
