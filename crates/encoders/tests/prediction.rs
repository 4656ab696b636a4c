//! `Tagger::log_prob_of` against enumeration: an entity's probability is
//! the total probability of the tag paths that give its tokens its tags
//! (the paths and their probabilities from `k_best_host`, itself checked
//! against brute force); an answer span's is the pointer's start and end
//! probabilities, or the one-span CRF's span probability. With padding, a
//! batch of rows asking about different predictions.

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::{Distribution, TensorData};
use corpus::{Scheme, Tag};
use encoders::prediction::Prediction;
use encoders::{DecoderKind, TaggerConfig, TaggerShape};

type B = NdArray<f32>;

fn mask(lengths: &[usize], l: usize, device: &burn::tensor::Device<B>) -> Tensor<B, 2, Bool> {
    let m: Vec<bool> = lengths.iter().flat_map(|&n| (0..l).map(move |i| i < n)).collect();
    Tensor::from_data(TensorData::new(m, [lengths.len(), l]), device)
}

#[test]
fn an_entitys_probability_is_the_mass_of_the_paths_that_tag_it_so() {
    let device = Default::default();
    let labels = vec!["PER".to_string(), "LOC".to_string()];
    let tags: Vec<Tag> = Scheme::Bioes.tag_set(&labels);
    let t = tags.len();
    for decoder in [DecoderKind::Crf, DecoderKind::Softmax] {
        B::seed(&device, 9);
        let cfg = TaggerConfig { decoder, ..Default::default() };
        let shape =
            TaggerShape { words: 10, chars: 10, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
        let model = cfg.init::<B>(shape, &device);
        let (n, l) = (4usize, 6usize);
        let e = Tensor::<B, 3>::random([1, l, t], Distribution::Normal(0.0, 2.0), &device);
        let values: Vec<f32> = e.clone().into_data().iter::<f32>().collect();
        // Every path of the 4 real tokens with its probability (padding after them).
        let paths = model.k_best_host(&[&values[..n * t]], t.pow(n as u32)).remove(0);
        // Every span of the sentence, each with the tags of two paths (the best and another).
        let mut asked = Vec::new();
        for (start, end) in [(0, 0), (1, 2), (0, 3), (3, 3), (1, 3)] {
            for (path, _) in [&paths[0], &paths[paths.len() / 3]] {
                asked.push(Prediction { start, end, tags: path[start..=end].to_vec() });
            }
        }
        let rows = asked.len();
        let batch = e.clone().expand([rows, l, t]);
        let got: Vec<f32> =
            model.log_prob_of(batch, mask(&vec![n; rows], l, &device), &asked).into_data().iter::<f32>().collect();
        for (p, lp) in asked.iter().zip(&got) {
            let want: f64 = paths.iter().filter(|(y, _)| y[p.start..=p.end] == p.tags[..]).map(|(_, pr)| pr).sum();
            let got = f64::from(lp.exp());
            assert!((got - want).abs() < 1e-5 * (1.0 + want), "{decoder:?} {p:?}: {got} vs {want}");
        }
    }
}

#[test]
fn an_answers_probability_is_the_span_decoders() {
    let device = Default::default();
    let tags: Vec<Tag> = Scheme::Bioes.tag_set(&["ANS".to_string()]);
    for decoder in [DecoderKind::Pointer, DecoderKind::SpanCrf] {
        B::seed(&device, 4);
        let cfg = TaggerConfig { decoder, max_answer: 30, ..Default::default() };
        let shape =
            TaggerShape { words: 10, chars: 10, bigrams: 0, tags: &tags, scheme: Scheme::Bioes, pretrained: None };
        let model = cfg.init::<B>(shape, &device);
        let o = model.outputs();
        let (lengths, l) = ([5usize, 3, 5], 5usize);
        let e = Tensor::<B, 3>::random([3, l, o], Distribution::Normal(0.0, 2.0), &device);
        let values: Vec<f32> = e.clone().into_data().iter::<f32>().collect();
        let asked = [(1, 3), (2, 2), (0, 4)].map(|(start, end)| Prediction { start, end, tags: Vec::new() });
        let got: Vec<f32> =
            model.log_prob_of(e, mask(&lengths, l, &device), &asked).into_data().iter::<f32>().collect();
        for (r, (p, lp)) in asked.iter().zip(&got).enumerate() {
            let em = &values[r * l * o..(r * l + lengths[r]) * o];
            let want = match decoder {
                DecoderKind::Pointer => {
                    let logp = |col: usize, at: usize| {
                        let xs: Vec<f64> = em.chunks(2).map(|s| f64::from(s[col])).collect();
                        xs[at] - xs.iter().map(|x| x.exp()).sum::<f64>().ln()
                    };
                    logp(0, p.start) + logp(1, p.end)
                }
                _ => {
                    let crf = model.crf.as_ref().unwrap();
                    let wide: Vec<f64> = em.iter().map(|&x| f64::from(x)).collect();
                    let spans = crf::one_span::span_log_probs(&crf.host_scores(), &wide, lengths[r]);
                    let total: f64 = spans.iter().map(|s| s.2.exp()).sum();
                    assert!((total - 1.0).abs() < 1e-6, "the one-span CRF's spans hold all the mass: {total}");
                    spans.iter().find(|s| (s.0, s.1) == (p.start, p.end)).unwrap().2
                }
            };
            assert!((f64::from(*lp) - want).abs() < 1e-4, "{decoder:?} row {r} {p:?}: {lp} vs {want}");
        }
    }
}
