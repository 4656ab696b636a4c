//! Input features: word embeddings (random or pretrained), a character CNN
//! with max-pooling (Ma & Hovy 2016), and a capitalisation embedding.

use crate::dropout::Dropout;
use crate::input::TaggerInput;
use burn::module::Param;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Embedding, EmbeddingConfig, PaddingConfig1d};
use burn::prelude::*;
use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

/// Feature sizes. Set a size to 0 to turn that feature off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesConfig {
    /// Word embedding size (ignored when pretrained vectors set it).
    pub word_dim: usize,
    /// Character embedding size; 0 turns the character CNN off.
    pub char_dim: usize,
    /// Character CNN filters (output size).
    pub char_filters: usize,
    /// Character CNN width.
    pub char_kernel: usize,
    /// Capitalisation embedding size; 0 turns it off.
    pub caps_dim: usize,
    /// Dropout on the concatenated features.
    pub dropout: f64,
}

impl Default for FeaturesConfig {
    fn default() -> Self {
        FeaturesConfig { word_dim: 100, char_dim: 30, char_filters: 50, char_kernel: 3, caps_dim: 0, dropout: 0.5 }
    }
}

impl FeaturesConfig {
    /// Size of the feature vector of one token.
    pub fn output_dim(&self) -> usize {
        self.word_dim + if self.char_dim > 0 { self.char_filters } else { 0 } + self.caps_dim
    }

    /// Builds the module. `pretrained`, if given, is a `[words, word_dim]`
    /// row-major matrix that initialises the word embeddings.
    pub fn init<B: Backend>(
        &self,
        words: usize,
        chars: usize,
        pretrained: Option<Vec<f32>>,
        device: &B::Device,
    ) -> Features<B> {
        let mut word = EmbeddingConfig::new(words, self.word_dim).init(device);
        if let Some(w) = pretrained {
            assert_eq!(w.len(), words * self.word_dim, "pretrained matrix has the wrong size");
            word.weight = Param::from_tensor(Tensor::from_data(TensorData::new(w, [words, self.word_dim]), device));
        }
        let (char_emb, char_cnn) = if self.char_dim > 0 {
            (
                Some(EmbeddingConfig::new(chars, self.char_dim).init(device)),
                Some(
                    Conv1dConfig::new(self.char_dim, self.char_filters, self.char_kernel)
                        .with_padding(PaddingConfig1d::Same)
                        .init(device),
                ),
            )
        } else {
            (None, None)
        };
        let caps =
            (self.caps_dim > 0).then(|| EmbeddingConfig::new(corpus::batch::CAPS_CLASSES, self.caps_dim).init(device));
        Features { word, char_emb, char_cnn, caps, dropout: Dropout::new(self.dropout) }
    }
}

#[derive(Module, Debug)]
pub struct Features<B: Backend> {
    pub word: Embedding<B>,
    pub char_emb: Option<Embedding<B>>,
    pub char_cnn: Option<Conv1d<B>>,
    pub caps: Option<Embedding<B>>,
    pub dropout: Dropout,
}

impl<B: Backend> Features<B> {
    /// `[B, L, D]` features, zero at padded positions.
    pub fn forward(&self, input: &TaggerInput<B>) -> Tensor<B, 3> {
        let [b, l] = input.dims();
        let mut parts = vec![self.word.forward(input.words.clone())]; // [B, L, Dw]
        if let (Some(emb), Some(cnn)) = (&self.char_emb, &self.char_cnn) {
            parts.push(char_features(emb, cnn, input.chars.clone()));
        }
        if let Some(caps) = &self.caps {
            parts.push(caps.forward(input.caps.clone()));
        }
        let x = Tensor::cat(parts, 2); // [B, L, D]
        let d = x.dims()[2];
        let keep = input.mask.clone().float().unsqueeze_dim::<3>(2).expand([b, l, d]);
        self.dropout.forward(x * keep)
    }
}

/// Character CNN: embed, convolve over each word's characters, max-pool.
/// Padding characters are zero vectors (as the CNN's own edge padding), and
/// the max only covers real characters, so a word's features do not depend
/// on how long the other words of its batch are.
fn char_features<B: Backend>(emb: &Embedding<B>, cnn: &Conv1d<B>, chars: Tensor<B, 3, Int>) -> Tensor<B, 3> {
    let [b, l, w] = chars.dims();
    let flat = chars.reshape([b * l, w]); // [N, W], N = B·L
    let real = flat.clone().greater_elem(0); // [N, W]
    let e = emb.forward(flat); // [N, W, C]
    let c = e.dims()[2];
    let e = e * real.clone().float().unsqueeze_dim::<3>(2).expand([b * l, w, c]);
    let conv = cnn.forward(e.swap_dims(1, 2)); // [N, F, W]
    let f = conv.dims()[1];
    let pad = real.clone().bool_not().unsqueeze_dim::<3>(1).expand([b * l, f, w]);
    let pooled = conv.mask_fill(pad, -1.0e4).max_dim(2).squeeze_dim::<2>(2); // [N, F]
                                                                             // Words with no characters (padding tokens) get zeros, not −1e4.
    let any = real.any_dim(1).float().expand([b * l, f]); // [N, F]
    (pooled * any).reshape([b, l, f])
}
