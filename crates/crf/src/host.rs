//! The CRF's recursions for one sentence, in plain Rust on f64: Viterbi,
//! the forward-backward algorithm (log Z, unary and pairwise marginals),
//! k-best Viterbi ([`k_best`]) and the count of allowed paths
//! ([`count_paths`]).
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

/// The score of a forbidden transition, start or end. Finite, so that
/// log-sum-exp never sees `-inf - -inf`; far below any reachable path score.
pub const FORBIDDEN: f32 = -1.0e9;

/// Below this a single transition, start or end score counts as forbidden:
/// half of [`FORBIDDEN`]. A forbidden score is the learned parameter plus
/// `FORBIDDEN`, and learned parameters stay many orders of magnitude below
/// `5e8` in size, so the halfway mark separates the two with room on both
/// sides (`-inf` and NaN count as forbidden too).
pub const FORBIDDEN_BELOW: f64 = FORBIDDEN as f64 / 2.0;

/// Whether one transition, start or end score is allowed (see [`FORBIDDEN_BELOW`]).
pub fn allowed(score: f64) -> bool {
    score >= FORBIDDEN_BELOW
}

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

/// One entry of a k-best list at (position `i`, tag `j`): a prefix ending in
/// `j` at `i`, its score, and where it came from — entry `rank` of the list
/// at (`i − 1`, `from`) (unused at position 0).
#[derive(Clone, Copy, Debug)]
struct Entry {
    score: f64,
    from: usize,
    rank: usize,
}

/// The `k` best allowed paths of one sentence of `n = em.len() / T`
/// positions with their scores (unnormalised, as [`viterbi`] maximises),
/// best first: list Viterbi.
///
/// Allowed means no transition, start or end of the path scores below
/// [`FORBIDDEN_BELOW`] (see [`allowed`]): a forbidden step is never taken,
/// so forbidden paths are never returned, and where fewer than `k` allowed
/// paths exist all of them are ([`count_paths`] says how many). `k = 0`
/// gives no path; `n = 0` gives the one empty path, `(vec![], 0.0)`.
///
/// Ties: among equal scores the path whose tags, compared from the last
/// position backwards, are lower comes first (lower last tag, then lower
/// tag before it, …); this is [`viterbi`]'s rule, so the first path is
/// exactly [`viterbi`]'s whenever an allowed path exists (the scores are
/// summed in the same order, bit for bit).
///
/// `lists[i * T + j]`: up to `k` entries, best first, each a distinct
/// allowed prefix `y_0..=y_i` with `y_i = j`; built from the lists at
/// `i − 1` by merging each `from`'s list shifted by `trans[from][j]`, then
/// adding `em[i][j]`. `O(n · T² · k log(T k))` time, `O(n · T · k)` memory.
pub fn k_best(s: &Scores, em: &[f64], k: usize) -> Vec<(Vec<usize>, f64)> {
    let t = s.t;
    let n = em.len() / t;
    if k == 0 {
        return Vec::new();
    }
    if n == 0 {
        return vec![(Vec::new(), 0.0)];
    }
    let mut lists: Vec<Vec<Entry>> =
        (0..t)
            .map(|j| {
                if allowed(s.start[j]) {
                    vec![Entry { score: s.start[j] + em[j], from: 0, rank: 0 }]
                } else {
                    Vec::new()
                }
            })
            .collect();
    for i in 1..n {
        for j in 0..t {
            // Candidates in (from, rank) order; the stable sort keeps that
            // order among equal scores.
            let mut cand = Vec::new();
            for from in (0..t).filter(|&from| allowed(s.trans[from * t + j])) {
                let prev = &lists[(i - 1) * t + from];
                let tr = s.trans[from * t + j];
                cand.extend(prev.iter().enumerate().map(|(rank, e)| Entry { score: e.score + tr, from, rank }));
            }
            best_first(&mut cand, k);
            for e in &mut cand {
                e.score += em[i * t + j];
            }
            lists.push(cand);
        }
    }
    // The final ranking: `from` is the last tag, `rank` its entry there.
    let mut last = Vec::new();
    for j in (0..t).filter(|&j| allowed(s.end[j])) {
        let list = &lists[(n - 1) * t + j];
        last.extend(list.iter().enumerate().map(|(rank, e)| Entry { score: e.score + s.end[j], from: j, rank }));
    }
    best_first(&mut last, k);
    last.iter()
        .map(|fin| {
            let mut path = vec![0; n];
            let (mut tag, mut rank) = (fin.from, fin.rank);
            path[n - 1] = tag;
            for i in (1..n).rev() {
                let e = lists[i * t + tag][rank];
                (tag, rank) = (e.from, e.rank);
                path[i - 1] = tag;
            }
            (path, fin.score)
        })
        .collect()
}

/// Sorts candidates by score, highest first, keeping their order among equal
/// scores (stable; `-0.0` equals `0.0`, NaN goes last), and keeps the first `k`.
fn best_first(cand: &mut Vec<Entry>, k: usize) {
    cand.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or_else(|| a.score.is_nan().cmp(&b.score.is_nan())));
    cand.truncate(k);
}

/// The number of allowed paths (no transition, start or end below
/// [`FORBIDDEN_BELOW`], as [`k_best`] returns) through a sentence of `n`
/// positions; saturates at `u128::MAX`. An empty sentence has exactly one
/// path, the empty one, so `n = 0` gives 1.
///
/// `count[j]`: allowed prefixes ending in tag `j` at the current position;
/// `count'[j] = Σ_from [trans[from][j] allowed] · count[from]`.
pub fn count_paths(s: &Scores, n: usize) -> u128 {
    let t = s.t;
    if n == 0 {
        return 1;
    }
    let mut count: Vec<u128> = s.start.iter().map(|&x| u128::from(allowed(x))).collect();
    for _ in 1..n {
        count = (0..t)
            .map(|j| {
                (0..t)
                    .filter(|&from| allowed(s.trans[from * t + j]))
                    .fold(0u128, |acc, from| acc.saturating_add(count[from]))
            })
            .collect();
    }
    (0..t).filter(|&j| allowed(s.end[j])).fold(0u128, |acc, j| acc.saturating_add(count[j]))
}
