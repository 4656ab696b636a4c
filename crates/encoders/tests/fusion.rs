//! The fusion layers of the BiDAF and DCN readers against their papers'
//! formulas written as plain loops in f64, on small random inputs with
//! padded questions and contexts; and the configurations they refuse.

mod common;

use burn::backend::ndarray::NdArrayDevice;
use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::Distribution;
use encoders::coattention::Coattention;
use encoders::flow::AttentionFlow;
use encoders::{EncoderKind, QuestionMode};

type B = NdArray<f32>;

const D: usize = 3;
/// Two rows: context lengths 4 and 2 of 4, question lengths 2 and 3 of 3.
const CONTEXTS: [usize; 2] = [4, 2];
const QUESTIONS: [usize; 2] = [2, 3];

/// `[B, L, D]` random values, zero at the padded positions (as an encoder
/// gives them), as a tensor and as nested vectors.
fn encoded(lengths: &[usize], l: usize, dev: &NdArrayDevice) -> (Tensor<B, 3>, Vec<Vec<Vec<f64>>>) {
    let x = Tensor::<B, 3>::random([lengths.len(), l, D], Distribution::Normal(0.0, 1.0), dev)
        * common::mask::<B>(lengths, l, dev).float().unsqueeze_dim::<3>(2);
    let v = common::values(x.clone());
    let nested = (0..lengths.len())
        .map(|b| (0..l).map(|i| (0..D).map(|k| v[(b * l + i) * D + k] as f64).collect()).collect())
        .collect();
    (x, nested)
}

fn float_mask(lengths: &[usize], l: usize, dev: &NdArrayDevice) -> Tensor<B, 2> {
    common::mask::<B>(lengths, l, dev).float()
}

fn softmax(scores: &[f64]) -> Vec<f64> {
    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
    let z: f64 = e.iter().sum();
    e.iter().map(|x| x / z).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `Σ_j p_j v_j`.
fn mix(p: &[f64], v: &[Vec<f64>]) -> Vec<f64> {
    (0..v[0].len()).map(|k| p.iter().zip(v).map(|(pj, vj)| pj * vj[k]).sum()).collect()
}

fn f64s<const N: usize>(t: Tensor<B, N>) -> Vec<f64> {
    common::values(t).into_iter().map(f64::from).collect()
}

/// Checks the real context rows of `got [B, L, W]` against `want(b, i)`.
fn check_rows(got: Tensor<B, 3>, want: impl Fn(usize, usize) -> Vec<f64>, what: &str) {
    let [_, l, w] = got.dims();
    let v = f64s(got);
    for (b, &n) in CONTEXTS.iter().enumerate() {
        for i in 0..n {
            let want = want(b, i);
            assert_eq!(want.len(), w, "{what}: width");
            for (k, x) in want.iter().enumerate() {
                let y = v[(b * l + i) * w + k];
                assert!((x - y).abs() < 1e-4, "{what}: row {b} position {i} element {k}: {y}, want {x}");
            }
        }
    }
}

#[test]
fn attention_flow_is_bidafs_formula() {
    let dev = Default::default();
    let _rng = common::seeded::<B>(&dev, 11);
    let flow = AttentionFlow::<B>::new(D, &dev);
    let (c, cv) = encoded(&CONTEXTS, 4, &dev);
    let (q, qv) = encoded(&QUESTIONS, 3, &dev);
    let (w_c, w_q, w_cq) = (f64s(flow.w_c.val()), f64s(flow.w_q.val()), f64s(flow.w_cq.val()));
    // S_tj = w_(S)ᵀ [c_t; q_j; c_t∘q_j], over the real question tokens.
    let s = |b: usize, t: usize| -> Vec<f64> {
        let c = &cv[b][t];
        (0..QUESTIONS[b])
            .map(|j| {
                let q = &qv[b][j];
                let cq: Vec<f64> = c.iter().zip(q).map(|(x, y)| x * y).collect();
                dot(&w_c, c) + dot(&w_q, q) + dot(&w_cq, &cq)
            })
            .collect()
    };
    let a = |b: usize, t: usize| mix(&softmax(&s(b, t)), &qv[b][..QUESTIONS[b]]);
    // b = Σ_t softmax_t(max_j S_tj) c_t over the real context tokens.
    let h = |b: usize| {
        let best: Vec<f64> = (0..CONTEXTS[b]).map(|t| s(b, t).into_iter().fold(f64::NEG_INFINITY, f64::max)).collect();
        mix(&softmax(&best), &cv[b][..CONTEXTS[b]])
    };
    let out = flow.forward(c.clone(), float_mask(&CONTEXTS, 4, &dev), q, float_mask(&QUESTIONS, 3, &dev));
    assert_eq!(out.g.dims(), [2, 4, 4 * D]);
    check_rows(
        out.g,
        |b, t| {
            let (c, a, h) = (&cv[b][t], a(b, t), h(b));
            let ca = c.iter().zip(&a).map(|(x, y)| x * y);
            let ch = c.iter().zip(&h).map(|(x, y)| x * y);
            c.iter().cloned().chain(a.iter().cloned()).chain(ca).chain(ch).collect()
        },
        "g = [c; a; c∘a; c∘b]",
    );
    check_rows(
        out.c2q,
        |b, t| {
            let mut p = softmax(&s(b, t));
            p.resize(3, 0.0);
            p
        },
        "context-to-query weights",
    );
}

#[test]
fn coattention_is_dcns_formula() {
    let dev = Default::default();
    let _rng = common::seeded::<B>(&dev, 12);
    let coattention = Coattention::<B>::new(D, &dev);
    let (c, cv) = encoded(&CONTEXTS, 4, &dev);
    let (q, qv) = encoded(&QUESTIONS, 3, &dev);
    // Q = tanh(W q + b) per question token.
    let (w, bias) = (f64s(coattention.question.weight.val()), f64s(coattention.question.bias.as_ref().unwrap().val()));
    let project = |x: &[f64]| -> Vec<f64> {
        (0..D).map(|o| ((0..D).map(|i| x[i] * w[i * D + o]).sum::<f64>() + bias[o]).tanh()).collect()
    };
    let qp: Vec<Vec<Vec<f64>>> = qv.iter().map(|row| row.iter().map(|x| project(x)).collect()).collect();
    // Affinity L_tj = c_t · Q_j; A^Q normalises over the question, A^D over the context.
    let s_c = |b: usize, t: usize| -> Vec<f64> {
        let (nc, nq) = (CONTEXTS[b], QUESTIONS[b]);
        let summaries: Vec<Vec<f64>> = (0..nq)
            .map(|j| {
                let over_context: Vec<f64> = (0..nc).map(|u| dot(&cv[b][u], &qp[b][j])).collect();
                let s_q = mix(&softmax(&over_context), &cv[b][..nc]);
                qp[b][j].iter().cloned().chain(s_q).collect()
            })
            .collect();
        let over_question: Vec<f64> = (0..nq).map(|j| dot(&cv[b][t], &qp[b][j])).collect();
        mix(&softmax(&over_question), &summaries)
    };
    let out = coattention.forward(c, float_mask(&CONTEXTS, 4, &dev), q, float_mask(&QUESTIONS, 3, &dev));
    assert_eq!(out.u.dims(), [2, 4, 3 * D]);
    check_rows(out.u, |b, t| cv[b][t].iter().cloned().chain(s_c(b, t)).collect(), "u = [c; s_c]");
}

#[test]
fn fusing_readers_need_a_bilstm_and_a_modelling_layer() {
    for mode in [QuestionMode::Flow, QuestionMode::Coattention] {
        let mut cfg = common::small_tagger(EncoderKind::Bilstm, mode);
        assert_eq!(cfg.validate(), Ok(()), "{mode:?}");
        cfg.modelling.layers = 0;
        let err = cfg.validate().unwrap_err();
        assert!(err.contains("modelling.layers"), "{err}");
        let cfg = common::small_tagger(EncoderKind::Attention, mode);
        let err = cfg.validate().unwrap_err();
        assert!(err.contains(mode.as_str()) && err.contains("encoder.kind = \"bilstm\""), "{err}");
    }
}
