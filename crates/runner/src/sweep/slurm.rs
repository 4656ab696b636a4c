//! `--on slurm`: the runs of a sweep as one Slurm job array, one task per
//! run. Slurm schedules; seqlab writes the batch script, submits it with
//! `sbatch`, follows it with `squeue` (and `sacct`, where the cluster keeps
//! accounting) and reads the outcome from the run folders. Each task is
//! `seqlab sweep GRID --run NAME`: the run trained, or resumed from its
//! checkpoint, exactly as `--on local` would.

use crate::reporter::Reporter;
use crate::sweep::grid::{Grid, PlannedRun, SlurmSpec};
use crate::sweep::status::{shell_word, Status};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the batch script and the job's id are kept: `slurm/GRID/` in the sweep folder.
pub fn folder(grid: &Grid) -> PathBuf {
    grid.out.join("slurm").join(grid.stem())
}

/// The job array's batch script. `exe` is the `seqlab` binary, `cwd` the
/// directory the grid's paths are read from, `frozen` the copy of the grid
/// file the tasks read; all absolute.
pub fn script(grid: &Grid, runs: &[&PlannedRun], spec: &SlurmSpec, exe: &Path, cwd: &Path, frozen: &Path) -> String {
    let out = cwd.join(&grid.out);
    let mut s = String::from("#!/bin/bash\n");
    let stem = grid.stem();
    let mut option = |o: String| s.push_str(&format!("#SBATCH {o}\n"));
    option(format!("--job-name=seqlab-{stem}"));
    let limit = spec.max_parallel.map_or(String::new(), |n| format!("%{n}"));
    option(format!("--array=0-{}{limit}", runs.len().saturating_sub(1)));
    option("--ntasks=1".into());
    option(format!("--cpus-per-task={}", grid.threads));
    option(format!("--chdir={}", cwd.display()));
    option(format!("--output={}/logs/slurm-%A_%a.out", out.display()));
    if let Some(p) = &spec.partition {
        option(format!("--partition={p}"));
    }
    if let Some(t) = &spec.time {
        option(format!("--time={t}"));
    }
    if let Some(g) = gres(grid, spec) {
        option(format!("--gres={g}"));
    }
    for e in &spec.extra {
        option(e.clone());
    }
    s.push_str("set -euo pipefail\n");
    let names: Vec<String> = runs.iter().map(|r| shell_word(&r.name)).collect();
    s.push_str(&format!("runs=({})\n", names.join(" ")));
    s.push_str(&format!(
        "exec {} sweep {} --out {} --threads-per-run {} --run \"${{runs[$SLURM_ARRAY_TASK_ID]}}\"\n",
        shell_word(&exe.to_string_lossy()),
        shell_word(&frozen.to_string_lossy()),
        shell_word(&out.to_string_lossy()),
        grid.threads
    ));
    s
}

/// `--gres`: as asked, else one GPU for a GPU device.
fn gres(grid: &Grid, spec: &SlurmSpec) -> Option<String> {
    spec.gres.clone().or_else(|| matches!(grid.device.as_str(), "cuda" | "wgpu").then(|| "gpu:1".to_string()))
}

/// Submits `script` (a file); the job's id.
pub fn submit(script: &Path) -> Result<String> {
    let o = Command::new("sbatch")
        .arg("--parsable")
        .arg(script)
        .output()
        .context("cannot run sbatch: --on slurm needs Slurm's commands (sbatch, squeue) on PATH")?;
    if !o.status.success() {
        bail!("sbatch {} failed: {}", script.display(), String::from_utf8_lossy(&o.stderr).trim());
    }
    parse_job_id(&String::from_utf8_lossy(&o.stdout))
}

/// `sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`.
pub fn parse_job_id(stdout: &str) -> Result<String> {
    let id = stdout.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        bail!("sbatch printed no job id: {stdout:?}");
    }
    Ok(id)
}

/// The job's tasks that Slurm still holds: (task, state), from
/// `squeue -h -r -j ID -o "%K %T"` (a pending range is one line, `0-3`).
pub fn parse_squeue(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

fn queued(job: &str) -> Result<Vec<(String, String)>> {
    let o = Command::new("squeue")
        .args(["-h", "-r", "-j", job, "-o", "%K %T"])
        .output()
        .context("cannot run squeue: --on slurm needs Slurm's commands on PATH")?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        // A job that has left the controller's memory is reported as invalid: done.
        if err.contains("Invalid job id") {
            return Ok(Vec::new());
        }
        bail!("squeue -j {job} failed: {}", err.trim());
    }
    Ok(parse_squeue(&String::from_utf8_lossy(&o.stdout)))
}

/// Waits while Slurm holds any task of `job`, showing how many of `runs`
/// have finished and what the queue says, every `poll`.
pub fn follow(job: &str, grid: &Grid, runs: &[&PlannedRun], poll: Duration, reporter: &dyn Reporter) -> Result<()> {
    let bar = reporter.progress(runs.len() as u64, "runs");
    let mut failures = 0;
    loop {
        // A controller that restarts answers nothing for a while: ask again, up to 5 times in a row.
        let tasks = match queued(job) {
            Ok(tasks) => tasks,
            Err(e) if failures < 5 => {
                failures += 1;
                bar.message(&format!("note: {e:#}; asking again in {} s", poll.as_secs_f64()));
                std::thread::sleep(poll);
                continue;
            }
            Err(e) => return Err(e),
        };
        failures = 0;
        let done = runs.iter().filter(|r| Status::of(&grid.dir(r)) == Status::Finished).count();
        bar.set_position(done as u64);
        if tasks.is_empty() {
            break;
        }
        let count = |state: &str| tasks.iter().filter(|(_, s)| s == state).count();
        let pending: usize = tasks.iter().filter(|(_, s)| s == "PENDING").map(|(t, _)| range_len(t)).sum();
        bar.set_message(format!("job {job}: {} running, {pending} pending", count("RUNNING")));
        std::thread::sleep(poll);
    }
    bar.finish();
    Ok(())
}

/// Tasks in a squeue task field: `3`, `0-3`, `4-7%2` or `[0-3]`.
fn range_len(task: &str) -> usize {
    let t = task.trim_matches(|c| c == '[' || c == ']');
    let t = t.split('%').next().unwrap_or(t);
    t.split(',')
        .map(|p| match p.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum()
}

/// What `sacct` says of the job's tasks; `None` where the cluster keeps no
/// accounting (then the run folders alone tell).
pub fn accounting(job: &str) -> Option<String> {
    let o = Command::new("sacct").args(["-n", "-X", "-P", "-j", job, "-o", "JobID,State,ExitCode,Elapsed"]).output();
    match o {
        Ok(o) if o.status.success() && !o.stdout.is_empty() => Some(String::from_utf8_lossy(&o.stdout).to_string()),
        _ => None,
    }
}

/// A job submitted earlier for this sweep that Slurm still holds.
pub fn earlier_job(grid: &Grid) -> Option<String> {
    let id = std::fs::read_to_string(folder(grid).join("job")).ok()?;
    let id = id.lines().next()?.trim().to_string();
    queued(&id).ok().filter(|t| !t.is_empty()).map(|_| id)
}

/// Writes the batch script, submits it and records the job's id.
pub fn submit_sweep(grid: &Grid, runs: &[&PlannedRun], spec: &SlurmSpec, exe: &Path, frozen: &Path) -> Result<String> {
    let cwd = std::env::current_dir().context("the current directory")?;
    let dir = folder(grid);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::create_dir_all(grid.out.join("logs"))?;
    let path = dir.join("array.sh");
    corpus::io::write_atomic(&path, script(grid, runs, spec, exe, &cwd, &cwd.join(frozen)))?;
    let job = submit(&path)?;
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    corpus::io::write_atomic(&dir.join("job"), format!("{job}\n{}\n", names.join("\n")))?;
    Ok(job)
}

/// The Slurm output of the task that ran `run` in `job` (its log before
/// the run's own log was opened, or when the task never started it).
pub fn task_output(grid: &Grid, job: &str, runs: &[&PlannedRun], run: &PlannedRun) -> Option<PathBuf> {
    let i = runs.iter().position(|r| r.name == run.name)?;
    Some(grid.out.join("logs").join(format!("slurm-{job}_{i}.out")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(device: &str) -> Grid {
        let text = format!(
            r#"
            out = "runs/s"
            configs = ["c/x.toml"]
            seeds = [1, 2, 3]
            threads = 2
            device = "{device}"
            "#
        );
        Grid::parse(&text, Path::new("grids/pos.toml"), None).unwrap()
    }

    #[test]
    fn the_script_is_one_array_task_per_run() {
        let g = grid("cpu");
        let runs: Vec<&PlannedRun> = g.runs.iter().collect();
        let spec = SlurmSpec {
            partition: Some("short".into()),
            time: Some("0:30:00".into()),
            max_parallel: Some(2),
            extra: vec!["--mem=4G".into()],
            ..Default::default()
        };
        let s = script(&g, &runs, &spec, Path::new("/bin/seqlab"), Path::new("/w"), Path::new("/w/runs/s/grid.toml"));
        for line in [
            "#SBATCH --job-name=seqlab-pos",
            "#SBATCH --array=0-2%2",
            "#SBATCH --cpus-per-task=2",
            "#SBATCH --chdir=/w",
            "#SBATCH --output=/w/runs/s/logs/slurm-%A_%a.out",
            "#SBATCH --partition=short",
            "#SBATCH --time=0:30:00",
            "#SBATCH --mem=4G",
            "runs=(x-s1 x-s2 x-s3)",
            "exec /bin/seqlab sweep /w/runs/s/grid.toml --out /w/runs/s --threads-per-run 2 --run \"${runs[$SLURM_ARRAY_TASK_ID]}\"",
        ] {
            assert!(s.lines().any(|l| l == line), "no line {line:?} in\n{s}");
        }
        assert!(!s.contains("--gres"), "{s}");
        // A GPU device asks for a GPU; --gres wins.
        let g = grid("cuda");
        let s = script(&g, &runs, &SlurmSpec::default(), Path::new("/b"), Path::new("/w"), Path::new("/f"));
        assert!(s.contains("#SBATCH --gres=gpu:1\n") && s.contains("--array=0-2\n"), "{s}");
        let spec = SlurmSpec { gres: Some("gpu:a100:2".into()), ..Default::default() };
        assert!(
            script(&g, &runs, &spec, Path::new("/b"), Path::new("/w"), Path::new("/f")).contains("--gres=gpu:a100:2\n")
        );
    }

    #[test]
    fn slurm_replies_are_read() {
        assert_eq!(parse_job_id("1234\n").unwrap(), "1234");
        assert_eq!(parse_job_id("77;cluster\n").unwrap(), "77");
        assert!(parse_job_id("Submitted batch job 5").is_err());
        let q = parse_squeue("0 RUNNING\n1 RUNNING\n[2-5%2] PENDING\n");
        assert_eq!(q.len(), 3);
        assert_eq!(q[2], ("[2-5%2]".to_string(), "PENDING".to_string()));
        assert_eq!(q.iter().map(|(t, _)| range_len(t)).sum::<usize>(), 6);
        assert_eq!(range_len("7"), 1);
        assert_eq!(range_len("0-3"), 4);
        assert_eq!(range_len("1,3-4"), 3);
    }
}
