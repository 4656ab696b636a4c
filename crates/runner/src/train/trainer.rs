//! The training loop, generic over the autodiff backend: epochs of
//! [`Learner::step`]s; dev F1 (or answer F1) after each epoch, the best
//! model kept, early stopping, checkpoints; then [`crate::train::finish`] scores
//! the best model on dev and test and writes the run folder's summary.

use crate::bench::kernels::BatchShapes;
use crate::infer::{self, Request};
use crate::reporter::{Progress, Reporter};
use crate::setup::config::{OnNan, RunConfig};
use crate::setup::model::build_model;
use crate::setup::prep::{EvalSplit, Prepared};
use crate::train::checkpoint::{self, Interrupt, Interrupted};
use crate::train::finish::Finished;
use crate::train::rundir::{self, EpochRow, EpochSoFar, Summary, TrainState};
use crate::train::step::{Learner, Opt, Outcome, TokenDropout};
use anyhow::{bail, Result};
use burn::module::Module;
use corpus::batch::{plan_batches, Batch, PaddedBatch};
use corpus::SplitName;
use encoders::ops::{SeqBackend, TrainBackend};
use std::path::Path;
use std::time::Instant;

pub struct TrainOptions<'a> {
    pub out: &'a Path,
    pub device_name: &'a str,
    /// No progress bar or epoch lines (tests, logs); warnings still go out.
    pub quiet: bool,
    /// Also the batch shapes of each epoch, the kernels compiled
    /// ([`crate::bench::kernels`]) and when the first batch finished.
    pub verbose: bool,
    /// When the process started (the first batch's time is counted from here).
    pub started: Instant,
    /// Continue from the newest intact checkpoint in `out`.
    pub resume: bool,
    pub reporter: &'a dyn Reporter,
}

/// Trains, writes the run folder, returns the summary.
pub fn train<B: TrainBackend>(
    cfg: &RunConfig,
    prep: &Prepared,
    opts: &TrainOptions,
    device: &B::Device,
) -> Result<Summary>
where
    B::InnerBackend: SeqBackend,
{
    encoders::dropout::seed_all::<B>(device, cfg.seed);
    let _lock = start_run(cfg, prep, opts)?;
    let model = build_model::<B>(cfg, &prep.vocabs, prep.pretrained.clone(), device);
    let params = model.num_params();
    let mut run = Training::<B>::start(cfg, prep, opts, model, device)?;
    run.epochs()?;
    if run.state.skipped_batches > 0 {
        opts.reporter.message(&format!(
            "warning: {} batches were skipped for a NaN or infinite loss or gradient",
            run.state.skipped_batches
        ));
    }
    let finished =
        Finished { out: opts.out, device_name: opts.device_name, state: &run.state, epochs: run.rows.len(), params };
    crate::train::finish::finish::<B::InnerBackend>(cfg, prep, &finished, opts.reporter, device)
}

/// Takes the run folder and writes its config (and, for a fresh run, the
/// vocabularies, clearing checkpoints an earlier run left there).
fn start_run(cfg: &RunConfig, prep: &Prepared, opts: &TrainOptions) -> Result<rundir::RunLock> {
    let out = opts.out;
    let lock = rundir::RunLock::acquire(out)?;
    if let Some(note) = &lock.taken_over {
        opts.reporter.message(note);
    }
    corpus::io::write_atomic(&out.join(rundir::CONFIG), crate::setup::config::to_toml(cfg))?;
    if !opts.resume {
        prep.vocabs.save(&out.join(rundir::VOCAB))?;
        // Checkpoints of an earlier run in this folder must not be resumed into this one.
        checkpoint::remove_all(out);
    }
    if prep.train.iter().any(|e| e.context().tags.is_none()) {
        bail!("a training sentence has a tag outside the tag vocabulary");
    }
    Ok(lock)
}

/// Sums over the batches of one epoch so far.
#[derive(Clone, Copy)]
struct Sums {
    loss: f64,
    tokens: usize,
    sentences: usize,
    lr: f64,
}

/// A training run in progress: what the loop and the checkpoints carry.
struct Training<'a, B: TrainBackend> {
    cfg: &'a RunConfig,
    prep: &'a Prepared,
    opts: &'a TrainOptions<'a>,
    device: &'a B::Device,
    learner: Learner<B>,
    /// Everything a checkpoint holds; the loop keeps it current.
    state: TrainState,
    rows: Vec<EpochRow>,
    total_steps: usize,
    started: Instant,
    wall_before: f64,
    interrupt: Interrupt,
    /// Whether this process has finished a batch (`--verbose` says when).
    stepped_once: bool,
}

/// What ends the epoch loop early.
enum Stop {
    Continue,
    Break,
}

impl<'a, B: TrainBackend> Training<'a, B>
where
    B::InnerBackend: SeqBackend,
{
    /// A fresh run, or the one resumed from `opts.out`'s newest checkpoint.
    fn start(
        cfg: &'a RunConfig,
        prep: &'a Prepared,
        opts: &'a TrainOptions<'a>,
        model: encoders::Tagger<B>,
        device: &'a B::Device,
    ) -> Result<Self> {
        let averaging = crate::train::average::Weighting::of(&cfg.train);
        let mut learner = Learner::new(model, Opt::<B>::new(cfg), TokenDropout::of(cfg, prep.vocabs.tokenization()))
            .averaging(averaging, 0);
        let (mut state, mut rows) = (TrainState::default(), Vec::new());
        if opts.resume {
            (learner, state) = checkpoint::load::<B>(learner, opts.out, device, opts.reporter)?;
            rows = rundir::read_metrics(&opts.out.join(rundir::METRICS))?;
            rows.truncate(state.epoch);
            if !opts.quiet {
                let out = opts.out.display();
                opts.reporter.message(&format!("resuming {out} after {} (step {})", state.position(), state.step));
            }
        }
        let lengths: Vec<usize> = prep.train.iter().map(|e| e.len()).collect();
        let t = &cfg.train;
        let curriculum = t.epochs.min(if t.answer_window > 0 { t.answer_window_epochs } else { 0 });
        let short = if curriculum > 0 {
            crate::train::curriculum::lengths(&prep.train, o_tag(prep), t.answer_window)
        } else {
            Vec::new()
        };
        let total_steps = plan_batches(&lengths, t.batch(), Some(0)).len() * (t.epochs - curriculum)
            + plan_batches(&short, t.batch(), Some(0)).len() * curriculum;
        let wall_before = state.wall_seconds;
        Ok(Training {
            cfg,
            prep,
            opts,
            device,
            learner,
            state,
            rows,
            total_steps,
            started: Instant::now(),
            wall_before,
            interrupt: Interrupt::install(),
            stepped_once: false,
        })
    }

    /// Seconds of training, this process's and those before a resume.
    fn wall(&self) -> f64 {
        self.wall_before + self.started.elapsed().as_secs_f64()
    }

    fn stopped_early(&self) -> bool {
        self.cfg.train.patience > 0 && self.state.since_best >= self.cfg.train.patience
    }

    /// Every epoch still to run.
    fn epochs(&mut self) -> Result<()> {
        let epochs = self.cfg.train.epochs;
        let first = if self.stopped_early() { epochs + 1 } else { self.state.epoch + 1 };
        let mut resumed = std::mem::take(&mut self.state.partial);
        for epoch in first..=epochs {
            let (sums, seconds) = self.epoch(epoch, std::mem::take(&mut resumed))?;
            if let Stop::Break = self.end_epoch(epoch, sums, seconds)? {
                break;
            }
        }
        Ok(())
    }

    /// The training examples of `epoch`: cut to windows around their
    /// answers while the curriculum lasts ([`crate::train::curriculum`]), else whole.
    fn examples(&self, epoch: usize) -> std::borrow::Cow<'a, [corpus::Example]> {
        let t = &self.cfg.train;
        if t.answer_window > 0 && epoch <= t.answer_window_epochs {
            let cut = crate::train::curriculum::windows(
                &self.prep.train,
                o_tag(self.prep),
                t.answer_window,
                self.cfg.seed,
                epoch,
            );
            std::borrow::Cow::Owned(cut)
        } else {
            std::borrow::Cow::Borrowed(&self.prep.train)
        }
    }

    /// The batches of one epoch (from `so_far.batches` on, when resumed):
    /// the epoch's sums and seconds.
    fn epoch(&mut self, epoch: usize, so_far: EpochSoFar) -> Result<(Sums, f64)> {
        let (cfg, t) = (self.cfg, &self.cfg.train);
        let examples = self.examples(epoch);
        let lengths: Vec<usize> = examples.iter().map(corpus::Example::len).collect();
        let batches =
            plan_batches(&lengths, t.batch(), Some(cfg.seed.wrapping_mul(1_000_003).wrapping_add(epoch as u64)));
        let bar = if self.opts.quiet {
            crate::reporter::Silent.progress(0, "")
        } else {
            self.opts.reporter.progress(batches.len() as u64, &format!("epoch {epoch}/{}", t.epochs))
        };
        bar.set_position(so_far.batches as u64);
        let started = Instant::now();
        let seconds = |started: &Instant| so_far.seconds + started.elapsed().as_secs_f64();
        let mut sums = Sums { loss: so_far.loss_sum, tokens: so_far.tokens, sentences: so_far.sentences, lr: t.lr };
        let mut shapes = BatchShapes::default();
        for (b, ids) in batches.iter().enumerate().skip(so_far.batches) {
            let batch = encoders::input::pad_batch::<B>(&examples, ids);
            shapes.add(&batch);
            let stepped = self.batch(epoch, b, batches.len(), &batch, &mut sums, bar.as_ref())?;
            if self.opts.verbose && !self.stepped_once {
                let after = self.opts.started.elapsed().as_secs_f64();
                bar.message(&format!("first batch done {after:.1} s after the process started{}", kernel_counts()));
            }
            self.stepped_once = true;
            bar.inc(1);
            bar.set_message(format!(
                "loss {:.3}  {:.0} tok/s",
                sums.loss / sums.sentences.max(1) as f64,
                sums.tokens as f64 / seconds(&started).max(1e-9)
            ));
            let done = b + 1;
            let interrupted = self.interrupt.requested();
            let due = stepped && t.checkpoint_every > 0 && self.state.step % t.checkpoint_every == 0;
            if done < batches.len() && (interrupted || due) {
                // The epoch's own sums go in `partial`; the run's totals keep finished epochs only.
                self.state.partial = EpochSoFar {
                    batches: done,
                    loss_sum: sums.loss,
                    tokens: sums.tokens,
                    sentences: sums.sentences,
                    seconds: seconds(&started),
                };
                self.save_checkpoint()?;
                if interrupted {
                    bar.finish();
                    return Err(self.interrupted());
                }
            }
        }
        bar.finish();
        if self.opts.verbose {
            let line = format!("epoch {epoch}: {}{}", shapes.summary(B::shape_buckets()), kernel_counts());
            self.opts.reporter.message(&line);
        }
        Ok((sums, seconds(&started)))
    }

    /// One batch: a step, or the NaN policy when the step fails. Whether
    /// the model was updated.
    fn batch(
        &mut self,
        epoch: usize,
        b: usize,
        of: usize,
        batch: &Batch,
        sums: &mut Sums,
        bar: &dyn Progress,
    ) -> Result<bool> {
        let t = &self.cfg.train;
        // Every batch draws from seeds of its own (dropout, word dropout),
        // so a run resumed from any checkpoint continues exactly as the
        // uninterrupted run would have.
        let seed = self.cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(((epoch as u64) << 32) | b as u64);
        let lr = t.lr_at(self.state.step, self.total_steps, epoch - 1);
        match self.learner.step(batch, seed, lr, self.device)? {
            Outcome::Stepped(loss) => {
                sums.lr = lr;
                self.state.step += 1;
                sums.loss += loss * batch.size() as f64;
                sums.tokens += batch.context().lengths.iter().sum::<usize>();
                sums.sentences += batch.size();
                Ok(true)
            }
            Outcome::Skipped(what) => {
                let cause = likely_cause(batch.context(), &self.prep.train_origin, sums.lr);
                if t.on_nan == OnNan::Stop {
                    bar.finish();
                    bail!(
                        "epoch {epoch}, batch {} of {of}: {what}; {cause}. The run stopped here; {}, or set train.on_nan = \"skip\"",
                        b + 1,
                        self.what_now()
                    );
                }
                self.state.skipped_batches += 1;
                let warning = format!("warning: epoch {epoch}, batch {}: {what}; batch skipped ({cause})", b + 1);
                if self.opts.quiet {
                    self.opts.reporter.message(&warning);
                } else {
                    bar.message(&warning);
                }
                Ok(false)
            }
        }
    }

    /// What a user can do after a run stopped on a non-finite loss.
    fn what_now(&self) -> String {
        let out = self.opts.out;
        match rundir::checkpoints(out).first() {
            Some(at) => format!(
                "its last checkpoint ({at}) is untouched: edit {} (a lower train.lr, say) and run `seqlab train --resume {}`",
                out.join(rundir::CONFIG).display(),
                out.display()
            ),
            None => "no checkpoint was written yet: change the config (a lower train.lr, say) and train again".into(),
        }
    }

    fn save_checkpoint(&mut self) -> Result<()> {
        self.state.wall_seconds = self.wall();
        checkpoint::save(&self.learner, &self.state, self.opts.out)
    }

    fn interrupted(&self) -> anyhow::Error {
        Interrupted { out: self.opts.out.to_path_buf(), at: self.state.position() }.into()
    }

    /// After an epoch: dev scores, the best model kept, metrics.csv, a
    /// checkpoint; whether to go on.
    fn end_epoch(&mut self, epoch: usize, sums: Sums, seconds: f64) -> Result<Stop> {
        let t = &self.cfg.train;
        self.state.epoch = epoch;
        self.state.partial = Default::default();
        self.state.train_seconds += seconds;
        self.state.train_tokens += sums.tokens;
        let mut row = EpochRow {
            epoch,
            train_loss: sums.loss / self.prep.train.len().max(1) as f64,
            dev_precision: f64::NAN,
            dev_recall: f64::NAN,
            dev_f1: f64::NAN,
            seconds,
            tokens_per_second: sums.tokens as f64 / seconds.max(1e-9),
            lr: sums.lr,
            dev_answer_em: None,
            dev_answer_f1: None,
        };
        let evaluate_now = epoch % t.eval_every.max(1) == 0 || epoch == t.epochs;
        self.learner.end_epoch(epoch);
        let inner = self.learner.evaluated();
        let dev = self.prep.split(SplitName::Dev);
        let (improved, selected) = match (dev, evaluate_now) {
            (Some(dev), true) => {
                let selected = score_dev(self.cfg, self.prep, dev, &inner, &mut row, self.device)?;
                (self.state.best_f1.is_none_or(|best| selected > best), selected)
            }
            // Without a dev split the last epoch is the best one.
            (None, _) => (true, f64::NAN),
            (Some(_), false) => (false, f64::NAN),
        };
        if improved {
            self.state.best_f1 = selected.is_finite().then_some(selected);
            self.state.best_epoch = epoch;
            self.state.since_best = 0;
            rundir::save_module::<B::InnerBackend, _>(&inner, &self.opts.out.join(rundir::MODEL))?;
        } else if evaluate_now {
            self.state.since_best += 1;
        }
        if !self.opts.quiet {
            let metric = self.prep.vocabs.qa_metric.unwrap_or_default();
            self.opts.reporter.message(&epoch_line(&row, metric, improved));
        }
        self.rows.push(row);
        rundir::write_metrics(&self.opts.out.join(rundir::METRICS), &self.rows)?;
        self.save_checkpoint()?;
        if self.interrupt.requested() {
            return Err(self.interrupted());
        }
        Ok(self.stop_now(epoch))
    }

    /// Early stopping and the time cap.
    fn stop_now(&self, epoch: usize) -> Stop {
        let t = &self.cfg.train;
        if self.stopped_early() {
            if !self.opts.quiet {
                self.opts.reporter.message(&format!("early stop: no better dev F1 for {} epochs", t.patience));
            }
            return Stop::Break;
        }
        let minutes = self.wall() / 60.0;
        if t.max_minutes > 0.0 && minutes >= t.max_minutes && epoch < t.epochs {
            if !self.opts.quiet {
                let cap = t.max_minutes;
                self.opts.reporter.message(&format!("stop: {minutes:.1} minutes used of train.max_minutes = {cap}"));
            }
            return Stop::Break;
        }
        Stop::Continue
    }
}

/// "; kernels compiled 57, loaded from the disk cache 31" where they are
/// counted ([`crate::bench::kernels::install`]).
fn kernel_counts() -> String {
    crate::bench::kernels::counts()
        .map(|k| format!("; kernels compiled {}, loaded from the disk cache {}", k.compiled, k.cached))
        .unwrap_or_default()
}

/// The id of the `O` tag (what the curriculum's windows keep whole around).
fn o_tag(prep: &Prepared) -> u32 {
    prep.vocabs.tag_id(&corpus::Tag::O).unwrap_or(0)
}

/// Scores `dev` with the model as it is now, filling the row's dev
/// columns; returns the metric the best model is chosen on: entity F1, or
/// for extractive QA answer F1 (the Viterbi path can tag no span while the
/// marginals already pick answers).
fn score_dev<B: SeqBackend>(
    cfg: &RunConfig,
    prep: &Prepared,
    dev: &EvalSplit,
    model: &encoders::Tagger<B>,
    row: &mut EpochRow,
    device: &B::Device,
) -> Result<f64> {
    let request = Request::tagging(cfg.data.windows()).with_answers(dev.qa.is_some());
    let tagged = infer::tag(model, &prep.vocabs, &dev.encoded, &request, device)?.tagged;
    let r = infer::score_predictions(&dev.sentences, &tagged).report();
    row.dev_precision = r.overall.precision;
    row.dev_recall = r.overall.recall;
    row.dev_f1 = r.overall.f1;
    if let Some(items) = &dev.qa {
        let metric = prep.vocabs.qa_metric.unwrap_or_default();
        let answers = crate::infer::qa::score(items, &crate::infer::qa::answers(items, &tagged), metric);
        row.dev_answer_em = Some(answers.exact_match);
        row.dev_answer_f1 = Some(answers.f1);
    }
    Ok(row.selected())
}

/// The line printed after each epoch: dev entity scores, or for QA the
/// answers' EM and F1 (what the run is selected on, under `metric`) and
/// the answer chunk's exact-span F1.
fn epoch_line(row: &EpochRow, metric: corpus::qa::metric::QaMetric, improved: bool) -> String {
    let dev = match (row.dev_answer_em, row.dev_answer_f1) {
        (Some(em), Some(f1)) => format!(
            "dev answers EM {em:.4} F1 {f1:.4} ({} metric), span F1 {:.4}",
            metric.name().trim_start_matches("official "),
            row.dev_f1
        ),
        _ => format!("dev P {:.4} R {:.4} F1 {:.4}", row.dev_precision, row.dev_recall, row.dev_f1),
    };
    format!(
        "epoch {:>3}  loss {:>9.4}  {dev}{}  {:.1}s  {:.0} tok/s",
        row.epoch,
        row.train_loss,
        if improved { " *" } else { "  " },
        row.seconds,
        row.tokens_per_second
    )
}

/// The likeliest reason a batch's loss or gradient went non-finite.
fn likely_cause(batch: &PaddedBatch, origin: &(std::path::PathBuf, Vec<usize>), lr: f64) -> String {
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
