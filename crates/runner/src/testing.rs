//! What the unit tests of this crate share: generated sentences encoded
//! for a small tagger.

use crate::setup::config::RunConfig;
use corpus::toy::{generate, Lang};
use corpus::vocab::Normalize;
use corpus::{Example, Scheme, Vocabs};
use encoders::EncoderKind;

/// The lock every unit test holds that seeds the backend's global random
/// generator or initialises a model from it: the test harness runs tests
/// in parallel threads, and without it one test's draws interleave with
/// another's, so "the same seed gives the same model" would fail at random.
pub fn backend_rng() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `n` generated English sentences (toy data, `seed`) with vocabularies
/// built from them, encoded for a BIOES tagger (tagged when `tagged`).
pub fn toy_examples(n: usize, seed: u64, tagged: bool) -> (Vocabs, Vec<Example>) {
    let data = generate(Lang::En, n, seed);
    let labels: Vec<String> = data
        .iter()
        .flat_map(|(_, sp)| sp.iter().map(|s| s.label.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let tokens: Vec<&[String]> = data.iter().map(|(t, _)| t.as_slice()).collect();
    let vocabs = Vocabs::build(tokens.iter().copied(), &labels, Normalize::default(), 1, Scheme::Bioes, Scheme::Iob2);
    let examples = data
        .iter()
        .map(|(t, sp)| {
            let tags = tagged.then(|| Scheme::Bioes.encode(t.len(), sp));
            vocabs.example(t, None, tags.as_deref(), 20)
        })
        .collect();
    (vocabs, examples)
}

/// A small tagger config of `kind` (d_model 16, hidden 8), `dropout` everywhere.
pub fn small_config(kind: EncoderKind, dropout: f64) -> RunConfig {
    let mut cfg = RunConfig::default();
    cfg.model.encoder.kind = kind;
    cfg.model.encoder.attention.d_model = 16;
    cfg.model.encoder.attention.ffn = 32;
    cfg.model.encoder.attention.dropout = dropout;
    cfg.model.encoder.attention.attention_dropout = dropout;
    cfg.model.encoder.bilstm.hidden = 8;
    cfg.model.encoder.bilstm.dropout = dropout;
    cfg.model.features.dropout = dropout;
    cfg
}

/// `n` generated sentences as QA examples: each sentence's first entity
/// (if any) tagged as the answer `ANS` in BIOES, read against a question
/// of the three tokens before it, with its reading cues.
pub fn toy_qa_examples(n: usize) -> (Vocabs, Vec<Example>) {
    let data = generate(Lang::En, n, 3);
    let tokens: Vec<&[String]> = data.iter().map(|(t, _)| t.as_slice()).collect();
    let labels = vec![corpus::qa::squad::ANSWER.to_string()];
    let vocabs = Vocabs::build(tokens.iter().copied(), &labels, Normalize::default(), 1, Scheme::Bioes, Scheme::Iob2);
    let examples = data
        .iter()
        .map(|(t, sp)| {
            let answer: Vec<corpus::Span> = sp
                .iter()
                .take(1)
                .map(|s| corpus::Span { label: corpus::qa::squad::ANSWER.into(), ..s.clone() })
                .collect();
            let tags = Scheme::Bioes.encode(t.len(), &answer);
            let from = answer.first().map_or(0, |s| s.start);
            let question: Vec<String> = t[from.saturating_sub(3)..from].to_vec();
            let text = t.join(" ");
            let mut offsets = Vec::new();
            let mut at = 0;
            for w in t {
                offsets.push((at, at + w.chars().count()));
                at += w.chars().count() + 1;
            }
            let cues = corpus::qa::cues::context_cues(&text, &offsets, &question.join(" "), None);
            vocabs.example(t, Some(corpus::Asked { question: &question, cues: &cues, written: t }), Some(&tags), 20)
        })
        .collect();
    (vocabs, examples)
}

/// Every weight of a tagger, in module order.
pub fn weights<B: burn::prelude::Backend>(model: &encoders::Tagger<B>) -> Vec<f32> {
    let params = crate::train::average::flatten(model);
    params.into_iter().flat_map(|t| t.into_data().to_vec::<f32>().unwrap()).collect()
}
