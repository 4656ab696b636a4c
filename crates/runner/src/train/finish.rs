//! The end of a training run: the best model on dev and test (scores,
//! predictions files, answers for QA), `summary.json`, and the head
//! diagnostics of attention taggers (`heads.csv`).

use crate::infer::{self, Request, Tagged};
use crate::reporter::Reporter;
use crate::setup::config::RunConfig;
use crate::setup::model::{build_model, decoder_name, encoder_name};
use crate::setup::prep::{EvalSplit, Prepared};
use crate::train::rundir::{self, QaMetrics, QaSummary, SplitMetrics, Summary, TrainState};
use anyhow::Result;
use corpus::SplitName;
use encoders::ops::SeqBackend;
use encoders::Tagger;
use std::path::Path;

/// A training run whose loop has ended.
pub struct Finished<'a> {
    pub out: &'a Path,
    pub device_name: &'a str,
    pub state: &'a TrainState,
    /// Epochs in metrics.csv.
    pub epochs: usize,
    pub params: usize,
}

/// Scores the run's best model on dev and test, writes their predictions
/// and `summary.json`, and the head diagnostics; returns the summary.
pub fn finish<B: SeqBackend>(
    cfg: &RunConfig,
    prep: &Prepared,
    run: &Finished,
    reporter: &dyn Reporter,
    device: &B::Device,
) -> Result<Summary> {
    let (out, state) = (run.out, run.state);
    let best = rundir::load_module::<B, _>(
        build_model::<B>(cfg, &prep.vocabs, None, device),
        &out.join(rundir::MODEL),
        device,
    )?;
    let mut metrics = [None, None];
    let mut answers = [None, None];
    for (k, name) in [SplitName::Dev, SplitName::Test].into_iter().enumerate() {
        if let Some(split) = prep.split(name) {
            let (m, q) = score_split(cfg, prep, split, &best, out, device)?;
            metrics[k] = Some(m);
            answers[k] = q;
        }
    }
    let [dev, test] = metrics;
    let qa = prep.eval.iter().any(|s| s.qa.is_some()).then(|| {
        let [dev, test] = answers;
        QaSummary { metric: prep.vocabs.qa_metric.unwrap_or_default().name().to_string(), dev, test }
    });
    let summary = Summary {
        name: cfg.name.clone(),
        encoder: encoder_name(cfg),
        decoder: decoder_name(cfg),
        dataset: prep.dataset.clone(),
        seed: cfg.seed,
        device: run.device_name.to_string(),
        params: run.params,
        epochs: run.epochs,
        best_epoch: state.best_epoch,
        train_seconds: state.train_seconds,
        tokens_per_second: state.train_tokens as f64 / state.train_seconds.max(1e-9),
        dev,
        test,
        qa,
    };
    rundir::write_json(&out.join(rundir::SUMMARY), &summary)?;
    head_diagnostics(prep, &best, out, reporter, device);
    Ok(summary)
}

/// Tags one split with the best model and writes its predictions
/// (`predictions.SPLIT.conll`, and for QA `predictions.SPLIT.json`): its
/// tagging scores and, for QA, its answer scores.
fn score_split<B: SeqBackend>(
    cfg: &RunConfig,
    prep: &Prepared,
    split: &EvalSplit,
    best: &Tagger<B>,
    out: &Path,
    device: &B::Device,
) -> Result<(SplitMetrics, Option<QaMetrics>)> {
    let name = split.name.as_str();
    // QA picks the most confident span: ask for the confidences.
    let request = Request::tagging(cfg.data.windows()).with_answers(split.qa.is_some());
    let tagged: Vec<Tagged> = infer::tag(best, &prep.vocabs, &split.encoded, &request, device)?.tagged;
    let metrics = SplitMetrics::from(infer::score_predictions(&split.sentences, &tagged).report());
    corpus::io::write_atomic(
        &out.join(format!("predictions.{name}.conll")),
        infer::predictions_file(&split.sentences, &tagged),
    )?;
    let Some(items) = &split.qa else { return Ok((metrics, None)) };
    let answers = crate::infer::qa::answers(items, &tagged);
    let metric = prep.vocabs.qa_metric.unwrap_or_default();
    let score = crate::infer::qa::score(items, &answers, metric);
    corpus::io::write_atomic(
        &out.join(format!("predictions.{name}.json")),
        crate::infer::qa::predictions_json(items, &answers),
    )?;
    let file = out.join(crate::report::bootstrap::file_name(name));
    crate::report::bootstrap::write(&file, items, &crate::infer::qa::per_question(items, &answers, metric))?;
    let qa = QaMetrics { exact_match: score.exact_match, f1: score.f1, questions: score.questions };
    Ok((metrics, Some(qa)))
}

/// Head diagnostics on dev: heads.csv, and a warning when half the heads
/// collapsed (a QA reader's attention on its question included). Best
/// effort: a failure is a warning.
fn head_diagnostics<B: SeqBackend>(
    prep: &Prepared,
    best: &Tagger<B>,
    out: &Path,
    reporter: &dyn Reporter,
    device: &B::Device,
) {
    let Some(dev) = prep.split(SplitName::Dev) else { return };
    if best.attention_layers() == 0 {
        return;
    }
    let stats = match crate::analysis::heads::diagnose(best, &prep.vocabs, &dev.sentences, &dev.encoded, device) {
        Ok(stats) => stats,
        Err(e) => return reporter.message(&format!("warning: head diagnostics not computed: {e:#}")),
    };
    if let Err(e) = crate::analysis::heads::write_heads_csv(&out.join("heads.csv"), &stats) {
        reporter.message(&format!("warning: head diagnostics not written: {e:#}"));
    }
    if let Some(w) =
        crate::analysis::heads::collapse_warning(&stats, Some(prep.train.len()), prep.vocabs.tokenization())
    {
        reporter.message(&format!("warning: {w}"));
    }
}
