//! The one inference path: batching, windows, emissions, decoding,
//! marginals and attention maps. `seqlab eval`, `predict`, `bench predict`,
//! `heads`, `visualize` and the training run's dev and test passes all tag
//! through [`tag`].
//!
//! Sentences longer than `max_len` are tagged in overlapping windows: the
//! encoder sees each window, each token takes its emission scores from the
//! window where it is most central, and one decode (Viterbi for the CRF,
//! on the host) then runs over the whole stitched sentence, so no seam can
//! hold an illegal transition and no token is dropped.

pub mod input;
pub mod nbest;
pub mod qa;
pub mod run;

use corpus::batch::{plan_batches, BatchSize, Example};
use corpus::score::{score, Counts, Mode};
use corpus::window::{owners, windows};
use corpus::{Sentence, Tag, Vocabs};
use encoders::ops::SeqBackend;
use encoders::{Tagger, TaggerInput};

use crate::analysis::attention_map::attention_maps;
pub use crate::analysis::attention_map::{QuestionAttention, SentenceAttention};
use rayon::prelude::*;
use std::ops::Range;

/// Padded tokens per inference batch.
pub const EVAL_BATCH: BatchSize = BatchSize::Tokens(4096);

/// How long sentences are cut (`max_len` 0: never).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    pub max_len: usize,
    pub stride: usize,
}

impl Windows {
    /// Whole sentences, however long.
    pub const NONE: Windows = Windows { max_len: 0, stride: 0 };

    /// The windows of a sentence of `len` tokens.
    pub fn of(&self, len: usize) -> Vec<Range<usize>> {
        if self.max_len == 0 {
            vec![0..len]
        } else {
            windows(len, self.max_len, self.stride)
        }
    }
}

/// Which sentences go through the encoder together.
#[derive(Clone, Debug, PartialEq)]
pub enum Batching {
    /// Length-bucketed batches of this size ([`EVAL_BATCH`] by default).
    Planned(BatchSize),
    /// These groups of sentence indices, each one batch (with all of its
    /// sentences' windows): how `bench predict` runs the batches it times.
    Given(Vec<Vec<usize>>),
}

/// What to compute besides the tags.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub windows: Windows,
    pub batching: Batching,
    /// Each tag's probability (CRF marginals or softmax).
    pub confidence: bool,
    /// Attention weights of every layer, for sentences tagged in one window.
    pub attention: bool,
    /// Extractive QA: each sentence's answer span, as the decoder picks it.
    pub answers: bool,
    /// The `k` best tag paths of each sentence with their probabilities
    /// ([`Tagged::alternatives`]), or with [`Self::answers`] the `k`
    /// likeliest answer spans ([`Tagged::top_spans`]).
    pub top_k: Option<usize>,
}

impl Request {
    /// Tags only, in planned batches.
    pub fn tagging(windows: Windows) -> Request {
        Request {
            windows,
            batching: Batching::Planned(EVAL_BATCH),
            confidence: false,
            attention: false,
            answers: false,
            top_k: None,
        }
    }

    /// `k ≥ 1` best candidates per sentence (`None`: the best only).
    pub fn with_top_k(mut self, k: Option<usize>) -> Request {
        assert!(k != Some(0), "top_k must be at least 1");
        self.top_k = k;
        self
    }

    pub fn with_answers(mut self, answers: bool) -> Request {
        self.answers = answers;
        self
    }

    pub fn with_confidence(mut self, confidence: bool) -> Request {
        self.confidence = confidence;
        self
    }

    pub fn with_attention(mut self) -> Request {
        self.attention = true;
        self
    }

    pub fn in_batches(mut self, groups: Vec<Vec<usize>>) -> Request {
        self.batching = Batching::Given(groups);
        self
    }
}

/// A tagged sentence: predicted tags in the data's scheme, and each tag's
/// probability (CRF marginal or softmax) when asked for.
#[derive(Clone, Debug, Default)]
pub struct Tagged {
    pub tags: Vec<Tag>,
    pub confidence: Option<Vec<f32>>,
    /// Every tag's probability per token, `[len × tags]` in the tagger's
    /// tag set (with `confidence` only).
    pub marginals: Option<Vec<f32>>,
    /// With [`Request::attention`], for a sentence tagged in one window.
    pub attention: Option<SentenceAttention>,
    /// With [`Request::answers`]: the answer span (tokens `start..=end`)
    /// and its probability under the decoder.
    pub span: Option<encoders::span::AnswerSpan>,
    /// With [`Request::top_k`] (tagging): the best tag paths in the data's
    /// scheme, best first, each with its probability (fewer than `k` where
    /// the sentence has fewer allowed paths).
    pub alternatives: Vec<(Vec<Tag>, f64)>,
    /// With [`Request::top_k`] and [`Request::answers`]: the likeliest
    /// answer spans, best first (the first is [`Self::span`]).
    pub top_spans: Vec<encoders::span::AnswerSpan>,
}

/// The tagged sentences, and how many of them were cut into windows.
pub struct TaggedSplit {
    pub tagged: Vec<Tagged>,
    pub windowed: usize,
}

/// Tags every sentence of `data` (in its original order). An error when
/// the examples do not fit the tagger's question mode (questions for a
/// plain tagger, or none for a QA tagger).
pub fn tag<B: SeqBackend>(
    model: &Tagger<B>,
    vocabs: &Vocabs,
    data: &[Example],
    request: &Request,
    device: &B::Device,
) -> anyhow::Result<TaggedSplit> {
    // Scores per token: one per tag, or the span decoders' own (2 for the pointer).
    let t = model.outputs();
    let pieces = Pieces::new(data, request.windows);
    // 1. Every window of every sentence through the encoder.
    let mut emitted = encode_pieces(model, &pieces, &request.batching, request.attention, t, device)?;
    // 2. Stitch: each token's scores from the window where it is most central.
    let stitched: Vec<Vec<f32>> = (0..data.len()).map(|i| pieces.stitch(i, &mut emitted.emissions, t)).collect();
    // 3. Decode whole sentences on the host.
    let mut tagged = decode(model, vocabs, &stitched, request);
    for (i, a) in emitted.attention.into_iter().enumerate() {
        tagged[i].attention = a;
    }
    Ok(TaggedSplit { tagged, windowed: pieces.plans.iter().filter(|ws| ws.len() > 1).count() })
}

/// The windows of every sentence, as sentences of their own.
struct Pieces {
    /// Per sentence, its windows.
    plans: Vec<Vec<Range<usize>>>,
    /// Per sentence, the indices of its pieces.
    of: Vec<Range<usize>>,
    pieces: Vec<Example>,
    lengths: Vec<usize>,
}

impl Pieces {
    fn new(data: &[Example], win: Windows) -> Pieces {
        let plans: Vec<Vec<Range<usize>>> = data.iter().map(|e| win.of(e.len())).collect();
        let mut of = Vec::with_capacity(data.len());
        let mut pieces = Vec::new();
        for (e, ws) in data.iter().zip(&plans) {
            let first = pieces.len();
            pieces.extend(ws.iter().map(|r| e.slice(r.clone())));
            of.push(first..pieces.len());
        }
        let lengths = pieces.iter().map(Example::len).collect();
        Pieces { plans, of, pieces, lengths }
    }

    /// Batches of piece indices.
    fn batches(&self, batching: &Batching) -> Vec<Vec<usize>> {
        match batching {
            Batching::Planned(size) => plan_batches(&self.lengths, *size, None),
            Batching::Given(groups) => {
                groups.iter().map(|g| g.iter().flat_map(|&i| self.of[i].clone()).collect()).collect()
            }
        }
    }

    /// Sentence `i`'s emissions `[len, T]`, each token's from the piece where
    /// it is most central (a sentence in one piece takes that piece's).
    fn stitch(&self, i: usize, emissions: &mut [Vec<f32>], t: usize) -> Vec<f32> {
        let ws = &self.plans[i];
        if ws.len() == 1 {
            return std::mem::take(&mut emissions[self.of[i].start]);
        }
        let len = ws.last().map_or(0, |w| w.end);
        let own = owners(len, ws);
        let mut s = Vec::with_capacity(len * t);
        for (tok, &o) in own.iter().enumerate() {
            let local = tok - ws[o].start;
            s.extend_from_slice(&emissions[self.of[i].start + o][local * t..(local + 1) * t]);
        }
        s
    }
}

/// What the encoder gave for each piece.
struct Emitted {
    /// Per piece `[len, T]`.
    emissions: Vec<Vec<f32>>,
    /// Per sentence (one piece only), when asked for.
    attention: Vec<Option<SentenceAttention>>,
}

/// Runs the pieces through the model, batch by batch. Batches run
/// concurrently, one per thread of the pool (each batch's operations still
/// use idle threads): on a CPU most of a batch's operations are too small
/// to keep every core busy alone.
fn encode_pieces<B: SeqBackend>(
    model: &Tagger<B>,
    pieces: &Pieces,
    batching: &Batching,
    attention: bool,
    t: usize,
    device: &B::Device,
) -> anyhow::Result<Emitted> {
    type Encoded = (Vec<usize>, Vec<Vec<f32>>, Vec<SentenceAttention>);
    let results: Vec<Encoded> = pieces
        .batches(batching)
        .into_par_iter()
        .map(|ids| {
            let batch = encoders::input::pad_batch::<B>(&pieces.pieces, &ids);
            let input = TaggerInput::<B>::from_batch(&batch, device);
            let out = model.forward(&input, attention)?;
            let e: Vec<f32> = out.emissions.into_data().iter::<f32>().collect(); // [b, L, T]
            let l = batch.context().len;
            let per_piece: Vec<Vec<f32>> =
                ids.iter().enumerate().map(|(b, &p)| e[b * l * t..(b * l + pieces.lengths[p]) * t].to_vec()).collect();
            let maps = if attention { attention_maps(out.attention, out.cross, &batch) } else { Vec::new() };
            Ok((ids, per_piece, maps))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut emissions = vec![Vec::new(); pieces.pieces.len()];
    let mut by_piece: Vec<Option<SentenceAttention>> = vec![None; pieces.pieces.len()];
    for (ids, per_piece, maps) in results {
        let mut maps = maps.into_iter();
        for (&p, e) in ids.iter().zip(per_piece) {
            emissions[p] = e;
            by_piece[p] = maps.next();
        }
    }
    // A sentence's attention is its piece's when it was tagged whole.
    let attention =
        pieces.of.iter().map(|r| if r.len() == 1 { by_piece[r.start].take() } else { None }).collect::<Vec<_>>();
    Ok(Emitted { emissions, attention })
}

/// Decodes every sentence's stitched emissions on the host, in parallel
/// chunks, and maps the paths back to the data's tag scheme.
fn decode<B: SeqBackend>(model: &Tagger<B>, vocabs: &Vocabs, stitched: &[Vec<f32>], request: &Request) -> Vec<Tagged> {
    let tag_set = vocabs.parsed_tags();
    let t = tag_set.len();
    stitched
        .par_chunks(32)
        .flat_map_iter(|chunk| {
            let sentences: Vec<&[f32]> = chunk.iter().map(Vec::as_slice).collect();
            let paths = model.decode_host(&sentences);
            let mut probs = request.confidence.then(|| model.probabilities_host(&sentences).into_iter());
            let mut spans = request.answers.then(|| model.best_spans_host(&sentences).into_iter());
            let mut top = candidates(model, &sentences, request).into_iter();
            let tag_set = &tag_set;
            let to_data = move |path: &[usize]| {
                // Back to the data's scheme, through spans.
                let tagger_tags: Vec<Tag> = path.iter().map(|&y| tag_set[y].clone()).collect();
                corpus::tags::convert(&tagger_tags, vocabs.scheme, vocabs.data_scheme)
            };
            paths.into_iter().map(move |path| {
                let marginals = probs.as_mut().and_then(Iterator::next);
                let span = spans.as_mut().and_then(Iterator::next).flatten();
                let confidence =
                    marginals.as_ref().map(|m| path.iter().enumerate().map(|(pos, &y)| m[pos * t + y]).collect());
                let (paths, top_spans) = top.next().unwrap_or_default();
                let alternatives = paths.into_iter().map(|(p, prob)| (to_data(&p), prob)).collect();
                Tagged { tags: to_data(&path), confidence, marginals, attention: None, span, alternatives, top_spans }
            })
        })
        .collect()
}

/// Per sentence, with [`Request::top_k`]: the best paths (tagging) or the
/// likeliest answer spans (QA); empty lists without it.
type Candidates = (Vec<(Vec<usize>, f64)>, Vec<encoders::span::AnswerSpan>);

fn candidates<B: SeqBackend>(model: &Tagger<B>, sentences: &[&[f32]], request: &Request) -> Vec<Candidates> {
    match (request.top_k, request.answers) {
        (None, _) => Vec::new(),
        (Some(k), false) => model.k_best_host(sentences, k).into_iter().map(|p| (p, Vec::new())).collect(),
        (Some(k), true) => model.top_spans_host(sentences, k).into_iter().map(|s| (Vec::new(), s)).collect(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::model::build_model;
    use burn::backend::Flex;
    use encoders::EncoderKind;

    /// An untrained attention tagger and 30 generated sentences for it.
    fn setup() -> (Tagger<Flex>, Vocabs, Vec<Example>) {
        let (vocabs, encoded) = crate::testing::toy_examples(30, 4, false);
        let cfg = crate::testing::small_config(EncoderKind::Attention, 0.1);
        let device = Default::default();
        (build_model::<Flex>(&cfg, &vocabs, None, &device), vocabs, encoded)
    }

    #[test]
    fn given_batches_tag_as_planned_ones_and_attention_comes_with_whole_sentences() {
        let _rng = crate::testing::backend_rng();
        let (model, vocabs, data) = setup();
        let device = Default::default();
        let planned = Request::tagging(Windows::NONE).with_confidence(true).with_attention();
        let a = tag(&model, &vocabs, &data, &planned, &device).unwrap().tagged;
        // The sentences in other batches (pairs, in reverse order).
        let groups: Vec<Vec<usize>> =
            (0..data.len()).rev().collect::<Vec<_>>().chunks(2).map(<[usize]>::to_vec).collect();
        let b = tag(&model, &vocabs, &data, &planned.clone().in_batches(groups), &device).unwrap().tagged;
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x.tags, y.tags, "sentence {i}");
            let (p, q) = (x.confidence.as_ref().unwrap(), y.confidence.as_ref().unwrap());
            assert!(p.iter().zip(q).all(|(u, v)| (u - v).abs() < 1e-4), "sentence {i}: {p:?} vs {q:?}");
            let att = x.attention.as_ref().expect("a sentence tagged whole has its attention");
            assert_eq!((att.len, att.layers.len()), (data[i].len(), model.attention_layers()));
            // Every query row is a distribution over the sentence's own tokens.
            for row in att.layers[0].chunks(att.len) {
                assert!(
                    (row.iter().sum::<f32>() - 1.0).abs() < 1e-4,
                    "sentence {i}: row sums to {}",
                    row.iter().sum::<f32>()
                );
            }
        }
        // In windows of 4 tokens: no attention for sentences cut, every token tagged.
        let cut =
            tag(&model, &vocabs, &data, &Request::tagging(Windows { max_len: 4, stride: 2 }).with_attention(), &device)
                .unwrap();
        assert!(cut.windowed > 0);
        for (e, t) in data.iter().zip(&cut.tagged) {
            assert_eq!(t.tags.len(), e.len());
            assert_eq!(t.attention.is_some(), e.len() <= 4);
        }
    }

    /// A span decoder's answers come through the same path: windows
    /// stitched, every sentence one answer span inside it, the tags its
    /// path (the pointer's 2 scores per token are not tags).
    #[test]
    fn span_decoders_answer_every_question_through_windows() {
        let _rng = crate::testing::backend_rng();
        let (vocabs, data) = crate::testing::toy_qa_examples(12);
        let device = Default::default();
        for decoder in [encoders::DecoderKind::Pointer, encoders::DecoderKind::SpanCrf, encoders::DecoderKind::Crf] {
            let mut cfg = crate::testing::small_config(EncoderKind::Attention, 0.0);
            cfg.model.question = encoders::QuestionMode::Cross;
            cfg.model.decoder = decoder;
            cfg.model.features.cue_dim = 2;
            cfg.model.features.aligned_dim = 4;
            let model = build_model::<Flex>(&cfg, &vocabs, None, &device);
            for windows in [Windows::NONE, Windows { max_len: 4, stride: 2 }] {
                let request = Request::tagging(windows).with_answers(true).with_confidence(true);
                let tagged = tag(&model, &vocabs, &data, &request, &device).unwrap().tagged;
                for (e, t) in data.iter().zip(&tagged) {
                    let span = t.span.expect("every question gets an answer");
                    assert!(span.start <= span.end && span.end < e.len() && span.prob > 0.0 && span.prob <= 1.0);
                    assert_eq!(t.tags.len(), e.len());
                    let m = t.marginals.as_ref().unwrap();
                    for row in m.chunks(vocabs.tags.len()) {
                        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-3, "{decoder:?}: {row:?}");
                    }
                }
            }
        }
    }
}
