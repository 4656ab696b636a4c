//! Benchmarks over the same training step ([`crate::train::step`]) and inference
//! path ([`crate::infer`]) that `seqlab train` and `predict` run:
//! throughput ([`throughput`]), peak memory ([`memory`]), and the CRF alone.
//! Beside them, what the engine uses to measure itself: a process's peak
//! memory and the step's estimate ([`peak`]), GPU kernel counts and CubeCL's
//! configuration ([`kernels`]).
//! Each reports the median of several timed repetitions after warm-up runs.

pub mod kernels;
pub mod memory;
pub mod peak;
pub mod throughput;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, TensorData};
use corpus::Scheme;
use crf::{Constraints, Crf, Reduction};
use serde_json::{json, Value};
use std::time::Instant;

/// Median of the timings of `iters` runs of `f`, after two warm-up runs.
pub fn median_seconds(iters: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[t.len() / 2]
}

/// The shape of a CRF benchmark.
pub struct CrfOptions {
    pub batch: usize,
    pub len: usize,
    /// Tags (17 = CoNLL-2003's 4 types in BIOES).
    pub tags: usize,
    pub iters: usize,
}

/// CRF throughput: NLL forward+backward and Viterbi on random emissions;
/// one JSON object per workload.
pub fn crf<B: AutodiffBackend>(a: &CrfOptions, device: &B::Device, device_name: &str) -> Result<Vec<Value>> {
    B::seed(device, 1);
    // A BIOES tag set with as many types as fit in `tags` (17 = 4 types).
    let types = ((a.tags.max(5) - 1) / 4).max(1);
    let labels: Vec<String> = (0..types).map(|i| format!("T{i}")).collect();
    let mut tags = Scheme::Bioes.tag_set(&labels);
    tags.truncate(a.tags.max(1));
    let t = tags.len();
    let cons = Constraints::from_scheme(Scheme::Bioes, &tags);
    let crf = Crf::<B>::new(&cons, 0.1, device);
    let emissions = Tensor::<B, 3>::random([a.batch, a.len, t], Distribution::Normal(0.0, 1.0), device);
    let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(vec![true; a.batch * a.len], [a.batch, a.len]), device);
    // Gold paths: the decoded ones (always legal).
    let gold = crf.decode(emissions.clone(), mask.clone());
    let flat: Vec<i64> = gold.into_iter().flatten().map(|v| v as i64).collect();
    let tags_t = Tensor::<B, 2, Int>::from_data(TensorData::new(flat, [a.batch, a.len]), device);
    let nll = median_seconds(a.iters, || {
        let e = emissions.clone().require_grad();
        let loss = crf.nll(e, tags_t.clone(), mask.clone(), Reduction::Mean);
        let _ = loss.backward();
    });
    let inner = crf.valid();
    let (e_inner, m_inner) = (emissions.clone().inner(), mask.clone().inner());
    let viterbi = median_seconds(a.iters, || {
        let _ = inner.decode(e_inner.clone(), m_inner.clone());
    });
    let threads = rayon::current_num_threads();
    Ok([("nll_forward_backward", nll), ("viterbi", viterbi)]
        .into_iter()
        .map(|(workload, secs)| {
            json!({"workload": workload, "device": device_name, "threads": threads, "batch": a.batch,
                "len": a.len, "tags": t, "seconds": secs, "sentences_per_second": a.batch as f64 / secs})
        })
        .collect())
}
