//! Padding never changes what an encoder computes for a real token.

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::{Distribution, TensorData};
use encoders::attention::{AttentionPlan, MultiHeadConfig};
use encoders::bilstm::BiLstmConfig;
use encoders::positional::Position;
use encoders::transformer::AttentionConfig;

type B = NdArray<f32>;

fn dev() -> burn::backend::ndarray::NdArrayDevice {
    Default::default()
}

fn mask(lengths: &[usize], l: usize) -> Tensor<B, 2, Bool> {
    let m: Vec<bool> = lengths.iter().flat_map(|&n| (0..l).map(move |i| i < n)).collect();
    Tensor::from_data(TensorData::new(m, [lengths.len(), l]), &dev())
}

/// Row `s` of `x [B, L, D]`, first `n` positions, as a flat vector.
fn rows(x: &Tensor<B, 3>, s: usize, n: usize) -> Vec<f32> {
    let [_, _, d] = x.dims();
    x.clone().slice([s..s + 1, 0..n, 0..d]).into_data().iter::<f32>().collect()
}

fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "{what}: element {i}: {x} vs {y}");
    }
}

/// Runs `f` on a padded batch of three sentences and on each alone (with
/// junk in the padding), and compares the real positions.
fn check_padding_invariance(f: impl Fn(Tensor<B, 3>, Tensor<B, 2, Bool>) -> Tensor<B, 3>, d: usize, what: &str) {
    B::seed(&dev(), 1);
    let lengths = [5usize, 9, 2];
    let l = 9;
    let x = Tensor::<B, 3>::random([3, l, d], Distribution::Normal(0.0, 1.0), &dev());
    let out = f(x.clone(), mask(&lengths, l));
    for (s, &n) in lengths.iter().enumerate() {
        // The sentence alone, padded with different junk to a different length.
        let alone = x.clone().slice([s..s + 1, 0..n, 0..d]);
        let junk = Tensor::<B, 3>::random([1, 3, d], Distribution::Normal(5.0, 3.0), &dev());
        let alone = Tensor::cat(vec![alone, junk], 1);
        let single = f(alone, mask(&[n], n + 3));
        assert_close(&rows(&single, 0, n), &rows(&out, s, n), 1e-5, what);
        // Padding positions are zero.
        let [_, _, dout] = out.dims();
        let pad: Vec<f32> = out.clone().slice([s..s + 1, n..l, 0..dout]).into_data().iter::<f32>().collect();
        assert!(pad.iter().all(|&v| v == 0.0), "{what}: padding not zeroed");
    }
}

#[test]
fn bilstm_output_is_identical_alone_and_in_a_padded_batch() {
    let lstm = BiLstmConfig { hidden: 8, layers: 2, dropout: 0.0 }.init::<B>(6, &dev());
    check_padding_invariance(|x, m| lstm.forward(x, m), 6, "bilstm");
}

#[test]
fn bilstm_backward_direction_starts_at_the_last_real_token() {
    // The backward half of the output at the last real token has read only
    // that token: it equals the output of the sentence cut to that token.
    let lstm = BiLstmConfig { hidden: 4, layers: 1, dropout: 0.0 }.init::<B>(3, &dev());
    B::seed(&dev(), 2);
    let x = Tensor::<B, 3>::random([1, 5, 3], Distribution::Normal(0.0, 1.0), &dev());
    let full = lstm.forward(x.clone(), mask(&[5], 5));
    let last = x.slice([0..1, 4..5, 0..3]);
    let alone = lstm.forward(last, mask(&[1], 1));
    let bwd_full: Vec<f32> = full.slice([0..1, 4..5, 4..8]).into_data().iter::<f32>().collect();
    let bwd_alone: Vec<f32> = alone.slice([0..1, 0..1, 4..8]).into_data().iter::<f32>().collect();
    assert_close(&bwd_full, &bwd_alone, 1e-6, "backward state");
}

#[test]
fn attention_encoder_output_is_identical_alone_and_in_a_padded_batch() {
    for position in [Position::Sinusoidal, Position::Learned, Position::Relative] {
        let cfg = AttentionConfig {
            d_model: 16,
            layers: 2,
            heads: 4,
            ffn: 32,
            dropout: 0.0,
            attention_dropout: 0.0,
            position,
            scaled: position != Position::Relative,
            ..Default::default()
        };
        let enc = cfg.init::<B>(6, &dev());
        check_padding_invariance(|x, m| enc.forward(x, m, false).0, 6, &format!("attention {position:?}"));
    }
}

#[test]
fn padded_keys_get_zero_weight_and_a_fully_padded_row_gives_zeros() {
    let mha =
        MultiHeadConfig { d_query: 8, d_key: 8, heads: 2, head_dim: 4, dropout: 0.0, relative: true, scaled: true }
            .init::<B>(&dev());
    let x = Tensor::<B, 3>::random([2, 4, 8], Distribution::Normal(0.0, 1.0), &dev());
    // Sentence 1 has no real key at all.
    let m = mask(&[3, 0], 4);
    let out = mha.forward(x.clone(), x, m, AttentionPlan::dense(), true);
    let w: Vec<f32> = out.weights.unwrap().into_data().iter::<f32>().collect(); // [2, 2, 4, 4]
    for h in 0..2 {
        for i in 0..4 {
            let row = &w[(h * 4 + i) * 4..(h * 4 + i + 1) * 4];
            assert_eq!(row[3], 0.0, "padded key");
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }
    assert!(w[32..].iter().all(|&v| v == 0.0), "fully padded row must be zeros");
    let ctx: Vec<f32> = out.context.into_data().iter::<f32>().collect();
    assert!(ctx.iter().all(|v| v.is_finite()));
}
