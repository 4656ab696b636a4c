//! The self-attention encoder: the input projected to `d_model`, positions
//! added (or given to the scores, for relative positions), then N blocks of
//! multi-head self-attention and a feed-forward layer, each with a residual
//! connection. Pre-norm blocks (the default) normalise each branch's input
//! and end with a final LayerNorm; post-norm blocks (the original
//! Transformer's, and TENER's) normalise after each residual sum and need
//! no final one.
//!
//! Built with cross-attention ([`AttentionConfig::init_cross`]), every block
//! is a cross-encoder block: self-attention over the sequence (a context),
//! then cross-attention to a second encoded sequence (a question), then
//! the feed-forward layer, each pre-norm with a residual connection.

use crate::attention::{AttentionImpl, AttentionPlan, CrossAttention, MultiHeadAttention, MultiHeadConfig};
use crate::dropout::Dropout;
use crate::linear::per_token;
use crate::ops::SeqBackend;
use crate::positional::{absolute_sinusoids, LearnedPositions, Position};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AttentionConfig {
    /// Model size; the input features are projected to it.
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    /// Size of each head; 0 means `d_model / heads`.
    pub head_dim: usize,
    /// Hidden size of the feed-forward layer.
    pub ffn: usize,
    /// Dropout on residual branches and the feed-forward hidden layer.
    pub dropout: f64,
    /// Dropout on the attention weights.
    pub attention_dropout: f64,
    pub position: Position,
    /// Table size for learned positions.
    pub max_len: usize,
    /// Divide scores by √head_dim.
    pub scaled: bool,
    /// Attention implementation: "dense", "chunked" or "local".
    #[serde(rename = "impl")]
    pub implementation: AttentionImpl,
    /// Keys per block for chunked attention.
    pub block: usize,
    /// Half-width of the window for local attention (each token sees ±window).
    pub window: usize,
    /// Where the LayerNorms sit: "pre" (each branch's input, and once at the
    /// end) or "post" (after each residual sum, as TENER).
    pub norm: Norm,
}

/// Where a block's LayerNorms sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Norm {
    /// `x + f(LN(x))` for each branch `f`, and `LN` once after the last
    /// block (Xiong et al. 2020; trains without warm-up).
    #[default]
    Pre,
    /// `LN(x + f(x))` for each branch (Vaswani et al. 2017; TENER).
    Post,
}

impl Default for AttentionConfig {
    fn default() -> Self {
        AttentionConfig {
            d_model: 256,
            layers: 2,
            heads: 4,
            head_dim: 0,
            ffn: 1024,
            dropout: 0.1,
            attention_dropout: 0.1,
            position: Position::Sinusoidal,
            max_len: 512,
            scaled: true,
            implementation: AttentionImpl::Dense,
            block: 64,
            window: 16,
            norm: Norm::Pre,
        }
    }
}

impl AttentionConfig {
    pub fn head_dim(&self) -> usize {
        if self.head_dim > 0 {
            self.head_dim
        } else {
            (self.d_model / self.heads.max(1)).max(1)
        }
    }

    /// Settings that cannot work together.
    pub fn validate(&self) -> Result<(), String> {
        if self.heads == 0 || (self.head_dim == 0 && self.d_model % self.heads != 0) {
            return Err(format!(
                "d_model ({}) must be a multiple of heads ({}), or set head_dim",
                self.d_model, self.heads
            ));
        }
        if self.implementation == AttentionImpl::Chunked && self.position.biases_scores() {
            return Err(format!(
                "impl = \"chunked\" does not support position = \"{}\" (a term of the attention scores); use \"local\" or \"dense\", or position = \"rope\"",
                self.position.as_str()
            ));
        }
        if self.position == Position::Rope && self.head_dim() % 2 != 0 {
            return Err(format!(
                "position = \"rope\" turns pairs of dimensions: the head size ({}) must be even",
                self.head_dim()
            ));
        }
        Ok(())
    }

    pub fn init<B: Backend>(&self, d_input: usize, device: &B::Device) -> AttentionEncoder<B> {
        self.build(d_input, false, device)
    }

    /// An encoder whose blocks also attend to a memory sequence (see the
    /// module docs): [`AttentionEncoder::forward_with_memory`].
    pub fn init_cross<B: Backend>(&self, d_input: usize, device: &B::Device) -> AttentionEncoder<B> {
        self.build(d_input, true, device)
    }

    fn build<B: Backend>(&self, d_input: usize, cross: bool, device: &B::Device) -> AttentionEncoder<B> {
        let mh = MultiHeadConfig {
            d_query: self.d_model,
            d_key: self.d_model,
            heads: self.heads.max(1),
            head_dim: self.head_dim(),
            dropout: self.attention_dropout,
            position: self.position,
            scaled: self.scaled,
        };
        let blocks = (0..self.layers.max(1))
            .map(|_| Block {
                norm1: LayerNormConfig::new(self.d_model).init(device),
                attention: mh.init(device),
                cross: cross.then(|| CrossLayer {
                    norm: LayerNormConfig::new(self.d_model).init(device),
                    attention: mh.init_cross(device),
                }),
                norm2: LayerNormConfig::new(self.d_model).init(device),
                ff1: LinearConfig::new(self.d_model, self.ffn).init(device),
                ff2: LinearConfig::new(self.ffn, self.d_model).init(device),
                dropout: Dropout::new(self.dropout),
                post_norm: self.norm == Norm::Post,
            })
            .collect();
        AttentionEncoder {
            input: LinearConfig::new(d_input, self.d_model).init(device),
            learned: (self.position == Position::Learned)
                .then(|| LearnedPositions::new(self.max_len, self.d_model, device)),
            blocks,
            norm: (self.norm == Norm::Pre).then(|| LayerNormConfig::new(self.d_model).init(device)),
            dropout: Dropout::new(self.dropout),
            sinusoidal: self.position == Position::Sinusoidal,
            implementation: self.implementation,
            block: self.block.max(1),
            window: self.window.max(1),
        }
    }
}

/// The cross-attention step of a cross-encoder block.
#[derive(Module, Debug)]
pub struct CrossLayer<B: Backend> {
    pub norm: LayerNorm<B>,
    pub attention: CrossAttention<B>,
}

/// A memory sequence to attend to: `[B, Lm, D]` and its mask `[B, Lm]`.
pub type Memory<B> = (Tensor<B, 3>, Tensor<B, 2, Bool>);

#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    pub norm1: LayerNorm<B>,
    pub attention: MultiHeadAttention<B>,
    /// Cross-attention to the memory (cross-encoder blocks only).
    pub cross: Option<CrossLayer<B>>,
    pub norm2: LayerNorm<B>,
    pub ff1: Linear<B>,
    pub ff2: Linear<B>,
    pub dropout: Dropout,
    /// LayerNorm after each residual sum instead of before each branch.
    post_norm: bool,
}

impl<B: Backend> Block<B> {
    /// One block; returns its self-attention weights `[B, H, L, L]` and
    /// cross-attention weights `[B, H, L, Lm]` when asked. With a memory, a
    /// cross-encoder block attends to it after self-attention; a block
    /// without cross-attention ignores it. Each branch `f` is
    /// `x + drop(f(LN(x)))` pre-norm, `LN(x + drop(f(x)))` post-norm.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        memory: Option<&Memory<B>>,
        plan: AttentionPlan,
        want_weights: bool,
    ) -> (Tensor<B, 3>, Option<Tensor<B, 4>>, Option<Tensor<B, 4>>)
    where
        B: SeqBackend,
    {
        let h = self.pre(&self.norm1, x.clone()); // [B, L, D]
        let att = self.attention.forward(h.clone(), h, mask.clone(), plan, want_weights);
        let mut x = self.post(&self.norm1, x + self.dropout.forward(att.context)); // [B, L, D]
        let mut cross_weights = None;
        if let (Some(cross), Some((m, m_mask))) = (&self.cross, memory) {
            let h = self.pre(&cross.norm, x.clone()); // [B, L, D]
            let c = cross.attention.forward(h, mask, m.clone(), m_mask.clone(), plan, want_weights); // [B, L, D]
            x = self.post(&cross.norm, x + self.dropout.forward(c.context));
            cross_weights = c.weights; // [B, H, L, Lm]
        }
        let h = self.pre(&self.norm2, x.clone());
        let h = per_token(&self.ff2, self.dropout.forward(relu(per_token(&self.ff1, h)))); // [B, L, D]
        (self.post(&self.norm2, x + self.dropout.forward(h)), att.weights, cross_weights)
    }

    /// A branch's input: `LN(x)` pre-norm, `x` post-norm.
    fn pre(&self, norm: &LayerNorm<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
        if self.post_norm {
            x
        } else {
            norm.forward(x)
        }
    }

    /// A residual sum: `LN(sum)` post-norm, `sum` pre-norm.
    fn post(&self, norm: &LayerNorm<B>, sum: Tensor<B, 3>) -> Tensor<B, 3> {
        if self.post_norm {
            norm.forward(sum)
        } else {
            sum
        }
    }
}

/// `h [B, L, D] + positions [L, D]` for every sentence, added as one row
/// of `L·D` shared by the `B` rows of `h` viewed as `[B, L·D]`: the
/// broadcast that burn-flex runs as a vectorised row add (broadcast over
/// the first of three dimensions it walks element by element, a twentieth
/// of attention inference).
fn add_positions<B: Backend>(h: Tensor<B, 3>, positions: Tensor<B, 2>) -> Tensor<B, 3> {
    let [b, l, d] = h.dims();
    (h.reshape([b, l * d]) + positions.reshape([1, l * d])).reshape([b, l, d])
}

/// An encoder's output and, when asked, its attention weights per layer.
pub struct Encoded<B: Backend> {
    /// `[B, L, D]`, zero at padding.
    pub h: Tensor<B, 3>,
    /// Self-attention per layer, `[B, H, L, L]`.
    pub attention: Vec<Tensor<B, 4>>,
    /// Cross-attention to the memory per layer, `[B, H, L, Lm]` (a cross
    /// encoder given a memory only).
    pub cross: Vec<Tensor<B, 4>>,
}

#[derive(Module, Debug)]
pub struct AttentionEncoder<B: Backend> {
    pub input: Linear<B>,
    pub learned: Option<LearnedPositions<B>>,
    pub blocks: Vec<Block<B>>,
    /// The final LayerNorm of pre-norm blocks (post-norm blocks end normalised).
    pub norm: Option<LayerNorm<B>>,
    pub dropout: Dropout,
    sinusoidal: bool,
    implementation: AttentionImpl,
    block: usize,
    window: usize,
}

impl<B: Backend> AttentionEncoder<B> {
    /// `x [B, L, D_in]`, `mask [B, L]` → `[B, L, d_model]` (zero at padding)
    /// and, when asked, each layer's attention weights `[B, H, L, L]`.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        want_weights: bool,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>)
    where
        B: SeqBackend,
    {
        let out = self.forward_with_memory(x, mask, None, want_weights);
        (out.h, out.attention)
    }

    /// [`Self::forward`], the blocks of a cross encoder also attending to
    /// `memory` (`[B, Lm, d_model]`, e.g. the encoded question); with
    /// `want_weights`, the cross-attention weights too.
    pub fn forward_with_memory(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        memory: Option<&Memory<B>>,
        want_weights: bool,
    ) -> Encoded<B>
    where
        B: SeqBackend,
    {
        let plan = AttentionPlan { imp: self.implementation, block: self.block, window: self.window, fused: true };
        let mut h = per_token(&self.input, x); // [B, L, D]
        let [b, l, d] = h.dims();
        let device = h.device();
        if self.sinusoidal {
            h = add_positions(h, absolute_sinusoids::<B>(l, d, &device));
        }
        if let Some(p) = &self.learned {
            h = add_positions(h, p.forward(l, &device));
        }
        let mut h = self.dropout.forward(h);
        let (mut attention, mut cross) = (Vec::new(), Vec::new());
        for block in &self.blocks {
            let (next, own, to_memory) = block.forward(h, mask.clone(), memory, plan, want_weights);
            h = next;
            attention.extend(own);
            cross.extend(to_memory);
        }
        let keep = mask.float().unsqueeze_dim::<3>(2).expand([b, l, d]);
        let h = match &self.norm {
            Some(norm) => norm.forward(h),
            None => h,
        };
        Encoded { h: h * keep, attention, cross }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::{Distribution, TensorData};

    type B = Autodiff<Flex>;

    /// Each branch `f` (attention, then feed-forward) is `x + f(LN(x))`
    /// pre-norm and `LN(x + f(x))` post-norm, with the block's own layers and
    /// no dropout; a post-norm block's output is normalised (mean 0, variance
    /// 1 per token with the initial LayerNorm), a pre-norm one's is not; and
    /// only the pre-norm encoder ends with a LayerNorm of its own.
    #[test]
    fn pre_and_post_norm_blocks_compute_their_formulas() {
        let device = Default::default();
        let x = Tensor::<B, 3>::random([2, 5, 8], Distribution::Normal(0.0, 1.0), &device);
        let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(vec![true; 10], [2, 5]), &device);
        for norm in [Norm::Pre, Norm::Post] {
            let cfg = AttentionConfig {
                d_model: 8,
                layers: 1,
                heads: 2,
                ffn: 16,
                dropout: 0.0,
                attention_dropout: 0.0,
                position: Position::Relative,
                scaled: false,
                norm,
                ..Default::default()
            };
            let enc = cfg.init::<B>(8, &device);
            assert_eq!(enc.norm.is_some(), norm == Norm::Pre, "{norm:?}: final LayerNorm");
            let block = &enc.blocks[0];
            let plan = AttentionPlan::dense();
            let (out, _, _) = block.forward(x.clone(), mask.clone(), None, plan, false); // [2, 5, 8]
            let att = |h: Tensor<B, 3>| block.attention.forward(h.clone(), h, mask.clone(), plan, false).context;
            let ffn = |h: Tensor<B, 3>| per_token(&block.ff2, relu(per_token(&block.ff1, h)));
            let expected = match norm {
                Norm::Pre => {
                    let y = x.clone() + att(block.norm1.forward(x.clone()));
                    y.clone() + ffn(block.norm2.forward(y))
                }
                Norm::Post => {
                    let y = block.norm1.forward(x.clone() + att(x.clone()));
                    block.norm2.forward(y.clone() + ffn(y))
                }
            };
            out.clone().into_data().assert_approx_eq::<f32>(&expected.into_data(), Default::default());
            let mean = out.clone().mean_dim(2); // [2, 5, 1]
            let var = (out.clone() - mean.clone()).powi_scalar(2).mean_dim(2); // [2, 5, 1]
            let normalised = mean.abs().max().into_scalar() < 1e-4 && (var - 1.0).abs().max().into_scalar() < 1e-3;
            assert_eq!(normalised, norm == Norm::Post, "{norm:?}: output normalised per token");
        }
    }

    #[test]
    fn positions_are_added_to_every_sentence_with_their_gradients() {
        let device = Default::default();
        let h = Tensor::<B, 3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device).require_grad();
        let p = Tensor::<B, 2>::random([4, 5], Distribution::Normal(0.0, 1.0), &device).require_grad();
        let ours = add_positions(h.clone(), p.clone());
        let plain = h.clone() + p.clone().unsqueeze_dim::<3>(0);
        ours.clone().into_data().assert_approx_eq::<f32>(&plain.clone().into_data(), Default::default());
        let w = Tensor::<B, 3>::random([3, 4, 5], Distribution::Normal(0.0, 1.0), &device);
        let (g1, g2) = ((ours * w.clone()).sum().backward(), (plain * w).sum().backward());
        h.grad(&g1).unwrap().into_data().assert_approx_eq::<f32>(&h.grad(&g2).unwrap().into_data(), Default::default());
        p.grad(&g1).unwrap().into_data().assert_approx_eq::<f32>(&p.grad(&g2).unwrap().into_data(), Default::default());
    }
}
