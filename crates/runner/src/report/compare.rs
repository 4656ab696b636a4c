//! `seqlab compare`: a side-by-side table of runs, seeds grouped with
//! mean ± std, a paired bootstrap test between the two best, a plot of
//! dev F1 per epoch, and all of it in one page, `report.html`
//! ([`crate::report::html`]).

use crate::report::html::{self, line_chart, Bars, Curve, Report, RunFiles, DEV_CURVE_TITLE};
use crate::train::rundir::{self, read_metrics, read_summary, EpochRow, Summary};
use anyhow::{bail, Context, Result};
use corpus::io::write_atomic;
use corpus::score::{conlleval, Counts, ScoreFile};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Clone)]
struct Run {
    dir: PathBuf,
    summary: Summary,
    metrics: Vec<EpochRow>,
}

impl Run {
    /// Chunk F1 (conlleval) on test: entity F1 for a tagger, the answer
    /// chunk's exact-span F1 for a QA run.
    fn test_f1(&self) -> f64 {
        self.summary.test.as_ref().map_or(f64::NAN, |m| m.overall.f1)
    }
    fn dev_f1(&self) -> f64 {
        self.summary.dev.as_ref().map_or(f64::NAN, |m| m.overall.f1)
    }
    fn is_qa(&self) -> bool {
        self.summary.qa.is_some()
    }
    /// What the run is selected on, on dev, and the same figure on test:
    /// answer F1 for a QA run, entity F1 for a tagger.
    fn dev_selected(&self) -> f64 {
        match &self.summary.qa {
            Some(qa) => qa.dev.as_ref().map_or(f64::NAN, |m| m.f1),
            None => self.dev_f1(),
        }
    }
    fn test_selected(&self) -> f64 {
        match &self.summary.qa {
            Some(qa) => qa.test.as_ref().map_or(f64::NAN, |m| m.f1),
            None => self.test_f1(),
        }
    }
    /// The name of [`Self::dev_selected`]'s figure: "entity F1
    /// (conlleval)", or "answer F1 (SQuAD v1.1)" with the dataset's metric.
    fn selected_on(&self) -> String {
        match &self.summary.qa {
            Some(qa) => format!("answer F1 ({})", qa.metric.trim_start_matches("official ")),
            None => "entity F1 (conlleval)".to_string(),
        }
    }
    /// The dev figure per epoch that [`Self::dev_selected`] is the best of
    /// (NaN for a QA run's epochs from before metrics.csv had answer F1).
    fn dev_curve_value(&self, m: &EpochRow) -> f64 {
        if self.is_qa() {
            m.dev_answer_f1.unwrap_or(f64::NAN)
        } else {
            m.dev_f1
        }
    }
    fn label(&self) -> String {
        self.dir.file_name().map_or_else(|| self.summary.name.clone(), |n| n.to_string_lossy().to_string())
    }
}

fn find_runs(runs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    if !runs.is_empty() {
        return Ok(rundir::expand_run_folders(runs));
    }
    let root = rundir::runs_root();
    let mut dirs: Vec<PathBuf> = match std::fs::read_dir(&root) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.join(rundir::SUMMARY).is_file()).collect(),
        Err(_) => Vec::new(),
    };
    dirs.sort();
    if dirs.is_empty() {
        bail!("no finished runs under {} (train one with `seqlab train`, or name run folders)", root.display());
    }
    Ok(dirs)
}

/// What `compare` wrote.
pub struct Written {
    /// comparison.md's text.
    pub markdown: String,
    pub files: Vec<PathBuf>,
}

/// Compares `runs` (default: every finished run under the runs folder),
/// writing comparison.md, comparison.csv, dev-f1.svg and report.html into `out`, with a
/// bootstrap of `samples` resamples for the two best runs.
pub fn run(runs: &[PathBuf], out: &Path, samples: usize) -> Result<Written> {
    let mut found = Vec::new();
    for dir in find_runs(runs)? {
        let summary = read_summary(&dir).with_context(|| format!("{} is not a finished run", dir.display()))?;
        let metrics = read_metrics(&dir.join(rundir::METRICS)).unwrap_or_default();
        found.push(Run { dir, summary, metrics });
    }
    let mut runs = found;
    name_settings(&mut runs)?;
    // Entity types of the taggers (a QA run's one chunk type is its answer).
    let types: BTreeSet<String> = runs
        .iter()
        .filter(|r| !r.is_qa())
        .flat_map(|r| r.summary.test.iter().flat_map(|t| t.per_type.keys().cloned()))
        .collect();
    std::fs::create_dir_all(out)?;
    write_atomic(&out.join("comparison.csv"), csv_table(&runs, &types)?)?;
    let bootstrap = best_pair_bootstrap(&runs, samples);
    let plot = out.join("dev-f1.svg");
    write_atomic(&plot, line_chart(DEV_CURVE_TITLE, "dev F1", &dev_curves(&runs), (Some(0.0), Some(1.0)))?)?;
    let md = markdown(&runs, &types, &bootstrap, &plot);
    write_atomic(&out.join("comparison.md"), &md)?;
    let report = out.join("report.html");
    write_atomic(&report, html::html(&html_page(&runs, &types, &md, &bootstrap, out))?)?;
    Ok(Written { markdown: md, files: vec![out.join("comparison.md"), out.join("comparison.csv"), plot, report] })
}

/// One curve per run of `value` per epoch.
fn curves(runs: &[Run], value: fn(&EpochRow) -> f64) -> Vec<Curve> {
    runs.iter()
        .map(|r| Curve { label: r.label(), points: r.metrics.iter().map(|m| (m.epoch, value(m))).collect() })
        .collect()
}

/// One curve per run of the dev figure it is selected on.
fn dev_curves(runs: &[Run]) -> Vec<Curve> {
    runs.iter()
        .map(|r| Curve {
            label: r.label(),
            points: r.metrics.iter().map(|m| (m.epoch, r.dev_curve_value(m))).collect(),
        })
        .collect()
}

/// report.html's contents: the curves, comparison.md's tables, per-type
/// test F1 per setting (mean over seeds), the test, links to run files.
fn html_page(runs: &[Run], types: &BTreeSet<String>, md: &str, boot: &Result<Bootstrap, String>, out: &Path) -> Report {
    let groups = groups(runs);
    let per_type = Bars {
        categories: types.iter().cloned().collect(),
        series: groups.keys().map(|(ds, name)| format!("{name} ({ds})")).collect(),
        values: groups
            .values()
            .map(|rs| {
                types
                    .iter()
                    .map(|ty| {
                        let v: Vec<f64> = rs
                            .iter()
                            .filter(|r| !r.is_qa())
                            .filter_map(|r| r.summary.test.as_ref()?.per_type.get(ty).map(|x| x.f1))
                            .collect();
                        if v.is_empty() {
                            f64::NAN
                        } else {
                            mean_std(&v).0
                        }
                    })
                    .collect()
            })
            .collect(),
    };
    let runs_files = runs
        .iter()
        .map(|r| {
            let mut files: Vec<String> = std::fs::read_dir(&r.dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter(|e| e.path().is_file())
                        .map(|e| e.file_name().to_string_lossy().to_string())
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            let base = relative(out, &r.dir);
            RunFiles {
                label: r.label(),
                files: files.into_iter().map(|f| (f.clone(), format!("{base}/{f}"))).collect(),
            }
        })
        .collect();
    Report {
        title: "seqlab comparison".into(),
        dev_f1: dev_curves(runs),
        loss: curves(runs, |m| m.train_loss),
        tables: html::markdown_tables(md),
        per_type,
        significance: significance(boot),
        runs: runs_files,
    }
}

/// `to` as a path relative to the folder `from` (both made absolute), with
/// `/` separators, for links; `to` as given when they share no root.
fn relative(from: &Path, to: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (from, to) = (abs(from), abs(to));
    let (f, t): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    if common == 0 {
        return to.to_string_lossy().replace('\\', "/");
    }
    let mut parts: Vec<String> = vec!["..".to_string(); f.len() - common];
    parts.extend(t[common..].iter().map(|c| c.as_os_str().to_string_lossy().to_string()));
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

fn csv_table(runs: &[Run], types: &BTreeSet<String>) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = [
        "run",
        "name",
        "encoder",
        "decoder",
        "dataset",
        "seed",
        "params",
        "selected_on",
        "dev_selected",
        "test_selected",
        "dev_chunk_f1",
        "test_chunk_precision",
        "test_chunk_recall",
        "test_chunk_f1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(types.iter().map(|t| format!("test_f1_{t}")));
    header.extend(
        [
            "best_epoch",
            "epochs",
            "train_seconds",
            "tokens_per_second",
            "qa_dev_exact_match",
            "qa_dev_f1",
            "qa_test_exact_match",
            "qa_test_f1",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    w.write_record(&header)?;
    for r in runs {
        let s = &r.summary;
        let t = s.test.as_ref();
        let mut row = vec![
            r.label(),
            s.name.clone(),
            s.encoder.clone(),
            s.decoder.clone(),
            s.dataset.clone(),
            s.seed.to_string(),
            s.params.to_string(),
            r.selected_on(),
            fmt(r.dev_selected()),
            fmt(r.test_selected()),
            fmt(r.dev_f1()),
            fmt(t.map_or(f64::NAN, |m| m.overall.precision)),
            fmt(t.map_or(f64::NAN, |m| m.overall.recall)),
            fmt(r.test_f1()),
        ];
        row.extend(types.iter().map(|ty| fmt(t.and_then(|m| m.per_type.get(ty)).map_or(f64::NAN, |x| x.f1))));
        row.extend([
            s.best_epoch.to_string(),
            s.epochs.to_string(),
            format!("{:.1}", s.train_seconds),
            format!("{:.0}", s.tokens_per_second),
            fmt(s.qa.as_ref().and_then(|q| q.dev.as_ref()).map_or(f64::NAN, |q| q.exact_match)),
            fmt(s.qa.as_ref().and_then(|q| q.dev.as_ref()).map_or(f64::NAN, |q| q.f1)),
            fmt(s.qa.as_ref().and_then(|q| q.test.as_ref()).map_or(f64::NAN, |q| q.exact_match)),
            fmt(s.qa.as_ref().and_then(|q| q.test.as_ref()).map_or(f64::NAN, |q| q.f1)),
        ]);
        w.write_record(&row)?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

fn fmt(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.4}")
    }
}

pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 { xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (m, var.sqrt())
}

/// `mean ± std` of `xs` at `decimals` places; one value alone, with no
/// spread to show.
pub fn mean_pm_std(xs: &[f64], decimals: usize) -> String {
    let (m, sd) = mean_std(xs);
    if xs.len() > 1 {
        format!("{m:.decimals$} ± {sd:.decimals$}")
    } else {
        format!("{m:.decimals$}")
    }
}

/// A bootstrap p-value: `p < 1/samples` where no resample went the other way.
pub fn p_value(p: f64, samples: usize) -> String {
    if p == 0.0 {
        format!("p < {}", 1.0 / samples.max(1) as f64)
    } else {
        format!("p = {p:.4}")
    }
}

/// Keys of a run's configuration that do not make it another setting: its
/// name, its seed (the seeds of a setting are grouped), and where its data
/// sat (the dataset is grouped on by name).
const NOT_A_SETTING: [&str; 3] = ["name", "seed", "data.dir"];

/// A run's resolved configuration (`config.toml`) as `key.path → value`,
/// less [`NOT_A_SETTING`]; empty for a run folder without one.
fn setting_of(dir: &Path) -> Result<BTreeMap<String, String>> {
    fn flatten(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    flatten(&key, v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let path = dir.join(rundir::CONFIG);
    if !path.is_file() {
        return Ok(BTreeMap::new());
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let value: toml::Value = toml::from_str(&text).with_context(|| format!("{} is not TOML", path.display()))?;
    let mut out = BTreeMap::new();
    flatten("", &value, &mut out);
    out.retain(|k, _| !NOT_A_SETTING.contains(&k.as_str()));
    Ok(out)
}

/// Runs of one config name on one dataset are the seeds of one setting
/// only when their configurations agree (apart from [`NOT_A_SETTING`]).
/// Where they do not (runs made with different `--set` values and not
/// renamed), each configuration becomes a setting of its own, named
/// `name [key=value, …]` after the keys where they differ (keys that only
/// some of them have, from older versions of seqlab, are not compared).
fn name_settings(runs: &mut [Run]) -> Result<()> {
    let settings: Vec<BTreeMap<String, String>> = runs.iter().map(|r| setting_of(&r.dir)).collect::<Result<_>>()?;
    let mut by_name: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        by_name.entry((r.summary.dataset.clone(), r.summary.name.clone())).or_default().push(i);
    }
    for ((_, name), members) in by_name {
        let differing: BTreeSet<&String> = members
            .iter()
            .flat_map(|&i| settings[i].keys())
            // A key some configuration lacks (written by an older seqlab) says nothing.
            .filter(|k| members.iter().all(|&j| settings[j].contains_key(*k)))
            .filter(|k| members.iter().any(|&j| settings[j].get(*k) != settings[members[0]].get(*k)))
            .collect();
        // A run folder without its configuration cannot say (older runs).
        if differing.is_empty() || members.iter().any(|&i| settings[i].is_empty()) {
            continue;
        }
        for &i in &members {
            let values: Vec<String> =
                differing.iter().map(|k| format!("{k}={}", settings[i].get(*k).map_or("-", String::as_str))).collect();
            runs[i].summary.name = format!("{name} [{}]", values.join(", "));
        }
    }
    Ok(())
}

/// Runs grouped by (config name, dataset): the seeds of one setting.
fn groups(runs: &[Run]) -> BTreeMap<(String, String), Vec<&Run>> {
    let mut g: BTreeMap<(String, String), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        g.entry((r.summary.dataset.clone(), r.summary.name.clone())).or_default().push(r);
    }
    g
}

/// The result of the paired bootstrap test.
struct Bootstrap {
    a: String,
    b: String,
    delta: f64,
    p: f64,
    samples: usize,
}

/// Per-sentence conlleval counts of a run's test predictions.
fn sentence_counts(dir: &Path) -> Result<Vec<Counts>> {
    let f = ScoreFile::read(&dir.join("predictions.test.conll"), false)?;
    Ok(f.sentences.iter().map(|(g, p)| conlleval([(g.as_slice(), p.as_slice())])).collect())
}

fn f1_of(c: &[&Counts]) -> f64 {
    let (correct, gold, pred) =
        c.iter().fold((0, 0, 0), |(a, b, d), x| (a + x.correct_chunks, b + x.gold_chunks, d + x.pred_chunks));
    let p = if pred == 0 { 0.0 } else { correct as f64 / pred as f64 };
    let r = if gold == 0 { 0.0 } else { correct as f64 / gold as f64 };
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

/// Paired bootstrap over test sentences (Koehn 2004; Berg-Kirkpatrick et al.
/// 2012) between the best run of the best setting and the best run of the
/// runner-up setting on the same dataset. `p` is the share of resamples in
/// which the better run is not better.
fn best_pair_bootstrap(runs: &[Run], samples: usize) -> Result<Bootstrap, String> {
    let taggers: Vec<Run> = runs.iter().filter(|r| !r.is_qa()).cloned().collect();
    if taggers.is_empty() && runs.iter().any(Run::is_qa) {
        return Err("QA runs are compared on their answers, in the question-answering tables".into());
    }
    let g = groups(&taggers);
    let mut best: Vec<(&(String, String), &Run, f64)> = g
        .iter()
        .filter_map(|(k, rs)| {
            let b = rs.iter().filter(|r| !r.test_f1().is_nan()).max_by(|a, b| a.test_f1().total_cmp(&b.test_f1()))?;
            let (m, _) = mean_std(&rs.iter().map(|r| r.test_f1()).filter(|x| !x.is_nan()).collect::<Vec<_>>());
            Some((k, *b, m))
        })
        .collect();
    best.sort_by(|a, b| b.2.total_cmp(&a.2));
    let Some(&(top_key, a, _)) = best.first() else { return Err("no run has test results".into()) };
    let Some(&(_, b, _)) = best.iter().skip(1).find(|(k, _, _)| k.0 == top_key.0) else {
        return Err(format!("only one setting on {}: nothing to test against", top_key.0));
    };
    let ca = sentence_counts(&a.dir).map_err(|e| e.to_string())?;
    let cb = sentence_counts(&b.dir).map_err(|e| e.to_string())?;
    if ca.len() != cb.len() || ca.iter().zip(&cb).any(|(x, y)| x.gold_chunks != y.gold_chunks || x.tokens != y.tokens) {
        return Err(format!("{} and {} were not tested on the same sentences", a.label(), b.label()));
    }
    let all_a: Vec<&Counts> = ca.iter().collect();
    let all_b: Vec<&Counts> = cb.iter().collect();
    let delta = f1_of(&all_a) - f1_of(&all_b);
    let mut rng = ChaCha8Rng::seed_from_u64(12345);
    let n = ca.len();
    let mut not_better = 0;
    for _ in 0..samples.max(1) {
        let idx: Vec<usize> = (0..n).map(|_| rng.random_range(0..n)).collect();
        let sa: Vec<&Counts> = idx.iter().map(|&i| &ca[i]).collect();
        let sb: Vec<&Counts> = idx.iter().map(|&i| &cb[i]).collect();
        if f1_of(&sa) - f1_of(&sb) <= 0.0 {
            not_better += 1;
        }
    }
    Ok(Bootstrap {
        a: a.label(),
        b: b.label(),
        delta,
        p: not_better as f64 / samples.max(1) as f64,
        samples: samples.max(1),
    })
}

fn markdown(runs: &[Run], types: &BTreeSet<String>, boot: &Result<Bootstrap, String>, plot: &Path) -> String {
    let mut s = String::from(
        "# Comparison\n\nEach run's dev and test F1 are what it was selected on: entity F1 (conlleval rules) for a tagger, answer F1 under the dataset's metric for a QA run (its answer chunk's exact-span F1 is `dev_chunk_f1` and `test_chunk_f1` in comparison.csv); test figures use the epoch with the best dev F1.\n\n## Runs\n\n",
    );
    let mut head =
        "| run | encoder | decoder | dataset | F1 of | params | dev F1 | test P | test R | test F1 |".to_string();
    let mut sep = "|---|---|---|---|---|---:|---:|---:|---:|---:|".to_string();
    for t in types {
        head.push_str(&format!(" {t} F1 |"));
        sep.push_str("---:|");
    }
    head.push_str(" best epoch | train s | tokens/s |");
    sep.push_str("---:|---:|---:|");
    let _ = writeln!(s, "{head}\n{sep}");
    for r in runs {
        let _ = writeln!(s, "{}", run_row(r, types));
    }
    let _ = writeln!(s, "\n## Settings (seeds grouped: mean ± std)\n\n| dataset | setting | F1 of | seeds | dev F1 | test F1 | best epoch | tokens/s |\n|---|---|---|---:|---:|---:|---:|---:|");
    for ((ds, name), rs) in groups(runs) {
        let ms = |f: &dyn Fn(&Run) -> f64, decimals: usize| {
            let v: Vec<f64> = rs.iter().map(|r| f(r)).filter(|x| !x.is_nan()).collect();
            if v.is_empty() {
                return "-".to_string();
            }
            mean_pm_std(&v, decimals)
        };
        let _ = writeln!(
            s,
            "| {ds} | {name} | {} | {} | {} | {} | {} | {} |",
            rs[0].selected_on(),
            rs.len(),
            ms(&|r| r.dev_selected(), 4),
            ms(&|r| r.test_selected(), 4),
            ms(&|r| r.summary.best_epoch as f64, 1),
            ms(&|r| r.summary.tokens_per_second, 0)
        );
    }
    s.push_str(&qa_table(runs));
    s.push_str(&qa_differences(runs));
    let _ = writeln!(s, "\n## Significance\n\n{}", significance(boot));
    let _ = writeln!(s, "\n![dev F1 per epoch]({})", plot.file_name().unwrap().to_string_lossy());
    s
}

/// One run's row of the "Runs" table: the selected figure as dev and test
/// F1; a tagger's test precision, recall and F1 per entity type ("-" for
/// a QA run, whose answers have exact match, not precision and recall).
fn run_row(r: &Run, types: &BTreeSet<String>) -> String {
    let m = &r.summary;
    let t = m.test.as_ref().filter(|_| !r.is_qa());
    let mut row = format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        r.label(),
        m.encoder,
        m.decoder,
        m.dataset,
        r.selected_on(),
        m.params,
        fmt_or_dash(r.dev_selected()),
        fmt_or_dash(t.map_or(f64::NAN, |x| x.overall.precision)),
        fmt_or_dash(t.map_or(f64::NAN, |x| x.overall.recall)),
        fmt_or_dash(r.test_selected())
    );
    for ty in types {
        row.push_str(&format!(" {} |", fmt_or_dash(t.and_then(|x| x.per_type.get(ty)).map_or(f64::NAN, |x| x.f1))));
    }
    row.push_str(&format!(" {} / {} | {:.0} | {:.0} |", m.best_epoch, m.epochs, m.train_seconds, m.tokens_per_second));
    row
}

fn fmt_or_dash(x: f64) -> String {
    if x.is_nan() {
        "-".to_string()
    } else {
        fmt(x)
    }
}

/// The paired test's sentence.
fn significance(boot: &Result<Bootstrap, String>) -> String {
    match boot {
        Ok(b) => format!(
            "Paired bootstrap on test sentences ({} resamples): {} − {} = {:+.4} F1, {} (share of resamples where {} is not better).",
            b.samples,
            b.a,
            b.b,
            b.delta,
            p_value(b.p, b.samples),
            b.a
        ),
        Err(why) => format!("No paired test: {why}."),
    }
}

/// The QA settings' dev and test answer scores, seeds grouped (mean ± std).
fn qa_table(runs: &[Run]) -> String {
    let mut s = String::new();
    let qa: Vec<&Run> = runs.iter().filter(|r| r.summary.qa.is_some()).collect();
    if !qa.is_empty() {
        let _ = writeln!(
            s,
            "\n## Question answering (answer exact match and F1 under each dataset's metric; best epoch chosen on dev, test scored once; seeds grouped: mean ± std)\n\n| dataset | metric | setting | seeds | dev EM | dev F1 | test EM | test F1 |\n|---|---|---|---:|---:|---:|---:|---:|"
        );
        for ((ds, name), rs) in groups(&qa.into_iter().cloned().collect::<Vec<Run>>()) {
            type Pick = fn(&crate::train::rundir::QaSummary) -> Option<&crate::train::rundir::QaMetrics>;
            let v = |split: Pick, f: &dyn Fn(&crate::train::rundir::QaMetrics) -> f64| {
                let xs: Vec<f64> = rs.iter().filter_map(|r| r.summary.qa.as_ref().and_then(split)).map(f).collect();
                if xs.is_empty() {
                    return "-".to_string();
                }
                mean_pm_std(&xs, 4)
            };
            let (dev, test): (Pick, Pick) = (|q| q.dev.as_ref(), |q| q.test.as_ref());
            let metric = rs[0].summary.qa.as_ref().map_or("", |q| q.metric.trim_start_matches("official "));
            let _ = writeln!(
                s,
                "| {ds} | {metric} | {name} | {} | {} | {} | {} | {} |",
                rs.len(),
                v(dev, &|q| q.exact_match),
                v(dev, &|q| q.f1),
                v(test, &|q| q.exact_match),
                v(test, &|q| q.f1)
            );
        }
    }
    s
}

/// Every pair of QA settings on one dataset: the difference of their mean
/// test answer F1 with a 95 % bootstrap interval over seeds and questions
/// ([`crate::report::bootstrap`]).
fn qa_differences(runs: &[Run]) -> String {
    let qa: Vec<Run> = runs.iter().filter(|r| r.summary.qa.is_some()).cloned().collect();
    let settings: Vec<((String, String), crate::report::bootstrap::Setting)> = groups(&qa)
        .into_iter()
        .filter_map(|(key, rs)| {
            let file = crate::report::bootstrap::file_name("test");
            let per_seed = rs
                .iter()
                .map(|r| Some((r.summary.seed, crate::report::bootstrap::read(&r.dir.join(&file)).ok()?)))
                .collect::<Option<crate::report::bootstrap::Setting>>()?;
            Some((key, per_seed))
        })
        .collect();
    let mut s = String::new();
    for (i, (ka, a)) in settings.iter().enumerate() {
        for (kb, b) in settings.iter().skip(i + 1).filter(|(kb, _)| kb.0 == ka.0) {
            if s.is_empty() {
                s.push_str("\n## Question answering: differences (test answer F1, 95 % bootstrap interval over seeds and questions, 2000 resamples)\n\n| dataset | A | B | A − B | 95 % interval | seeds | questions |\n|---|---|---|---:|---|---|---:|\n");
            }
            match crate::report::bootstrap::difference(a, b, 2000, 7) {
                Ok(d) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {:+.4} | [{:+.4}, {:+.4}] | {} × {}{} | {} |",
                        ka.0,
                        ka.1,
                        kb.1,
                        d.delta,
                        d.low,
                        d.high,
                        a.len(),
                        b.len(),
                        if d.paired_seeds { ", paired" } else { "" },
                        d.questions
                    );
                }
                Err(e) => {
                    let _ = writeln!(s, "| {} | {} | {} | | {e} | | |", ka.0, ka.1, kb.1);
                }
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_shows_no_spread_and_several_show_the_sample_std() {
        assert_eq!(mean_pm_std(&[0.8404], 4), "0.8404");
        // Sample standard deviation (n − 1): of 1, 2, 3 it is 1.
        assert_eq!(mean_pm_std(&[1.0, 2.0, 3.0], 1), "2.0 ± 1.0");
        assert_eq!(mean_pm_std(&[1952.9, 3000.2], 0), "2477 ± 741");
    }

    /// Seeds of one config name are one setting while their configurations
    /// agree; runs made with other `--set` values under the same name
    /// become settings of their own, named after what differs.
    #[test]
    fn runs_of_one_name_with_other_settings_are_not_merged() {
        let work = tempfile::tempdir().unwrap();
        let run = |folder: &str, seed: u64, cue_dim: usize, config: bool| {
            let dir = work.path().join(folder);
            std::fs::create_dir_all(&dir).unwrap();
            if config {
                let text = format!(
                    "name = \"qa\"\nseed = {seed}\n[data]\ndir = \"d/{folder}\"\n[model.features]\ncue_dim = {cue_dim}\nword_dim = 8\n"
                );
                std::fs::write(dir.join(rundir::CONFIG), text).unwrap();
            }
            let summary = Summary {
                name: "qa".into(),
                encoder: "bilstm".into(),
                decoder: "pointer".into(),
                dataset: "squad".into(),
                seed,
                device: "cpu".into(),
                params: 1,
                epochs: 1,
                best_epoch: 1,
                train_seconds: 1.0,
                tokens_per_second: 1.0,
                dev: None,
                test: None,
                qa: None,
            };
            Run { dir, summary, metrics: Vec::new() }
        };
        // Two seeds of one setting (their folders and data paths differ): one setting.
        let mut same = vec![run("a", 1, 4, true), run("b", 2, 4, true)];
        name_settings(&mut same).unwrap();
        assert!(same.iter().all(|r| r.summary.name == "qa"));
        assert_eq!(groups(&same).len(), 1);
        // A third run without the cues: two settings, named by the key that differs.
        let mut mixed = vec![run("a", 1, 4, true), run("b", 2, 4, true), run("c", 1, 0, true)];
        name_settings(&mut mixed).unwrap();
        let names: Vec<&str> = mixed.iter().map(|r| r.summary.name.as_str()).collect();
        assert_eq!(
            names,
            ["qa [model.features.cue_dim=4]", "qa [model.features.cue_dim=4]", "qa [model.features.cue_dim=0]"]
        );
        assert_eq!(groups(&mixed).values().map(Vec::len).collect::<Vec<_>>(), [1, 2]);
        // A key only one configuration has (an older seqlab's) is not a difference.
        let mut older = vec![run("a", 1, 4, true), run("b", 2, 4, true)];
        let config = older[1].dir.join(rundir::CONFIG);
        let text = std::fs::read_to_string(&config).unwrap() + "[train]\nmax_minutes = 30\n";
        std::fs::write(&config, text).unwrap();
        name_settings(&mut older).unwrap();
        assert!(older.iter().all(|r| r.summary.name == "qa"));
        // A run folder without its config.toml leaves the name alone.
        let mut old = vec![run("a", 1, 4, true), run("d", 2, 0, false)];
        name_settings(&mut old).unwrap();
        assert!(old.iter().all(|r| r.summary.name == "qa"));
    }

    #[test]
    fn a_p_value_of_zero_reads_as_below_one_resample() {
        assert_eq!(p_value(0.0, 1000), "p < 0.001");
        assert_eq!(p_value(0.002, 1000), "p = 0.0020");
    }
}
