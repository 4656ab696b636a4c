//! The tagger: input features → encoder → emission scores → decoder (CRF
//! or softmax). Encoders and decoders are chosen by configuration; the code
//! path is the same for all of them.

use crate::bilstm::{BiLstm, BiLstmConfig};
use crate::features::{Features, FeaturesConfig};
use crate::input::TaggerInput;
use crate::ops::SeqBackend;
use crate::transformer::{AttentionConfig, AttentionEncoder};
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::{log_softmax, softmax};
use corpus::{Scheme, Tag};
use crf::{Constraints, Crf, Reduction};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderKind {
    Bilstm,
    Attention,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecoderKind {
    /// Linear-chain CRF, constrained by the tag scheme.
    Crf,
    /// Independent softmax per token (cross-entropy loss, argmax decoding).
    Softmax,
}

/// Which encoder, and the settings of each kind (only the chosen one is used).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncoderConfig {
    pub kind: EncoderKind,
    pub bilstm: BiLstmConfig,
    pub attention: AttentionConfig,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig {
            kind: EncoderKind::Bilstm,
            bilstm: BiLstmConfig::default(),
            attention: AttentionConfig::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TaggerConfig {
    pub features: FeaturesConfig,
    pub encoder: EncoderConfig,
    pub decoder: DecoderKind,
    /// Exclude the transitions the tag scheme forbids (CRF only).
    pub constrained: bool,
}

impl Default for TaggerConfig {
    fn default() -> Self {
        TaggerConfig {
            features: FeaturesConfig::default(),
            encoder: EncoderConfig::default(),
            decoder: DecoderKind::Crf,
            constrained: true,
        }
    }
}

/// Sizes that come from the data, not the configuration.
#[derive(Clone, Debug)]
pub struct TaggerShape<'a> {
    pub words: usize,
    pub chars: usize,
    pub tags: &'a [Tag],
    pub scheme: Scheme,
    /// `[words, word_dim]` pretrained word vectors.
    pub pretrained: Option<Vec<f32>>,
}

impl TaggerConfig {
    /// Settings that cannot build a working tagger, as `section.key: why`
    /// (sizes of 0, dropout outside [0, 1), incompatible attention options).
    pub fn validate(&self) -> Result<(), String> {
        let f = &self.features;
        let positive = |name: &str, v: usize| if v == 0 { Err(format!("{name} must be at least 1")) } else { Ok(()) };
        let probability = |name: &str, p: f64| {
            if (0.0..1.0).contains(&p) {
                Ok(())
            } else {
                Err(format!("{name} must be a probability in [0, 1), found {p}"))
            }
        };
        positive("features.word_dim", f.word_dim)?;
        if f.char_dim > 0 {
            positive("features.char_filters", f.char_filters)?;
            positive("features.char_kernel", f.char_kernel)?;
        }
        probability("features.dropout", f.dropout)?;
        match self.encoder.kind {
            EncoderKind::Bilstm => {
                let b = &self.encoder.bilstm;
                positive("encoder.bilstm.hidden", b.hidden)?;
                positive("encoder.bilstm.layers", b.layers)?;
                probability("encoder.bilstm.dropout", b.dropout)?;
            }
            EncoderKind::Attention => {
                let a = &self.encoder.attention;
                a.validate().map_err(|e| format!("encoder.attention: {e}"))?;
                positive("encoder.attention.d_model", a.d_model)?;
                positive("encoder.attention.layers", a.layers)?;
                positive("encoder.attention.ffn", a.ffn)?;
                probability("encoder.attention.dropout", a.dropout)?;
                probability("encoder.attention.attention_dropout", a.attention_dropout)?;
            }
        }
        Ok(())
    }

    pub fn init<B: Backend>(&self, shape: TaggerShape<'_>, device: &B::Device) -> Tagger<B> {
        let features = self.features.init(shape.words, shape.chars, shape.pretrained, device);
        let d_in = self.features.output_dim();
        let (encoder, d_out) = match self.encoder.kind {
            EncoderKind::Bilstm => {
                (Encoder::BiLstm(self.encoder.bilstm.init(d_in, device)), self.encoder.bilstm.output_dim())
            }
            EncoderKind::Attention => {
                (Encoder::Attention(self.encoder.attention.init(d_in, device)), self.encoder.attention.d_model)
            }
        };
        let t = shape.tags.len();
        let crf = match self.decoder {
            DecoderKind::Crf => {
                let cons = if self.constrained {
                    Constraints::from_scheme(shape.scheme, shape.tags)
                } else {
                    Constraints::none(t)
                };
                Some(Crf::new(&cons, 0.1, device))
            }
            DecoderKind::Softmax => None,
        };
        Tagger { features, encoder, emit: LinearConfig::new(d_out, t).init(device), crf }
    }
}

#[derive(Module, Debug)]
pub enum Encoder<B: Backend> {
    BiLstm(BiLstm<B>),
    Attention(AttentionEncoder<B>),
}

impl<B: Backend> Encoder<B> {
    /// `[B, L, D]` features → `[B, L, D_out]`, plus attention weights per
    /// layer when asked (attention encoders only).
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        want_weights: bool,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>)
    where
        B: SeqBackend,
    {
        match self {
            Encoder::BiLstm(m) => (m.forward(x, mask), Vec::new()),
            Encoder::Attention(m) => m.forward(x, mask, want_weights),
        }
    }
}

#[derive(Module, Debug)]
pub struct Tagger<B: Backend> {
    pub features: Features<B>,
    pub encoder: Encoder<B>,
    /// Encoder output → one score per tag.
    pub emit: Linear<B>,
    /// `None` for the softmax decoder.
    pub crf: Option<Crf<B>>,
}

/// Emission scores and, when asked, attention weights.
pub struct TaggerOutput<B: Backend> {
    /// `[B, L, T]`.
    pub emissions: Tensor<B, 3>,
    /// Per layer `[B, H, L, L]`.
    pub attention: Vec<Tensor<B, 4>>,
}

impl<B: SeqBackend> Tagger<B> {
    pub fn forward(&self, input: &TaggerInput<B>, want_weights: bool) -> TaggerOutput<B> {
        let x = self.features.forward(input); // [B, L, D]
        let (h, attention) = self.encoder.forward(x, input.mask.clone(), want_weights); // [B, L, D_out]
        TaggerOutput { emissions: self.emit.forward(h), attention }
    }

    /// Training loss, averaged over sentences: the CRF's negative
    /// log-likelihood, or the summed token cross-entropy for softmax.
    pub fn loss(&self, input: &TaggerInput<B>, tags: Tensor<B, 2, Int>) -> Tensor<B, 1> {
        let e = self.forward(input, false).emissions; // [B, L, T]
        match &self.crf {
            Some(crf) => crf.nll(e, tags, input.mask.clone(), Reduction::Mean),
            None => {
                let [b, _, _] = e.dims();
                let logp = log_softmax(e, 2); // [B, L, T]
                let gold = logp.gather(2, tags.unsqueeze_dim::<3>(2)).squeeze_dim::<2>(2); // [B, L]
                (gold * input.mask.clone().float()).sum().neg().div_scalar(b as f64)
            }
        }
    }

    /// Best tag path per sentence (Viterbi for the CRF, argmax for softmax).
    pub fn decode(&self, input: &TaggerInput<B>) -> Vec<Vec<usize>> {
        let e = self.forward(input, false).emissions;
        self.decode_emissions(e, input.mask.clone())
    }

    pub fn decode_emissions(&self, e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Vec<Vec<usize>> {
        match &self.crf {
            Some(crf) => crf.decode(e, mask),
            None => {
                let [b, l, _] = e.dims();
                let lengths: Vec<i64> = mask.int().sum_dim(1).into_data().iter::<i64>().collect();
                let best: Vec<i64> = e.argmax(2).into_data().iter::<i64>().collect();
                (0..b).map(|s| (0..lengths[s] as usize).map(|i| best[s * l + i] as usize).collect()).collect()
            }
        }
    }

    /// Per-token tag probabilities `[B, L, T]`: CRF marginals, or the softmax.
    pub fn probabilities(&self, e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        match &self.crf {
            Some(crf) => crf.marginals(e, mask),
            None => {
                let [b, l, t] = e.dims();
                softmax(e, 2) * mask.float().unsqueeze_dim::<3>(2).expand([b, l, t])
            }
        }
    }
}
