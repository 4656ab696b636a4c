//! Where a concatenating QA reader's context tokens look. With `question
//! [SEP] context` through self-attention, each context token spreads one
//! unit of attention over the whole joint sequence; the share of it that
//! lands on the question tokens is the question's signal, and "dilution" is
//! that share falling to what the question's length alone would give
//! (uniform attention: `|q| / (|q| + 1 + |c|)`). A cross-attention block's
//! cross sublayer attends to the question alone, so its share is 1 by
//! construction; this measures the concatenating readers.

use crate::analysis::attention_map::attention_maps;
use anyhow::{bail, Context, Result};
use corpus::batch::Batch;
use corpus::Example;
use encoders::ops::SeqBackend;
use encoders::{QuestionMode, Tagger, TaggerInput};

/// One layer's attention from context tokens, averaged over heads, tokens and questions.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerShare {
    pub layer: usize,
    /// Mean share of a context token's attention on the question's tokens.
    pub on_question: f64,
    /// The same share under uniform attention (the question's length share).
    pub uniform: f64,
    /// Mean share on the separator.
    pub on_separator: f64,
    pub questions: usize,
}

/// Questions per forward pass.
const CHUNK: usize = 16;

/// The per-layer shares over (at most `limit` of) `data`, contexts of at
/// most `max_len` tokens (the model's attention covers them whole).
pub fn question_share<B: SeqBackend>(
    model: &Tagger<B>,
    data: &[Example],
    limit: usize,
    max_len: usize,
    device: &B::Device,
) -> Result<Vec<LayerShare>> {
    if model.question_mode() != QuestionMode::Concat {
        bail!("only a question [SEP] context reader (model.question = \"concat\") mixes the question into its self-attention; a cross-attention block's cross sublayer attends to the question alone (share 1)");
    }
    if model.attention_layers() == 0 {
        bail!("the reader has no attention layers (a BiLSTM)");
    }
    let kept: Vec<usize> = (0..data.len()).filter(|&i| data[i].len() <= max_len).take(limit).collect();
    let layers = model.attention_layers();
    let mut sums = vec![(0.0f64, 0.0f64, 0.0f64); layers];
    for ids in kept.chunks(CHUNK) {
        let batch = encoders::input::pad_batch::<B>(data, ids);
        if !matches!(batch, Batch::Asked { .. }) {
            bail!("the examples have no questions");
        }
        let out = model.forward(&TaggerInput::<B>::from_batch(&batch, device), true)?;
        for m in attention_maps(out.attention, out.cross, &batch) {
            let q = m.question.as_ref().context("the reader gave no attention on the question")?;
            let heads: Vec<usize> = (0..m.heads).collect();
            let mean = |v: Vec<f32>| v.iter().map(|&x| f64::from(x)).sum::<f64>() / m.len.max(1) as f64;
            for (layer, sum) in sums.iter_mut().enumerate() {
                sum.0 += mean(q.share_on_question(layer, &heads, m.len));
                sum.1 += q.uniform_share(m.len);
                sum.2 += mean(q.share_on_separator(layer, &heads, m.len));
            }
        }
    }
    let n = kept.len().max(1) as f64;
    Ok(sums
        .into_iter()
        .enumerate()
        .map(|(layer, (q, u, s))| LayerShare {
            layer: layer + 1,
            on_question: q / n,
            uniform: u / n,
            on_separator: s / n,
            questions: kept.len(),
        })
        .collect())
}

/// The shares as a markdown table.
pub fn table(shares: &[LayerShare]) -> String {
    let mut s = String::from("| layer | attention on the question | uniform share | ratio | on [SEP] | questions |\n|---:|---:|---:|---:|---:|---:|\n");
    for l in shares {
        s += &format!(
            "| {} | {:.3} | {:.3} | {:.2} | {:.3} | {} |\n",
            l.layer,
            l.on_question,
            l.uniform,
            l.on_question / l.uniform.max(1e-12),
            l.on_separator,
            l.questions
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::model::build_model;
    use burn::backend::Flex;
    use encoders::EncoderKind;

    #[test]
    fn shares_are_probabilities_and_cross_readers_are_refused() {
        let _rng = crate::testing::backend_rng();
        let (vocabs, data) = crate::testing::toy_qa_examples(20);
        let device = Default::default();
        let mut cfg = crate::testing::small_config(EncoderKind::Attention, 0.0);
        cfg.model.question = QuestionMode::Concat;
        let model = build_model::<Flex>(&cfg, &vocabs, None, &device);
        let shares = question_share(&model, &data, 100, 256, &device).unwrap();
        assert_eq!(shares.len(), model.attention_layers());
        for l in &shares {
            assert_eq!(l.questions, 20);
            assert!(l.on_question > 0.0 && l.on_question + l.on_separator < 1.0 + 1e-6, "{l:?}");
            assert!(l.uniform > 0.0 && l.uniform < 1.0);
        }
        assert!(table(&shares).lines().count() == 2 + shares.len());
        cfg.model.question = QuestionMode::Cross;
        let cross = build_model::<Flex>(&cfg, &vocabs, None, &device);
        assert!(question_share(&cross, &data, 100, 256, &device).is_err());
    }
}
