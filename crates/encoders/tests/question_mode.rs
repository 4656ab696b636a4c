//! A tagger reads questions as the question mode it was built with says,
//! and a batch that does not fit that mode is an error, not a silent
//! fallback: questions for a plain tagger, or none for a QA tagger.

mod common;

use burn::backend::NdArray;
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
            tags: Some(tags.to_vec()),
        };
        let question = Encoded {
            words: question.to_vec(),
            chars: question.iter().map(|&w| vec![w]).collect(),
            caps: vec![2; question.len()],
            tags: None,
        };
        if questions {
            let cues = vec![1; words.len() * corpus::cues::CUES];
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
    ] {
        let shape = TaggerShape { words: 6, chars: 6, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
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
    let shape = || TaggerShape { words: 6, chars: 6, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
    let bilstm = common::small_tagger(EncoderKind::Bilstm, QuestionMode::None).init::<B>(shape(), &dev);
    assert_eq!(bilstm.attention_layers(), 0);
    for layers in [1, 3] {
        let mut cfg = common::small_tagger(EncoderKind::Attention, QuestionMode::Cross);
        cfg.encoder.attention.layers = layers;
        assert_eq!(cfg.init::<B>(shape(), &dev).attention_layers(), layers);
    }
}
