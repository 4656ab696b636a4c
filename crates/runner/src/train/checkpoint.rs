//! Checkpoints of a training run (model, optimizer and loop state, each
//! written atomically; the two newest kept), resuming from the newest intact
//! one, and stopping cleanly on Ctrl-C.

use crate::reporter::Reporter;
use crate::train::rundir;
use crate::train::step::{Learner, Opt};
use anyhow::{bail, Result};
use burn::optim::Optimizer;
use encoders::ops::TrainBackend;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Writes the checkpoint at `state`'s position (model, optimizer, the
/// weight average when the run keeps one, then the state file, each
/// atomically) and removes all but the two newest.
pub fn save<B: TrainBackend>(learner: &Learner<B>, state: &rundir::TrainState, out: &Path) -> Result<()> {
    let [m, o, j, a] = rundir::checkpoint_files(out, state.position());
    rundir::save_module::<B, _>(learner.model(), &m)?;
    match &learner.opt {
        Opt::Adam(x) => rundir::save_record::<B, _>(x.to_record(), &o)?,
        Opt::AdamW(x) => rundir::save_record::<B, _>(x.to_record(), &o)?,
        Opt::Sgd(x) => rundir::save_record::<B, _>(x.to_record(), &o)?,
    }
    if let Some(average) = learner.average().and_then(|x| x.model()) {
        rundir::save_module::<B::InnerBackend, _>(average, &a)?;
    }
    rundir::write_json(&j, state)?;
    for old in rundir::checkpoints(out).into_iter().skip(2) {
        for f in rundir::checkpoint_files(out, old) {
            let _ = std::fs::remove_file(f);
        }
    }
    Ok(())
}

/// Removes every checkpoint of `out` (a fresh run must not resume an
/// earlier run's).
pub fn remove_all(out: &Path) {
    for old in rundir::checkpoints(out) {
        for f in rundir::checkpoint_files(out, old) {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// The newest intact checkpoint of `out`, into `learner` (model,
/// optimizer, and the weight average when it keeps one: after a checkpoint
/// without one, from a run that did not average, the average starts with
/// the next step); a damaged or missing file makes it fall back to the one
/// before, with a note.
pub fn load<B: TrainBackend>(
    learner: Learner<B>,
    out: &Path,
    device: &B::Device,
    reporter: &dyn Reporter,
) -> Result<(Learner<B>, rundir::TrainState)> {
    let found = rundir::checkpoints(out);
    if found.is_empty() {
        bail!(
            "{}: no checkpoint to resume from (the first is written at the end of epoch 1, or after train.checkpoint_every steps)",
            out.display()
        );
    }
    for at in found {
        let [m, o, j, a] = rundir::checkpoint_files(out, at);
        let attempt = || -> Result<(Learner<B>, rundir::TrainState)> {
            let text = corpus::io::read_text(&j)?;
            let state: rundir::TrainState =
                serde_json::from_str(&text).map_err(|e| corpus::vocab::json_error(&j, &e))?;
            let model = rundir::load_module::<B, _>(learner.model().clone(), &m, device)?;
            let opt = match learner.opt.clone() {
                Opt::Adam(x) => Opt::Adam(x.load_record(rundir::load_record::<B, _>(&o, device)?)),
                Opt::AdamW(x) => Opt::AdamW(x.load_record(rundir::load_record::<B, _>(&o, device)?)),
                Opt::Sgd(x) => Opt::Sgd(x.load_record(rundir::load_record::<B, _>(&o, device)?)),
            };
            let weighting = learner.average().map(|x| x.weighting());
            let saved = weighting.is_some() && a.exists();
            let updates = weighting.filter(|_| saved).map_or(0, |w| w.updates(state.epoch, state.step));
            let mut resumed = Learner::new(model, opt, learner.dropout).averaging(weighting, updates);
            if saved {
                let average = rundir::load_module::<B::InnerBackend, _>(resumed.valid(), &a, device)?;
                resumed.restore_average(average);
            }
            Ok((resumed, state))
        };
        match attempt() {
            Ok(found) => return Ok(found),
            Err(e) => reporter.message(&format!("note: skipping the checkpoint at {at}: {e:#}")),
        }
    }
    bail!("{}: every checkpoint is damaged; the run cannot be resumed", out.display())
}

/// Training stopped by Ctrl-C (or SIGTERM) after writing a checkpoint;
/// the binary prints it and exits with status 130.
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
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    pub fn install() -> Interrupt {
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Registered first, so it sees the flag as the previous signal left it.
            let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, flag.clone());
            let _ = signal_hook::flag::register(signal, flag.clone());
        }
        Interrupt(flag)
    }

    pub fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
