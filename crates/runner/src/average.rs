//! Weight averaging: an exponential moving average of the weights over the
//! training steps (Polyak averaging, as in TensorFlow's
//! `ExponentialMovingAverage` and timm's `ModelEmaV2`). The averaged weights
//! are what dev F1 is measured on and what the run saves, so it costs
//! nothing at inference: the model has the same shape, only other weights.
//!
//! The average starts at the weights after the first step; after step
//! `n` > 1, `avg ← k·avg + (1 − k)·w` with `k = min(decay, (1 + n) / (10 + n))`:
//! early on, while the weights move fast, the average follows them closely.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use encoders::ops::SeqBackend;
use encoders::Tagger;

/// The running average of a tagger's weights.
#[derive(Clone, Debug)]
pub struct Average<B: Backend> {
    decay: f64,
    /// Updates so far.
    updates: usize,
    /// `None` before the first update.
    model: Option<Tagger<B>>,
}

impl<B: SeqBackend> Average<B> {
    /// An average of the weights of the steps after the first `updates`
    /// (0 for a fresh run; a resumed run's steps, with its saved average
    /// given by [`Self::with_model`]).
    pub fn new(decay: f64, updates: usize) -> Self {
        Average { decay, updates, model: None }
    }

    /// The weight the average keeps at the next update.
    fn keep(&self) -> f64 {
        let n = (self.updates + 1) as f64;
        self.decay.min((1.0 + n) / (10.0 + n))
    }

    /// Folds `model`'s weights (after one more step) into the average.
    pub fn update(&mut self, model: &Tagger<B>) {
        let keep = self.keep();
        self.model = Some(match self.model.take() {
            None => model.clone(),
            Some(average) => {
                let mut current = Flatten { params: Vec::new() };
                model.visit(&mut current);
                let mut blend = Blend { current: current.params.into_iter(), keep };
                let average = average.map(&mut blend);
                assert!(blend.current.next().is_none(), "the average and the model have the same parameters");
                average
            }
        });
        self.updates += 1;
    }

    /// The decay per step (`train.average_decay`).
    pub fn decay(&self) -> f64 {
        self.decay
    }

    /// The averaged weights (none before the first update).
    pub fn model(&self) -> Option<&Tagger<B>> {
        self.model.as_ref()
    }

    /// A saved average, `model` holding its weights.
    pub fn with_model(self, model: Tagger<B>) -> Self {
        Average { model: Some(model), ..self }
    }
}

/// Every float parameter of a module, flattened, in visiting order.
struct Flatten<B: Backend> {
    params: Vec<Tensor<B, 1>>,
}

impl<B: Backend> ModuleVisitor<B> for Flatten<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let v = param.val();
        let n = v.shape().num_elements();
        self.params.push(v.reshape([n]));
    }
}

/// `keep · own + (1 − keep) · current`, parameter by parameter in visiting
/// order ([`SeqBackend::average_step`]: in place on burn-flex).
struct Blend<B: Backend> {
    current: std::vec::IntoIter<Tensor<B, 1>>,
    keep: f64,
}

impl<B: SeqBackend> ModuleMapper<B> for Blend<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, own, mapper) = param.consume();
        let current = self.current.next().expect("the average and the model have the same parameters");
        let current = current.reshape(own.dims());
        Param::from_mapped_value(id, B::average_step(own, current, self.keep), mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use corpus::Scheme;
    use encoders::{EncoderKind, TaggerConfig, TaggerShape};

    type B = NdArray<f32>;

    fn weights(model: &Tagger<B>) -> Vec<f32> {
        let mut f = Flatten { params: Vec::new() };
        model.visit(&mut f);
        f.params.into_iter().flat_map(|t| t.into_data().to_vec::<f32>().unwrap()).collect()
    }

    fn tagger(seed: u64) -> Tagger<B> {
        let device = Default::default();
        <B as burn::tensor::backend::Backend>::seed(&device, seed);
        let mut cfg = TaggerConfig::default();
        cfg.encoder.kind = EncoderKind::Bilstm;
        cfg.features.word_dim = 4;
        cfg.features.char_dim = 3;
        cfg.features.char_filters = 2;
        cfg.encoder.bilstm.hidden = 3;
        let tags = Scheme::Bioes.tag_set(&["X".into()]);
        let shape =
            TaggerShape { words: 5, chars: 5, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
        cfg.init::<B>(shape, &device)
    }

    /// The average equals the recurrence computed by hand, weight by weight,
    /// over models that differ at every weight: the first step's weights,
    /// then blends whose kept share warms up to `decay`.
    #[test]
    fn average_follows_the_recurrence_with_its_warm_up() {
        let _rng = crate::testing::backend_rng();
        let steps: Vec<Tagger<B>> = (1..=5).map(tagger).collect();
        let step_weights: Vec<Vec<f32>> = steps.iter().map(weights).collect();
        for decay in [0.2, 0.999] {
            let mut avg = Average::new(decay, 0);
            assert!(avg.model().is_none());
            let mut want = step_weights[0].clone();
            for (n, model) in steps.iter().enumerate() {
                avg.update(model);
                if n > 0 {
                    let k = decay.min((2.0 + n as f64) / (11.0 + n as f64));
                    for (w, &x) in want.iter_mut().zip(&step_weights[n]) {
                        *w = (k * *w as f64 + (1.0 - k) * x as f64) as f32;
                    }
                }
                let got = weights(avg.model().unwrap());
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() < 1e-5, "decay {decay}, after {} updates: {g} vs {w}", n + 1);
                }
            }
            // The steps differ, so the average is none of them.
            assert_ne!(weights(avg.model().unwrap()), step_weights[4]);
        }
        // Keeps: the warm-up (3/12 at the second update), then the decay.
        let at = |decay: f64, updates: usize| Average::<B>::new(decay, updates).keep();
        assert!((at(0.999, 1) - 3.0 / 12.0).abs() < 1e-12);
        assert_eq!(at(0.9, 10_000), 0.9);
    }
}
