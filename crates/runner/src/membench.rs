//! `seqlab bench attention` and `seqlab bench memory`: wall time and peak
//! memory, each measurement in a fresh child process (`--child`), so that
//! one measurement's freed-but-cached memory never counts in the next.
//!
//! The peak a child reports is its peak resident set during the measured
//! step minus its resident set just before it (model and inputs already
//! built): the memory the step itself needs. The process's whole peak is
//! reported too.

use crate::bench::median_seconds;
use crate::cli::{BenchAttentionArgs, BenchMemoryArgs};
use crate::config::{self, RunConfig};
use crate::memory::{self, human, StepShape};
use crate::train::Opt;
use crate::{dispatch, Job};
use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, TensorData};
use corpus::batch::PaddedBatch;
use corpus::Scheme;
use encoders::attention::{AttentionImpl, AttentionPlan, MultiHeadConfig};
use encoders::input::tags_tensor;
use encoders::ops::SeqBackend;
use encoders::{TaggerInput, TaggerShape};
use plotters::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Runs this program again with `args` (plus `--child --json` and this
/// process's thread count) and returns the JSON object it printed last, or
/// why it failed (a killed child, out of memory, is reported, not fatal).
fn child(args: &[String]) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let threads = rayon::current_num_threads().to_string();
    let out = Command::new(exe)
        .args(["--threads", &threads])
        .args(args)
        .args(["--child", "--json"])
        .output()
        .map_err(|e| format!("cannot start a measurement process: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
        return Err(match out.status.code() {
            Some(c) => format!("exit {c}: {last}"),
            None => "killed (out of memory?)".to_string(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{')).ok_or("no result printed")?;
    serde_json::from_str(line).map_err(|e| format!("unreadable result `{line}`: {e}"))
}

/// Runs `step` once, then `iters` more times for the median wall time (with
/// `iters` = 0, the second run's time); returns it with the peak resident
/// set over all runs above the one before them, and the process's peak.
/// Each run ends with a device sync, so that asynchronous devices (CUDA)
/// time the work, not its launch.
fn measure<B: Backend>(device: &B::Device, iters: usize, mut step: impl FnMut()) -> Result<(f64, u64, u64)> {
    if memory::rss().is_none() || !memory::reset_peak() {
        bail!("cannot read or reset this process's peak memory (needs Linux /proc/self/status and clear_refs)");
    }
    let mut synced = Ok(());
    let mut run = || {
        step();
        if synced.is_ok() {
            synced = B::sync(device);
        }
    };
    let before = memory::rss().map_or(0, |r| r.0);
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
    let peak = memory::rss().map_or(0, |r| r.1);
    Ok((seconds, peak.saturating_sub(before), peak))
}

// ---------------------------------------------------------------- attention

pub fn attention(args: BenchAttentionArgs) -> Result<()> {
    for imp in &args.imps {
        parse_impl(imp)?;
    }
    if args.d_model % args.heads.max(1) != 0 {
        bail!("--d-model ({}) must be a multiple of --heads ({})", args.d_model, args.heads);
    }
    if args.child {
        let device = args.device;
        return dispatch(device, AttentionChild(args));
    }
    let mut rows: Vec<(String, usize, Result<Value, String>)> = Vec::new();
    if !args.json {
        println!(
            "self-attention, batch {}, {} heads, d_model {}, {} on {}; each row a fresh process",
            args.batch,
            args.heads,
            args.d_model,
            if args.train { "forward+backward" } else { "forward" },
            args.device.name()
        );
        println!("{:<8} {:>7} {:>10} {:>12} {:>12}", "impl", "L", "seconds", "step peak", "process peak");
    }
    for imp in &args.imps {
        for &len in &args.seq_len {
            let mut a = vec![
                "bench".to_string(),
                "attention".into(),
                "--impl".into(),
                imp.clone(),
                "--seq-len".into(),
                len.to_string(),
                "--batch".into(),
                args.batch.to_string(),
                "--heads".into(),
                args.heads.to_string(),
                "--d-model".into(),
                args.d_model.to_string(),
                "--block".into(),
                args.block.to_string(),
                "--window".into(),
                args.window.to_string(),
                "--iters".into(),
                args.iters.to_string(),
                "--device".into(),
                args.device.cli_name().into(),
            ];
            if args.train {
                a.push("--train".into());
            }
            let r = child(&a);
            match (&r, args.json) {
                (Ok(v), true) => println!("{v}"),
                (Err(e), true) => println!(
                    "{}",
                    serde_json::json!({"impl": imp, "seq_len": len, "batch": args.batch, "heads": args.heads,
                        "d_model": args.d_model, "train": args.train, "error": e})
                ),
                (Ok(v), false) => println!(
                    "{imp:<8} {len:>7} {:>10.3} {:>12} {:>12}",
                    v["seconds"].as_f64().unwrap_or(f64::NAN),
                    human(v["peak_bytes"].as_f64().unwrap_or(0.0)),
                    human(v["process_peak_bytes"].as_f64().unwrap_or(0.0))
                ),
                (Err(e), false) => println!("{imp:<8} {len:>7} failed: {e}"),
            }
            rows.push((imp.clone(), len, r));
        }
    }
    if let Some(path) = &args.plot {
        let series: Vec<(String, Vec<(f64, f64)>)> = args
            .imps
            .iter()
            .map(|imp| {
                let pts = rows
                    .iter()
                    .filter(|(i, _, _)| i == imp)
                    .filter_map(|(_, len, r)| {
                        let v = r.as_ref().ok()?;
                        Some((*len as f64, v["peak_bytes"].as_f64()? / (1024.0 * 1024.0)))
                    })
                    .collect();
                (imp.clone(), pts)
            })
            .collect();
        let what = if args.train { "forward+backward" } else { "forward" };
        plot_memory(
            &series,
            &format!(
                "self-attention step peak memory ({what}, batch {}, {} heads, d {})",
                args.batch, args.heads, args.d_model
            ),
            path,
        )?;
        if !args.json {
            println!("plot: {}", path.display());
        }
    }
    Ok(())
}

fn parse_impl(s: &str) -> Result<(AttentionImpl, bool)> {
    Ok(match s {
        "dense" => (AttentionImpl::Dense, false),
        "fused" => (AttentionImpl::Dense, true),
        "chunked" => (AttentionImpl::Chunked, false),
        "local" => (AttentionImpl::Local, false),
        other => bail!("--impl `{other}`: expected dense, chunked, local or fused"),
    })
}

struct AttentionChild(BenchAttentionArgs);

impl Job for AttentionChild {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let a = self.0;
        let (imp_name, len) = match (a.imps.as_slice(), a.seq_len.as_slice()) {
            ([i], [l]) => (i.clone(), *l),
            _ => bail!("a measurement process takes one --impl and one --seq-len"),
        };
        let (imp, fused) = parse_impl(&imp_name)?;
        B::seed(&device, 1);
        let heads = a.heads.max(1);
        let mha = MultiHeadConfig {
            d_query: a.d_model,
            d_key: a.d_model,
            heads,
            head_dim: a.d_model / heads,
            dropout: 0.0,
            relative: false,
            scaled: true,
        }
        .init::<B>(&device);
        let plan = AttentionPlan { imp, block: a.block.max(1), window: a.window.max(1), fused };
        let x = Tensor::<B, 3>::random([a.batch, len, a.d_model], Distribution::Normal(0.0, 1.0), &device);
        let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(vec![true; a.batch * len], [a.batch, len]), &device);
        let (seconds, peak, process_peak) = if a.train {
            measure::<B>(&device, a.iters, || {
                let x = x.clone().require_grad();
                let out = mha.forward(x.clone(), x, mask.clone(), plan, false).context;
                let grads = out.sum().backward();
                drop(grads);
            })?
        } else {
            let m = mha.valid();
            let (x, mask) = (x.clone().inner(), mask.clone().inner());
            measure::<B>(&device, a.iters, || {
                let out = m.forward(x.clone(), x.clone(), mask.clone(), plan, false).context;
                let _: f32 = out.sum().into_scalar().elem();
            })?
        };
        println!(
            "{}",
            serde_json::json!({"impl": imp_name, "seq_len": len, "batch": a.batch, "heads": heads,
                "d_model": a.d_model, "train": a.train, "seconds": seconds, "peak_bytes": peak,
                "process_peak_bytes": process_peak, "device": device_name,
                "threads": rayon::current_num_threads()})
        );
        Ok(())
    }
}

/// A log-log plot of MiB against sequence length, one line per series.
fn plot_memory(series: &[(String, Vec<(f64, f64)>)], title: &str, path: &Path) -> Result<()> {
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

// ------------------------------------------------------------------- memory

pub fn memory(args: BenchMemoryArgs) -> Result<()> {
    let cfg = config::load(args.config.as_deref(), &args.set)?;
    if args.words < 3 {
        bail!("--words must be at least 3 (padding, unknown and one word)");
    }
    if args.child {
        let device = args.device;
        return dispatch(device, MemoryChild { args, cfg });
    }
    if !args.json {
        println!(
            "training step (forward, backward, optimizer) of {} on {}; each row a fresh process",
            crate::train::encoder_name(&cfg),
            args.device.name()
        );
        println!("{:>6} {:>6} {:>12} {:>12} {:>8}", "batch", "L", "estimate", "measured", "ratio");
    }
    for &batch in &args.batch {
        for &len in &args.seq_len {
            let mut a = vec!["bench".to_string(), "memory".into()];
            if let Some(c) = &args.config {
                a.extend(["--config".into(), c.display().to_string()]);
            }
            for s in &args.set {
                a.extend(["--set".into(), s.clone()]);
            }
            a.extend([
                "--batch".into(),
                batch.to_string(),
                "--seq-len".into(),
                len.to_string(),
                "--words".into(),
                args.words.to_string(),
                "--word-len".into(),
                args.word_len.to_string(),
                "--device".into(),
                args.device.cli_name().into(),
            ]);
            match (child(&a), args.json) {
                (Ok(v), true) => println!("{v}"),
                (Ok(v), false) => println!(
                    "{batch:>6} {len:>6} {:>12} {:>12} {:>8.2}",
                    human(v["estimate_bytes"].as_f64().unwrap_or(0.0)),
                    human(v["peak_bytes"].as_f64().unwrap_or(0.0)),
                    v["estimate_bytes"].as_f64().unwrap_or(0.0) / v["peak_bytes"].as_f64().unwrap_or(1.0).max(1.0)
                ),
                (Err(e), true) => println!("{}", serde_json::json!({"batch": batch, "seq_len": len, "error": e})),
                (Err(e), false) => println!("{batch:>6} {len:>6} failed: {e}"),
            }
        }
    }
    Ok(())
}

struct MemoryChild {
    args: BenchMemoryArgs,
    cfg: RunConfig,
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
        chars: (0..n * word_len).map(|_| rng.random_range(2..60)).collect(),
        tags: Some(vec![o_tag as i64; n]),
        mask: vec![true; n],
        question: None,
    }
}

impl Job for MemoryChild {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let (a, cfg) = (self.args, self.cfg);
        let (batch, len) = match (a.batch.as_slice(), a.seq_len.as_slice()) {
            ([b], [l]) => (*b, *l),
            _ => bail!("a measurement process takes one --batch and one --seq-len"),
        };
        if cfg.model.question != encoders::QuestionMode::None {
            bail!("bench memory measures plain tagging (its synthetic batches have no questions): set model.question = \"none\"");
        }
        B::seed(&device, cfg.seed);
        let tags = synthetic_tags();
        let o = tags.iter().position(|t| t.to_string() == "O").context("no O tag")?;
        let mut model = cfg.model.init::<B>(
            TaggerShape { words: a.words, chars: 100, tags: &tags, scheme: Scheme::Bioes, pretrained: None },
            &device,
        );
        let params = model.num_params();
        let word_len = a.word_len.max(1).min(cfg.data.max_word_chars.max(1));
        let padded = synthetic_batch(batch, len, word_len, a.words, o, cfg.seed);
        let input = TaggerInput::<B>::from_padded(&padded, &device);
        let gold = tags_tensor::<B>(&padded, &device).context("synthetic batch has tags")?;
        let mut opt = Opt::<B>::new(&cfg);
        let shape = StepShape { batch, len, word_len, params, tags: tags.len() };
        let estimate = memory::estimate(&cfg, shape);
        // Two steps: the optimizer's state is created in the first and
        // updated in the second; the peak is the larger of the two.
        let mut m = Some(model.clone());
        let (seconds, peak, process_peak) = measure::<B>(&device, 0, || {
            let current = m.take().expect("model");
            let loss =
                current.loss(&input, gold.clone()).expect("a plain tagger (checked above) takes the synthetic batch");
            let grads = GradientsParams::from_grads(loss.backward(), &current);
            m = Some(opt.step(cfg.train.lr, current, grads));
        })?;
        model = m.take().expect("model");
        drop(model);
        println!(
            "{}",
            serde_json::json!({"encoder": crate::train::encoder_name(&cfg), "batch": batch, "seq_len": len,
                "word_len": word_len, "params": params, "estimate_bytes": estimate as u64, "peak_bytes": peak,
                "process_peak_bytes": process_peak, "seconds": seconds, "device": device_name})
        );
        Ok(())
    }
}
