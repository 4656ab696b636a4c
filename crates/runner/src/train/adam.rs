//! Adam, each parameter's update one [`SeqBackend::adam_step`]: Burn's
//! `Adam` (same constants, same arithmetic, same saved state, so runs and
//! checkpoints made with it carry on unchanged), with burn-flex's update
//! fused into one in-place pass instead of a dozen tensor operations.

use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamState, AdaptiveMomentumState, LearningRate, SimpleOptimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use encoders::ops::adam::AdamStep;
use encoders::ops::SeqBackend;

/// Adam's constants (Burn's defaults: β₁ 0.9, β₂ 0.999, ε 1e-5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FusedAdam {
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    /// L2 penalty added to the gradient (0: none).
    pub weight_decay: f32,
}

impl FusedAdam {
    pub fn new(weight_decay: f32) -> Self {
        FusedAdam { beta_1: 0.9, beta_2: 0.999, epsilon: 1e-5, weight_decay }
    }

    /// The optimizer of a module, gradients clipped by norm at `clip`
    /// (none: 0).
    pub fn init<B: AutodiffBackend<InnerBackend: SeqBackend>, M: burn::module::AutodiffModule<B>>(
        self,
        clip: f32,
    ) -> OptimizerAdaptor<Self, M, B> {
        let adaptor = OptimizerAdaptor::from(self);
        if clip > 0.0 {
            adaptor.with_grad_clipping(GradientClippingConfig::Norm(clip).init())
        } else {
            adaptor
        }
    }
}

impl<B: SeqBackend> SimpleOptimizer<B> for FusedAdam {
    type State<const D: usize> = AdamState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let (time, moments) = match state {
            Some(s) => (s.momentum.time + 1, Some((s.momentum.moment_1, s.momentum.moment_2))),
            None => (1, None),
        };
        let step = AdamStep {
            lr: lr as f32,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            weight_decay: self.weight_decay,
            time: time as i32,
        };
        let (tensor, moment_1, moment_2) = B::adam_step(tensor, grad, moments, &step);
        let momentum = AdaptiveMomentumState { time, moment_1, moment_2, max_moment_2: None };
        (tensor, Some(AdamState { momentum }))
    }

    fn to_device<const D: usize>(mut state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex, NdArray};
    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::decay::WeightDecayConfig;
    use burn::optim::{AdamConfig, GradientsParams, Optimizer};
    use burn::tensor::Distribution;

    #[derive(Module, Debug)]
    struct Net<B: Backend> {
        a: Linear<B>,
        b: Linear<B>,
    }

    /// Every weight and bias, as bits.
    fn params<B: Backend>(net: &Net<B>) -> Vec<Vec<u32>> {
        let bias = |l: &Linear<B>| l.bias.as_ref().unwrap().val().reshape([1, -1]);
        [net.a.weight.val(), bias(&net.a), net.b.weight.val(), bias(&net.b)]
            .into_iter()
            .map(|w| w.into_data().to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect())
            .collect()
    }

    /// Eight steps of a small network under Burn's `Adam` and under
    /// `FusedAdam` with the same constants (weight decay and clipping on):
    /// the weights agree bit for bit, on burn-flex (the fused pass) and on
    /// NdArray (the composed one).
    fn same_as_burns_adam<B: AutodiffBackend<InnerBackend: SeqBackend>>() {
        let device = Default::default();
        let _lock = crate::testing::backend_rng();
        B::seed(&device, 7);
        let net = Net::<B> { a: LinearConfig::new(5, 8).init(&device), b: LinearConfig::new(8, 3).init(&device) };
        let mut burns = AdamConfig::new()
            .with_weight_decay(Some(WeightDecayConfig::new(0.01)))
            .with_grad_clipping(Some(GradientClippingConfig::Norm(1.0)))
            .init::<B, Net<B>>();
        let mut fused = FusedAdam::new(0.01).init::<B, Net<B>>(1.0);
        // Parameters initialise lazily: read them once, so that the clones
        // share the weights instead of drawing their own.
        let start = params(&net);
        let (mut n1, mut n2) = (net.clone(), net);
        assert_eq!(params(&n1), start);
        for step in 0..8 {
            let x = Tensor::<B, 2>::random([4, 5], Distribution::Normal(0.0, 1.0), &device);
            let loss = |n: &Net<B>| n.b.forward(n.a.forward(x.clone()).tanh()).powf_scalar(2.0).sum();
            let g1 = GradientsParams::from_grads(loss(&n1).backward(), &n1);
            let g2 = GradientsParams::from_grads(loss(&n2).backward(), &n2);
            n1 = burns.step(0.01, n1, g1);
            n2 = fused.step(0.01, n2, g2);
            assert_eq!(params(&n1), params(&n2), "after step {step}");
        }
        // The saved state is Burn's: Burn's record, written and read back
        // as a FusedAdam's, carries on Burn's run.
        use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
        let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
        let bytes = recorder.record(burns.to_record(), ()).unwrap();
        let mut resumed =
            FusedAdam::new(0.01).init::<B, Net<B>>(1.0).load_record(recorder.load(bytes, &device).unwrap());
        let x = Tensor::<B, 2>::ones([1, 5], &device);
        let g1 = GradientsParams::from_grads(n1.a.forward(x.clone()).sum().backward(), &n1);
        let g2 = GradientsParams::from_grads(n1.a.forward(x).sum().backward(), &n1);
        assert_eq!(params(&burns.step(0.01, n1.clone(), g1)), params(&resumed.step(0.01, n1, g2)));
    }

    #[test]
    fn fused_adam_steps_like_burns_adam_on_flex() {
        same_as_burns_adam::<Autodiff<Flex>>();
    }

    #[test]
    fn fused_adam_steps_like_burns_adam_on_ndarray() {
        same_as_burns_adam::<Autodiff<NdArray>>();
    }
}
