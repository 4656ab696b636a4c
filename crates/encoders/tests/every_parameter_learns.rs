//! Every parameter of every tagger gets a gradient: a parameter built
//! without `require_grad` would silently stay at its initial value.

mod common;

use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use corpus::batch::{Batch, Encoded, Example};
use corpus::Scheme;
use encoders::input::tags_tensor;
use encoders::positional::Position;
use encoders::{DecoderKind, EncoderKind, QuestionMode, TaggerInput, TaggerShape};

type AD = Autodiff<NdArray<f32>>;

struct Missing<'a> {
    grads: &'a <AD as burn::tensor::backend::AutodiffBackend>::Gradients,
    missing: Vec<String>,
}

impl ModuleVisitor<AD> for Missing<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<AD, D>>) {
        let g = param.val().grad(self.grads);
        match g {
            None => self.missing.push(format!("{:?} {:?}", param.id, param.val().dims())),
            Some(g) => {
                let total: f32 = g.abs().sum().into_scalar();
                if total == 0.0 {
                    self.missing.push(format!("{:?} {:?} (zero)", param.id, param.val().dims()));
                }
            }
        }
    }
}

#[test]
fn every_parameter_of_every_tagger_gets_a_gradient() {
    let dev = Default::default();
    AD::seed(&dev, 1);
    let tags = Scheme::Bioes.tag_set(&["X".into()]);
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
    // The same sentences as contexts of questions (extractive QA).
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
            // Every cue class 1..=4 somewhere, so each cue embedding learns.
            cues: (0..e.words.len() * corpus::cues::CUES).map(|k| (k % 4 + 1) as u32).collect(),
        })
        .collect();
    let plain: Vec<Example> = data.into_iter().map(Example::Plain).collect();
    use QuestionMode::{Concat, Cross};
    for (kind, position, decoder, question) in [
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Crf, QuestionMode::None),
        (EncoderKind::Attention, Position::Relative, DecoderKind::Crf, QuestionMode::None),
        (EncoderKind::Attention, Position::Learned, DecoderKind::Softmax, QuestionMode::None),
        // With the character Transformer (below: the Learned-positions softmax tagger).
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Crf, Concat),
        (EncoderKind::Attention, Position::Sinusoidal, DecoderKind::Softmax, Concat),
        (EncoderKind::Attention, Position::Relative, DecoderKind::Crf, Cross),
        (EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Pointer, Concat),
        (EncoderKind::Attention, Position::Sinusoidal, DecoderKind::SpanCrf, Cross),
    ] {
        let examples = if question == QuestionMode::None { &plain } else { &with_questions };
        let batch = Batch::pad(examples, &[0, 1]);
        let mut cfg = common::small_tagger(kind, question);
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
        if question != QuestionMode::None {
            // The reading cues and the aligned question embedding too.
            cfg.features.cue_dim = 2;
            cfg.features.aligned_dim = 8;
        }
        let model = cfg.init::<AD>(
            TaggerShape { words: 6, chars: 7, bigrams: 6, tags: &tags, scheme: Scheme::Bioes, pretrained: None },
            &dev,
        );
        let input = TaggerInput::<AD>::from_batch(&batch, &dev);
        let loss = model.loss(&input, tags_tensor(batch.context(), &dev).unwrap()).unwrap();
        let grads = loss.backward();
        let mut v = Missing { grads: &grads, missing: Vec::new() };
        model.visit(&mut v);
        assert!(
            v.missing.is_empty(),
            "{kind:?}/{position:?}/{decoder:?}/{question:?}: no gradient for {:?}",
            v.missing
        );
    }
}
