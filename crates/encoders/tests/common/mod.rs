//! Helpers shared by the integration tests: masks, tensor values,
//! closeness checks and a small tagger configuration.
#![allow(dead_code)]

use burn::prelude::*;
use burn::tensor::TensorData;
use encoders::{EncoderKind, QuestionMode, TaggerConfig};

/// A left-aligned padding mask `[lengths.len(), l]`: true at the first
/// `lengths[s]` positions of row `s`.
pub fn mask<B: Backend>(lengths: &[usize], l: usize, device: &B::Device) -> Tensor<B, 2, Bool> {
    let m: Vec<bool> = lengths.iter().flat_map(|&n| (0..l).map(move |i| i < n)).collect();
    Tensor::from_data(TensorData::new(m, [lengths.len(), l]), device)
}

/// A tensor's values, flattened.
pub fn values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

/// Row `s` of `x [B, L, D]`, first `n` positions, flattened.
pub fn rows<B: Backend>(x: &Tensor<B, 3>, s: usize, n: usize) -> Vec<f32> {
    let [_, _, d] = x.dims();
    values(x.clone().slice([s..s + 1, 0..n, 0..d]))
}

/// Every `|a − b| ≤ tol`.
pub fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "{what}: element {i}: {x} vs {y}");
    }
}

/// Every `|a − b| ≤ tol·(1 + |b|)`: GEMM kernels sum in a different order
/// on different CPUs (parameter gradients of chunked and local attention
/// differed from the dense ones by up to 2.2e-4 on an AMD machine, below
/// 1e-4 on Intel ones; hence 1e-3 for gradients).
pub fn assert_close_relative(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0f32, f32::max);
    assert!(worst <= tol, "{what}: max difference {worst} > {tol} (relative to 1 + |value|)");
}

/// A tagger configuration small enough for a test: 8-wide word
/// embeddings, a BiLSTM of 4 units per direction or an attention encoder of
/// width 8 (2 heads, feed-forward 8); everything else at its default.
pub fn small_tagger(kind: EncoderKind, question: QuestionMode) -> TaggerConfig {
    let mut cfg = TaggerConfig::default();
    cfg.features.word_dim = 8;
    cfg.encoder.kind = kind;
    cfg.encoder.bilstm.hidden = 4;
    cfg.encoder.attention.d_model = 8;
    cfg.encoder.attention.ffn = 8;
    cfg.encoder.attention.heads = 2;
    cfg.question = question;
    cfg
}
