//! `output_dropout` (TENER's `fc_dropout`): dropout on the encoder's output
//! before the emission layer, in training only, keeping the expectation.

mod common;

use burn::backend::{Autodiff, NdArray};
use burn::module::{AutodiffModule, Module};
use corpus::batch::Batch;
use corpus::Scheme;
use encoders::{EncoderKind, QuestionMode, Tagger, TaggerConfig, TaggerInput};

type B = NdArray<f32>;
type AD = Autodiff<B>;

/// A small attention tagger with no dropout anywhere but `output_dropout`.
fn config(output_dropout: f64) -> TaggerConfig {
    let mut cfg = common::small_tagger(EncoderKind::Attention, QuestionMode::None);
    cfg.features.dropout = 0.0;
    cfg.encoder.attention.dropout = 0.0;
    cfg.encoder.attention.attention_dropout = 0.0;
    cfg.output_dropout = output_dropout;
    cfg
}

fn build(output_dropout: f64, dev: &burn::backend::ndarray::NdArrayDevice) -> Tagger<AD> {
    let tags = Scheme::Bioes.tag_set(&["X".into()]);
    config(output_dropout).init::<AD>(common::variant_shape(&tags), dev)
}

#[test]
fn output_dropout_acts_in_training_only_and_keeps_the_expectation() {
    let dev = Default::default();
    let (plain, _) = common::two_sentences();
    let batch = Batch::pad(&plain, &[0, 1]);
    let input = TaggerInput::<AD>::from_batch(&batch, &dev);
    let emissions = |m: &Tagger<AD>| common::values(m.forward(&input, false).unwrap().emissions);
    // The same weights in both (parameters are initialised lazily, at first
    // use, and a clone of a lazy one draws its own): `output_dropout` is not
    // in the record.
    let off = build(0.0, &dev);
    let off = build(0.0, &dev).load_record(off.into_record()); // every parameter initialised
    let on = build(0.5, &dev).load_record(off.clone().into_record());

    // Inference: the same tagger with or without it.
    let infer = TaggerInput::<B>::from_batch(&batch, &dev);
    let valid = |m: &Tagger<AD>| common::values(m.valid().forward(&infer, false).unwrap().emissions);
    let reference = valid(&off);
    assert_eq!(valid(&on), reference);
    // No dropout anywhere: the training forward is inference, up to the
    // order of the character CNN's sums (a product in training, per-offset
    // tables at inference on the CPU backends: `encoders::ops::char_cnn`).
    let training = emissions(&off);
    assert_eq!(training.len(), reference.len());
    for (i, (t, r)) in training.iter().zip(&reference).enumerate() {
        assert!((t - r).abs() <= 1e-5 * (1.0 + r.abs()), "emission {i}: training forward {t}, inference {r}");
    }

    // Training: the emissions move, the same seed draws the same masks.
    encoders::dropout::seed(11);
    let first = emissions(&on);
    encoders::dropout::seed(11);
    assert_eq!(emissions(&on), first);
    assert_ne!(first, reference);

    // The emission layer is linear, so over many masks the emissions average
    // to the ones without dropout: each mean within 5 standard errors.
    let draws = 100;
    let samples: Vec<Vec<f32>> = (0..draws).map(|_| emissions(&on)).collect();
    for (i, &r) in reference.iter().enumerate() {
        let xs: Vec<f64> = samples.iter().map(|e| e[i] as f64).collect();
        let mean = xs.iter().sum::<f64>() / draws as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (draws - 1) as f64;
        let se = (var / draws as f64).sqrt();
        assert!((mean - r as f64).abs() <= 5.0 * se + 1e-4, "emission {i}: mean {mean} ± {se} against {r}");
    }
}

#[test]
fn output_dropout_outside_zero_to_one_is_refused() {
    let err = config(1.0).validate().unwrap_err();
    assert!(err.contains("output_dropout"), "{err}");
}
