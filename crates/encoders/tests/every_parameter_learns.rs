//! Every parameter of every tagger gets a gradient: a parameter built
//! without `require_grad` would silently stay at its initial value.

mod common;

use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use corpus::batch::Batch;
use corpus::Scheme;
use encoders::input::tags_tensor;
use encoders::{QuestionMode, TaggerInput};

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
    let (plain, with_questions) = common::two_sentences();
    for (kind, position, decoder, question) in common::TAGGERS {
        let examples = if question == QuestionMode::None { &plain } else { &with_questions };
        let batch = Batch::pad(examples, &[0, 1]);
        let model =
            common::tagger_variant(kind, position, decoder, question).init::<AD>(common::variant_shape(&tags), &dev);
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
