//! Weight averaging, two ways; either is what dev F1 is measured on and
//! what the run saves, so it costs nothing at inference: the model has the
//! same shape, only other weights.
//!
//! - [`Weighting::Exponential`] (`train.average_decay`): an exponential
//!   moving average of the weights over the training steps (Polyak
//!   averaging, as in TensorFlow's `ExponentialMovingAverage` and timm's
//!   `ModelEmaV2`). The average starts at the weights after the first
//!   step; after step `n` > 1, `avg ← k·avg + (1 − k)·w` with
//!   `k = min(decay, (1 + n) / (10 + n))`: early on, while the weights move
//!   fast, the average follows them closely.
//! - [`Weighting::Epochs`] (`train.swa_start`): stochastic weight averaging
//!   (Izmailov et al. 2018; PyTorch's `swa_utils.AveragedModel`), the plain
//!   mean of the weights at the end of each epoch from the start epoch on:
//!   after the `n`-th of them, `avg ← (n − 1)/n · avg + 1/n · w`.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use encoders::ops::SeqBackend;
use encoders::Tagger;

use crate::setup::config::TrainConfig;

/// How an [`Average`] weighs the weights it folds in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Weighting {
    /// After every step, an exponential moving average with this decay.
    Exponential(f64),
    /// At the end of each epoch from this one on, the plain mean.
    Epochs(usize),
}

impl Weighting {
    /// The run's averaging, if it averages (`train.average_decay`,
    /// `train.swa_start`; the config allows one of them at most).
    pub fn of(t: &TrainConfig) -> Option<Weighting> {
        if t.swa_start > 0 {
            Some(Weighting::Epochs(t.swa_start))
        } else {
            (t.average_decay > 0.0).then_some(Weighting::Exponential(t.average_decay))
        }
    }

    /// How many updates an average has had after `epochs` whole epochs
    /// and `steps` steps.
    pub fn updates(self, epochs: usize, steps: usize) -> usize {
        match self {
            Weighting::Exponential(_) => steps,
            Weighting::Epochs(start) => (epochs + 1).saturating_sub(start),
        }
    }
}

/// The running average of a tagger's weights.
#[derive(Clone, Debug)]
pub struct Average<B: Backend> {
    weighting: Weighting,
    /// Updates so far.
    updates: usize,
    /// `None` before the first update.
    model: Option<Tagger<B>>,
}

impl<B: SeqBackend> Average<B> {
    /// An average that has had `updates` updates (0 for a fresh run; for a
    /// resumed run [`Weighting::updates`], with its saved average given by
    /// [`Self::with_model`]).
    pub fn new(weighting: Weighting, updates: usize) -> Self {
        Average { weighting, updates, model: None }
    }

    /// The weight the average keeps at the next update.
    fn keep(&self) -> f64 {
        match self.weighting {
            Weighting::Exponential(decay) => {
                let n = (self.updates + 1) as f64;
                decay.min((1.0 + n) / (10.0 + n))
            }
            Weighting::Epochs(_) => self.updates as f64 / (self.updates + 1) as f64,
        }
    }

    /// Folds `model`'s weights (after one more step, or epoch) into the average.
    pub fn update(&mut self, model: &Tagger<B>) {
        let keep = self.keep();
        self.model = Some(match self.model.take() {
            None => model.clone(),
            Some(average) => {
                let mut blend = Blend { current: flatten(model).into_iter(), keep };
                let average = average.map(&mut blend);
                assert!(blend.current.next().is_none(), "the average and the model have the same parameters");
                average
            }
        });
        self.updates += 1;
    }

    pub fn weighting(&self) -> Weighting {
        self.weighting
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

/// Every float parameter of a tagger, flattened, in visiting order.
pub(crate) fn flatten<B: Backend>(model: &Tagger<B>) -> Vec<Tensor<B, 1>> {
    let mut f = Flatten { params: Vec::new() };
    model.visit(&mut f);
    f.params
}

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
    use crate::testing::weights;
    use burn::backend::NdArray;
    use corpus::Scheme;
    use encoders::{EncoderKind, TaggerConfig, TaggerShape};

    type B = NdArray<f32>;

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
            let mut avg = Average::new(Weighting::Exponential(decay), 0);
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
        let at = |decay: f64, updates: usize| Average::<B>::new(Weighting::Exponential(decay), updates).keep();
        assert!((at(0.999, 1) - 3.0 / 12.0).abs() < 1e-12);
        assert_eq!(at(0.9, 10_000), 0.9);
    }

    /// Stochastic weight averaging: the plain mean of the models folded in,
    /// weight by weight, whatever their number; and the updates a resumed
    /// run's average has had, counted from the start epoch.
    #[test]
    fn epoch_weighting_is_the_plain_mean() {
        let _rng = crate::testing::backend_rng();
        let models: Vec<Tagger<B>> = (1..=4).map(tagger).collect();
        let each: Vec<Vec<f32>> = models.iter().map(weights).collect();
        let mut avg = Average::new(Weighting::Epochs(3), 0);
        for (n, model) in models.iter().enumerate() {
            avg.update(model);
            let got = weights(avg.model().unwrap());
            for (i, g) in got.iter().enumerate() {
                let mean = each[..=n].iter().map(|w| w[i] as f64).sum::<f64>() / (n + 1) as f64;
                assert!((*g as f64 - mean).abs() < 1e-5, "after {} updates, weight {i}: {g} vs {mean}", n + 1);
            }
        }
        // Epochs 3, 4 and 5 are averaged after 5 whole epochs; none after 2.
        assert_eq!(Weighting::Epochs(3).updates(5, 999), 3);
        assert_eq!(Weighting::Epochs(3).updates(2, 999), 0);
        assert_eq!(Weighting::Exponential(0.9).updates(5, 999), 999);
    }
}
