//! Tagging sentences with a trained model and scoring them.
//!
//! Sentences longer than `max_len` are tagged in overlapping windows: the
//! encoder sees each window, each token takes its emission scores from the
//! window where it is most central, and one decode (Viterbi for the CRF)
//! then runs over the whole stitched sentence, so no seam can hold an
//! illegal transition and no token is dropped.

use burn::prelude::*;
use burn::tensor::TensorData;
use corpus::batch::{pad, plan_batches, BatchSize, Encoded};
use corpus::score::{score, Counts, Mode};
use corpus::window::{owners, windows};
use corpus::{Sentence, Tag, Vocabs};
use encoders::ops::SeqBackend;
use encoders::{Tagger, TaggerInput};

/// Padded tokens per inference batch.
pub const EVAL_BATCH: BatchSize = BatchSize::Tokens(4096);

/// How long sentences are cut (`max_len` 0: never).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    pub max_len: usize,
    pub stride: usize,
}

impl Windows {
    /// The windows of a sentence of `len` tokens.
    pub fn of(&self, len: usize) -> Vec<std::ops::Range<usize>> {
        if self.max_len == 0 {
            vec![0..len]
        } else {
            windows(len, self.max_len, self.stride)
        }
    }
}

/// A tagged sentence: predicted tags in the data's scheme, and each tag's
/// probability (CRF marginal or softmax) when asked for.
#[derive(Clone, Debug)]
pub struct Tagged {
    pub tags: Vec<Tag>,
    pub confidence: Option<Vec<f32>>,
}

/// The tagged sentences, and how many of them were cut into windows.
pub struct TaggedSplit {
    pub tagged: Vec<Tagged>,
    pub windowed: usize,
}

/// Tags every sentence of `data` (in its original order).
pub fn tag_all<B: SeqBackend>(
    model: &Tagger<B>,
    vocabs: &Vocabs,
    data: &[Encoded],
    win: Windows,
    with_confidence: bool,
    device: &B::Device,
) -> TaggedSplit {
    let t = vocabs.tags.len();
    // 1. Every window of every sentence through the encoder.
    let plans: Vec<Vec<std::ops::Range<usize>>> = data.iter().map(|e| win.of(e.len())).collect();
    let pieces: Vec<Encoded> =
        data.iter().zip(&plans).flat_map(|(e, ws)| ws.iter().map(|r| e.slice(r.clone()))).collect();
    let mut piece_emissions: Vec<Vec<f32>> = vec![Vec::new(); pieces.len()];
    let lengths: Vec<usize> = pieces.iter().map(Encoded::len).collect();
    for ids in plan_batches(&lengths, EVAL_BATCH, None) {
        let batch = pad(&pieces, &ids);
        let input = TaggerInput::<B>::from_padded(&batch, device);
        let e: Vec<f32> = model.forward(&input, false).emissions.into_data().iter::<f32>().collect();
        for (b, &i) in ids.iter().enumerate() {
            let start = b * batch.len * t;
            piece_emissions[i] = e[start..start + lengths[i] * t].to_vec();
        }
    }
    // 2. Stitch: each token's scores from the window where it is most central.
    let mut stitched: Vec<Vec<f32>> = Vec::with_capacity(data.len());
    let mut first_piece = 0;
    for (e, ws) in data.iter().zip(&plans) {
        let own = owners(e.len(), ws);
        let mut s = Vec::with_capacity(e.len() * t);
        for (tok, &o) in own.iter().enumerate() {
            let local = tok - ws[o].start;
            s.extend_from_slice(&piece_emissions[first_piece + o][local * t..(local + 1) * t]);
        }
        stitched.push(s);
        first_piece += ws.len();
    }
    // 3. Decode whole sentences.
    let tag_set = vocabs.parsed_tags();
    let lengths: Vec<usize> = data.iter().map(Encoded::len).collect();
    let mut out: Vec<Option<Tagged>> = vec![None; data.len()];
    for ids in plan_batches(&lengths, EVAL_BATCH, None) {
        let l = ids.iter().map(|&i| lengths[i]).max().unwrap_or(1).max(1);
        let mut e = vec![0f32; ids.len() * l * t];
        let mut m = vec![false; ids.len() * l];
        for (b, &i) in ids.iter().enumerate() {
            e[b * l * t..b * l * t + lengths[i] * t].copy_from_slice(&stitched[i]);
            m[b * l..b * l + lengths[i]].iter_mut().for_each(|x| *x = true);
        }
        let e = Tensor::<B, 3>::from_data(TensorData::new(e, [ids.len(), l, t]), device);
        let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(m, [ids.len(), l]), device);
        let paths = model.decode_emissions(e.clone(), mask.clone());
        let probs: Option<Vec<f32>> =
            with_confidence.then(|| model.probabilities(e, mask).into_data().iter::<f32>().collect());
        for (b, (&i, path)) in ids.iter().zip(paths).enumerate() {
            let confidence =
                probs.as_ref().map(|p| path.iter().enumerate().map(|(pos, &y)| p[(b * l + pos) * t + y]).collect());
            // Back to the data's scheme, through spans.
            let tagger_tags: Vec<Tag> = path.iter().map(|&y| tag_set[y].clone()).collect();
            let tags = corpus::tags::convert(&tagger_tags, vocabs.scheme, vocabs.data_scheme);
            out[i] = Some(Tagged { tags, confidence });
        }
    }
    TaggedSplit {
        tagged: out.into_iter().map(|t| t.expect("every sentence is in a batch")).collect(),
        windowed: plans.iter().filter(|ws| ws.len() > 1).count(),
    }
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
