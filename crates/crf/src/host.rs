//! The CRF's recursions for one sentence, in plain Rust on f64: Viterbi and
//! the forward-backward algorithm (log Z, unary and pairwise marginals).
//!
//! Both walk the sentence position by position over `T × T` transition
//! scores. As tensor operations that is a chain of `L` tiny kernels per
//! batch (slice, broadcast add, log-sum-exp, mask) whose launch and copy
//! costs dwarf the arithmetic; on the host the same recursion is a few
//! hundred thousand multiply-adds per batch. [`crate::Crf`] copies the
//! emissions to the host once per batch and runs these; its gradient comes
//! from the marginals (the derivative of log Z), so no backward pass through
//! the recursion is needed.
//!
//! Notation: `em` is the sentence's emissions, row-major `[n, T]`;
//! [`Scores::trans`] is `[from * T + to]`.

/// A CRF's effective scores (forbidden transitions included as large
/// negative numbers), copied to the host.
#[derive(Clone, Debug)]
pub struct Scores {
    pub t: usize,
    /// `[T * T]`, `trans[from * T + to]`.
    pub trans: Vec<f64>,
    /// `[T]`.
    pub start: Vec<f64>,
    /// `[T]`.
    pub end: Vec<f64>,
    /// `exp(trans)`, for the forward-backward sums.
    exp_trans: Vec<f64>,
}

impl Scores {
    pub fn new(t: usize, trans: Vec<f64>, start: Vec<f64>, end: Vec<f64>) -> Self {
        assert!(trans.len() == t * t && start.len() == t && end.len() == t, "CRF scores of {t} tags");
        let exp_trans = trans.iter().map(|x| x.exp()).collect();
        Scores { t, trans, start, end, exp_trans }
    }
}

/// The best path of one sentence of `n = em.len() / T` positions (empty
/// for `n = 0`); ties go to the lower tag index.
pub fn viterbi(s: &Scores, em: &[f64]) -> Vec<usize> {
    let t = s.t;
    let n = em.len() / t;
    if n == 0 {
        return Vec::new();
    }
    // score[j]: best score of a prefix ending in tag j at the current position.
    let mut score: Vec<f64> = (0..t).map(|j| s.start[j] + em[j]).collect();
    let mut next = vec![0.0; t];
    // back[(i - 1) * T + j]: the best predecessor of tag j at position i.
    let mut back = vec![0usize; (n - 1) * t];
    for i in 1..n {
        for j in 0..t {
            let (mut best, mut arg) = (f64::NEG_INFINITY, 0);
            for (from, &sc) in score.iter().enumerate() {
                let v = sc + s.trans[from * t + j];
                if v > best {
                    (best, arg) = (v, from);
                }
            }
            next[j] = best + em[i * t + j];
            back[(i - 1) * t + j] = arg;
        }
        std::mem::swap(&mut score, &mut next);
    }
    let mut tag = argmax((0..t).map(|j| score[j] + s.end[j]));
    let mut path = vec![0; n];
    path[n - 1] = tag;
    for i in (1..n).rev() {
        tag = back[(i - 1) * t + tag];
        path[i - 1] = tag;
    }
    path
}

/// What the forward-backward algorithm gives for one sentence.
#[derive(Clone, Debug)]
pub struct Posterior {
    /// `log Z`, the log-sum of the scores of all paths.
    pub log_z: f64,
    /// `[n, T]`, `P(y_i = j)`: the derivative of log Z by `em[i][j]` (and,
    /// at the first and last position, by `start[j]` and `end[j]`).
    pub unary: Vec<f64>,
    /// `[T, T]`, `Σ_i P(y_{i-1} = from, y_i = to)`: the derivative of log Z
    /// by `trans[from][to]`.
    pub pairwise: Vec<f64>,
}

/// Forward-backward over one sentence of `n = em.len() / T ≥ 1` positions.
///
/// Forward: `alpha_i[j] = log Σ_from exp(alpha_{i-1}[from] + trans[from][j]) + em[i][j]`,
/// computed as `log Σ_from w[from]·exp(trans[from][j]) + m` with
/// `w = exp(alpha_{i-1} − m)`, `m = max alpha_{i-1}`: `T` exponentials and
/// `T²` multiply-adds per position, exact in f64 for any sentence length.
/// Backward likewise from `beta_{n-1} = end`.
pub fn forward_backward(s: &Scores, em: &[f64]) -> Posterior {
    let t = s.t;
    let n = em.len() / t;
    assert!(n >= 1, "forward-backward needs a non-empty sentence");
    let mut alpha = vec![0.0; n * t];
    for j in 0..t {
        alpha[j] = s.start[j] + em[j];
    }
    let mut w = vec![0.0; t];
    for i in 1..n {
        let (done, rest) = alpha.split_at_mut(i * t);
        let prev = &done[(i - 1) * t..];
        let m = weights(prev, &mut w);
        for j in 0..t {
            let sum: f64 = (0..t).map(|from| w[from] * s.exp_trans[from * t + j]).sum();
            rest[j] = sum.ln() + m + em[i * t + j];
        }
    }
    let last = &alpha[(n - 1) * t..];
    let log_z = log_sum_exp((0..t).map(|j| last[j] + s.end[j]));
    let mut beta = vec![0.0; n * t];
    beta[(n - 1) * t..].copy_from_slice(&s.end);
    let mut g = vec![0.0; t];
    for i in (0..n - 1).rev() {
        // g[to] = em[i+1][to] + beta_{i+1}[to]
        for to in 0..t {
            g[to] = em[(i + 1) * t + to] + beta[(i + 1) * t + to];
        }
        let m = weights(&g, &mut w);
        for from in 0..t {
            let sum: f64 = (0..t).map(|to| s.exp_trans[from * t + to] * w[to]).sum();
            beta[i * t + from] = sum.ln() + m;
        }
    }
    let unary: Vec<f64> = alpha.iter().zip(&beta).map(|(a, b)| (a + b - log_z).exp()).collect();
    let mut pairwise = vec![0.0; t * t];
    for i in 1..n {
        for from in 0..t {
            let a = alpha[(i - 1) * t + from] - log_z;
            if a == f64::NEG_INFINITY {
                continue;
            }
            for to in 0..t {
                pairwise[from * t + to] += (a + s.trans[from * t + to] + em[i * t + to] + beta[i * t + to]).exp();
            }
        }
    }
    Posterior { log_z, unary, pairwise }
}

/// `w = exp(x − max x)`; returns `max x`.
fn weights(x: &[f64], w: &mut [f64]) -> f64 {
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for (w, &x) in w.iter_mut().zip(x) {
        *w = (x - m).exp();
    }
    m
}

fn log_sum_exp(x: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = x.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    x.map(|v| (v - m).exp()).sum::<f64>().ln() + m
}

fn argmax(x: impl Iterator<Item = f64>) -> usize {
    let (mut best, mut arg) = (f64::NEG_INFINITY, 0);
    for (k, v) in x.enumerate() {
        if v > best {
            (best, arg) = (v, k);
        }
    }
    arg
}
