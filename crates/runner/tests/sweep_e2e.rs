//! `seqlab sweep` end to end on tiny generated data: a grid trained on this
//! machine, skipped when finished, resumed after Ctrl-C, a failed run
//! reported with its log; and (ignored by default: it needs a running
//! Slurm, which `.ci/slurm start` provides) the same grid as a Slurm job array.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
mod common;

use common::{config, ok, seqlab};

/// A toy dataset shared by the tests of this file.
fn toy() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        ok(seqlab(&["data", "toy", "--out", d.path().to_str().unwrap(), "--sentences", "200", "--seed", "7"]));
        d
    })
    .path()
}

/// Small BiLSTM-CRF settings, as TOML strings of the grid's `set`.
const SMALL: &str = r#""model.features.word_dim=16", "model.features.char_dim=8", "model.features.char_filters=8", "train.batch_size=16""#;

/// A grid of the BiLSTM-CRF on the toy data: `seeds` × hidden sizes 8 and 16
/// (4 runs for two seeds), 2 epochs, two lanes; `extra` appended.
fn grid(dir: &Path, seeds: &str, extra: &str) -> PathBuf {
    let text = format!(
        r#"
out = "{out}"
name = "toy"
configs = ["{config}"]
data = ["{data}"]
seeds = [{seeds}]
set = [{SMALL}, "train.epochs=2"]
threads = 1
lanes = 2
[[axis]]
key = "model.encoder.bilstm.hidden"
values = [8, 16]
prefix = "h"
{extra}
"#,
        out = dir.join("sweep").display(),
        config = config("bilstm-crf.toml"),
        data = toy().display(),
    );
    let path = dir.join("grid.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn sweep(grid: &Path, args: &[&str]) -> Output {
    let mut all = vec!["sweep", grid.to_str().unwrap()];
    all.extend(args);
    seqlab(&all)
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).to_string(), String::from_utf8_lossy(&o.stderr).to_string())
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn test_f1(run: &Path) -> f64 {
    json(&run.join("summary.json"))["test"]["f1"].as_f64().unwrap()
}

#[test]
fn a_grid_trains_side_by_side_then_is_skipped_and_compared() {
    let work = tempfile::tempdir().unwrap();
    let g = grid(work.path(), "1, 2", "");
    let out = work.path().join("sweep");
    // --dry-run: the four runs, new, with their commands; nothing started.
    let (dry, _) = text(&sweep(&g, &["--dry-run"]));
    let names = ["toy-h8-s1", "toy-h16-s1", "toy-h8-s2", "toy-h16-s2"];
    for n in names {
        assert!(dry.lines().any(|l| l.starts_with("new") && l.contains(n)), "{dry}");
    }
    assert!(dry.contains("--set name=toy-h8 --set model.features.word_dim=16"), "{dry}");
    assert!(dry.contains("4 runs: 0 finished, 4 to train"), "{dry}");
    assert!(!out.join("toy-h8-s1").exists());

    let o = sweep(&g, &[]);
    let (table, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("4 runs into") && err.contains("0 finished and skipped, 0 to resume, 4 to start"), "{err}");
    for n in names {
        let row = table.lines().find(|l| l.starts_with(n)).unwrap_or_else(|| panic!("no row {n} in {table}"));
        assert!(row.contains(" finished ") && row.contains("/2 "), "{row}");
        assert!(out.join(n).join("summary.json").is_file());
        assert!(out.join("logs").join(format!("{n}.log")).is_file());
        // The run's `name` setting groups its seeds.
        assert_eq!(json(&out.join(n).join("summary.json"))["name"], n.trim_end_matches("-s1").trim_end_matches("-s2"));
    }
    assert!(out.join("report.html").is_file() && out.join("comparison.md").is_file(), "{err}");
    assert!(out.join("grids/grid.toml").is_file());
    let comparison = std::fs::read_to_string(out.join("comparison.md")).unwrap();
    assert!(comparison.contains("toy-h8") && comparison.contains("toy-h16"), "{comparison}");

    // The sweep's run is the run `seqlab train` gives with those settings.
    let alone = work.path().join("alone");
    let mut args: Vec<String> =
        ["train", "--config", &config("bilstm-crf.toml"), "--data", toy().to_str().unwrap()].map(String::from).to_vec();
    args.extend(["--seed", "2", "--out", alone.to_str().unwrap(), "--threads", "1", "--quiet"].map(String::from));
    for s in SMALL.split(", ").map(|s| s.trim_matches('"')).chain(["train.epochs=2", "model.encoder.bilstm.hidden=16"])
    {
        args.extend(["--set".to_string(), s.to_string()]);
    }
    ok(seqlab(&args));
    assert_eq!(test_f1(&alone), test_f1(&out.join("toy-h16-s2")));

    // Again: every run is finished and skipped; the comparison is redone.
    std::fs::remove_file(out.join("report.html")).unwrap();
    let o = sweep(&g, &[]);
    let (table, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("4 finished and skipped"), "{err}");
    assert_eq!(table.lines().filter(|l| l.contains(" skipped ")).count(), 4, "{table}");
    assert!(out.join("report.html").is_file());
    // seqlab compare takes the sweep folder.
    let cmp = work.path().join("cmp");
    ok(seqlab(&["compare", out.to_str().unwrap(), "--out", cmp.to_str().unwrap()]));
    let md = std::fs::read_to_string(cmp.join("comparison.md")).unwrap();
    assert!(names.iter().all(|n| md.contains(n)), "{md}");
}

#[test]
fn a_failed_run_is_reported_with_its_log_and_the_others_finish() {
    let work = tempfile::tempdir().unwrap();
    // A copy of the toy data whose training file has a broken line.
    let bad = work.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    for f in std::fs::read_dir(toy()).unwrap().flatten() {
        std::fs::copy(f.path(), bad.join(f.file_name())).unwrap();
    }
    let train = std::fs::read_dir(&bad)
        .unwrap()
        .flatten()
        .map(|f| f.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("train"));
    let train = train.expect("a training file");
    let mut lines: Vec<String> = std::fs::read_to_string(&train).unwrap().lines().map(String::from).collect();
    lines[2] = "onlyonecolumn".into();
    std::fs::write(&train, lines.join("\n") + "\n").unwrap();
    let g = grid(work.path(), "1", "");
    let text_ = std::fs::read_to_string(&g)
        .unwrap()
        .replace(
            &format!("data = [\"{}\"]", toy().display()),
            &format!("data = [\"{}\", \"{}\"]", toy().display(), bad.display()),
        )
        .replace("values = [8, 16]", "values = [8]");
    std::fs::write(&g, text_).unwrap();
    let o = sweep(&g, &[]);
    let (table, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let good = format!("toy-{}-h8-s1", toy().file_name().unwrap().to_string_lossy());
    assert!(table.lines().any(|l| l.starts_with(&good) && l.contains("finished")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("toy-bad-h8-s1") && l.contains("FAILED")), "{table}");
    assert!(err.contains("toy-bad-h8-s1 failed; the end of") && err.contains("logs/toy-bad-h8-s1.log"), "{err}");
    // The log's tail names the file and line.
    assert!(err.contains(&format!("{}:3: expected 2 columns", train.display())), "{err}");
    assert!(err.contains("1 of 2 runs failed: toy-bad-h8-s1"), "{err}");
    assert!(work.path().join("sweep/report.html").is_file(), "the finished run is compared");
}

#[test]
fn mistakes_in_the_grid_stop_it_before_any_run_starts() {
    let work = tempfile::tempdir().unwrap();
    let g = grid(work.path(), "1", "[[axis]]\nkey = \"train.learning_rate\"\nvalues = [0.1]\n");
    let o = sweep(&g, &[]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("run toy-h8-0.1-s1") && err.contains("learning_rate"), "{err}");
    assert!(!work.path().join("sweep").exists(), "nothing starts");
    // A missing dataset folder.
    let g = grid(work.path(), "1", "");
    let t = std::fs::read_to_string(&g).unwrap().replace(&toy().display().to_string(), "/nonexistent/data");
    std::fs::write(&g, t).unwrap();
    let (_, err) = text(&sweep(&g, &[]));
    assert!(err.contains("the dataset folder /nonexistent/data does not exist"), "{err}");
    // A run the grid does not have.
    let g = grid(work.path(), "1", "");
    let (_, err) = text(&sweep(&g, &["--run", "toy-h99-s1"]));
    assert!(err.contains("no run named toy-h99-s1"), "{err}");
}

/// Checkpoint state files of `dir`.
fn checkpoints(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("checkpoint-e") && n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ctrl_c_stops_the_runs_at_a_checkpoint_and_the_same_command_resumes_them() {
    let work = tempfile::tempdir().unwrap();
    // One run of 12 epochs with a checkpoint every 5 steps: it is still
    // training when the sweep passes the Ctrl-C on (it looks every 200 ms).
    let g = grid(work.path(), "3", "");
    let t = std::fs::read_to_string(&g)
        .unwrap()
        .replace("values = [8, 16]", "values = [16]")
        .replace("\"train.epochs=2\"", "\"train.epochs=12\", \"train.checkpoint_every=5\"");
    std::fs::write(&g, t).unwrap();
    let run = work.path().join("sweep/toy-h16-s3");
    let child = Command::new(env!("CARGO_BIN_EXE_seqlab"))
        .args(["sweep", g.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !checkpoints(&run).iter().any(|n| n.starts_with("checkpoint-e0001-b") && !n.contains("-b000000")) {
        assert!(t0.elapsed().as_secs() < 120, "no checkpoint inside epoch 2 appeared");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    let (table, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("the same command resumes them"), "{err}");
    assert!(table.lines().any(|l| l.starts_with("toy-h16-s3") && l.contains("interrupted")), "{table}");
    assert!(!run.join("summary.json").exists() && !checkpoints(&run).is_empty());
    assert!(!run.join(".lock").exists(), "the run's lock outlived it");
    // The same command: resumed, and it ends where an uninterrupted run does.
    let o = sweep(&g, &[]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("1 to resume"), "{err}");
    let log = std::fs::read_to_string(work.path().join("sweep/logs/toy-h16-s3.log")).unwrap();
    assert!(log.contains("train --resume"), "{log}");
    let whole = work.path().join("whole");
    let t = std::fs::read_to_string(&g).unwrap().replace("/sweep\"", "/whole\"");
    std::fs::write(&g, t).unwrap();
    ok(sweep(&g, &[]));
    let metrics = |d: &Path| std::fs::read_to_string(d.join("metrics.csv")).unwrap();
    let losses = |m: String| m.lines().map(|l| l.split(',').take(5).collect::<Vec<_>>().join(",")).collect::<Vec<_>>();
    assert_eq!(losses(metrics(&run)), losses(metrics(&whole.join("toy-h16-s3"))));
    assert_eq!(test_f1(&run), test_f1(&whole.join("toy-h16-s3")));
}

/// The grid of the first test as a Slurm job array, one task per run, on the
/// single-node Slurm of `.ci/slurm start`. CI runs it with `--ignored`.
#[test]
#[ignore = "needs a running Slurm: .ci/slurm start"]
fn a_grid_runs_as_a_slurm_job_array() {
    let up = Command::new("sinfo").args(["-h", "-o", "%t"]).output();
    let up = up.map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
    assert!(
        ["idle", "mix", "alloc"].iter().any(|s| up.contains(s)),
        "no Slurm node takes jobs (sinfo: {up:?}); start one with .ci/slurm start"
    );
    let work = tempfile::tempdir().unwrap();
    let g = grid(work.path(), "1, 2", "[slurm]\ntime = \"0:10:00\"\n");
    let out = work.path().join("sweep");
    let (dry, _) = text(&sweep(&g, &["--on", "slurm", "--dry-run"]));
    assert!(dry.contains("#SBATCH --array=0-3") && dry.contains("#SBATCH --time=0:10:00"), "{dry}");
    let o = sweep(&g, &["--on", "slurm", "--poll", "1"]);
    let (table, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("submitted job array") && err.contains("4 tasks"), "{err}");
    for n in ["toy-h8-s1", "toy-h16-s1", "toy-h8-s2", "toy-h16-s2"] {
        assert!(out.join(n).join("summary.json").is_file(), "{n}: {err}");
        assert!(table.lines().any(|l| l.starts_with(n) && l.contains("finished")), "{table}");
        assert!(std::fs::read_to_string(out.join("logs").join(format!("{n}.log")))
            .unwrap()
            .contains("seqlab --threads 1 train"));
    }
    let job = std::fs::read_to_string(out.join("slurm/grid/job")).unwrap();
    let id = job.lines().next().unwrap();
    assert!(out.join("logs").join(format!("slurm-{id}_0.out")).is_file());
    assert!(out.join("report.html").is_file());
    // Nothing left to submit.
    let o = sweep(&g, &["--on", "slurm"]);
    let (_, err) = text(&o);
    assert!(o.status.success() && err.contains("4 finished and skipped") && !err.contains("submitted"), "{err}");
}
