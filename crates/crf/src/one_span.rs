//! The one-span CRF: a linear-chain CRF over four states — before the
//! span ([`BEFORE`]), its first token ([`BEGIN`]), inside it ([`INSIDE`]),
//! after it ([`AFTER`]) — whose constraints admit exactly the paths with
//! one span: `BEFORE* BEGIN INSIDE* AFTER*`. Its normaliser sums over
//! single spans only, where a BIOES CRF's also counts paths with no span
//! or with several (extractive QA has exactly one answer).
//!
//! The score of span `i..=j` in a sentence of `n` tokens is a sum of
//! prefix sums, so [`span_log_probs`] gives every span's exact log
//! probability in `O(n × max_len)` on the host.

use crate::host::Scores;
use crate::Constraints;

pub const BEFORE: usize = 0;
pub const BEGIN: usize = 1;
pub const INSIDE: usize = 2;
pub const AFTER: usize = 3;
/// States of the one-span CRF.
pub const STATES: usize = 4;

/// The transitions that keep exactly one span.
pub fn constraints() -> Constraints {
    let mut trans = vec![vec![false; STATES]; STATES];
    for (from, to) in [
        (BEFORE, BEFORE),
        (BEFORE, BEGIN),
        (BEGIN, INSIDE),
        (BEGIN, AFTER),
        (INSIDE, INSIDE),
        (INSIDE, AFTER),
        (AFTER, AFTER),
    ] {
        trans[from][to] = true;
    }
    Constraints { trans, start: vec![true, true, false, false], end: vec![false, true, true, true] }
}

/// The state path of span `start..=end` in `n` tokens.
pub fn states(n: usize, start: usize, end: usize) -> Vec<usize> {
    (0..n)
        .map(|k| match k {
            k if k < start => BEFORE,
            k if k == start => BEGIN,
            k if k <= end => INSIDE,
            _ => AFTER,
        })
        .collect()
}

/// Every span `i..=j` of at most `max_len` tokens with its log probability
/// under the one-span CRF (`scores` its effective scores, `em` the
/// sentence's emissions `[n, 4]`), normalised over all single spans of any
/// length. Empty for an empty sentence.
pub fn span_log_probs(s: &Scores, em: &[f64], max_len: usize) -> Vec<(usize, usize, f64)> {
    let n = em.len() / STATES;
    if n == 0 {
        return Vec::new();
    }
    let tr = |a: usize, b: usize| s.trans[a * STATES + b];
    // Prefix sums of each state's emissions: cum[k][x] = Σ_{p<k} em[p][x].
    let mut cum = vec![[0.0f64; STATES]; n + 1];
    for p in 0..n {
        for x in 0..STATES {
            cum[p + 1][x] = cum[p][x] + em[p * STATES + x];
        }
    }
    // The emissions of state x summed over positions a..b.
    let sum = |x: usize, a: usize, b: usize| cum[b][x] - cum[a][x];
    // Before the span (positions 0..i), ending in the step into BEGIN at i.
    let head = |i: usize| {
        if i == 0 {
            s.start[BEGIN]
        } else {
            s.start[BEFORE] + sum(BEFORE, 0, i) + (i - 1) as f64 * tr(BEFORE, BEFORE) + tr(BEFORE, BEGIN)
        }
    };
    // After the span (positions j+1..n), from its last state `last`.
    let tail = |j: usize, last: usize| {
        if j + 1 == n {
            s.end[last]
        } else {
            tr(last, AFTER) + sum(AFTER, j + 1, n) + (n - j - 2) as f64 * tr(AFTER, AFTER) + s.end[AFTER]
        }
    };
    let score = |i: usize, j: usize| {
        let inside = if j > i {
            tr(BEGIN, INSIDE) + sum(INSIDE, i + 1, j + 1) + (j - i - 1) as f64 * tr(INSIDE, INSIDE)
        } else {
            0.0
        };
        head(i) + em[i * STATES + BEGIN] + inside + tail(j, if j > i { INSIDE } else { BEGIN })
    };
    // The normaliser over every single span, then the spans asked for.
    let all: Vec<f64> = (0..n).flat_map(|i| (i..n).map(move |j| (i, j))).map(|(i, j)| score(i, j)).collect();
    let m = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_z = m + all.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
    (0..n)
        .flat_map(|i| (i..n.min(i + max_len.max(1))).map(move |j| (i, j)))
        .map(|(i, j)| (i, j, score(i, j) - log_z))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Crf;
    use burn::backend::NdArray;
    use burn::prelude::*;
    use burn::tensor::TensorData;

    type B = NdArray<f64>;

    /// Every span's log probability equals its path's score minus the
    /// CRF's own log partition, and the spans' probabilities sum to one
    /// (the constraints admit nothing else), for every sentence length.
    #[test]
    fn span_log_probs_match_the_crf_by_enumeration() {
        let device = Default::default();
        let crf = Crf::<B>::new(&constraints(), 0.5, &device);
        let scores = crf.host_scores();
        for n in 1..=6 {
            let em = Tensor::<B, 3>::random([1, n, STATES], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
            let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(vec![true; n], [1, n]), &device);
            let host: Vec<f64> = em.clone().into_data().iter::<f64>().collect();
            let spans = span_log_probs(&scores, &host, n);
            assert_eq!(spans.len(), n * (n + 1) / 2);
            let total: f64 = spans.iter().map(|s| s.2.exp()).sum();
            assert!((total - 1.0).abs() < 1e-9, "n {n}: spans sum to {total}");
            let log_z = crf.log_partition(em.clone(), mask.clone()).into_scalar();
            for &(i, j, lp) in &spans {
                let path = states(n, i, j);
                assert!(constraints().path_allowed(&path));
                let tags = Tensor::<B, 2, Int>::from_data(
                    TensorData::new(path.iter().map(|&x| x as i64).collect::<Vec<_>>(), [1, n]),
                    &device,
                );
                let score = crf.path_score(em.clone(), tags, mask.clone()).into_scalar();
                assert!((score - log_z - lp).abs() < 1e-4, "n {n}, span {i}..={j}: {lp} vs {}", score - log_z);
            }
            // Shorter spans only: the same numbers, fewer of them.
            let short = span_log_probs(&scores, &host, 2);
            assert!(short.iter().all(|&(i, j, lp)| j - i < 2 && spans.contains(&(i, j, lp))));
        }
    }

    #[test]
    fn constraints_admit_exactly_the_single_spans() {
        let c = constraints();
        // All 4^4 paths of length 4: the allowed ones are the 10 spans.
        let mut allowed = 0;
        for code in 0..STATES.pow(4) {
            let path: Vec<usize> = (0..4).map(|k| code / STATES.pow(k) % STATES).collect();
            if c.path_allowed(&path) {
                allowed += 1;
                let start = path.iter().position(|&x| x == BEGIN).unwrap();
                let end = path.iter().rposition(|&x| x == BEGIN || x == INSIDE).unwrap();
                assert_eq!(path, states(4, start, end));
            }
        }
        assert_eq!(allowed, 10);
    }
}
