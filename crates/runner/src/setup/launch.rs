//! What `seqlab train` settles before the loop starts: the config with its
//! overrides (or a resumed run's own), the data prepared, the run folder,
//! and the memory plan.

use crate::reporter::Reporter;
use crate::setup::config::{self, RunConfig};
use crate::setup::model::{build_model, decoder_name, encoder_name};
use crate::setup::prep::{self, Prepared};
use crate::train::rundir;
use anyhow::{bail, Context, Result};
use burn::module::Module;
use corpus::Vocabs;
use encoders::ops::SeqBackend;
use std::path::PathBuf;

/// A training run as asked for on the command line.
#[derive(Clone, Debug, Default)]
pub struct TrainRequest {
    pub config: Option<PathBuf>,
    /// `key=value` overrides of the config.
    pub set: Vec<String>,
    pub data: Option<PathBuf>,
    pub seed: Option<u64>,
    pub epochs: Option<usize>,
    pub max_memory: Option<String>,
    /// Continue the run in this folder.
    pub resume: Option<PathBuf>,
    pub out: Option<PathBuf>,
}

/// A run ready to train.
pub struct Launch {
    pub cfg: RunConfig,
    pub prep: Prepared,
    pub out: PathBuf,
    pub resume: bool,
    /// `train.max_memory` in bytes.
    pub budget: Option<u64>,
}

/// Resolves the config, prepares the data and the run folder; notes go to `reporter`.
pub fn launch(req: TrainRequest, quiet: bool, reporter: &dyn Reporter) -> Result<Launch> {
    let mut cfg = resolve_config(&req, reporter)?;
    let budget = match cfg.train.max_memory.trim() {
        // A resumed run keeps the batch its plan chose.
        _ if req.resume.is_some() => None,
        "" => None,
        m => Some(crate::bench::peak::parse_bytes(m).context("train.max_memory")?),
    };
    let tokenizer = match &req.resume {
        // A run keeps the tokenizer it was trained with.
        Some(dir) if dir.join(crate::setup::tokenizer::FILE).is_file() => dir.join(crate::setup::tokenizer::FILE),
        _ => prep::tokenizer_path(&cfg, &cfg.data.dir),
    };
    let ds = prep::load_dataset(&cfg.data.dir, Some(&tokenizer))?;
    prep::check_question_mode(&cfg, &ds)?;
    let prep = prep::prepare(&mut cfg, &ds)?;
    for n in &prep.notes {
        reporter.message(&format!("note: {n}"));
    }
    if let Some(dir) = &req.resume {
        if Vocabs::load(&dir.join(rundir::VOCAB))? != prep.vocabs {
            bail!(
                "{}: the data in {} no longer gives the run's vocabularies (changed since the run started?)",
                dir.display(),
                cfg.data.dir.display()
            );
        }
    }
    let out = match (&req.resume, req.out) {
        (Some(dir), _) => dir.clone(),
        (None, Some(o)) => o,
        (None, None) => rundir::runs_root().join(format!("{}-{}-s{}", cfg.name, prep.dataset, cfg.seed)),
    };
    if !quiet {
        reporter.message(&describe(&cfg, &prep, &out));
    }
    if ds.is_qa() && req.resume.is_none() {
        // The run keeps a copy of its tokenizer: eval and predict cut text the same way.
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        corpus::io::write_atomic(&out.join(crate::setup::tokenizer::FILE), corpus::io::read_text(&tokenizer)?)?;
    }
    Ok(Launch { cfg, prep, out, resume: req.resume.is_some(), budget })
}

/// The config of a new run (file and overrides) or of the resumed one.
fn resolve_config(req: &TrainRequest, reporter: &dyn Reporter) -> Result<RunConfig> {
    let mut cfg = match &req.resume {
        Some(dir) => {
            if req.config.is_some() || req.seed.is_some() || !req.set.is_empty() {
                bail!(
                    "--resume continues a run with its own config.toml and seed; drop --config/--seed/--set (--epochs may extend it)"
                );
            }
            if req.max_memory.is_some() {
                reporter.message("note: --max-memory is ignored when resuming: the run keeps its batch");
            }
            if !dir.join(rundir::CONFIG).is_file() {
                bail!("{} is not a seqlab run folder (no {})", dir.display(), rundir::CONFIG);
            }
            config::load(Some(&dir.join(rundir::CONFIG)), &[])?
        }
        None => config::load(req.config.as_deref(), &req.set)?,
    };
    if let Some(d) = &req.data {
        cfg.data.dir = d.clone();
    }
    if let Some(s) = req.seed {
        cfg.seed = s;
    }
    if let Some(e) = req.epochs {
        cfg.train.epochs = e.max(1);
    }
    if let Some(m) = &req.max_memory {
        cfg.train.max_memory = m.clone();
    }
    Ok(cfg)
}

/// The line announcing a run.
fn describe(cfg: &RunConfig, prep: &Prepared, out: &std::path::Path) -> String {
    format!(
        "training {} ({}, {} decoder) on {} ({} scheme, tagged as {}): {} sentences, {} tokens, {} tags; run folder {}",
        cfg.name,
        encoder_name(cfg),
        decoder_name(cfg),
        prep.dataset,
        prep.vocabs.data_scheme,
        prep.vocabs.scheme,
        prep.train.len(),
        prep.train_tokens,
        prep.tags.len(),
        out.display()
    )
}

/// Fits the training step into `budget` (see [`crate::bench::peak::plan`]),
/// reporting the decision. On CPU the budget covers the whole process (what
/// it holds now counts); on a GPU, the tensors of the step.
pub fn plan_memory<B: SeqBackend>(
    cfg: &mut RunConfig,
    prep: &Prepared,
    budget: u64,
    device: &B::Device,
    reporter: &dyn Reporter,
) -> Result<()> {
    let params = build_model::<B>(cfg, &prep.vocabs, prep.pretrained.clone(), device).num_params();
    let len = prep.train.iter().map(|e| e.len()).max().unwrap_or(1);
    let word_len = prep.train.iter().flat_map(|e| e.context().chars.iter().map(Vec::len)).max().unwrap_or(1).max(1);
    // A GPU backend's own allocator holds the step's tensors: none of the process's memory counts.
    let on_gpu = B::device_memory(device).is_some();
    let baseline = if on_gpu { 0 } else { crate::bench::peak::rss().map_or(0, |r| r.0) };
    let tags = prep.vocabs.parsed_tags().len();
    let shape = crate::bench::peak::StepShape { batch: 1, len, word_len, params, tags, parts: B::train_shards };
    let d = crate::bench::peak::plan(cfg, budget, baseline, shape)?;
    reporter.message(&d.message);
    Ok(())
}
