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
use encoders::{Tagger, TaggerError, TaggerInput};
use rayon::prelude::*;

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
    /// Every tag's probability per token, `[len × tags]` in the tagger's
    /// tag set (with `confidence` only).
    pub marginals: Option<Vec<f32>>,
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
) -> Result<TaggedSplit, TaggerError> {
    let t = vocabs.tags.len();
    // 1. Every window of every sentence through the encoder.
    let plans: Vec<Vec<std::ops::Range<usize>>> = data.iter().map(|e| win.of(e.len())).collect();
    let pieces: Vec<Encoded> =
        data.iter().zip(&plans).flat_map(|(e, ws)| ws.iter().map(|r| e.slice(r.clone()))).collect();
    let mut piece_emissions: Vec<Vec<f32>> = vec![Vec::new(); pieces.len()];
    let lengths: Vec<usize> = pieces.iter().map(Encoded::len).collect();
    // Batches run concurrently, one per thread of the pool (each batch's
    // operations still use idle threads): on a CPU most of a batch's
    // operations are too small to keep every core busy alone.
    let emitted: Vec<(Vec<usize>, usize, Vec<f32>)> = plan_batches(&lengths, EVAL_BATCH, None)
        .into_par_iter()
        .map(|ids| {
            let batch = pad(&pieces, &ids);
            let input = TaggerInput::<B>::from_padded(&batch, device);
            let e: Vec<f32> = model.forward(&input, false)?.emissions.into_data().iter::<f32>().collect();
            Ok((ids, batch.len, e))
        })
        .collect::<Result<_, TaggerError>>()?;
    for (ids, len, e) in emitted {
        for (b, &i) in ids.iter().enumerate() {
            let start = b * len * t;
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
    let decoded: Vec<Vec<(usize, Tagged)>> = plan_batches(&lengths, EVAL_BATCH, None)
        .into_par_iter()
        .map(|ids| {
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
            ids.iter()
                .zip(paths)
                .enumerate()
                .map(|(b, (&i, path))| {
                    let confidence = probs
                        .as_ref()
                        .map(|p| path.iter().enumerate().map(|(pos, &y)| p[(b * l + pos) * t + y]).collect());
                    let marginals = probs.as_ref().map(|p| p[b * l * t..(b * l + lengths[i]) * t].to_vec());
                    // Back to the data's scheme, through spans.
                    let tagger_tags: Vec<Tag> = path.iter().map(|&y| tag_set[y].clone()).collect();
                    let tags = corpus::tags::convert(&tagger_tags, vocabs.scheme, vocabs.data_scheme);
                    (i, Tagged { tags, confidence, marginals })
                })
                .collect()
        })
        .collect();
    for (i, tagged) in decoded.into_iter().flatten() {
        out[i] = Some(tagged);
    }
    Ok(TaggedSplit {
        tagged: out.into_iter().map(|t| t.expect("every sentence is in a batch")).collect(),
        windowed: plans.iter().filter(|ws| ws.len() > 1).count(),
    })
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

/// Longest answer considered, in sub-tokens.
pub const MAX_ANSWER: usize = 30;

/// The answer of each tagged QA sentence, as extractive QA systems choose
/// it: the span `i..=j` (at most [`MAX_ANSWER`] sub-tokens) with the highest
/// P(chunk starts at i)·P(chunk ends at j) under the tagger's per-token
/// marginals (P(S) for a single token) — every question gets an answer, as
/// every SQuAD v1.1 question has one, even where the Viterbi path tags
/// none. Without marginals, the first decoded span, or "". A span that
/// starts or ends inside a word is widened to the whole word
/// ([`corpus::squad::whole_words`]).
pub fn qa_answers(items: &[corpus::squad::QaItem], tagged: &[Tagged], tag_set: &[Tag]) -> Vec<String> {
    use corpus::Prefix;
    let t = tag_set.len();
    let with = |f: &dyn Fn(&Prefix) -> bool| -> Vec<usize> {
        (0..t).filter(|&k| matches!(&tag_set[k], Tag::Chunk { prefix, .. } if f(prefix))).collect()
    };
    let begin = with(&|p| *p == Prefix::B);
    let single = with(&|p| *p == Prefix::S);
    let end_tags = with(&|p| *p == Prefix::E);
    let inside = with(&|p| *p == Prefix::I);
    // BIOES: a span i..=j is B at i and E at j, or S at i = j. BIO: B at i
    // and no I at j + 1 (IOB1 data is trained in BIOES or BIO).
    let bioes = !end_tags.is_empty();
    items
        .iter()
        .zip(tagged)
        .map(|(item, tg)| {
            let n = tg.tags.len();
            let best = match &tg.marginals {
                Some(m) if n > 0 => {
                    let p = |i: usize, ks: &[usize]| ks.iter().map(|&k| m[i * t + k]).sum::<f32>();
                    let start: Vec<f32> = (0..n).map(|i| p(i, &begin)).collect();
                    let end: Vec<f32> = (0..n)
                        .map(|j| match (bioes, j + 1 < n) {
                            (true, _) => p(j, &end_tags),
                            (false, true) => 1.0 - p(j + 1, &inside),
                            (false, false) => 1.0,
                        })
                        .collect();
                    let mut best = (f32::MIN, 0, 0);
                    for i in 0..n {
                        let one = if bioes { p(i, &single) } else { start[i] * end[i] };
                        if one > best.0 {
                            best = (one, i, i);
                        }
                        for j in i + 1..n.min(i + MAX_ANSWER) {
                            if start[i] * end[j] > best.0 {
                                best = (start[i] * end[j], i, j);
                            }
                        }
                    }
                    Some((best.1, best.2))
                }
                _ => corpus::Scheme::Iob2.decode(&tg.tags).first().map(|s| (s.start, s.end - 1)),
            };
            best.map_or_else(String::new, |(i, j)| {
                let (i, j) = corpus::squad::whole_words(&item.context, &item.offsets, i, j);
                corpus::squad::span_text(&item.context, &item.offsets, i, j)
            })
        })
        .collect()
}

/// The official metrics of `answers` against the gold answers of `items`.
pub fn qa_score(items: &[corpus::squad::QaItem], answers: &[String]) -> corpus::squad::QaScore {
    corpus::squad::qa_score(answers.iter().zip(items).map(|(a, i)| (a.as_str(), i.answers.as_slice())))
}

/// One line of the official metrics, in percent.
pub fn qa_line(qa: &corpus::squad::QaScore) -> String {
    format!(
        "answers (official SQuAD v1.1 metric): exact match {:.2}, F1 {:.2}, {} questions",
        100.0 * qa.exact_match,
        100.0 * qa.f1,
        qa.questions
    )
}

/// Predictions in the official format, `{"question id": "answer", …}`.
pub fn qa_predictions_json(items: &[corpus::squad::QaItem], answers: &[String]) -> String {
    let map: serde_json::Map<String, serde_json::Value> =
        items.iter().zip(answers).map(|(i, a)| (i.id.clone(), serde_json::Value::from(a.as_str()))).collect();
    serde_json::to_string_pretty(&map).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use corpus::squad::QaItem;

    fn item(context: &str, offsets: Vec<(usize, usize)>) -> QaItem {
        QaItem { id: "q".into(), context: context.into(), offsets, answers: vec![] }
    }

    #[test]
    fn the_answer_is_the_best_start_end_pair_even_when_viterbi_tags_none() {
        // Tag set in BIOES: O, B-ANS, I-ANS, E-ANS, S-ANS.
        let tag_set: Vec<Tag> = ["O", "B-ANS", "I-ANS", "E-ANS", "S-ANS"].iter().map(|t| t.parse().unwrap()).collect();
        let it = item("ab cd ef gh", vec![(0, 2), (3, 5), (6, 8), (9, 11)]);
        // Every token is most likely O, but "cd ef" is the most likely span:
        // P(B at 1) 0.4 × P(E at 2) 0.45 = 0.18 beats P(S at 3) = 0.15.
        let marginals = vec![
            0.9, 0.05, 0.0, 0.0, 0.05, //
            0.5, 0.4, 0.0, 0.0, 0.1, //
            0.5, 0.0, 0.05, 0.45, 0.0, //
            0.8, 0.05, 0.0, 0.0, 0.15,
        ];
        let tagged = Tagged { tags: vec![Tag::O; 4], confidence: None, marginals: Some(marginals) };
        assert_eq!(qa_answers(&[it.clone()], &[tagged], &tag_set), ["cd ef"]);
        // Without marginals: the first decoded span, else nothing.
        let b: Tag = "B-ANS".parse().unwrap();
        let i: Tag = "I-ANS".parse().unwrap();
        let decoded = Tagged { tags: vec![Tag::O, Tag::O, b, i], confidence: None, marginals: None };
        assert_eq!(qa_answers(&[it.clone()], &[decoded], &tag_set), ["ef gh"]);
        let none = Tagged { tags: vec![Tag::O; 4], confidence: None, marginals: None };
        assert_eq!(qa_answers(&[it], &[none], &tag_set), [""]);
    }

    #[test]
    fn an_answer_inside_a_word_becomes_the_whole_word() {
        let tag_set: Vec<Tag> = ["O", "B-ANS", "I-ANS", "E-ANS", "S-ANS"].iter().map(|t| t.parse().unwrap()).collect();
        // nik ##ola tes ##la: the most likely span is the single piece "##ola".
        let it = item("Nikola Tesla", vec![(0, 3), (3, 6), (7, 10), (10, 12)]);
        let mut marginals = vec![0.9, 0.02, 0.0, 0.0, 0.08].repeat(4);
        marginals[5..10].copy_from_slice(&[0.4, 0.0, 0.0, 0.0, 0.6]);
        let tagged = Tagged { tags: vec![Tag::O; 4], confidence: None, marginals: Some(marginals) };
        assert_eq!(qa_answers(&[it], &[tagged], &tag_set), ["Nikola"]);
    }

    #[test]
    fn bio_spans_end_where_no_inside_tag_follows() {
        let tag_set: Vec<Tag> = ["O", "B-ANS", "I-ANS"].iter().map(|t| t.parse().unwrap()).collect();
        let it = item("北京是首都", (0..5).map(|c| (c, c + 1)).collect());
        // B at 0 (0.6), I at 1 (0.7), nothing continues at 2: "北京".
        let marginals = vec![0.4, 0.6, 0.0, 0.3, 0.0, 0.7, 0.9, 0.1, 0.0, 0.9, 0.1, 0.0, 0.9, 0.1, 0.0];
        let tagged = Tagged { tags: vec![Tag::O; 5], confidence: None, marginals: Some(marginals) };
        assert_eq!(qa_answers(&[it], &[tagged], &tag_set), ["北京"]);
    }
}
