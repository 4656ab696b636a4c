//! From a dataset folder to ids: vocabularies, tags in the tagger's scheme,
//! optional pretrained vectors.

use crate::setup::config::{RunConfig, WordDropout};
use anyhow::{bail, Context, Result};
use corpus::qa::cues::CUES;
use corpus::qa::squad::QaItem;
use corpus::vectors::read_vectors;
use corpus::{Asked, Example};
use corpus::{Dataset, Sentence, SplitName, Tag, Vocabs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A held-out split: the sentences as read (gold tags in the data's scheme)
/// and their ids.
pub struct EvalSplit {
    pub name: SplitName,
    pub sentences: Vec<Sentence>,
    pub encoded: Vec<Example>,
    /// Question-answering data: what maps tagged spans back to answers.
    pub qa: Option<Vec<corpus::qa::squad::QaItem>>,
}

/// Reads a dataset folder: tagged columns, or question-answering files
/// (SQuAD-format JSON) cut into sub-tokens by `tokenizer` (default:
/// `tokenizer.json` in the folder).
pub fn load_dataset(dir: &Path, tokenizer: Option<&Path>) -> Result<Dataset> {
    if corpus::qa::squad::qa_files(dir).is_none() {
        return Ok(Dataset::load(dir)?);
    }
    let path = tokenizer.map_or_else(|| dir.join(crate::setup::tokenizer::FILE), Path::to_path_buf);
    if !path.is_file() {
        bail!(
            "{}: question-answering data needs a subword tokenizer, and {} does not exist; make one with\n  seqlab tokenizer train --data {} --out {}\n(or set data.tokenizer to any tokenizer.json)",
            dir.display(),
            path.display(),
            dir.display(),
            path.display()
        );
    }
    let tok = crate::setup::tokenizer::load(&path)?;
    Ok(Dataset::load_qa_info(dir, &|t: &str| crate::setup::tokenizer::pieces(&tok, t))?.0)
}

/// The tokenizer a run of `cfg` on `dir` reads (QA data only).
pub fn tokenizer_path(cfg: &RunConfig, dir: &Path) -> PathBuf {
    if cfg.data.tokenizer.as_os_str().is_empty() {
        dir.join(crate::setup::tokenizer::FILE)
    } else {
        cfg.data.tokenizer.clone()
    }
}

/// Refuses a model whose question mode does not fit the data.
pub fn check_question_mode(cfg: &RunConfig, ds: &Dataset) -> Result<()> {
    use encoders::QuestionMode;
    match (ds.is_qa(), cfg.model.question) {
        (true, QuestionMode::None) => bail!(
            "{} holds question-answering data: set model.question = {} (see experiments/configs/qa-*.toml)",
            ds.dir.display(),
            QuestionMode::answering_choices()
        ),
        (false, q) if q != QuestionMode::None => bail!(
            "model.question = {:?} needs question-answering data (SQuAD-format train.json, dev.json), and {} holds tagged columns",
            q.as_str(),
            ds.dir.display()
        ),
        _ => Ok(()),
    }
}

/// Everything training needs from the data.
pub struct Prepared {
    pub dataset: String,
    pub vocabs: Vocabs,
    /// The tagger's tag set (in `vocabs.scheme`).
    pub tags: Vec<Tag>,
    pub train: Vec<Example>,
    /// Where each training example starts: `(file, line)`, for messages.
    pub train_origin: (std::path::PathBuf, Vec<usize>),
    pub train_tokens: usize,
    pub eval: Vec<EvalSplit>,
    /// `[words, dim]` pretrained matrix, when configured.
    pub pretrained: Option<Vec<f32>>,
    /// Things worth telling the user (coverage, unseen labels).
    pub notes: Vec<String>,
}

impl Prepared {
    pub fn split(&self, name: SplitName) -> Option<&EvalSplit> {
        self.eval.iter().find(|s| s.name == name)
    }
}

/// Gives `vocabs` the training sentences' bigram vocabulary when the
/// tagger reads bigrams (`model.features.bigram_dim` > 0 and `data.bigrams`
/// on for this data); otherwise turns the feature off in `cfg`, so that
/// the run's config.toml says what was trained.
fn add_bigrams(cfg: &mut RunConfig, vocabs: &mut Vocabs, sentences: &[corpus::Sentence]) {
    if cfg.model.features.bigram_dim == 0 {
        return;
    }
    if !cfg.data.bigrams.read(vocabs.tokenization()) {
        cfg.model.features.bigram_dim = 0;
        return;
    }
    let texts = sentences.iter().map(|s| s.tokens.as_slice());
    vocabs.bigrams = Some(corpus::bigrams::vocabulary(texts, vocabs.normalize, cfg.data.min_bigram_freq));
}

/// Builds vocabularies from the training split and encodes every split.
pub fn prepare(cfg: &mut RunConfig, ds: &Dataset) -> Result<Prepared> {
    let (ds, subset_note) = train_subset(cfg, ds);
    let ds = &*ds;
    let train = ds.split(SplitName::Train).with_context(|| format!("{}: no training split", ds.dir.display()))?;
    let tagger_scheme = cfg.data.tagger_scheme(ds.scheme)?;
    let labels: Vec<String> = ds.labels(SplitName::Train).into_iter().collect();
    let normalize = corpus::Normalize { lowercase: cfg.data.lowercase, zero_digits: cfg.data.zero_digits };
    // Questions (QA data) are text of the same language: their words count
    // too, each after its context.
    let question_tokens: Vec<Option<&[String]>> = match train.qa.as_deref() {
        Some(items) => items.iter().map(|i| Some(i.question.as_slice())).collect(),
        None => vec![None; train.sentences.len()],
    };
    let texts: Vec<&[String]> = train
        .sentences
        .iter()
        .zip(&question_tokens)
        .flat_map(|(s, q)| std::iter::once(s.tokens.as_slice()).chain(*q))
        .collect();
    let mut vocabs =
        Vocabs::build(texts.iter().copied(), &labels, normalize, cfg.data.min_word_freq, tagger_scheme, ds.scheme);
    // QA: document frequencies of the training contexts, for the IDF cue.
    vocabs.idf = train.qa.as_ref().map(|items| corpus::qa::cues::Idf::build(items.iter().map(|i| &*i.context)));
    let questions = questions(&vocabs, &train.sentences, train.qa.as_deref());
    // QA: the character features read the contexts as written (cased), so
    // their characters join the character vocabulary.
    for c in questions.iter().flatten().flat_map(|q| &q.written).flat_map(|w| w.chars()) {
        vocabs.chars.insert(c.encode_utf8(&mut [0; 4]));
    }
    vocabs.qa_metric = ds.qa.as_ref().map(|q| q.metric);
    add_bigrams(cfg, &mut vocabs, &train.sentences);
    // One word dropout rate for this data, so the run's config.toml says what was trained.
    cfg.train.word_dropout = WordDropout::Rate(cfg.train.word_dropout.rate(vocabs.tokenization()));
    let mut notes = ds.qa.as_ref().map_or_else(Vec::new, |q| q.notes.clone());
    notes.extend(subset_note);
    for (split, label) in ds.unseen_labels() {
        notes.push(format!(
            "entity type {label} occurs in {} but not in train: the tagger cannot predict it (it still counts in scoring)",
            split.as_str()
        ));
    }
    let pretrained = if cfg.data.pretrained.as_os_str().is_empty() {
        None
    } else {
        Some(load_pretrained(cfg, ds, &mut vocabs, &mut notes)?)
    };
    let tags = vocabs.parsed_tags();
    let max_chars = cfg.data.max_word_chars;
    // Through spans: ill-formed input is repaired, so the tagger only sees
    // legal paths; a long sentence becomes its windows, each window's tags
    // re-encoded so that an entity cut at its edge is still well formed.
    let win = cfg.data.windows();
    let mut windowed = 0;
    let mut train_enc = Vec::with_capacity(train.sentences.len());
    let mut train_lines = Vec::with_capacity(train.sentences.len());
    for (s, question) in train.sentences.iter().zip(&questions) {
        let t = corpus::tags::convert(&s.tags, ds.scheme, tagger_scheme);
        let ws = win.of(s.tokens.len());
        windowed += usize::from(ws.len() > 1);
        for r in ws {
            let tags = tagger_scheme.encode(r.len(), &tagger_scheme.decode(&t[r.clone()]));
            train_lines.push(s.line + r.start);
            let asked = question.as_ref().map(|q| Asked {
                question: q.question,
                cues: &q.cues[r.start * CUES..r.end * CUES],
                written: &q.written[r.clone()],
            });
            train_enc.push(vocabs.example(&s.tokens[r], asked, Some(&tags), max_chars));
        }
    }
    if windowed > 0 {
        notes.push(format!(
            "{windowed} training sentences are longer than data.max_len = {} and are trained on as {} overlapping windows",
            cfg.data.max_len,
            train_enc.len() - (train.sentences.len() - windowed)
        ));
    }
    let eval = ds
        .splits
        .iter()
        .filter(|s| s.name != SplitName::Train)
        .map(|s| EvalSplit {
            name: s.name,
            sentences: s.sentences.clone(),
            encoded: encode_untagged(&vocabs, &s.sentences, s.qa.as_deref(), max_chars),
            qa: s.qa.clone(),
        })
        .collect();
    Ok(Prepared {
        dataset: ds.name.clone(),
        vocabs,
        tags,
        train: train_enc,
        train_origin: (train.path.clone(), train_lines),
        train_tokens: train.tokens(),
        eval,
        pretrained,
        notes,
    })
}

/// `ds` with its training split cut to `data.train_sentences` sentences
/// drawn with the run's seed (0: `ds` itself), and the note that says so.
fn train_subset<'a>(cfg: &RunConfig, ds: &'a Dataset) -> (std::borrow::Cow<'a, Dataset>, Option<String>) {
    let n = cfg.data.train_sentences;
    if n == 0 {
        return (std::borrow::Cow::Borrowed(ds), None);
    }
    let mut cut = ds.clone();
    let total = cut.cut_train(n, cfg.seed);
    let note = format!(
        "training on {} of the {total} training sentences (data.train_sentences = {n}, drawn with seed {}); dev and test whole",
        n.min(total),
        cfg.seed
    );
    (std::borrow::Cow::Owned(cut), Some(note))
}

/// Sentences as examples without tags, each read against its question
/// when `qa` gives them (extractive QA).
pub fn encode_untagged(
    vocabs: &Vocabs,
    sentences: &[Sentence],
    qa: Option<&[QaItem]>,
    max_chars: usize,
) -> Vec<Example> {
    let questions = questions(vocabs, sentences, qa);
    sentences
        .iter()
        .zip(&questions)
        .map(|(s, q)| vocabs.example(&s.tokens, q.as_ref().map(Question::asked), None, max_chars))
        .collect()
}

/// A QA context's question, reading cues and written tokens.
struct Question<'a> {
    question: &'a [String],
    cues: Vec<u32>,
    written: Vec<String>,
}

impl Question<'_> {
    fn asked(&self) -> Asked<'_> {
        Asked { question: self.question, cues: &self.cues, written: &self.written }
    }
}

/// Each sentence's question, reading cues and written tokens, from the QA
/// items of their split (`None` for plain tagging).
fn questions<'a>(vocabs: &Vocabs, sentences: &[Sentence], qa: Option<&'a [QaItem]>) -> Vec<Option<Question<'a>>> {
    match qa {
        Some(items) => items
            .iter()
            .zip(sentences)
            .map(|(i, s)| {
                Some(Question {
                    question: &i.question,
                    cues: i.cues(vocabs.idf.as_ref()),
                    written: i.surfaces(&s.tokens),
                })
            })
            .collect(),
        None => sentences.iter().map(|_| None).collect(),
    }
}

/// Reads the vectors of the training words and of dev/test words, adds the
/// dev/test words that have a vector to the vocabulary (as Lample et al.
/// do), and builds the embedding matrix; words without a vector get
/// uniform(±√(3/d)) values. Sets `model.features.word_dim` to the vectors' size.
fn load_pretrained(
    cfg: &mut RunConfig,
    ds: &Dataset,
    vocabs: &mut Vocabs,
    notes: &mut Vec<String>,
) -> Result<Vec<f32>> {
    let norm = vocabs.normalize;
    let mut wanted: HashSet<String> = HashSet::new();
    for split in &ds.splits {
        for s in &split.sentences {
            for w in &s.tokens {
                wanted.insert(norm.apply(w));
            }
        }
    }
    // A lowercased vocabulary looks up case-folded vectors (`Paris` serves `paris`);
    // a cased one looks up the exact word, then its lowercase form (GloVe is lowercase).
    let fold = norm.lowercase;
    if !fold {
        wanted.extend(wanted.iter().map(|w| w.to_lowercase()).collect::<Vec<_>>());
    }
    let vectors = read_vectors(&cfg.data.pretrained, Some(&wanted), fold)?;
    let lookup = |w: &str| vectors.vectors.get(w).or_else(|| vectors.vectors.get(&w.to_lowercase()));
    for split in ds.splits.iter().filter(|s| s.name != SplitName::Train) {
        for s in &split.sentences {
            for w in &s.tokens {
                let n = norm.apply(w);
                if vocabs.words.get(&n).is_none() && lookup(&n).is_some() {
                    vocabs.words.insert(&n);
                }
            }
        }
    }
    let d = vectors.dim;
    if cfg.model.features.word_dim != d {
        notes.push(format!("model.features.word_dim set to {d}, the size of the pretrained vectors"));
        cfg.model.features.word_dim = d;
    }
    let scale = (3.0 / d as f64).sqrt() as f32;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5eed);
    let mut found = 0;
    let mut matrix = Vec::with_capacity(vocabs.words.len() * d);
    for (i, w) in vocabs.words.items().iter().enumerate() {
        match lookup(w) {
            Some(v) if i >= 2 => {
                found += 1;
                matrix.extend_from_slice(v);
            }
            _ if i == 0 => matrix.extend(std::iter::repeat_n(0.0, d)),
            _ => matrix.extend((0..d).map(|_| rng.random_range(-scale..scale))),
        }
    }
    notes.push(format!(
        "pretrained vectors {}: {found} of {} vocabulary words covered ({:.1}%), {} vectors in the file",
        cfg.data.pretrained.display(),
        vocabs.words.len() - 2,
        100.0 * found as f64 / (vocabs.words.len() - 2).max(1) as f64,
        vectors.total
    ));
    Ok(matrix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corpus::{Normalize, Scheme};

    /// `data.train_sentences = N`: N training examples, vocabularies from
    /// them only, the same ones for the same seed, dev and test whole, and a
    /// note that says so.
    #[test]
    fn train_sentences_trains_on_a_seeded_subset() {
        let d = tempfile::tempdir().unwrap();
        corpus::toy::write_dataset(d.path(), corpus::toy::Lang::En, 100, 5).unwrap();
        let ds = load_dataset(d.path(), None).unwrap();
        let run = |n: usize, seed: u64| {
            let mut cfg = RunConfig { seed, ..RunConfig::default() };
            cfg.data.train_sentences = n;
            prepare(&mut cfg, &ds).unwrap()
        };
        let (all, a, b, other) = (run(0, 1), run(12, 1), run(12, 1), run(12, 2));
        assert_eq!((all.train.len(), a.train.len()), (100, 12));
        assert_eq!(a.train_origin.1, b.train_origin.1, "same seed, same sentences");
        assert_ne!(a.train_origin.1, other.train_origin.1);
        assert!(a.vocabs.words.len() < all.vocabs.words.len(), "vocabulary of the subset");
        for (x, y) in a.eval.iter().zip(&all.eval) {
            assert_eq!(x.sentences.len(), y.sentences.len());
        }
        assert!(a.notes.iter().any(|n| n.starts_with("training on 12 of the 100 training sentences")), "{:?}", a.notes);
        assert!(!all.notes.iter().any(|n| n.starts_with("training on")));
    }

    /// `train.word_dropout = { words, chars }` resolves to the rate of the
    /// data's tokenisation (whitespace words for the English toy set, one
    /// character per token for the Chinese one), and the run's config says
    /// which; a plain rate stays as it is.
    #[test]
    fn word_dropout_resolves_to_the_rate_of_the_datas_tokens() {
        let by_tokens = WordDropout::ByTokens { words: 0.15, chars: 0.05 };
        for (lang, want) in [(corpus::toy::Lang::En, 0.15), (corpus::toy::Lang::Zh, 0.05)] {
            let d = tempfile::tempdir().unwrap();
            corpus::toy::write_dataset(d.path(), lang, 40, 5).unwrap();
            let ds = load_dataset(d.path(), None).unwrap();
            let mut cfg = RunConfig::default();
            cfg.train.word_dropout = by_tokens;
            let prep = prepare(&mut cfg, &ds).unwrap();
            assert_eq!(cfg.train.word_dropout, WordDropout::Rate(want), "{lang:?}");
            let dropout = crate::train::step::TokenDropout::of(&cfg, prep.vocabs.tokenization());
            assert_eq!(dropout.word, want, "{lang:?}");
            assert_eq!(by_tokens.rate(prep.vocabs.tokenization()), want, "{lang:?}");
            let mut plain = RunConfig::default();
            plain.train.word_dropout = WordDropout::Rate(0.3);
            prepare(&mut plain, &ds).unwrap();
            assert_eq!(plain.train.word_dropout, WordDropout::Rate(0.3));
        }
    }

    /// A QA split's contexts are encoded with the characters of the
    /// original, cased text under their lowercased pieces.
    #[test]
    fn qa_contexts_get_the_characters_of_the_original_text() {
        let pieces: Vec<String> = ["oslo", "is", "cold"].map(String::from).to_vec();
        let sentence = Sentence { tokens: pieces.clone(), tags: vec![Tag::O; 3], doc: 0, line: 1 };
        let item = QaItem {
            id: "q".into(),
            question: vec!["cold".into()],
            question_text: "Cold?".into(),
            context: "Oslo is cold".into(),
            offsets: vec![(0, 4), (5, 7), (8, 12)],
            answers: vec!["Oslo".into()],
        };
        let mut vocabs = Vocabs::build([pieces.as_slice()], &[], Normalize::default(), 1, Scheme::Bioes, Scheme::Iob2);
        vocabs.chars.insert("O");
        let ex = encode_untagged(&vocabs, &[sentence], Some(&[item]), 20);
        let Example::Asked { context, .. } = &ex[0] else { panic!("a QA context is asked") };
        assert_eq!(context.chars[0], ["O", "s", "l", "o"].map(|c| vocabs.chars.id(c)));
        assert_eq!(context.words[0], vocabs.words.id("oslo"));
    }
}
