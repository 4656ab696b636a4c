//! Positional encodings: sinusoidal and learned absolute positions (added
//! to the input), and the direction-aware relative sinusoids that TENER's
//! attention scores use (see [`crate::attention::RelativeTerms`]).

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
}
