//! Attention analysis. Head diagnostics over a split: per layer and head, how spread
//! out the attention is (entropy), how much of it lands on boundaries (the
//! first and last real token, punctuation and separators), how far it
//! reaches, and how much the head duplicates another one. Heads that put
//! most of their attention on boundaries, or whose attention is one-hot or
//! uniform, are flagged as collapsed.
//!
//! A QA reader's attention on its question is diagnosed too, as layers of
//! their own: a cross reader's cross-attention (`attention = "cross"`),
//! and a concat reader's question block of its joint self-attention
//! (`"question"`: each context token's attention on the question's tokens
//! and the separator, renormalised to sum to 1). There the boundaries are
//! the question's first and last token, punctuation and the separator,
//! and a distance means nothing (NaN). A concat reader's self-attention
//! layers are its context block, renormalised likewise.

use crate::infer::{self, Request, Windows};
use anyhow::Result;
use corpus::Example;
use corpus::{Sentence, Tokenization, Vocabs};
use encoders::ops::SeqBackend;
use encoders::Tagger;
use serde::Serialize;
use std::path::Path;

/// A head is collapsed when this share of its attention or more is on boundary tokens…
pub const BOUNDARY_LIMIT: f64 = 0.5;
/// …or when its normalised entropy is at most this (one-hot) or at least 1 − this (uniform).
pub const ENTROPY_MARGIN: f64 = 0.05;
/// Sentences shorter than this leave the boundary share alone: their first
/// and last token are most of the sentence (a uniform head would score 2/L).
pub const MIN_BOUNDARY_LEN: usize = 4;
/// Sentences longer than this are left out of the diagnostics, which hold
/// every head's `[L, L]` weights.
pub const MAX_LEN: usize = 512;

/// Figures of one head, averaged over every real query token of the split.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadStats {
    pub layer: usize,
    pub head: usize,
    /// Mean entropy of a query's attention, divided by log(sentence length): 0 one-hot, 1 uniform.
    pub entropy: f64,
    /// Mean share of attention on the first and last real token and on punctuation/separators
    /// (over sentences of at least 4 tokens).
    pub boundary_share: f64,
    /// Mean |i − j| weighted by attention, in tokens.
    pub distance: f64,
    /// Mean Jensen–Shannon divergence (base 2, 0 … 1) to the most similar other head of the layer; 0 = a duplicate.
    pub redundancy: f64,
    pub collapsed: bool,
    /// Query tokens averaged over.
    pub queries: usize,
    /// Which attention: `self` (over the sentence or context), `cross` (a
    /// cross reader's, on the question) or `question` (a concat reader's
    /// question block).
    pub attention: &'static str,
}

/// True for tokens that are punctuation or separators (ASCII and CJK
/// punctuation, `[SEP]`-like markers).
pub fn is_boundary_token(token: &str) -> bool {
    const CJK: &str = "，。、；：？！「」『』（）《》〈〉【】“”‘’…—·～";
    token.starts_with('[') && token.ends_with(']') && token.len() > 2
        || !token.is_empty() && token.chars().all(|c| c.is_ascii_punctuation() || CJK.contains(c))
}

/// Running sums for every head of every layer.
pub struct HeadAccumulator {
    layers: usize,
    heads: usize,
    entropy: Vec<f64>,
    boundary: Vec<f64>,
    distance: Vec<f64>,
    /// `[layer][h][g]` summed JS divergence between heads h and g.
    js: Vec<f64>,
    /// Query rows counted for entropy (sentences of one token have no entropy).
    entropy_rows: Vec<usize>,
    /// Query rows counted for the boundary share.
    boundary_rows: Vec<usize>,
    rows: Vec<usize>,
    /// What [`HeadStats::attention`] says.
    attention: &'static str,
}

fn entropy(p: &[f64]) -> f64 {
    p.iter().filter(|&&x| x > 0.0).map(|&x| -x * x.ln()).sum()
}

/// Jensen–Shannon divergence in bits (0 … 1).
fn js_divergence(p: &[f64], q: &[f64]) -> f64 {
    let m: Vec<f64> = p.iter().zip(q).map(|(a, b)| 0.5 * (a + b)).collect();
    let kl = |x: &[f64]| -> f64 {
        x.iter().zip(&m).filter(|(a, _)| **a > 0.0).map(|(a, mm)| a * (a / mm).ln()).sum::<f64>()
    };
    ((0.5 * kl(p) + 0.5 * kl(q)) / std::f64::consts::LN_2).clamp(0.0, 1.0)
}

impl HeadAccumulator {
    /// For the self-attention of `layers` layers of `heads` heads.
    pub fn new(layers: usize, heads: usize) -> Self {
        Self::of("self", layers, heads)
    }

    /// For attention of the kind `attention` names (see [`HeadStats::attention`]).
    pub fn of(attention: &'static str, layers: usize, heads: usize) -> Self {
        let n = layers * heads;
        HeadAccumulator {
            attention,
            layers,
            heads,
            entropy: vec![0.0; n],
            boundary: vec![0.0; n],
            distance: vec![0.0; n],
            js: vec![0.0; n * heads],
            entropy_rows: vec![0; n],
            boundary_rows: vec![0; n],
            rows: vec![0; n],
        }
    }

    /// Adds one sentence of one layer: `weights` holds `[H, lp, lp]` (a
    /// padded length `lp`), of which the first `boundary.len()` rows and
    /// columns are real; `boundary[j]` marks boundary tokens other than the
    /// first and last, which always count.
    pub fn add(&mut self, layer: usize, weights: &[f32], lp: usize, boundary: &[bool]) {
        self.add_block(layer, weights, [boundary.len(), lp, lp], boundary);
    }

    /// Adds one sentence of one layer: `weights` holds `[H, rp, cp]` of
    /// which the first `rows` rows and `boundary.len()` columns are real
    /// (`[rows, rp, cp]` = `shape`); `boundary` marks the columns' boundary
    /// tokens as in [`Self::add`].
    pub fn add_block(&mut self, layer: usize, weights: &[f32], shape: [usize; 3], boundary: &[bool]) {
        let [rows, rp, cp] = shape;
        let len = boundary.len();
        if len == 0 {
            return;
        }
        let row = |h: usize, i: usize| -> Vec<f64> {
            let at = (h * rp + i) * cp;
            let r: Vec<f64> = weights[at..at + len].iter().map(|&x| x.max(0.0) as f64).collect();
            let s: f64 = r.iter().sum();
            if s > 0.0 {
                r.into_iter().map(|x| x / s).collect()
            } else {
                r
            }
        };
        let is_boundary = |j: usize| j == 0 || j + 1 == len || boundary[j];
        for i in 0..rows {
            let rows: Vec<Vec<f64>> = (0..self.heads).map(|h| row(h, i)).collect();
            for (h, p) in rows.iter().enumerate() {
                let k = layer * self.heads + h;
                if len > 1 {
                    self.entropy[k] += entropy(p) / (len as f64).ln();
                    self.entropy_rows[k] += 1;
                }
                if len >= MIN_BOUNDARY_LEN {
                    self.boundary[k] +=
                        p.iter().enumerate().filter(|(j, _)| is_boundary(*j)).map(|(_, x)| x).sum::<f64>();
                    self.boundary_rows[k] += 1;
                }
                self.distance[k] += p.iter().enumerate().map(|(j, x)| x * i.abs_diff(j) as f64).sum::<f64>();
                self.rows[k] += 1;
                for (g, q) in rows.iter().enumerate().skip(h + 1) {
                    let d = js_divergence(p, q);
                    self.js[k * self.heads + g] += d;
                    self.js[(layer * self.heads + g) * self.heads + h] += d;
                }
            }
        }
    }

    pub fn finish(&self) -> Vec<HeadStats> {
        let mut out = Vec::new();
        for layer in 0..self.layers {
            for head in 0..self.heads {
                let k = layer * self.heads + head;
                let n = self.rows[k].max(1) as f64;
                let entropy =
                    if self.entropy_rows[k] > 0 { self.entropy[k] / self.entropy_rows[k] as f64 } else { 0.0 };
                let redundancy = (0..self.heads)
                    .filter(|&g| g != head)
                    .map(|g| self.js[k * self.heads + g] / n)
                    .fold(f64::INFINITY, f64::min);
                let boundary_share = self.boundary[k] / self.boundary_rows[k].max(1) as f64;
                out.push(HeadStats {
                    layer,
                    head,
                    entropy,
                    boundary_share,
                    distance: if self.attention == "self" { self.distance[k] / n } else { f64::NAN },
                    redundancy: if redundancy.is_finite() { redundancy } else { 1.0 },
                    collapsed: boundary_share > BOUNDARY_LIMIT
                        || entropy <= ENTROPY_MARGIN
                        || entropy >= 1.0 - ENTROPY_MARGIN,
                    queries: self.rows[k],
                    attention: self.attention,
                });
            }
        }
        out
    }
}

/// Sentences tagged per call of the inference path: their attention maps
/// are held until they are added up.
const CHUNK: usize = 512;

/// Runs `model` over `data` (the encoded `sentences`; sentences over
/// [`MAX_LEN`] tokens are skipped) through the inference path and returns
/// the diagnostics of every head; empty for models without attention. An
/// error when the examples do not fit the tagger's question mode.
pub fn diagnose<B: SeqBackend>(
    model: &Tagger<B>,
    vocabs: &Vocabs,
    sentences: &[Sentence],
    data: &[Example],
    device: &B::Device,
) -> Result<Vec<HeadStats>> {
    let kept: Vec<usize> = (0..data.len()).filter(|&i| data[i].len() <= MAX_LEN).collect();
    let (mut acc, mut on_question): (Option<HeadAccumulator>, Option<HeadAccumulator>) = (None, None);
    let request = Request::tagging(Windows::NONE).with_attention();
    for ids in kept.chunks(CHUNK) {
        let chunk: Vec<Example> = ids.iter().map(|&i| data[i].clone()).collect();
        for (&i, tagged) in ids.iter().zip(infer::tag(model, vocabs, &chunk, &request, device)?.tagged) {
            let Some(a) = tagged.attention else { continue };
            let acc = acc.get_or_insert_with(|| HeadAccumulator::new(a.layers.len(), a.heads));
            let boundary: Vec<bool> = sentences[i].tokens.iter().map(|t| is_boundary_token(t)).collect();
            for (layer, w) in a.layers.iter().enumerate() {
                acc.add(layer, w, a.len, &boundary[..a.len.min(boundary.len())]);
            }
            let (Some(q), Example::Asked { question, .. }) = (&a.question, &data[i]) else { continue };
            let kind = if q.joint { "question" } else { "cross" };
            let acc = on_question.get_or_insert_with(|| HeadAccumulator::of(kind, q.layers.len(), a.heads));
            // The question's words are ids here: its punctuation by the vocabulary's spelling.
            let mut boundary: Vec<bool> =
                question.words.iter().map(|&w| is_boundary_token(vocabs.words.item(w))).collect();
            boundary.truncate(q.len);
            boundary.resize(q.columns(), true); // a concat reader's separator
            for (layer, w) in q.layers.iter().enumerate() {
                acc.add_block(layer, w, [a.len, a.len, q.columns()], &boundary);
            }
        }
    }
    let mut stats = acc.map(|a| a.finish()).unwrap_or_default();
    stats.extend(on_question.map(|a| a.finish()).unwrap_or_default());
    Ok(stats)
}

/// One layer's heads in summary: how many, how many collapsed, and the
/// means of their diagnostics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerSummary {
    pub attention: &'static str,
    pub layer: usize,
    pub heads: usize,
    pub collapsed: usize,
    pub entropy: f64,
    pub boundary_share: f64,
    pub distance: f64,
    pub redundancy: f64,
}

/// The per-layer summaries of `stats`, in layer order.
pub fn layer_summaries(stats: &[HeadStats]) -> Vec<LayerSummary> {
    let mut layers: Vec<(&'static str, usize)> = stats.iter().map(|s| (s.attention, s.layer)).collect();
    layers.dedup();
    layers
        .into_iter()
        .map(|(attention, layer)| {
            let of: Vec<&HeadStats> = stats.iter().filter(|s| (s.attention, s.layer) == (attention, layer)).collect();
            let mean = |f: fn(&HeadStats) -> f64| of.iter().map(|s| f(s)).sum::<f64>() / of.len() as f64;
            LayerSummary {
                attention,
                layer,
                heads: of.len(),
                collapsed: of.iter().filter(|s| s.collapsed).count(),
                entropy: mean(|s| s.entropy),
                boundary_share: mean(|s| s.boundary_share),
                distance: mean(|s| s.distance),
                redundancy: mean(|s| s.redundancy),
            }
        })
        .collect()
}

/// What the head sweep measured on one dataset at one training-set size
/// (`experiments/heads-sweep-d512.md` for Resume NER,
/// `experiments/heads-sweep-conll-d512.md` for CoNLL-2003: the
/// attention-CRF at d_model 512, no attention dropout, 3 seeds a cell):
/// means over seeds.
pub struct SweepFinding {
    pub dataset: &'static str,
    /// Characters (Resume NER) or words (CoNLL-2003).
    pub tokens: Tokenization,
    pub sentences: usize,
    /// Heads flagged as collapsed with 8 × 64 heads, of 16.
    pub collapsed_8x64: f64,
    /// First epoch within 95 % of the best dev F1: 8 × 64, then 4 × 128.
    pub epoch_95: [f64; 2],
    /// Test F1: 8 × 64, then 4 × 128.
    pub test_f1: [f64; 2],
    /// Where the cells are.
    pub table: &'static str,
}

const RESUME: (&str, Tokenization, &str) = ("Resume NER", Tokenization::Chars, "experiments/heads-sweep-d512.md");

/// The sweep's cells so far (see [`SweepFinding`]).
pub const SWEEP_FINDINGS: &[SweepFinding] = &[
    SweepFinding {
        dataset: RESUME.0,
        tokens: RESUME.1,
        sentences: 300,
        collapsed_8x64: 0.3,
        epoch_95: [8.0, 9.3],
        test_f1: [0.8509, 0.8436],
        table: RESUME.2,
    },
    SweepFinding {
        dataset: RESUME.0,
        tokens: RESUME.1,
        sentences: 1000,
        collapsed_8x64: 0.0,
        epoch_95: [5.0, 5.0],
        test_f1: [0.8947, 0.8952],
        table: RESUME.2,
    },
    SweepFinding {
        dataset: RESUME.0,
        tokens: RESUME.1,
        sentences: 3821,
        collapsed_8x64: 0.0,
        epoch_95: [3.3, 3.3],
        test_f1: [0.9259, 0.9264],
        table: RESUME.2,
    },
    SweepFinding {
        dataset: "CoNLL-2003",
        tokens: Tokenization::Words,
        sentences: 1000,
        collapsed_8x64: 0.0,
        epoch_95: [11.3, 11.7],
        test_f1: [0.6250, 0.6317],
        table: "experiments/heads-sweep-conll-d512.md",
    },
];

/// What the sweep measured nearest to a run trained on `sentences`
/// sentences of `tokens` (on data of the same kind when the sweep has
/// some, then nearest in size by ratio; the smallest measured size when
/// the size is unknown).
pub fn measured_advice(sentences: Option<usize>, tokens: Tokenization) -> Option<String> {
    let distance = |f: &SweepFinding| {
        let size = sentences.map_or(0.0, |n| (n.max(1) as f64 / f.sentences as f64).ln().abs());
        (f.tokens != tokens, size)
    };
    let f = SWEEP_FINDINGS.iter().min_by(|a, b| {
        let (da, db) = (distance(a), distance(b));
        da.0.cmp(&db.0).then(da.1.total_cmp(&db.1))
    })?;
    let [e8, e4] = f.epoch_95;
    let [f8, f4] = f.test_f1;
    let faster = if e4 < e8 {
        format!("4 × 128 reached 95 % of its best dev F1 {:.1} epochs sooner", e8 - e4)
    } else {
        format!("4 × 128 did not converge faster (95 % of its best dev F1 at epoch {e4:.1}, 8 × 64 at {e8:.1})")
    };
    Some(format!(
        "the head sweep measured, with {} training sentences ({}, d_model 512, 3 seeds): 8 × 64 heads collapsed {:.1} of 16 on average, {faster}, test F1 {f4:.4} against {f8:.4} ({})",
        f.sentences, f.dataset, f.collapsed_8x64, f.table
    ))
}

/// The heads of `stats` flagged as collapsed, if half of them or more are:
/// how many, in which layers, and what the head sweep measured on data of
/// the kind (`tokens`) and nearest size to the `sentences` the
/// model was trained on.
pub fn collapse_warning(stats: &[HeadStats], sentences: Option<usize>, tokens: Tokenization) -> Option<String> {
    let flagged = stats.iter().filter(|s| s.collapsed).count();
    let per_layer: Vec<String> = layer_summaries(stats)
        .iter()
        .filter(|l| l.collapsed > 0)
        .map(|l| {
            let kind = if l.attention == "self" { String::new() } else { format!("{} ", l.attention) };
            format!("{kind}layer {}: {} of {}", l.layer, l.collapsed, l.heads)
        })
        .collect();
    (!stats.is_empty() && 2 * flagged >= stats.len()).then(|| {
        let advice = measured_advice(sentences, tokens).map(|a| format!("; {a}")).unwrap_or_default();
        format!(
            "{flagged} of {} attention heads look collapsed ({}; boundary share > {BOUNDARY_LIMIT}, or entropy near 0 or 1) — see `seqlab heads`; fewer, wider heads (a smaller model.encoder.attention.heads at the same d_model) and attention dropout are the usual remedies{advice}",
            stats.len(),
            per_layer.join(", ")
        )
    })
}

/// The table `seqlab heads` prints.
pub fn table(stats: &[HeadStats]) -> String {
    let mut s = format!(
        "{:>9} {:>5} {:>4} {:>8} {:>9} {:>9} {:>10}  {}\n",
        "attention", "layer", "head", "entropy", "boundary", "distance", "redundancy", "flag"
    );
    for h in stats {
        s += &format!(
            "{:>9} {:>5} {:>4} {:>8.3} {:>9.3} {:>9.2} {:>10.3}  {}\n",
            h.attention,
            h.layer,
            h.head,
            h.entropy,
            h.boundary_share,
            h.distance,
            h.redundancy,
            if h.collapsed { "collapsed" } else { "" }
        );
    }
    s
}

/// `heads.csv`: one row per head.
pub fn write_heads_csv(path: &Path, stats: &[HeadStats]) -> Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for h in stats {
        w.serialize(h)?;
    }
    corpus::io::write_atomic(path, w.into_inner()?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[H, L, L]` weights from one row pattern per head.
    fn weights(heads: &[fn(usize, usize, usize) -> f32], l: usize) -> Vec<f32> {
        heads.iter().flat_map(|f| (0..l).flat_map(move |i| (0..l).map(move |j| f(i, j, l)))).collect()
    }

    fn stats(heads: &[fn(usize, usize, usize) -> f32], l: usize) -> Vec<HeadStats> {
        let mut acc = HeadAccumulator::new(1, heads.len());
        acc.add(0, &weights(heads, l), l, &vec![false; l]);
        acc.finish()
    }

    #[test]
    fn uniform_attention_has_entropy_one_and_is_flagged() {
        let s = stats(&[|_, _, l| 1.0 / l as f32, |i, j, _| f32::from(i == j)], 8);
        assert!((s[0].entropy - 1.0).abs() < 1e-9, "{:?}", s[0]);
        assert!(s[0].collapsed);
        // Attending to itself: entropy 0, distance 0 (one-hot is flagged too).
        assert!(s[1].entropy.abs() < 1e-12 && s[1].distance == 0.0 && s[1].collapsed, "{:?}", s[1]);
        // Uniform over 8: boundary share = 2/8, mean distance = mean |i − j|.
        assert!((s[0].boundary_share - 0.25).abs() < 1e-9);
        let mean_d: f64 =
            (0..8).flat_map(|i: usize| (0..8).map(move |j: usize| i.abs_diff(j) as f64)).sum::<f64>() / 64.0;
        assert!((s[0].distance - mean_d).abs() < 1e-9);
    }

    #[test]
    fn one_hot_on_the_first_token_is_all_boundary() {
        let s = stats(&[|_, j, _| f32::from(j == 0), |i, j, l| f32::from(j == (i + 1) % l)], 6);
        assert!((s[0].boundary_share - 1.0).abs() < 1e-12 && s[0].collapsed);
        // The shifted head looks at a boundary only from the rows next to them.
        assert!(s[1].boundary_share < 0.5);
    }

    #[test]
    fn identical_heads_are_redundant_and_different_heads_are_not() {
        let s = stats(&[|i, j, _| f32::from(i == j), |i, j, _| f32::from(i == j), |_, j, _| f32::from(j == 0)], 5);
        assert!(s[0].redundancy.abs() < 1e-12 && s[1].redundancy.abs() < 1e-12, "{s:?}");
        // Disjoint one-hot rows differ by 1 bit except on row 0, where they agree.
        assert!((s[2].redundancy - 0.8).abs() < 1e-9, "{:?}", s[2]);
    }

    #[test]
    fn padding_and_punctuation() {
        // A sentence of 4 real tokens in a padded length of 6, weights on padding ignored.
        let l = 6;
        let w: Vec<f32> = (0..l).flat_map(|_| (0..l).map(|j| if j < 4 { 0.25 } else { 9.0 })).collect();
        let mut acc = HeadAccumulator::new(1, 1);
        acc.add(0, &w, l, &[false, true, false, false]);
        let s = &acc.finish()[0];
        assert_eq!(s.queries, 4);
        assert!((s.entropy - 1.0).abs() < 1e-9);
        assert!((s.boundary_share - 0.75).abs() < 1e-9, "{s:?}");
        assert!(is_boundary_token(",") && is_boundary_token("。") && is_boundary_token("[SEP]"));
        assert!(!is_boundary_token("Paris") && !is_boundary_token("人工智能") && !is_boundary_token("U.S."));
    }

    /// Attention on a question: rows are context tokens, columns question
    /// tokens; its last token (say "?") is a boundary.
    #[test]
    fn attention_on_the_question_is_diagnosed_by_its_columns() {
        // 3 context rows padded to 4, 5 question columns; head 0 all on the
        // last column, head 1 uniform over the 5.
        let (rows, rp, cp, heads) = (3, 4, 5, 2);
        let mut w = vec![0.0f32; heads * rp * cp];
        for i in 0..rows {
            w[i * cp + cp - 1] = 1.0;
            for j in 0..cp {
                w[(rp + i) * cp + j] = 0.2;
            }
        }
        let mut acc = HeadAccumulator::of("cross", 1, heads);
        acc.add_block(0, &w, [rows, rp, cp], &[false; 5]);
        let s = acc.finish();
        assert_eq!((s[0].attention, s[0].queries), ("cross", 3));
        assert!((s[0].boundary_share - 1.0).abs() < 1e-12 && s[0].collapsed && s[0].distance.is_nan(), "{:?}", s[0]);
        assert!((s[1].boundary_share - 0.4).abs() < 1e-9 && (s[1].entropy - 1.0).abs() < 1e-9, "{:?}", s[1]);
        let l = layer_summaries(&s);
        assert_eq!((l[0].attention, l[0].heads, l[0].collapsed), ("cross", 2, 2));
        let w = collapse_warning(&s, Some(300), Tokenization::Chars).unwrap();
        assert!(w.starts_with("2 of 2 attention heads look collapsed (cross layer 0: 2 of 2;"), "{w}");
    }

    #[test]
    fn warning_when_half_collapse() {
        let mk = |collapsed| HeadStats {
            layer: 0,
            head: 0,
            entropy: 0.5,
            boundary_share: 0.1,
            distance: 1.0,
            redundancy: 0.5,
            collapsed,
            queries: 1,
            attention: "self",
        };
        let w = collapse_warning(&[mk(true), mk(false)], None, Tokenization::Chars).unwrap();
        assert!(w.starts_with("1 of 2 attention heads look collapsed (layer 0: 1 of 2;"), "{w}");
        let layered = |layer, collapsed| HeadStats { layer, ..mk(collapsed) };
        let stats = [layered(0, true), layered(0, false), layered(1, true), layered(1, true)];
        let w = collapse_warning(&stats, Some(1500), Tokenization::Chars).unwrap();
        assert!(w.starts_with("3 of 4 attention heads look collapsed (layer 0: 1 of 2, layer 1: 2 of 2;"), "{w}");
        // The sweep's measurement nearest in size (by ratio): 1,500 sentences
        // is nearer 1,000 than 3,821 (the whole Resume training set), 500
        // nearer 300 than 1,000, and 5,000 nearest the whole set.
        assert!(w.contains("with 1000 training sentences") && w.contains("collapsed 0.0 of 16"), "{w}");
        assert!(w.contains("at epoch 5.0, 8 × 64 at 5.0)") && w.contains("test F1 0.8952 against 0.8947"), "{w}");
        let w = collapse_warning(&stats, Some(5000), Tokenization::Chars).unwrap();
        assert!(w.contains("with 3821 training sentences") && w.contains("collapsed 0.0 of 16"), "{w}");
        assert!(w.contains("at epoch 3.3, 8 × 64 at 3.3)") && w.contains("test F1 0.9264 against 0.9259"), "{w}");
        let w = collapse_warning(&stats, Some(500), Tokenization::Chars).unwrap();
        assert!(w.contains("with 300 training sentences") && w.contains("collapsed 0.3 of 16"), "{w}");
        assert!(
            w.contains("4 × 128 did not converge faster (95 % of its best dev F1 at epoch 9.3, 8 × 64 at 8.0)"),
            "{w}"
        );
        // Words: the sweep on CoNLL-2003, whatever the size.
        for n in [Some(300), Some(5000), None] {
            let w = collapse_warning(&stats, n, Tokenization::Words).unwrap();
            assert!(w.contains("with 1000 training sentences (CoNLL-2003, d_model 512, 3 seeds)"), "{w}");
            assert!(w.contains("(95 % of its best dev F1 at epoch 11.7, 8 × 64 at 11.3)"), "{w}");
            assert!(w.contains("test F1 0.6317 against 0.6250 (experiments/heads-sweep-conll-d512.md)"), "{w}");
        }
        let w = collapse_warning(&stats, Some(300), Tokenization::Chars).unwrap();
        assert!(
            w.contains("(Resume NER, d_model 512, 3 seeds)") && w.ends_with("(experiments/heads-sweep-d512.md)"),
            "{w}"
        );
        let l = layer_summaries(&stats);
        assert_eq!((l.len(), l[1].layer, l[1].heads, l[1].collapsed), (2, 1, 2, 2));
        assert!((l[0].entropy - 0.5).abs() < 1e-12 && (l[0].boundary_share - 0.1).abs() < 1e-12);
        assert!(collapse_warning(&[mk(true), mk(false), mk(false)], None, Tokenization::Chars).is_none());
        assert!(collapse_warning(&[], None, Tokenization::Chars).is_none());
    }
}
