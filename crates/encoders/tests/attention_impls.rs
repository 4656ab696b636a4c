//! The memory-saving attention implementations compute what the dense
//! formula computes: chunked equals dense, local equals dense with a band
//! mask; forward values and gradients, with padding.

mod common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::AutodiffModule;
use burn::prelude::*;
use burn::tensor::{Distribution, TensorData, TensorPrimitive};
use common::{assert_close_relative, attention_grads, mask, seeded, values};
use encoders::attention::{AttentionImpl, AttentionPlan, MultiHeadAttention, MultiHeadConfig};
use encoders::ops::SeqBackend;
use encoders::positional::Position;

type B = NdArray<f32>;
type AD = Autodiff<NdArray<f32>>;
/// Gradients are compared on Flex: burn-ndarray's f32 reciprocal is the
/// CPU's approximate one (about 12 bits, up to 3e-4 relative error), and
/// Burn's autodiff takes a reciprocal for the gradient of every division,
/// softmax's too. On NdArray the dense reference's own gradients are then
/// off by up to 4e-3 (relative to 1 + |value|) from the same formula in
/// f64, where chunked, local and dense agree to 1e-13; on Flex all three
/// are within 3e-6 of f64 (600 draws, 2026-12-04).
type ADF = Autodiff<Flex>;

fn mha<Bk: Backend>(relative: bool, scaled: bool, dev: &Bk::Device) -> MultiHeadAttention<Bk> {
    let position = if relative { Position::Relative } else { Position::None };
    with_position(position, scaled, dev)
}

fn with_position<Bk: Backend>(position: Position, scaled: bool, dev: &Bk::Device) -> MultiHeadAttention<Bk> {
    MultiHeadConfig { d_query: 16, d_key: 16, heads: 2, head_dim: 8, dropout: 0.0, position, scaled }.init(dev)
}

fn plan(imp: AttentionImpl, block: usize, window: usize) -> AttentionPlan {
    AttentionPlan { imp, block, window, fused: true }
}

/// The context of `imp`, and the dense (weights-returning) reference for
/// the same plan (for local: dense with the band mask).
fn both<Bk: SeqBackend>(
    m: &MultiHeadAttention<Bk>,
    x: Tensor<Bk, 3>,
    mk: Tensor<Bk, 2, Bool>,
    p: AttentionPlan,
) -> (Tensor<Bk, 3>, Tensor<Bk, 3>) {
    let fast = m.forward(x.clone(), x.clone(), mk.clone(), p, false).context;
    let reference = m.forward(x.clone(), x, mk, p, true).context;
    (fast, reference)
}

#[test]
fn chunked_forward_equals_dense_with_padding() {
    let dev = Default::default();
    let _rng = seeded::<B>(&dev, 3);
    let m = mha::<B>(false, true, &dev);
    for (l, block) in [(13usize, 4usize), (16, 16), (9, 64), (21, 5)] {
        let x = Tensor::<B, 3>::random([3, l, 16], Distribution::Normal(0.0, 1.0), &dev);
        let mk = mask::<B>(&[l, l / 2, 1], l, &dev);
        let (fast, dense) = both(&m, x, mk, plan(AttentionImpl::Chunked, block, 4));
        assert_close_relative(&values(fast), &values(dense), 1e-5, &format!("L {l} block {block}"));
    }
}

#[test]
fn local_forward_equals_dense_with_a_band_mask() {
    let dev = Default::default();
    let _rng = seeded::<B>(&dev, 4);
    for relative in [false, true] {
        let m = mha::<B>(relative, !relative, &dev);
        for (l, w) in [(13usize, 3usize), (8, 8), (20, 2), (5, 16)] {
            let x = Tensor::<B, 3>::random([2, l, 16], Distribution::Normal(0.0, 1.0), &dev);
            let mk = mask::<B>(&[l, (l + 1) / 2], l, &dev);
            let (fast, dense) = both(&m, x, mk, plan(AttentionImpl::Local, 64, w));
            assert_close_relative(
                &values(fast),
                &values(dense),
                1e-5,
                &format!("relative {relative} L {l} window {w}"),
            );
        }
    }
}

#[test]
fn a_window_covering_the_sentence_is_plain_attention() {
    let dev = Default::default();
    let _rng = seeded::<B>(&dev, 5);
    let m = mha::<B>(true, false, &dev);
    let x = Tensor::<B, 3>::random([2, 7, 16], Distribution::Normal(0.0, 1.0), &dev);
    let mk = mask::<B>(&[7, 4], 7, &dev);
    let local = m.forward(x.clone(), x.clone(), mk.clone(), plan(AttentionImpl::Local, 64, 7), false).context;
    let dense = m.forward(x.clone(), x, mk, AttentionPlan::dense(), true).context;
    assert_close_relative(&values(local), &values(dense), 1e-5, "window ≥ L");
}

/// Gradients of every parameter of the attention layer, flattened, for a
/// fixed random projection of its output.
fn grads(
    m: &MultiHeadAttention<ADF>,
    x: Tensor<ADF, 3>,
    mk: Tensor<ADF, 2, Bool>,
    p: AttentionPlan,
    reference: bool,
) -> Vec<Vec<f32>> {
    attention_grads(m, m.forward(x.clone(), x, mk, p, reference).context)
}

#[test]
fn chunked_and_local_gradients_equal_the_dense_ones() {
    let dev = Default::default();
    let _rng = seeded::<ADF>(&dev, 6);
    for (imp, relative) in
        [(AttentionImpl::Chunked, false), (AttentionImpl::Local, false), (AttentionImpl::Local, true)]
    {
        let m = mha::<ADF>(relative, true, &dev);
        let x = Tensor::<ADF, 3>::random([2, 11, 16], Distribution::Normal(0.0, 1.0), &dev);
        let mk = mask::<ADF>(&[11, 6], 11, &dev);
        let p = plan(imp, 3, 2);
        let fast = grads(&m, x.clone(), mk.clone(), p, false);
        let dense = grads(&m, x, mk, p, true);
        for (i, (a, b)) in fast.iter().zip(&dense).enumerate() {
            assert_close_relative(a, b, 2e-5, &format!("{imp:?} relative {relative}: parameter {i}"));
        }
    }
}

#[test]
fn flash_attention_gives_zeros_for_a_query_without_real_keys() {
    let dev = Default::default();
    let _rng = seeded::<AD>(&dev, 7);
    let q = Tensor::<AD, 4>::random([2, 1, 3, 4], Distribution::Normal(0.0, 10.0), &dev).require_grad();
    let k = Tensor::<AD, 4>::random([2, 1, 5, 4], Distribution::Normal(0.0, 10.0), &dev).require_grad();
    let v = Tensor::<AD, 4>::random([2, 1, 5, 4], Distribution::Normal(0.0, 1.0), &dev).require_grad();
    // Sentence 1 has no real key.
    let m: Vec<f32> = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0].to_vec();
    let mk = Tensor::<AD, 4>::from_data(TensorData::new(m, [2, 1, 1, 5]), &dev);
    let prim = |t: Tensor<AD, 4>| t.into_primitive().tensor();
    let out: Tensor<AD, 4> = Tensor::from_primitive(TensorPrimitive::Float(AD::flash_attention(
        prim(q.clone()),
        prim(k.clone()),
        prim(v.clone()),
        prim(mk),
        0.5,
        2,
    )));
    let o = values(out.clone());
    assert!(o[12..].iter().all(|&x| x == 0.0), "{o:?}");
    assert!(o.iter().all(|x| x.is_finite()));
    let g = out.sum().backward();
    for t in [q, k, v] {
        assert!(values(t.grad(&g).unwrap()).iter().all(|x| x.is_finite()), "NaN gradient");
    }
}

#[test]
fn inference_uses_the_same_function_as_training() {
    // The inner-backend (no autodiff) forward of chunked attention equals the
    // autodiff one.
    let dev = Default::default();
    let _rng = seeded::<AD>(&dev, 8);
    let m = mha::<AD>(false, true, &dev);
    let x = Tensor::<AD, 3>::random([2, 9, 16], Distribution::Normal(0.0, 1.0), &dev);
    let mk = mask::<AD>(&[9, 4], 9, &dev);
    let p = plan(AttentionImpl::Chunked, 4, 2);
    let train = values(m.forward(x.clone(), x.clone(), mk.clone(), p, false).context);
    let inner = m.valid();
    let infer = values(inner.forward(x.clone().inner(), x.inner(), mk.inner(), p, false).context);
    assert_close_relative(&train, &infer, 1e-6, "autodiff vs inner");
}

/// Attention weights are `softmax(q·k / √Dh)` per head, and with
/// `scaled = false` (TENER's "sharp" attention) `softmax(q·k)`: checked
/// against the formula from the module's own projections, padding masked.
#[test]
fn unscaled_attention_drops_the_square_root_and_nothing_else() {
    let dev = Default::default();
    let _rng = seeded::<B>(&dev, 6);
    let (l, heads, dh) = (5usize, 2usize, 8usize);
    let x = Tensor::<B, 3>::random([1, l, 16], Distribution::Normal(0.0, 1.0), &dev);
    let real = 4; // the last position is padding
    let mk = mask::<B>(&[real], l, &dev);
    for (is_scaled, scale) in [(true, 1.0 / (dh as f32).sqrt()), (false, 1.0)] {
        let m = mha::<B>(false, is_scaled, &dev);
        let got = m.forward(x.clone(), x.clone(), mk.clone(), plan(AttentionImpl::Dense, 64, 4), true);
        let got = values(got.weights.unwrap().reshape([heads * l * l]));
        let q = values(m.query.forward(x.clone()).reshape([l * heads * dh]));
        let k = values(m.key.forward(x.clone()).reshape([l * heads * dh]));
        for h in 0..heads {
            for i in 0..l {
                let s: Vec<f32> = (0..real)
                    .map(|j| {
                        (0..dh).map(|d| q[i * heads * dh + h * dh + d] * k[j * heads * dh + h * dh + d]).sum::<f32>()
                    })
                    .map(|s| s * scale)
                    .collect();
                let top = s.iter().cloned().fold(f32::MIN, f32::max);
                let z: f32 = s.iter().map(|v| (v - top).exp()).sum();
                for j in 0..l {
                    let want = if j < real { (s[j] - top).exp() / z } else { 0.0 };
                    let g = got[h * l * l + i * l + j];
                    assert!((g - want).abs() < 1e-5, "scaled {is_scaled}, head {h}, {i}→{j}: {g} vs {want}");
                }
            }
        }
    }
}

/// Dense attention as one operation with the position terms inside it
/// (TENER's relative term, ALiBi's and T5's biases) computes what the
/// plain formula computes (the weights-returning path): the context and
/// every parameter's gradient (u, v and T5's table included), with
/// padding, TENER's unscaled scores too; and inference (no autodiff, the
/// host loops without saved weights) gives the same context.
#[test]
fn the_one_operation_equals_the_plain_formula_with_every_score_term() {
    let dev = Default::default();
    let _rng = seeded::<ADF>(&dev, 13);
    let random = |shape: [usize; 2]| {
        burn::module::Param::from_tensor(Tensor::<ADF, 2>::random(shape, Distribution::Normal(0.0, 1.0), &dev))
    };
    for (position, scaled) in
        [(Position::Relative, false), (Position::Relative, true), (Position::Alibi, true), (Position::T5, false)]
    {
        let mut m = with_position::<ADF>(position, scaled, &dev);
        // Their initial zeros would hide a misplaced term.
        if let Some(rel) = m.relative.as_mut() {
            (rel.u, rel.v) = (random([2, 8]), random([2, 8]));
        }
        if let Some(t5) = m.t5.as_mut() {
            *t5 = random(t5.val().dims());
        }
        for (l, lengths) in [(11usize, [11usize, 6, 1]), (70, [70, 33, 2])] {
            let what = format!("{position:?} scaled {scaled} L {l}");
            let x = Tensor::<ADF, 3>::random([3, l, 16], Distribution::Normal(0.0, 1.0), &dev);
            let mk = mask::<ADF>(&lengths, l, &dev);
            let p = AttentionPlan::dense();
            let (one, plain) = both(&m, x.clone(), mk.clone(), p);
            let inference = m.valid().forward(x.clone().inner(), x.clone().inner(), mk.clone().inner(), p, false);
            // Padded query rows are whatever each computes; compare real ones.
            for (s, &n) in lengths.iter().enumerate() {
                let row = |t: Tensor<Flex, 3>| values(t.slice([s..s + 1, 0..n, 0..16]));
                let plain = row(plain.clone().inner());
                assert_close_relative(&row(one.clone().inner()), &plain, 2e-5, &format!("{what}: sentence {s}"));
                let inferred = row(inference.context.clone());
                assert_close_relative(&inferred, &plain, 2e-5, &format!("{what}: inference, sentence {s}"));
            }
            let real = mk.float().unsqueeze_dim::<3>(2).expand([3, l, 16]);
            let (got, want) = (attention_grads(&m, one * real.clone()), attention_grads(&m, plain * real));
            assert_eq!(
                got.len(),
                if position == Position::Alibi { 8 } else { 9 + usize::from(position == Position::Relative) }
            );
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_close_relative(a, b, 5e-5, &format!("{what}: gradient of parameter {i}"));
            }
        }
    }
}
