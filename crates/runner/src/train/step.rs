//! The one training step, used by `seqlab train`, `bench train` and `bench
//! memory`: word and character dropout, forward and backward (cut into
//! concurrent parts on the CPU), the finiteness check, the optimizer update.

use crate::setup::config::{OptimizerKind, RunConfig};
use crate::train::adam::FusedAdam;
use crate::train::average::{Average, Weighting};
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamW, AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer, Sgd, SgdConfig};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use corpus::batch::Batch;
use corpus::vocab::{PAD_ID, UNK_ID};
use encoders::input::tags_tensor;
use encoders::ops::TrainBackend;
use encoders::tagger::TaggerError;
use encoders::{Tagger, TaggerInput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The optimizers a config can name.
#[derive(Clone)]
pub enum Opt<B: TrainBackend> {
    /// Burn's Adam, each parameter's update fused on the CPU ([`FusedAdam`]).
    Adam(OptimizerAdaptor<FusedAdam, Tagger<B>, B>),
    AdamW(OptimizerAdaptor<AdamW, Tagger<B>, B>),
    Sgd(OptimizerAdaptor<Sgd<B::InnerBackend>, Tagger<B>, B>),
}

impl<B: TrainBackend> Opt<B> {
    pub fn new(cfg: &RunConfig) -> Self {
        let t = &cfg.train;
        let clip = (t.grad_clip > 0.0).then(|| GradientClippingConfig::Norm(t.grad_clip as f32));
        let decay = (t.weight_decay > 0.0).then(|| WeightDecayConfig::new(t.weight_decay as f32));
        match t.optimizer {
            OptimizerKind::Adam => Opt::Adam(FusedAdam::new(t.weight_decay as f32).init(t.grad_clip as f32)),
            OptimizerKind::Adamw => {
                Opt::AdamW(AdamWConfig::new().with_weight_decay(t.weight_decay as f32).with_grad_clipping(clip).init())
            }
            OptimizerKind::Sgd => Opt::Sgd(
                SgdConfig::new()
                    .with_weight_decay(decay)
                    .with_momentum((t.momentum > 0.0).then(|| MomentumConfig::new().with_momentum(t.momentum)))
                    .with_gradient_clipping(clip)
                    .init(),
            ),
        }
    }

    pub fn step(&mut self, lr: f64, model: Tagger<B>, grads: GradientsParams) -> Tagger<B> {
        match self {
            Opt::Adam(o) => o.step(lr, model, grads),
            Opt::AdamW(o) => o.step(lr, model, grads),
            Opt::Sgd(o) => o.step(lr, model, grads),
        }
    }
}

/// What a training step did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The model was updated; the batch's mean loss.
    Stepped(f64),
    /// The loss or a gradient was not finite (why): the model is unchanged.
    Skipped(String),
}

/// A model and its optimizer: what a training step updates.
pub struct Learner<B: TrainBackend> {
    /// Always `Some` between steps (taken while the optimizer updates it).
    model: Option<Tagger<B>>,
    pub opt: Opt<B>,
    /// Word and character dropout on the training batches.
    pub dropout: TokenDropout,
    /// The running average of the weights, when the run averages them.
    average: Option<Average<B::InnerBackend>>,
}

impl<B: TrainBackend> Learner<B> {
    pub fn new(model: Tagger<B>, opt: Opt<B>, dropout: TokenDropout) -> Self {
        Learner { model: Some(model), opt, dropout, average: None }
    }

    /// Keeps an average of the weights from here on ([`Weighting::of`] the
    /// run's config; `None`: none), one that has had `updates` updates.
    pub fn averaging(mut self, weighting: Option<Weighting>, updates: usize) -> Self {
        self.average = weighting.map(|w| Average::new(w, updates));
        self
    }

    /// At the end of `epoch`: folds the weights into an average over
    /// epochs once it has started ([`Weighting::Epochs`]).
    pub fn end_epoch(&mut self, epoch: usize) {
        let Some(average) = self.average.as_mut() else { return };
        if let Weighting::Epochs(start) = average.weighting() {
            if epoch >= start {
                average.update(&self.model.as_ref().expect("the model is back after every step").valid());
            }
        }
    }

    /// The weight average, when the run keeps one.
    pub fn average(&self) -> Option<&Average<B::InnerBackend>> {
        self.average.as_ref()
    }

    /// Replaces the average's weights by saved ones (a resumed run's).
    pub fn restore_average(&mut self, model: Tagger<B::InnerBackend>) {
        self.average = self.average.take().map(|a| a.with_model(model));
    }

    /// What is evaluated and saved: the averaged weights when the run
    /// averages them, else the model as it is now, on the inference backend.
    pub fn evaluated(&self) -> Tagger<B::InnerBackend> {
        match self.average.as_ref().and_then(Average::model) {
            Some(average) => average.clone(),
            None => self.valid(),
        }
    }

    pub fn model(&self) -> &Tagger<B> {
        self.model.as_ref().expect("the model is back after every step")
    }

    /// The model as it is now, on the inference backend.
    pub fn valid(&self) -> Tagger<B::InnerBackend> {
        self.model().valid()
    }

    /// One training step on `batch` at learning rate `lr`, every random draw
    /// (dropout masks, word and character dropout) from `seed`: the mean
    /// loss, or why the step was not taken (a non-finite loss or gradient;
    /// the model is then unchanged). An error when the batch does not fit the tagger's
    /// question mode.
    pub fn step(&mut self, batch: &Batch, seed: u64, lr: f64, device: &B::Device) -> Result<Outcome, TaggerError> {
        encoders::dropout::seed_all::<B>(device, seed);
        let dropped;
        let batch = if self.dropout.any() {
            dropped = self.dropout.apply(batch, seed);
            &dropped
        } else {
            batch
        };
        let model = self.model.take().expect("the model is back after every step");
        let (value, grads) = match loss_and_grads(&model, batch, seed, device) {
            Ok(found) => found,
            Err(e) => {
                self.model = Some(model);
                return Err(e);
            }
        };
        let bad = if !value.is_finite() {
            Some(format!("the loss is {value}"))
        } else if !gradients_finite(&model, &grads) {
            Some("a gradient is NaN or infinite".to_string())
        } else {
            None
        };
        self.model = Some(match bad {
            None => self.opt.step(lr, model, grads),
            Some(_) => model,
        });
        if let (None, Some(average)) = (&bad, self.average.as_mut()) {
            if let Weighting::Exponential(_) = average.weighting() {
                average.update(&self.model.as_ref().expect("just stepped").valid());
            }
        }
        Ok(bad.map_or(Outcome::Stepped(value), Outcome::Skipped))
    }
}

/// Dropout of whole items of the input: a training token's word id (and
/// its character bigram's) becomes `<unk>` with probability `word`, each
/// character of a training word becomes the character `<unk>` with
/// probability `char`. The `<unk>` rows learn what an unseen word,
/// bigram or character reads; `word` is the flair/NCRF++ word dropout,
/// `char` its analogue for the character encoder.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TokenDropout {
    pub word: f64,
    pub char: f64,
}

impl TokenDropout {
    /// The run's (`train.word_dropout`, `train.char_dropout`) for data cut
    /// into tokens this way.
    pub fn of(cfg: &RunConfig, tokenization: corpus::Tokenization) -> Self {
        TokenDropout { word: cfg.train.word_dropout.rate(tokenization), char: cfg.train.char_dropout }
    }

    /// Whether it drops anything.
    pub fn any(&self) -> bool {
        self.word > 0.0 || self.char > 0.0
    }

    /// `batch` with the tagged sentences' items dropped (not the
    /// questions'), drawn from `seed`: the words first, then, when the
    /// tagger reads character bigrams, the bigrams, then the characters, so
    /// that a run without bigrams or character dropout drops the same words
    /// as before.
    pub fn apply(&self, batch: &Batch, seed: u64) -> Batch {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut batch = batch.clone();
        let context = batch.context_mut();
        if self.word > 0.0 {
            let has_bigrams = context.bigrams.iter().any(|&g| g != 0);
            let mut ids = vec![&mut context.words];
            if has_bigrams {
                ids.push(&mut context.bigrams);
            }
            for column in ids {
                for (w, &real) in column.iter_mut().zip(&context.mask) {
                    if real && rng.random_bool(self.word) {
                        *w = UNK_ID as i64;
                    }
                }
            }
        }
        if self.char > 0.0 {
            // Padding characters (of short words and of padding tokens) are 0.
            for c in context.chars.iter_mut().filter(|c| **c != PAD_ID as i64) {
                if rng.random_bool(self.char) {
                    *c = UNK_ID as i64;
                }
            }
        }
        batch
    }
}

/// The mean loss of a training batch and its gradients. The batch is cut
/// into [`SeqBackend::train_shards`] parts (one on a GPU; parts of 16
/// sentences or more on the CPU backends) whose forward and backward passes
/// run concurrently, each on a fork of the model (its own autodiff graph,
/// the same parameters) in a thread pool of its own; part `k` draws its
/// dropout masks from `seed + k`.
/// Each part's mean loss is weighted by its share of the sentences, so the
/// loss and the summed gradients are those of the whole batch.
pub fn loss_and_grads<B: TrainBackend>(
    model: &Tagger<B>,
    batch: &Batch,
    seed: u64,
    device: &B::Device,
) -> Result<(f64, GradientsParams), TaggerError> {
    loss_and_grads_in(model, batch, B::train_shards(batch.size()), seed, device)
}

/// [`loss_and_grads`] with `shards` parts.
pub(crate) fn loss_and_grads_in<B: TrainBackend>(
    model: &Tagger<B>,
    batch: &Batch,
    shards: usize,
    seed: u64,
    device: &B::Device,
) -> Result<(f64, GradientsParams), TaggerError> {
    let part_loss = |k: usize, part: &Batch, model: &Tagger<B>| {
        encoders::dropout::with_seed(seed.wrapping_add(k as u64), || {
            let input = TaggerInput::<B>::from_batch(part, device);
            let gold = tags_tensor::<B>(part.context(), device).expect("training batches carry tags");
            let share = part.size() as f64 / batch.size().max(1) as f64;
            let loss = model.loss(&input, gold)?.mul_scalar(share);
            let value: f64 = loss.clone().into_scalar().elem();
            Ok((value, GradientsParams::from_grads(loss.backward(), model)))
        })
    };
    if shards <= 1 {
        return part_loss(0, batch, model);
    }
    // A clone of a lazily initialised parameter initialises on its own (other
    // values): initialise the model's before the parts copy them.
    initialise(model);
    // Each part runs in a rayon pool of its own (the threads shared out
    // among the parts): Burn's autodiff holds a graph's lock for its whole
    // backward pass (and takes every graph's lock to clean up after one),
    // while the operations inside use the pool. In one shared pool a thread
    // waiting inside one part's backward pass could pick up another part
    // and wait for a lock it holds itself; in a pool of its own, a part's
    // threads only ever run that part.
    let parts = batch.split(shards);
    let threads = rayon::current_num_threads() / parts.len();
    if threads == 0 {
        // Fewer threads than parts: one after another, to the same result.
        let parts: Vec<(f64, GradientsParams)> =
            parts.iter().enumerate().map(|(k, part)| part_loss(k, part, model)).collect::<Result<_, _>>()?;
        return Ok(sum_parts(model, parts));
    }
    let pools: Vec<rayon::ThreadPool> = (0..parts.len())
        .map(|_| rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool"))
        .collect();
    let parts: Vec<Result<(f64, GradientsParams), TaggerError>> = std::thread::scope(|scope| {
        let running: Vec<_> = parts
            .iter()
            .zip(&pools)
            .enumerate()
            .map(|(k, (part, pool))| {
                scope.spawn(move || pool.install(|| part_loss(k, part, &model.clone().fork(device))))
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    Ok(sum_parts(model, parts.into_iter().collect::<Result<Vec<_>, _>>()?))
}

/// The parts' losses and gradients added up, in part order (the same result
/// whichever part finished first).
fn sum_parts<B: AutodiffBackend>(model: &Tagger<B>, parts: Vec<(f64, GradientsParams)>) -> (f64, GradientsParams) {
    let mut sum = GradientsAccumulator::new();
    let mut value = 0.0;
    for (v, grads) in parts {
        value += v;
        sum.accumulate(model, grads);
    }
    (value, sum.grads())
}

/// Initialises every lazily initialised parameter of `model` (Burn creates
/// parameters lazily; each clone of an uninitialised one would draw its own
/// values).
fn initialise<B: Backend, M: Module<B>>(model: &M) {
    struct Touch;
    impl<B: Backend> ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if !param.is_initialized() {
                let _ = param.val();
            }
        }
        fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<B, D, Int>>) {
            if !param.is_initialized() {
                let _ = param.val();
            }
        }
        fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<B, D, Bool>>) {
            if !param.is_initialized() {
                let _ = param.val();
            }
        }
    }
    model.visit(&mut Touch);
}

/// Whether every gradient is finite. A sum of finite values is finite
/// unless it overflows, and a NaN or ±∞ term makes it NaN or ±∞: so
/// `Σ g` finite (one read of each gradient, no copy) says yes. Where it is
/// not, `Σ 0·g` decides exactly (0 unless some element is NaN or ±∞).
fn gradients_finite<B: AutodiffBackend>(model: &Tagger<B>, grads: &GradientsParams) -> bool {
    struct Collect<'a, B: AutodiffBackend> {
        grads: &'a GradientsParams,
        zero_first: bool,
        sums: Vec<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
                self.sums.push(if self.zero_first { g.mul_scalar(0.0).sum() } else { g.sum() });
            }
        }
    }
    let total = |zero_first: bool| {
        let mut c = Collect::<B> { grads, zero_first, sums: Vec::new() };
        model.visit(&mut c);
        if c.sums.is_empty() {
            return 0.0;
        }
        let total: f64 = Tensor::cat(c.sums, 0).sum().into_scalar().elem();
        total
    };
    total(false).is_finite() || total(true).is_finite()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::model::build_model;
    use burn::backend::{Autodiff, Flex};
    use encoders::EncoderKind;

    type A = Autodiff<Flex>;

    /// Every parameter's gradient, in module order.
    fn flat(model: &Tagger<A>, grads: &GradientsParams) -> Vec<Vec<f32>> {
        struct Collect<'a> {
            grads: &'a GradientsParams,
            out: Vec<Vec<f32>>,
        }
        impl ModuleVisitor<A> for Collect<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
                let g = self.grads.get::<Flex, D>(param.id).expect("every parameter has a gradient");
                self.out.push(g.into_data().to_vec().unwrap());
            }
        }
        let mut c = Collect { grads, out: Vec::new() };
        model.visit(&mut c);
        c.out
    }

    /// A batch of 40 generated sentences and a model of `kind` for them.
    fn setup(kind: EncoderKind, dropout: f64) -> (Tagger<A>, Batch) {
        let (vocabs, encoded) = crate::testing::toy_examples(40, 5, true);
        let cfg = crate::testing::small_config(kind, dropout);
        let device = Default::default();
        A::seed(&device, 11);
        let model = build_model::<A>(&cfg, &vocabs, None, &device);
        (model, Batch::pad(&encoded, &(0..encoded.len()).collect::<Vec<_>>()))
    }

    /// Replaces the first parameter's gradient: every element set to
    /// `fill`, then the last to `last`.
    fn replace_first(model: &Tagger<A>, grads: &mut GradientsParams, fill: f32, last: f32) {
        struct Replace<'a> {
            grads: &'a mut GradientsParams,
            done: bool,
            values: (f32, f32),
        }
        impl ModuleVisitor<A> for Replace<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
                if std::mem::replace(&mut self.done, true) {
                    return;
                }
                let g = self.grads.remove::<Flex, D>(param.id).expect("a gradient");
                let mut v = vec![self.values.0; g.shape().num_elements()];
                assert!(v.len() >= 2, "the overflow case needs two elements");
                *v.last_mut().unwrap() = self.values.1;
                let g = Tensor::from_data(burn::tensor::TensorData::new(v, g.shape()), &g.device());
                self.grads.register::<Flex, D>(param.id, g);
            }
        }
        model.visit(&mut Replace { grads, done: false, values: (fill, last) });
    }

    /// A padded batch of 40 generated sentences.
    fn toy_batch() -> Batch {
        let (_, encoded) = crate::testing::toy_examples(40, 5, true);
        Batch::pad(&encoded, &(0..encoded.len()).collect::<Vec<_>>())
    }

    #[test]
    fn character_dropout_turns_real_characters_into_unk_and_leaves_the_words_alone() {
        let batch = toy_batch();
        let before = batch.context();
        let real_chars = before.chars.iter().filter(|&&c| c != PAD_ID as i64).count();
        assert!(real_chars > 500, "{real_chars} characters");
        let words_only = TokenDropout { word: 0.2, char: 0.0 }.apply(&batch, 7);
        let both = TokenDropout { word: 0.2, char: 0.3 }.apply(&batch, 7);
        // The same words are dropped with or without character dropout.
        assert_eq!(both.context().words, words_only.context().words);
        assert_ne!(both.context().words, before.words);
        // Word dropout alone leaves the characters as they are.
        assert_eq!(words_only.context().chars, before.chars);
        let mut dropped = 0;
        for (&was, &now) in before.chars.iter().zip(&both.context().chars) {
            if was == PAD_ID as i64 {
                assert_eq!(now, was, "padding stays padding");
            } else if now != was {
                assert_eq!(now, UNK_ID as i64, "a dropped character becomes <unk>");
                dropped += 1;
            }
        }
        // Characters that were <unk> already cannot be seen dropping; the
        // toy data has none (every character is in the vocabulary).
        let share = dropped as f64 / real_chars as f64;
        assert!((share - 0.3).abs() < 0.05, "dropped {dropped} of {real_chars} characters ({share:.3})");
        // The same seed drops the same characters; another seed others.
        assert_eq!(TokenDropout { word: 0.2, char: 0.3 }.apply(&batch, 7).context().chars, both.context().chars);
        assert_ne!(TokenDropout { word: 0.2, char: 0.3 }.apply(&batch, 8).context().chars, both.context().chars);
    }

    #[test]
    fn character_dropout_alone_keeps_the_words_and_the_lengths() {
        let batch = toy_batch();
        let out = TokenDropout { word: 0.0, char: 0.5 }.apply(&batch, 3);
        assert_eq!(out.context().words, batch.context().words);
        assert_eq!(out.context().mask, batch.context().mask);
        assert_eq!(out.context().lengths, batch.context().lengths);
        assert_ne!(out.context().chars, batch.context().chars);
        assert!(!TokenDropout::default().any());
        assert!(TokenDropout { word: 0.0, char: 0.1 }.any());
    }

    #[test]
    fn gradients_are_finite_unless_an_element_is_nan_or_infinite() {
        // setup() seeds the backend's generator and builds a model that
        // draws from it: hold the lock, or a test doing the same beside
        // this one (the parts test) gets other weights.
        let _rng = crate::testing::backend_rng();
        let device = Default::default();
        let (model, batch) = setup(EncoderKind::Bilstm, 0.0);
        let (_, grads) = loss_and_grads_in(&model, &batch, 1, 3, &device).unwrap();
        assert!(gradients_finite(&model, &grads));
        // Finite values whose sum overflows f32 (the exact check decides),
        // then a NaN and each infinity among finite values.
        for (fill, last, finite) in [
            (f32::MAX, f32::MAX, true),
            (1.0, f32::NAN, false),
            (1.0, f32::INFINITY, false),
            (-1.0, f32::NEG_INFINITY, false),
        ] {
            let (_, mut grads) = loss_and_grads_in(&model, &batch, 1, 3, &device).unwrap();
            replace_first(&model, &mut grads, fill, last);
            assert_eq!(gradients_finite(&model, &grads), finite, "{fill} … {last}");
        }
    }

    /// The largest difference between two sets of gradients, per parameter,
    /// relative to the parameter's largest gradient (at least 1e-3).
    fn worst_relative(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(a, b)| {
                let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
                worst / b.iter().map(|x| x.abs()).fold(1e-3f32, f32::max)
            })
            .fold(0.0, f32::max)
    }

    /// Without dropout, a batch cut into parts gives the whole batch's loss
    /// and gradients; with dropout, the same seed gives the same result
    /// however the parts were scheduled.
    #[test]
    fn parts_of_a_batch_give_the_whole_batchs_loss_and_gradients() {
        let _rng = crate::testing::backend_rng();
        let device = Default::default();
        for kind in [EncoderKind::Attention, EncoderKind::Bilstm] {
            // Parts first, on a fresh model (Burn initialises parameters
            // lazily): the parts must share its parameters, not initialise
            // copies of their own.
            let (model, batch) = setup(kind, 0.0);
            let first = loss_and_grads_in(&model, &batch, 2, 3, &device).unwrap();
            let (whole, g_whole) = loss_and_grads_in(&model, &batch, 1, 3, &device).unwrap();
            let g_whole = flat(&model, &g_whole);
            for (shards, (value, grads)) in [(2, first), (3, loss_and_grads_in(&model, &batch, 3, 3, &device).unwrap())]
            {
                assert!(
                    (value - whole).abs() < 1e-4 * whole.abs(),
                    "{kind:?}, {shards} parts: loss {value} vs {whole}"
                );
                let worst = worst_relative(&flat(&model, &grads), &g_whole);
                assert!(worst <= 1e-3, "{kind:?}, {shards} parts: gradients off by {worst} of their scale");
            }
            // With dropout, from fresh models too. Other masks change the
            // loss by percents; the same masks leave at most the rounding
            // of the CPU's vector kernels, which is not promised to be
            // the same from one run to the next on every CPU (CI once saw
            // the BiLSTM's gradients differ, on a CPU where this one never
            // reproduced it).
            let runs: Vec<(f64, Vec<Vec<f32>>)> = (0..3)
                .map(|_| {
                    let (model, batch) = setup(kind, 0.3);
                    let (v, g) = loss_and_grads_in(&model, &batch, 3, 7, &device).unwrap();
                    (v, flat(&model, &g))
                })
                .collect();
            for (v, g) in &runs[1..] {
                let (v0, g0) = &runs[0];
                assert!((v - v0).abs() <= 1e-6 * v0.abs(), "{kind:?}: the same seed, loss {v} vs {v0}");
                let worst = worst_relative(g, g0);
                assert!(worst <= 1e-5, "{kind:?}: the same seed, gradients off by {worst} of their scale");
            }
            let (model, batch) = setup(kind, 0.3);
            let (other, _) = loss_and_grads_in(&model, &batch, 3, 8, &device).unwrap();
            let v0 = runs[0].0;
            assert!((other - v0).abs() > 1e-3 * v0.abs(), "{kind:?}: another seed draws other masks ({other} vs {v0})");
        }
    }

    /// Stochastic weight averaging from epoch 2: after epoch 1 what is
    /// evaluated is the model as it is; after epochs 2 and 3, the plain
    /// mean of the weights at the ends of the epochs since; the steps in
    /// between move the model, not the average.
    #[test]
    fn swa_averages_the_weights_at_the_ends_of_epochs_from_its_start() {
        use crate::testing::weights;
        let _rng = crate::testing::backend_rng();
        let device = Default::default();
        let (model, batch) = setup(EncoderKind::Bilstm, 0.0);
        let cfg = crate::testing::small_config(EncoderKind::Bilstm, 0.0);
        let mut learner =
            Learner::new(model, Opt::<A>::new(&cfg), TokenDropout::default()).averaging(Some(Weighting::Epochs(2)), 0);
        let mut ends = Vec::new();
        for epoch in 1..=3 {
            for seed in 0..2 {
                assert!(matches!(learner.step(&batch, seed, 0.01, &device).unwrap(), Outcome::Stepped(_)));
                assert!(epoch > 1 || learner.average().unwrap().model().is_none(), "no average before epoch 2");
            }
            learner.end_epoch(epoch);
            let now = weights(&learner.valid());
            if epoch == 1 {
                assert_eq!(weights(&learner.evaluated()), now);
                continue;
            }
            ends.push(now);
            let got = weights(&learner.evaluated());
            for (i, g) in got.iter().enumerate() {
                let mean = ends.iter().map(|w| w[i] as f64).sum::<f64>() / ends.len() as f64;
                assert!((*g as f64 - mean).abs() < 1e-6, "epoch {epoch}, weight {i}: {g} vs the mean {mean}");
            }
        }
        assert_ne!(ends[0], ends[1], "the steps moved the model");
        let averaged = weights(&learner.evaluated());
        learner.step(&batch, 9, 0.01, &device).unwrap();
        assert_eq!(weights(&learner.evaluated()), averaged, "a step leaves the average over epochs alone");
    }
}
