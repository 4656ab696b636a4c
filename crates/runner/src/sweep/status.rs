//! Where a run of a sweep stands, read from its folder alone (so a sweep
//! picks up after a restart, and Slurm's tasks need no shared state), and
//! the `seqlab train` command that moves it on.

use crate::sweep::grid::{Grid, PlannedRun};
use crate::train::rundir;
use std::ffi::OsString;
use std::path::Path;

/// A run's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `summary.json` is written: skipped.
    Finished,
    /// Checkpoints and no summary: stopped on the way, resumed.
    Interrupted,
    /// Nothing to go on: trained from the start.
    New,
    /// A `seqlab train` holds its folder (another sweep's, or a Slurm
    /// task's): left to it.
    Running,
}

impl Status {
    pub fn of(dir: &Path) -> Status {
        if dir.join(rundir::SUMMARY).is_file() {
            Status::Finished
        } else if rundir::lock_holder(dir).is_some() {
            Status::Running
        } else if !rundir::checkpoints(dir).is_empty() {
            Status::Interrupted
        } else {
            Status::New
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Status::Finished => "finished",
            Status::Interrupted => "resume",
            Status::New => "new",
            Status::Running => "running",
        }
    }
}

/// The arguments of the `seqlab` process that trains `run` from where it
/// stands: `--resume` from its checkpoint, else from the start.
pub fn train_args(grid: &Grid, run: &PlannedRun, status: Status) -> Vec<OsString> {
    let dir = grid.dir(run);
    let mut args: Vec<OsString> = vec!["--threads".into(), grid.threads.to_string().into(), "train".into()];
    if status == Status::Interrupted {
        args.extend(["--resume".into(), dir.into_os_string()]);
    } else {
        args.extend(["--config".into(), run.config.clone().into_os_string()]);
        if let Some(d) = &run.data {
            args.extend(["--data".into(), d.clone().into_os_string()]);
        }
        args.extend(["--seed".into(), run.seed.to_string().into(), "--out".into(), dir.into_os_string()]);
        args.extend(["--set".into(), format!("name={}", run.group).into()]);
        for s in &run.set {
            args.extend(["--set".into(), s.into()]);
        }
    }
    args.extend(["--device".into(), grid.device.clone().into(), "--quiet".into()]);
    args
}

/// The command line of `args`, as a shell would read it.
pub fn shell_line(program: &str, args: &[OsString]) -> String {
    std::iter::once(program.to_string())
        .chain(args.iter().map(|a| shell_word(&a.to_string_lossy())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `w` quoted for a POSIX shell where it needs it.
pub fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "._+=-/:,@%".contains(c)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// The last `n` lines of the file at `path` (empty when it cannot be read).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).to_string()).unwrap_or_default();
    // Progress bars redraw with carriage returns: keep each line's last state.
    let lines: Vec<&str> = text.lines().map(|l| l.rsplit('\r').next().unwrap_or(l)).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Epochs a run has written to `metrics.csv` so far.
pub fn epochs_done(dir: &Path) -> usize {
    rundir::read_metrics(&dir.join(rundir::METRICS)).map_or(0, |rows| rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn grid(out: &Path) -> Grid {
        let text = r#"
            name = "t"
            configs = ["c/bilstm-crf.toml"]
            data = ["d/toy"]
            seeds = [4]
            threads = 2
            set = ["train.epochs=2"]
            [[axis]]
            key = "model.encoder.bilstm.hidden"
            values = [16]
            prefix = "h"
        "#;
        Grid::parse(text, Path::new("g.toml"), Some(out)).unwrap()
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter().map(|a| a.to_string_lossy().to_string()).collect()
    }

    #[test]
    fn a_run_is_new_then_interrupted_or_running_then_finished() {
        let work = tempfile::tempdir().unwrap();
        let g = grid(work.path());
        let run = &g.runs[0];
        let dir = g.dir(run);
        assert_eq!(Status::of(&dir), Status::New);
        let out = dir.to_string_lossy().to_string();
        assert_eq!(
            strings(&train_args(&g, run, Status::New)),
            [
                "--threads",
                "2",
                "train",
                "--config",
                "c/bilstm-crf.toml",
                "--data",
                "d/toy",
                "--seed",
                "4",
                "--out",
                &out,
                "--set",
                "name=t-h16",
                "--set",
                "train.epochs=2",
                "--set",
                "model.encoder.bilstm.hidden=16",
                "--device",
                "cpu",
                "--quiet"
            ]
        );
        // A folder with files but no checkpoint (stopped in its first epoch) starts again.
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(rundir::CONFIG), "").unwrap();
        assert_eq!(Status::of(&dir), Status::New);
        // A checkpoint: resumed with the run's own config.
        for f in rundir::checkpoint_files(&dir, rundir::Position { epoch: 1, batch: 0 }) {
            std::fs::write(f, "x").unwrap();
        }
        assert_eq!(Status::of(&dir), Status::Interrupted);
        assert_eq!(
            strings(&train_args(&g, run, Status::Interrupted)),
            ["--threads", "2", "train", "--resume", &out, "--device", "cpu", "--quiet"]
        );
        // A train process holds the folder: left to it.
        let lock = rundir::RunLock::acquire(&dir).unwrap();
        assert_eq!(Status::of(&dir), Status::Running);
        assert_eq!(rundir::lock_holder(&dir), Some(std::process::id().to_string()));
        drop(lock);
        assert_eq!(Status::of(&dir), Status::Interrupted);
        std::fs::write(dir.join(rundir::SUMMARY), "{}").unwrap();
        assert_eq!(Status::of(&dir), Status::Finished);
    }

    #[test]
    fn shell_lines_quote_what_needs_it() {
        let args: Vec<OsString> = ["--set", "name=a b", "--set", r#"x="it's""#, "p/q.toml"].map(Into::into).to_vec();
        assert_eq!(shell_line("seqlab", &args), r#"seqlab --set 'name=a b' --set 'x="it'\''s"' p/q.toml"#);
    }

    #[test]
    fn tails_and_epochs() {
        let work = tempfile::tempdir().unwrap();
        let log = work.path().join("x.log");
        std::fs::write(&log, "a\nb\nbar 1\rbar 2\rerror: c.txt line 3: expected a tag\n").unwrap();
        assert_eq!(tail(&log, 2), "b\nerror: c.txt line 3: expected a tag");
        assert_eq!(tail(&PathBuf::from("/nonexistent"), 2), "");
        let row = |epoch| rundir::EpochRow {
            epoch,
            train_loss: 1.0,
            dev_precision: 0.5,
            dev_recall: 0.5,
            dev_f1: 0.5,
            seconds: 1.0,
            tokens_per_second: 100.0,
            lr: 0.001,
            dev_answer_em: None,
            dev_answer_f1: None,
        };
        rundir::write_metrics(&work.path().join(rundir::METRICS), &[row(1), row(2)]).unwrap();
        assert_eq!(epochs_done(work.path()), 2);
        assert_eq!(epochs_done(&log), 0);
    }
}
