//! A tagger reads questions as the question mode it was built with says,
//! and a batch that does not fit that mode is an error, not a silent
//! fallback: questions for a plain tagger, or none for a QA tagger.

mod common;

use burn::backend::NdArray;
use burn::tensor::Tensor;
use corpus::batch::{Batch, Encoded, Example};
use corpus::Scheme;
use encoders::input::tags_tensor;
use encoders::{EncoderKind, QuestionMode, TaggerError, TaggerInput, TaggerShape};

type B = NdArray<f32>;

/// Two contexts, tagged, with a question each when `questions`.
fn batch(questions: bool) -> Batch {
    let sentence = |words: &[u32], tags: &[u32], question: &[u32]| {
        let context = Encoded {
            words: words.to_vec(),
            chars: words.iter().map(|&w| vec![w]).collect(),
            caps: vec![1; words.len()],
            bigrams: Vec::new(),
            tags: Some(tags.to_vec()),
        };
        let question = Encoded {
            words: question.to_vec(),
            chars: question.iter().map(|&w| vec![w]).collect(),
            caps: vec![2; question.len()],
            bigrams: Vec::new(),
            tags: None,
        };
        if questions {
            let cues = vec![1; words.len() * corpus::qa::cues::CUES];
            Example::Asked { context, question, cues }
        } else {
            Example::Plain(context)
        }
    };
    Batch::pad(&[sentence(&[2, 3, 4], &[1, 3, 0], &[5, 2]), sentence(&[5, 2], &[4, 0], &[3])], &[0, 1])
}

#[test]
fn a_batch_that_does_not_fit_the_question_mode_is_an_error() {
    let dev = Default::default();
    let tags = Scheme::Bioes.tag_set(&["ANS".into()]);
    for (kind, mode) in [
        (EncoderKind::Bilstm, QuestionMode::None),
        (EncoderKind::Attention, QuestionMode::None),
        (EncoderKind::Bilstm, QuestionMode::Concat),
        (EncoderKind::Attention, QuestionMode::Concat),
        (EncoderKind::Attention, QuestionMode::Cross),
        (EncoderKind::Bilstm, QuestionMode::Flow),
        (EncoderKind::Bilstm, QuestionMode::Coattention),
    ] {
        let shape =
            TaggerShape { words: 6, chars: 6, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
        let model = common::small_tagger(kind, mode).init::<B>(shape, &dev);
        assert_eq!(model.question_mode(), mode);
        let what = format!("{kind:?}/{mode:?}");
        for questions in [false, true] {
            let padded = batch(questions);
            let input = TaggerInput::<B>::from_batch(&padded, &dev);
            let gold = tags_tensor::<B>(padded.context(), &dev).unwrap();
            let fits = questions == (mode != QuestionMode::None);
            if fits {
                let out = model.forward(&input, false).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(out.emissions.dims(), [2, 3, tags.len()], "{what}: one row per context token");
                assert!(model.loss(&input, gold).is_ok(), "{what}");
                assert_eq!(model.decode(&input).unwrap().iter().map(Vec::len).collect::<Vec<_>>(), [3, 2], "{what}");
                continue;
            }
            let want = if questions { TaggerError::UnexpectedQuestion } else { TaggerError::MissingQuestion(mode) };
            let err = model.forward(&input, false).err();
            assert_eq!(err, Some(want), "{what}, questions {questions}");
            assert_eq!(model.loss(&input, gold).err(), Some(want), "{what}: loss");
            assert_eq!(model.decode(&input).err(), Some(want), "{what}: decode");
            let message = want.to_string();
            let names = if questions { "\"none\"" } else { mode.as_str() };
            assert!(message.contains(names), "{what}: the message names the mode: {message}");
        }
    }
}

#[test]
fn attention_layers_count_the_attention_blocks() {
    let dev = Default::default();
    let tags = Scheme::Bioes.tag_set(&["X".into()]);
    let shape = || TaggerShape { words: 6, chars: 6, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
    let bilstm = common::small_tagger(EncoderKind::Bilstm, QuestionMode::None).init::<B>(shape(), &dev);
    assert_eq!(bilstm.attention_layers(), 0);
    for layers in [1, 3] {
        let mut cfg = common::small_tagger(EncoderKind::Attention, QuestionMode::Cross);
        cfg.encoder.attention.layers = layers;
        assert_eq!(cfg.init::<B>(shape(), &dev).attention_layers(), layers);
    }
}

/// Asked for weights, a cross reader gives each layer's context → question
/// cross-attention `[B, H, L, Lq]` (a distribution over the real question
/// tokens for every real context token, zero elsewhere) beside its context
/// self-attention; a concat reader gives its self-attention over the joint
/// `question [SEP] context` rows and no cross weights.
#[test]
fn readers_give_their_context_to_question_weights() {
    let dev = Default::default();
    let tags = Scheme::Bioes.tag_set(&["ANS".into()]);
    let shape = || TaggerShape { words: 6, chars: 6, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
    let padded = batch(true);
    let input = TaggerInput::<B>::from_batch(&padded, &dev);
    // Contexts of 3 and 2 tokens, questions of 2 and 1.
    let (contexts, questions) = ([3usize, 2], [2usize, 1]);

    // Each layer's weights: a distribution over the real question tokens for
    // every real context token, zero elsewhere.
    let check_cross = |cross: &[Tensor<B, 4>], what: &str| {
        for w in cross {
            let [b, h, l, lq] = w.dims();
            assert_eq!([b, l, lq], [2, 3, 2], "{what}");
            let v: Vec<f32> = w.clone().into_data().iter::<f32>().collect();
            for (row, (&nc, &nq)) in contexts.iter().zip(&questions).enumerate() {
                for head in 0..h {
                    for i in 0..l {
                        let at = |j: usize| v[((row * h + head) * l + i) * lq + j];
                        let real: f32 = (0..nq).map(at).sum();
                        let padding: f32 = (nq..lq).map(at).sum();
                        let want = if i < nc { 1.0 } else { 0.0 };
                        assert!(
                            (real - want).abs() < 1e-5 && padding == 0.0,
                            "{what}: row {row} head {head} token {i}"
                        );
                    }
                }
            }
        }
    };

    let cross = common::small_tagger(EncoderKind::Attention, QuestionMode::Cross).init::<B>(shape(), &dev);
    let out = cross.forward(&input, true).unwrap();
    assert_eq!((out.attention.len(), out.cross.len()), (cross.attention_layers(), cross.attention_layers()));
    check_cross(&out.cross, "cross");
    for w in &out.attention {
        assert_eq!(w.dims()[2..], [3, 3], "the cross reader's self-attention is over the context");
    }

    // The fusing readers: their context-to-question weights, one layer of one head.
    for mode in [QuestionMode::Flow, QuestionMode::Coattention] {
        let model = common::small_tagger(EncoderKind::Bilstm, mode).init::<B>(shape(), &dev);
        let out = model.forward(&input, true).unwrap();
        assert!(out.attention.is_empty(), "{mode:?}");
        assert_eq!(out.cross.iter().map(|w| w.dims()[1]).collect::<Vec<_>>(), [1], "{mode:?}");
        check_cross(&out.cross, mode.as_str());
        assert!(model.forward(&input, false).unwrap().cross.is_empty(), "{mode:?}: weights only when asked");
    }

    let concat = common::small_tagger(EncoderKind::Attention, QuestionMode::Concat).init::<B>(shape(), &dev);
    let out = concat.forward(&input, true).unwrap();
    assert!(out.cross.is_empty());
    for w in &out.attention {
        // The longest question + [SEP] + context: 2 + 1 + 3.
        assert_eq!(w.dims()[2..], [6, 6], "the concat reader's self-attention is over the joint rows");
    }
}

/// The modes a message offers for question-answering data are every mode but
/// `None`, each under the name a configuration writes, and a plain tagger
/// given a QA-only setting is told all of them.
#[test]
fn a_qa_setting_on_a_plain_tagger_names_every_answering_mode() {
    let choices = QuestionMode::answering_choices();
    assert_eq!(choices, "\"concat\", \"cross\", \"flow\" or \"coattention\"");
    assert!(!QuestionMode::ANSWERING.contains(&QuestionMode::None));
    let mut cfg = common::small_tagger(EncoderKind::Bilstm, QuestionMode::None);
    cfg.features.cue_dim = 4;
    let err = cfg.validate().expect_err("cue_dim needs questions");
    assert!(err.contains("features.cue_dim") && err.ends_with(&choices), "{err}");
    for mode in QuestionMode::ANSWERING {
        cfg.question = mode;
        cfg.encoder.kind = if mode == QuestionMode::Cross { EncoderKind::Attention } else { EncoderKind::Bilstm };
        assert_eq!(cfg.validate(), Ok(()), "{mode:?} reads the cues");
    }
}
