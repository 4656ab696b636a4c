//! `seqlab sweep GRID.toml`: a grid of runs (configs × datasets × seeds ×
//! axes of `--set` values, [`grid`]) trained into one sweep folder, on this
//! machine ([`local`]) or as a Slurm job array ([`slurm`]). A run is
//! skipped when finished and resumed from its checkpoint when interrupted
//! ([`status`]); a failed run is reported with the tail of its log. At the
//! end: a table of every run, and `seqlab compare` of the finished ones.

pub mod grid;
pub mod local;
pub mod slurm;
pub mod status;

use crate::reporter::Reporter;
use crate::train::rundir::{self, Summary};
use anyhow::{bail, Context, Result};
use grid::{Grid, PlannedRun, SlurmSpec};
use local::{Ended, Outcome};
use status::Status;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the runs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    Local,
    Slurm,
}

/// What `seqlab sweep` is asked.
#[derive(Clone, Debug)]
pub struct SweepRequest {
    pub grid: PathBuf,
    /// Replaces the grid's `out`.
    pub out: Option<PathBuf>,
    pub on: On,
    /// List the runs (and the batch script) without starting any.
    pub dry_run: bool,
    /// Replace the grid's `lanes` and `threads`.
    pub lanes: Option<usize>,
    pub threads: Option<usize>,
    /// One run of the grid, in the foreground (what a Slurm task does).
    pub run: Option<String>,
    /// Replaces the grid's `[slurm]` keys that it sets.
    pub slurm: SlurmSpec,
    /// How often to ask Slurm about the job.
    pub poll: Duration,
    /// The `seqlab` binary the runs are started with.
    pub exe: PathBuf,
}

/// A sweep stopped by Ctrl-C or SIGTERM: its runs wrote checkpoints, and
/// the same command resumes them. The binary exits with 130.
#[derive(Debug)]
pub struct SweepInterrupted(pub String);

impl std::fmt::Display for SweepInterrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SweepInterrupted {}

/// The copy of the grid file kept in the sweep folder, `grids/GRID.toml`
/// (what Slurm's tasks read).
pub fn frozen(grid: &Grid) -> PathBuf {
    grid.out.join("grids").join(format!("{}.toml", grid.stem()))
}

/// Runs the sweep `req` asks for.
pub fn sweep(req: &SweepRequest, reporter: &dyn Reporter) -> Result<()> {
    if req.lanes == Some(0) || req.threads == Some(0) {
        bail!("--lanes and --threads-per-run must be at least 1");
    }
    let mut grid = Grid::load(&req.grid, req.out.as_deref())?;
    grid.lanes = req.lanes.unwrap_or(grid.lanes).max(1);
    grid.threads = req.threads.unwrap_or(grid.threads).max(1);
    let spec = merge(&grid.slurm, &req.slurm);
    check(&grid)?;
    if let Some(name) = &req.run {
        return one_run(&grid, name, &req.exe, reporter);
    }
    let states: Vec<(&PlannedRun, Status)> = grid.runs.iter().map(|r| (r, Status::of(&grid.dir(r)))).collect();
    let todo: Vec<&PlannedRun> =
        states.iter().filter(|(_, s)| matches!(s, Status::New | Status::Interrupted)).map(|(r, _)| *r).collect();
    if req.dry_run {
        return dry_run(&grid, &states, &todo, req, &spec, reporter);
    }
    let count = |state: Status| states.iter().filter(|(_, s)| *s == state).count();
    let elsewhere = match count(Status::Running) {
        0 => String::new(),
        n => format!(", {n} training in another process and left to it"),
    };
    reporter.message(&format!(
        "{}: {} runs into {} ({} finished and skipped{elsewhere}, {} to resume, {} to start){}",
        grid.file.display(),
        states.len(),
        grid.out.display(),
        count(Status::Finished),
        count(Status::Interrupted),
        count(Status::New),
        match req.on {
            On::Local => format!(
                "; {} at a time, {} thread{} each",
                grid.lanes,
                grid.threads,
                if grid.threads == 1 { "" } else { "s" }
            ),
            On::Slurm => String::new(),
        }
    ));
    let outcomes = match req.on {
        On::Local => {
            freeze(&grid)?;
            local::run(&grid, &todo, &req.exe, reporter)?
        }
        On::Slurm => on_slurm(&grid, &todo, &spec, &req.exe, req.poll, reporter)?,
    };
    finish(&grid, &outcomes, reporter)
}

/// The grid's `[slurm]` with what the command line sets.
fn merge(file: &SlurmSpec, cli: &SlurmSpec) -> SlurmSpec {
    SlurmSpec {
        partition: cli.partition.clone().or(file.partition.clone()),
        time: cli.time.clone().or(file.time.clone()),
        gres: cli.gres.clone().or(file.gres.clone()),
        max_parallel: cli.max_parallel.or(file.max_parallel),
        extra: [file.extra.clone(), cli.extra.clone()].concat(),
    }
}

/// Every run's config reads with its settings and its data folder is there,
/// before anything starts (a typo fails now, not after hours).
fn check(grid: &Grid) -> Result<()> {
    for run in &grid.runs {
        let data = run_config(grid, run)?.data.dir;
        let data = run.data.clone().unwrap_or(data);
        if !data.is_dir() {
            bail!("{}: run {}: the dataset folder {} does not exist", grid.file.display(), run.name, data.display());
        }
    }
    Ok(())
}

/// The config `run` trains with.
fn run_config(grid: &Grid, run: &PlannedRun) -> Result<crate::setup::config::RunConfig> {
    let mut set = vec![format!("name={}", run.group)];
    set.extend(run.set.iter().cloned());
    crate::setup::config::load(Some(&run.config), &set)
        .with_context(|| format!("{}: run {}", grid.file.display(), run.name))
}

/// Keeps a copy of the grid file in the sweep folder.
fn freeze(grid: &Grid) -> Result<PathBuf> {
    let path = frozen(grid);
    let dir = path.parent().expect("grids/ is in the sweep folder");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if std::fs::canonicalize(&grid.file).ok() != std::fs::canonicalize(&path).ok() {
        corpus::io::write_atomic(&path, corpus::io::read_text(&grid.file)?)?;
    }
    Ok(path)
}

fn dry_run(
    grid: &Grid,
    states: &[(&PlannedRun, Status)],
    todo: &[&PlannedRun],
    req: &SweepRequest,
    spec: &SlurmSpec,
    reporter: &dyn Reporter,
) -> Result<()> {
    for (run, state) in states {
        let what = match state {
            Status::Running => format!(
                "(training in another process, pid {})",
                rundir::lock_holder(&grid.dir(run)).unwrap_or_default()
            ),
            _ => status::shell_line("seqlab", &status::train_args(grid, run, *state)),
        };
        reporter.output(&format!("{:<8} {:<40} {what}", state.word(), run.name));
    }
    reporter.output(&format!(
        "{} runs: {} finished, {} to train, into {}",
        states.len(),
        states.len() - todo.len(),
        todo.len(),
        grid.out.display()
    ));
    if req.on == On::Slurm && !todo.is_empty() {
        let cwd = std::env::current_dir()?;
        reporter.output("the batch script (sbatch --parsable):");
        reporter.output(slurm::script(grid, todo, spec, &req.exe, &cwd, &cwd.join(frozen(grid))).trim_end());
    }
    Ok(())
}

/// One run of the grid, where it stands (a Slurm task): a finished run is
/// left alone; an interrupted or failed one is an error (the task fails).
fn one_run(grid: &Grid, name: &str, exe: &Path, reporter: &dyn Reporter) -> Result<()> {
    let run = grid.run(name)?;
    match Status::of(&grid.dir(run)) {
        Status::Finished => {
            reporter.message(&format!("{name}: finished already"));
            return Ok(());
        }
        Status::Running => bail!(
            "{name}: {} is held by another seqlab train (pid {})",
            grid.dir(run).display(),
            rundir::lock_holder(&grid.dir(run)).unwrap_or_default()
        ),
        Status::New | Status::Interrupted => {}
    }
    let outcomes = local::run(grid, &[run], exe, reporter)?;
    match outcomes.first().map(|o| &o.ended) {
        Some(Ended::Finished) => Ok(()),
        Some(Ended::Interrupted) => Err(SweepInterrupted(format!("{name}: checkpoint written, stopped")).into()),
        _ => bail!("{name} failed; its log {}:\n{}", grid.log(run).display(), status::tail(&grid.log(run), 20)),
    }
}

fn on_slurm(
    grid: &Grid,
    todo: &[&PlannedRun],
    spec: &SlurmSpec,
    exe: &Path,
    poll: Duration,
    reporter: &dyn Reporter,
) -> Result<Vec<Outcome>> {
    let started = std::time::Instant::now();
    let (job, runs): (String, Vec<&PlannedRun>) = match slurm::earlier_job(grid) {
        Some(job) => {
            reporter.message(&format!("job {job}, submitted earlier for this sweep, is still queued: following it"));
            (job, grid.runs.iter().filter(|r| Status::of(&grid.dir(r)) != Status::Finished).collect())
        }
        None if todo.is_empty() => return Ok(Vec::new()),
        None => {
            // The tasks read this copy: a grid edited while its job is queued does not move under them.
            let frozen = freeze(grid)?;
            let job = slurm::submit_sweep(grid, todo, spec, exe, &frozen)?;
            reporter.message(&format!(
                "submitted job array {job}: {} tasks ({})",
                todo.len(),
                slurm::folder(grid).join("array.sh").display()
            ));
            (job, todo.to_vec())
        }
    };
    slurm::follow(&job, grid, &runs, poll, reporter)?;
    match slurm::accounting(&job) {
        Some(table) => reporter.message(&format!("sacct -j {job}:\n{}", table.trim_end())),
        None => reporter.message(&format!("job {job} has left the queue (no accounting here: the run folders tell)")),
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(runs
        .iter()
        .map(|r| {
            let ended =
                if Status::of(&grid.dir(r)) == Status::Finished { Ended::Finished } else { Ended::Failed(None) };
            let log = match slurm::task_output(grid, &job, &runs, r) {
                Some(out) if !grid.log(r).is_file() => out,
                _ => grid.log(r),
            };
            Outcome { name: r.name.clone(), ended, seconds, log }
        })
        .collect())
}

/// The table of every run, `seqlab compare` of the finished ones, and the
/// failures with their logs' tails.
fn finish(grid: &Grid, outcomes: &[Outcome], reporter: &dyn Reporter) -> Result<()> {
    reporter.output(&format!("{:<40} {:<12} {:>9} {:>8} {:>8} {:>7}", "run", "state", "best/ep", "dev", "test", "min"));
    let mut finished = Vec::new();
    let mut elsewhere = 0;
    for run in &grid.runs {
        let dir = grid.dir(run);
        let state = Status::of(&dir);
        let ended = outcomes.iter().find(|o| o.name == run.name);
        reporter.output(&table_row(run, &dir, state, ended));
        match state {
            Status::Finished => finished.push(dir),
            Status::Running => elsewhere += 1,
            Status::New | Status::Interrupted => {}
        }
    }
    for o in outcomes.iter().filter(|o| matches!(o.ended, Ended::Failed(_))) {
        reporter.message(&format!("{} failed; the end of {}:\n{}", o.name, o.log.display(), status::tail(&o.log, 20)));
    }
    if !finished.is_empty() {
        let w = crate::report::compare::run(&finished, &grid.compare, 1000)
            .with_context(|| format!("seqlab compare of the finished runs into {}", grid.compare.display()))?;
        reporter.message(&format!("compared {} finished runs: {}", finished.len(), w.files[3].display()));
    }
    let failed: Vec<&str> =
        outcomes.iter().filter(|o| matches!(o.ended, Ended::Failed(_))).map(|o| o.name.as_str()).collect();
    let stopped = outcomes.iter().filter(|o| o.ended == Ended::Interrupted).count();
    let left = grid.runs.len() - finished.len();
    if !failed.is_empty() {
        bail!("{} of {} runs failed: {}", failed.len(), grid.runs.len(), failed.join(", "));
    }
    if stopped == 0 && elsewhere > 0 {
        bail!(
            "{left} of {} runs not finished: {elsewhere} still training in another process; the same command compares them all once they are done",
            grid.runs.len()
        );
    }
    if stopped > 0 || left > 0 {
        return Err(SweepInterrupted(format!(
            "interrupted: {left} of {} runs not finished ({stopped} stopped at a checkpoint); the same command resumes them",
            grid.runs.len()
        ))
        .into());
    }
    Ok(())
}

/// A row of the final table: how the run ended and its figures.
fn table_row(run: &PlannedRun, dir: &Path, state: Status, ended: Option<&Outcome>) -> String {
    let state = match (state, ended.map(|o| &o.ended)) {
        (Status::Finished, Some(_)) => "finished",
        (Status::Finished, None) => "skipped",
        (_, Some(Ended::Failed(_))) => "FAILED",
        (Status::Interrupted, _) => "interrupted",
        (Status::New, _) => "not run",
        (Status::Running, _) => "running",
    };
    let (epochs, dev, test, minutes) = match rundir::read_summary(dir) {
        Ok(s) => {
            let (dev, test) = figures(&s);
            (format!("{}/{}", s.best_epoch, s.epochs), dev, test, format!("{:.1}", s.train_seconds / 60.0))
        }
        Err(_) => ("-".into(), "-".into(), "-".into(), "-".into()),
    };
    format!("{:<40} {state:<12} {epochs:>9} {dev:>8} {test:>8} {minutes:>7}", run.name)
}

/// Dev and test F1 of a run: the answers' F1 for a QA run, else entity F1.
fn figures(s: &Summary) -> (String, String) {
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.4}"));
    match &s.qa {
        Some(qa) => (f(qa.dev.as_ref().map(|m| m.f1)), f(qa.test.as_ref().map(|m| m.f1))),
        None => (f(s.dev.as_ref().map(|m| m.overall.f1)), f(s.test.as_ref().map(|m| m.overall.f1))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published grids (experiments/grids/): each expands to the runs
    /// its comment promises, and every run's config reads with its settings.
    #[test]
    fn every_published_grid_expands_and_its_runs_configs_read() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let expected = [
            ("heads-conll-d512", 18, "n1000-h8-d0-s1"),
            ("heads-resume-d256", 12, "nall-h1-d0.1-s1"),
            ("heads-resume-d512", 54, "n300-h8-d0-s1"),
            ("positions-conll", 18, "conll-relative-s1"),
            ("positions-resume", 18, "resume-relative-s1"),
            ("positions-resume-len64", 6, "resume-relative-len64-s1"),
            ("positions-squad", 36, "squad-qa-concat-self-relative-s1"),
            ("qa", 16, "qa-cross-s1"),
            ("qa-cues", 6, "qa-bidaf-nocues-s1"),
            ("qa-fusion-cmrc", 15, "qa-bidaf-s1"),
            ("qa-fusion-squad", 15, "qa-bidaf-s1"),
        ];
        let mut files: Vec<String> = std::fs::read_dir(root.join("experiments/grids"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        files.sort();
        let mut names: Vec<String> = expected.iter().map(|(n, _, _)| format!("{n}.toml")).collect();
        names.sort();
        assert_eq!(files, names, "a grid without a test here, or a test without its grid");
        for (name, count, first) in expected {
            let file = root.join("experiments/grids").join(format!("{name}.toml"));
            let grid = Grid::load(&file, None).unwrap();
            assert_eq!(grid.runs.len(), count, "{name}");
            assert_eq!(grid.runs[0].name, first, "{name}");
            for run in &grid.runs {
                let run = PlannedRun { config: root.join(&run.config), ..run.clone() };
                run_config(&grid, &run).unwrap();
            }
        }
    }
}
