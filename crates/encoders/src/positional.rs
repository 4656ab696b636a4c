//! Positional encodings: sinusoidal and learned absolute positions (added
//! to the input), the direction-aware relative sinusoids that TENER's
//! attention scores use (see [`crate::attention::RelativeTerms`]), the
//! rotary angles of RoPE, ALiBi's slopes and T5's distance buckets.

use burn::nn::{Embedding, EmbeddingConfig};
use burn::prelude::*;
use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Position {
    /// No position information (attention is then order-blind).
    None,
    /// Fixed sinusoids added to the input (Vaswani et al.).
    Sinusoidal,
    /// A learned embedding per position, up to `max_len` (later positions
    /// share the last one).
    Learned,
    /// Relative, direction-aware: distances enter the attention scores (TENER).
    Relative,
    /// Rotary (RoFormer, Su et al. 2021): queries and keys rotated by their
    /// position, so their dot product depends on the distance only.
    Rope,
    /// ALiBi (Press et al. 2022): a fixed bias `−m_h·|i − j|` on each
    /// head's scores, slopes `m_h` geometric over the heads.
    Alibi,
    /// T5 (Raffel et al. 2020): a learned bias per head and distance bucket
    /// (32 buckets, both directions, exact up to 8, logarithmic to 128).
    T5,
}

impl Position {
    /// The name configurations use (`position = "…"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Position::None => "none",
            Position::Sinusoidal => "sinusoidal",
            Position::Learned => "learned",
            Position::Relative => "relative",
            Position::Rope => "rope",
            Position::Alibi => "alibi",
            Position::T5 => "t5",
        }
    }

    /// Whether the position enters the attention scores as a term of its
    /// own (relative, ALiBi, T5): the scores are then computed by the plain
    /// formula, not by the fused or chunked operations.
    pub fn biases_scores(self) -> bool {
        matches!(self, Position::Relative | Position::Alibi | Position::T5)
    }
}

/// RoPE's angle base: pair `m` of a head turns by `pos / ROPE_BASE^(2m/Dh)`.
pub const ROPE_BASE: f64 = 10000.0;

/// `cos` and `sin` of RoPE's angles for positions `0..len`, each
/// `[len, dh/2]` (pair `m` of position `p` turns by `p·ROPE_BASE^(−2m/dh)`).
pub fn rope_angles(len: usize, dh: usize) -> (Vec<f32>, Vec<f32>) {
    let half = dh / 2;
    let (mut cos, mut sin) = (vec![0f32; len * half], vec![0f32; len * half]);
    for p in 0..len {
        for m in 0..half {
            let a = p as f64 / ROPE_BASE.powf(2.0 * m as f64 / dh as f64);
            cos[p * half + m] = a.cos() as f32;
            sin[p * half + m] = a.sin() as f32;
        }
    }
    (cos, sin)
}

/// RoPE on `x [B, L, H·Dh]` (heads side by side, positions `0..L`): each
/// head's dimensions `2m, 2m+1` rotated by position `p`'s angle `θ`:
/// `(x₀ cos θ − x₁ sin θ, x₀ sin θ + x₁ cos θ)`. `Dh` must be even.
///
/// Computed as `x ⊙ C + swap(x) ⊙ S` with `C = (cos θ, cos θ)` and
/// `S = (−sin θ, sin θ)` per pair, and `swap(x)`, the pairs' two values
/// exchanged, as one product with a permutation matrix: three whole-tensor
/// operations instead of slicing the pairs apart and stacking them again,
/// and the same numbers to the last bit (one nonzero term per product, a
/// sign change is exact).
pub fn rotate<B: Backend>(x: Tensor<B, 3>, heads: usize) -> Tensor<B, 3> {
    let [b, l, d] = x.dims();
    let dh = d / heads;
    let device = x.device();
    let (cos, sin) = rope_angles(l, dh); // [L, Dh/2] each
    let c: Vec<f32> = cos.iter().flat_map(|&c| [c, c]).collect(); // [L, Dh]
    let s: Vec<f32> = sin.iter().flat_map(|&s| [-s, s]).collect(); // [L, Dh]
    let table = |v: Vec<f32>| Tensor::<B, 2>::from_data(TensorData::new(v, [l, dh]), &device).reshape([1, l, 1, dh]);
    // swap(x)_j = x_(j xor 1): P[i, j] = 1 where j = i xor 1.
    let swap: Vec<f32> = (0..dh).flat_map(|i| (0..dh).map(move |j| f32::from(j == (i ^ 1)))).collect();
    let swap = Tensor::<B, 2>::from_data(TensorData::new(swap, [dh, dh]), &device); // [Dh, Dh]
    let swapped = x.clone().reshape([b * l * heads, dh]).matmul(swap).reshape([b, l, heads, dh]); // [B, L, H, Dh]
    let x = x.reshape([b, l, heads, dh]); // [B, L, H, Dh]
    (x * table(c) + swapped * table(s)).reshape([b, l, d]) // [B, L, H·Dh]
}

/// ALiBi's slope per head (Press et al.'s `get_slopes`): `2^(−8k/H)` for
/// `k = 1..H` when `H` is a power of two; otherwise those of the largest
/// power of two below `H`, then every other slope of twice that many.
pub fn alibi_slopes(heads: usize) -> Vec<f32> {
    let pow2 = |n: usize| -> Vec<f64> { (1..=n).map(|k| 2f64.powf(-8.0 * k as f64 / n as f64)).collect() };
    let below = if heads == 0 { 0 } else { 1usize << heads.ilog2() };
    let mut slopes = pow2(below);
    if below < heads {
        slopes.extend(pow2(2 * below).into_iter().step_by(2).take(heads - below));
    }
    slopes.into_iter().map(|m| m as f32).collect()
}

/// T5's buckets of signed distances (both directions: half for each).
pub const T5_BUCKETS: usize = 32;
/// Distances at and past this share T5's last bucket of their direction.
pub const T5_MAX_DISTANCE: usize = 128;

/// T5's bucket of the signed distance `i − j` from query `i` to key `j`
/// (`_relative_position_bucket` with `bidirectional=True`): keys after the
/// query (`j > i`) use the upper half; within a half, distances below
/// `n/2` (`n = T5_BUCKETS/2`) get a bucket each, longer ones share
/// logarithmically spaced buckets up to `T5_MAX_DISTANCE` (in f32, as
/// T5's PyTorch code computes them).
pub fn t5_bucket(distance: i64) -> usize {
    let n = T5_BUCKETS / 2;
    let (offset, d) = if distance < 0 { (n, distance.unsigned_abs() as usize) } else { (0, distance as usize) };
    let exact = n / 2;
    if d < exact {
        return offset + d;
    }
    let log = (d as f32 / exact as f32).ln() / ((T5_MAX_DISTANCE as f64 / exact as f64).ln() as f32);
    offset + (exact + (log * (n - exact) as f32) as usize).min(n - 1)
}

/// `sin`/`cos` of `pos / 10000^(2m/d)` in dimensions `2m`/`2m+1`, for the
/// positions `first, first+1, …` (`count` of them): `[count, d]`. Negative
/// positions flip the sign of the sine terms, which is what makes the
/// relative encoding direction-aware.
pub fn sinusoids(first: i64, count: usize, d: usize) -> Vec<f32> {
    let mut out = vec![0f32; count * d];
    for (r, row) in out.chunks_mut(d).enumerate() {
        let pos = (first + r as i64) as f64;
        for m in 0..d.div_ceil(2) {
            let w = pos / 10000f64.powf(2.0 * m as f64 / d as f64);
            row[2 * m] = w.sin() as f32;
            if 2 * m + 1 < d {
                row[2 * m + 1] = w.cos() as f32;
            }
        }
    }
    out
}

/// Absolute sinusoids for positions `0..len`: `[len, d]`.
pub fn absolute_sinusoids<B: Backend>(len: usize, d: usize, device: &B::Device) -> Tensor<B, 2> {
    Tensor::from_data(TensorData::new(sinusoids(0, len, d), [len, d]), device)
}

/// Relative sinusoids for the signed distances `dmin, dmin+1, …`: `[count, d]`.
pub fn relative_sinusoids<B: Backend>(dmin: i64, count: usize, d: usize, device: &B::Device) -> Tensor<B, 2> {
    Tensor::from_data(TensorData::new(sinusoids(dmin, count, d), [count, d]), device)
}

/// Learned absolute positions.
#[derive(Module, Debug)]
pub struct LearnedPositions<B: Backend> {
    pub table: Embedding<B>,
}

impl<B: Backend> LearnedPositions<B> {
    pub fn new(max_len: usize, d: usize, device: &B::Device) -> Self {
        LearnedPositions { table: EmbeddingConfig::new(max_len.max(1), d).init(device) }
    }

    /// `[len, d]`; positions past the table reuse its last row.
    pub fn forward(&self, len: usize, device: &B::Device) -> Tensor<B, 2> {
        let max = self.table.weight.dims()[0];
        let ids: Vec<i64> = (0..len).map(|p| p.min(max - 1) as i64).collect();
        let ids = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [1, len]), device);
        self.table.forward(ids).squeeze_dim::<2>(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rotation equals the pairwise formula to the last bit (what the
    /// runs trained before it was written as a product computed).
    #[test]
    fn rotation_is_the_pairwise_formula_exactly() {
        use burn::backend::Flex;
        use burn::tensor::Distribution;
        let (b, l, heads, dh) = (2, 7, 3, 8);
        let x = Tensor::<Flex, 3>::random([b, l, heads * dh], Distribution::Normal(0.0, 3.0), &Default::default());
        let got: Vec<f32> = rotate(x.clone(), heads).into_data().to_vec().unwrap();
        let x: Vec<f32> = x.into_data().to_vec().unwrap();
        let (cos, sin) = rope_angles(l, dh);
        for (at, (&g, &x0)) in got.iter().zip(&x).enumerate() {
            let (p, c) = ((at / (heads * dh)) % l, at % dh);
            let (m, first) = (c / 2, c % 2 == 0);
            let (cos, sin) = (cos[p * dh / 2 + m], sin[p * dh / 2 + m]);
            let want = if first { x0 * cos - x[at + 1] * sin } else { x[at - 1] * sin + x0 * cos };
            assert_eq!(g.to_bits(), want.to_bits(), "element {at}: {g} vs {want}");
        }
    }

    #[test]
    fn relative_sinusoids_are_direction_aware() {
        let s = sinusoids(-3, 7, 8); // distances −3..=3
        let row = |d: i64| &s[((d + 3) as usize) * 8..((d + 4) as usize) * 8];
        for m in 0..4 {
            assert!((row(2)[2 * m] + row(-2)[2 * m]).abs() < 1e-6, "sine flips sign");
            assert!((row(2)[2 * m + 1] - row(-2)[2 * m + 1]).abs() < 1e-6, "cosine does not");
        }
        assert_eq!(row(0)[0], 0.0);
        assert_eq!(row(0)[1], 1.0);
    }

    #[test]
    fn alibi_slopes_follow_the_paper() {
        // get_slopes(8) and get_slopes(6) of the ALiBi reference code.
        let eight: Vec<f32> = (1..=8).map(|k| 0.5f32.powi(k)).collect();
        assert_eq!(alibi_slopes(8), eight);
        let got = alibi_slopes(6);
        assert_eq!(got.len(), 6);
        // Four from 2^(−8k/4) = 1/4, 1/16, 1/64, 1/256; then 2^(−8k/8) at k = 1, 3.
        let want = [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-7, "{got:?}");
        }
        assert_eq!(alibi_slopes(1), [2f32.powi(-8)]);
    }

    #[test]
    fn t5_buckets_match_the_reference_function() {
        // Values of T5's _relative_position_bucket(relative_position = j − i,
        // bidirectional=True, num_buckets=32, max_distance=128), whose
        // argument is the key's position minus the query's.
        let reference = |rel: i64| -> usize {
            let n = 16usize;
            let mut ret = if rel > 0 { n } else { 0 };
            let d = rel.unsigned_abs() as usize;
            let max_exact = n / 2;
            if d < max_exact {
                return ret + d;
            }
            let v = max_exact
                + ((d as f32 / max_exact as f32).ln() / ((128f64 / max_exact as f64).ln() as f32)
                    * (n - max_exact) as f32) as usize;
            ret += v.min(n - 1);
            ret
        };
        for dist in -300i64..=300 {
            assert_eq!(t5_bucket(dist), reference(-dist), "distance {dist}");
        }
        assert_eq!(t5_bucket(0), 0);
        assert_eq!(t5_bucket(-1), 17);
        assert_eq!(t5_bucket(7), 7);
        assert_eq!(t5_bucket(8), 8);
        assert_eq!(t5_bucket(127), 15);
        assert_eq!(t5_bucket(1000), 15);
        assert_eq!(t5_bucket(-1000), 31);
    }
}
