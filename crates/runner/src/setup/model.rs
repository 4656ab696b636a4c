//! Building a tagger from a run's config and vocabularies, and naming it.

use crate::setup::config::RunConfig;
use burn::prelude::*;
use corpus::Vocabs;
use encoders::{Tagger, TaggerShape};

/// Builds a fresh tagger for these vocabularies (and pretrained vectors).
pub fn build_model<B: Backend>(
    cfg: &RunConfig,
    vocabs: &Vocabs,
    pretrained: Option<Vec<f32>>,
    device: &B::Device,
) -> Tagger<B> {
    cfg.model.init(
        TaggerShape {
            words: vocabs.words.len(),
            chars: vocabs.chars.len(),
            bigrams: vocabs.bigrams.as_ref().map_or(0, |v| v.len()),
            tags: &vocabs.parsed_tags(),
            scheme: vocabs.scheme,
            pretrained,
        },
        device,
    )
}

/// A short description of the encoder, e.g. `bilstm` or `attention-relative`.
pub fn encoder_name(cfg: &RunConfig) -> String {
    match cfg.model.encoder.kind {
        // BiDAF and DCN readers name their fusion layer: "bilstm-flow", "bilstm-coattention".
        encoders::EncoderKind::Bilstm if cfg.model.question.fuses() => {
            format!("bilstm-{}", cfg.model.question.as_str())
        }
        encoders::EncoderKind::Bilstm => "bilstm".into(),
        encoders::EncoderKind::Attention => {
            format!("attention-{:?}", cfg.model.encoder.attention.position).to_lowercase()
        }
    }
}

/// The decoder's name, e.g. `crf` or `softmax`.
pub fn decoder_name(cfg: &RunConfig) -> String {
    format!("{:?}", cfg.model.decoder).to_lowercase()
}
