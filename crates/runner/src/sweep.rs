//! `seqlab heads-sweep`: the head-count sweep's report. Runs trained at one
//! d_model with different head counts (several seeds each) are grouped by
//! head count: dev/test F1 mean ± std, epochs to the best dev F1, and how
//! many heads the diagnostics flag as collapsed.

use crate::compare::mean_std;
use crate::config;
use crate::rundir::{self, read_summary};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

struct SweepRun {
    heads: usize,
    head_dim: usize,
    d_model: usize,
    dataset: String,
    dev_f1: f64,
    test_f1: f64,
    best_epoch: usize,
    collapsed: usize,
    total_heads: usize,
    /// `train.epochs`: the schedule's length (fewer when stopped early).
    epochs: usize,
}

fn read_run(dir: &Path) -> Result<SweepRun> {
    let cfg = config::load(Some(&dir.join(rundir::CONFIG)), &[])
        .with_context(|| format!("{} is not a seqlab run folder", dir.display()))?;
    let a = &cfg.model.encoder.attention;
    let s = read_summary(dir)?;
    let heads_csv = dir.join("heads.csv");
    let text = std::fs::read_to_string(&heads_csv)
        .with_context(|| format!("{}: no heads.csv (is it an attention run with a dev split?)", dir.display()))?;
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let col = reader.headers()?.iter().position(|h| h == "collapsed").context("heads.csv has no `collapsed` column")?;
    let (mut collapsed, mut total) = (0, 0);
    for (i, row) in reader.records().enumerate() {
        let row = row.with_context(|| format!("{}:{}", heads_csv.display(), i + 2))?;
        total += 1;
        collapsed += usize::from(row.get(col) == Some("true"));
    }
    Ok(SweepRun {
        heads: a.heads,
        head_dim: a.head_dim(),
        d_model: a.d_model,
        dataset: s.dataset.clone(),
        dev_f1: s.dev.as_ref().map_or(f64::NAN, |m| m.overall.f1),
        test_f1: s.test.as_ref().map_or(f64::NAN, |m| m.overall.f1),
        best_epoch: s.best_epoch,
        collapsed,
        total_heads: total,
        epochs: cfg.train.epochs,
    })
}

/// The sweep's report from its `runs` (markdown, written to `out`), with
/// links to the pictures under `pictures` (`h<N>/`) if given; returns it.
pub fn run(runs_dirs: &[PathBuf], out: &Path, pictures: Option<&Path>) -> Result<String> {
    if runs_dirs.is_empty() {
        bail!("give the run folders of the sweep");
    }
    let runs: Vec<SweepRun> = runs_dirs.iter().map(|d| read_run(d)).collect::<Result<_>>()?;
    for (r, dir) in runs.iter().zip(runs_dirs) {
        if r.d_model != runs[0].d_model || r.dataset != runs[0].dataset {
            bail!(
                "{}: d_model {} on {}, but {} has d_model {} on {}; a sweep varies the head count only",
                dir.display(),
                r.d_model,
                r.dataset,
                runs_dirs[0].display(),
                runs[0].d_model,
                runs[0].dataset
            );
        }
    }
    let mut groups: BTreeMap<usize, Vec<&SweepRun>> = BTreeMap::new();
    for r in &runs {
        groups.entry(r.heads).or_default().push(r);
    }
    let pm = |xs: Vec<f64>| {
        let (m, s) = mean_std(&xs);
        format!("{m:.4} ± {s:.4}")
    };
    let mut md = String::new();
    let datasets: Vec<&str> = {
        let mut d: Vec<&str> = runs.iter().map(|r| r.dataset.as_str()).collect();
        d.sort();
        d.dedup();
        d
    };
    let _ = writeln!(md, "# Head-count sweep\n");
    let _ = writeln!(
        md,
        "Attention-CRF taggers on {} at d_model {}, one row per head count (mean ± std over seeds). \
Each run's schedule: {} epochs (`train.epochs`). \
A head is *collapsed* when over half its attention lands on boundary tokens or its entropy is near 0 or 1 (`seqlab heads`).\n",
        datasets.join(", "),
        runs[0].d_model,
        {
            let mut e: Vec<String> = runs.iter().map(|r| r.epochs.to_string()).collect();
            e.sort();
            e.dedup();
            e.join(" / ")
        }
    );
    md.push_str("| heads × head_dim | seeds | dev F1 | test F1 | epoch of best dev F1 | collapsed heads | picture |\n|---|---|---|---|---|---|---|\n");
    for (heads, g) in &groups {
        let picture = pictures
            .map(|p| p.join(format!("h{heads}")).join("index.html"))
            .filter(|p| p.is_file())
            .map(|p| format!("[h{heads}]({})", relative(&p, out.parent())))
            .unwrap_or_default();
        let _ = writeln!(
            md,
            "| {heads} × {} | {} | {} | {} | {:.1} | {:.1} of {} | {picture} |",
            g[0].head_dim,
            g.len(),
            pm(g.iter().map(|r| r.dev_f1).collect()),
            pm(g.iter().map(|r| r.test_f1).collect()),
            g.iter().map(|r| r.best_epoch as f64).sum::<f64>() / g.len() as f64,
            g.iter().map(|r| r.collapsed as f64).sum::<f64>() / g.len() as f64,
            g[0].total_heads
        );
    }
    corpus::io::write_atomic(out, &md)?;
    Ok(md)
}

/// `p` relative to `base` when it lies below it.
fn relative(p: &Path, base: Option<&Path>) -> String {
    base.and_then(|b| p.strip_prefix(b).ok())
        .map(PathBuf::from)
        .unwrap_or_else(|| p.to_path_buf())
        .display()
        .to_string()
}
