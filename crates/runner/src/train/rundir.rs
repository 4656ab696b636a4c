//! A run's folder, `experiments/runs/<name>/`, and everything in it:
//!
//! | file | what |
//! |---|---|
//! | `config.toml` | the fully resolved configuration |
//! | `vocab.json` | word, character and tag vocabularies |
//! | `model.ckpt` | the best model (by dev F1) |
//! | `metrics.csv` | one row per epoch |
//! | `summary.json` | the final figures |
//! | `predictions.test.conll` | `token gold predicted` per line |
//! | `heads.csv` | attention head diagnostics on dev (attention taggers) |
//! | `checkpoint-eNNNN-bMMMMMM.{model,optim,json}` | the state after epoch NNNN and MMMMMM batches of the next, for `--resume` (two kept) |
//! | `.lock` | the pid of the `seqlab train` writing the folder, while it runs |
//!
//! Every file is written to a temporary name and renamed into place, so a
//! reader never sees half a file.

use anyhow::{bail, Context, Result};
use burn::module::Module;
use burn::prelude::Backend;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Record, Recorder};
use corpus::io::write_atomic;
use corpus::score::{Overall, Report, TypeScore};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const CONFIG: &str = "config.toml";
pub const VOCAB: &str = "vocab.json";
pub const MODEL: &str = "model.ckpt";
pub const METRICS: &str = "metrics.csv";
pub const SUMMARY: &str = "summary.json";

pub const LOCK: &str = ".lock";

/// Exclusive use of a run folder by one training process: an OS lock on
/// `.lock` (released by the kernel however the process ends), which holds
/// the pid for the message a second process prints. The file is removed
/// when the lock is dropped; one left by a killed run is taken over.
pub struct RunLock {
    path: PathBuf,
    _file: std::fs::File,
    /// A note when the lock was left by a run that is gone and taken over.
    pub taken_over: Option<String>,
}

impl RunLock {
    pub fn acquire(dir: &Path) -> Result<RunLock> {
        use std::io::{Read, Seek, Write};
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create the run folder {}", dir.display()))?;
        let path = dir.join(LOCK);
        for _ in 0..3 {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut previous = String::new();
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let _ = file.read_to_string(&mut previous);
                    let pid = previous.trim();
                    bail!(
                        "{} is in use by another seqlab train{}; wait for it to finish or choose another --out",
                        dir.display(),
                        if pid.is_empty() { String::new() } else { format!(" (pid {pid})") }
                    );
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("cannot lock {}", path.display()));
                }
            }
            // The file may have been removed by the process that held it
            // just before we locked it: then lock the new one.
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                let same = std::fs::metadata(&path).is_ok_and(|m| m.ino() == file.metadata().map_or(0, |f| f.ino()));
                if !same {
                    continue;
                }
            }
            let _ = file.read_to_string(&mut previous);
            let taken_over = (!previous.trim().is_empty()).then(|| {
                format!(
                    "note: {} was left by a run that is gone (pid {}); taking it over",
                    path.display(),
                    previous.trim()
                )
            });
            file.set_len(0)?;
            file.rewind()?;
            writeln!(file, "{}", std::process::id())?;
            file.flush()?;
            return Ok(RunLock { path, _file: file, taken_over });
        }
        bail!("cannot lock {}: it keeps being replaced", path.display())
    }
}

/// The pid of the `seqlab train` that holds `dir`'s lock now, if one does
/// (a lock file left by a process that is gone is not held).
pub fn lock_holder(dir: &Path) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(dir.join(LOCK)).ok()?;
    match file.try_lock_shared() {
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            Some(pid.trim().to_string())
        }
        // Free (released when `file` closes), or unreadable: nobody we can see.
        _ => None,
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed while still locked; the kernel releases the lock when the file closes.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `paths` with each folder of runs (a sweep's) replaced by its finished runs.
pub fn expand_run_folders(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().flat_map(|p| runs_in(p)).collect()
}

/// `dir` when it is a run; a folder that is not a run but holds finished
/// runs (a sweep's) gives those, sorted; anything else is kept (and read as
/// a run, which names what is missing).
fn runs_in(dir: &Path) -> Vec<PathBuf> {
    if dir.join(SUMMARY).is_file() || dir.join(CONFIG).is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut inside: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(SUMMARY).is_file())
        .collect();
    inside.sort();
    if inside.is_empty() {
        vec![dir.to_path_buf()]
    } else {
        inside
    }
}

/// Where runs live by default.
pub fn runs_root() -> PathBuf {
    PathBuf::from("experiments/runs")
}

/// P/R/F1 and counts of one split, in `seqlab score --json`'s terms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitMetrics {
    #[serde(flatten)]
    pub overall: Overall,
    pub per_type: BTreeMap<String, TypeScore>,
}

impl From<Report> for SplitMetrics {
    fn from(r: Report) -> Self {
        SplitMetrics { overall: r.overall, per_type: r.per_type }
    }
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub name: String,
    pub encoder: String,
    pub decoder: String,
    pub dataset: String,
    pub seed: u64,
    pub device: String,
    pub params: usize,
    /// Epochs run.
    pub epochs: usize,
    pub best_epoch: usize,
    pub train_seconds: f64,
    /// Training tokens per second (forward, backward and update).
    pub tokens_per_second: f64,
    pub dev: Option<SplitMetrics>,
    pub test: Option<SplitMetrics>,
    /// Question answering: exact match and F1 of the answers on dev (where
    /// the best epoch was chosen) and test (scored once, at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qa: Option<QaSummary>,
}

/// Answer-level scores of a QA run, per split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QaSummary {
    /// The metric: "official SQuAD v1.1" or "CMRC 2018".
    #[serde(default)]
    pub metric: String,
    #[serde(default)]
    pub dev: Option<QaMetrics>,
    #[serde(default)]
    pub test: Option<QaMetrics>,
}

impl QaSummary {
    /// Test scores, else dev (a run without a test split).
    pub fn reported(&self) -> Option<&QaMetrics> {
        self.test.as_ref().or(self.dev.as_ref())
    }
}

/// Answer-level scores of one split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QaMetrics {
    pub exact_match: f64,
    pub f1: f64,
    pub questions: usize,
}

/// One row of `metrics.csv`. `dev_precision`, `dev_recall` and `dev_f1`
/// are chunk scores (conlleval rules): entity F1 for a tagger, exact-span
/// F1 of the answer chunk for a QA run. A QA run is selected on its
/// answers' F1 under the dataset's metric (`summary.json`'s `qa.metric`),
/// `dev_answer_em` and `dev_answer_f1`; empty for a tagger (and in
/// metrics files written before these columns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochRow {
    pub epoch: usize,
    pub train_loss: f64,
    pub dev_precision: f64,
    pub dev_recall: f64,
    pub dev_f1: f64,
    pub seconds: f64,
    pub tokens_per_second: f64,
    pub lr: f64,
    #[serde(default)]
    pub dev_answer_em: Option<f64>,
    #[serde(default)]
    pub dev_answer_f1: Option<f64>,
}

impl EpochRow {
    /// The dev figure a run is selected on: answer F1 for QA, else entity F1.
    pub fn selected(&self) -> f64 {
        self.dev_answer_f1.unwrap_or(self.dev_f1)
    }
}

pub fn write_metrics(path: &Path, rows: &[EpochRow]) -> Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r)?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    write_atomic(path, bytes)?;
    Ok(())
}

pub fn read_metrics(path: &Path) -> Result<Vec<EpochRow>> {
    let mut r = csv::Reader::from_path(path).with_context(|| format!("{}", path.display()))?;
    r.deserialize()
        .enumerate()
        .map(|(i, row)| row.with_context(|| format!("{}:{}: expected a metrics row", path.display(), i + 2)))
        .collect()
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    write_atomic(path, serde_json::to_string_pretty(value)? + "\n")?;
    Ok(())
}

pub fn read_summary(dir: &Path) -> Result<Summary> {
    let path = dir.join(SUMMARY);
    let text = corpus::io::read_text(&path)?;
    serde_json::from_str(&text).map_err(|e| corpus::vocab::json_error(&path, &e).into())
}

const MAGIC: &[u8; 8] = b"SEQLABv1";

/// FNV-1a, 64 bit: enough to tell a complete checkpoint from a damaged one.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// Saves a module as `MAGIC | length | checksum | MessagePack record`.
pub fn save_module<B: Backend, M: Module<B>>(module: &M, path: &Path) -> Result<()> {
    save_record::<B, _>(module.clone().into_record(), path)
}

/// Saves any Burn record (a module's, an optimizer's) as a checksummed file.
pub fn save_record<B: Backend, R: Record<B>>(record: R, path: &Path) -> Result<()> {
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::default();
    let payload: Vec<u8> = Recorder::<B>::record(&recorder, record, ())
        .map_err(|e| anyhow::anyhow!("{}: cannot serialise: {e}", path.display()))?;
    let mut bytes = Vec::with_capacity(payload.len() + 24);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&fnv1a(&payload).to_le_bytes());
    bytes.extend_from_slice(&payload);
    write_atomic(path, bytes)?;
    Ok(())
}

/// Loads a module saved by [`save_module`] into `module` (built with the
/// same configuration); a truncated or damaged file is an error, not a panic.
pub fn load_module<B: Backend, M: Module<B>>(module: M, path: &Path, device: &B::Device) -> Result<M> {
    Ok(module.load_record(load_record::<B, M::Record>(path, device)?))
}

/// Loads a record saved by [`save_record`].
pub fn load_record<B: Backend, R: Record<B>>(path: &Path, device: &B::Device) -> Result<R> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    let payload = check_checkpoint(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::default();
    Recorder::<B>::load(&recorder, payload.to_vec(), device)
        .map_err(|e| anyhow::anyhow!("{}: not a checkpoint of this model: {e}", path.display()))
}

/// Where training stands at a checkpoint: enough to continue exactly.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TrainState {
    /// Epochs completed.
    pub epoch: usize,
    /// Optimizer steps taken.
    pub step: usize,
    /// Best dev F1 so far (`None` before any evaluation).
    pub best_f1: Option<f64>,
    pub best_epoch: usize,
    pub since_best: usize,
    pub train_seconds: f64,
    pub train_tokens: usize,
    /// How far epoch `epoch + 1` got (nothing at an epoch's end).
    #[serde(default)]
    pub partial: EpochSoFar,
    /// Seconds of the whole run so far, evaluation included (for `train.max_minutes`).
    #[serde(default)]
    pub wall_seconds: f64,
    /// Batches skipped for a NaN or infinite loss or gradient (`train.on_nan = "skip"`).
    #[serde(default)]
    pub skipped_batches: usize,
}

/// The running sums of an epoch in progress.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EpochSoFar {
    /// Batches done (trained or skipped).
    pub batches: usize,
    pub loss_sum: f64,
    pub tokens: usize,
    pub sentences: usize,
    pub seconds: f64,
}

impl TrainState {
    /// Where this state stands: epochs done, batches of the next.
    pub fn position(&self) -> Position {
        Position { epoch: self.epoch, batch: self.partial.batches }
    }
}

/// A checkpoint's place in training: after `epoch` epochs and `batch`
/// batches of the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub epoch: usize,
    pub batch: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.batch == 0 {
            write!(f, "epoch {}", self.epoch)
        } else {
            write!(f, "epoch {}, batch {}", self.epoch + 1, self.batch)
        }
    }
}

/// The files of the checkpoint at `at`: model, optimizer, state (written last).
pub fn checkpoint_files(dir: &Path, at: Position) -> [PathBuf; 4] {
    ["model", "optim", "json", "average"]
        .map(|ext| dir.join(format!("checkpoint-e{:04}-b{:06}.{ext}", at.epoch, at.batch)))
}

/// Checkpoints that have a state file, newest first.
pub fn checkpoints(dir: &Path) -> Vec<Position> {
    let mut found: Vec<Position> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|f| {
            let name = f.file_name().to_string_lossy().to_string();
            let (e, b) = name.strip_prefix("checkpoint-e")?.strip_suffix(".json")?.split_once("-b")?;
            Some(Position { epoch: e.parse().ok()?, batch: b.parse().ok()? })
        })
        .collect();
    found.sort_unstable_by(|a, b| b.cmp(a));
    found
}

/// The payload of a checkpoint, if it is complete and intact.
pub fn check_checkpoint(bytes: &[u8]) -> Result<&[u8]> {
    if bytes.len() < 24 || &bytes[..8] != MAGIC {
        bail!("not a seqlab checkpoint (or truncated before its header)");
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let sum = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    let payload = &bytes[24..];
    if payload.len() != len {
        bail!("truncated checkpoint: {} of {len} bytes", payload.len());
    }
    if fnv1a(payload) != sum {
        bail!("damaged checkpoint: checksum mismatch");
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_checkpoints_are_detected() {
        let payload = b"hello model";
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&fnv1a(payload).to_le_bytes());
        bytes.extend_from_slice(payload);
        assert_eq!(check_checkpoint(&bytes).unwrap(), payload);
        assert!(check_checkpoint(&bytes[..bytes.len() - 1]).unwrap_err().to_string().contains("truncated"));
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(check_checkpoint(&bad).unwrap_err().to_string().contains("checksum"));
        assert!(check_checkpoint(b"junk").is_err());
    }

    #[test]
    fn metrics_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(METRICS);
        let rows = vec![EpochRow {
            epoch: 1,
            train_loss: 2.5,
            dev_precision: 0.5,
            dev_recall: 0.25,
            dev_f1: 1.0 / 3.0,
            seconds: 1.5,
            tokens_per_second: 1000.0,
            lr: 0.001,
            dev_answer_em: None,
            dev_answer_f1: None,
        }];
        write_metrics(&p, &rows).unwrap();
        assert_eq!(read_metrics(&p).unwrap(), rows);
        let qa = vec![EpochRow { dev_answer_em: Some(0.25), dev_answer_f1: Some(0.5), ..rows[0].clone() }];
        write_metrics(&p, &qa).unwrap();
        assert!(std::fs::read_to_string(&p).unwrap().starts_with(
            "epoch,train_loss,dev_precision,dev_recall,dev_f1,seconds,tokens_per_second,lr,dev_answer_em,dev_answer_f1\n"
        ));
        assert_eq!(read_metrics(&p).unwrap(), qa);
        assert_eq!(qa[0].selected(), 0.5);
        assert_eq!(rows[0].selected(), 1.0 / 3.0);
        // A metrics file from before the answer columns still reads.
        std::fs::write(&p, "epoch,train_loss,dev_precision,dev_recall,dev_f1,seconds,tokens_per_second,lr\n1,2.5,0.5,0.25,0.3333333333333333,1.5,1000.0,0.001\n").unwrap();
        assert_eq!(read_metrics(&p).unwrap(), rows);
    }

    /// A layer that became optional (the attention encoder's final LayerNorm,
    /// `Option` since post-norm blocks need none) still loads from a
    /// checkpoint written when it was not, with its weights.
    #[test]
    fn a_layer_made_optional_loads_from_a_checkpoint_written_before() {
        use burn::backend::NdArray;
        use burn::nn::{Linear, LinearConfig};
        type B = NdArray<f32>;
        #[derive(Module, Debug)]
        struct Before<B: Backend> {
            layer: Linear<B>,
        }
        #[derive(Module, Debug)]
        struct After<B: Backend> {
            layer: Option<Linear<B>>,
        }
        // Parameters are initialised lazily, each copy on its own: read them
        // before the module is cloned to be saved.
        let weights = |x: &Linear<B>| {
            let w = x.weight.val().into_data().to_vec::<f32>().unwrap();
            let b = x.bias.as_ref().unwrap().val().into_data().to_vec::<f32>().unwrap();
            (w, b)
        };
        let device = Default::default();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("model.bin");
        let before = Before { layer: LinearConfig::new(3, 4).init::<B>(&device) };
        let saved = weights(&before.layer);
        save_module::<B, _>(&before, &p).unwrap();
        let fresh = After { layer: Some(LinearConfig::new(3, 4).init::<B>(&device)) };
        assert_ne!(weights(fresh.layer.as_ref().unwrap()), saved, "two random inits");
        let after = load_module::<B, _>(fresh, &p, &device).unwrap();
        assert_eq!(weights(after.layer.as_ref().expect("the layer is kept")), saved);
    }
}
