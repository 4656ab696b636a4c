//! Decoding emissions held on the host (the inference path) gives what
//! decoding the same emissions as tensors gives, for both decoders.

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::{Distribution, TensorData};
use corpus::{Scheme, Tag};
use encoders::{DecoderKind, TaggerConfig, TaggerShape};

type B = NdArray<f32>;

#[test]
fn host_decoding_equals_tensor_decoding() {
    let device = Default::default();
    let labels = vec!["PER".to_string(), "LOC".to_string()];
    let tags: Vec<Tag> = Scheme::Bioes.tag_set(&labels);
    let t = tags.len();
    for decoder in [DecoderKind::Crf, DecoderKind::Softmax] {
        B::seed(&device, 3);
        let cfg = TaggerConfig { decoder, ..Default::default() };
        let shape =
            TaggerShape { words: 10, chars: 10, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
        let model = cfg.init::<B>(shape, &device);
        let lengths = [4usize, 7, 0, 1];
        let l = 7;
        let e = Tensor::<B, 3>::random([lengths.len(), l, t], Distribution::Normal(0.0, 2.0), &device);
        let m: Vec<bool> = lengths.iter().flat_map(|&n| (0..l).map(move |i| i < n)).collect();
        let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(m, [lengths.len(), l]), &device);
        let values: Vec<f32> = e.clone().into_data().iter::<f32>().collect();
        let host: Vec<&[f32]> = lengths.iter().enumerate().map(|(s, &n)| &values[s * l * t..(s * l + n) * t]).collect();
        assert_eq!(model.decode_host(&host), model.decode_emissions(e.clone(), mask.clone()), "{decoder:?}");
        let probs: Vec<f32> = model.probabilities(e, mask).into_data().iter::<f32>().collect();
        for (s, p) in model.probabilities_host(&host).iter().enumerate() {
            let want = &probs[s * l * t..(s * l + lengths[s]) * t];
            assert_eq!(p.len(), want.len());
            for (a, b) in p.iter().zip(want) {
                assert!((a - b).abs() < 1e-6, "{decoder:?}, sentence {s}: {a} vs {b}");
            }
        }
    }
}

/// Every tag path of `n` tokens over `t` tags.
fn all_paths(t: usize, n: usize) -> Vec<Vec<usize>> {
    (0..t.pow(n as u32)).map(|mut code| (0..n).map(|_| (code % t, code /= t).0).collect()).collect()
}

/// `k_best_host` against enumeration: for the CRF, every allowed path and
/// no other, probabilities summing to one, best first, the first being
/// Viterbi's; for softmax, exactly the paths sorted by the product of
/// their tokens' probabilities.
#[test]
fn k_best_host_against_brute_force() {
    let device = Default::default();
    let labels = vec!["PER".to_string(), "LOC".to_string()];
    let tags: Vec<Tag> = Scheme::Bioes.tag_set(&labels);
    let t = tags.len();
    let constraints = crf::Constraints::from_scheme(Scheme::Bioes, &tags);
    for decoder in [DecoderKind::Crf, DecoderKind::Softmax] {
        B::seed(&device, 5);
        let cfg = TaggerConfig { decoder, ..Default::default() };
        let shape =
            TaggerShape { words: 10, chars: 10, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
        let model = cfg.init::<B>(shape, &device);
        for n in 0..=3usize {
            let em: Vec<f32> = if n == 0 {
                Vec::new()
            } else {
                let e = Tensor::<B, 2>::random([n, t], Distribution::Normal(0.0, 2.0), &device);
                e.into_data().iter::<f32>().collect()
            };
            let all = model.k_best_host(&[&em], t.pow(n as u32) + 5).remove(0);
            let sum: f64 = all.iter().map(|(_, p)| p).sum();
            assert!((sum - 1.0).abs() < 1e-6, "{decoder:?}, n {n}: probabilities sum to {sum}");
            assert!(all.windows(2).all(|w| w[0].1 >= w[1].1), "{decoder:?}, n {n}: not best first");
            assert_eq!(all[0].0, model.decode_host(&[&em])[0], "{decoder:?}, n {n}: first is not the best path");
            let top3 = model.k_best_host(&[&em], 3).remove(0);
            assert_eq!(top3[..], all[..all.len().min(3)], "{decoder:?}, n {n}: k = 3 is not a prefix");
            let paths = all_paths(t, n);
            if decoder == DecoderKind::Crf {
                let allowed: Vec<&Vec<usize>> = paths.iter().filter(|p| constraints.path_allowed(p)).collect();
                assert_eq!(all.len(), allowed.len(), "CRF, n {n}: not every allowed path");
                assert!(all.iter().all(|(p, _)| constraints.path_allowed(p)), "CRF, n {n}: a forbidden path");
                continue;
            }
            // Softmax: the product of each token's probability.
            let prob = |p: &[usize]| -> f64 {
                p.iter()
                    .enumerate()
                    .map(|(i, &y)| {
                        let row = &em[i * t..(i + 1) * t];
                        let z: f64 = row.iter().map(|&x| f64::from(x).exp()).sum();
                        f64::from(row[y]).exp() / z
                    })
                    .product()
            };
            let mut want: Vec<(Vec<usize>, f64)> = paths.iter().map(|p| (p.clone(), prob(p))).collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1));
            assert_eq!(all.len(), want.len());
            for ((p, q), (wp, wq)) in all.iter().zip(&want) {
                assert_eq!(p, wp, "softmax, n {n}");
                assert!((q - wq).abs() < 1e-9, "softmax, n {n}: {q} vs {wq}");
            }
        }
    }
}
