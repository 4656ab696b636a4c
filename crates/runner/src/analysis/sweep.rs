//! `seqlab heads-sweep`: the head-count sweep's report. Runs trained at one
//! d_model with different head counts (several seeds each), and possibly
//! different attention dropout and training-set sizes
//! (`data.train_sentences`), are grouped by those three: dev/test F1 mean
//! ± std, the epoch of the best dev F1 and the first epoch within 95 % of
//! it (how fast a setting converges), training time, and what the head
//! diagnostics say (collapsed heads, boundary share, entropy).

use crate::report::compare::mean_std;
use crate::setup::config;
use crate::train::rundir::{self, read_summary};
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
    /// Mean over heads of the diagnostics' boundary share and entropy.
    boundary: f64,
    entropy: f64,
    /// `train.epochs`: the schedule's length (fewer when stopped early).
    epochs: usize,
    attention_dropout: f64,
    /// Training sentences used (`data.train_sentences`; 0: all).
    train_sentences: usize,
    /// The first epoch whose dev F1 reached 95 % of the run's best.
    epoch_95: usize,
    minutes: f64,
}

/// What a row of the report groups: training sentences (0: all), heads,
/// attention dropout (as written).
type Setting = (usize, usize, String);

/// The first epoch (1-based) whose dev F1 is at least 95 % of the best.
fn epoch_reaching_95(rows: &[rundir::EpochRow]) -> usize {
    let best = rows.iter().map(|r| r.dev_f1).fold(f64::NEG_INFINITY, f64::max);
    rows.iter().find(|r| r.dev_f1 >= 0.95 * best).map_or(0, |r| r.epoch)
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
    let headers = reader.headers()?.clone();
    let column = |name: &str| headers.iter().position(|x| x == name);
    let (b_col, e_col) = (column("boundary_share"), column("entropy"));
    let (mut collapsed, mut total, mut boundary, mut entropy) = (0, 0, 0.0, 0.0);
    for (i, row) in reader.records().enumerate() {
        let row = row.with_context(|| format!("{}:{}", heads_csv.display(), i + 2))?;
        let number =
            |c: Option<usize>| c.and_then(|c| row.get(c)).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
        total += 1;
        collapsed += usize::from(row.get(col) == Some("true"));
        boundary += number(b_col);
        entropy += number(e_col);
    }
    let metrics = rundir::read_metrics(&dir.join(rundir::METRICS))?;
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
        boundary: boundary / total.max(1) as f64,
        entropy: entropy / total.max(1) as f64,
        epochs: cfg.train.epochs,
        attention_dropout: a.attention_dropout,
        train_sentences: cfg.data.train_sentences,
        epoch_95: epoch_reaching_95(&metrics),
        minutes: s.train_seconds / 60.0,
    })
}

/// The sweep's report from its `runs` (markdown, written to `out`), with
/// links to the pictures under `pictures` (`h<N>/`) if given; returns it.
pub fn run(runs_dirs: &[PathBuf], out: &Path, pictures: Option<&Path>) -> Result<String> {
    if runs_dirs.is_empty() {
        bail!("give the run folders of the sweep (or its sweep folder)");
    }
    let runs_dirs = &rundir::expand_run_folders(runs_dirs);
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
    // Subsets first (smallest first), the whole training set last.
    let mut groups: BTreeMap<Setting, Vec<&SweepRun>> = BTreeMap::new();
    for r in &runs {
        let size = if r.train_sentences == 0 { usize::MAX } else { r.train_sentences };
        groups.entry((size, r.heads, r.attention_dropout.to_string())).or_default().push(r);
    }
    let pm = |xs: Vec<f64>| {
        let (m, s) = mean_std(&xs);
        format!("{m:.4} ± {s:.4}")
    };
    let mean = |xs: Vec<f64>| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
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
        "Attention-CRF taggers on {} at d_model {}, one row per setting (mean ± std over seeds). \
Each run's schedule: {} epochs (`train.epochs`), with early stopping. \
*95 %*: the first epoch whose dev F1 reached 95 % of the run's best, the measure of how fast a setting converges. \
*Training, min*: the time of the training epochs (dev evaluation not counted). \
A head is *collapsed* when over half its attention lands on boundary tokens or its entropy is near 0 or 1; \
boundary share and entropy are the means over heads (`seqlab heads`, on dev).\n",
        datasets.join(", "),
        runs[0].d_model,
        {
            let mut e: Vec<String> = runs.iter().map(|r| r.epochs.to_string()).collect();
            e.sort();
            e.dedup();
            e.join(" / ")
        }
    );
    md.push_str(
        "| training sentences | heads × head_dim | attention dropout | seeds | dev F1 | test F1 | epoch of best dev F1 | 95 % | training, min | collapsed heads | boundary share | entropy | picture |\n\
|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for ((size, heads, dropout), g) in &groups {
        let picture = picture_link(pictures, out, &(*size, *heads, dropout.clone()));
        let _ = writeln!(
            md,
            "| {} | {heads} × {} | {dropout} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} of {} | {:.3} | {:.3} | {picture} |",
            size_label(*size),
            g[0].head_dim,
            g.len(),
            pm(g.iter().map(|r| r.dev_f1).collect()),
            pm(g.iter().map(|r| r.test_f1).collect()),
            mean(g.iter().map(|r| r.best_epoch as f64).collect()),
            mean(g.iter().map(|r| r.epoch_95 as f64).collect()),
            mean(g.iter().map(|r| r.minutes).collect()),
            mean(g.iter().map(|r| r.collapsed as f64).collect()),
            g[0].total_heads,
            mean(g.iter().map(|r| r.boundary).collect()),
            mean(g.iter().map(|r| r.entropy).collect()),
        );
    }
    corpus::io::write_atomic(out, &md)?;
    Ok(md)
}

/// A [`Setting`]'s training sentences as written: `all` for the whole set.
fn size_label(size: usize) -> String {
    if size == usize::MAX {
        "all".to_string()
    } else {
        size.to_string()
    }
}

/// A link to a setting's pictures under `pictures`: `n<N>-h<H>-d<D>/`
/// (N training sentences or `all`), else `h<H>/` (a sweep of head counts
/// only), when it holds an `index.html`.
fn picture_link(pictures: Option<&Path>, out: &Path, (size, heads, dropout): &Setting) -> String {
    let names = [format!("n{}-h{heads}-d{dropout}", size_label(*size)), format!("h{heads}")];
    names
        .iter()
        .filter_map(|name| pictures.map(|p| (name, p.join(name).join("index.html"))))
        .find(|(_, p)| p.is_file())
        .map(|(name, p)| format!("[{name}]({})", relative(&p, out.parent())))
        .unwrap_or_default()
}

/// `p` relative to `base` when it lies below it.
fn relative(p: &Path, base: Option<&Path>) -> String {
    base.and_then(|b| p.strip_prefix(b).ok())
        .map(PathBuf::from)
        .unwrap_or_else(|| p.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convergence_is_the_first_epoch_within_95_percent_of_the_best() {
        let row = |epoch, dev_f1| rundir::EpochRow {
            epoch,
            train_loss: 1.0,
            dev_precision: 0.0,
            dev_recall: 0.0,
            dev_f1,
            seconds: 1.0,
            tokens_per_second: 1.0,
            lr: 0.001,
            dev_answer_em: None,
            dev_answer_f1: None,
        };
        // Best 0.90: 95 % of it is 0.855, first reached at epoch 3 (epoch 5 dips, epoch 6 is the best).
        let rows = [row(1, 0.2), row(2, 0.85), row(3, 0.86), row(4, 0.88), row(5, 0.5), row(6, 0.9)];
        assert_eq!(epoch_reaching_95(&rows), 3);
        assert_eq!(epoch_reaching_95(&rows[..1]), 1);
        assert_eq!(epoch_reaching_95(&[]), 0);
    }
}
