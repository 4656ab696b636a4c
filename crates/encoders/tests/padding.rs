//! Padding never changes what an encoder computes for a real token.

mod common;

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::Distribution;
use common::{assert_close, rows, seeded, values};
use encoders::attention::{AttentionPlan, MultiHeadConfig};
use encoders::bilstm::BiLstmConfig;
use encoders::positional::Position;
use encoders::transformer::AttentionConfig;

type B = NdArray<f32>;

fn dev() -> burn::backend::ndarray::NdArrayDevice {
    Default::default()
}

fn mask(lengths: &[usize], l: usize) -> Tensor<B, 2, Bool> {
    common::mask(lengths, l, &dev())
}

/// Runs `f` on a padded batch of three sentences and on each alone (with
/// junk in the padding), and compares the real positions.
fn check_padding_invariance(f: impl Fn(Tensor<B, 3>, Tensor<B, 2, Bool>) -> Tensor<B, 3>, d: usize, what: &str) {
    let _rng = seeded::<B>(&dev(), 1);
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
        let pad = values(out.clone().slice([s..s + 1, n..l, 0..dout]));
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
    let _rng = seeded::<B>(&dev(), 2);
    let x = Tensor::<B, 3>::random([1, 5, 3], Distribution::Normal(0.0, 1.0), &dev());
    let full = lstm.forward(x.clone(), mask(&[5], 5));
    let last = x.slice([0..1, 4..5, 0..3]);
    let alone = lstm.forward(last, mask(&[1], 1));
    let bwd_full = values(full.slice([0..1, 4..5, 4..8]));
    let bwd_alone = values(alone.slice([0..1, 0..1, 4..8]));
    assert_close(&bwd_full, &bwd_alone, 1e-6, "backward state");
}

#[test]
fn attention_encoder_output_is_identical_alone_and_in_a_padded_batch() {
    for position in
        [Position::Sinusoidal, Position::Learned, Position::Relative, Position::Rope, Position::Alibi, Position::T5]
    {
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
    let mha = MultiHeadConfig {
        d_query: 8,
        d_key: 8,
        heads: 2,
        head_dim: 4,
        dropout: 0.0,
        position: Position::Relative,
        scaled: true,
    }
    .init::<B>(&dev());
    let x = Tensor::<B, 3>::random([2, 4, 8], Distribution::Normal(0.0, 1.0), &dev());
    // Sentence 1 has no real key at all.
    let m = mask(&[3, 0], 4);
    let out = mha.forward(x.clone(), x, m, AttentionPlan::dense(), true);
    let w = values(out.weights.unwrap()); // [2, 2, 4, 4]
    for h in 0..2 {
        for i in 0..4 {
            let row = &w[(h * 4 + i) * 4..(h * 4 + i + 1) * 4];
            assert_eq!(row[3], 0.0, "padded key");
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }
    assert!(w[32..].iter().all(|&v| v == 0.0), "fully padded row must be zeros");
    let ctx = values(out.context);
    assert!(ctx.iter().all(|v| v.is_finite()));
}

fn cross_attention() -> encoders::attention::CrossAttention<B> {
    MultiHeadConfig {
        d_query: 8,
        d_key: 6,
        heads: 2,
        head_dim: 4,
        dropout: 0.0,
        position: Position::None,
        scaled: true,
    }
    .init_cross::<B>(&dev())
}

/// `att` from `a [B, La, 8]` (lengths `la`) to `b [B, Lb, 6]` (lengths
/// `lb`): context, and weights when dense.
fn cross(
    att: &encoders::attention::CrossAttention<B>,
    imp: encoders::attention::AttentionImpl,
    a: Tensor<B, 3>,
    la: &[usize],
    b: Tensor<B, 3>,
    lb: &[usize],
) -> (Tensor<B, 3>, Option<Tensor<B, 4>>) {
    let plan = AttentionPlan { imp, block: 2, ..AttentionPlan::dense() };
    let (al, bl) = (a.dims()[1], b.dims()[1]);
    let want = imp == encoders::attention::AttentionImpl::Dense;
    let out = att.forward(a, mask(la, al), b, mask(lb, bl), plan, want);
    (out.context, out.weights)
}

#[test]
fn cross_attention_with_no_real_key_gives_zeros_not_nan() {
    let _rng = seeded::<B>(&dev(), 3);
    let a = Tensor::<B, 3>::random([2, 3, 8], Distribution::Normal(0.0, 1.0), &dev());
    let b = Tensor::<B, 3>::random([2, 4, 6], Distribution::Normal(0.0, 1.0), &dev());
    // Sentence 1's question is empty: every key masked. Sentence 0's third query is padding.
    let (ctx, w) = cross(&cross_attention(), encoders::attention::AttentionImpl::Dense, a, &[2, 3], b, &[4, 0]);
    let ctx = values(ctx); // [2, 3, 8]
    assert!(ctx.iter().all(|v| v.is_finite()));
    assert!(ctx[24..].iter().all(|&v| v == 0.0), "no real key: the context must be zeros");
    assert!(ctx[16..24].iter().all(|&v| v == 0.0), "a padded query gets a zero context");
    assert!(ctx[..16].iter().any(|&v| v != 0.0));
    let w = values(w.unwrap()); // [2, 2, 3, 4]
    assert!(w[24..].iter().all(|&v| v == 0.0), "no real key: zero weights");
    for h in 0..2 {
        for i in 0..2 {
            let row = &w[(h * 3 + i) * 4..(h * 3 + i + 1) * 4];
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "real query's weights sum to 1");
        }
    }
}

#[test]
fn cross_attention_output_does_not_change_when_the_keys_gain_padding() {
    use encoders::attention::AttentionImpl;
    let _rng = seeded::<B>(&dev(), 4);
    let a = Tensor::<B, 3>::random([2, 5, 8], Distribution::Normal(0.0, 1.0), &dev());
    let b = Tensor::<B, 3>::random([2, 3, 6], Distribution::Normal(0.0, 1.0), &dev());
    let att = cross_attention();
    for imp in [AttentionImpl::Dense, AttentionImpl::Chunked, AttentionImpl::Local] {
        let (plain, _) = cross(&att, imp, a.clone(), &[5, 4], b.clone(), &[3, 2]);
        // The same keys with 4 more padded positions of junk.
        let junk = Tensor::<B, 3>::random([2, 4, 6], Distribution::Normal(7.0, 3.0), &dev());
        let (padded, _) = cross(&att, imp, a.clone(), &[5, 4], Tensor::cat(vec![b.clone(), junk], 1), &[3, 2]);
        for s in 0..2 {
            assert_close(&rows(&padded, s, 5), &rows(&plain, s, 5), 1e-5, &format!("{imp:?} sentence {s}"));
        }
    }
}

/// A QA tagger's emissions for a context are the same alone and inside a
/// batch with longer questions and contexts (question joined by concat,
/// by cross-attention, by attention flow or by co-attention; BiLSTM and
/// attention encoders).
#[test]
fn qa_tagger_emissions_are_identical_alone_and_in_a_padded_batch() {
    use corpus::batch::{Batch, Encoded, Example};
    use corpus::Scheme;
    use encoders::{EncoderKind, QuestionMode, TaggerInput, TaggerShape};
    let enc = |words: &[u32], question: &[u32]| Example::Asked {
        context: Encoded {
            words: words.to_vec(),
            chars: words.iter().map(|&w| vec![w, w + 1]).collect(),
            caps: vec![1; words.len()],
            bigrams: Vec::new(),
            tags: None,
        },
        question: Encoded {
            words: question.to_vec(),
            chars: question.iter().map(|&w| vec![w]).collect(),
            caps: vec![2; question.len()],
            bigrams: Vec::new(),
            tags: None,
        },
        cues: (0..words.len() * corpus::qa::cues::CUES).map(|k| (k % 5 + 1) as u32).collect(),
    };
    let data = vec![enc(&[2, 3, 4], &[5, 6]), enc(&[4, 5, 6, 7, 2, 3], &[3, 3, 3, 4, 5]), enc(&[7], &[2])];
    let tags = Scheme::Bioes.tag_set(&["ANS".into()]);
    for (kind, question) in [
        (EncoderKind::Bilstm, QuestionMode::Concat),
        (EncoderKind::Attention, QuestionMode::Concat),
        (EncoderKind::Attention, QuestionMode::Cross),
        (EncoderKind::Bilstm, QuestionMode::Flow),
        (EncoderKind::Bilstm, QuestionMode::Coattention),
    ] {
        let _rng = seeded::<B>(&dev(), 5);
        let mut cfg = common::small_tagger(kind, question);
        cfg.features.caps_dim = 2;
        cfg.features.question_match_dim = 3;
        cfg.features.cue_dim = 2;
        cfg.features.aligned_dim = 3;
        let shape =
            TaggerShape { words: 9, chars: 10, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
        let model = cfg.init::<B>(shape, &dev());
        let t = tags.len();
        let batch = TaggerInput::<B>::from_batch(&Batch::pad(&data, &[0, 1, 2]), &dev());
        let together = model.forward(&batch, false).unwrap().emissions; // [3, 6, T]
        for (s, e) in data.iter().enumerate() {
            let alone =
                model.forward(&TaggerInput::from_batch(&Batch::pad(&data, &[s]), &dev()), false).unwrap().emissions;
            let what = format!("{kind:?}/{question:?} sentence {s}");
            assert_eq!(alone.dims(), [1, e.len(), t], "{what}: one row per context token");
            assert_close(&rows(&alone, 0, e.len()), &rows(&together, s, e.len()), 1e-4, &what);
        }
    }
}

/// A batch padded up to bucket lengths (what a GPU backend runs,
/// `SeqBackend::shape_buckets`) gives every tagger the emissions and the
/// loss of the batch padded to its longest sentence and word.
#[test]
fn every_tagger_computes_the_same_on_a_bucketed_batch() {
    use corpus::batch::Batch;
    use corpus::Scheme;
    use encoders::input::tags_tensor;
    use encoders::{QuestionMode, TaggerInput};
    let tags = Scheme::Bioes.tag_set(&["X".into()]);
    let (plain, with_questions) = common::two_sentences();
    for (kind, position, decoder, question) in common::TAGGERS {
        let _rng = seeded::<B>(&dev(), 3);
        let examples = if question == QuestionMode::None { &plain } else { &with_questions };
        let model =
            common::tagger_variant(kind, position, decoder, question).init::<B>(common::variant_shape(&tags), &dev());
        let exact = Batch::pad(examples, &[0, 1]);
        let wide = exact.bucketed();
        assert!(wide.context().len > exact.context().len && wide.context().word_len > exact.context().word_len);
        let what = format!("{kind:?}/{position:?}/{decoder:?}/{question:?}");
        let run = |batch: &Batch| {
            let input = TaggerInput::<B>::from_batch(batch, &dev());
            let emissions = model.forward(&input, false).unwrap().emissions;
            let loss: f32 = model.loss(&input, tags_tensor(batch.context(), &dev()).unwrap()).unwrap().into_scalar();
            (emissions, loss)
        };
        let ((e1, l1), (e2, l2)) = (run(&exact), run(&wide));
        for (s, &n) in exact.context().lengths.iter().enumerate() {
            assert_close(&rows(&e2, s, n), &rows(&e1, s, n), 1e-4, &format!("{what}: sentence {s}"));
        }
        assert!((l1 - l2).abs() <= 1e-4 * l1.abs().max(1.0), "{what}: loss {l1} exact, {l2} bucketed");
    }
}
