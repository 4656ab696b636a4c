//! Operations with a hand-written backward pass, added to Burn backends
//! through Burn's backend-extension mechanism: the [`SeqBackend`] trait.
//!
//! One file per operation, each with its forward and backward passes
//! composed from Burn tensor operations (any backend, CUDA included) and,
//! where the CPU backends run it differently, their host loops:
//!
//! - [`flash_attention`]: exact attention over key blocks with an online
//!   softmax ([`SeqBackend::flash_attention`]); the same generic passes on
//!   every backend, O(L·d) training memory.
//! - [`dense_attention`]: dense multi-head attention on heads-side-by-side
//!   tensors ([`SeqBackend::dense_attention`]): composed by default (Burn's
//!   fused op at inference), host loops on the CPU backends.
//! - [`lstm_scan`]: a BiLSTM layer's recurrence
//!   ([`SeqBackend::lstm_scan`]): composed by default, host loops on the
//!   CPU backends.
//! - [`flex_linear`]: burn-flex's linear layer as one GEMM
//!   ([`SeqBackend::fused_linear`]), in f32 or, at inference where
//!   [`precision`] says so, in bf16 ([`bf16_gemm`]).
//! - [`adam`]: one Adam update of a parameter ([`SeqBackend::adam_step`]):
//!   composed by default, one in-place pass on burn-flex.
//! - [`moving_average`]: one step of the weights' moving average
//!   ([`SeqBackend::average_step`]): likewise.
//! - [`char_cnn`]: the character CNN's features ([`SeqBackend::char_cnn`]):
//!   composed (im2col and one product) by default and in training, by
//!   per-offset lookup tables at inference on the CPU backends.
//!
//! This file holds the trait, whose default methods are the composed
//! passes; its impls for the CPU backends (`host_ops!`: the host loops)
//! and for burn-cuda and burn-wgpu (the defaults); and its impl for `Autodiff`, which
//! records each operation as one node of the graph whose backward pass is
//! the inner backend's hand-written one. The operation files import
//! nothing from this one: the dependencies between files go one way.

pub mod adam;
pub mod bf16_gemm;
pub mod char_cnn;
pub mod dense_attention;
pub mod flash_attention;
pub mod flex_linear;
mod host;
pub mod lstm_scan;
pub mod moving_average;
pub mod precision;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::Autodiff;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{FloatTensor, ModuleOps};
use burn::tensor::TensorPrimitive;
use dense_attention::Terms;
use flash_attention::{flash_backward, flash_forward};

/// A backend that trains sequence encoders: autodiff over a [`SeqBackend`]
/// (whose [`SeqBackend::adam_step`] the optimizer runs), itself one.
pub trait TrainBackend: AutodiffBackend<InnerBackend: SeqBackend> + SeqBackend {}

impl<B: AutodiffBackend<InnerBackend: SeqBackend> + SeqBackend> TrainBackend for B {}

/// Backend operations that sequence encoders need beyond Burn's own.
pub trait SeqBackend: Backend {
    /// Exact softmax attention computed over key blocks of `block` keys.
    /// `q [B, H, Lq, Dh]`, `k`/`v [B, H, Lk, Dh]`, `key_mask [B, 1, 1, Lk]`
    /// (1 at real keys, 0 at padding) → `[B, H, Lq, Dh]`; a query with no
    /// real key gets zeros. No dropout on the weights.
    fn flash_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_mask: FloatTensor<Self>,
        scale: f32,
        block: usize,
    ) -> FloatTensor<Self> {
        let (out, _) = flash_forward::<Self>(t(q), t(k), t(v), t(key_mask), scale, block);
        out.into_primitive().tensor()
    }

    /// Both directions of a BiLSTM layer's recurrence (see [`lstm_scan`]):
    /// `xw [2, B, L, 4H]`, `w [2, H, 4H]`, `mask [B, L]` → `h [2, B, L, H]`.
    fn lstm_scan(xw: FloatTensor<Self>, w: FloatTensor<Self>, mask: FloatTensor<Self>) -> FloatTensor<Self> {
        p(Self::lstm_forward(t(xw), t(w), t(mask)).h)
    }

    /// The recurrence's forward pass and what its backward pass needs.
    fn lstm_forward(xw: Tensor<Self, 4>, w: Tensor<Self, 3>, mask: Tensor<Self, 2>) -> lstm_scan::Saved<Self> {
        lstm_scan::composed_forward(xw, w, mask)
    }

    /// The recurrence's backward pass: gradients of `xw` and `w`.
    fn lstm_backward(
        w: Tensor<Self, 3>,
        mask: Tensor<Self, 2>,
        saved: lstm_scan::Saved<Self>,
        grad: Tensor<Self, 4>,
    ) -> (Tensor<Self, 4>, Tensor<Self, 3>) {
        lstm_scan::composed_backward(w, mask, saved, grad)
    }

    /// A linear layer: `x [..., K] · weight [K, O] + bias [O]`. Burn's
    /// `linear` by default; burn-flex runs it as one GEMM into rows that
    /// start as the bias ([`flex_linear`]).
    fn fused_linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::linear(x, weight, bias)
    }

    /// The character CNN's features (see [`char_cnn`]): `table [V, C]`
    /// (row 0, padding, read as zeros), `kernel [F, C, K]`, `bias [F]`,
    /// `chars [N, W]` → `[N, F]`, each word's max over its real characters.
    /// Composed from Burn's operations by default (and so under autodiff,
    /// whose training pass this is); the CPU backends' inference looks up
    /// per-offset tables instead.
    fn char_cnn(
        table: Tensor<Self, 2>,
        kernel: Tensor<Self, 3>,
        bias: Option<Tensor<Self, 1>>,
        chars: Tensor<Self, 2, Int>,
    ) -> Tensor<Self, 2> {
        char_cnn::composed(table, kernel, bias, chars)
    }

    /// One Adam update of a parameter (see [`adam`]): `(θ, m, v)` after
    /// it, from `θ`, its gradient and the moments (`None` before the first
    /// update). Burn's tensor operations by default; one in-place pass on
    /// burn-flex.
    fn adam_step<const D: usize>(
        param: Tensor<Self, D>,
        grad: Tensor<Self, D>,
        moments: Option<(Tensor<Self, D>, Tensor<Self, D>)>,
        step: &adam::AdamStep,
    ) -> (Tensor<Self, D>, Tensor<Self, D>, Tensor<Self, D>) {
        adam::composed(param, grad, moments, step)
    }

    /// One step of a moving average of a parameter (see
    /// [`moving_average`]): `keep·avg + (1 − keep)·current`. Burn's tensor
    /// operations by default; one in-place pass on burn-flex.
    fn average_step<const D: usize>(avg: Tensor<Self, D>, current: Tensor<Self, D>, keep: f64) -> Tensor<Self, D> {
        moving_average::composed(avg, current, keep)
    }

    /// How many parts a training batch of `sentences` is cut into, their
    /// forward and backward passes running concurrently (the runner's
    /// `loss_and_grads`). One by default (a GPU runs a whole batch at
    /// once); the CPU backends cut parts of at least 16 sentences, because
    /// most of a batch's operations are too small to keep several cores
    /// busy alone. The count depends on the batch only, not on the number
    /// of threads, so a seed gives the same run on any machine.
    fn train_shards(sentences: usize) -> usize {
        let _ = sentences;
        1
    }

    /// Whether batches are padded up to a few fixed lengths
    /// ([`corpus::batch::Batch::bucketed`]). Yes by default: a GPU backend
    /// compiles kernels (and autotunes matrix products) for every new
    /// tensor shape, so shapes had better repeat. No on the CPU backends,
    /// which pay for padding and nothing for a new shape.
    fn shape_buckets() -> bool {
        true
    }

    /// The memory the backend's own allocator holds on `device` (its pool,
    /// which grows to the high-water mark of what was allocated and is kept
    /// for reuse), after the work queued so far has run; `None` for the CPU
    /// backends, whose tensors live on the process's heap (read its resident
    /// set instead). The GPU backends answer from CubeCL's memory manager.
    fn device_memory(device: &Self::Device) -> Option<DeviceMemory> {
        let _ = device;
        None
    }

    /// Dense multi-head attention (see [`dense_attention`]): `q [B, Lq,
    /// H·Dh]`, `k`/`v [B, Lk, H·Dh]`, `key_mask [B, Lk]` (1 at real keys),
    /// `keep` the dropout mask `[B, H, Lq, Lk]` of the weights (or none),
    /// the position terms of the scores → the context `[B, Lq, H·Dh]`.
    #[allow(clippy::too_many_arguments)]
    fn dense_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_mask: FloatTensor<Self>,
        keep: Option<FloatTensor<Self>>,
        heads: usize,
        scale: f32,
        terms: Terms<Self>,
    ) -> FloatTensor<Self> {
        let (q, k, v, key_mask) = (t(q), t(k), t(v), t(key_mask));
        p(match keep {
            None => dense_attention::inference(q, k, v, key_mask, heads, scale, &terms),
            Some(keep) => Self::dense_attention_forward(q, k, v, key_mask, Some(t(keep)), heads, scale, terms).0,
        })
    }

    /// The attention's forward pass and the weights `[B, H, Lq, Lk]` its
    /// backward pass needs.
    #[allow(clippy::too_many_arguments)]
    fn dense_attention_forward(
        q: Tensor<Self, 3>,
        k: Tensor<Self, 3>,
        v: Tensor<Self, 3>,
        key_mask: Tensor<Self, 2>,
        keep: Option<Tensor<Self, 4>>,
        heads: usize,
        scale: f32,
        terms: Terms<Self>,
    ) -> (Tensor<Self, 3>, Tensor<Self, 4>) {
        dense_attention::composed_forward(q, k, v, key_mask, keep, heads, scale, &terms)
    }

    /// The attention's backward pass: gradients of `q`, `k`, `v`, of the
    /// relative term's `qv` when its sinusoids `r` are given, and of the
    /// score bias when `bias_grad`.
    #[allow(clippy::too_many_arguments)]
    fn dense_attention_backward(
        q: Tensor<Self, 3>,
        k: Tensor<Self, 3>,
        v: Tensor<Self, 3>,
        keep: Option<Tensor<Self, 4>>,
        weights: Tensor<Self, 4>,
        grad: Tensor<Self, 3>,
        heads: usize,
        scale: f32,
        r: Option<Tensor<Self, 2>>,
        bias_grad: bool,
    ) -> dense_attention::Grads<Self> {
        dense_attention::composed_backward(q, k, v, keep, weights, grad, heads, scale, r, bias_grad)
    }
}

/// The CPU backends run the recurrence (one GEMM per step) and the
/// attention (heads addressed by stride) as host loops, and train on parts
/// of a batch concurrently.
macro_rules! host_ops {
    ($backend:ty $(, linear = $linear:path, adam = $adam:path, average = $average:path)?) => {
        impl SeqBackend for $backend {
            $(
                fn adam_step<const D: usize>(
                    param: Tensor<Self, D>,
                    grad: Tensor<Self, D>,
                    moments: Option<(Tensor<Self, D>, Tensor<Self, D>)>,
                    step: &adam::AdamStep,
                ) -> (Tensor<Self, D>, Tensor<Self, D>, Tensor<Self, D>) {
                    $adam(param, grad, moments, step)
                }

                fn average_step<const D: usize>(
                    avg: Tensor<Self, D>,
                    current: Tensor<Self, D>,
                    keep: f64,
                ) -> Tensor<Self, D> {
                    $average(avg, current, keep)
                }
            )?
            $(
                fn fused_linear(
                    x: FloatTensor<Self>,
                    weight: FloatTensor<Self>,
                    bias: Option<FloatTensor<Self>>,
                ) -> FloatTensor<Self> {
                    $linear(x, weight, bias)
                }
            )?

            fn train_shards(sentences: usize) -> usize {
                (sentences / 16).max(1)
            }

            fn char_cnn(
                table: Tensor<Self, 2>,
                kernel: Tensor<Self, 3>,
                bias: Option<Tensor<Self, 1>>,
                chars: Tensor<Self, 2, Int>,
            ) -> Tensor<Self, 2> {
                char_cnn::host::forward(table, kernel, bias, chars)
            }

            fn shape_buckets() -> bool {
                false
            }

            fn lstm_forward(xw: Tensor<Self, 4>, w: Tensor<Self, 3>, mask: Tensor<Self, 2>) -> lstm_scan::Saved<Self> {
                lstm_scan::host::forward(xw, w, mask)
            }

            fn lstm_backward(
                w: Tensor<Self, 3>,
                mask: Tensor<Self, 2>,
                saved: lstm_scan::Saved<Self>,
                grad: Tensor<Self, 4>,
            ) -> (Tensor<Self, 4>, Tensor<Self, 3>) {
                lstm_scan::host::backward(w, mask, saved, grad)
            }

            fn dense_attention(
                q: FloatTensor<Self>,
                k: FloatTensor<Self>,
                v: FloatTensor<Self>,
                key_mask: FloatTensor<Self>,
                keep: Option<FloatTensor<Self>>,
                heads: usize,
                scale: f32,
                terms: Terms<Self>,
            ) -> FloatTensor<Self> {
                let keep = keep.map(t::<Self, 4>);
                p(dense_attention::host::forward(t(q), t(k), t(v), t(key_mask), keep, heads, scale, terms, false).0)
            }

            fn dense_attention_forward(
                q: Tensor<Self, 3>,
                k: Tensor<Self, 3>,
                v: Tensor<Self, 3>,
                key_mask: Tensor<Self, 2>,
                keep: Option<Tensor<Self, 4>>,
                heads: usize,
                scale: f32,
                terms: Terms<Self>,
            ) -> (Tensor<Self, 3>, Tensor<Self, 4>) {
                let (ctx, weights) = dense_attention::host::forward(q, k, v, key_mask, keep, heads, scale, terms, true);
                (ctx, weights.expect("saved weights"))
            }

            fn dense_attention_backward(
                q: Tensor<Self, 3>,
                k: Tensor<Self, 3>,
                v: Tensor<Self, 3>,
                keep: Option<Tensor<Self, 4>>,
                weights: Tensor<Self, 4>,
                grad: Tensor<Self, 3>,
                heads: usize,
                scale: f32,
                r: Option<Tensor<Self, 2>>,
                bias_grad: bool,
            ) -> dense_attention::Grads<Self> {
                dense_attention::host::backward(q, k, v, keep, weights, grad, heads, scale, r, bias_grad)
            }
        }
    };
}
host_ops!(burn::backend::Flex, linear = flex_linear::linear, adam = adam::flex, average = moving_average::flex);
host_ops!(burn::backend::NdArray);
#[cfg(feature = "cuda")]
impl SeqBackend for burn::backend::Cuda {
    fn device_memory(device: &Self::Device) -> Option<DeviceMemory> {
        Self::sync(device).ok()?; // runs what Burn's fusion still holds
        cubecl_memory::<burn::cubecl::cuda::CudaRuntime>(device)
    }
}
#[cfg(feature = "wgpu")]
impl SeqBackend for burn::backend::Wgpu {
    fn device_memory(device: &Self::Device) -> Option<DeviceMemory> {
        Self::sync(device).ok()?; // runs what Burn's fusion still holds
        cubecl_memory::<burn::backend::wgpu::WgpuRuntime>(device)
    }
}

/// Bytes held by a backend's own allocator ([`SeqBackend::device_memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Bytes of the tensors alive now.
    pub in_use: u64,
    /// Bytes the allocator has reserved from the device: its pool, kept
    /// after tensors are freed, so its growth over a step bounds the step's
    /// peak from above by at most the pool's rounding.
    pub reserved: u64,
}

/// CubeCL's memory manager's usage on `device`.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn cubecl_memory<R: burn::cubecl::Runtime>(device: &R::Device) -> Option<DeviceMemory> {
    let usage = R::client(device).memory_usage().ok()?;
    Some(DeviceMemory { in_use: usage.bytes_in_use, reserved: usage.bytes_reserved })
}

fn t<B: Backend, const D: usize>(p: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(p))
}

fn p<B: Backend, const D: usize>(x: Tensor<B, D>) -> FloatTensor<B> {
    x.into_primitive().tensor()
}

/// [`SeqBackend::dense_attention`]'s node in the autodiff graph: its
/// backward pass is the inner backend's hand-written one.
#[derive(Debug)]
struct AttentionBackward;

/// Saved for the backward pass: q, k, v, the dropout mask, the
/// weights, heads, scale, the relative term's sinusoids, and whether
/// the score bias is an input.
type AttentionState<B> = (
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
    Option<FloatTensor<B>>,
    FloatTensor<B>,
    usize,
    f32,
    Option<FloatTensor<B>>,
    bool,
);

impl<B: SeqBackend> Backward<B, 5> for AttentionBackward {
    type State = AttentionState<B>;

    fn backward(self, ops: Ops<Self::State, 5>, grads: &mut Gradients, _: &mut Checkpointer) {
        // An absent term's parent is q's node again: nothing is registered for it.
        let [node_q, node_k, node_v, node_bias, node_qv] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (q, k, v, keep, weights, heads, scale, r, has_bias) = ops.state;
        let node_bias = node_bias.filter(|_| has_bias);
        let node_qv = node_qv.filter(|_| r.is_some());
        let g = B::dense_attention_backward(
            t(q),
            t(k),
            t(v),
            keep.map(t),
            t(weights),
            t(grad),
            heads,
            scale,
            r.map(t),
            node_bias.is_some(),
        );
        for (node, g) in [(node_q, g.q), (node_k, g.k), (node_v, g.v)] {
            if let Some(node) = node {
                grads.register::<B>(node.id, p(g));
            }
        }
        if let (Some(node), Some(g)) = (node_bias, g.bias) {
            grads.register::<B>(node.id, p(g));
        }
        if let (Some(node), Some(g)) = (node_qv, g.qv) {
            grads.register::<B>(node.id, p(g));
        }
    }
}

impl<B: SeqBackend, C: CheckpointStrategy> SeqBackend for Autodiff<B, C> {
    fn train_shards(sentences: usize) -> usize {
        B::train_shards(sentences)
    }

    fn shape_buckets() -> bool {
        B::shape_buckets()
    }

    fn device_memory(device: &Self::Device) -> Option<DeviceMemory> {
        B::device_memory(device)
    }

    fn flash_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_mask: FloatTensor<Self>,
        scale: f32,
        block: usize,
    ) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct FlashBackward;

        /// Saved for the backward pass: q, k, v, mask, output, log-sum-exp.
        type State<B> = (
            FloatTensor<B>,
            FloatTensor<B>,
            FloatTensor<B>,
            FloatTensor<B>,
            FloatTensor<B>,
            FloatTensor<B>,
            f32,
            usize,
        );

        impl<B: Backend> Backward<B, 3> for FlashBackward {
            type State = State<B>;

            fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
                let [node_q, node_k, node_v] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                let (q, k, v, mask, out, lse, scale, block) = ops.state;
                let (dq, dk, dv) =
                    flash_backward::<B>(t(q), t(k), t(v), t(mask), t(out), t(lse), t(grad), scale, block);
                for (node, g) in [(node_q, dq), (node_k, dk), (node_v, dv)] {
                    if let Some(node) = node {
                        grads.register::<B>(node.id, p(g));
                    }
                }
            }
        }

        let mask = key_mask.primitive; // a constant: no gradient flows to it
        match FlashBackward.prepare::<C>([q.node.clone(), k.node.clone(), v.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (out, lse) = flash_forward::<B>(
                    t(q.primitive.clone()),
                    t(k.primitive.clone()),
                    t(v.primitive.clone()),
                    t(mask.clone()),
                    scale,
                    block,
                );
                let out = p(out);
                let state = (q.primitive, k.primitive, v.primitive, mask, out.clone(), p(lse), scale, block);
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::flash_attention(q.primitive, k.primitive, v.primitive, mask, scale, block))
            }
        }
    }

    fn lstm_scan(xw: FloatTensor<Self>, w: FloatTensor<Self>, mask: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct LstmBackward;

        /// Saved for the backward pass: w, mask, outputs, gate activations, cell states.
        type State<B> = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

        impl<B: SeqBackend> Backward<B, 2> for LstmBackward {
            type State = State<B>;

            fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
                let [node_xw, node_w] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                let (w, mask, h, act, c) = ops.state;
                let saved = lstm_scan::Saved { h: t(h), act: t(act), c: t(c) };
                let (dxw, dw) = B::lstm_backward(t(w), t(mask), saved, t(grad));
                if let Some(node) = node_xw {
                    grads.register::<B>(node.id, p(dxw));
                }
                if let Some(node) = node_w {
                    grads.register::<B>(node.id, p(dw));
                }
            }
        }

        let mask = mask.primitive; // a constant: no gradient flows to it
        match LstmBackward.prepare::<C>([xw.node.clone(), w.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let saved = B::lstm_forward(t(xw.primitive), t(w.primitive.clone()), t(mask.clone()));
                let h = p(saved.h);
                prep.finish((w.primitive, mask, h.clone(), p(saved.act), p(saved.c)), h)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::lstm_scan(xw.primitive, w.primitive, mask)),
        }
    }

    fn dense_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_mask: FloatTensor<Self>,
        keep: Option<FloatTensor<Self>>,
        heads: usize,
        scale: f32,
        terms: Terms<Self>,
    ) -> FloatTensor<Self> {
        // The mask, the dropout mask and the sinusoids are constants: no gradient flows to them.
        let (key_mask, keep) = (key_mask.primitive, keep.map(|k| k.primitive));
        let bias = terms.bias.map(|x| x.into_primitive().tensor());
        let (qv, r) = terms
            .relative
            .map(|rel| (rel.qv.into_primitive().tensor(), rel.r.into_primitive().tensor().primitive))
            .unzip();
        let node_bias = bias.as_ref().map_or(q.node.clone(), |x| x.node.clone());
        let node_qv = qv.as_ref().map_or(q.node.clone(), |x| x.node.clone());
        let inner = |bias: Option<FloatTensor<B>>, qv: Option<FloatTensor<B>>, r: Option<FloatTensor<B>>| Terms::<B> {
            bias: bias.map(t),
            relative: qv.zip(r).map(|(qv, r)| dense_attention::RelativeTerm { qv: t(qv), r: t(r) }),
        };
        let has_bias = bias.is_some();
        let (bias, qv) = (bias.map(|x| x.primitive), qv.map(|x| x.primitive));
        match AttentionBackward
            .prepare::<C>([q.node.clone(), k.node.clone(), v.node.clone(), node_bias, node_qv])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (out, weights) = B::dense_attention_forward(
                    t(q.primitive.clone()),
                    t(k.primitive.clone()),
                    t(v.primitive.clone()),
                    t(key_mask),
                    keep.clone().map(t),
                    heads,
                    scale,
                    inner(bias, qv, r.clone()),
                );
                let out = p(out);
                let state = (q.primitive, k.primitive, v.primitive, keep, p(weights), heads, scale, r, has_bias);
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::dense_attention(
                q.primitive,
                k.primitive,
                v.primitive,
                key_mask,
                keep,
                heads,
                scale,
                inner(bias, qv, r),
            )),
        }
    }
}
