//! A trained run, read back from its folder: its best model, its data,
//! evaluation on a split, and tagging new input (`seqlab eval`, `predict`).

use crate::infer::input::{Input, OutputFormat};
use crate::infer::{self, nbest, Request, TaggedSplit};
use crate::reporter::Reporter;
use crate::setup::config::{self, RunConfig};
use crate::setup::model::build_model;
use crate::setup::prep;
use crate::train::rundir;
use anyhow::{Context, Result};
use corpus::qa::squad::{QaItem, QaScore};
use corpus::Example;
use corpus::{Sentence, SplitName, Tag, Vocabs};
use encoders::ops::SeqBackend;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A trained run, read back from its folder.
pub struct LoadedRun {
    pub dir: PathBuf,
    pub cfg: RunConfig,
    pub vocabs: Vocabs,
}

impl LoadedRun {
    pub fn load(dir: &Path) -> Result<LoadedRun> {
        let cfg = config::load(Some(&dir.join(rundir::CONFIG)), &[])
            .with_context(|| format!("{} is not a seqlab run folder", dir.display()))?;
        let vocabs = Vocabs::load(&dir.join(rundir::VOCAB))?;
        if !dir.join(rundir::MODEL).is_file() {
            anyhow::bail!("{}: no {} (has training finished an epoch?)", dir.display(), rundir::MODEL);
        }
        Ok(LoadedRun { dir: dir.to_path_buf(), cfg, vocabs })
    }

    /// The run's best model, on an inference backend.
    pub fn model<B: SeqBackend>(&self, device: &B::Device) -> Result<encoders::Tagger<B>> {
        let model = build_model::<B>(&self.cfg, &self.vocabs, None, device);
        rundir::load_module::<B, _>(model, &self.dir.join(rundir::MODEL), device)
    }

    /// The sentences of `split` of `data` (default: the run's dataset).
    pub fn split(&self, data: Option<&Path>, split: SplitName) -> Result<Vec<Sentence>> {
        Ok(self.split_with_answers(data, split)?.sentences)
    }

    /// [`Self::split`] with, for QA data, what maps tags back to answers.
    pub fn split_with_answers(&self, data: Option<&Path>, split: SplitName) -> Result<corpus::Split> {
        let dir = data.map_or_else(|| self.cfg.data.dir.clone(), Path::to_path_buf);
        let tokenizer = self.dir.join(crate::setup::tokenizer::FILE);
        let ds = prep::load_dataset(&dir, tokenizer.is_file().then_some(tokenizer.as_path()))?;
        Ok(ds.split(split).with_context(|| format!("{}: no {} split", dir.display(), split.as_str()))?.clone())
    }

    /// Tags encoded sentences with the run's best model (long ones in
    /// windows, as the run was configured); `top_k`: also the `k` best
    /// candidates of each ([`Request::top_k`]).
    pub fn tag<B: SeqBackend>(
        &self,
        data: &[Example],
        confidence: bool,
        answers: bool,
        top_k: Option<usize>,
        device: &B::Device,
        reporter: &dyn Reporter,
    ) -> Result<TaggedSplit> {
        let model = self.model::<B>(device)?;
        let request = Request::tagging(self.cfg.data.windows())
            .with_confidence(confidence)
            .with_answers(answers)
            .with_top_k(top_k);
        let tagged = infer::tag(&model, &self.vocabs, data, &request, device)?;
        if tagged.windowed > 0 {
            reporter.message(&format!(
                "note: {} of {} sentences were longer than data.max_len = {} and were tagged in overlapping windows",
                tagged.windowed,
                data.len(),
                self.cfg.data.max_len
            ));
        }
        Ok(tagged)
    }

    /// Applies `--max-len` / `--stride` overrides of the window plan.
    pub fn set_windows(&mut self, max_len: Option<usize>, stride: Option<usize>) {
        if let Some(m) = max_len {
            self.cfg.data.max_len = m;
        }
        if let Some(s) = stride {
            self.cfg.data.stride = s;
        }
    }

    /// Sentences as examples, each read against its question when `qa`
    /// gives them (a QA run's data).
    pub fn encode(&self, sentences: &[Sentence], qa: Option<&[QaItem]>) -> Vec<Example> {
        prep::encode_untagged(&self.vocabs, sentences, qa, self.cfg.data.max_word_chars)
    }

    /// The metric the run's answers are scored with (QA runs).
    pub fn qa_metric(&self) -> corpus::qa::metric::QaMetric {
        self.vocabs.qa_metric.unwrap_or_default()
    }

    /// The run's tag set, in the tagger's scheme.
    pub fn tags(&self) -> Vec<Tag> {
        self.vocabs.parsed_tags()
    }
}

/// What `seqlab eval` reports.
pub struct Evaluation {
    pub counts: corpus::score::Counts,
    pub sentences: usize,
    pub windowed: usize,
    /// For QA data, the answer scores and their metric.
    pub qa: Option<(QaScore, corpus::qa::metric::QaMetric)>,
}

impl Evaluation {
    /// The `--json` report.
    pub fn json(&self) -> Result<serde_json::Value> {
        let mut report = serde_json::to_value(self.counts.report())?;
        report["sentences"] = self.sentences.into();
        report["windowed"] = self.windowed.into();
        if let Some((qa, metric)) = &self.qa {
            report["qa"] = serde_json::to_value(qa)?;
            report["qa"]["metric"] = metric.name().into();
        }
        Ok(report)
    }

    /// conlleval's text report, and the answer line for QA.
    pub fn text(&self) -> String {
        let mut s = self.counts.conlleval_text();
        if let Some((qa, metric)) = &self.qa {
            s += &format!("{}\n", crate::infer::qa::line(qa, *metric));
        }
        s
    }
}

/// Scores the run on `split` (and, given `answers`, its answers).
pub fn evaluate<B: SeqBackend>(
    run: &LoadedRun,
    split: &[Sentence],
    answers: Option<&[QaItem]>,
    device: &B::Device,
    reporter: &dyn Reporter,
) -> Result<Evaluation> {
    let TaggedSplit { tagged, windowed } =
        run.tag::<B>(&run.encode(split, answers), false, answers.is_some(), None, device, reporter)?;
    let counts = infer::score_predictions(split, &tagged);
    let qa = answers.map(|items| {
        (crate::infer::qa::score(items, &crate::infer::qa::answers(items, &tagged), run.qa_metric()), run.qa_metric())
    });
    Ok(Evaluation { counts, sentences: split.len(), windowed, qa })
}

/// What `seqlab predict` writes: the tagged input in `format`, or for a QA
/// run the official predictions JSON (with its score line when every
/// question has gold answers).
pub struct Prediction {
    pub output: String,
    pub score_line: Option<String>,
}

/// Tags `input` (or, for a QA run, answers `qa`'s questions); with
/// `top_k`, the `k` best tag sequences of each sentence (or answers of each
/// question) with their probabilities ([`crate::infer::nbest`]).
pub fn predict<B: SeqBackend>(
    run: &LoadedRun,
    input: &Input,
    format: OutputFormat,
    qa: Option<&[QaItem]>,
    top_k: Option<usize>,
    device: &B::Device,
    reporter: &dyn Reporter,
) -> Result<Prediction> {
    let sentences = &input.sentences;
    let want_conf = format == OutputFormat::Jsonl && qa.is_none();
    let tagged = run
        .tag::<B>(&run.encode(sentences, qa), want_conf, qa.is_some(), spans_for(top_k, qa), device, reporter)?
        .tagged;
    if let Some(items) = qa {
        let answers = crate::infer::qa::answers(items, &tagged);
        let score_line = items.iter().all(|i| !i.answers.is_empty()).then(|| {
            crate::infer::qa::line(&crate::infer::qa::score(items, &answers, run.qa_metric()), run.qa_metric())
        });
        let output = match top_k {
            Some(k) => {
                let top = crate::infer::qa::answered_top(items, &tagged, k);
                let counts: Vec<usize> = top.iter().map(Vec::len).collect();
                if let Some(note) = nbest::shortfall(&counts, k, "question") {
                    reporter.message(&note);
                }
                nbest::qa_json(items, &top)
            }
            None => crate::infer::qa::predictions_json(items, &answers),
        };
        return Ok(Prediction { output: format!("{output}\n"), score_line });
    }
    if let Some(k) = top_k {
        let counts: Vec<usize> = tagged.iter().map(|t| t.alternatives.len()).collect();
        if let Some(note) = nbest::shortfall(&counts, k, "sentence") {
            reporter.message(&note);
        }
    }
    let output = match (format, top_k) {
        (OutputFormat::Conll, Some(_)) => nbest::conll(input, &tagged),
        (OutputFormat::Conll, None) => conll_output(input, &tagged),
        (OutputFormat::Jsonl, _) => jsonl_output(sentences, &tagged, run.vocabs.data_scheme)?,
    };
    Ok(Prediction { output, score_line: None })
}

/// How many candidates to ask the inference path for: `k` tag paths, or
/// for QA more spans than answers (spans widened to whole words can merge).
fn spans_for(top_k: Option<usize>, qa: Option<&[QaItem]>) -> Option<usize> {
    top_k.map(|k| if qa.is_some() { k.saturating_mul(4) } else { k })
}

/// Answers QA items (a QA run): each question's `k` likeliest answers
/// (1 without `top_k`), best first, each with its character span and
/// probability.
pub fn answer<B: SeqBackend>(
    run: &LoadedRun,
    sentences: &[Sentence],
    items: &[QaItem],
    top_k: Option<usize>,
    device: &B::Device,
    reporter: &dyn Reporter,
) -> Result<Vec<Vec<crate::infer::qa::Answer>>> {
    let encoded = run.encode(sentences, Some(items));
    let tagged = run.tag::<B>(&encoded, false, true, spans_for(top_k, Some(items)), device, reporter)?.tagged;
    Ok(match top_k {
        Some(k) => crate::infer::qa::answered_top(items, &tagged, k),
        None => crate::infer::qa::answered(items, &tagged).into_iter().map(|a| a.into_iter().collect()).collect(),
    })
}

/// `token [gold] predicted` per line, a blank line after each sentence.
fn conll_output(input: &Input, tagged: &[infer::Tagged]) -> String {
    let mut out = String::new();
    for (s, t) in input.sentences.iter().zip(tagged) {
        for (i, w) in s.tokens.iter().enumerate() {
            if input.gold {
                out.push_str(&format!("{w} {} {}\n", s.tags[i], t.tags[i]));
            } else {
                out.push_str(&format!("{w} {}\n", t.tags[i]));
            }
        }
        out.push('\n');
    }
    out
}

#[derive(Serialize)]
struct JsonSpan {
    start: usize,
    end: usize,
    label: String,
    text: String,
}

#[derive(Serialize)]
struct JsonSentence<'a> {
    tokens: &'a [String],
    tags: Vec<String>,
    spans: Vec<JsonSpan>,
    confidence: Vec<f32>,
    /// With `--top-k`: the best tag sequences, best first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    top_k: Vec<JsonCandidate>,
}

/// One of a sentence's best tag sequences.
#[derive(Serialize)]
struct JsonCandidate {
    tags: Vec<String>,
    spans: Vec<JsonSpan>,
    probability: f64,
}

/// The spans of `tags` in `s`, with their text.
fn json_spans(s: &Sentence, tags: &[Tag], scheme: corpus::Scheme) -> Vec<JsonSpan> {
    scheme
        .decode(tags)
        .into_iter()
        .map(|sp| JsonSpan {
            text: join_tokens(&s.tokens[sp.start..sp.end]),
            start: sp.start,
            end: sp.end,
            label: sp.label,
        })
        .collect()
}

/// One JSON object per sentence: tokens, tags, spans, confidences (and
/// with `--top-k`, the best tag sequences with their probabilities).
fn jsonl_output(sentences: &[Sentence], tagged: &[infer::Tagged], scheme: corpus::Scheme) -> Result<String> {
    let mut out = String::new();
    for (s, t) in sentences.iter().zip(tagged) {
        let top_k = t
            .alternatives
            .iter()
            .map(|(tags, p)| JsonCandidate {
                tags: tags.iter().map(Tag::to_string).collect(),
                spans: json_spans(s, tags, scheme),
                probability: *p,
            })
            .collect();
        let j = JsonSentence {
            tokens: &s.tokens,
            tags: t.tags.iter().map(Tag::to_string).collect(),
            spans: json_spans(s, &t.tags, scheme),
            confidence: t.confidence.clone().unwrap_or_default(),
            top_k,
        };
        out.push_str(&serde_json::to_string(&j)?);
        out.push('\n');
    }
    Ok(out)
}

/// Tokens of a span as text: single CJK characters are joined directly,
/// anything else with spaces.
fn join_tokens(tokens: &[String]) -> String {
    let cjk = tokens.iter().all(|t| t.chars().count() == 1 && !t.is_ascii());
    tokens.join(if cjk { "" } else { " " })
}
