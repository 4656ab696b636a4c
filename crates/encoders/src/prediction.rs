//! The probability a tagger gives one of its own predictions: an entity
//! (a span of tokens with its tags) or an answer span. Differentiable, so
//! that an explanation can ask which input tokens it rests on (gradient ×
//! input), and cheap to evaluate on many erased copies of a sentence.

use crate::ops::SeqBackend;
use crate::tagger::{DecoderKind, Tagger};
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use burn::tensor::TensorData;
use crf::Reduction;

/// What the tagger predicted in one sentence: tokens `start..=end` and,
/// for a tagging decoder, their tag ids in the tagger's tag set (a QA span
/// decoder's span needs none: the span is the prediction).
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub start: usize,
    pub end: usize,
    /// `end − start + 1` tag ids (tagging decoders; empty for span decoders).
    pub tags: Vec<usize>,
}

/// Added to the emission of every tag a prediction rules out: `exp` of it
/// is 0 in f32, and it stays finite.
const RULED_OUT: f32 = -1.0e4;

impl<B: SeqBackend> Tagger<B> {
    /// `log P(prediction)` per row, `[B]`, from emissions `[B, L, T]` and
    /// the padding mask; row `r` is asked about `predictions[r]`:
    /// - CRF: the marginal probability that tokens `start..=end` carry
    ///   exactly `tags`, whatever the rest of the sentence does:
    ///   `log Z(e restricted to those tags there) − log Z(e)`;
    /// - softmax: `Σ log P(y_t = tags_t)` over the span;
    /// - pointer: `log P(start) + log P(end)`;
    /// - one-span CRF: the log-probability of the span's state path.
    ///
    /// The span decoders' figure is the model's, before the decoder
    /// renormalises over spans of at most `max_answer` tokens.
    pub fn log_prob_of(&self, e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>, predictions: &[Prediction]) -> Tensor<B, 1> {
        let [b, l, t] = e.dims();
        assert_eq!(predictions.len(), b, "one prediction per row");
        let device = e.device();
        match (self.decoder, &self.crf) {
            (DecoderKind::Crf, Some(crf)) => {
                // Every tag but the predicted one ruled out inside the span.
                let mut bias = vec![0.0f32; b * l * t];
                for (r, p) in predictions.iter().enumerate() {
                    assert_eq!(p.tags.len(), p.end + 1 - p.start, "one tag per token of the prediction");
                    for (k, &y) in p.tags.iter().enumerate() {
                        let at = (r * l + p.start + k) * t;
                        bias[at..at + t]
                            .iter_mut()
                            .enumerate()
                            .filter(|(j, _)| *j != y)
                            .for_each(|(_, x)| *x = RULED_OUT);
                    }
                }
                let bias = Tensor::<B, 3>::from_data(TensorData::new(bias, [b, l, t]), &device);
                crf.log_partition(e.clone() + bias, mask.clone()) - crf.log_partition(e, mask)
                // [B]
            }
            (DecoderKind::Softmax, _) => {
                let (mut at, mut keep) = (vec![0i64; b * l], vec![0.0f32; b * l]);
                for (r, p) in predictions.iter().enumerate() {
                    for (k, &y) in p.tags.iter().enumerate() {
                        at[r * l + p.start + k] = y as i64;
                        keep[r * l + p.start + k] = 1.0;
                    }
                }
                let at = Tensor::<B, 2, Int>::from_data(TensorData::new(at, [b, l]), &device);
                let keep = Tensor::<B, 2>::from_data(TensorData::new(keep, [b, l]), &device);
                let logp = log_softmax(e, 2).gather(2, at.unsqueeze_dim::<3>(2)).reshape([b, l]); // [B, L]
                (logp * keep).sum_dim(1).reshape([b]) // [B]
            }
            (DecoderKind::Pointer, _) => {
                let padding = mask.bool_not();
                let pick = |col: usize, of: fn(&Prediction) -> usize| {
                    let x = e.clone().slice([0..b, 0..l, col..col + 1]).reshape([b, l]); // [B, L]
                    let logp = log_softmax(x.mask_fill(padding.clone(), RULED_OUT), 1); // [B, L]
                    let at: Vec<i64> = predictions.iter().map(|p| of(p) as i64).collect();
                    logp.gather(1, Tensor::from_data(TensorData::new(at, [b, 1]), &device)).reshape([b])
                    // [B]
                };
                pick(0, |p| p.start) + pick(1, |p| p.end)
            }
            (DecoderKind::SpanCrf, Some(crf)) => {
                let lengths: Vec<i64> = mask.clone().int().sum_dim(1).into_data().iter::<i64>().collect();
                let mut states = vec![0i64; b * l];
                for (r, p) in predictions.iter().enumerate() {
                    for (k, x) in crf::one_span::states(lengths[r] as usize, p.start, p.end).into_iter().enumerate() {
                        states[r * l + k] = x as i64;
                    }
                }
                let states = Tensor::<B, 2, Int>::from_data(TensorData::new(states, [b, l]), &device);
                crf.nll(e, states, mask, Reduction::None).neg() // [B]
            }
            (decoder, None) => unreachable!("a {decoder:?} decoder is built with its CRF"),
        }
    }
}
