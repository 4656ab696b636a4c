//! Memory: measuring a process's peak (Linux `/proc/self`), and estimating
//! the peak of a training step before it runs, to pick a batch size (or an
//! attention implementation) that fits a budget.

use crate::setup::config::RunConfig;
use anyhow::{bail, Context, Result};
use encoders::attention::AttentionImpl;
use encoders::EncoderKind;

/// Current resident set and its peak since start (or the last reset), bytes.
pub fn rss() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets the peak resident set to the current one (Linux ≥ 4.0).
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Parses `8GiB`, `512MiB`, `2G`, `1000000` (bytes).
pub fn parse_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().with_context(|| format!("`{s}`: expected a size such as 8GiB or 512MiB"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0f64.powi(4),
        other => bail!("`{s}`: unknown unit `{other}` (use B, KiB, MiB, GiB)"),
    };
    Ok((n * mult) as u64)
}

pub fn human(bytes: f64) -> String {
    let gib = 1024.0 * 1024.0 * 1024.0;
    if bytes >= gib {
        format!("{:.2} GiB", bytes / gib)
    } else {
        format!("{:.0} MiB", bytes / (1024.0 * 1024.0))
    }
}

/// The shape of one training step.
#[derive(Clone, Copy, Debug)]
pub struct StepShape {
    /// Sentences in the batch.
    pub batch: usize,
    /// Padded length.
    pub len: usize,
    /// Longest word in characters (character CNN input).
    pub word_len: usize,
    /// Model parameters.
    pub params: usize,
    pub tags: usize,
    /// How many parts the training step cuts a batch of this many sentences
    /// into (`SeqBackend::train_shards`): each part holds a gradient of
    /// every parameter until they are summed.
    pub parts: fn(usize) -> usize,
}

/// Estimated peak bytes of one training step (the one `seqlab train` runs:
/// forward and backward in parts, Adam) beyond what the process held
/// before it. The tagger counts the floats it keeps alive per group
/// ([`encoders::footprint`]); the coefficients in front of the groups were
/// fitted (non-negative least squares on the relative error, then raised by
/// 25% so that no measured peak exceeds its estimate by more than a
/// quarter) to 37 peaks measured with `seqlab bench memory` on burn-flex
/// (`benchmarks/planner-fit.sh`): BiLSTM-CRF and attention-CRF (dense,
/// chunked, local, relative) at batch 8 and 32 × L 32, 128, 512, and wider
/// models (d_model 512 with 8 heads; hidden 100) at batch 4 to 64 × L 64 to
/// 2048. Every one lies within −38% … +25% of its estimate (experiments/long-sequences.md).
pub fn estimate(cfg: &RunConfig, s: StepShape) -> f64 {
    const F: f64 = 4.0; // bytes per f32
    /// Parameters: values, the summed gradient, Adam's two moments, the step's temporaries.
    const PER_PARAM: f64 = 5.904;
    /// Each part's own gradient of every parameter.
    const PER_PART: f64 = 1.866;
    const RECURRENT: f64 = 0.4997;
    const ATTENTION: f64 = 0.7976;
    const SCORES: f64 = 0.4390;
    let shape = encoders::footprint::StepShape { batch: s.batch, len: s.len, word_len: s.word_len, tags: s.tags };
    let g = cfg.model.step_floats(shape);
    let params = s.params as f64 * (PER_PARAM + PER_PART * (s.parts)(s.batch) as f64);
    F * (params + RECURRENT * g.recurrent + ATTENTION * g.attention + SCORES * g.scores)
}

/// What the planner chose.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Sentences per batch at the longest training length.
    pub batch: usize,
    pub implementation: AttentionImpl,
    pub estimate: f64,
    pub message: String,
}

/// Picks the largest batch, up to the configured one, whose training step
/// at the longest training sequence (`shape.len`) fits in `budget` bytes on
/// top of `baseline` (what the process holds already). Dense self-attention
/// that does not fit at the configured batch switches to chunked attention
/// when that allows a larger batch (not with relative positions, which
/// chunked attention does not support). Applies the choice to `cfg`.
pub fn plan(cfg: &mut RunConfig, budget: u64, baseline: u64, shape: StepShape) -> Result<Decision> {
    let configured = if cfg.train.batch_tokens > 0 {
        (cfg.train.batch_tokens / shape.len.max(1)).max(1)
    } else {
        cfg.train.batch_size.max(1)
    };
    let room = budget as f64 - baseline as f64;
    let a = &cfg.model.encoder.attention;
    let current = a.implementation;
    let mut options = vec![current];
    if cfg.model.encoder.kind == EncoderKind::Attention
        && current == AttentionImpl::Dense
        && !a.position.biases_scores()
    {
        options.push(AttentionImpl::Chunked);
    }
    // The largest batch that fits for each implementation (estimates grow with the batch).
    let mut best: Option<(usize, AttentionImpl, f64)> = None;
    for &imp in &options {
        let mut c = cfg.clone();
        c.model.encoder.attention.implementation = imp;
        let est = |b: usize| estimate(&c, StepShape { batch: b, ..shape });
        let (mut lo, mut hi) = (0usize, configured);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if est(mid) <= room {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        if lo > 0 && best.is_none_or(|(b, _, _)| lo > b) {
            best = Some((lo, imp, est(lo)));
        }
    }
    let at1 = estimate(cfg, StepShape { batch: 1, ..shape });
    let Some((batch, imp, est)) = best else {
        bail!(
            "a training step does not fit in {}: at batch 1 and the longest training sequence ({} tokens) it needs about {} on top of the {} this process holds; raise --max-memory, or set data.max_len to tag long sequences in windows{}",
            human(budget as f64),
            shape.len,
            human(at1),
            human(baseline as f64),
            if cfg.model.encoder.kind == EncoderKind::Attention { ", or use attention impl = \"chunked\" or \"local\"" } else { "" }
        );
    };
    let mut what = Vec::new();
    if batch < configured {
        what.push(format!("batch {batch} instead of {configured}"));
    }
    if imp != current {
        what.push(format!("chunked attention instead of {current:?}").to_lowercase());
    }
    let choice = if what.is_empty() { "keeping the configured settings".to_string() } else { what.join(", ") };
    let message = format!(
        "memory plan for {}: {choice}: a training step at the longest sequence ({} tokens) needs about {} (+{} held already)",
        human(budget as f64),
        shape.len,
        human(est),
        human(baseline as f64)
    );
    if cfg.train.batch_tokens > 0 {
        if batch < configured {
            cfg.train.batch_tokens = batch * shape.len.max(1);
        }
    } else {
        cfg.train.batch_size = batch;
    }
    cfg.model.encoder.attention.implementation = imp;
    Ok(Decision { batch, implementation: imp, estimate: est, message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoders::positional::Position;

    /// The CPU backends' parts (`SeqBackend::train_shards`).
    fn cpu_parts(sentences: usize) -> usize {
        (sentences / 16).max(1)
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_bytes("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        assert!(parse_bytes("8 parsecs").is_err());
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn dense_attention_grows_quadratically_chunked_linearly() {
        let mut cfg = RunConfig::default();
        cfg.model.encoder.kind = EncoderKind::Attention;
        let shape = |len| StepShape { batch: 8, len, word_len: 8, params: 1_000_000, tags: 17, parts: cpu_parts };
        let ratio = |cfg: &RunConfig| estimate(cfg, shape(2048)) / estimate(cfg, shape(1024));
        assert!(ratio(&cfg) > 3.0);
        cfg.model.encoder.attention.implementation = AttentionImpl::Chunked;
        assert!(ratio(&cfg) < 2.2);
    }

    fn attention_cfg(batch: usize) -> RunConfig {
        let mut cfg = RunConfig::default();
        cfg.model.encoder.kind = EncoderKind::Attention;
        cfg.model.encoder.attention.heads = 8;
        cfg.model.encoder.attention.d_model = 512;
        cfg.train.batch_size = batch;
        cfg
    }

    #[test]
    fn planner_keeps_what_fits_and_shrinks_or_switches_what_does_not() {
        let shape = StepShape { batch: 0, len: 512, word_len: 10, params: 5_000_000, tags: 17, parts: cpu_parts };
        let dense = |b| {
            let mut c = attention_cfg(b);
            c.model.encoder.attention.implementation = AttentionImpl::Dense;
            estimate(&c, StepShape { batch: b, ..shape })
        };
        // A generous budget keeps the configuration.
        let mut cfg = attention_cfg(32);
        let d = plan(&mut cfg, (dense(32) * 1.5) as u64, 0, shape).unwrap();
        assert_eq!((d.batch, cfg.train.batch_size), (32, 32));
        assert_eq!(cfg.model.encoder.attention.implementation, AttentionImpl::Dense);
        assert!(d.message.contains("keeping"), "{}", d.message);
        // Between dense's need at 16 and at 32: chunked fits 32, so it switches.
        let mut cfg = attention_cfg(32);
        let budget = (dense(16) + dense(32)) / 2.0;
        let d = plan(&mut cfg, budget as u64, 0, shape).unwrap();
        assert_eq!(cfg.model.encoder.attention.implementation, AttentionImpl::Chunked, "{}", d.message);
        assert!(d.estimate <= budget && d.message.contains("chunked"), "{}", d.message);
        // Relative positions cannot switch: the batch shrinks to the largest that fits.
        let mut cfg = attention_cfg(32);
        cfg.model.encoder.attention.position = Position::Relative;
        let d = plan(&mut cfg, budget as u64, 0, shape).unwrap();
        let fits = |b: usize| estimate(&cfg, StepShape { batch: b, ..shape }) <= budget;
        assert!(d.batch < 32 && fits(d.batch) && !fits(d.batch + 1), "{}", d.message);
        assert_eq!(cfg.train.batch_size, d.batch);
        assert!(d.message.contains(&format!("batch {} instead of 32", d.batch)), "{}", d.message);
        // Nothing fits: a clear error, not a silent batch of 0.
        let mut cfg = attention_cfg(32);
        let e = plan(&mut cfg, 1 << 20, 0, shape).unwrap_err().to_string();
        assert!(e.contains("does not fit") && e.contains("--max-memory"), "{e}");
    }

    #[test]
    fn peak_memory_is_readable_here() {
        // CI and development run on Linux, where /proc gives both figures.
        let (now, peak) = rss().expect("/proc/self/status has VmRSS and VmHWM");
        assert!(now > 0 && peak >= now);
    }
}
