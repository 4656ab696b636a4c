//! `seqlab bench attention` and `seqlab bench memory`: wall time and peak
//! memory of one measured step. The binary runs each measurement in a
//! fresh child process, so that one measurement's freed-but-cached memory
//! never counts in the next.
//!
//! The peak a measurement reports is its peak resident set during the
//! measured step minus its resident set just before it (model and inputs
//! already built): the memory the step itself needs. The process's whole
//! peak is reported too. `bench memory` measures [`Learner::step`], the
//! step `seqlab train` runs, so the planner is fitted to what training does.

use super::median_seconds;
use crate::bench::peak::{self, StepShape};
use crate::setup::config::RunConfig;
use crate::setup::model::encoder_name;
use crate::train::step::{Learner, Opt, Outcome, TokenDropout};
use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use burn::prelude::*;
use burn::tensor::{Distribution, TensorData};
use corpus::batch::{Batch, PaddedBatch};
use corpus::Scheme;
use encoders::attention::{AttentionImpl, AttentionPlan, MultiHeadConfig};
use encoders::ops::{SeqBackend, TrainBackend};
use encoders::TaggerShape;
use plotters::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// What [`measure`] measured: the median wall time, the step's peak
/// memory above what was held before it, and the whole peak.
struct Measured {
    seconds: f64,
    step_peak: u64,
    peak: u64,
    /// Which memory: the process's resident set (CPU backends) or the
    /// device allocator's pool (GPU backends, [`SeqBackend::device_memory`]).
    memory: &'static str,
}

/// Runs `step` once, then `iters` more times for the median wall time (with
/// `iters` = 0, the second run's time), with the peak memory over all runs
/// above the memory held before them, and the whole peak. Each run ends
/// with a device sync, so that asynchronous devices (CUDA, wgpu) time the
/// work, not its launch. On a GPU backend the memory is its allocator's
/// pool, which grows to the high-water mark of the tensors allocated and
/// keeps it: the backend's own count of the device memory, where the
/// process's resident set would see none of it. The step's peak is then
/// the pool after the runs less the bytes of the tensors alive before them
/// (an upper bound: the pool rounds up to its pages).
fn measure<B: SeqBackend>(device: &B::Device, iters: usize, mut step: impl FnMut()) -> Result<Measured> {
    let on_device = B::device_memory(device);
    if on_device.is_none() && (peak::rss().is_none() || !peak::reset_peak()) {
        bail!("cannot read or reset this process's peak memory (needs Linux /proc/self/status and clear_refs)");
    }
    let mut synced = Ok(());
    let mut run = || {
        step();
        if synced.is_ok() {
            synced = B::sync(device);
        }
    };
    // On a device: the live tensors before the step (model, inputs); the
    // pool it reserved before may already hold room the step then uses.
    let before = match on_device {
        Some(m) => m.in_use,
        None => peak::rss().map_or(0, |r| r.0),
    };
    run();
    let seconds = if iters == 0 {
        let t = Instant::now();
        run();
        t.elapsed().as_secs_f64()
    } else {
        median_seconds(iters, &mut run)
    };
    synced.map_err(|e| anyhow::anyhow!("device sync failed: {e:?}"))?;
    // The high-water mark over every run: the first allocates, later ones reuse.
    let (peak, memory) = match B::device_memory(device) {
        Some(m) => (m.reserved, "device allocator pool"),
        None => (peak::rss().map_or(0, |r| r.1), "resident set"),
    };
    Ok(Measured { seconds, step_peak: peak.saturating_sub(before), peak, memory })
}

pub fn parse_impl(s: &str) -> Result<(AttentionImpl, bool)> {
    Ok(match s {
        "dense" => (AttentionImpl::Dense, false),
        "fused" => (AttentionImpl::Dense, true),
        "chunked" => (AttentionImpl::Chunked, false),
        "local" => (AttentionImpl::Local, false),
        other => bail!("--impl `{other}`: expected dense, chunked, local or fused"),
    })
}

/// One self-attention layer's step to measure.
#[derive(Clone, Debug)]
pub struct AttentionStep {
    /// dense, chunked, local or fused.
    pub imp: String,
    pub seq_len: usize,
    pub batch: usize,
    pub heads: usize,
    pub d_model: usize,
    pub block: usize,
    pub window: usize,
    /// Forward and backward (else forward only).
    pub train: bool,
    pub iters: usize,
}

/// Measures one self-attention layer (in this process): time and peak memory.
pub fn attention<B: TrainBackend>(a: &AttentionStep, device: &B::Device, device_name: &str) -> Result<Value>
where
    B::InnerBackend: SeqBackend,
{
    let (imp, fused) = parse_impl(&a.imp)?;
    let len = a.seq_len;
    B::seed(device, 1);
    let heads = a.heads.max(1);
    let mha = MultiHeadConfig {
        d_query: a.d_model,
        d_key: a.d_model,
        heads,
        head_dim: a.d_model / heads,
        dropout: 0.0,
        position: encoders::positional::Position::None,
        scaled: true,
    }
    .init::<B>(device);
    let plan = AttentionPlan { imp, block: a.block.max(1), window: a.window.max(1), fused };
    let x = Tensor::<B, 3>::random([a.batch, len, a.d_model], Distribution::Normal(0.0, 1.0), device);
    let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(vec![true; a.batch * len], [a.batch, len]), device);
    let m = if a.train {
        measure::<B>(device, a.iters, || {
            let x = x.clone().require_grad();
            let out = mha.forward(x.clone(), x, mask.clone(), plan, false).context;
            let grads = out.sum().backward();
            drop(grads);
        })?
    } else {
        let m = mha.valid();
        let (x, mask) = (x.clone().inner(), mask.clone().inner());
        measure::<B>(device, a.iters, || {
            let out = m.forward(x.clone(), x.clone(), mask.clone(), plan, false).context;
            let _: f32 = out.sum().into_scalar().elem();
        })?
    };
    Ok(json!({"impl": a.imp, "seq_len": len, "batch": a.batch, "heads": heads,
        "d_model": a.d_model, "train": a.train, "seconds": m.seconds, "peak_bytes": m.step_peak,
        "process_peak_bytes": m.peak, "memory": m.memory, "device": device_name,
        "threads": rayon::current_num_threads()}))
}

/// A log-log plot of MiB against sequence length, one line per series.
pub fn plot_memory(series: &[(String, Vec<(f64, f64)>)], title: &str, path: &Path) -> Result<()> {
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y.max(0.01));
        y1 = y1.max(y.max(0.01));
    }
    if x0 > x1 {
        bail!("nothing to plot: every measurement failed");
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), (y0 * 0.8..y1 * 1.25).log_scale())?;
        chart.configure_mesh().x_desc("sequence length L").y_desc("peak memory of the step (MiB)").draw()?;
        for (i, (name, p)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let p: Vec<(f64, f64)> = p.iter().map(|&(x, y)| (x, y.max(0.01))).collect();
            chart
                .draw_series(LineSeries::new(p.clone(), color.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart.draw_series(p.into_iter().map(|xy| Circle::new(xy, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
    }
    corpus::io::write_atomic(path, svg)?;
    Ok(())
}

/// One training step of a whole tagger to measure.
#[derive(Clone, Copy, Debug)]
pub struct MemoryStep {
    pub batch: usize,
    pub seq_len: usize,
    /// Word vocabulary of the synthetic model.
    pub words: usize,
    /// Characters per word in the synthetic batch.
    pub word_len: usize,
}

/// Measures two training steps of the configured tagger on a synthetic
/// batch (the optimizer's state is created in the first and updated in
/// the second; the peak is the larger): the planner's estimate against the
/// measured peak.
pub fn training_step<B: TrainBackend>(
    cfg: &RunConfig,
    s: MemoryStep,
    device: &B::Device,
    device_name: &str,
) -> Result<Value> {
    if s.words < 3 {
        bail!("--words must be at least 3 (padding, unknown and one word)");
    }
    if cfg.model.question != encoders::QuestionMode::None {
        bail!("bench memory measures plain tagging (its synthetic batches have no questions): set model.question = \"none\"");
    }
    // Synthetic words are word-level data (word dropout at its rate for
    // words): character bigrams stay off, as
    // `data.bigrams = "auto"` leaves them for such data.
    let mut cfg = cfg.clone();
    cfg.model.features.bigram_dim = 0;
    let cfg = &cfg;
    B::seed(device, cfg.seed);
    let tags = synthetic_tags();
    let o = tags.iter().position(|t| t.to_string() == "O").context("no O tag")?;
    let model = cfg.model.init::<B>(
        TaggerShape { words: s.words, chars: 100, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None },
        device,
    );
    let params = model.num_params();
    let word_len = s.word_len.max(1).min(cfg.data.max_word_chars.max(1));
    let padded = Batch::Plain(synthetic_batch(s.batch, s.seq_len, word_len, s.words, o, cfg.seed));
    let shape =
        StepShape { batch: s.batch, len: s.seq_len, word_len, params, tags: tags.len(), parts: B::train_shards };
    let estimate = peak::estimate(cfg, shape);
    let mut learner = Learner::new(model, Opt::<B>::new(cfg), TokenDropout::of(cfg, corpus::Tokenization::Words));
    let mut failed = None;
    let m = measure::<B>(device, 0, || match learner.step(&padded, cfg.seed, cfg.train.lr, device) {
        Ok(Outcome::Stepped(_)) => {}
        Ok(Outcome::Skipped(why)) => failed = Some(why),
        Err(e) => failed = Some(e.to_string()),
    })?;
    if let Some(e) = failed {
        bail!("the training step failed: {e}");
    }
    drop(learner);
    let floats = cfg.model.step_floats(encoders::footprint::StepShape {
        batch: s.batch,
        len: s.seq_len,
        word_len,
        tags: tags.len(),
    });
    Ok(json!({"encoder": encoder_name(cfg), "batch": s.batch, "seq_len": s.seq_len,
        "word_len": word_len, "params": params, "parts": B::train_shards(s.batch), "estimate_bytes": estimate as u64, "peak_bytes": m.step_peak,
        "process_peak_bytes": m.peak, "memory": m.memory, "seconds": m.seconds, "device": device_name,
        "floats": {"recurrent": floats.recurrent, "attention": floats.attention, "scores": floats.scores}}))
}

/// Tag set for the synthetic model: CoNLL-2003's four types in BIOES.
fn synthetic_tags() -> Vec<corpus::Tag> {
    let labels: Vec<String> = ["PER", "LOC", "ORG", "MISC"].iter().map(|s| s.to_string()).collect();
    Scheme::Bioes.tag_set(&labels)
}

/// A batch of random words and characters, every position real, all `O`.
fn synthetic_batch(batch: usize, len: usize, word_len: usize, words: usize, o_tag: usize, seed: u64) -> PaddedBatch {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = batch * len;
    PaddedBatch {
        ids: (0..batch).collect(),
        batch,
        len,
        word_len,
        lengths: vec![len; batch],
        words: (0..n).map(|_| rng.random_range(2..words.max(3)) as i64).collect(),
        caps: (0..n).map(|_| rng.random_range(1..5)).collect(),
        bigrams: vec![0; n],
        chars: (0..n * word_len).map(|_| rng.random_range(2..60)).collect(),
        tags: Some(vec![o_tag as i64; n]),
        mask: vec![true; n],
    }
}
