//! `seqlab bench train|predict`: tokens per second of a configured tagger.
//!
//! Train: [`Learner::step`], the step `seqlab train` runs (word dropout,
//! forward and backward in parts, the finiteness check, the optimizer).
//! Predict: [`infer::tag`], the path `seqlab predict`/`eval` run (windows
//! when the data needs them, batches concurrently across the thread pool,
//! decoding on the host), on the inner (non-autodiff) backend. Both run on
//! length-bucketed batches of the training split of `--data`, or of
//! generated sentences with CoNLL-2003-like lengths (mean 14, max 124
//! tokens). `--dump` writes those batches for the PyTorch reference
//! (`benchmarks/pytorch`), so both run the same work.

use crate::infer::{self, Request};
use crate::setup::config::{self, RunConfig};
use crate::setup::model::{build_model, decoder_name, encoder_name};
use crate::setup::prep::{self, Prepared};
use crate::train::step::{Learner, Opt, Outcome, TokenDropout};
use anyhow::{bail, Context, Result};
use corpus::batch::{plan_batches, Batch, BatchSize, Example};
use corpus::{Columns, Dataset, Prefix, Scheme, Sentence, Split, SplitName, Tag};
use encoders::ops::{SeqBackend, TrainBackend};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Train,
    Predict,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Train => "train",
            Workload::Predict => "predict",
        }
    }
}

/// What a throughput benchmark runs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// A dataset folder (else generated sentences).
    pub data: Option<PathBuf>,
    /// Sentences per batch.
    pub batch: usize,
    /// Timed batches.
    pub steps: usize,
    /// Untimed batches first.
    pub warmup: usize,
    /// Seed of the model, the generated sentences and the batch order.
    pub seed: u64,
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
            Sentence { tokens, tags, doc: 0, line: i + 1 }
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
        qa: None,
    }
}

/// The config (`config` with `set` applied, seeded) and the data it runs on, prepared.
pub fn load(config: &Path, set: &[String], opts: &BenchOptions) -> Result<(RunConfig, Prepared, Dataset)> {
    if opts.steps == 0 || opts.batch == 0 {
        bail!("--steps and --batch must be at least 1");
    }
    let mut cfg = config::load(Some(config), set)?;
    cfg.seed = opts.seed;
    let ds = match &opts.data {
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
            generated_dataset(opts.seed)
        }
    };
    let prep = prep::prepare(&mut cfg, &ds)?;
    Ok((cfg, prep, ds))
}

/// `n` length-bucketed batches of `size` sentences of `data`, as indices
/// (more passes over the sentences, each shuffled anew, when one is not enough).
pub fn plan(data: &[Example], size: usize, n: usize, seed: u64) -> Vec<Vec<usize>> {
    let lengths: Vec<usize> = data.iter().map(|e| e.len()).collect();
    let mut out = Vec::with_capacity(n);
    for pass in 0.. {
        for ids in plan_batches(&lengths, BatchSize::Sentences(size.max(1)), Some(seed.wrapping_add(pass))) {
            if out.len() == n {
                return out;
            }
            out.push(ids);
        }
        if lengths.is_empty() {
            break;
        }
    }
    out
}

/// The training batches the benchmark steps through (and `--dump` writes).
pub fn training_batches(prep: &Prepared, opts: &BenchOptions) -> Vec<Batch> {
    let ids = plan(&prep.train, opts.batch, opts.warmup + opts.steps, opts.seed);
    ids.iter().map(|ids| Batch::pad(&prep.train, ids)).collect()
}

/// Real (unpadded) tokens of `batches`.
pub fn real_tokens(batches: &[Batch]) -> usize {
    batches.iter().map(|b| b.context().lengths.iter().sum::<usize>()).sum()
}

/// How long the warm-up and the timed batches took, and what they held.
pub struct Timing {
    pub warmup_steps: usize,
    pub warmup_seconds: f64,
    pub steps: usize,
    pub seconds: f64,
    pub tokens: usize,
    pub padded_tokens: usize,
}

/// Training steps over the batches, the first `warmup` untimed.
pub fn train<B: TrainBackend>(
    cfg: &RunConfig,
    prep: &Prepared,
    opts: &BenchOptions,
    device: &B::Device,
) -> Result<Timing> {
    let batches: Vec<Batch> = training_batches(prep, opts).into_iter().map(encoders::input::shaped_for::<B>).collect();
    let warmup = opts.warmup.min(batches.len());
    let model = build_model::<B>(cfg, &prep.vocabs, prep.pretrained.clone(), device);
    let mut learner = Learner::new(model, Opt::<B>::new(cfg), TokenDropout::of(cfg, prep.vocabs.tokenization()));
    let mut run = |batches: &[Batch]| -> Result<f64> {
        let started = Instant::now();
        for b in batches {
            if b.context().tags.is_none() {
                bail!("training batches carry tags");
            }
            if let Outcome::Skipped(why) = learner.step(b, cfg.seed, cfg.train.lr, device)? {
                bail!("a training step failed: {why}");
            }
        }
        B::sync(device).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        Ok(started.elapsed().as_secs_f64())
    };
    let warmup_seconds = run(&batches[..warmup])?;
    let seconds = run(&batches[warmup..])?;
    let timed = &batches[warmup..];
    Ok(Timing {
        warmup_steps: warmup,
        warmup_seconds,
        steps: timed.len(),
        seconds,
        tokens: real_tokens(timed),
        padded_tokens: timed.iter().map(|b| b.context().batch * b.context().len).sum(),
    })
}

/// Tagging through the inference path: the training split's sentences
/// whole (windows as the config says), in batches of `opts.batch`, the
/// first `warmup` batches untimed.
pub fn predict<B: SeqBackend>(
    cfg: &RunConfig,
    prep: &Prepared,
    ds: &Dataset,
    opts: &BenchOptions,
    device: &B::Device,
) -> Result<Timing> {
    let train = ds.split(SplitName::Train).context("no training split")?;
    let sentences = prep::encode_untagged(&prep.vocabs, &train.sentences, train.qa.as_deref(), cfg.data.max_word_chars);
    let groups = plan(&sentences, opts.batch, opts.warmup + opts.steps, opts.seed);
    let warmup = opts.warmup.min(groups.len());
    let model = build_model::<B>(cfg, &prep.vocabs, prep.pretrained.clone(), device);
    // The batches' sentences one after another, each batch a group.
    let run = |groups: &[Vec<usize>]| -> Result<(f64, usize, usize)> {
        let data: Vec<Example> = groups.iter().flatten().map(|&i| sentences[i].clone()).collect();
        let mut next = 0;
        let given: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| {
                next += g.len();
                (next - g.len()..next).collect()
            })
            .collect();
        let tokens: usize = data.iter().map(Example::len).sum();
        let padded: usize =
            groups.iter().map(|g| g.len() * g.iter().map(|&i| sentences[i].len()).max().unwrap_or(0)).sum();
        let request = Request::tagging(cfg.data.windows()).in_batches(given);
        let started = Instant::now();
        let tagged = infer::tag(&model, &prep.vocabs, &data, &request, device)?.tagged;
        B::sync(device).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let seconds = started.elapsed().as_secs_f64();
        let decoded: usize = tagged.iter().map(|t| t.tags.len()).sum();
        if decoded != tokens {
            bail!("decoded {decoded} tags for {tokens} tokens");
        }
        Ok((seconds, tokens, padded))
    };
    let (warmup_seconds, _, _) = run(&groups[..warmup])?;
    let (seconds, tokens, padded_tokens) = run(&groups[warmup..])?;
    Ok(Timing { warmup_steps: warmup, warmup_seconds, steps: groups.len() - warmup, seconds, tokens, padded_tokens })
}

/// The benchmark's JSON line.
pub fn report(workload: Workload, cfg: &RunConfig, opts: &BenchOptions, t: &Timing, device_name: &str) -> Value {
    json!({
        "workload": workload.name(),
        "encoder": encoder_name(cfg),
        "decoder": decoder_name(cfg),
        "batch": opts.batch,
        "steps": t.steps,
        "tokens": t.tokens,
        "padded_tokens": t.padded_tokens,
        "seconds": t.seconds,
        "tokens_per_second": t.tokens as f64 / t.seconds.max(1e-12),
        "warmup_steps": t.warmup_steps,
        "warmup_seconds": t.warmup_seconds,
        "threads": rayon::current_num_threads(),
        "precision": encoders::ops::precision::current().to_string(),
        "device": device_name,
        "data": opts.data.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "generated".into()),
    })
}

/// The batches as JSON for the PyTorch reference: sizes of the
/// vocabularies, the training step's token dropout rates and, per batch,
/// the padded `[B, L]` word, capitalisation and bigram ids, `[B, L, W]`
/// character ids, tag ids and lengths.
pub fn dump(path: &std::path::Path, cfg: &RunConfig, prep: &Prepared, batches: &[Batch], warmup: usize) -> Result<()> {
    let dropout = TokenDropout::of(cfg, prep.vocabs.tokenization());
    let batches = batches
        .iter()
        .map(|b| match b {
            Batch::Plain(b) => Ok(b),
            Batch::Asked { .. } => bail!("--dump writes plain tagging batches; this data has questions"),
        })
        .collect::<Result<Vec<_>>>()?;
    let v = json!({
        "words": prep.vocabs.words.len(),
        "chars": prep.vocabs.chars.len(),
        "tags": prep.vocabs.tags.len(),
        // The bigram vocabulary's size when the tagger reads bigrams (0: none).
        "bigrams": prep.vocabs.bigrams.as_ref().map_or(0, |v| v.len()),
        // The training step's token dropout (`TokenDropout`), at the rates of this data.
        "word_dropout": dropout.word,
        "char_dropout": dropout.char,
        "warmup": warmup,
        "batches": batches.iter().map(|b| json!({
            "batch": b.batch, "len": b.len, "word_len": b.word_len, "lengths": b.lengths,
            "words": b.words, "chars": b.chars, "caps": b.caps, "bigrams": b.bigrams, "tags": b.tags,
        })).collect::<Vec<_>>(),
    });
    corpus::io::write_atomic(path, serde_json::to_string(&v)?)
        .with_context(|| format!("writing the batches to {}", path.display()))
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
