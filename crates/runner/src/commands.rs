//! `seqlab train`, `seqlab eval`, `seqlab predict`.

use crate::cli::{EvalArgs, InputFormat, OutputFormat, PredictArgs, TrainArgs};
use crate::config::{self, RunConfig};
use crate::evaluate::{score_predictions, tag_all, TaggedSplit};
use crate::prep::{self, Prepared};
use crate::rundir;
use crate::train::{build_model, encoder_name, train as train_loop, TrainOptions};
use crate::{dispatch, Job};
use anyhow::{Context, Result};
use burn::tensor::backend::AutodiffBackend;
use corpus::batch::Encoded;
use corpus::reader::{read_rows, RowOptions};
use corpus::{Dataset, Sentence, Tag, Vocabs};
use encoders::ops::SeqBackend;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

pub fn train(args: TrainArgs) -> Result<()> {
    let mut cfg = config::load(args.config.as_deref(), &args.set)?;
    if let Some(d) = args.data {
        cfg.data.dir = d;
    }
    if let Some(s) = args.seed {
        cfg.seed = s;
    }
    if let Some(e) = args.epochs {
        cfg.train.epochs = e.max(1);
    }
    if let Some(m) = args.max_memory {
        cfg.train.max_memory = m;
    }
    let budget = match cfg.train.max_memory.trim() {
        "" => None,
        m => Some(crate::memory::parse_bytes(m).context("train.max_memory")?),
    };
    let ds = Dataset::load(&cfg.data.dir)?;
    let prep = prep::prepare(&mut cfg, &ds)?;
    for n in &prep.notes {
        eprintln!("note: {n}");
    }
    let out =
        args.out.unwrap_or_else(|| rundir::runs_root().join(format!("{}-{}-s{}", cfg.name, prep.dataset, cfg.seed)));
    if !args.quiet {
        eprintln!(
            "training {} ({}, {} decoder) on {} ({} scheme, tagged as {}): {} sentences, {} tokens, {} tags; run folder {}",
            cfg.name,
            encoder_name(&cfg),
            format!("{:?}", cfg.model.decoder).to_lowercase(),
            prep.dataset,
            prep.vocabs.data_scheme,
            prep.vocabs.scheme,
            prep.train.len(),
            prep.train_tokens,
            prep.tags.len(),
            out.display()
        );
    }
    dispatch(args.device, TrainJob { cfg, prep, out, quiet: args.quiet, budget })
}

struct TrainJob {
    cfg: RunConfig,
    prep: Prepared,
    out: PathBuf,
    quiet: bool,
    /// `train.max_memory` in bytes.
    budget: Option<u64>,
}

/// Fits the training step into `budget` (see [`crate::memory::plan`]),
/// printing the decision. On CPU the budget covers the whole process (what
/// it holds now counts); on a GPU, the tensors of the step.
fn plan_memory<B: AutodiffBackend>(
    cfg: &mut RunConfig,
    prep: &Prepared,
    budget: u64,
    device: &B::Device,
    device_name: &str,
) -> Result<()> {
    use burn::module::Module;
    let params = build_model::<B>(cfg, &prep.vocabs, prep.pretrained.clone(), device).num_params();
    let len = prep.train.iter().map(|e| e.len()).max().unwrap_or(1);
    let word_len = prep.train.iter().flat_map(|e| e.chars.iter().map(Vec::len)).max().unwrap_or(1).max(1);
    let baseline = if device_name.starts_with("cuda") { 0 } else { crate::memory::rss().map_or(0, |r| r.0) };
    let shape = crate::memory::StepShape { batch: 1, len, word_len, params, tags: prep.vocabs.parsed_tags().len() };
    let d = crate::memory::plan(cfg, budget, baseline, shape)?;
    eprintln!("{}", d.message);
    Ok(())
}

impl Job for TrainJob {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let mut cfg = self.cfg;
        if let Some(budget) = self.budget {
            plan_memory::<B>(&mut cfg, &self.prep, budget, &device, device_name)?;
        }
        let opts = TrainOptions { out: &self.out, device_name, quiet: self.quiet };
        let s = train_loop::<B>(&cfg, &self.prep, &opts, &device)?;
        let f1 =
            |m: &Option<rundir::SplitMetrics>| m.as_ref().map_or("-".to_string(), |m| format!("{:.4}", m.overall.f1));
        println!(
            "{}: best epoch {} of {}, dev F1 {}, test F1 {}, {:.0} s, {:.0} tokens/s -> {}",
            s.name,
            s.best_epoch,
            s.epochs,
            f1(&s.dev),
            f1(&s.test),
            s.train_seconds,
            s.tokens_per_second,
            self.out.display()
        );
        Ok(())
    }
}

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

    /// Tags encoded sentences with the run's best model (long ones in
    /// windows, as the run was configured).
    pub fn tag<B: AutodiffBackend>(&self, data: &[Encoded], confidence: bool, device: &B::Device) -> Result<TaggedSplit>
    where
        B::InnerBackend: SeqBackend,
    {
        let model = build_model::<B::InnerBackend>(&self.cfg, &self.vocabs, None, device);
        let model = rundir::load_module::<B::InnerBackend, _>(model, &self.dir.join(rundir::MODEL), device)?;
        let tagged = tag_all(&model, &self.vocabs, data, self.cfg.data.windows(), confidence, device);
        if tagged.windowed > 0 {
            eprintln!(
                "note: {} of {} sentences were longer than data.max_len = {} and were tagged in overlapping windows",
                tagged.windowed,
                data.len(),
                self.cfg.data.max_len
            );
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

    pub fn encode(&self, sentences: &[Sentence]) -> Vec<Encoded> {
        prep::encode_untagged(&self.vocabs, sentences, self.cfg.data.max_word_chars)
    }
}

pub fn eval(args: EvalArgs) -> Result<()> {
    let mut run = LoadedRun::load(&args.run)?;
    run.set_windows(args.max_len, args.stride);
    let dir = args.data.clone().unwrap_or_else(|| run.cfg.data.dir.clone());
    let ds = Dataset::load(&dir)?;
    let split = ds
        .split(args.split)
        .with_context(|| format!("{}: no {} split", dir.display(), args.split.as_str()))?
        .sentences
        .clone();
    dispatch(args.device, EvalJob { run, split, json: args.json })
}

struct EvalJob {
    run: LoadedRun,
    split: Vec<Sentence>,
    json: bool,
}

impl Job for EvalJob {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let TaggedSplit { tagged, windowed } = self.run.tag::<B>(&self.run.encode(&self.split), false, &device)?;
        let counts = score_predictions(&self.split, &tagged);
        if self.json {
            let mut report = serde_json::to_value(counts.report())?;
            report["sentences"] = self.split.len().into();
            report["windowed"] = windowed.into();
            println!("{report}");
        } else {
            print!("{}", counts.conlleval_text());
        }
        Ok(())
    }
}

pub fn predict(args: PredictArgs) -> Result<()> {
    let mut run = LoadedRun::load(&args.run)?;
    run.set_windows(args.max_len, args.stride);
    let (name, text) = if args.input.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
        (PathBuf::from("<stdin>"), s.trim_start_matches('\u{feff}').to_string())
    } else {
        (args.input.clone(), corpus::io::read_text(&args.input)?)
    };
    let sentences = parse_input(&name, &text, args.input_format, run.vocabs.data_scheme)?;
    dispatch(args.device, PredictJob { run, sentences, format: args.format })
}

/// Input sentences; `gold` is true when they carry tags.
struct Input {
    sentences: Vec<Sentence>,
    gold: bool,
}

fn parse_input(path: &Path, text: &str, format: InputFormat, scheme: corpus::Scheme) -> Result<Input> {
    let as_conll = match format {
        InputFormat::Conll => true,
        InputFormat::Text => false,
        InputFormat::Auto => looks_like_conll(text),
    };
    if !as_conll {
        let (tokens, _) = corpus::reader::parse_plain(text);
        if tokens.is_empty() {
            anyhow::bail!("{}: no sentences (expected one whitespace-tokenised sentence per line)", path.display());
        }
        let sentences = tokens
            .into_iter()
            .enumerate()
            .map(|(i, t)| Sentence { tags: vec![Tag::O; t.len()], tokens: t, doc: 0, line: i + 1 })
            .collect();
        return Ok(Input { sentences, gold: false });
    }
    let raw = read_rows(path, text, RowOptions::default())?;
    let n = raw[0].rows[0].len();
    if n == 1 {
        let sentences = raw
            .into_iter()
            .map(|s| Sentence {
                tags: vec![Tag::O; s.rows.len()],
                tokens: s.rows.into_iter().map(|r| r[0].clone()).collect(),
                doc: s.doc,
                line: s.line,
            })
            .collect();
        return Ok(Input { sentences, gold: false });
    }
    let sentences = corpus::reader::parse_tagged(path, text, corpus::Columns::default(), Some(scheme))?;
    Ok(Input { sentences, gold: true })
}

/// Every non-blank line has the same number (≥ 2) of columns, and the last
/// column of each is a tag.
fn looks_like_conll(text: &str) -> bool {
    let mut width = None;
    let mut any = false;
    for (_, l) in corpus::io::numbered_lines(text) {
        let cols: Vec<&str> = l.split_ascii_whitespace().collect();
        if cols.is_empty() {
            continue;
        }
        any = true;
        if *width.get_or_insert(cols.len()) != cols.len() || cols.len() < 2 {
            return false;
        }
        if cols[0] != corpus::reader::DOCSTART && Tag::parse(cols[cols.len() - 1]).is_err() {
            return false;
        }
    }
    any
}

struct PredictJob {
    run: LoadedRun,
    sentences: Input,
    format: OutputFormat,
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
}

impl Job for PredictJob {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let sentences = &self.sentences.sentences;
        let want_conf = self.format == OutputFormat::Jsonl;
        let tagged = self.run.tag::<B>(&self.run.encode(sentences), want_conf, &device)?.tagged;
        let mut out = String::new();
        match self.format {
            OutputFormat::Conll => {
                for (s, t) in sentences.iter().zip(&tagged) {
                    for (i, w) in s.tokens.iter().enumerate() {
                        if self.sentences.gold {
                            out.push_str(&format!("{w} {} {}\n", s.tags[i], t.tags[i]));
                        } else {
                            out.push_str(&format!("{w} {}\n", t.tags[i]));
                        }
                    }
                    out.push('\n');
                }
            }
            OutputFormat::Jsonl => {
                let scheme = self.run.vocabs.data_scheme;
                for (s, t) in sentences.iter().zip(&tagged) {
                    let spans = scheme
                        .decode(&t.tags)
                        .into_iter()
                        .map(|sp| JsonSpan {
                            text: join_tokens(&s.tokens[sp.start..sp.end]),
                            start: sp.start,
                            end: sp.end,
                            label: sp.label,
                        })
                        .collect();
                    let j = JsonSentence {
                        tokens: &s.tokens,
                        tags: t.tags.iter().map(Tag::to_string).collect(),
                        spans,
                        confidence: t.confidence.clone().unwrap_or_default(),
                    };
                    out.push_str(&serde_json::to_string(&j)?);
                    out.push('\n');
                }
            }
        }
        print!("{out}");
        Ok(())
    }
}

/// Tokens of a span as text: single CJK characters are joined directly,
/// anything else with spaces.
fn join_tokens(tokens: &[String]) -> String {
    let cjk = tokens.iter().all(|t| t.chars().count() == 1 && !t.is_ascii());
    tokens.join(if cjk { "" } else { " " })
}
