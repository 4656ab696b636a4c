//! `seqlab train`, `seqlab eval`, `seqlab predict`.

use crate::cli::{EvalArgs, HeadsArgs, InputFormat, OutputFormat, PredictArgs, TrainArgs, VisualizeArgs};
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
use corpus::{Sentence, Tag, Vocabs};
use encoders::ops::SeqBackend;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

pub fn train(args: TrainArgs) -> Result<()> {
    let mut cfg = match &args.resume {
        Some(dir) => {
            if args.config.is_some() || args.seed.is_some() || !args.set.is_empty() {
                anyhow::bail!(
                    "--resume continues a run with its own config.toml and seed; drop --config/--seed/--set (--epochs may extend it)"
                );
            }
            if args.max_memory.is_some() {
                eprintln!("note: --max-memory is ignored when resuming: the run keeps its batch");
            }
            if !dir.join(rundir::CONFIG).is_file() {
                anyhow::bail!("{} is not a seqlab run folder (no {})", dir.display(), rundir::CONFIG);
            }
            config::load(Some(&dir.join(rundir::CONFIG)), &[])?
        }
        None => config::load(args.config.as_deref(), &args.set)?,
    };
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
        // A resumed run keeps the batch its plan chose.
        _ if args.resume.is_some() => None,
        "" => None,
        m => Some(crate::memory::parse_bytes(m).context("train.max_memory")?),
    };
    let tokenizer = match &args.resume {
        // A run keeps the tokenizer it was trained with.
        Some(dir) if dir.join(crate::tokenizer::FILE).is_file() => dir.join(crate::tokenizer::FILE),
        _ => prep::tokenizer_path(&cfg, &cfg.data.dir),
    };
    let ds = prep::load_dataset(&cfg.data.dir, Some(&tokenizer))?;
    prep::check_question_mode(&cfg, &ds)?;
    let prep = prep::prepare(&mut cfg, &ds)?;
    for n in &prep.notes {
        eprintln!("note: {n}");
    }
    if let Some(dir) = &args.resume {
        let saved = Vocabs::load(&dir.join(rundir::VOCAB))?;
        if saved != prep.vocabs {
            anyhow::bail!(
                "{}: the data in {} no longer gives the run's vocabularies (changed since the run started?)",
                dir.display(),
                cfg.data.dir.display()
            );
        }
    }
    let out = match (&args.resume, args.out) {
        (Some(dir), _) => dir.clone(),
        (None, Some(o)) => o,
        (None, None) => rundir::runs_root().join(format!("{}-{}-s{}", cfg.name, prep.dataset, cfg.seed)),
    };
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
    if ds.is_qa() && args.resume.is_none() {
        // The run keeps a copy of its tokenizer: eval and predict cut text the same way.
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        corpus::io::write_atomic(&out.join(crate::tokenizer::FILE), corpus::io::read_text(&tokenizer)?)?;
    }
    let resume = args.resume.is_some();
    dispatch(args.device, TrainJob { cfg, prep, out, quiet: args.quiet, budget, resume })
}

struct TrainJob {
    cfg: RunConfig,
    prep: Prepared,
    out: PathBuf,
    quiet: bool,
    resume: bool,
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
        let opts = TrainOptions { out: &self.out, device_name, quiet: self.quiet, resume: self.resume };
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

    /// The run's best model, on an inference backend.
    pub fn model<B: SeqBackend>(&self, device: &B::Device) -> Result<encoders::Tagger<B>> {
        let model = build_model::<B>(&self.cfg, &self.vocabs, None, device);
        rundir::load_module::<B, _>(model, &self.dir.join(rundir::MODEL), device)
    }

    /// The sentences of `split` of `data` (default: the run's dataset).
    pub fn split(&self, data: Option<&Path>, split: corpus::SplitName) -> Result<Vec<Sentence>> {
        Ok(self.split_with_answers(data, split)?.sentences)
    }

    /// [`Self::split`] with, for QA data, what maps tags back to answers.
    pub fn split_with_answers(&self, data: Option<&Path>, split: corpus::SplitName) -> Result<corpus::Split> {
        let dir = data.map_or_else(|| self.cfg.data.dir.clone(), Path::to_path_buf);
        let tokenizer = self.dir.join(crate::tokenizer::FILE);
        let ds = prep::load_dataset(&dir, tokenizer.is_file().then_some(tokenizer.as_path()))?;
        Ok(ds.split(split).with_context(|| format!("{}: no {} split", dir.display(), split.as_str()))?.clone())
    }

    /// Tags encoded sentences with the run's best model (long ones in
    /// windows, as the run was configured).
    pub fn tag<B: AutodiffBackend>(&self, data: &[Encoded], confidence: bool, device: &B::Device) -> Result<TaggedSplit>
    where
        B::InnerBackend: SeqBackend,
    {
        let model = self.model::<B::InnerBackend>(device)?;
        let tagged = tag_all(&model, &self.vocabs, data, self.cfg.data.windows(), confidence, device)?;
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
    let split = run.split_with_answers(args.data.as_deref(), args.split)?;
    dispatch(args.device, EvalJob { run, split: split.sentences, answers: split.qa, json: args.json })
}

struct EvalJob {
    run: LoadedRun,
    split: Vec<Sentence>,
    answers: Option<Vec<corpus::squad::QaItem>>,
    json: bool,
}

impl Job for EvalJob {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let confident = self.answers.is_some();
        let TaggedSplit { tagged, windowed } = self.run.tag::<B>(&self.run.encode(&self.split), confident, &device)?;
        let counts = score_predictions(&self.split, &tagged);
        let qa = self.answers.as_ref().map(|items| {
            let answers = crate::evaluate::qa_answers(items, &tagged, &self.run.vocabs.parsed_tags());
            crate::evaluate::qa_score(items, &answers)
        });
        if self.json {
            let mut report = serde_json::to_value(counts.report())?;
            report["sentences"] = self.split.len().into();
            report["windowed"] = windowed.into();
            if let Some(qa) = qa {
                report["qa"] = serde_json::to_value(qa)?;
            }
            println!("{report}");
        } else {
            print!("{}", counts.conlleval_text());
            if let Some(qa) = qa {
                println!("{}", crate::evaluate::qa_line(&qa));
            }
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
    if run.cfg.model.question != encoders::QuestionMode::None {
        let (sentences, items) = qa_input(&run, &name, &text)?;
        let sentences = Input { sentences, gold: false };
        return dispatch(args.device, PredictJob { run, sentences, format: args.format, qa: Some(items) });
    }
    let sentences = parse_input(&name, &text, args.input_format, run.vocabs.data_scheme)?;
    dispatch(args.device, PredictJob { run, sentences, format: args.format, qa: None })
}

/// Questions to answer for a QA run: a SQuAD-format file (gold answers
/// optional), cut into sub-tokens by the run's own tokenizer.
fn qa_input(run: &LoadedRun, name: &Path, text: &str) -> Result<(Vec<Sentence>, Vec<corpus::squad::QaItem>)> {
    let path = run.dir.join(crate::tokenizer::FILE);
    if !path.is_file() {
        anyhow::bail!(
            "{}: this QA run has no {} to cut questions into sub-tokens",
            run.dir.display(),
            crate::tokenizer::FILE
        );
    }
    let tok = crate::tokenizer::load(&path)?;
    if !text.trim_start().starts_with('{') {
        anyhow::bail!(
            "{}: this tagger answers questions: expected a SQuAD-format JSON file ({{\"data\": [{{\"paragraphs\": [{{\"context\", \"qas\": [{{\"id\", \"question\"}}]}}]}}]}})",
            name.display()
        );
    }
    let tokenize = |t: &str| crate::tokenizer::pieces(&tok, t);
    let (sentences, items) = corpus::squad::read_qa(name, text, &tokenize, corpus::squad::Answers::Optional)?;
    if sentences.is_empty() {
        anyhow::bail!("{}: no questions", name.display());
    }
    Ok((sentences, items))
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
            .map(|(i, t)| Sentence { tags: vec![Tag::O; t.len()], tokens: t, doc: 0, line: i + 1, question: None })
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
                question: None,
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
    /// QA runs: the questions' contexts and gold answers (if any); the
    /// output is then the official predictions JSON, `{"id": "answer"}`.
    qa: Option<Vec<corpus::squad::QaItem>>,
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
        let want_conf = self.format == OutputFormat::Jsonl || self.qa.is_some();
        let tagged = self.run.tag::<B>(&self.run.encode(sentences), want_conf, &device)?.tagged;
        if let Some(items) = &self.qa {
            let answers = crate::evaluate::qa_answers(items, &tagged, &self.run.vocabs.parsed_tags());
            println!("{}", crate::evaluate::qa_predictions_json(items, &answers));
            if items.iter().all(|i| !i.answers.is_empty()) {
                let qa = crate::evaluate::qa_score(items, &answers);
                eprintln!("{}", crate::evaluate::qa_line(&qa));
            }
            return Ok(());
        }
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

/// The attention tools (`heads`, `visualize`) need an attention tagger
/// whose attention is over one sequence: not question [SEP] context.
fn check_attention_run(run: &LoadedRun, dir: &Path, command: &str, missing: &str) -> Result<()> {
    if run.cfg.model.encoder.kind != encoders::EncoderKind::Attention {
        anyhow::bail!("{}: a {} tagger {missing}", dir.display(), encoder_name(&run.cfg));
    }
    if run.cfg.model.question == encoders::QuestionMode::Concat {
        anyhow::bail!(
            "{}: its attention spans question [SEP] context, which {command} does not lay out yet (a cross-attention run shows the context's self-attention)",
            dir.display()
        );
    }
    Ok(())
}

pub fn heads(args: HeadsArgs) -> Result<()> {
    let run = LoadedRun::load(&args.run)?;
    check_attention_run(&run, &args.run, "heads", "has no attention heads")?;
    let split = run.split(args.data.as_deref(), args.split)?;
    // Training writes the dev split's heads.csv; other splits get their own file.
    let name = match args.split {
        corpus::SplitName::Dev => "heads.csv".to_string(),
        other => format!("heads.{}.csv", other.as_str()),
    };
    let out = args.out.clone().unwrap_or_else(|| args.run.clone()).join(name);
    dispatch(args.device, HeadsJob { run, split, json: args.json, out })
}

struct HeadsJob {
    run: LoadedRun,
    split: Vec<Sentence>,
    json: bool,
    out: PathBuf,
}

impl Job for HeadsJob {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let model = self.run.model::<B::InnerBackend>(&device)?;
        let tokens: Vec<Vec<String>> = self.split.iter().map(|s| s.tokens.clone()).collect();
        let stats = crate::heads::diagnose(&model, &self.run.encode(&self.split), &tokens, &device)?;
        write_heads_csv(&self.out, &stats)?;
        if self.json {
            for h in &stats {
                println!("{}", serde_json::to_string(h)?);
            }
        } else {
            print!("{}", crate::heads::table(&stats));
            println!("{} sentences; wrote {}", self.split.len(), self.out.display());
        }
        if let Some(w) = crate::heads::collapse_warning(&stats) {
            eprintln!("warning: {w}");
        }
        Ok(())
    }
}

/// `heads.csv`: one row per head.
pub fn write_heads_csv(path: &Path, stats: &[crate::heads::HeadStats]) -> Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for h in stats {
        w.serialize(h)?;
    }
    corpus::io::write_atomic(path, w.into_inner()?)?;
    Ok(())
}

/// The tokens of `--text`: whitespace-separated, or one per character for
/// Chinese (CJK) text written without spaces.
pub fn text_tokens(text: &str) -> Vec<String> {
    let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let cjk = |c: char| ('\u{4e00}'..='\u{9fff}').contains(&c) || ('\u{3400}'..='\u{4dbf}').contains(&c);
    if words.len() == 1 && words[0].chars().count() > 1 && words[0].chars().any(cjk) {
        words[0].chars().map(|c| c.to_string()).collect()
    } else {
        words
    }
}

pub fn visualize(args: VisualizeArgs) -> Result<()> {
    let run = LoadedRun::load(&args.run)?;
    check_attention_run(&run, &args.run, "visualize", "has no attention to draw")?;
    let (tokens, label) = match (&args.text, args.sentence) {
        (Some(t), _) => (text_tokens(t), "text".to_string()),
        (None, Some(n)) => {
            let split = run.split(args.data.as_deref(), args.split)?;
            let s = split.get(n).with_context(|| {
                format!("--sentence {n}: the {} split has {} sentences", args.split.as_str(), split.len())
            })?;
            (s.tokens.clone(), format!("{} sentence {n}", args.split.as_str()))
        }
        (None, None) => anyhow::bail!("give --sentence N (of --split) or --text \"…\""),
    };
    if tokens.is_empty() {
        anyhow::bail!("nothing to show: the sentence has no tokens");
    }
    dispatch(args.device, VisualizeJob { run, tokens, label, args })
}

struct VisualizeJob {
    run: LoadedRun,
    tokens: Vec<String>,
    label: String,
    args: VisualizeArgs,
}

impl Job for VisualizeJob {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        use crate::visualize as vis;
        let VisualizeJob { run, tokens, label, args } = self;
        let model = run.model::<B::InnerBackend>(&device)?;
        let sentence = Sentence { tokens: tokens.clone(), tags: Vec::new(), doc: 0, line: 1, question: None };
        let encoded = run.encode(std::slice::from_ref(&sentence));
        let tags: Vec<String> = crate::evaluate::tag_all(
            &model,
            &run.vocabs,
            &encoded,
            crate::evaluate::Windows { max_len: 0, stride: 0 },
            false,
            &device,
        )?
        .tagged[0]
            .tags
            .iter()
            .map(|t| t.to_string())
            .collect();
        let batch = corpus::batch::pad(&encoded, &[0]);
        let input = encoders::TaggerInput::<B::InnerBackend>::from_padded(&batch, &device);
        let layers = model.forward(&input, true)?.attention;
        let layer = args.layer.unwrap_or(layers.len().saturating_sub(1));
        let w = layers
            .get(layer)
            .with_context(|| format!("--layer {layer}: the model has layers 0–{}", layers.len().saturating_sub(1)))?
            .clone();
        let [_, h, l, _] = w.dims();
        let w: Vec<f32> = w.into_data().iter::<f32>().collect(); // [1, H, L, L]
        let heads: Vec<usize> = if args.heads == "all" {
            (0..h).collect()
        } else {
            args.heads
                .split(',')
                .map(|x| {
                    x.trim().parse::<usize>().ok().filter(|&i| i < h).with_context(|| {
                        format!("--heads `{x}`: expected `all` or head numbers below {h}, separated by commas")
                    })
                })
                .collect::<Result<_>>()?
        };
        let at = |head: usize, i: usize, j: usize| w[(head * l + i) * l + j];
        let focus = match &args.focus {
            Some(f) => match f.parse::<usize>() {
                Ok(i) if i < l => i,
                _ => tokens.iter().position(|t| t == f).with_context(|| {
                    format!("--focus `{f}`: neither a token index below {l} nor a token of the sentence")
                })?,
            },
            // The token that receives the most attention, over the drawn heads.
            None => {
                let got: Vec<f32> =
                    (0..l).map(|j| heads.iter().map(|&hd| (0..l).map(|i| at(hd, i, j)).sum::<f32>()).sum()).collect();
                (0..l).max_by(|&a, &b| got[a].total_cmp(&got[b])).unwrap_or(0)
            }
        };
        let (range, note) = vis::visible_range(l, args.max_tokens, focus);
        let labels: Vec<String> = range.clone().map(|i| format!("{i}:{}", tokens[i])).collect();
        std::fs::create_dir_all(&args.out)?;
        let suffix = if note.is_empty() { String::new() } else { format!(" ({note})") };
        let mut images = Vec::new();
        let sub = |head: usize| -> Vec<f32> {
            range.clone().flat_map(|i| range.clone().map(move |j| (i, j))).map(|(i, j)| at(head, i, j)).collect()
        };
        for &hd in &heads {
            let name = format!("layer{layer}-head{hd}.svg");
            let title = format!("layer {layer}, head {hd}: rows attend to columns{suffix}");
            vis::write(&args.out, &name, &vis::heatmap_svg(&title, &sub(hd), &labels, &labels))?;
            images.push((format!("layer {layer}, head {hd}"), name));
        }
        // The mean of the drawn heads, rows and columns reordered by clustering.
        let n = range.len();
        let subs: Vec<Vec<f32>> = heads.iter().map(|&hd| sub(hd)).collect();
        let mean: Vec<f32> = (0..n * n).map(|k| subs.iter().map(|m| m[k]).sum::<f32>() / heads.len() as f32).collect();
        let row_order = vis::cluster_order(&mean, n, n);
        let transposed: Vec<f32> = (0..n * n).map(|k| mean[(k % n) * n + k / n]).collect();
        let col_order = vis::cluster_order(&transposed, n, n);
        let clustered: Vec<f32> =
            row_order.iter().flat_map(|&i| col_order.iter().map(|&j| mean[i * n + j]).collect::<Vec<_>>()).collect();
        let name = format!("layer{layer}-clustered.svg");
        vis::write(
            &args.out,
            &name,
            &vis::heatmap_svg(
                &format!("layer {layer}, mean of {} heads, clustered rows and columns{suffix}", heads.len()),
                &clustered,
                &row_order.iter().map(|&i| labels[i].clone()).collect::<Vec<_>>(),
                &col_order.iter().map(|&j| labels[j].clone()).collect::<Vec<_>>(),
            ),
        )?;
        images.push((format!("layer {layer}, clustered mean of the heads"), name));
        let order = serde_json::json!({
            "rows": row_order.iter().map(|&i| range.start + i).collect::<Vec<_>>(),
            "cols": col_order.iter().map(|&j| range.start + j).collect::<Vec<_>>(),
        });
        vis::write(&args.out, &format!("layer{layer}-clustered-order.json"), &format!("{order}\n"))?;
        // What the focus token looks at, per head.
        for &hd in &heads {
            let name = format!("layer{layer}-head{hd}-focus.svg");
            let values: Vec<f32> = range.clone().map(|j| at(hd, focus, j)).collect();
            let title =
                format!("what \"{}\" (token {focus}) attends to: layer {layer}, head {hd}{suffix}", tokens[focus]);
            vis::write(&args.out, &name, &vis::bars_svg(&title, &values, &labels))?;
            images.push((format!("\"{}\", head {hd}", tokens[focus]), name));
        }
        let title = format!("{}: {label}", run.cfg.name);
        let html =
            vis::index_html(&vis::Page { title: &title, tokens: &tokens, tags: &tags, note: &note, images: &images });
        vis::write(&args.out, "index.html", &html)?;
        println!(
            "{} pictures of layer {layer} for {label} ({l} tokens) -> {}",
            images.len(),
            args.out.join("index.html").display()
        );
        Ok(())
    }
}
