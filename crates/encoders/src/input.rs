//! A padded batch as tensors: the tokens of its sentences and, for
//! extractive QA, of the questions they are read against.

use crate::ops::SeqBackend;
use burn::prelude::*;
use burn::tensor::TensorData;
use corpus::batch::{Batch, Example, PaddedBatch};

/// The examples `ids` padded into one batch the way backend `B` runs
/// them: to the batch's own longest sentence and word on the CPU backends,
/// up to a few bucket lengths where every new shape costs kernel
/// compilations ([`SeqBackend::shape_buckets`]). Training, inference and
/// the benchmarks all make their batches here.
pub fn pad_batch<B: SeqBackend>(examples: &[Example], ids: &[usize]) -> Batch {
    shaped_for::<B>(Batch::pad(examples, ids))
}

/// `batch` as backend `B` runs it: [`Batch::bucketed`] where
/// [`SeqBackend::shape_buckets`] says so, else as it is.
pub fn shaped_for<B: SeqBackend>(batch: Batch) -> Batch {
    if B::shape_buckets() {
        batch.bucketed()
    } else {
        batch
    }
}

/// One padded batch of token sequences as tensors.
#[derive(Clone, Debug)]
pub struct Tokens<B: Backend> {
    /// `[B, L]` word ids.
    pub words: Tensor<B, 2, Int>,
    /// `[B, L, W]` character ids.
    pub chars: Tensor<B, 3, Int>,
    /// `[B, L]` capitalisation classes.
    pub caps: Tensor<B, 2, Int>,
    /// `[B, L]` character-bigram ids (all padding without bigrams).
    pub bigrams: Tensor<B, 2, Int>,
    /// `[B, L]`, true at real tokens.
    pub mask: Tensor<B, 2, Bool>,
    /// Tokens per sentence (the mask's row sums, kept on the host).
    pub lengths: Vec<usize>,
}

impl<B: Backend> Tokens<B> {
    pub fn from_padded(p: &PaddedBatch, device: &B::Device) -> Self {
        let (b, l, w) = (p.batch, p.len, p.word_len);
        Tokens {
            words: Tensor::from_data(TensorData::new(p.words.clone(), [b, l]), device),
            chars: Tensor::from_data(TensorData::new(p.chars.clone(), [b, l, w]), device),
            caps: Tensor::from_data(TensorData::new(p.caps.clone(), [b, l]), device),
            bigrams: Tensor::from_data(TensorData::new(p.bigrams.clone(), [b, l]), device),
            mask: Tensor::from_data(TensorData::new(p.mask.clone(), [b, l]), device),
            lengths: p.lengths.clone(),
        }
    }

    pub fn dims(&self) -> [usize; 2] {
        self.words.dims()
    }
}

/// Everything a tagger reads for one batch: the sentences to tag and, for
/// extractive QA, the questions they are read against (a batch of their
/// own, same order). Which variant a tagger takes is its question mode.
#[derive(Clone, Debug)]
pub enum TaggerInput<B: Backend> {
    Plain(Tokens<B>),
    Asked {
        context: Tokens<B>,
        question: Tokens<B>,
        /// `[B, L, CUES]` reading cues of the context tokens ([`corpus::qa::cues`]), 0 at padding.
        cues: Tensor<B, 3, Int>,
    },
}

impl<B: Backend> TaggerInput<B> {
    pub fn from_batch(batch: &Batch, device: &B::Device) -> Self {
        match batch {
            Batch::Plain(p) => TaggerInput::Plain(Tokens::from_padded(p, device)),
            Batch::Asked { context, question, cues } => TaggerInput::Asked {
                context: Tokens::from_padded(context, device),
                question: Tokens::from_padded(question, device),
                cues: Tensor::from_data(
                    TensorData::new(cues.clone(), [context.batch, context.len, corpus::qa::cues::CUES]),
                    device,
                ),
            },
        }
    }

    /// The sentences that are tagged.
    pub fn context(&self) -> &Tokens<B> {
        match self {
            TaggerInput::Plain(t) | TaggerInput::Asked { context: t, .. } => t,
        }
    }

    pub fn question(&self) -> Option<&Tokens<B>> {
        match self {
            TaggerInput::Plain(_) => None,
            TaggerInput::Asked { question, .. } => Some(question),
        }
    }

    /// `[B, L, CUES]` reading cues of the context (QA only).
    pub fn cues(&self) -> Option<&Tensor<B, 3, Int>> {
        match self {
            TaggerInput::Plain(_) => None,
            TaggerInput::Asked { cues, .. } => Some(cues),
        }
    }

    /// `[B, L]` of the tagged sentences.
    pub fn dims(&self) -> [usize; 2] {
        self.context().dims()
    }
}

/// Gold tags `[B, L]` of a padded batch (0 at padding), if every sentence has them.
pub fn tags_tensor<B: Backend>(p: &PaddedBatch, device: &B::Device) -> Option<Tensor<B, 2, Int>> {
    p.tags.as_ref().map(|t| Tensor::from_data(TensorData::new(t.clone(), [p.batch, p.len]), device))
}
