//! `--on local`: the runs of a sweep as `seqlab train` processes, `lanes` at
//! a time. Each writes `logs/<run>.log`; Ctrl-C (or SIGTERM) is passed on
//! to the runs, which write a checkpoint and stop, and no new run starts.

use crate::reporter::Reporter;
use crate::sweep::grid::{Grid, PlannedRun};
use crate::sweep::status::{self, Status};
use crate::train::checkpoint::Interrupt;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a run of this sweep ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ended {
    Finished,
    /// Stopped by a signal after writing a checkpoint (exit status 130).
    Interrupted,
    /// Anything else: the exit status (`None`: killed by a signal).
    Failed(Option<i32>),
}

/// One run that this sweep started and saw end.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub name: String,
    pub ended: Ended,
    pub seconds: f64,
    /// What to read when it failed: the run's log (or Slurm's output of its task).
    pub log: std::path::PathBuf,
}

struct Running<'g> {
    run: &'g PlannedRun,
    child: Child,
    started: Instant,
}

/// Trains `todo` with `exe` (the `seqlab` binary), `grid.lanes` at a time.
pub fn run(grid: &Grid, todo: &[&PlannedRun], exe: &Path, reporter: &dyn Reporter) -> Result<Vec<Outcome>> {
    let interrupt = Interrupt::install();
    let bar = reporter.progress(todo.len() as u64, "runs");
    let mut queue = todo.iter();
    let mut running: Vec<Running> = Vec::new();
    let mut outcomes = Vec::new();
    let mut passed_on = false;
    loop {
        while !interrupt.requested() && running.len() < grid.lanes {
            let Some(run) = queue.next() else { break };
            // Another process may have taken or finished it since the plan.
            match Status::of(&grid.dir(run)) {
                state @ (Status::Finished | Status::Running) => {
                    bar.message(&format!("{}: {} in another process, skipped", run.name, state.word()));
                    bar.inc(1);
                }
                Status::New | Status::Interrupted => {
                    running.push(Running { run, child: spawn(grid, run, exe)?, started: Instant::now() })
                }
            }
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        if interrupt.requested() && !passed_on {
            bar.message("interrupted: the runs write a checkpoint and stop; no new run starts");
            running.iter().for_each(|r| stop(&r.child));
            passed_on = true;
        }
        let mut still = Vec::new();
        for mut r in running {
            match r.child.try_wait().with_context(|| format!("waiting for {}", r.run.name))? {
                Some(exit) => {
                    let o = outcome(grid, &r, exit);
                    bar.message(&line(&o));
                    bar.inc(1);
                    outcomes.push(o);
                }
                None => still.push(r),
            }
        }
        running = still;
        bar.set_message(now_running(grid, &running));
    }
    bar.finish();
    Ok(outcomes)
}

/// Starts `run` in its own process group (a Ctrl-C reaches it only through
/// this sweep, once), its output appended to its log.
fn spawn(grid: &Grid, run: &PlannedRun, exe: &Path) -> Result<Child> {
    let log_path = grid.log(run);
    let logs = log_path.parent().expect("a log is in logs/");
    std::fs::create_dir_all(logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let args = status::train_args(grid, run, Status::of(&grid.dir(run)));
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    writeln!(log, "== {}", status::shell_line("seqlab", &args))?;
    let mut cmd = Command::new(exe);
    cmd.args(&args).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.spawn().with_context(|| format!("cannot start {} for {}", exe.display(), run.name))
}

/// Asks a run to write a checkpoint and stop (SIGINT, as Ctrl-C would).
fn stop(child: &Child) {
    #[cfg(unix)]
    // SAFETY: sends a signal to a child this process started and has not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    #[cfg(not(unix))]
    let _ = child;
}

fn outcome(grid: &Grid, r: &Running, exit: ExitStatus) -> Outcome {
    let finished = Status::of(&grid.dir(r.run)) == Status::Finished;
    let ended = match exit.code() {
        Some(0) if finished => Ended::Finished,
        Some(130) => Ended::Interrupted,
        code => Ended::Failed(code),
    };
    Outcome { name: r.run.name.clone(), ended, seconds: r.started.elapsed().as_secs_f64(), log: grid.log(r.run) }
}

/// What the progress display says of an ended run.
fn line(o: &Outcome) -> String {
    let minutes = o.seconds / 60.0;
    match o.ended {
        Ended::Finished => format!("{}: finished in {minutes:.1} min", o.name),
        Ended::Interrupted => format!("{}: checkpoint written, stopped after {minutes:.1} min", o.name),
        Ended::Failed(code) => format!(
            "{}: FAILED ({}) after {minutes:.1} min",
            o.name,
            code.map_or("killed by a signal".into(), |c| format!("exit status {c}"))
        ),
    }
}

/// The progress display's message: each running run and its epochs so far.
fn now_running(grid: &Grid, running: &[Running]) -> String {
    let each: Vec<String> = running
        .iter()
        .map(|r| format!("{} (epoch {})", r.run.name, status::epochs_done(&grid.dir(r.run)) + 1))
        .collect();
    if each.is_empty() {
        String::new()
    } else {
        format!("running {}", each.join(", "))
    }
}
