//! RoPE, ALiBi and T5's bias in the attention scores, each checked against
//! its formula composed here from plain tensor operations, written another
//! way than the module writes it: a rotation matrix per position for RoPE,
//! a bias matrix filled in loops with the paper's slopes for ALiBi, a
//! one-hot matrix of distance buckets times the table for T5. The context
//! and every parameter's gradient agree, with padding, through each
//! attention implementation the position allows (dense, fused, local, and
//! chunked for RoPE).

mod common;

use burn::backend::{Autodiff, Flex};
use burn::module::Param;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::activation::softmax;
use burn::tensor::{Distribution, TensorData};
use common::{assert_close_relative, attention_grads, mask, seeded, values};
use encoders::attention::{AttentionImpl, AttentionPlan, MultiHeadAttention, MultiHeadConfig};
use encoders::positional::{t5_bucket, Position, T5_BUCKETS};
use encoders::transformer::AttentionConfig;

/// Gradients on Flex (see attention_impls.rs for why not NdArray).
type AD = Autodiff<Flex>;

const HEADS: usize = 2;
const DH: usize = 8;
const D: usize = HEADS * DH;

fn mha(position: Position, dev: &burn::tensor::Device<AD>) -> MultiHeadAttention<AD> {
    let mut m =
        MultiHeadConfig { d_query: D, d_key: D, heads: HEADS, head_dim: DH, dropout: 0.0, position, scaled: true }
            .init::<AD>(dev);
    if position == Position::T5 {
        // A zero table (its initial value) would hide a misplaced bucket.
        let table = Tensor::<AD, 2>::random([T5_BUCKETS, HEADS], Distribution::Normal(0.0, 1.0), dev);
        m.t5 = Some(Param::from_tensor(table));
    }
    m
}

/// `x [B, L, Din] · W + b` → `[B, L, Dout]`.
fn linear(lin: &Linear<AD>, x: Tensor<AD, 3>) -> Tensor<AD, 3> {
    let [b, l, din] = x.dims();
    let w = lin.weight.val(); // [Din, Dout]
    let dout = w.dims()[1];
    let y = x.reshape([b * l, din]).matmul(w) + lin.bias.as_ref().unwrap().val().unsqueeze_dim::<2>(0);
    y.reshape([b, l, dout])
}

/// `[B, L, H·Dh]` → `[B, H, L, Dh]`.
fn heads(x: Tensor<AD, 3>) -> Tensor<AD, 4> {
    let [b, l, _] = x.dims();
    x.reshape([b, l, HEADS, DH]).swap_dims(1, 2)
}

/// RoPE as a matrix: row vector `x` of position `p` times `R_p [Dh, Dh]`,
/// block-diagonal with `[[cos θ, sin θ], [−sin θ, cos θ]]`, `θ = p / 10000^(2m/Dh)`.
fn rotate_by_matrix(x: Tensor<AD, 4>) -> Tensor<AD, 4> {
    let [b, h, l, dh] = x.dims();
    let mut r = vec![0f32; l * dh * dh];
    for p in 0..l {
        for m in 0..dh / 2 {
            let theta = p as f64 / 10000f64.powf(2.0 * m as f64 / dh as f64);
            let (c, s) = (theta.cos() as f32, theta.sin() as f32);
            let at = |i: usize, j: usize| p * dh * dh + i * dh + j;
            r[at(2 * m, 2 * m)] = c;
            r[at(2 * m, 2 * m + 1)] = s;
            r[at(2 * m + 1, 2 * m)] = -s;
            r[at(2 * m + 1, 2 * m + 1)] = c;
        }
    }
    let r = Tensor::<AD, 3>::from_data(TensorData::new(r, [l, dh, dh]), &x.device());
    let rows = x.reshape([b * h * l, 1, dh]); // [B·H·L, 1, Dh]
    let r = r.unsqueeze_dim::<4>(0).expand([b * h, l, dh, dh]).reshape([b * h * l, dh, dh]);
    rows.matmul(r).reshape([b, h, l, dh])
}

/// The position's bias `[1, H, L, L]` for query `i`, key `j` (zeros for RoPE).
fn bias(m: &MultiHeadAttention<AD>, position: Position, l: usize, dev: &burn::tensor::Device<AD>) -> Tensor<AD, 4> {
    match position {
        Position::Alibi => {
            // get_slopes(2) of the ALiBi reference: 2^(−8/2), 2^(−16/2).
            let slopes = [1.0f32 / 16.0, 1.0 / 256.0];
            let mut v = vec![0f32; HEADS * l * l];
            for (h, m) in slopes.iter().enumerate() {
                for i in 0..l {
                    for j in 0..l {
                        v[(h * l + i) * l + j] = -m * i.abs_diff(j) as f32;
                    }
                }
            }
            Tensor::from_data(TensorData::new(v, [1, HEADS, l, l]), dev)
        }
        Position::T5 => {
            let mut onehot = vec![0f32; l * l * T5_BUCKETS];
            for i in 0..l {
                for j in 0..l {
                    onehot[(i * l + j) * T5_BUCKETS + t5_bucket(i as i64 - j as i64)] = 1.0;
                }
            }
            let onehot = Tensor::<AD, 2>::from_data(TensorData::new(onehot, [l * l, T5_BUCKETS]), dev);
            let per_pair = onehot.matmul(m.t5.as_ref().unwrap().val()); // [L·L, H]
            per_pair.reshape([l, l, HEADS]).swap_dims(0, 2).swap_dims(1, 2).unsqueeze_dim::<4>(0)
            // [1, H, L, L]
        }
        _ => Tensor::zeros([1, HEADS, l, l], dev),
    }
}

/// The attention layer's context from the formula: keys masked by
/// `lengths` and, with `band`, to `|i − j| ≤ band`.
fn composed(
    m: &MultiHeadAttention<AD>,
    position: Position,
    x: Tensor<AD, 3>,
    lengths: &[usize],
    band: Option<usize>,
) -> Tensor<AD, 3> {
    let [b, l, _] = x.dims();
    let dev = x.device();
    let (mut q, mut k, v) =
        (heads(linear(&m.query, x.clone())), heads(linear(&m.key, x.clone())), heads(linear(&m.value, x)));
    if position == Position::Rope {
        (q, k) = (rotate_by_matrix(q), rotate_by_matrix(k));
    }
    let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(1.0 / (DH as f32).sqrt()) + bias(m, position, l, &dev); // [B, H, L, L]
    let mut keep = vec![0f32; b * l * l];
    for (s, &n) in lengths.iter().enumerate() {
        for i in 0..l {
            for j in 0..n {
                keep[(s * l + i) * l + j] = f32::from(band.is_none_or(|w| i.abs_diff(j) <= w));
            }
        }
    }
    let keep = Tensor::<AD, 4>::from_data(TensorData::new(keep, [b, 1, l, l]), &dev).expand([b, HEADS, l, l]);
    let weights = softmax(scores.mask_fill(keep.clone().lower_elem(0.5), -1e9), 3) * keep; // [B, H, L, L]
    let ctx = weights.matmul(v).swap_dims(1, 2).reshape([b, l, D]); // [B, L, D]
    linear(&m.output, ctx)
}

fn plan(imp: AttentionImpl, window: usize) -> AttentionPlan {
    AttentionPlan { imp, block: 3, window, fused: true }
}

#[test]
fn rope_alibi_and_t5_give_their_formulas_context_and_gradients() {
    let dev = Default::default();
    let _rng = seeded::<AD>(&dev, 11);
    let (l, lengths) = (11usize, [11usize, 6, 1]);
    for position in [Position::Rope, Position::Alibi, Position::T5] {
        let m = mha(position, &dev);
        let x = Tensor::<AD, 3>::random([3, l, D], Distribution::Normal(0.0, 1.0), &dev);
        let mk = mask::<AD>(&lengths, l, &dev);
        let mut cases = vec![
            ("dense", plan(AttentionImpl::Dense, 4), false, None),
            ("dense with weights", plan(AttentionImpl::Dense, 4), true, None),
            ("local", plan(AttentionImpl::Local, 3), false, Some(3)),
            ("local, window ≥ L", plan(AttentionImpl::Local, 16), false, None),
        ];
        if position == Position::Rope {
            cases.push(("chunked", plan(AttentionImpl::Chunked, 4), false, None));
        }
        for (what, p, want_weights, band) in cases {
            let what = format!("{position:?} {what}");
            let out = m.forward(x.clone(), x.clone(), mk.clone(), p, want_weights).context;
            let reference = composed(&m, position, x.clone(), &lengths, band);
            // Padded query rows are whatever each computes; compare real ones.
            for (s, &n) in lengths.iter().enumerate() {
                let row = |t: &Tensor<AD, 3>| values(t.clone().slice([s..s + 1, 0..n, 0..D]));
                assert_close_relative(&row(&out), &row(&reference), 2e-5, &format!("{what}: sentence {s}"));
            }
            let real = mk.clone().float().unsqueeze_dim::<3>(2).expand([3, l, D]);
            let (got, want) = (attention_grads(&m, out * real.clone()), attention_grads(&m, reference * real));
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_close_relative(a, b, 5e-5, &format!("{what}: gradient of parameter {i}"));
            }
        }
    }
}

#[test]
fn rope_scores_depend_on_the_distance_only() {
    // The same token at every position: with RoPE, the weights a query
    // gives the keys depend only on how far they are (no input positions).
    let dev = Default::default();
    let _rng = seeded::<AD>(&dev, 12);
    let m = mha(Position::Rope, &dev);
    let l = 9;
    let token = Tensor::<AD, 3>::random([1, 1, D], Distribution::Normal(0.0, 1.0), &dev);
    let x = token.expand([1, l, D]);
    let w = values(m.forward(x.clone(), x, mask::<AD>(&[l], l, &dev), AttentionPlan::dense(), true).weights.unwrap());
    let weight = |h: usize, i: usize, j: usize| w[(h * l + i) * l + j];
    for h in 0..HEADS {
        // Queries 3 and 5 see keys 2 apart on either side alike (up to the softmax's row sum).
        let ratio = |i: usize| weight(h, i, i + 2) / weight(h, i, i - 2);
        assert!((ratio(3) - ratio(5)).abs() < 1e-4 * ratio(3).abs().max(1.0), "head {h}");
    }
}

#[test]
fn alibi_prefers_near_keys_and_t5_learns_a_bias_per_bucket() {
    let dev = Default::default();
    let _rng = seeded::<AD>(&dev, 13);
    let l = 6;
    // Identical tokens: the content scores are equal, only the bias differs.
    let token = Tensor::<AD, 3>::random([1, 1, D], Distribution::Normal(0.0, 1.0), &dev);
    let x = token.expand([1, l, D]);
    let m = mha(Position::Alibi, &dev);
    let w = values(
        m.forward(x.clone(), x.clone(), mask::<AD>(&[l], l, &dev), AttentionPlan::dense(), true).weights.unwrap(),
    );
    for h in 0..HEADS {
        let row: Vec<f32> = w[(h * l) * l..(h * l + 1) * l].to_vec(); // query 0
        assert!(row.windows(2).all(|p| p[0] > p[1]), "head {h}: weights fall with distance: {row:?}");
    }
    // T5's table starts at zero: uniform weights, and a gradient for the buckets used.
    let mut m = mha(Position::T5, &dev);
    m.t5 = Some(Param::from_tensor(Tensor::zeros([T5_BUCKETS, HEADS], &dev)));
    let out = m.forward(x.clone(), x, mask::<AD>(&[l], l, &dev), AttentionPlan::dense(), true);
    let w = values(out.weights.unwrap());
    assert!(w.iter().all(|&v| (v - 1.0 / l as f32).abs() < 1e-6));
    let g = attention_grads(&m, out.context);
    assert_eq!(g.last().unwrap().len(), T5_BUCKETS * HEADS);
}

#[test]
fn positions_that_bias_the_scores_refuse_chunked_attention_and_rope_needs_even_heads() {
    for position in [Position::Relative, Position::Alibi, Position::T5] {
        let cfg = AttentionConfig { position, implementation: AttentionImpl::Chunked, ..Default::default() };
        let err = cfg.validate().unwrap_err();
        assert!(err.contains(&format!("position = \"{}\"", position.as_str())), "{err}");
    }
    let ok = AttentionConfig { position: Position::Rope, implementation: AttentionImpl::Chunked, ..Default::default() };
    assert_eq!(ok.validate(), Ok(()));
    let odd = AttentionConfig { position: Position::Rope, d_model: 12, heads: 4, ..Default::default() };
    assert!(odd.validate().unwrap_err().contains("must be even"));
}
