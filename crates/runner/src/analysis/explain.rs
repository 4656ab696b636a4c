//! Is attention an explanation? An erasure test of faithfulness (DeYoung et
//! al. 2020's comprehensiveness, Samek et al. 2017's AOPC): for each
//! prediction of a split (an entity, or a QA reader's answer span), the
//! tokens outside it are ranked by how much the prediction rests on them,
//! by four methods:
//! - `attention`: the last layer's attention from the prediction's tokens,
//!   mean over heads;
//! - `rollout`: attention rollout (Abnar & Zuidema 2020) through every layer;
//! - `gradient`: gradient × input, `Σ_d x_td · ∂ log P / ∂ x_td` over the
//!   token's input features (what the encoder reads of it);
//! - `random`: a seeded shuffle, the baseline.
//!
//! The top `k = 1 … K` tokens of each ranking are erased (replaced by the
//! unknown word: [`corpus::Example::erased`]) and the prediction's
//! probability read again ([`Tagger::log_prob_of`]: an entity's marginal
//! probability under the CRF, an answer span's probability under the
//! pointer). A faithful ranking erases what matters first: its probability
//! falls fastest. AOPC, the area over the perturbation curve,
//! `1/(K+1) Σ_{k=0}^{K} (P_0 − P_k)`, sums that up per prediction.
//!
//! The prediction's own tokens are never erased: erasing the entity's own
//! word would make every method look faithful that ranks it first.
//! Sentences are read whole (no windows); those longer than [`MAX_LEN`]
//! are left out and counted. The attention methods need self-attention
//! over the sentence (attention taggers and the Transformer QA readers);
//! for a concat reader, the context block of its joint attention. BiLSTM
//! taggers and the BiDAF / co-attention readers get gradients and random.

use crate::analysis::attention_map::{attention_maps, SentenceAttention};
use crate::infer::{self, Request, Tagged, Windows};
use anyhow::{Context, Result};
use burn::prelude::*;
use corpus::{Example, Vocabs};
use encoders::ops::TrainBackend;
use encoders::prediction::Prediction;
use encoders::{Tagger, TaggerInput};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;
use std::path::Path;

/// Sentences longer than this are left out (their attention is `[H, L, L]`
/// per layer, and every erased copy goes through the encoder).
pub const MAX_LEN: usize = 512;

/// Erased copies per encoder batch.
const ROWS_PER_BATCH: usize = 64;

/// How tokens are ranked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Attention,
    Rollout,
    Gradient,
    Random,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Attention => "attention",
            Method::Rollout => "rollout",
            Method::Gradient => "gradient",
            Method::Random => "random",
        }
    }

    /// The methods a tagger allows: the attention ones need self-attention.
    pub fn for_tagger<B: Backend>(model: &Tagger<B>) -> Vec<Method> {
        if model.attention_layers() > 0 {
            vec![Method::Attention, Method::Rollout, Method::Gradient, Method::Random]
        } else {
            vec![Method::Gradient, Method::Random]
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Erase up to this many tokens (`K`).
    pub max_k: usize,
    /// Explain at most this many predictions (whole sentences are taken,
    /// in a seeded random order, until there are this many).
    pub items: usize,
    /// Orders the sentences and seeds the random rankings.
    pub seed: u64,
}

/// One prediction, explained.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The sentence's index in the split.
    pub sentence: usize,
    /// Its tokens (and tags).
    pub prediction: Prediction,
    /// The entity type, or `answer`.
    pub label: String,
    /// `P(prediction)` on the intact sentence.
    pub prob: f64,
    /// Tokens outside the prediction (what can be erased).
    pub candidates: usize,
    /// Per method (as [`Explanation::methods`]), `P(prediction)` after
    /// erasing its top `k` tokens, `k = 1 ..= K` (all candidates once `k`
    /// passes their number).
    pub erased: Vec<Vec<f64>>,
}

impl Item {
    /// Method `m`'s drop in probability at `k = 0 ..= K` (0 at `k = 0`).
    pub fn drops(&self, m: usize) -> Vec<f64> {
        std::iter::once(0.0).chain(self.erased[m].iter().map(|p| self.prob - p)).collect()
    }

    /// Method `m`'s AOPC: the mean of [`Self::drops`].
    pub fn aopc(&self, m: usize) -> f64 {
        let d = self.drops(m);
        d.iter().sum::<f64>() / d.len() as f64
    }
}

/// What `explain` found.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    pub methods: Vec<Method>,
    pub max_k: usize,
    pub items: Vec<Item>,
    /// Sentences whose predictions were explained.
    pub sentences: usize,
    /// Sentences passed over for being longer than [`MAX_LEN`].
    pub too_long: usize,
    /// Predictions passed over for having no token outside them.
    pub no_context: usize,
}

/// Explains the predictions of `data` (see the module's documentation).
/// `model` computes the gradients; `inference` (the same weights on the
/// inner backend) tags and reads the erased copies.
pub fn explain<B: TrainBackend>(
    model: &Tagger<B>,
    inference: &Tagger<B::InnerBackend>,
    vocabs: &Vocabs,
    data: &[Example],
    options: &Options,
    device: &B::Device,
) -> Result<Explanation> {
    let methods = Method::for_tagger(model);
    // Only the sentences that can be explained are tagged (whole, no windows).
    let fits: Vec<usize> = (0..data.len()).filter(|&i| data[i].len() <= MAX_LEN).collect();
    let request = Request::tagging(Windows::NONE).with_answers(inference.decoder().is_span());
    let kept: Vec<Example> = fits.iter().map(|&i| data[i].clone()).collect();
    let mut tagged: Vec<Option<Tagged>> = vec![None; data.len()];
    for (&i, t) in fits.iter().zip(infer::tag(inference, vocabs, &kept, &request, device)?.tagged) {
        tagged[i] = Some(t);
    }
    let mut order: Vec<usize> = (0..data.len()).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(options.seed));
    let mut out = Explanation {
        methods: methods.clone(),
        max_k: options.max_k,
        items: Vec::new(),
        sentences: 0,
        too_long: 0,
        no_context: 0,
    };
    for i in order {
        if out.items.len() >= options.items {
            break;
        }
        let Some(tagged) = &tagged[i] else {
            out.too_long += 1;
            continue;
        };
        let mut predictions = predictions_of(vocabs, tagged);
        let before = predictions.len();
        predictions.retain(|(p, _)| p.end + 1 - p.start < data[i].len());
        out.no_context += before - predictions.len();
        predictions.truncate(options.items - out.items.len());
        if predictions.is_empty() {
            continue;
        }
        let sentence = Sentence { index: i, example: &data[i], predictions: &predictions };
        out.items.extend(sentence.explain(model, inference, &methods, options, device)?);
        out.sentences += 1;
    }
    Ok(out)
}

/// A sentence's predictions with their labels: its entities (the tags of
/// each in the tagger's scheme), or a QA reader's answer span.
fn predictions_of(vocabs: &Vocabs, tagged: &Tagged) -> Vec<(Prediction, String)> {
    if let Some(span) = tagged.span {
        return vec![(Prediction { start: span.start, end: span.end, tags: Vec::new() }, "answer".to_string())];
    }
    let path: Vec<Option<u32>> = corpus::tags::convert(&tagged.tags, vocabs.data_scheme, vocabs.scheme)
        .iter()
        .map(|t| vocabs.tag_id(t))
        .collect();
    vocabs
        .data_scheme
        .decode(&tagged.tags)
        .into_iter()
        .filter_map(|s| {
            let tags: Option<Vec<usize>> = path[s.start..s.end].iter().map(|y| y.map(|y| y as usize)).collect();
            Some((Prediction { start: s.start, end: s.end - 1, tags: tags? }, s.label))
        })
        .collect()
}

/// One sentence and what is explained in it.
struct Sentence<'a> {
    index: usize,
    example: &'a Example,
    predictions: &'a [(Prediction, String)],
}

impl Sentence<'_> {
    fn explain<B: TrainBackend>(
        &self,
        model: &Tagger<B>,
        inference: &Tagger<B::InnerBackend>,
        methods: &[Method],
        options: &Options,
        device: &B::Device,
    ) -> Result<Vec<Item>> {
        let n = self.example.len();
        let targets: Vec<Prediction> = self.predictions.iter().map(|(p, _)| p.clone()).collect();
        let attention = methods.contains(&Method::Attention);
        let (probs, gradient, maps) = gradient_x_input(model, self.example, &targets, attention, device)?;
        let mut items = Vec::with_capacity(targets.len());
        // Every erased copy of the sentence, then one pass over them all.
        let mut copies = Vec::new();
        for (r, target) in targets.iter().enumerate() {
            let candidates: Vec<usize> = (0..n).filter(|&t| t < target.start || t > target.end).collect();
            for &m in methods {
                let score = match m {
                    Method::Attention => rows_mean(&last_layer(&maps[0]), n, target),
                    Method::Rollout => rows_mean(&rollout(&maps[0]), n, target),
                    Method::Gradient => gradient[r * n..(r + 1) * n].to_vec(),
                    Method::Random => {
                        // One stream per (sentence, prediction) of the seed's generator.
                        let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
                        rng.set_stream(((self.index as u64) << 20) | r as u64);
                        (0..n).map(|_| rng.random::<f64>()).collect()
                    }
                };
                let ranked = rank(&candidates, &score);
                for k in 1..=options.max_k {
                    copies.push((r, self.example.erased(&ranked[..k.min(ranked.len())])));
                }
            }
            items.push(Item {
                sentence: self.index,
                prediction: target.clone(),
                label: self.predictions[r].1.clone(),
                prob: probs[r],
                candidates: candidates.len(),
                erased: Vec::new(),
            });
        }
        let erased = probabilities(inference, &copies, &targets, device)?;
        for (r, chunk) in erased.chunks(methods.len() * options.max_k).enumerate() {
            items[r].erased = chunk.chunks(options.max_k).map(<[f64]>::to_vec).collect();
        }
        Ok(items)
    }
}

/// For each target (one copy of the sentence per target): `P(target)`,
/// the gradient × input score of every token `[targets × n]`, and the
/// sentence's attention when asked. Dropout is off: the model reads its
/// input as it does at inference.
fn gradient_x_input<B: TrainBackend>(
    model: &Tagger<B>,
    example: &Example,
    targets: &[Prediction],
    attention: bool,
    device: &B::Device,
) -> Result<(Vec<f64>, Vec<f64>, Vec<SentenceAttention>)> {
    let p = targets.len();
    let copies = vec![example.clone(); p];
    let batch = encoders::input::pad_batch::<B>(&copies, &(0..p).collect::<Vec<_>>());
    let input = TaggerInput::<B>::from_batch(&batch, device);
    encoders::dropout::disabled(|| {
        let x = model.embed(&input).detach().require_grad(); // [P, L, D]
        let out = model.forward_embedded(x.clone(), &input, attention)?;
        let maps = if attention { attention_maps(out.attention, out.cross, &batch) } else { Vec::new() };
        let log_p = model.log_prob_of(out.emissions, input.context().mask.clone(), targets); // [P]
        let probs: Vec<f64> = log_p.clone().inner().exp().into_data().iter::<f32>().map(f64::from).collect();
        let grads = log_p.sum().backward();
        let g = x.grad(&grads).context("no gradient reached the input features")?; // [P, L, D]
        let [_, l, _] = g.dims();
        let score: Vec<f32> = (x.inner() * g).sum_dim(2).reshape([p, l]).into_data().iter::<f32>().collect(); // [P, L]
        let n = example.len();
        let score = (0..p).flat_map(|r| score[r * l..r * l + n].iter().map(|&s| f64::from(s))).collect();
        Ok((probs, score, maps))
    })
}

/// `P(targets[r])` of each erased copy `(r, example)`, in order.
fn probabilities<B: encoders::ops::SeqBackend>(
    model: &Tagger<B>,
    copies: &[(usize, Example)],
    targets: &[Prediction],
    device: &B::Device,
) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(copies.len());
    for chunk in copies.chunks(ROWS_PER_BATCH) {
        let examples: Vec<Example> = chunk.iter().map(|(_, e)| e.clone()).collect();
        let batch = encoders::input::pad_batch::<B>(&examples, &(0..examples.len()).collect::<Vec<_>>());
        let input = TaggerInput::<B>::from_batch(&batch, device);
        let e = model.forward(&input, false)?.emissions;
        let asked: Vec<Prediction> = chunk.iter().map(|(r, _)| targets[*r].clone()).collect();
        let log_p = model.log_prob_of(e, input.context().mask.clone(), &asked); // [rows]
        out.extend(log_p.exp().into_data().iter::<f32>().map(f64::from));
    }
    Ok(out)
}

/// `candidates` by `score`, highest first (ties by position).
fn rank(candidates: &[usize], score: &[f64]) -> Vec<usize> {
    let mut ranked = candidates.to_vec();
    ranked.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
    ranked
}

/// The mean over the target's tokens of rows of an `[n, n]` matrix: how
/// much the prediction's tokens attend to each token.
fn rows_mean(m: &[f64], n: usize, target: &Prediction) -> Vec<f64> {
    let rows = (target.end + 1 - target.start) as f64;
    (0..n).map(|j| (target.start..=target.end).map(|i| m[i * n + j]).sum::<f64>() / rows).collect()
}

/// Layer `layer`'s attention, mean over heads: `[n, n]`.
fn head_mean(a: &SentenceAttention, layer: usize) -> Vec<f64> {
    let (n, h) = (a.len, a.heads.max(1));
    let w = &a.layers[layer];
    (0..n * n).map(|k| (0..h).map(|head| f64::from(w[head * n * n + k])).sum::<f64>() / h as f64).collect()
}

/// The last layer's attention, mean over heads: `[n, n]`.
pub fn last_layer(a: &SentenceAttention) -> Vec<f64> {
    head_mean(a, a.layers.len() - 1)
}

/// Attention rollout: `R = Â_L ⋯ Â_1` with `Â_l` the head mean of layer
/// `l` plus the identity (the residual connection), each row renormalised
/// to sum to 1: `[n, n]`, row `i` how much token `i`'s output draws on
/// each input token through every layer.
pub fn rollout(a: &SentenceAttention) -> Vec<f64> {
    let n = a.len;
    let mut r: Vec<f64> = (0..n * n).map(|k| f64::from(u8::from(k / n == k % n))).collect();
    for layer in 0..a.layers.len() {
        let mut m = head_mean(a, layer);
        for (i, row) in m.chunks_mut(n).enumerate() {
            row[i] += 1.0;
            let sum: f64 = row.iter().sum();
            row.iter_mut().for_each(|x| *x /= sum);
        }
        // R ← Â_l · R
        r = (0..n * n).map(|k| (0..n).map(|j| m[(k / n) * n + j] * r[j * n + k % n]).sum()).collect();
    }
    r
}

/// Per method, the mean drop at `k = 0 ..= K`.
pub fn curves(e: &Explanation) -> Vec<Vec<f64>> {
    let n = e.items.len().max(1) as f64;
    (0..e.methods.len())
        .map(|m| (0..=e.max_k).map(|k| e.items.iter().map(|it| it.drops(m)[k]).sum::<f64>() / n).collect::<Vec<f64>>())
        .collect()
}

/// A mean over items and its 95 % interval (percentile bootstrap over items).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
}

/// The mean of `values` with its bootstrap interval (`samples` resamples).
pub fn estimate(values: &[f64], samples: usize, seed: u64) -> Estimate {
    let n = values.len();
    if n == 0 {
        return Estimate { mean: f64::NAN, low: f64::NAN, high: f64::NAN };
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> =
        (0..samples.max(1)).map(|_| (0..n).map(|_| values[rng.random_range(0..n)]).sum::<f64>() / n as f64).collect();
    means.sort_by(f64::total_cmp);
    let at = |p: f64| means[((means.len() - 1) as f64 * p).round() as usize];
    Estimate { mean, low: at(0.025), high: at(0.975) }
}

/// Resamples for the intervals.
pub const SAMPLES: usize = 2000;

/// The summary: AOPC per method, and each method against random and
/// against gradient × input (paired over predictions), in Markdown.
pub fn summary(e: &Explanation) -> String {
    let mut s = String::new();
    let aopc = |m: usize| e.items.iter().map(|it| it.aopc(m)).collect::<Vec<f64>>();
    let _ = writeln!(
        s,
        "{} predictions in {} sentences; K = {}; P = the prediction's probability; \
         {} sentences over {MAX_LEN} tokens and {} predictions with no other token left out.\n",
        e.items.len(),
        e.sentences,
        e.max_k,
        e.too_long,
        e.no_context
    );
    let mean_p = e.items.iter().map(|it| it.prob).sum::<f64>() / e.items.len().max(1) as f64;
    let _ = writeln!(s, "Mean P on the intact input: {mean_p:.4}.\n");
    let _ = writeln!(s, "| method | AOPC | 95 % interval | drop at k = 1 | drop at k = {} |", e.max_k);
    let _ = writeln!(s, "|---|---:|---|---:|---:|");
    let c = curves(e);
    for (m, method) in e.methods.iter().enumerate() {
        let est = estimate(&aopc(m), SAMPLES, 1);
        let _ = writeln!(
            s,
            "| {} | {:.4} | [{:.4}, {:.4}] | {:.4} | {:.4} |",
            method.as_str(),
            est.mean,
            est.low,
            est.high,
            c[m].get(1).copied().unwrap_or(f64::NAN),
            c[m][e.max_k]
        );
    }
    let _ = writeln!(s, "\n| A − B (AOPC, paired over predictions) | difference | 95 % interval | answer |");
    let _ = writeln!(s, "|---|---:|---|---|");
    for (b_name, b) in [Method::Random, Method::Gradient]
        .into_iter()
        .filter_map(|b| e.methods.iter().position(|&m| m == b).map(|i| (b, i)))
    {
        for (a, method) in e.methods.iter().enumerate().filter(|&(a, _)| a != b) {
            if b_name == Method::Gradient && *method == Method::Random {
                continue;
            }
            let diff: Vec<f64> = e.items.iter().map(|it| it.aopc(a) - it.aopc(b)).collect();
            let est = estimate(&diff, SAMPLES, 2);
            let answer = if est.low > 0.0 {
                format!("{} is more faithful", method.as_str())
            } else if est.high < 0.0 {
                format!("{} is more faithful", b_name.as_str())
            } else {
                "no difference confirmed".to_string()
            };
            let _ = writeln!(
                s,
                "| {} − {} | {:+.4} | [{:+.4}, {:+.4}] | {answer} |",
                method.as_str(),
                b_name.as_str(),
                est.mean,
                est.low,
                est.high
            );
        }
    }
    s
}

/// Writes `items.csv` (one row per prediction and method: its AOPC and
/// `P` after each erasure), `curves.csv` (mean drop per method and `k`),
/// `curves.svg` (the same as a picture) and `summary.md` into `dir`;
/// returns the summary's text ([`summary`]).
pub fn write(dir: &Path, e: &Explanation, title: &str) -> Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head: Vec<String> =
        ["sentence", "start", "end", "label", "candidates", "method", "prob", "aopc"].map(String::from).to_vec();
    head.extend((1..=e.max_k).map(|k| format!("prob_erased_{k}")));
    w.write_record(&head)?;
    for it in &e.items {
        for (m, method) in e.methods.iter().enumerate() {
            let mut row = vec![
                it.sentence.to_string(),
                it.prediction.start.to_string(),
                it.prediction.end.to_string(),
                it.label.clone(),
                it.candidates.to_string(),
                method.as_str().to_string(),
                format!("{:.6}", it.prob),
                format!("{:.6}", it.aopc(m)),
            ];
            row.extend(it.erased[m].iter().map(|p| format!("{p:.6}")));
            w.write_record(&row)?;
        }
    }
    corpus::io::write_atomic(&dir.join("items.csv"), w.into_inner()?)?;
    let c = curves(e);
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["method", "k", "items", "mean_drop"])?;
    for (m, method) in e.methods.iter().enumerate() {
        for (k, d) in c[m].iter().enumerate() {
            w.write_record([method.as_str().to_string(), k.to_string(), e.items.len().to_string(), format!("{d:.6}")])?;
        }
    }
    corpus::io::write_atomic(&dir.join("curves.csv"), w.into_inner()?)?;
    let lines: Vec<crate::report::html::Curve> = e
        .methods
        .iter()
        .zip(&c)
        .map(|(m, ys)| crate::report::html::Curve {
            label: m.as_str().to_string(),
            points: ys.iter().copied().enumerate().collect(),
        })
        .collect();
    let axis = crate::report::html::Axis { desc: "tokens erased (k)", from: 0 };
    let svg = crate::report::html::line_chart_on(axis, title, "drop in P(prediction)", &lines, (None, None))?;
    corpus::io::write_atomic(&dir.join("curves.svg"), svg.into_bytes())?;
    let text = summary(e);
    corpus::io::write_atomic(&dir.join("summary.md"), format!("# {title}\n\n{text}").into_bytes())?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::model::build_model;
    use burn::backend::{Autodiff, Flex};
    use burn::module::{AutodiffModule, Param};
    use burn::tensor::TensorData;
    use encoders::EncoderKind;

    type A = Autodiff<Flex>;

    fn attention(layers: Vec<Vec<f32>>, heads: usize, len: usize) -> SentenceAttention {
        SentenceAttention { heads, len, layers, question: None }
    }

    #[test]
    fn rollout_adds_the_residual_renormalises_and_multiplies_through_the_layers() {
        // One head: token 0 attends to itself, token 1 half and half.
        let a = vec![1.0, 0.0, 0.5, 0.5];
        // One layer: (A + I) / 2 with rows summing to 1.
        let one = rollout(&attention(vec![a.clone()], 1, 2));
        for (x, y) in one.iter().zip([1.0, 0.0, 0.25, 0.75]) {
            assert!((x - y).abs() < 1e-12, "{one:?}");
        }
        // Two layers: Â₂ · Â₁ (the second layer reads the first's output),
        // Â₁ = [[1, 0], [0.25, 0.75]], Â₂ = [[0.75, 0.25], [0, 1]]; the
        // other order would give [[0.75, 0.25], …].
        let two = rollout(&attention(vec![a.clone(), vec![0.5, 0.5, 0.0, 1.0]], 1, 2));
        for (x, y) in two.iter().zip([0.8125, 0.1875, 0.25, 0.75]) {
            assert!((x - y).abs() < 1e-12, "{two:?}");
        }
        // Heads are averaged first: two heads that disagree make the mean.
        let heads = attention(vec![vec![1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]], 2, 2);
        assert_eq!(last_layer(&heads), [0.5, 0.5, 0.5, 0.5]);
    }

    #[test]
    fn aopc_is_the_mean_drop_from_k_0_to_k() {
        let it = Item {
            sentence: 0,
            prediction: Prediction { start: 0, end: 0, tags: vec![1] },
            label: "X".into(),
            prob: 0.8,
            candidates: 2,
            erased: vec![vec![0.6, 0.2], vec![0.9, 0.8]],
        };
        assert_eq!(it.drops(0).len(), 3);
        assert!((it.aopc(0) - (0.0 + 0.2 + 0.6) / 3.0).abs() < 1e-12);
        assert!((it.aopc(1) - (0.0 - 0.1 + 0.0) / 3.0).abs() < 1e-12, "erasing can raise P");
        // Highest score first, ties by position; only candidates ranked.
        assert_eq!(rank(&[0, 2, 3], &[1.0, 9.0, 5.0, 5.0]), [2, 3, 0]);
    }

    /// An untrained tagger of `kind` on generated sentences, with dropout
    /// (which explaining must switch off), its emission bias pushed
    /// towards a single-token entity so that every sentence has some.
    fn tagger(kind: EncoderKind) -> (Tagger<A>, Tagger<Flex>, Vocabs, Vec<Example>) {
        let (vocabs, data) = crate::testing::toy_examples(12, 5, false);
        let cfg = crate::testing::small_config(kind, 0.3);
        let device = Default::default();
        // The caller holds the backend's lock: the same weights every time.
        <A as Backend>::seed(&device, 7);
        let mut model = build_model::<A>(&cfg, &vocabs, None, &device);
        let s = vocabs.parsed_tags().iter().position(|t| t.to_string().starts_with("S-")).unwrap();
        let t = vocabs.tags.len();
        let bias: Vec<f32> = (0..t).map(|j| if j == s { 1.5 } else { 0.0 }).collect();
        model.emit.bias = Some(Param::from_tensor(Tensor::from_data(TensorData::new(bias, [t]), &device)));
        let inference = model.valid();
        (model, inference, vocabs, data)
    }

    fn single_token_tag(vocabs: &Vocabs) -> usize {
        vocabs.parsed_tags().iter().position(|t| t.to_string().starts_with("S-")).unwrap()
    }

    /// Gradient × input is the derivative of `log P` along each token's own
    /// features: `(f(x, token t scaled by 1 + ε) − f(…, 1 − ε)) / 2ε`.
    #[test]
    fn gradient_x_input_is_the_derivative_along_each_tokens_features() {
        let _rng = crate::testing::backend_rng();
        for kind in [EncoderKind::Attention, EncoderKind::Bilstm] {
            let (model, _, vocabs, data) = tagger(kind);
            let device = Default::default();
            let example = &data[0];
            let n = example.len();
            let target = Prediction { start: 1, end: 1, tags: vec![single_token_tag(&vocabs)] };
            let (probs, score, _) =
                gradient_x_input(&model, example, std::slice::from_ref(&target), false, &device).unwrap();
            let batch = encoders::input::pad_batch::<A>(std::slice::from_ref(example), &[0]);
            let input = TaggerInput::<A>::from_batch(&batch, &device);
            let l = batch.context().len;
            let f = |scale: Vec<f32>| -> f64 {
                encoders::dropout::disabled(|| {
                    let scale = Tensor::<A, 3>::from_data(TensorData::new(scale, [1, l, 1]), &device);
                    let out = model.forward_embedded(model.embed(&input) * scale, &input, false).unwrap();
                    let lp =
                        model.log_prob_of(out.emissions, input.context().mask.clone(), std::slice::from_ref(&target));
                    f64::from(lp.into_scalar())
                })
            };
            assert!((f(vec![1.0; l]).exp() - probs[0]).abs() < 1e-6, "{kind:?}: P of the intact sentence");
            // Small enough that no ReLU of the feed-forward layers changes side.
            let eps = 1e-3f32;
            for t in 0..n {
                let at = |s: f32| (0..l).map(|i| if i == t { s } else { 1.0 }).collect::<Vec<f32>>();
                let fd = (f(at(1.0 + eps)) - f(at(1.0 - eps))) / (2.0 * f64::from(eps));
                assert!(
                    (fd - score[t]).abs() < 2e-3 + 2e-2 * score[t].abs(),
                    "{kind:?} token {t}: finite difference {fd}, gradient × input {}",
                    score[t]
                );
            }
        }
    }

    #[test]
    fn erasure_curves_start_at_the_inference_probability_and_meet_once_everything_is_erased() {
        let _rng = crate::testing::backend_rng();
        for kind in [EncoderKind::Attention, EncoderKind::Bilstm] {
            let (model, inference, vocabs, data) = tagger(kind);
            let device = Default::default();
            let options = Options { max_k: 20, items: 15, seed: 3 };
            let e = explain(&model, &inference, &vocabs, &data, &options, &device).unwrap();
            let methods = if kind == EncoderKind::Attention { 4 } else { 2 };
            assert_eq!(e.methods.len(), methods, "{kind:?}");
            assert!(!e.items.is_empty() && e.items.len() <= 15, "{kind:?}: {} items", e.items.len());
            for it in &e.items {
                // Dropout was off: the model's P is the inference path's.
                let intact = data[it.sentence].clone();
                let p = probabilities(&inference, &[(0, intact)], &[it.prediction.clone()], &device).unwrap()[0];
                assert!((p - it.prob).abs() < 1e-5, "{kind:?}: {p} vs {}", it.prob);
                assert_eq!(it.erased.len(), methods);
                for curve in &it.erased {
                    assert_eq!(curve.len(), 20);
                    assert!(curve.iter().all(|p| (0.0..=1.0).contains(p)), "{curve:?}");
                }
                // Every ranking erases the same tokens once it erases them all.
                if it.candidates <= 20 {
                    let all = it.erased[0][it.candidates - 1];
                    for curve in &it.erased {
                        assert!(
                            curve[it.candidates - 1..].iter().all(|p| (p - all).abs() < 1e-6),
                            "{kind:?}: {curve:?}"
                        );
                    }
                }
            }
            assert_eq!(explain(&model, &inference, &vocabs, &data, &options, &device).unwrap(), e, "same seed");
            // The files.
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), &e, "test").unwrap();
            let lines = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap().lines().count();
            assert_eq!(lines("items.csv"), 1 + e.items.len() * methods);
            assert_eq!(lines("curves.csv"), 1 + methods * 21);
            assert!(std::fs::read_to_string(dir.path().join("curves.svg")).unwrap().contains("<svg"));
            let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
            assert!(md.contains("| gradient − random |"), "{md}");
            assert_eq!(md.contains("| attention − gradient |"), kind == EncoderKind::Attention, "{md}");
        }
    }

    /// A QA reader explains its answer span: one per question, the
    /// question's tokens never erased (only the context's).
    #[test]
    fn a_reader_explains_its_answer_span() {
        let _rng = crate::testing::backend_rng();
        let (vocabs, data) = crate::testing::toy_qa_examples(6);
        let device = Default::default();
        let mut cfg = crate::testing::small_config(EncoderKind::Attention, 0.2);
        cfg.model.question = encoders::QuestionMode::Cross;
        cfg.model.decoder = encoders::DecoderKind::Pointer;
        cfg.model.features.cue_dim = 2;
        cfg.model.features.aligned_dim = 4;
        let model = build_model::<A>(&cfg, &vocabs, None, &device);
        let inference = model.valid();
        let e =
            explain(&model, &inference, &vocabs, &data, &Options { max_k: 3, items: 100, seed: 1 }, &device).unwrap();
        assert_eq!(e.items.len() + e.no_context, data.len());
        assert!(e.items.iter().all(|it| it.label == "answer" && it.prediction.tags.is_empty() && it.prob > 0.0));
        assert_eq!(e.methods.len(), 4, "the cross reader's context self-attention is ranked");
    }
}
