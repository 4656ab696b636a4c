//! A linear-chain CRF as a Burn module, generic over the backend.
//!
//! Scores: a path `y` through a sentence of length `n` with emissions `e`
//! scores `start[y0] + Σ e[t, y_t] + Σ trans[y_{t-1}, y_t] + end[y_{n-1}]`.
//! [`Crf::nll`] is `log Z − score(gold)` by the forward algorithm,
//! [`Crf::decode`] is Viterbi, [`Crf::marginals`] forward-backward. The gold
//! score is tensor arithmetic over the whole batch; the three recursions run
//! per sentence on the host in f64 ([`host`]) after one copy of the
//! emissions, since as tensor operations each position is a handful of tiny
//! kernels. Training still gets exact gradients: log Z enters the graph as
//! a linear form in the marginals ([`Crf::log_partition`]).
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

pub mod host;
pub mod one_span;

/// The score of a forbidden transition (defined in [`host`], whose
/// recursions recognise it there without importing this file).
pub use host::FORBIDDEN;

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

    /// `log Z` for each sentence, `[B]`, by the forward algorithm (on the
    /// host, [`host::forward_backward`]). Differentiable: its gradient is
    /// the marginals, `∂ log Z / ∂ e[t, j] = P(y_t = j)` and
    /// `∂ log Z / ∂ trans[i, j] = Σ_t P(y_{t-1} = i, y_t = j)` (likewise for
    /// `start` and `end` at the first and last token), entered as the
    /// linear form `S = Σ e·P + Σ trans·P₂ + Σ start·P₀ + Σ end·P_last`
    /// with constant `P`s: `log Z = S − detach(S) + log Z` has the value of
    /// `log Z` and the gradient of `S`, which is the exact gradient of log Z
    /// (first order; no second derivatives).
    pub fn log_partition(&self, emissions: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 1> {
        let [b, l, t] = emissions.dims();
        let device = emissions.device();
        let mut log_z = vec![0.0f32; b];
        let mut unary = vec![0.0f32; b * l * t]; // [B, L, T], 0 at padding
        let mut pairwise = vec![0.0f32; b * t * t]; // [B, T, T]
        let mut first = vec![0.0f32; b * t]; // [B, T]
        let mut last = vec![0.0f32; b * t]; // [B, T]
        for (s, p) in self.posteriors(&emissions, &mask).into_iter().enumerate() {
            let Some(p) = p else { continue };
            let n = p.unary.len() / t;
            log_z[s] = p.log_z as f32;
            cast_into(&mut unary[s * l * t..(s * l + n) * t], &p.unary);
            cast_into(&mut pairwise[s * t * t..(s + 1) * t * t], &p.pairwise);
            cast_into(&mut first[s * t..(s + 1) * t], &p.unary[..t]);
            cast_into(&mut last[s * t..(s + 1) * t], &p.unary[(n - 1) * t..]);
        }
        let (trans, start, end) = self.scores();
        let p = |v: Vec<f32>, shape: [usize; 3]| Tensor::<B, 3>::from_data(TensorData::new(v, shape), &device);
        // S per sentence, [B]: e·P summed over (L, T), trans·P₂ over (T, T),
        // start·P₀ and end·P_last over T.
        let s_emit = (emissions * p(unary, [b, l, t])).sum_dim(2).sum_dim(1);
        let s_trans = (trans.unsqueeze_dim::<3>(0) * p(pairwise, [b, t, t])).sum_dim(2).sum_dim(1);
        let ends = start.reshape([1, 1, t]) * p(first, [b, 1, t]) + end.reshape([1, 1, t]) * p(last, [b, 1, t]);
        let s_ends = ends.sum_dim(2);
        let surrogate = (s_emit + s_trans + s_ends).reshape([b]);
        let log_z = Tensor::<B, 1>::from_data(TensorData::new(log_z, [b]), &device);
        surrogate.clone() - surrogate.detach() + log_z
    }

    /// The effective scores (penalties included) on the host.
    pub fn host_scores(&self) -> host::Scores {
        let (trans, start, end) = self.scores();
        let t = self.num_tags();
        host::Scores::new(t, floats(trans), floats(start), floats(end))
    }

    /// Viterbi: the best allowed path of each sentence, its real length long
    /// (on the host, [`host::viterbi`], after one copy of the emissions).
    pub fn decode(&self, emissions: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Vec<Vec<usize>> {
        let scores = self.host_scores();
        HostBatch::new(&emissions, &mask).sentences().map(|em| host::viterbi(&scores, em)).collect()
    }

    /// Forward-backward of each sentence on the host (`None` for an empty one).
    fn posteriors(&self, emissions: &Tensor<B, 3>, mask: &Tensor<B, 2, Bool>) -> Vec<Option<host::Posterior>> {
        let scores = self.host_scores();
        let batch = HostBatch::new(emissions, mask);
        batch.sentences().map(|em| (!em.is_empty()).then(|| host::forward_backward(&scores, em))).collect()
    }

    /// Posterior marginals `P(y_t = j | x)`, `[B, L, T]`, zero at padding
    /// (forward-backward on the host, [`host::forward_backward`]; a
    /// constant: no gradient flows through it).
    pub fn marginals(&self, emissions: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let [b, l, t] = emissions.dims();
        let mut out = vec![0.0f32; b * l * t];
        for (s, p) in self.posteriors(&emissions, &mask).into_iter().enumerate() {
            if let Some(p) = p {
                cast_into(&mut out[s * l * t..s * l * t + p.unary.len()], &p.unary);
            }
        }
        Tensor::from_data(TensorData::new(out, [b, l, t]), &emissions.device())
    }
    /// [`Self::decode`] of emissions already on the host: one `[n, T]`
    /// slice per sentence (the inference path stitches windows there).
    pub fn decode_host(&self, sentences: &[&[f32]]) -> Vec<Vec<usize>> {
        let scores = self.host_scores();
        sentences.iter().map(|em| host::viterbi(&scores, &widen(em))).collect()
    }

    /// The `k` best allowed paths of each sentence (emissions on the host,
    /// `[n, T]` per sentence, as [`Self::decode_host`] takes them), best
    /// first, each with its probability `exp(score − log Z)`
    /// ([`host::k_best`], log Z from [`host::forward_backward`]). The first
    /// path is [`Self::decode_host`]'s; a sentence with fewer than `k`
    /// allowed paths gives all of them ([`host::count_paths`] counts them);
    /// an empty sentence gives its one empty path with probability 1.
    ///
    /// # Panics
    /// If `k` is 0 (callers validate `k ≥ 1`).
    pub fn k_best_host(&self, sentences: &[&[f32]], k: usize) -> Vec<Vec<(Vec<usize>, f64)>> {
        assert!(k >= 1, "k_best_host: k must be at least 1, got 0");
        let scores = self.host_scores();
        sentences
            .iter()
            .map(|em| {
                if em.is_empty() {
                    return vec![(Vec::new(), 1.0)];
                }
                let em = widen(em);
                let log_z = host::forward_backward(&scores, &em).log_z;
                host::k_best(&scores, &em, k).into_iter().map(|(path, score)| (path, (score - log_z).exp())).collect()
            })
            .collect()
    }

    /// [`Self::marginals`] of emissions on the host: `[n, T]` per sentence.
    pub fn marginals_host(&self, sentences: &[&[f32]]) -> Vec<Vec<f32>> {
        let scores = self.host_scores();
        sentences
            .iter()
            .map(|em| {
                let mut out = vec![0.0f32; em.len()];
                if !em.is_empty() {
                    cast_into(&mut out, &host::forward_backward(&scores, &widen(em)).unary);
                }
                out
            })
            .collect()
    }
}

/// A tensor's values on the host, as f64.
fn floats<B: Backend, const D: usize>(x: Tensor<B, D>) -> Vec<f64> {
    x.into_data().convert::<f64>().into_vec::<f64>().expect("f64 after convert")
}

/// A batch's emissions on the host, as f64 (one copy of `[B, L, T]`), with
/// each sentence's length (its count of real tokens; the mask is left-aligned).
struct HostBatch {
    em: Vec<f64>,
    lengths: Vec<usize>,
    /// `L · T`: one sentence's stride in `em`.
    stride: usize,
    t: usize,
}

impl HostBatch {
    fn new<B: Backend>(emissions: &Tensor<B, 3>, mask: &Tensor<B, 2, Bool>) -> Self {
        let [_, l, t] = emissions.dims();
        let lengths = mask.clone().int().sum_dim(1).into_data().convert::<i64>();
        let lengths = lengths.iter::<i64>().map(|n| n.max(0) as usize).collect();
        HostBatch { em: floats(emissions.clone()), lengths, stride: l * t, t }
    }

    /// Each sentence's emissions over its real tokens, `[n, T]`.
    fn sentences(&self) -> impl Iterator<Item = &[f64]> {
        self.lengths.iter().enumerate().map(|(s, &n)| &self.em[s * self.stride..s * self.stride + n * self.t])
    }
}

/// Host emissions as f64, as the recursions take them.
fn widen(em: &[f32]) -> Vec<f64> {
    em.iter().map(|&x| x as f64).collect()
}

fn cast_into(out: &mut [f32], v: &[f64]) {
    for (o, &x) in out.iter_mut().zip(v) {
        *o = x as f32;
    }
}

#[cfg(test)]
mod tests;
