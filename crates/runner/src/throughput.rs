//! `seqlab bench train|predict`: tokens per second of a configured tagger.
//!
//! Train: forward, backward and optimizer step, as the training loop runs
//! them. Predict: inference on the inner (non-autodiff) backend, CRF
//! decoding included, the batches running concurrently across the thread
//! pool as `seqlab predict`/`evaluate` run them. Both run on
//! length-bucketed batches of the training split of `--data`, or of
//! generated sentences with CoNLL-2003-like lengths (mean 14, max 124
//! tokens). `--dump` writes those batches for the
//! PyTorch reference (`benchmarks/pytorch`), so both run the same work.

use crate::cli::BenchRunArgs;
use crate::config::{self, RunConfig};
use crate::prep::{self, Prepared};
use crate::train::{build_model, encoder_name, loss_and_grads, Opt};
use crate::{dispatch, Job};
use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use corpus::batch::{pad, plan_batches, BatchSize, PaddedBatch};
use corpus::{Columns, Dataset, Prefix, Scheme, Sentence, Split, SplitName, Tag};
use encoders::ops::SeqBackend;
use encoders::TaggerInput;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Train,
    Predict,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Train => "train",
            Workload::Predict => "predict",
        }
    }
}

/// Generated sentences: lengths log-normal around 14 tokens, one of 124
/// (CoNLL-2003's training split: mean 14.5 tokens, longest 113; its test
/// split's longest is 124), words from a Zipf-like
/// vocabulary with 2–11 letters, about one token in six inside an entity of
/// four types (BIO).
pub fn generated_sentences(n: usize, seed: u64) -> Vec<Sentence> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let types = ["PER", "LOC", "ORG", "MISC"];
    let spelling = |id: usize| -> String {
        let mut r = ChaCha8Rng::seed_from_u64(id as u64 ^ 0x5EED);
        let len = 2 + r.random_range(0..5) + r.random_range(0..5);
        let mut w: String = (0..len).map(|_| (b'a' + r.random_range(0..26u8)) as char).collect();
        if id % 7 == 0 {
            w[..1].make_ascii_uppercase();
        }
        w
    };
    (0..n)
        .map(|i| {
            // exp(N(mu, 0.75²)) has mean exp(mu + 0.75²/2) = 14.
            let sigma = 0.75f64;
            let mu = 14f64.ln() - sigma * sigma / 2.0;
            let normal = {
                let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
                (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
            };
            let len = if i == 0 { 124 } else { ((mu + sigma * normal).exp().round() as usize).clamp(1, 124) };
            let mut tokens = Vec::with_capacity(len);
            let mut tags = Vec::with_capacity(len);
            while tokens.len() < len {
                if rng.random_bool(0.1) {
                    let ty = types[rng.random_range(0..types.len())];
                    let span = rng.random_range(1..=3).min(len - tokens.len());
                    for k in 0..span {
                        tags.push(Tag::new(if k == 0 { Prefix::B } else { Prefix::I }, ty));
                        tokens.push(spelling(20 + rng.random_range(0..2000)));
                    }
                } else {
                    tags.push(Tag::O);
                    // Zipf-like: small ids far more often.
                    let u: f64 = rng.random();
                    tokens.push(spelling((20000f64.powf(u) as usize).min(19999)));
                }
            }
            Sentence { tokens, tags, doc: 0, line: i + 1, question: None }
        })
        .collect()
}

fn generated_dataset(seed: u64) -> Dataset {
    let sentences = generated_sentences(4000, seed);
    Dataset {
        name: "generated".into(),
        dir: PathBuf::from("(generated)"),
        scheme: Scheme::Iob2,
        scheme_declared: true,
        columns: Columns::default(),
        splits: vec![Split { name: SplitName::Train, path: PathBuf::from("(generated)"), sentences, qa: None }],
    }
}

pub fn run(args: BenchRunArgs, workload: Workload) -> Result<()> {
    if args.steps == 0 || args.batch == 0 {
        bail!("--steps and --batch must be at least 1");
    }
    let mut cfg = config::load(Some(&args.config), &args.set)?;
    cfg.seed = args.seed;
    let ds = match &args.data {
        Some(dir) => {
            cfg.data.dir = dir.clone();
            let ds = prep::load_dataset(dir, Some(&prep::tokenizer_path(&cfg, dir)))?;
            prep::check_question_mode(&cfg, &ds)?;
            ds
        }
        None => {
            if cfg.model.question != encoders::QuestionMode::None {
                bail!("a question-answering config needs --data (a SQuAD-format folder)");
            }
            generated_dataset(args.seed)
        }
    };
    let prep = prep::prepare(&mut cfg, &ds)?;
    let batches = plan(&prep, args.batch, args.warmup + args.steps, args.seed);
    if let Some(path) = &args.dump {
        dump(path, &prep, &batches, args.warmup)?;
        let tokens = real_tokens(&batches[args.warmup.min(batches.len())..]);
        eprintln!(
            "wrote {} batches ({} warm-up, {tokens} timed tokens) to {}",
            batches.len(),
            args.warmup.min(batches.len()),
            path.display()
        );
        return Ok(());
    }
    let device = args.device;
    dispatch(device, Bench { args, workload, cfg, prep, batches })
}

/// Real (unpadded) tokens of `batches`.
fn real_tokens(batches: &[PaddedBatch]) -> usize {
    batches.iter().map(|b| b.lengths.iter().sum::<usize>()).sum()
}

/// `n` length-bucketed batches of `size` sentences (more passes over the
/// sentences, each shuffled anew, when one is not enough).
fn plan(prep: &Prepared, size: usize, n: usize, seed: u64) -> Vec<PaddedBatch> {
    let lengths: Vec<usize> = prep.train.iter().map(|e| e.len()).collect();
    let mut out = Vec::with_capacity(n);
    for pass in 0.. {
        for ids in plan_batches(&lengths, BatchSize::Sentences(size.max(1)), Some(seed.wrapping_add(pass))) {
            if out.len() == n {
                return out;
            }
            out.push(pad(&prep.train, &ids));
        }
        if lengths.is_empty() {
            break;
        }
    }
    out
}

/// The batches as JSON: sizes of the vocabularies and, per batch, the
/// padded `[B, L]` word ids, `[B, L, W]` character ids, tag ids and lengths.
fn dump(path: &std::path::Path, prep: &Prepared, batches: &[PaddedBatch], warmup: usize) -> Result<()> {
    if batches.iter().any(|b| b.question.is_some()) {
        bail!("--dump writes plain tagging batches; this data has questions");
    }
    let v = json!({
        "words": prep.vocabs.words.len(),
        "chars": prep.vocabs.chars.len(),
        "tags": prep.vocabs.tags.len(),
        "warmup": warmup,
        "batches": batches.iter().map(|b| json!({
            "batch": b.batch, "len": b.len, "word_len": b.word_len, "lengths": b.lengths,
            "words": b.words, "chars": b.chars, "tags": b.tags,
        })).collect::<Vec<_>>(),
    });
    corpus::io::write_atomic(path, serde_json::to_string(&v)?)
        .with_context(|| format!("writing the batches to {}", path.display()))
}

struct Bench {
    args: BenchRunArgs,
    workload: Workload,
    cfg: RunConfig,
    prep: Prepared,
    batches: Vec<PaddedBatch>,
}

impl Job for Bench {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend,
    {
        let Bench { args, workload, cfg, prep, batches } = self;
        encoders::dropout::seed_all::<B>(&device, cfg.seed);
        let warmup = args.warmup.min(batches.len());
        let timed = &batches[warmup..];
        let tokens = real_tokens(timed);
        let padded: usize = timed.iter().map(|b| b.batch * b.len).sum();
        let model = build_model::<B>(&cfg, &prep.vocabs, prep.pretrained.clone(), &device);
        // Warm-up time is reported too: on CUDA it is where kernels compile.
        let (warmup_seconds, seconds) = match workload {
            Workload::Train => {
                let mut opt = Opt::<B>::new(&cfg);
                let mut model = Some(model);
                let mut step = |batch: &PaddedBatch| -> Result<()> {
                    let m = model.take().context("model")?;
                    if batch.tags.is_none() {
                        bail!("training batches carry tags");
                    }
                    let (_, grads) = loss_and_grads(&m, batch, cfg.seed, &device);
                    model = Some(opt.step(cfg.train.lr, m, grads));
                    Ok(())
                };
                let warming = Instant::now();
                for b in &batches[..warmup] {
                    step(b)?;
                }
                B::sync(&device).map_err(|e| anyhow::anyhow!("{e:?}"))?;
                let warmup_seconds = warming.elapsed().as_secs_f64();
                let started = Instant::now();
                for b in timed {
                    step(b)?;
                }
                B::sync(&device).map_err(|e| anyhow::anyhow!("{e:?}"))?;
                (warmup_seconds, started.elapsed().as_secs_f64())
            }
            Workload::Predict => {
                let model = model.valid();
                let step = |batch: &PaddedBatch| -> usize {
                    let input = TaggerInput::<B::InnerBackend>::from_padded(batch, &device);
                    let decoded =
                        model.decode(&input).expect("batches fit the model's question mode (checked in `run`)");
                    decoded.iter().map(Vec::len).sum()
                };
                let warming = Instant::now();
                for b in &batches[..warmup] {
                    step(b);
                }
                let warmup_seconds = warming.elapsed().as_secs_f64();
                // Batches run concurrently, as `evaluate::tag_all` (predict,
                // evaluate) runs them.
                let started = Instant::now();
                let decoded: usize = timed.par_iter().map(step).sum();
                let seconds = started.elapsed().as_secs_f64();
                if decoded != tokens {
                    bail!("decoded {decoded} tags for {tokens} tokens");
                }
                (warmup_seconds, seconds)
            }
        };
        let line = json!({
            "workload": workload.name(),
            "encoder": encoder_name(&cfg),
            "decoder": format!("{:?}", cfg.model.decoder).to_lowercase(),
            "batch": args.batch,
            "steps": timed.len(),
            "tokens": tokens,
            "padded_tokens": padded,
            "seconds": seconds,
            "tokens_per_second": tokens as f64 / seconds.max(1e-12),
            "warmup_steps": warmup,
            "warmup_seconds": warmup_seconds,
            "threads": rayon::current_num_threads(),
            "device": device_name,
            "data": args.data.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "generated".into()),
        });
        if args.json {
            println!("{line}");
        } else {
            println!(
                "{} {} ({}): {} steps of {} sentences, {} tokens ({:.0}% padding) in {:.2} s: {:.0} tokens/s on {device_name}, {} threads (after {} warm-up steps in {:.2} s)",
                line["workload"].as_str().unwrap_or_default(),
                line["encoder"].as_str().unwrap_or_default(),
                line["decoder"].as_str().unwrap_or_default(),
                timed.len(),
                args.batch,
                tokens,
                100.0 * (padded - tokens) as f64 / padded.max(1) as f64,
                seconds,
                line["tokens_per_second"].as_f64().unwrap_or_default(),
                line["threads"],
                warmup,
                warmup_seconds
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_lengths_are_conll_like() {
        let s = generated_sentences(4000, 1);
        let lengths: Vec<usize> = s.iter().map(|s| s.tokens.len()).collect();
        let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
        assert!((12.5..15.5).contains(&mean), "mean length {mean}");
        assert_eq!(lengths.iter().max(), Some(&124));
        assert!(s.iter().all(|s| s.tokens.len() == s.tags.len() && !s.tokens.is_empty()));
        let entities = s.iter().flat_map(|s| &s.tags).filter(|t| !matches!(t, Tag::O)).count();
        let share = entities as f64 / lengths.iter().sum::<usize>() as f64;
        assert!((0.1..0.3).contains(&share), "entity token share {share}");
        // The same seed, the same sentences.
        assert_eq!(generated_sentences(50, 7), generated_sentences(50, 7));
    }
}
