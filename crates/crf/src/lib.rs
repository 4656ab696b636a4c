//! A linear-chain CRF as a Burn module, generic over the backend.
//!
//! Scores: a path `y` through a sentence of length `n` with emissions `e`
//! scores `start[y0] + Σ e[t, y_t] + Σ trans[y_{t-1}, y_t] + end[y_{n-1}]`.
//! [`Crf::nll`] is `log Z − score(gold)` by the forward algorithm in log
//! space, [`Crf::decode`] is Viterbi, [`Crf::marginals`] forward-backward.
//! All three run as tensor operations over the whole batch and all tag pairs
//! at each step; only Viterbi's back-tracking runs on the host.
//!
//! Shapes: `B` sentences, `L` positions (padded), `T` tags. The mask `[B, L]`
//! is a left-aligned padding mask (true at real tokens); every sentence has
//! at least one real token. Padding never changes a score.
//!
//! Constraints come from the tag scheme ([`Constraints::from_scheme`]):
//! forbidden transitions get a fixed score of [`FORBIDDEN`], in training
//! (they leave the partition function) and in decoding (no decoded path is
//! ever illegal). The penalty is a constant tensor, not a parameter.

use burn::module::{Module, Param};
use burn::prelude::*;
use burn::tensor::TensorData;
use corpus::{Scheme, Tag};

/// The score of a forbidden transition. Finite, so that log-sum-exp never
/// sees `-inf - -inf`; far below any reachable path score.
pub const FORBIDDEN: f32 = -1.0e9;

/// How [`Crf::nll`] reduces over the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduction {
    /// `[B]`: one value per sentence.
    None,
    Sum,
    /// Sum divided by the number of sentences.
    Mean,
    /// Sum divided by the number of real tokens.
    TokenMean,
}

/// Which transitions are allowed: `trans[from][to]`, `start[to]`, `end[from]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraints {
    pub trans: Vec<Vec<bool>>,
    pub start: Vec<bool>,
    pub end: Vec<bool>,
}

impl Constraints {
    /// Everything allowed.
    pub fn none(num_tags: usize) -> Self {
        Constraints {
            trans: vec![vec![true; num_tags]; num_tags],
            start: vec![true; num_tags],
            end: vec![true; num_tags],
        }
    }

    /// Derived from the scheme's rules ([`Scheme::allowed`]) for these tags.
    pub fn from_scheme(scheme: Scheme, tags: &[Tag]) -> Self {
        Constraints {
            trans: tags.iter().map(|f| tags.iter().map(|t| scheme.allowed(Some(f), Some(t))).collect()).collect(),
            start: tags.iter().map(|t| scheme.allowed(None, Some(t))).collect(),
            end: tags.iter().map(|f| scheme.allowed(Some(f), None)).collect(),
        }
    }

    pub fn num_tags(&self) -> usize {
        self.start.len()
    }

    /// Whether a whole path is allowed.
    pub fn path_allowed(&self, path: &[usize]) -> bool {
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else { return true };
        self.start[first] && self.end[last] && path.windows(2).all(|w| self.trans[w[0]][w[1]])
    }
}

fn penalty(allowed: impl Iterator<Item = bool>) -> Vec<f32> {
    allowed.map(|a| if a { 0.0 } else { FORBIDDEN }).collect()
}

/// A linear-chain CRF over `T` tags.
#[derive(Module, Debug)]
pub struct Crf<B: Backend> {
    /// `[T, T]`, `transitions[from, to]`.
    pub transitions: Param<Tensor<B, 2>>,
    /// `[T]`, score of starting a sentence with each tag.
    pub start: Param<Tensor<B, 1>>,
    /// `[T]`, score of ending a sentence with each tag.
    pub end: Param<Tensor<B, 1>>,
    /// Constant penalties: 0 where allowed, [`FORBIDDEN`] where not.
    trans_penalty: Tensor<B, 2>,
    start_penalty: Tensor<B, 1>,
    end_penalty: Tensor<B, 1>,
}

impl<B: Backend> Crf<B> {
    /// A CRF with parameters drawn uniformly from `[-init, init]` (0 gives
    /// all-zero parameters).
    pub fn new(constraints: &Constraints, init: f64, device: &B::Device) -> Self {
        let t = constraints.num_tags();
        fn uniform<B: Backend, const D: usize>(shape: [usize; D], init: f64, device: &B::Device) -> Tensor<B, D> {
            if init == 0.0 {
                Tensor::zeros(shape, device)
            } else {
                Tensor::random(shape, burn::tensor::Distribution::Uniform(-init, init), device)
            }
        }
        let trans_penalty = penalty(constraints.trans.iter().flatten().copied());
        Crf {
            transitions: Param::from_tensor(uniform([t, t], init, device)),
            start: Param::from_tensor(uniform([t], init, device)),
            end: Param::from_tensor(uniform([t], init, device)),
            trans_penalty: Tensor::from_data(TensorData::new(trans_penalty, [t, t]), device),
            start_penalty: Tensor::from_data(TensorData::new(penalty(constraints.start.iter().copied()), [t]), device),
            end_penalty: Tensor::from_data(TensorData::new(penalty(constraints.end.iter().copied()), [t]), device),
        }
    }

    pub fn num_tags(&self) -> usize {
        self.start.dims()[0]
    }

    /// Effective (transition, start, end) scores, penalties included.
    fn scores(&self) -> (Tensor<B, 2>, Tensor<B, 1>, Tensor<B, 1>) {
        (
            self.transitions.val() + self.trans_penalty.clone(),
            self.start.val() + self.start_penalty.clone(),
            self.end.val() + self.end_penalty.clone(),
        )
    }

    /// Negative log-likelihood of `tags` `[B, L]` given `emissions` `[B, L, T]`.
    pub fn nll(
        &self,
        emissions: Tensor<B, 3>,
        tags: Tensor<B, 2, Int>,
        mask: Tensor<B, 2, Bool>,
        reduction: Reduction,
    ) -> Tensor<B, 1> {
        let log_z = self.log_partition(emissions.clone(), mask.clone()); // [B]
        let gold = self.path_score(emissions, tags, mask.clone()); // [B]
        let nll = log_z - gold;
        match reduction {
            Reduction::None => nll,
            Reduction::Sum => nll.sum(),
            Reduction::Mean => nll.mean(),
            Reduction::TokenMean => {
                let tokens = mask.float().sum().clamp_min(1.0);
                nll.sum() / tokens
            }
        }
    }

    /// Score of the given tag paths, `[B]`.
    pub fn path_score(
        &self,
        emissions: Tensor<B, 3>,
        tags: Tensor<B, 2, Int>,
        mask: Tensor<B, 2, Bool>,
    ) -> Tensor<B, 1> {
        let [b, l, t] = emissions.dims();
        let (trans, start, end) = self.scores();
        let maskf = mask.clone().float(); // [B, L]
                                          // Emission of each gold tag: [B, L].
        let emit = emissions.gather(2, tags.clone().unsqueeze_dim(2)).squeeze_dim::<2>(2);
        let mut score = (emit * maskf.clone()).sum_dim(1).squeeze_dim::<1>(1); // [B]
                                                                               // start[y0] + end[y_last].
        let first = tags.clone().slice([0..b, 0..1]).squeeze_dim::<1>(1); // [B]
        score = score + start.select(0, first);
        let lengths = mask.clone().int().sum_dim(1); // [B, 1]
        let last_idx = lengths.sub_scalar(1).clamp_min(0);
        let last = tags.clone().gather(1, last_idx).squeeze_dim::<1>(1); // [B]
        score = score + end.select(0, last);
        if l > 1 {
            // trans[y_{t-1}, y_t] for t ≥ 1, via the flat index from·T + to: [B, L-1].
            let prev = tags.clone().slice([0..b, 0..l - 1]);
            let next = tags.slice([0..b, 1..l]);
            let flat = prev.mul_scalar(t as i64) + next;
            let tr = trans.reshape([t * t]).select(0, flat.reshape([b * (l - 1)])).reshape([b, l - 1]);
            score = score + (tr * maskf.slice([0..b, 1..l])).sum_dim(1).squeeze_dim::<1>(1);
        }
        score
    }

    /// `log Z` for each sentence, `[B]`, by the forward algorithm.
    pub fn log_partition(&self, emissions: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 1> {
        let (alphas, log_norm) = self.forward_alphas(emissions, mask, false);
        let (_, _, end) = self.scores();
        let last = alphas.into_iter().last().expect("at least one position");
        (log_sum_exp(last + end.unsqueeze_dim(0), 1) + log_norm).squeeze_dim::<1>(1)
    }

    /// Forward variables, normalised: `alpha_t [B, T]` is the log-sum of the
    /// scores of all prefixes ending in each tag at `t`, minus a running
    /// normaliser (the per-step maxima, summed in `log_norm [B, 1]`), so the
    /// values stay small and f32 keeps its precision over thousands of
    /// steps. Past a sentence's end, alpha is carried unchanged. With
    /// `keep_all`, every step's alpha is returned (else only the last).
    fn forward_alphas(
        &self,
        emissions: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        keep_all: bool,
    ) -> (Vec<Tensor<B, 2>>, Tensor<B, 2>) {
        let [b, l, t] = emissions.dims();
        let (trans, start, _) = self.scores();
        let trans = trans.unsqueeze_dim::<3>(0); // [1, T(from), T(to)]
        let emit_at = |i: usize| emissions.clone().slice([0..b, i..i + 1, 0..t]).squeeze_dim::<2>(1); // [B, T]
        let mask_at = |i: usize| mask.clone().slice([0..b, i..i + 1]); // [B, 1]
        let alpha = start.unsqueeze_dim(0) + emit_at(0); // [B, T]
        let mut log_norm = alpha.clone().max_dim(1).detach(); // [B, 1]
        let mut alpha = alpha - log_norm.clone();
        let mut out = Vec::with_capacity(if keep_all { l } else { 1 });
        for i in 1..l {
            if keep_all {
                out.push(alpha.clone());
            }
            // [B, T, 1] + [1, T, T] → log-sum over `from` → [B, T(to)]
            let next =
                log_sum_exp(alpha.clone().unsqueeze_dim::<3>(2) + trans.clone(), 1).squeeze_dim::<2>(1) + emit_at(i);
            let c = next.clone().max_dim(1).detach(); // [B, 1]
            let real = mask_at(i);
            alpha = alpha.mask_where(real.clone().expand([b, t]), next - c.clone());
            log_norm = log_norm + c * real.float();
        }
        out.push(alpha);
        (out, log_norm)
    }

    /// Viterbi: the best allowed path of each sentence, its real length long.
    pub fn decode(&self, emissions: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Vec<Vec<usize>> {
        let [b, l, t] = emissions.dims();
        let (trans, start, end) = self.scores();
        let trans = trans.unsqueeze_dim::<3>(0); // [1, T, T]
        let emit_at = |i: usize| emissions.clone().slice([0..b, i..i + 1, 0..t]).squeeze_dim::<2>(1);
        let mask_at = |i: usize| mask.clone().slice([0..b, i..i + 1]).expand([b, t]);
        let mut score = start.unsqueeze_dim(0) + emit_at(0); // [B, T]
        let mut pointers: Vec<Tensor<B, 2, Int>> = Vec::with_capacity(l.saturating_sub(1));
        for i in 1..l {
            // best over `from` of score[from] + trans[from, to]: [B, 1, T]
            let (best, idx) = (score.clone().unsqueeze_dim::<3>(2) + trans.clone()).max_dim_with_indices(1);
            pointers.push(idx.squeeze_dim::<2>(1)); // [B, T]
            let next = best.squeeze_dim::<2>(1) + emit_at(i);
            score = score.mask_where(mask_at(i), next);
        }
        let last_tag: Vec<i64> = (score + end.unsqueeze_dim(0)).argmax(1).into_data().iter::<i64>().collect();
        let lengths: Vec<i64> = mask.int().sum_dim(1).into_data().iter::<i64>().collect();
        // One transfer of all back-pointers: [L-1, B, T].
        let ptr: Vec<i64> = if pointers.is_empty() {
            Vec::new()
        } else {
            Tensor::stack::<3>(pointers, 0).into_data().iter::<i64>().collect()
        };
        (0..b)
            .map(|s| {
                let n = lengths[s].max(0) as usize;
                if n == 0 {
                    return Vec::new();
                }
                let mut path = vec![0usize; n];
                path[n - 1] = last_tag[s] as usize;
                for i in (1..n).rev() {
                    // pointers[i-1] holds the best predecessor of each tag at step i.
                    path[i - 1] = ptr[((i - 1) * b + s) * t + path[i]] as usize;
                }
                path
            })
            .collect()
    }

    /// Posterior marginals `P(y_t = j | x)`, `[B, L, T]`, zero at padding.
    /// Since `Σ_j alpha_t[j]·beta_t[j] = Z` at every `t`, the marginal at `t`
    /// is a softmax over tags of `alpha_t + beta_t`, so both recursions can
    /// be normalised step by step, which keeps f32 exact enough for
    /// sequences of thousands of tokens.
    pub fn marginals(&self, emissions: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let [b, l, t] = emissions.dims();
        let (alphas, _) = self.forward_alphas(emissions.clone(), mask.clone(), true);
        let (trans, _, end) = self.scores();
        let end_b = end.unsqueeze_dim::<2>(0).expand([b, t]); // [B, T]
                                                              // Backward variables: beta_t[i] = log-sum of the scores of all
                                                              // suffixes after tag i at t (normalised); at a sentence's last token,
                                                              // the end score.
        let trans = trans.unsqueeze_dim::<3>(0); // [1, T(from), T(to)]
        let mut betas = vec![end_b.clone(); l];
        for i in (0..l.saturating_sub(1)).rev() {
            let e_next = emissions.clone().slice([0..b, i + 1..i + 2, 0..t]); // [B, 1, T(to)]
            let after = (e_next + betas[i + 1].clone().unsqueeze_dim::<3>(1)) + trans.clone(); // [B, T, T]
            let cand = log_sum_exp(after, 2).squeeze_dim::<2>(2); // [B, T(from)]
            let cand = cand.clone() - cand.max_dim(1).detach();
            let real_next = mask.clone().slice([0..b, i + 1..i + 2]).expand([b, t]);
            betas[i] = end_b.clone().mask_where(real_next, cand);
        }
        let post: Vec<Tensor<B, 2>> = alphas
            .into_iter()
            .zip(betas)
            .map(|(a, be)| {
                let x = a + be;
                let z = log_sum_exp(x.clone(), 1);
                (x - z).exp()
            })
            .collect();
        let post = Tensor::stack::<3>(post, 1); // [B, L, T]
                                                // At padded positions alpha was carried over; the mask zeroes them.
        post * mask.float().unsqueeze_dim::<3>(2)
    }
}

/// `log Σ exp(x)` along `dim` (kept, size 1), stable: the max is subtracted
/// first (and detached: the gradient is exact either way).
pub fn log_sum_exp<B: Backend, const D: usize>(x: Tensor<B, D>, dim: usize) -> Tensor<B, D> {
    let m = x.clone().max_dim(dim).detach();
    (x - m.clone()).exp().sum_dim(dim).log() + m
}

#[cfg(test)]
mod tests;
