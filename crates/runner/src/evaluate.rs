//! Tagging a split with a trained model and scoring it.

use burn::prelude::*;
use corpus::batch::{pad, plan_batches, BatchSize, Encoded};
use corpus::score::{score, Counts, Mode};
use corpus::{Sentence, Tag, Vocabs};
use encoders::{Tagger, TaggerInput};

/// Sentences per inference batch.
pub const EVAL_BATCH: BatchSize = BatchSize::Tokens(4096);

/// A tagged sentence: predicted tags in the data's scheme, and each tag's
/// probability (CRF marginal or softmax) when asked for.
#[derive(Clone, Debug)]
pub struct Tagged {
    pub tags: Vec<Tag>,
    pub confidence: Option<Vec<f32>>,
}

/// Tags every sentence of `data` (in its original order).
pub fn tag_all<B: Backend>(
    model: &Tagger<B>,
    vocabs: &Vocabs,
    data: &[Encoded],
    with_confidence: bool,
    device: &B::Device,
) -> Vec<Tagged> {
    let tag_set = vocabs.parsed_tags();
    let lengths: Vec<usize> = data.iter().map(Encoded::len).collect();
    let mut out: Vec<Option<Tagged>> = vec![None; data.len()];
    for ids in plan_batches(&lengths, EVAL_BATCH, None) {
        let batch = pad(data, &ids);
        let input = TaggerInput::<B>::from_padded(&batch, device);
        let emissions = model.forward(&input, false).emissions;
        let paths = model.decode_emissions(emissions.clone(), input.mask.clone());
        let probs: Option<Vec<f32>> = with_confidence
            .then(|| model.probabilities(emissions, input.mask.clone()).into_data().iter::<f32>().collect());
        let t = tag_set.len();
        for (b, (&i, path)) in ids.iter().zip(paths).enumerate() {
            let confidence = probs
                .as_ref()
                .map(|p| path.iter().enumerate().map(|(pos, &y)| p[(b * batch.len + pos) * t + y]).collect());
            // Back to the data's scheme, through spans.
            let tagger_tags: Vec<Tag> = path.iter().map(|&y| tag_set[y].clone()).collect();
            let tags = corpus::tags::convert(&tagger_tags, vocabs.scheme, vocabs.data_scheme);
            out[i] = Some(Tagged { tags, confidence });
        }
    }
    out.into_iter().map(|t| t.expect("every sentence is in a batch")).collect()
}

/// conlleval counts of predictions against the gold tags of `sentences`.
pub fn score_predictions(sentences: &[Sentence], predicted: &[Tagged]) -> Counts {
    score(sentences.iter().zip(predicted).map(|(s, p)| (s.tags.as_slice(), p.tags.as_slice())), Mode::Conlleval)
}

/// The conlleval-format predictions file: `token gold predicted` per line.
pub fn predictions_file(sentences: &[Sentence], predicted: &[Tagged]) -> String {
    let rows: Vec<(usize, Vec<Vec<String>>)> = sentences
        .iter()
        .zip(predicted)
        .map(|(s, p)| {
            let rows = s
                .tokens
                .iter()
                .zip(&s.tags)
                .zip(&p.tags)
                .map(|((w, g), y)| vec![w.clone(), g.to_string(), y.to_string()])
                .collect();
            (0, rows)
        })
        .collect();
    corpus::reader::format_columns(
        rows.iter().map(|(d, r)| (*d, r.iter().map(|row| row.iter().map(String::as_str).collect()).collect())),
    )
}
