//! Each command: its arguments into a library call on the chosen backend,
//! and what comes back printed.

use crate::backend::{dispatch, Job};
use crate::cli::{
    CompareArgs, ConcatArgs, EvalArgs, ExplainArgs, HeadsArgs, HeadsSweepArgs, InputFormat, OnArg, OutputFormat,
    PredictArgs, QaAttentionArgs, QaBaselineArgs, ScoreArgs, SplitQaArgs, StatsArgs, SweepArgs, TokenizerTrainArgs,
    ToyArgs, TrainArgs, VisualizeArgs,
};
use crate::console::Console;
use anyhow::{Context, Result};
use corpus::qa::squad::QaItem;
use corpus::score::{Mode, ScoreFile};
use corpus::Sentence;
use encoders::ops::{SeqBackend, TrainBackend};
use runner::analysis::visualize::PictureOptions;
use runner::infer::input::{self, Input};
use runner::infer::run::LoadedRun;
use runner::setup::launch::{Launch, TrainRequest};
use runner::train::rundir::{QaMetrics, SplitMetrics, Summary};
use runner::train::trainer::TrainOptions;
use std::io::Read;
use std::path::{Path, PathBuf};

pub fn train(args: TrainArgs) -> Result<()> {
    let started = std::time::Instant::now();
    if args.verbose && matches!(args.device, crate::cli::DeviceArg::Cuda | crate::cli::DeviceArg::Wgpu) {
        // The CPU backends compile no kernels: nothing to count there.
        runner::bench::kernels::install();
    }
    let req = TrainRequest {
        config: args.config,
        set: args.set,
        data: args.data,
        seed: args.seed,
        epochs: args.epochs,
        max_memory: args.max_memory,
        resume: args.resume,
        out: args.out,
    };
    let launch = runner::setup::launch::launch(req, args.quiet, &Console)?;
    dispatch(args.device, TrainJob { launch, quiet: args.quiet, verbose: args.verbose, started })
}

struct TrainJob {
    launch: Launch,
    quiet: bool,
    verbose: bool,
    started: std::time::Instant,
}

impl Job for TrainJob {
    fn run<B: TrainBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let Launch { mut cfg, prep, out, resume, budget } = self.launch;
        if let Some(budget) = budget {
            runner::setup::launch::plan_memory::<B>(&mut cfg, &prep, budget, &device, &Console)?;
        }
        let opts = TrainOptions {
            out: &out,
            device_name,
            quiet: self.quiet,
            verbose: self.verbose,
            started: self.started,
            resume,
            reporter: &Console,
        };
        let s = runner::train::trainer::train::<B>(&cfg, &prep, &opts, &device)?;
        println!("{}", finished_line(&s, &out));
        Ok(())
    }
}

/// What `seqlab train` prints when it is done: the figure the run was
/// selected on, dev and test (entity F1; for QA the answers' F1 and EM
/// under the dataset's metric, then the answer chunk's span F1).
fn finished_line(s: &Summary, out: &Path) -> String {
    let f1 = |m: &Option<SplitMetrics>| m.as_ref().map_or("-".to_string(), |m| format!("{:.4}", m.overall.f1));
    let scores = match &s.qa {
        Some(qa) => {
            let answer = |m: &Option<QaMetrics>| {
                m.as_ref().map_or("-".to_string(), |m| format!("{:.4} (EM {:.4})", m.f1, m.exact_match))
            };
            format!(
                "dev answer F1 {}, test answer F1 {} ({} metric); span F1 dev {}, test {}",
                answer(&qa.dev),
                answer(&qa.test),
                qa.metric.trim_start_matches("official "),
                f1(&s.dev),
                f1(&s.test)
            )
        }
        None => format!("dev F1 {}, test F1 {}", f1(&s.dev), f1(&s.test)),
    };
    format!(
        "{}: best epoch {} of {}, {scores}, {:.0} s, {:.0} tokens/s -> {}",
        s.name,
        s.best_epoch,
        s.epochs,
        s.train_seconds,
        s.tokens_per_second,
        out.display()
    )
}

pub fn eval(args: EvalArgs) -> Result<()> {
    let mut run = LoadedRun::load(&args.run)?;
    run.set_windows(args.max_len, args.stride);
    let split = run.split_with_answers(args.data.as_deref(), args.split)?;
    let answers = match (split.qa, args.shuffle_questions) {
        (Some(items), true) => {
            eprintln!("question-shuffle ablation: each context is read against another context's question");
            Some(runner::infer::qa::shuffled_questions(&items))
        }
        (None, true) => anyhow::bail!("--shuffle-questions needs a QA run (this run tags sentences)"),
        (answers, false) => answers,
    };
    dispatch(args.device, EvalJob { run, split: split.sentences, answers, json: args.json })
}

struct EvalJob {
    run: LoadedRun,
    split: Vec<Sentence>,
    answers: Option<Vec<QaItem>>,
    json: bool,
}

impl Job for EvalJob {
    fn run<B: TrainBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let e = runner::infer::run::evaluate::<B::InnerBackend>(
            &self.run,
            &self.split,
            self.answers.as_deref(),
            &device,
            &Console,
        )?;
        if self.json {
            println!("{}", e.json()?);
        } else {
            print!("{}", e.text());
        }
        Ok(())
    }
}

pub fn predict(args: PredictArgs) -> Result<()> {
    let top_k = args.top_k.map(runner::infer::nbest::check_k).transpose()?;
    let mut run = LoadedRun::load(&args.run)?;
    run.set_windows(args.max_len, args.stride);
    if let Some(question) = &args.question {
        if run.cfg.model.question == encoders::QuestionMode::None {
            anyhow::bail!("{}: --question needs a QA run (this run tags sentences)", args.run.display());
        }
        let context = match (&args.context, &args.context_file) {
            (Some(c), _) => c.clone(),
            (None, Some(f)) => corpus::io::read_text(f)?.trim_start_matches('\u{feff}').to_string(),
            (None, None) => anyhow::bail!("--question needs --context \"…\" or --context-file FILE"),
        };
        let (sentences, items) = input::one_question(&run.dir, question, &context)?;
        return dispatch(args.device, AnswerJob { run, sentences, items, top_k });
    }
    let (name, text) = if args.input.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
        (PathBuf::from("<stdin>"), s.trim_start_matches('\u{feff}').to_string())
    } else {
        (args.input.clone(), corpus::io::read_text(&args.input)?)
    };
    let format = match args.format {
        OutputFormat::Conll => input::OutputFormat::Conll,
        OutputFormat::Jsonl => input::OutputFormat::Jsonl,
    };
    if run.cfg.model.question != encoders::QuestionMode::None {
        let (sentences, items) = input::qa_input(&run.dir, &name, &text)?;
        let input = Input { sentences, gold: false };
        return dispatch(args.device, PredictJob { run, input, format, qa: Some(items), top_k });
    }
    let input_format = match args.input_format {
        InputFormat::Auto => input::InputFormat::Auto,
        InputFormat::Conll => input::InputFormat::Conll,
        InputFormat::Text => input::InputFormat::Text,
    };
    let tokenization = args.tokenize.unwrap_or_else(|| run.vocabs.tokenization());
    let input = input::parse_input(&name, &text, input_format, run.vocabs.data_scheme, tokenization)?;
    dispatch(args.device, PredictJob { run, input, format, qa: None, top_k })
}

struct AnswerJob {
    run: LoadedRun,
    sentences: Vec<Sentence>,
    items: Vec<QaItem>,
    top_k: Option<usize>,
}

impl Job for AnswerJob {
    fn run<B: TrainBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let (run, top_k) = (&self.run, self.top_k);
        let answers =
            runner::infer::run::answer::<B::InnerBackend>(run, &self.sentences, &self.items, top_k, &device, &Console)?;
        let answers = answers.into_iter().next().unwrap_or_default();
        if answers.is_empty() {
            println!("no answer: the context has no token");
        }
        for (c, a) in answers.iter().enumerate() {
            if top_k.is_some() {
                println!("{}.", c + 1);
            }
            println!("answer: {}", a.text);
            println!("characters: {}..{} of the context", a.start, a.end);
            println!("probability: {:.4}", a.probability);
        }
        if let Some(note) = top_k.and_then(|k| runner::infer::nbest::shortfall(&[answers.len()], k, "question")) {
            eprintln!("{note}");
        }
        Ok(())
    }
}

struct PredictJob {
    run: LoadedRun,
    input: Input,
    format: input::OutputFormat,
    /// QA runs: the questions' contexts and gold answers (if any).
    qa: Option<Vec<QaItem>>,
    top_k: Option<usize>,
}

impl Job for PredictJob {
    fn run<B: TrainBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let p = runner::infer::run::predict::<B::InnerBackend>(
            &self.run,
            &self.input,
            self.format,
            self.qa.as_deref(),
            self.top_k,
            &device,
            &Console,
        )?;
        print!("{}", p.output);
        if let Some(line) = p.score_line {
            eprintln!("{line}");
        }
        Ok(())
    }
}

/// The attention tools (`heads`, `visualize`) need an attention tagger.
fn check_attention_run(run: &LoadedRun, dir: &Path, missing: &str) -> Result<()> {
    if run.cfg.model.encoder.kind != encoders::EncoderKind::Attention {
        anyhow::bail!("{}: a {} tagger {missing}", dir.display(), runner::setup::model::encoder_name(&run.cfg));
    }
    Ok(())
}

pub fn heads(args: HeadsArgs) -> Result<()> {
    let run = LoadedRun::load(&args.run)?;
    check_attention_run(&run, &args.run, "has no attention heads")?;
    let split = run.split_with_answers(args.data.as_deref(), args.split)?;
    // Training writes the dev split's heads.csv; other splits get their own file.
    let name = match args.split {
        corpus::SplitName::Dev => "heads.csv".to_string(),
        other => format!("heads.{}.csv", other.as_str()),
    };
    let out = args.out.clone().unwrap_or_else(|| args.run.clone()).join(name);
    dispatch(args.device, HeadsJob { run, split: split.sentences, qa: split.qa, json: args.json, out })
}

struct HeadsJob {
    run: LoadedRun,
    split: Vec<Sentence>,
    /// A QA split's questions (the contexts are read against them).
    qa: Option<Vec<QaItem>>,
    json: bool,
    out: PathBuf,
}

impl Job for HeadsJob {
    fn run<B: TrainBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        use runner::analysis::heads;
        let model = self.run.model::<B::InnerBackend>(&device)?;
        let encoded = self.run.encode(&self.split, self.qa.as_deref());
        let stats = heads::diagnose(&model, &self.run.vocabs, &self.split, &encoded, &device)?;
        heads::write_heads_csv(&self.out, &stats)?;
        if self.json {
            let report = serde_json::json!({
                "sentences": self.split.len(),
                "heads": stats,
                "layers": heads::layer_summaries(&stats),
            });
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print!("{}", heads::table(&stats));
            println!("{} sentences; wrote {}", self.split.len(), self.out.display());
        }
        if let Some(w) = heads::collapse_warning(
            &stats,
            (self.run.cfg.data.train_sentences > 0).then_some(self.run.cfg.data.train_sentences),
            self.run.vocabs.tokenization(),
        ) {
            eprintln!("warning: {w}");
        }
        Ok(())
    }
}

pub fn explain(args: ExplainArgs) -> Result<()> {
    if args.max_k == 0 || args.items == 0 {
        anyhow::bail!("--max-k and --items must be at least 1 (got {} and {})", args.max_k, args.items);
    }
    let run = LoadedRun::load(&args.run)?;
    let split = run.split_with_answers(args.data.as_deref(), args.split)?;
    let out = args.out.clone().unwrap_or_else(|| args.run.join(format!("explain-{}", args.split.as_str())));
    let options = runner::analysis::explain::Options { max_k: args.max_k, items: args.items, seed: args.seed };
    let title = format!("{} ({} split): erasing the top-k tokens", args.run.display(), args.split.as_str());
    dispatch(args.device, ExplainJob { run, split: split.sentences, qa: split.qa, options, out, title })
}

struct ExplainJob {
    run: LoadedRun,
    split: Vec<Sentence>,
    qa: Option<Vec<QaItem>>,
    options: runner::analysis::explain::Options,
    out: PathBuf,
    title: String,
}

impl Job for ExplainJob {
    fn run<B: TrainBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        use burn::module::AutodiffModule;
        use runner::analysis::explain;
        let model = self.run.model::<B>(&device)?;
        let inference = model.valid(); // the same weights, read once
        let encoded = self.run.encode(&self.split, self.qa.as_deref());
        let e = explain::explain(&model, &inference, &self.run.vocabs, &encoded, &self.options, &device)?;
        if e.items.is_empty() {
            anyhow::bail!("no prediction to explain in the {} sentences of the split", self.split.len());
        }
        print!("{}", explain::write(&self.out, &e, &self.title)?);
        println!("wrote {}", self.out.display());
        Ok(())
    }
}

pub fn visualize(args: VisualizeArgs) -> Result<()> {
    let run = LoadedRun::load(&args.run)?;
    check_attention_run(&run, &args.run, "has no attention to draw")?;
    let (tokens, question, label) = match (&args.text, args.sentence) {
        (Some(t), _) => (args.tokenize.unwrap_or_else(|| run.vocabs.tokenization()).split(t), None, "text".to_string()),
        (None, Some(n)) => {
            let split = run.split_with_answers(args.data.as_deref(), args.split)?;
            let s = split.sentences.get(n).with_context(|| {
                format!("--sentence {n}: the {} split has {} sentences", args.split.as_str(), split.sentences.len())
            })?;
            // A QA context is read against its question.
            let question = split.qa.as_ref().map(|items| items[n].clone());
            (s.tokens.clone(), question, format!("{} sentence {n}", args.split.as_str()))
        }
        (None, None) => anyhow::bail!("give --sentence N (of --split) or --text \"…\""),
    };
    if tokens.is_empty() {
        anyhow::bail!("nothing to show: the sentence has no tokens");
    }
    let opts = PictureOptions {
        layer: args.layer,
        heads: args.heads.clone(),
        focus: args.focus.clone(),
        max_tokens: args.max_tokens,
        out: args.out.clone(),
    };
    dispatch(args.device, VisualizeJob { run, tokens, question, label, opts })
}

struct VisualizeJob {
    run: LoadedRun,
    tokens: Vec<String>,
    question: Option<corpus::qa::squad::QaItem>,
    label: String,
    opts: PictureOptions,
}

impl Job for VisualizeJob {
    fn run<B: TrainBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let (run, question) = (&self.run, self.question.as_ref());
        let line = runner::analysis::visualize::pictures::<B::InnerBackend>(
            run,
            &self.tokens,
            question,
            &self.label,
            &self.opts,
            &device,
        )?;
        println!("{line}");
        Ok(())
    }
}

pub fn compare(args: &CompareArgs) -> Result<()> {
    let w = runner::report::compare::run(&args.runs, &args.out, args.samples)?;
    print!("{}", w.markdown);
    let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
    eprintln!("wrote {}", files.join(", "));
    Ok(())
}

pub fn sweep(args: SweepArgs) -> Result<()> {
    if !(args.poll > 0.0 && args.poll.is_finite()) {
        anyhow::bail!("--poll must be a number of seconds above 0");
    }
    let req = runner::sweep::SweepRequest {
        grid: args.grid,
        out: args.out,
        on: match args.on {
            OnArg::Local => runner::sweep::On::Local,
            OnArg::Slurm => runner::sweep::On::Slurm,
        },
        dry_run: args.dry_run,
        lanes: args.lanes,
        threads: args.threads_per_run,
        run: args.run,
        slurm: runner::sweep::grid::SlurmSpec {
            partition: args.partition,
            time: args.time,
            gres: args.gres,
            max_parallel: args.max_parallel,
            extra: args.sbatch_args,
        },
        poll: std::time::Duration::from_secs_f64(args.poll),
        exe: std::env::current_exe().context("the path of the seqlab binary")?,
    };
    runner::sweep::sweep(&req, &Console)
}

pub fn heads_sweep(args: &HeadsSweepArgs) -> Result<()> {
    print!("{}", runner::analysis::sweep::run(&args.runs, &args.out, args.pictures.as_deref())?);
    Ok(())
}

pub fn score(args: &ScoreArgs) -> Result<()> {
    let file = ScoreFile::read(&args.file, args.keep_docstart)?;
    let mode = args.scheme.map_or(Mode::Conlleval, Mode::Strict);
    let counts = file.score(mode);
    if args.json {
        println!("{}", serde_json::to_string(&counts.report())?);
    } else {
        print!("{}", counts.conlleval_text());
    }
    Ok(())
}

pub fn toy(args: &ToyArgs) -> Result<()> {
    if args.sentences == 0 {
        anyhow::bail!("--sentences must be at least 1");
    }
    corpus::toy::write_dataset(&args.out, args.lang, args.sentences, args.seed)?;
    println!(
        "wrote {} ({} training sentences, language {}, seed {})",
        args.out.display(),
        args.sentences,
        args.lang,
        args.seed
    );
    Ok(())
}

pub fn stats(args: &StatsArgs) -> Result<()> {
    let ds = corpus::Dataset::load(&args.dir)?;
    let stats = corpus::stats::stats(&ds);
    if args.json {
        println!("{}", serde_json::to_string(&stats)?);
    } else {
        print!("{}", stats.table());
        for (split, label) in ds.unseen_labels() {
            println!("note: type {label} occurs in {} but not in train", split.as_str());
        }
    }
    Ok(())
}

pub fn concat(args: &ConcatArgs) -> Result<()> {
    if args.max_len == 0 {
        anyhow::bail!("--max-len must be at least 1");
    }
    let c = corpus::concat::concatenate_file(&args.file, &args.out, args.max_len)?;
    println!(
        "{}: {} sentences joined into {} passages of at most {} tokens (mean {:.1}, longest {}); \
         {} sentences longer than that stay whole",
        args.out.display(),
        c.sentences,
        c.passages.len(),
        args.max_len,
        c.mean_len(),
        c.longest(),
        c.too_long
    );
    Ok(())
}

pub fn split_qa(args: &SplitQaArgs) -> Result<()> {
    let file = corpus::qa::squad::SquadFile::read(&args.file)?;
    let n = file.data.len();
    if args.held_out == 0 || args.held_out + args.dev >= n {
        anyhow::bail!(
            "--held-out must be at least 1 and --held-out + --dev ({} + {}) below the file's {n} articles, so that some are left to train on",
            args.held_out,
            args.dev
        );
    }
    if file.repaired > 0 {
        println!(
            "{}: {} answers' offsets repaired to the nearest occurrence of their text (written repaired)",
            args.file.display(),
            file.repaired
        );
    }
    let (train, dev, test) = file.split_train_dev_test(args.held_out, args.dev);
    let mut parts = vec![("train.json", &train)];
    if args.dev > 0 {
        parts.push(("dev.json", &dev));
    } else if args.out.join("dev.json").exists() {
        eprintln!("note: {} is left from an earlier split; remove it", args.out.join("dev.json").display());
    }
    parts.push(("test.json", &test));
    for (name, part) in parts {
        part.write(&args.out.join(name))?;
        let s = part.stats();
        println!(
            "{}: {} articles, {} paragraphs, {} questions, {} answers",
            args.out.join(name).display(),
            s.articles,
            s.paragraphs,
            s.questions,
            s.answers
        );
    }
    Ok(())
}

pub fn qa_baseline(args: &QaBaselineArgs) -> Result<()> {
    use corpus::qa::baseline::{evaluate, table, Idf};
    use corpus::qa::squad::{qa_files, SquadFile};
    let files = qa_files(&args.data).with_context(|| {
        format!("{}: expected a folder of SQuAD-format *train*.json, *dev*.json, *test*.json", args.data.display())
    })?;
    let path_of = |split| files.iter().find(|(s, _)| *s == split).map(|(_, p)| p.clone());
    let path = path_of(args.split).with_context(|| {
        format!(
            "{}: no {} split (expected a *{}*.json file)",
            args.data.display(),
            args.split.as_str(),
            args.split.as_str()
        )
    })?;
    let file = SquadFile::read(&path)?;
    let contexts = file.data.iter().flat_map(|a| &a.paragraphs).map(|p| p.context.as_str());
    let metric = corpus::dataset::qa_metric_of(&args.data, contexts)?;
    let (idf, idf_from) = match path_of(corpus::SplitName::Train) {
        Some(train) if train != path => (Idf::from_file(&SquadFile::read(&train)?), train),
        _ => (Idf::from_file(&file), path.clone()),
    };
    let rows = evaluate(&file, &idf, metric.metric, args.seed);
    println!(
        "{} ({} split), {} questions; IDF from {}",
        path.display(),
        args.split.as_str(),
        file.stats().questions,
        idf_from.display()
    );
    if file.repaired > 0 {
        println!("note: {} answers' offsets repaired to the nearest occurrence of their text", file.repaired);
    }
    println!("note: {}\n", metric.note());
    print!("{}", table(&rows));
    if let Some(out) = &args.out {
        let json = serde_json::json!({
            "data": args.data, "split": args.split, "file": path, "metric": metric.metric.name(),
            "idf_from": idf_from, "seed": args.seed, "baselines": rows,
        });
        corpus::io::write_atomic(out, serde_json::to_string_pretty(&json)? + "\n")?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

pub fn train_tokenizer(args: &TokenizerTrainArgs) -> Result<()> {
    let t = runner::setup::tokenizer::train_on(&args.data, args.vocab_size)?;
    runner::setup::tokenizer::save(&t.tokenizer, &args.out)?;
    println!(
        "wrote {}: WordPiece, {} entries, trained on {} texts of {}",
        args.out.display(),
        t.tokenizer.get_vocab_size(true),
        t.texts,
        t.file.display()
    );
    Ok(())
}

pub fn qa_attention(args: QaAttentionArgs) -> Result<()> {
    let run = LoadedRun::load(&args.run)?;
    let split = run.split_with_answers(args.data.as_deref(), args.split)?;
    let items = split.qa.as_deref().with_context(|| format!("{}: not a QA run", args.run.display()))?;
    let data = run.encode(&split.sentences, Some(items));
    dispatch(args.device, QaAttentionJob { run, data, questions: args.questions })
}

struct QaAttentionJob {
    run: LoadedRun,
    data: Vec<corpus::Example>,
    questions: usize,
}

impl Job for QaAttentionJob {
    fn run<B: TrainBackend>(self, device: B::Device, _: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let model = self.run.model::<B::InnerBackend>(&device)?;
        let max_len = if self.run.cfg.data.max_len == 0 { usize::MAX } else { self.run.cfg.data.max_len };
        let shares =
            runner::analysis::qa_attention::question_share(&model, &self.data, self.questions, max_len, &device)?;
        print!("{}", runner::analysis::qa_attention::table(&shares));
        Ok(())
    }
}
