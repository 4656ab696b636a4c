//! The training loop, generic over the autodiff backend: batches → loss →
//! backward → optimizer step; dev F1 after each epoch, the best model kept,
//! early stopping; then the test split with the best model.

use crate::config::OnNan;
use crate::config::{OptimizerKind, RunConfig};
use crate::evaluate::{predictions_file, score_predictions, tag_all};
use crate::prep::Prepared;
use crate::rundir::{self, EpochRow, SplitMetrics, Summary};
use anyhow::{bail, Result};
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    Adam, AdamConfig, AdamW, AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer, Sgd, SgdConfig,
};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use corpus::batch::{pad, plan_batches, PaddedBatch};
use corpus::vocab::UNK_ID;
use corpus::{SplitName, Vocabs};
use encoders::input::tags_tensor;
use encoders::ops::SeqBackend;
use encoders::{Tagger, TaggerInput, TaggerShape};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The optimizers a config can name.
#[derive(Clone)]
pub(crate) enum Opt<B: AutodiffBackend> {
    Adam(OptimizerAdaptor<Adam, Tagger<B>, B>),
    AdamW(OptimizerAdaptor<AdamW, Tagger<B>, B>),
    Sgd(OptimizerAdaptor<Sgd<B::InnerBackend>, Tagger<B>, B>),
}

impl<B: AutodiffBackend> Opt<B> {
    pub(crate) fn new(cfg: &RunConfig) -> Self {
        let t = &cfg.train;
        let clip = (t.grad_clip > 0.0).then(|| GradientClippingConfig::Norm(t.grad_clip as f32));
        let decay = (t.weight_decay > 0.0).then(|| WeightDecayConfig::new(t.weight_decay as f32));
        match t.optimizer {
            OptimizerKind::Adam => {
                Opt::Adam(AdamConfig::new().with_weight_decay(decay).with_grad_clipping(clip).init())
            }
            OptimizerKind::Adamw => {
                Opt::AdamW(AdamWConfig::new().with_weight_decay(t.weight_decay as f32).with_grad_clipping(clip).init())
            }
            OptimizerKind::Sgd => Opt::Sgd(
                SgdConfig::new()
                    .with_weight_decay(decay)
                    .with_momentum((t.momentum > 0.0).then(|| MomentumConfig::new().with_momentum(t.momentum)))
                    .with_gradient_clipping(clip)
                    .init(),
            ),
        }
    }

    pub(crate) fn step(&mut self, lr: f64, model: Tagger<B>, grads: GradientsParams) -> Tagger<B> {
        match self {
            Opt::Adam(o) => o.step(lr, model, grads),
            Opt::AdamW(o) => o.step(lr, model, grads),
            Opt::Sgd(o) => o.step(lr, model, grads),
        }
    }
}

/// Builds a fresh tagger for these vocabularies (and pretrained vectors).
pub fn build_model<B: Backend>(
    cfg: &RunConfig,
    vocabs: &Vocabs,
    pretrained: Option<Vec<f32>>,
    device: &B::Device,
) -> Tagger<B> {
    cfg.model.init(
        TaggerShape {
            words: vocabs.words.len(),
            chars: vocabs.chars.len(),
            tags: &vocabs.parsed_tags(),
            scheme: vocabs.scheme,
            pretrained,
        },
        device,
    )
}

pub struct TrainOptions<'a> {
    pub out: &'a Path,
    pub device_name: &'a str,
    /// No progress bar (tests, logs).
    pub quiet: bool,
    /// Continue from the newest intact checkpoint in `out`.
    pub resume: bool,
}

/// Trains, writes the run folder, returns the summary.
pub fn train<B: AutodiffBackend + SeqBackend>(
    cfg: &RunConfig,
    prep: &Prepared,
    opts: &TrainOptions,
    device: &B::Device,
) -> Result<Summary>
where
    B::InnerBackend: SeqBackend,
{
    encoders::dropout::seed_all::<B>(device, cfg.seed);
    let out = opts.out;
    let _lock = rundir::RunLock::acquire(out)?;
    corpus::io::write_atomic(&out.join(rundir::CONFIG), crate::config::to_toml(cfg))?;
    if !opts.resume {
        prep.vocabs.save(&out.join(rundir::VOCAB))?;
        // Checkpoints of an earlier run in this folder must not be resumed into this one.
        for old in rundir::checkpoints(out) {
            for f in rundir::checkpoint_files(out, old) {
                let _ = std::fs::remove_file(f);
            }
        }
    }
    if prep.train.iter().any(|e| e.tags.is_none()) {
        bail!("a training sentence has a tag outside the tag vocabulary");
    }
    let mut model = build_model::<B>(cfg, &prep.vocabs, prep.pretrained.clone(), device);
    let params = model.num_params();
    let mut opt = Opt::<B>::new(cfg);
    // Everything a checkpoint holds; the loop below keeps it current.
    let mut state = rundir::TrainState::default();
    let mut rows: Vec<EpochRow> = Vec::new();
    if opts.resume {
        (model, opt, state) = load_checkpoint::<B>(model, opt, out, device)?;
        rows = rundir::read_metrics(&out.join(rundir::METRICS))?;
        rows.truncate(state.epoch);
        if !opts.quiet {
            eprintln!("resuming {} after {} (step {})", out.display(), state.position(), state.step);
        }
    }
    let t = &cfg.train;
    let lengths: Vec<usize> = prep.train.iter().map(|e| e.len()).collect();
    let steps_per_epoch = plan_batches(&lengths, t.batch(), Some(0)).len();
    let total_steps = steps_per_epoch * t.epochs;
    let dev = prep.split(SplitName::Dev);
    let mut resumed_epoch = std::mem::take(&mut state.partial);
    let run_started = Instant::now();
    let wall_before = state.wall_seconds;
    let wall = || wall_before + run_started.elapsed().as_secs_f64();
    let stopped_early = |since_best: usize| t.patience > 0 && since_best >= t.patience;
    let start = if stopped_early(state.since_best) { t.epochs + 1 } else { state.epoch + 1 };
    let interrupt = Interrupt::install();
    for epoch in start..=t.epochs {
        let batches =
            plan_batches(&lengths, t.batch(), Some(cfg.seed.wrapping_mul(1_000_003).wrapping_add(epoch as u64)));
        let so_far = std::mem::take(&mut resumed_epoch);
        let bar = progress(opts.quiet, batches.len(), epoch, t.epochs);
        bar.set_position(so_far.batches as u64);
        let started = Instant::now();
        let (mut loss_sum, mut tokens, mut sentences, mut lr) =
            (so_far.loss_sum, so_far.tokens, so_far.sentences, t.lr);
        let epoch_seconds = |started: &Instant| so_far.seconds + started.elapsed().as_secs_f64();
        for (b, ids) in batches.iter().enumerate().skip(so_far.batches) {
            // Every batch draws from seeds of its own (dropout, word
            // dropout), so a run resumed from any checkpoint continues
            // exactly as the uninterrupted run would have.
            let batch_seed =
                cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(((epoch as u64) << 32) | b as u64);
            encoders::dropout::seed_all::<B>(device, batch_seed);
            let mut rng = ChaCha8Rng::seed_from_u64(batch_seed);
            let mut batch = pad(&prep.train, ids);
            if t.word_dropout > 0.0 {
                for (w, &real) in batch.words.iter_mut().zip(&batch.mask) {
                    if real && rng.random_bool(t.word_dropout) {
                        *w = UNK_ID as i64;
                    }
                }
            }
            let (value, grads) = loss_and_grads(&model, &batch, batch_seed, device);
            let bad = if !value.is_finite() {
                Some(format!("the loss is {value}"))
            } else if !gradients_finite(&model, &grads) {
                Some("a gradient is NaN or infinite".to_string())
            } else {
                None
            };
            let stepped = bad.is_none();
            match (bad, t.on_nan) {
                (Some(what), OnNan::Stop) => {
                    bar.finish_and_clear();
                    bail!(
                        "epoch {epoch}, batch {} of {}: {what}; {}. The run stopped here; {}, or set train.on_nan = \"skip\"",
                        b + 1,
                        batches.len(),
                        likely_cause(&batch, &prep.train_origin, lr),
                        match rundir::checkpoints(out).first() {
                            Some(at) => format!(
                                "its last checkpoint ({at}) is untouched: edit {} (a lower train.lr, say) and run `seqlab train --resume {}`",
                                out.join(rundir::CONFIG).display(),
                                out.display()
                            ),
                            None => "no checkpoint was written yet: change the config (a lower train.lr, say) and train again".into(),
                        }
                    );
                }
                (Some(what), OnNan::Skip) => {
                    state.skipped_batches += 1;
                    bar.suspend(|| {
                        eprintln!(
                            "warning: epoch {epoch}, batch {}: {what}; batch skipped ({})",
                            b + 1,
                            likely_cause(&batch, &prep.train_origin, lr)
                        )
                    });
                }
                (None, _) => {
                    lr = t.lr_at(state.step, total_steps, epoch - 1);
                    model = opt.step(lr, model, grads);
                    state.step += 1;
                    loss_sum += value * ids.len() as f64;
                    tokens += batch.lengths.iter().sum::<usize>();
                    sentences += ids.len();
                }
            }
            bar.inc(1);
            bar.set_message(format!(
                "loss {:.3}  {:.0} tok/s",
                loss_sum / sentences.max(1) as f64,
                tokens as f64 / epoch_seconds(&started).max(1e-9)
            ));
            let done = b + 1;
            let interrupted = interrupt.requested();
            let due = stepped && t.checkpoint_every > 0 && state.step % t.checkpoint_every == 0;
            if done < batches.len() && (interrupted || due) {
                // The epoch's own sums go in `partial`; the run's totals keep finished epochs only.
                state.partial =
                    rundir::EpochSoFar { batches: done, loss_sum, tokens, sentences, seconds: epoch_seconds(&started) };
                state.wall_seconds = wall();
                save_checkpoint(&model, &opt, &state, out)?;
                if interrupted {
                    bar.finish_and_clear();
                    return Err(Interrupted { out: out.to_path_buf(), at: state.position() }.into());
                }
            }
        }
        bar.finish_and_clear();
        let seconds = epoch_seconds(&started);
        state.epoch = epoch;
        state.partial = Default::default();
        state.train_seconds += seconds;
        state.train_tokens += tokens;
        let train_loss = loss_sum / prep.train.len().max(1) as f64;
        let evaluate_now = epoch % t.eval_every.max(1) == 0 || epoch == t.epochs;
        let mut row = EpochRow {
            epoch,
            train_loss,
            dev_precision: f64::NAN,
            dev_recall: f64::NAN,
            dev_f1: f64::NAN,
            seconds,
            tokens_per_second: tokens as f64 / seconds.max(1e-9),
            lr,
        };
        let inner = model.valid();
        // The metric the best model is chosen on: entity F1, or for
        // extractive QA answer F1 (the Viterbi path can tag no span while
        // the marginals already pick answers).
        let mut selected = f64::NAN;
        let improved = match (dev, evaluate_now) {
            (Some(dev), true) => {
                let confident = dev.qa.is_some();
                let tagged = tag_all(&inner, &prep.vocabs, &dev.encoded, cfg.data.windows(), confident, device)?.tagged;
                let r = score_predictions(&dev.sentences, &tagged).report();
                row.dev_precision = r.overall.precision;
                row.dev_recall = r.overall.recall;
                row.dev_f1 = r.overall.f1;
                selected = match &dev.qa {
                    Some(items) => {
                        let answers = crate::evaluate::qa_answers(items, &tagged, &prep.tags);
                        crate::evaluate::qa_score(items, &answers).f1
                    }
                    None => r.overall.f1,
                };
                state.best_f1.is_none_or(|best| selected > best)
            }
            // Without a dev split the last epoch is the best one.
            (None, _) => true,
            (Some(_), false) => false,
        };
        if improved {
            state.best_f1 = selected.is_finite().then_some(selected);
            state.best_epoch = epoch;
            state.since_best = 0;
            rundir::save_module::<B::InnerBackend, _>(&inner, &out.join(rundir::MODEL))?;
        } else if evaluate_now {
            state.since_best += 1;
        }
        if !opts.quiet {
            eprintln!(
                "epoch {epoch:>3}  loss {train_loss:>9.4}  dev P {:.4} R {:.4} F1 {:.4}{}{}  {:.1}s  {:.0} tok/s",
                row.dev_precision,
                row.dev_recall,
                row.dev_f1,
                match dev.and_then(|d| d.qa.as_ref()) {
                    Some(_) if selected.is_finite() => format!("  answer F1 {selected:.4}"),
                    _ => String::new(),
                },
                if improved { " *" } else { "  " },
                seconds,
                row.tokens_per_second
            );
        }
        rows.push(row);
        rundir::write_metrics(&out.join(rundir::METRICS), &rows)?;
        state.wall_seconds = wall();
        save_checkpoint(&model, &opt, &state, out)?;
        if interrupt.requested() {
            return Err(Interrupted { out: out.to_path_buf(), at: state.position() }.into());
        }
        if stopped_early(state.since_best) {
            if !opts.quiet {
                eprintln!("early stop: no better dev F1 for {} epochs", t.patience);
            }
            break;
        }
        let minutes = wall() / 60.0;
        if t.max_minutes > 0.0 && minutes >= t.max_minutes && epoch < t.epochs {
            if !opts.quiet {
                eprintln!("stop: {minutes:.1} minutes used of train.max_minutes = {}", t.max_minutes);
            }
            break;
        }
    }
    if state.skipped_batches > 0 {
        eprintln!("warning: {} batches were skipped for a NaN or infinite loss or gradient", state.skipped_batches);
    }
    // The best model on dev and test.
    let best = rundir::load_module::<B::InnerBackend, _>(
        build_model::<B::InnerBackend>(cfg, &prep.vocabs, None, device),
        &out.join(rundir::MODEL),
        device,
    )?;
    let mut metrics = [None, None];
    let mut qa = None;
    for (k, name) in [SplitName::Dev, SplitName::Test].into_iter().enumerate() {
        if let Some(split) = prep.split(name) {
            // QA picks the most confident span: ask for the confidences.
            let confident = split.qa.is_some();
            let tagged = tag_all(&best, &prep.vocabs, &split.encoded, cfg.data.windows(), confident, device)?.tagged;
            metrics[k] = Some(SplitMetrics::from(score_predictions(&split.sentences, &tagged).report()));
            corpus::io::write_atomic(
                &out.join(format!("predictions.{}.conll", name.as_str())),
                predictions_file(&split.sentences, &tagged),
            )?;
            if let Some(items) = &split.qa {
                let answers = crate::evaluate::qa_answers(items, &tagged, &prep.tags);
                let score = crate::evaluate::qa_score(items, &answers);
                corpus::io::write_atomic(
                    &out.join(format!("predictions.{}.json", name.as_str())),
                    crate::evaluate::qa_predictions_json(items, &answers),
                )?;
                qa = Some(rundir::QaMetrics {
                    split: name.as_str().into(),
                    exact_match: score.exact_match,
                    f1: score.f1,
                    questions: score.questions,
                });
            }
        }
    }
    let [dev_m, test_m] = metrics;
    let summary = Summary {
        name: cfg.name.clone(),
        encoder: encoder_name(cfg),
        decoder: format!("{:?}", cfg.model.decoder).to_lowercase(),
        dataset: prep.dataset.clone(),
        seed: cfg.seed,
        device: opts.device_name.to_string(),
        params,
        epochs: rows.len(),
        best_epoch: state.best_epoch,
        train_seconds: state.train_seconds,
        tokens_per_second: state.train_tokens as f64 / state.train_seconds.max(1e-9),
        dev: dev_m,
        test: test_m,
        qa,
    };
    rundir::write_json(&out.join(rundir::SUMMARY), &summary)?;
    // Head diagnostics on dev: heads.csv, and a warning when half the heads collapsed.
    // (Not for question [SEP] context: its attention spans the question too.)
    let joint = cfg.model.question == encoders::QuestionMode::Concat;
    if let (encoders::EncoderKind::Attention, Some(dev), false) = (cfg.model.encoder.kind, dev, joint) {
        let tokens: Vec<Vec<String>> = dev.sentences.iter().map(|s| s.tokens.clone()).collect();
        let stats = crate::heads::diagnose(&best, &dev.encoded, &tokens, device)?;
        if let Err(e) = crate::commands::write_heads_csv(&out.join("heads.csv"), &stats) {
            eprintln!("warning: head diagnostics not written: {e:#}");
        }
        if let Some(w) = crate::heads::collapse_warning(&stats) {
            eprintln!("warning: {w}");
        }
    }
    Ok(summary)
}

/// Writes the checkpoint at `state`'s position (model, optimizer, then the
/// state file, each atomically) and removes all but the two newest.
fn save_checkpoint<B: AutodiffBackend>(
    model: &Tagger<B>,
    opt: &Opt<B>,
    state: &rundir::TrainState,
    out: &Path,
) -> Result<()> {
    let [m, o, j] = rundir::checkpoint_files(out, state.position());
    rundir::save_module::<B, _>(model, &m)?;
    match opt {
        Opt::Adam(x) => rundir::save_record::<B, _>(x.to_record(), &o)?,
        Opt::AdamW(x) => rundir::save_record::<B, _>(x.to_record(), &o)?,
        Opt::Sgd(x) => rundir::save_record::<B, _>(x.to_record(), &o)?,
    }
    rundir::write_json(&j, state)?;
    for old in rundir::checkpoints(out).into_iter().skip(2) {
        for f in rundir::checkpoint_files(out, old) {
            let _ = std::fs::remove_file(f);
        }
    }
    Ok(())
}

/// The newest intact checkpoint of `out`: a damaged or missing file makes
/// it fall back to the one before, with a note.
fn load_checkpoint<B: AutodiffBackend>(
    model: Tagger<B>,
    opt: Opt<B>,
    out: &Path,
    device: &B::Device,
) -> Result<(Tagger<B>, Opt<B>, rundir::TrainState)> {
    let found = rundir::checkpoints(out);
    if found.is_empty() {
        bail!(
            "{}: no checkpoint to resume from (the first is written at the end of epoch 1, or after train.checkpoint_every steps)",
            out.display()
        );
    }
    for at in found {
        let [m, o, j] = rundir::checkpoint_files(out, at);
        let attempt = || -> Result<(Tagger<B>, Opt<B>, rundir::TrainState)> {
            let text = corpus::io::read_text(&j)?;
            let state: rundir::TrainState =
                serde_json::from_str(&text).map_err(|e| corpus::vocab::json_error(&j, &e))?;
            let model = rundir::load_module::<B, _>(model.clone(), &m, device)?;
            let opt = match opt.clone() {
                Opt::Adam(x) => Opt::Adam(x.load_record(rundir::load_record::<B, _>(&o, device)?)),
                Opt::AdamW(x) => Opt::AdamW(x.load_record(rundir::load_record::<B, _>(&o, device)?)),
                Opt::Sgd(x) => Opt::Sgd(x.load_record(rundir::load_record::<B, _>(&o, device)?)),
            };
            Ok((model, opt, state))
        };
        match attempt() {
            Ok(found) => return Ok(found),
            Err(e) => eprintln!("note: skipping the checkpoint at {at}: {e:#}"),
        }
    }
    bail!("{}: every checkpoint is damaged; the run cannot be resumed", out.display())
}

/// Training stopped by Ctrl-C (or SIGTERM) after writing a checkpoint;
/// `main` prints it and exits with status 130.
#[derive(Debug)]
pub struct Interrupted {
    pub out: std::path::PathBuf,
    pub at: rundir::Position,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "interrupted: checkpoint written at {}; continue with\n  seqlab train --resume {}",
            self.at,
            self.out.display()
        )
    }
}

impl std::error::Error for Interrupted {}

/// The first SIGINT or SIGTERM asks the training loop to stop after the
/// current step (it writes a checkpoint and exits with 130); a second one
/// ends the process at once.
struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    fn install() -> Interrupt {
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Registered first, so it sees the flag as the previous signal left it.
            let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, flag.clone());
            let _ = signal_hook::flag::register(signal, flag.clone());
        }
        Interrupt(flag)
    }

    fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Whether every gradient is finite: Σ 0·g is 0 exactly unless some
/// element is NaN or ±∞ (one reduction per parameter, one read back).
/// The mean loss of a training batch and its gradients. The batch is cut
/// into [`SeqBackend::train_shards`] parts (one on a GPU; parts of 16
/// sentences or more on the CPU backends) whose forward and backward passes
/// run concurrently, each on a fork of the model (its own autodiff graph,
/// the same parameters) in a thread pool of its own; part `k` draws its
/// dropout masks from `seed + k`.
/// Each part's mean loss is weighted by its share of the sentences, so the
/// loss and the summed gradients are those of the whole batch.
pub(crate) fn loss_and_grads<B: AutodiffBackend + SeqBackend>(
    model: &Tagger<B>,
    batch: &PaddedBatch,
    seed: u64,
    device: &B::Device,
) -> (f64, GradientsParams) {
    loss_and_grads_in(model, batch, B::train_shards(batch.batch), seed, device)
}

/// [`loss_and_grads`] with `shards` parts.
fn loss_and_grads_in<B: AutodiffBackend + SeqBackend>(
    model: &Tagger<B>,
    batch: &PaddedBatch,
    shards: usize,
    seed: u64,
    device: &B::Device,
) -> (f64, GradientsParams) {
    let part_loss = |k: usize, part: &PaddedBatch, model: &Tagger<B>| {
        encoders::dropout::with_seed(seed.wrapping_add(k as u64), || {
            let input = TaggerInput::<B>::from_padded(part, device);
            let gold = tags_tensor::<B>(part, device).expect("training batches carry tags");
            let loss = model
                .loss(&input, gold)
                .expect("training batches fit the model's question mode (prep::check_question_mode)");
            let loss = loss.mul_scalar(part.batch as f64 / batch.batch.max(1) as f64);
            let value: f64 = loss.clone().into_scalar().elem();
            (value, GradientsParams::from_grads(loss.backward(), model))
        })
    };
    if shards <= 1 {
        return part_loss(0, batch, model);
    }
    // A clone of a lazily initialised parameter initialises on its own (other
    // values): initialise the model's before the parts copy them.
    initialise(model);
    // Each part runs in a rayon pool of its own (the threads shared out
    // among the parts): Burn's autodiff holds a graph's lock for its whole
    // backward pass (and takes every graph's lock to clean up after one),
    // while the operations inside use the pool. In one shared pool a thread
    // waiting inside one part's backward pass could pick up another part
    // and wait for a lock it holds itself; in a pool of its own, a part's
    // threads only ever run that part.
    let parts = batch.split(shards);
    let threads = rayon::current_num_threads() / parts.len();
    if threads == 0 {
        // Fewer threads than parts: one after another, to the same result.
        let parts: Vec<(f64, GradientsParams)> =
            parts.iter().enumerate().map(|(k, part)| part_loss(k, part, model)).collect();
        return sum_parts(model, parts);
    }
    let pools: Vec<rayon::ThreadPool> = (0..parts.len())
        .map(|_| rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool"))
        .collect();
    let parts: Vec<(f64, GradientsParams)> = std::thread::scope(|scope| {
        let running: Vec<_> = parts
            .iter()
            .zip(&pools)
            .enumerate()
            .map(|(k, (part, pool))| {
                scope.spawn(move || pool.install(|| part_loss(k, part, &model.clone().fork(device))))
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    sum_parts(model, parts)
}

/// The parts' losses and gradients added up, in part order (the same result
/// whichever part finished first).
fn sum_parts<B: AutodiffBackend>(model: &Tagger<B>, parts: Vec<(f64, GradientsParams)>) -> (f64, GradientsParams) {
    let mut sum = GradientsAccumulator::new();
    let mut value = 0.0;
    for (v, grads) in parts {
        value += v;
        sum.accumulate(model, grads);
    }
    (value, sum.grads())
}

/// Initialises every lazily initialised parameter of `model` (Burn creates
/// parameters lazily; each clone of an uninitialised one would draw its own
/// values).
fn initialise<B: Backend, M: Module<B>>(model: &M) {
    struct Touch;
    impl<B: Backend> ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if !param.is_initialized() {
                let _ = param.val();
            }
        }
        fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<B, D, Int>>) {
            if !param.is_initialized() {
                let _ = param.val();
            }
        }
        fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<B, D, Bool>>) {
            if !param.is_initialized() {
                let _ = param.val();
            }
        }
    }
    model.visit(&mut Touch);
}

fn gradients_finite<B: AutodiffBackend>(model: &Tagger<B>, grads: &GradientsParams) -> bool {
    struct Collect<'a, B: AutodiffBackend> {
        grads: &'a GradientsParams,
        sums: Vec<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
                self.sums.push(g.mul_scalar(0.0).sum());
            }
        }
    }
    let mut c = Collect::<B> { grads, sums: Vec::new() };
    model.visit(&mut c);
    if c.sums.is_empty() {
        return true;
    }
    let total: f64 = Tensor::cat(c.sums, 0).sum().into_scalar().elem();
    total.is_finite()
}

/// The likeliest reason a batch's loss or gradient went non-finite.
fn likely_cause(batch: &corpus::batch::PaddedBatch, origin: &(std::path::PathBuf, Vec<usize>), lr: f64) -> String {
    let (file, lines) = origin;
    let at = |i: usize| lines.get(batch.ids[i]).map_or("?".to_string(), |l| format!("{}:{l}", file.display()));
    if let Some(i) = batch.lengths.iter().position(|&n| n == 0) {
        return format!("likely cause: an empty sentence at {}, whose row is fully masked", at(i));
    }
    let first: Vec<String> = (0..batch.ids.len().min(3)).map(at).collect();
    format!(
        "likely cause: a learning rate too high (train.lr = {lr:e}) or exploding gradients — lower train.lr or set train.grad_clip; the batch's sentences start at {}{}",
        first.join(", "),
        if batch.ids.len() > 3 { format!(" and {} more", batch.ids.len() - 3) } else { String::new() }
    )
}

/// A short description of the encoder, e.g. `bilstm` or `attention-relative`.
pub fn encoder_name(cfg: &RunConfig) -> String {
    match cfg.model.encoder.kind {
        encoders::EncoderKind::Bilstm => "bilstm".into(),
        encoders::EncoderKind::Attention => {
            format!("attention-{:?}", cfg.model.encoder.attention.position).to_lowercase()
        }
    }
}

fn progress(quiet: bool, len: usize, epoch: usize, epochs: usize) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{epoch}/{epochs}"));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use corpus::toy::{generate, Lang};
    use corpus::vocab::Normalize;
    use corpus::Scheme;
    use encoders::EncoderKind;

    type A = Autodiff<Flex>;

    /// Every parameter's gradient, in module order.
    fn flat(model: &Tagger<A>, grads: &GradientsParams) -> Vec<Vec<f32>> {
        struct Collect<'a> {
            grads: &'a GradientsParams,
            out: Vec<Vec<f32>>,
        }
        impl ModuleVisitor<A> for Collect<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
                let g = self.grads.get::<Flex, D>(param.id).expect("every parameter has a gradient");
                self.out.push(g.into_data().to_vec().unwrap());
            }
        }
        let mut c = Collect { grads, out: Vec::new() };
        model.visit(&mut c);
        c.out
    }

    /// A batch of 40 generated sentences and a model of `kind` for them.
    fn setup(kind: EncoderKind, dropout: f64) -> (Tagger<A>, PaddedBatch) {
        let data = generate(Lang::En, 40, 5);
        let labels: Vec<String> = data
            .iter()
            .flat_map(|(_, sp)| sp.iter().map(|s| s.label.clone()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let tokens: Vec<&[String]> = data.iter().map(|(t, _)| t.as_slice()).collect();
        let vocabs =
            Vocabs::build(tokens.iter().copied(), &labels, Normalize::default(), 1, Scheme::Bioes, Scheme::Iob2);
        let encoded: Vec<_> =
            data.iter().map(|(t, sp)| vocabs.encode(t, Some(&Scheme::Bioes.encode(t.len(), sp)), 20)).collect();
        let mut cfg = RunConfig::default();
        cfg.model.encoder.kind = kind;
        cfg.model.encoder.attention.d_model = 16;
        cfg.model.encoder.attention.ffn = 32;
        cfg.model.encoder.attention.dropout = dropout;
        cfg.model.encoder.attention.attention_dropout = dropout;
        cfg.model.encoder.bilstm.hidden = 8;
        cfg.model.encoder.bilstm.dropout = dropout;
        cfg.model.features.dropout = dropout;
        let device = Default::default();
        A::seed(&device, 11);
        let model = build_model::<A>(&cfg, &vocabs, None, &device);
        (model, pad(&encoded, &(0..encoded.len()).collect::<Vec<_>>()))
    }

    /// Without dropout, a batch cut into parts gives the whole batch's loss
    /// and gradients; with dropout, the same seed gives the same result
    /// however the parts were scheduled.
    #[test]
    fn parts_of_a_batch_give_the_whole_batchs_loss_and_gradients() {
        let device = Default::default();
        for kind in [EncoderKind::Attention, EncoderKind::Bilstm] {
            // Parts first, on a fresh model (Burn initialises parameters
            // lazily): the parts must share its parameters, not initialise
            // copies of their own.
            let (model, batch) = setup(kind, 0.0);
            let first = loss_and_grads_in(&model, &batch, 2, 3, &device);
            let (whole, g_whole) = loss_and_grads_in(&model, &batch, 1, 3, &device);
            let g_whole = flat(&model, &g_whole);
            for (shards, (value, grads)) in [(2, first), (3, loss_and_grads_in(&model, &batch, 3, 3, &device))] {
                assert!(
                    (value - whole).abs() < 1e-4 * whole.abs(),
                    "{kind:?}, {shards} parts: loss {value} vs {whole}"
                );
                for (i, (a, b)) in flat(&model, &grads).iter().zip(&g_whole).enumerate() {
                    let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
                    let scale = b.iter().map(|x| x.abs()).fold(1e-3f32, f32::max);
                    assert!(worst <= 1e-3 * scale, "{kind:?}, {shards} parts, parameter {i}: off by {worst}");
                }
            }
            // With dropout, from fresh models too.
            let runs: Vec<(f64, Vec<Vec<f32>>)> = (0..3)
                .map(|_| {
                    let (model, batch) = setup(kind, 0.3);
                    let (v, g) = loss_and_grads_in(&model, &batch, 3, 7, &device);
                    (v, flat(&model, &g))
                })
                .collect();
            let (model, batch) = setup(kind, 0.3);
            assert!(runs.iter().all(|r| *r == runs[0]), "{kind:?}: the same seed must give the same gradients");
            let (other, _) = loss_and_grads_in(&model, &batch, 3, 8, &device);
            assert_ne!(other, runs[0].0, "{kind:?}: another seed draws other dropout masks");
        }
    }
}
