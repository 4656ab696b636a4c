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
