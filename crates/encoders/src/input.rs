//! A padded batch as tensors.

use burn::prelude::*;
use burn::tensor::TensorData;
use corpus::batch::PaddedBatch;

/// Everything an encoder reads for one batch.
#[derive(Clone, Debug)]
pub struct TaggerInput<B: Backend> {
    /// `[B, L]` word ids.
    pub words: Tensor<B, 2, Int>,
    /// `[B, L, W]` character ids.
    pub chars: Tensor<B, 3, Int>,
    /// `[B, L]` capitalisation classes.
    pub caps: Tensor<B, 2, Int>,
    /// `[B, L]`, true at real tokens.
    pub mask: Tensor<B, 2, Bool>,
    /// Tokens per sentence (the mask's row sums, kept on the host).
    pub lengths: Vec<usize>,
    /// The sentences' questions as a batch of their own, for
    /// question-conditioned tagging.
    pub question: Option<Box<TaggerInput<B>>>,
}

impl<B: Backend> TaggerInput<B> {
    pub fn from_padded(p: &PaddedBatch, device: &B::Device) -> Self {
        let (b, l, w) = (p.batch, p.len, p.word_len);
        TaggerInput {
            words: Tensor::from_data(TensorData::new(p.words.clone(), [b, l]), device),
            chars: Tensor::from_data(TensorData::new(p.chars.clone(), [b, l, w]), device),
            caps: Tensor::from_data(TensorData::new(p.caps.clone(), [b, l]), device),
            mask: Tensor::from_data(TensorData::new(p.mask.clone(), [b, l]), device),
            lengths: p.lengths.clone(),
            question: p.question.as_ref().map(|q| Box::new(Self::from_padded(q, device))),
        }
    }

    pub fn dims(&self) -> [usize; 2] {
        self.words.dims()
    }
}

/// Gold tags `[B, L]` of a padded batch (0 at padding), if every sentence has them.
pub fn tags_tensor<B: Backend>(p: &PaddedBatch, device: &B::Device) -> Option<Tensor<B, 2, Int>> {
    p.tags.as_ref().map(|t| Tensor::from_data(TensorData::new(t.clone(), [p.batch, p.len]), device))
}
