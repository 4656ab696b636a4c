//! Helpers shared by the integration tests: masks, tensor values,
//! closeness checks and a small tagger configuration.
#![allow(dead_code)]

use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::TensorData;
use corpus::batch::{Encoded, Example};
use corpus::tags::Tag;
use corpus::Scheme;
use encoders::attention::MultiHeadAttention;
use encoders::positional::Position;
use encoders::{DecoderKind, EncoderKind, QuestionMode, TaggerConfig, TaggerShape};

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

/// Seeds the backend's random numbers and holds them for the test: Burn
/// draws from one generator per backend, shared by every test of a binary,
/// and the tests run on parallel threads, so without the lock a test's
/// draws depend on what the others drew meanwhile (a gradient check then
/// met a draw it was never run on). Keep the guard to the end of the test.
pub fn seeded<B: Backend>(device: &B::Device, seed: u64) -> std::sync::MutexGuard<'static, ()> {
    static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = RNG.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    B::seed(device, seed);
    guard
}

/// Every `|a − b| ≤ tol`.
pub fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "{what}: element {i}: {x} vs {y}");
    }
}

/// Every `|a − b| ≤ tol·(1 + |b|)`, for values that different kernels sum
/// in different orders.
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

/// Two tagged sentences (3 and 2 tokens, tags of a one-type BIOES set) as
/// plain examples, and as contexts of questions with every reading-cue
/// class 1..=4 somewhere.
pub fn two_sentences() -> (Vec<Example>, Vec<Example>) {
    let data = vec![
        Encoded {
            words: vec![2, 3, 4],
            chars: vec![vec![2], vec![3, 4], vec![5]],
            caps: vec![2, 4, 3],
            bigrams: vec![2, 3, 4],
            tags: Some(vec![1, 3, 0]),
        },
        Encoded {
            words: vec![5, 2],
            chars: vec![vec![6, 2], vec![2]],
            caps: vec![1, 2],
            bigrams: vec![5, 1],
            tags: Some(vec![4, 0]),
        },
    ];
    let questions = [vec![3, 5], vec![4]];
    let with_questions: Vec<Example> = data
        .iter()
        .zip(&questions)
        .map(|(e, q)| Example::Asked {
            context: e.clone(),
            question: Encoded {
                words: q.clone(),
                chars: q.iter().map(|&w| vec![w]).collect(),
                caps: vec![1; q.len()],
                bigrams: Vec::new(),
                tags: None,
            },
            cues: (0..e.words.len() * corpus::qa::cues::CUES).map(|k| (k % 4 + 1) as u32).collect(),
        })
        .collect();
    (data.into_iter().map(Example::Plain).collect(), with_questions)
}

/// Every kind of tagger the tests build, as (encoder, positions, decoder,
/// question mode); see [`tagger_variant`].
pub const TAGGERS: [(EncoderKind, Position, DecoderKind, QuestionMode); 13] = {
    use QuestionMode::{Coattention, Concat, Cross, Flow};
    [
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Crf, QuestionMode::None),
        (EncoderKind::Attention, Position::Relative, DecoderKind::Crf, QuestionMode::None),
        // With the character Transformer (the Learned-positions tagger).
        (EncoderKind::Attention, Position::Learned, DecoderKind::Softmax, QuestionMode::None),
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Crf, Concat),
        (EncoderKind::Attention, Position::Sinusoidal, DecoderKind::Softmax, Concat),
        (EncoderKind::Attention, Position::Relative, DecoderKind::Crf, Cross),
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Pointer, Concat),
        (EncoderKind::Attention, Position::Sinusoidal, DecoderKind::SpanCrf, Cross),
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Pointer, Flow),
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::SpanCrf, Coattention),
        // The other positions in the scores: RoPE, ALiBi, T5's buckets.
        (EncoderKind::Attention, Position::Rope, DecoderKind::Crf, QuestionMode::None),
        (EncoderKind::Attention, Position::Alibi, DecoderKind::Softmax, Concat),
        (EncoderKind::Attention, Position::T5, DecoderKind::Crf, Cross),
    ]
};

/// One of [`TAGGERS`]: [`small_tagger`] with every feature on (capitals,
/// bigrams, two BiLSTM layers; the character Transformer with learned
/// positions; reading cues and the aligned question embedding for QA;
/// post-norm blocks for the concatenating attention tagger, pre-norm for the
/// others), no feature dropout.
pub fn tagger_variant(
    kind: EncoderKind,
    position: Position,
    decoder: DecoderKind,
    question: QuestionMode,
) -> TaggerConfig {
    let mut cfg = small_tagger(kind, question);
    cfg.features.caps_dim = 4;
    cfg.features.bigram_dim = 3;
    cfg.features.dropout = 0.0;
    cfg.encoder.bilstm.layers = 2;
    cfg.encoder.attention.position = position;
    cfg.decoder = decoder;
    if position == Position::Learned {
        cfg.features.char_encoder = encoders::features::CharEncoder::Transformer;
        cfg.features.char_heads = 2;
    }
    if kind == EncoderKind::Attention && question == QuestionMode::Concat {
        cfg.encoder.attention.norm = encoders::transformer::Norm::Post;
    }
    if question != QuestionMode::None {
        cfg.features.cue_dim = 2;
        cfg.features.aligned_dim = 8;
    }
    cfg
}

/// The vocabulary sizes of [`two_sentences`], with `tags`.
pub fn variant_shape(tags: &[Tag]) -> TaggerShape<'_> {
    TaggerShape { words: 6, chars: 7, bigrams: 6, tags, scheme: Scheme::Bioes, pretrained: None }
}

/// The gradient of `Σ out ∘ w` for a fixed, sign-mixed `w` with respect to
/// every parameter of the attention layer `m` that produced `out`: the
/// weight and bias of each projection, then the relative positions' `u`
/// and `v` and the T5 table where the layer has them.
pub fn attention_grads<B: AutodiffBackend>(m: &MultiHeadAttention<B>, out: Tensor<B, 3>) -> Vec<Vec<f32>> {
    let w: Vec<f32> = (0..out.shape().num_elements()).map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0).collect();
    let w = Tensor::<B, 3>::from_data(TensorData::new(w, out.shape()), &out.device());
    let g = (out * w).sum().backward();
    let grad = |p: &burn::module::Param<Tensor<B, 2>>| values(p.val().grad(&g).unwrap());
    let mut all = Vec::new();
    for lin in [&m.query, &m.key, &m.value, &m.output] {
        all.push(grad(&lin.weight));
        all.push(values(lin.bias.as_ref().unwrap().val().grad(&g).unwrap()));
    }
    if let Some(rel) = &m.relative {
        all.push(grad(&rel.u));
        all.push(grad(&rel.v));
    }
    if let Some(t) = &m.t5 {
        all.push(grad(t));
    }
    all
}
