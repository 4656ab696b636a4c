//! The GPU path computes what the CPU computes. burn-wgpu (Vulkan, Metal,
//! DX12; in CI Mesa's software Vulkan driver, lavapipe, which runs the
//! same CubeCL kernels on the CPU) takes every operation's composed path
//! (`SeqBackend`'s defaults: the LSTM scan step by step, dense attention as
//! tensor operations and Burn's fused op at inference, chunked attention's
//! online softmax, local attention's blocks, relative-position scores, the
//! CRF's gold score and partition term, the character CNN as im2col and a
//! product, Adam and the weights' average as tensor arithmetic); burn-flex
//! takes the host loops. Each test builds its model on the CPU and copies
//! the weights to the GPU, so both start from the same numbers, and checks
//! forward values and gradients.
//!
//! Tolerance: every value within 1e-4 of the CPU's, relative to
//! `1 + |value|` (f32 sums in another order: measured differences are about
//! 1e-6). They need a GPU adapter, so `cargo test` lists them as ignored;
//! CI runs them on lavapipe: `cargo test --workspace --test wgpu_parity --
//! --ignored` (`just test-wgpu`). Built with the default `wgpu` feature.
#![cfg(feature = "wgpu")]

mod common;

use burn::backend::wgpu::WgpuDevice;
use burn::backend::{Autodiff, Flex, Wgpu};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, TensorData};
use common::{assert_close_relative, values};
use corpus::batch::Batch;
use corpus::Scheme;
use encoders::attention::AttentionImpl;
use encoders::input::tags_tensor;
use encoders::ops::adam::AdamStep;
use encoders::ops::SeqBackend;
use encoders::positional::Position;
use encoders::{DecoderKind, EncoderKind, QuestionMode, TaggerConfig, TaggerInput};

type Cpu = Autodiff<Flex>;
type Gpu = Autodiff<Wgpu>;

/// Every value within this of the CPU's, relative to `1 + |value|`.
const TOL: f32 = 1e-4;

/// The GPU, with matrix products autotuned at CubeCL's minimal level as
/// `seqlab` runs them: each candidate tried is a kernel compiled for every
/// new shape, most of this file's time on lavapipe otherwise.
fn gpu() -> WgpuDevice {
    use burn::cubecl::config::{autotune::AutotuneLevel, CubeClRuntimeConfig, RuntimeConfig};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
        config.autotune.level = AutotuneLevel::Minimal;
        CubeClRuntimeConfig::set(config);
    });
    WgpuDevice::default()
}

/// Draws every lazily initialised parameter of `model` now: Burn creates
/// parameters on first use, and a clone of an uninitialised one draws
/// values of its own.
struct Initialise;

impl<B: Backend> ModuleVisitor<B> for Initialise {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let _ = param.val();
    }
}

/// `to` with `from`'s weights: the record written on the CPU, read on the GPU.
fn moved<M: Module<Cpu>, N: Module<Gpu>>(from: &M, to: N, device: &WgpuDevice) -> N {
    from.visit(&mut Initialise);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = Recorder::<Cpu>::record(&recorder, from.clone().into_record(), ()).expect("record");
    to.load_record(Recorder::<Gpu>::load(&recorder, bytes, device).expect("load"))
}

/// Each float parameter's gradient, flattened, in the module's order.
struct Gradients<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    out: Vec<(String, Vec<f32>)>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Gradients<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let name = format!("{:?}", param.val().dims());
        let g = param.val().grad(self.grads).map(|g| values(g)).unwrap_or_default();
        self.out.push((name, g));
    }
}

/// The loss, every parameter's gradient, the inference emissions and the
/// decoded paths of `model` on `batch`, with dropout masks drawn from one
/// seed (they are drawn on the host: the same on both backends).
#[allow(clippy::type_complexity)]
fn run<B: AutodiffBackend + SeqBackend>(
    model: &encoders::Tagger<B>,
    batch: &Batch,
    device: &B::Device,
) -> (f32, Vec<(String, Vec<f32>)>, Vec<f32>, Vec<Vec<usize>>)
where
    B::InnerBackend: SeqBackend,
{
    encoders::dropout::seed(7);
    let input = TaggerInput::<B>::from_batch(batch, device);
    let loss = model.loss(&input, tags_tensor(batch.context(), device).unwrap()).unwrap();
    let value = values(loss.clone())[0];
    let grads = loss.backward();
    let mut g = Gradients::<B> { grads: &grads, out: Vec::new() };
    model.visit(&mut g);
    let valid = model.valid();
    let input = TaggerInput::<B::InnerBackend>::from_batch(batch, device);
    let emissions = values(valid.forward(&input, false).unwrap().emissions);
    let paths = valid.decode(&input).unwrap();
    (value, g.out, emissions, paths)
}

/// [`common::TAGGERS`] (BiLSTM; attention with relative, sinusoidal,
/// learned, RoPE, ALiBi and T5 positions; the character Transformer;
/// concatenated, cross, flow and co-attention question modes; CRF, softmax,
/// pointer and span-CRF decoders), then the
/// attention-CRF with chunked and with local attention.
fn variants() -> Vec<(String, TaggerConfig, QuestionMode)> {
    let mut out: Vec<(String, TaggerConfig, QuestionMode)> = common::TAGGERS
        .iter()
        .map(|&(kind, position, decoder, question)| {
            let name = format!("{kind:?}/{position:?}/{decoder:?}/{question:?}");
            (name, common::tagger_variant(kind, position, decoder, question), question)
        })
        .collect();
    for (imp, name) in [(AttentionImpl::Chunked, "chunked"), (AttentionImpl::Local, "local")] {
        let mut cfg =
            common::tagger_variant(EncoderKind::Attention, Position::Sinusoidal, DecoderKind::Crf, QuestionMode::None);
        cfg.encoder.attention.implementation = imp;
        cfg.encoder.attention.block = 2;
        cfg.encoder.attention.window = 1;
        out.push((format!("Attention/{name}/Crf"), cfg, QuestionMode::None));
    }
    out
}

#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn every_tagger_computes_on_wgpu_what_it_computes_on_the_cpu() {
    let (cpu, gpu) = (Default::default(), gpu());
    let tags = Scheme::Bioes.tag_set(&["X".into()]);
    let (plain, with_questions) = common::two_sentences();
    for (name, cfg, question) in variants() {
        let examples = if question == QuestionMode::None { &plain } else { &with_questions };
        let batch = Batch::pad(examples, &[0, 1]);
        Cpu::seed(&cpu, 5);
        let on_cpu = cfg.init::<Cpu>(common::variant_shape(&tags), &cpu);
        let on_gpu = moved(&on_cpu, cfg.init::<Gpu>(common::variant_shape(&tags), &gpu), &gpu);
        let (loss_c, grads_c, emissions_c, paths_c) = run(&on_cpu, &batch, &cpu);
        let (loss_g, grads_g, emissions_g, paths_g) = run(&on_gpu, &batch, &gpu);
        eprintln!("{name}: loss cpu {loss_c} wgpu {loss_g}");
        assert_close_relative(&emissions_g, &emissions_c, TOL, &format!("{name}: inference emissions"));
        assert_close_relative(&[loss_g], &[loss_c], TOL, &format!("{name}: loss"));
        assert_eq!(grads_g.len(), grads_c.len(), "{name}: parameters");
        for (k, ((shape, g), (_, c))) in grads_g.iter().zip(&grads_c).enumerate() {
            assert_close_relative(g, c, TOL, &format!("{name}: gradient of parameter {k} {shape}"));
        }
        assert_close_relative(&emissions_g, &emissions_c, TOL, &format!("{name}: inference emissions"));
        assert_eq!(paths_g, paths_c, "{name}: decoded paths");
    }
}

/// The same batch padded up to a bucket length (as the GPU backends pad
/// every batch): the loss and the real positions' emissions do not change.
#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn bucket_padding_changes_nothing_on_wgpu() {
    let gpu = gpu();
    let tags = Scheme::Bioes.tag_set(&["X".into()]);
    let (plain, _) = common::two_sentences();
    let cfg = common::tagger_variant(EncoderKind::Bilstm, Position::Sinusoidal, DecoderKind::Crf, QuestionMode::None);
    Gpu::seed(&gpu, 5);
    let model = cfg.init::<Gpu>(common::variant_shape(&tags), &gpu).valid();
    let tight = Batch::pad(&plain, &[0, 1]);
    let bucketed = encoders::input::shaped_for::<Wgpu>(tight.clone());
    assert!(bucketed.context().len > tight.context().len, "the bucket pads the batch");
    let emissions = |b: &Batch| {
        let e = model.forward(&TaggerInput::from_batch(b, &gpu), false).unwrap().emissions;
        let [_, _, t] = e.dims();
        values(e.slice([0..2, 0..3, 0..t]))
    };
    assert_close_relative(&emissions(&bucketed), &emissions(&tight), TOL, "real positions' emissions");
    assert_eq!(
        model.decode(&TaggerInput::from_batch(&bucketed, &gpu)).unwrap(),
        model.decode(&TaggerInput::from_batch(&tight, &gpu)).unwrap()
    );
}

/// Five Adam updates and five steps of the weights' moving average: the
/// composed tensor arithmetic on wgpu against burn-flex's in-place passes.
#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn adam_and_the_moving_average_update_as_on_the_cpu() {
    let (cpu, gpu) = (Default::default(), gpu());
    let shape = [37, 5];
    let host = |seed: u64| {
        Flex::seed(&cpu, seed);
        Tensor::<Flex, 2>::random(shape, Distribution::Normal(0.0, 1.0), &cpu).into_data()
    };
    let both =
        |data: TensorData| (Tensor::<Flex, 2>::from_data(data.clone(), &cpu), Tensor::<Wgpu, 2>::from_data(data, &gpu));
    for weight_decay in [0.0, 0.01] {
        let (mut pc, mut pg) = both(host(1));
        let (mut mc, mut mg) = (None, None);
        let (mut ac, mut ag) = both(host(2));
        for time in 1..=5 {
            let step = AdamStep { lr: 0.01, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-8, weight_decay, time };
            let (gc, gg) = both(host(10 + time as u64));
            let (p, m, v) = <Flex as SeqBackend>::adam_step(pc, gc, mc, &step);
            (pc, mc) = (p, Some((m, v)));
            let (p, m, v) = <Wgpu as SeqBackend>::adam_step(pg, gg, mg, &step);
            (pg, mg) = (p, Some((m, v)));
            let what = format!("update {time}, decay {weight_decay}");
            assert_close_relative(&values(pg.clone()), &values(pc.clone()), TOL, &format!("θ after {what}"));
            let ((m1, v1), (m2, v2)) = (mc.clone().unwrap(), mg.clone().unwrap());
            assert_close_relative(&values(m2), &values(m1), TOL, &format!("m after {what}"));
            assert_close_relative(&values(v2), &values(v1), TOL, &format!("v after {what}"));
            ac = <Flex as SeqBackend>::average_step(ac, pc.clone(), 0.9);
            ag = <Wgpu as SeqBackend>::average_step(ag, pg.clone(), 0.9);
            assert_close_relative(&values(ag.clone()), &values(ac.clone()), TOL, &format!("average after {what}"));
        }
    }
}
