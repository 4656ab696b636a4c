//! `seqlab bench …`: the library's measurements, one fresh child process
//! per cell for the memory benchmarks (`--child`), printed as a table or as
//! one JSON object per line.

use crate::backend::{dispatch, Job};
use crate::cli::{BenchAttentionArgs, BenchCrfArgs, BenchMemoryArgs, BenchRunArgs};
use anyhow::Result;
use encoders::ops::{SeqBackend, TrainBackend};
use runner::bench::memory::{self as membench, AttentionStep, MemoryStep};
use runner::bench::peak::human;
use runner::bench::throughput::{self, BenchOptions, Workload};
use runner::bench::CrfOptions;
use runner::setup::config::{self, RunConfig};
use runner::setup::prep::Prepared;
use serde_json::Value;
use std::process::Command;

pub fn crf(args: BenchCrfArgs) -> Result<()> {
    dispatch(args.device, CrfBench(args))
}

struct CrfBench(BenchCrfArgs);

impl Job for CrfBench {
    fn run<B: TrainBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let a = self.0;
        let opts = CrfOptions { batch: a.batch, len: a.len, tags: a.tags, iters: a.iters };
        for v in runner::bench::crf::<B>(&opts, &device, device_name)? {
            if a.json {
                println!("{v}");
            } else {
                println!(
                    "crf {:<21} batch {} × len {} × {} tags on {device_name}, {} threads: {:.2} ms/batch, {:.0} sentences/s",
                    v["workload"].as_str().unwrap_or_default(),
                    a.batch,
                    a.len,
                    v["tags"],
                    v["threads"],
                    v["seconds"].as_f64().unwrap_or_default() * 1e3,
                    v["sentences_per_second"].as_f64().unwrap_or_default()
                );
            }
        }
        Ok(())
    }
}

pub fn throughput(args: BenchRunArgs, workload: Workload) -> Result<()> {
    let opts = BenchOptions {
        data: args.data.clone(),
        batch: args.batch,
        steps: args.steps,
        warmup: args.warmup,
        seed: args.seed,
    };
    let (cfg, prep, ds) = throughput::load(&args.config, &args.set, &opts)?;
    if let Some(path) = &args.dump {
        let batches = throughput::training_batches(&prep, &opts);
        throughput::dump(path, &cfg, &prep, &batches, args.warmup)?;
        let warmup = args.warmup.min(batches.len());
        let tokens = throughput::real_tokens(&batches[warmup..]);
        eprintln!("wrote {} batches ({warmup} warm-up, {tokens} timed tokens) to {}", batches.len(), path.display());
        return Ok(());
    }
    dispatch(args.device, Throughput { json: args.json, workload, cfg, prep, ds, opts })
}

struct Throughput {
    json: bool,
    workload: Workload,
    cfg: RunConfig,
    prep: Prepared,
    ds: corpus::Dataset,
    opts: BenchOptions,
}

impl Job for Throughput {
    fn run<B: TrainBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let Throughput { json, workload, cfg, prep, ds, opts } = self;
        let t = match workload {
            Workload::Train => throughput::train::<B>(&cfg, &prep, &opts, &device)?,
            Workload::Predict => throughput::predict::<B::InnerBackend>(&cfg, &prep, &ds, &opts, &device)?,
        };
        let line = throughput::report(workload, &cfg, &opts, &t, device_name);
        if json {
            println!("{line}");
        } else {
            println!(
                "{} {} ({}): {} steps of {} sentences, {} tokens ({:.0}% padding) in {:.2} s: {:.0} tokens/s on {device_name}, {} threads (after {} warm-up steps in {:.2} s)",
                line["workload"].as_str().unwrap_or_default(),
                line["encoder"].as_str().unwrap_or_default(),
                line["decoder"].as_str().unwrap_or_default(),
                t.steps,
                opts.batch,
                t.tokens,
                100.0 * (t.padded_tokens - t.tokens.min(t.padded_tokens)) as f64 / t.padded_tokens.max(1) as f64,
                t.seconds,
                line["tokens_per_second"].as_f64().unwrap_or_default(),
                line["threads"],
                t.warmup_steps,
                t.warmup_seconds
            );
        }
        Ok(())
    }
}

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
        // The last line that says something: a panic's message, not the backtrace notes after it.
        let noise = |l: &str| {
            let l = l.trim();
            l.is_empty() || l.starts_with("note:") || l.starts_with("stack backtrace") || l == "No backtrace available"
        };
        let last = err.lines().rev().find(|l| !noise(l)).unwrap_or("").to_string();
        return Err(match out.status.code() {
            Some(c) => format!("exit {c}: {last}"),
            None => "killed (out of memory?)".to_string(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{')).ok_or("no result printed")?;
    serde_json::from_str(line).map_err(|e| format!("unreadable result `{line}`: {e}"))
}

fn attention_step(args: &BenchAttentionArgs, imp: &str, seq_len: usize) -> AttentionStep {
    AttentionStep {
        imp: imp.to_string(),
        seq_len,
        batch: args.batch,
        heads: args.heads,
        d_model: args.d_model,
        block: args.block,
        window: args.window,
        train: args.train,
        iters: args.iters,
    }
}

pub fn attention(args: BenchAttentionArgs) -> Result<()> {
    for imp in &args.imps {
        membench::parse_impl(imp)?;
    }
    if args.d_model % args.heads.max(1) != 0 {
        anyhow::bail!("--d-model ({}) must be a multiple of --heads ({})", args.d_model, args.heads);
    }
    if args.child {
        let (imp, len) = match (args.imps.as_slice(), args.seq_len.as_slice()) {
            ([i], [l]) => (i.clone(), *l),
            _ => anyhow::bail!("a measurement process takes one --impl and one --seq-len"),
        };
        return dispatch(args.device, AttentionChild(attention_step(&args, &imp, len)));
    }
    let what = if args.train { "forward+backward" } else { "forward" };
    if !args.json {
        println!(
            "self-attention, batch {}, {} heads, d_model {}, {what} on {}; each row a fresh process",
            args.batch,
            args.heads,
            args.d_model,
            args.device.name()
        );
        println!("{:<8} {:>7} {:>10} {:>12} {:>12}", "impl", "L", "seconds", "step peak", "process peak");
    }
    let mut rows: Vec<(String, usize, Result<Value, String>)> = Vec::new();
    for imp in &args.imps {
        for &len in &args.seq_len {
            let r = child(&attention_child_args(&args, imp, len));
            print_attention_row(&args, imp, len, &r);
            rows.push((imp.clone(), len, r));
        }
    }
    if !args.json {
        // Which memory the peaks count: the resident set on the CPU, the allocator's pool on a GPU.
        if let Some(kind) = rows.iter().find_map(|(_, _, r)| r.as_ref().ok()?["memory"].as_str().map(String::from)) {
            println!("memory: {kind}");
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
        let title = format!(
            "self-attention step peak memory ({what}, batch {}, {} heads, d {})",
            args.batch, args.heads, args.d_model
        );
        membench::plot_memory(&series, &title, path)?;
        if !args.json {
            println!("plot: {}", path.display());
        }
    }
    Ok(())
}

/// The command line of one attention measurement.
fn attention_child_args(args: &BenchAttentionArgs, imp: &str, len: usize) -> Vec<String> {
    let mut a: Vec<String> = ["bench", "attention", "--impl", imp].map(String::from).to_vec();
    for (flag, value) in [
        ("--seq-len", len),
        ("--batch", args.batch),
        ("--heads", args.heads),
        ("--d-model", args.d_model),
        ("--block", args.block),
        ("--window", args.window),
        ("--iters", args.iters),
    ] {
        a.extend([flag.to_string(), value.to_string()]);
    }
    a.extend(["--device".into(), args.device.cli_name().into()]);
    if args.train {
        a.push("--train".into());
    }
    a
}

fn print_attention_row(args: &BenchAttentionArgs, imp: &str, len: usize, r: &Result<Value, String>) {
    match (r, args.json) {
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
}

struct AttentionChild(AttentionStep);

impl Job for AttentionChild {
    fn run<B: TrainBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        println!("{}", membench::attention::<B>(&self.0, &device, device_name)?);
        Ok(())
    }
}

pub fn memory(args: BenchMemoryArgs) -> Result<()> {
    let cfg = config::load(args.config.as_deref(), &args.set)?;
    if args.words < 3 {
        anyhow::bail!("--words must be at least 3 (padding, unknown and one word)");
    }
    if args.child {
        let (batch, seq_len) = match (args.batch.as_slice(), args.seq_len.as_slice()) {
            ([b], [l]) => (*b, *l),
            _ => anyhow::bail!("a measurement process takes one --batch and one --seq-len"),
        };
        let step = MemoryStep { batch, seq_len, words: args.words, word_len: args.word_len };
        return dispatch(args.device, MemoryChild { cfg, step });
    }
    if !args.json {
        println!(
            "training step (forward, backward, optimizer) of {} on {}; each row a fresh process",
            runner::setup::model::encoder_name(&cfg),
            args.device.name()
        );
        println!("{:>6} {:>6} {:>12} {:>12} {:>8}", "batch", "L", "estimate", "measured", "ratio");
    }
    for &batch in &args.batch {
        for &len in &args.seq_len {
            match (child(&memory_child_args(&args, batch, len)), args.json) {
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

/// The command line of one training-step measurement.
fn memory_child_args(args: &BenchMemoryArgs, batch: usize, len: usize) -> Vec<String> {
    let mut a = vec!["bench".to_string(), "memory".into()];
    if let Some(c) = &args.config {
        a.extend(["--config".into(), c.display().to_string()]);
    }
    for s in &args.set {
        a.extend(["--set".into(), s.clone()]);
    }
    for (flag, value) in
        [("--batch", batch), ("--seq-len", len), ("--words", args.words), ("--word-len", args.word_len)]
    {
        a.extend([flag.to_string(), value.to_string()]);
    }
    a.extend(["--device".into(), args.device.cli_name().into()]);
    a
}

struct MemoryChild {
    cfg: RunConfig,
    step: MemoryStep,
}

impl Job for MemoryChild {
    fn run<B: TrainBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        println!("{}", membench::training_step::<B>(&self.cfg, self.step, &device, device_name)?);
        Ok(())
    }
}
