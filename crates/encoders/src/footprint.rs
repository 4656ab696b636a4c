//! What a tagger's training step keeps alive, counted in floats from its
//! configuration: the memory planner (`runner::memory`) weighs these groups
//! with coefficients fitted to measured peaks, and needs to know nothing
//! of the layers inside.

use crate::attention::AttentionImpl;
use crate::tagger::{EncoderKind, TaggerConfig};

/// The shape of one training step's batch.
#[derive(Clone, Copy, Debug)]
pub struct StepShape {
    /// Sentences in the batch.
    pub batch: usize,
    /// Padded length.
    pub len: usize,
    /// Longest word in characters (character CNN input).
    pub word_len: usize,
    pub tags: usize,
}

/// Floats a training step keeps alive for autodiff, by group (each group
/// has its own coefficient in the planner).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepFloats {
    /// Token-sized tensors of a BiLSTM tagger: features, the recurrence's
    /// gates and states, emissions and the CRF's per-step scores.
    pub recurrent: f64,
    /// Token-sized tensors of an attention tagger: features, projections,
    /// feed-forward layers, emissions and the CRF's scores.
    pub attention: f64,
    /// Score-sized attention tensors: `[B, H, L, L]` dense, a block of keys
    /// chunked, three windows of keys local (plus, local only, the score
    /// terms of relative, ALiBi and T5 positions, which it composes from
    /// tensor operations; dense adds them inside its one operation).
    pub scores: f64,
}

impl TaggerConfig {
    /// The floats one training step of this tagger keeps alive at `s`.
    pub fn step_floats(&self, s: StepShape) -> StepFloats {
        let n = (s.batch * s.len) as f64; // tokens
        let f = &self.features;
        // Features: embeddings, the character CNN over every character, caps;
        // emissions and the CRF's per-step [B, T, T] scores.
        let chars = n * s.word_len as f64;
        let mut tokens = 6.0 * n * f.output_dim() as f64;
        if f.char_dim > 0 {
            tokens += 3.0 * chars * f.char_dim as f64 + 4.0 * chars * f.char_filters as f64;
        }
        tokens += 6.0 * n * s.tags as f64 + 8.0 * n * (s.tags * s.tags) as f64;
        let e = &self.encoder;
        match e.kind {
            EncoderKind::Bilstm => {
                let h = e.bilstm.hidden as f64;
                let recurrent = tokens + e.bilstm.layers.max(1) as f64 * n * 2.0 * 26.0 * h;
                StepFloats { recurrent, ..Default::default() }
            }
            EncoderKind::Attention => {
                let a = &e.attention;
                let layers = a.layers.max(1) as f64;
                let (d, ffn, heads, len) = (a.d_model as f64, a.ffn as f64, a.heads.max(1) as f64, s.len);
                let mut scores = match a.implementation {
                    AttentionImpl::Dense => 7.0 * n * heads * len as f64,
                    AttentionImpl::Chunked => 3.0 * n * heads * a.block.min(len) as f64,
                    AttentionImpl::Local => 8.0 * n * heads * (3 * a.window.min(len)) as f64,
                };
                // Local attention composes relative, ALiBi and T5 terms
                // before its softmax: more score-sized tensors kept.
                if a.position.biases_scores() && a.implementation == AttentionImpl::Local {
                    scores += 4.0 * n * heads * len.min(4 * a.window) as f64;
                }
                StepFloats {
                    attention: tokens + layers * (22.0 * n * d + 5.0 * n * ffn),
                    scores: layers * scores,
                    ..Default::default()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::positional::Position;
    use crate::tagger::EncoderKind;

    #[test]
    fn score_terms_cost_score_memory_in_local_attention_only() {
        let shape = StepShape { batch: 8, len: 128, word_len: 12, tags: 9 };
        let scores = |position, implementation| {
            let mut cfg = TaggerConfig::default();
            cfg.encoder.kind = EncoderKind::Attention;
            cfg.encoder.attention.position = position;
            cfg.encoder.attention.implementation = implementation;
            cfg.step_floats(shape).scores
        };
        for imp in [AttentionImpl::Dense, AttentionImpl::Local] {
            let plain = scores(Position::None, imp);
            assert_eq!(scores(Position::Sinusoidal, imp), plain);
            assert_eq!(scores(Position::Rope, imp), plain, "RoPE rotates q and k");
            for p in [Position::Relative, Position::Alibi, Position::T5] {
                match imp {
                    // Dense attention adds the terms inside its one operation.
                    AttentionImpl::Dense => assert_eq!(scores(p, imp), plain, "{p:?}"),
                    _ => assert!(scores(p, imp) > plain, "{p:?} {imp:?}"),
                }
            }
        }
    }
}
