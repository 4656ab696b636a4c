//! Input features: word embeddings (random or pretrained), a character CNN
//! with max-pooling (Ma & Hovy 2016) or a small character Transformer with
//! max-pooling (TENER, Yan et al. 2019), a capitalisation embedding,
//! character bigrams (character-level data), and for
//! question-conditioned tagging the "exact match" feature of DrQA (Chen et
//! al. 2017): whether a context token also occurs in its question.

use crate::dropout::Dropout;
use crate::input::Tokens;
use crate::ops::SeqBackend;
use crate::positional::Position;
use crate::transformer::{AttentionConfig, AttentionEncoder};
use burn::module::Param;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::prelude::*;
use burn::tensor::activation::{relu, softmax};
use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

/// Feature sizes. Set a size to 0 to turn that feature off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesConfig {
    /// Word embedding size (ignored when pretrained vectors set it).
    pub word_dim: usize,
    /// Character embedding size; 0 turns the character features off.
    pub char_dim: usize,
    /// What reads a word's characters: a CNN or a Transformer layer.
    pub char_encoder: CharEncoder,
    /// Character features per word: the CNN's filters, or the character
    /// Transformer's model size.
    pub char_filters: usize,
    /// Character CNN width.
    pub char_kernel: usize,
    /// Heads of the character Transformer (they divide `char_filters`).
    pub char_heads: usize,
    /// Capitalisation embedding size; 0 turns it off.
    pub caps_dim: usize,
    /// Character-bigram embedding size ([`corpus::bigrams`]: each token
    /// also reads the pair it forms with the next); 0 turns it off. Only
    /// read when the run has a bigram vocabulary (`data.bigrams`).
    pub bigram_dim: usize,
    /// Question-match embedding size (QA data only); 0 turns it off. Each
    /// context token gets one of three classes: its word id occurs in the
    /// question, it does not, or the token is a question token itself.
    pub question_match_dim: usize,
    /// Reading-cue embedding size, per cue (QA data only; [`corpus::qa::cues`]:
    /// word-level match with the question, IDF of the match, distance to the
    /// nearest matched word, question type, word shape); 0 turns them off.
    pub cue_dim: usize,
    /// Which reading cues feed the tagger (with `cue_dim` > 0).
    pub cues: Vec<CueName>,
    /// DrQA's aligned question embedding (QA data only): each context token's
    /// soft attention over the question's word embeddings, through a ReLU
    /// projection of this size; 0 turns it off. It is itself a small
    /// cross-attention.
    pub aligned_dim: usize,
    /// Dropout on the concatenated features.
    pub dropout: f64,
}

/// The encoder of a word's characters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CharEncoder {
    /// Convolution over the characters, max-pooled (Ma & Hovy 2016).
    #[default]
    Cnn,
    /// TENER's character encoder: one Transformer layer over the characters
    /// (relative, direction-aware positions, unscaled attention, feed-forward
    /// twice the model size, dropout 0.15), max-pooled over real characters.
    Transformer,
}

impl CharEncoder {
    /// The character Transformer of model size `d` with `heads` heads.
    pub fn transformer(d: usize, heads: usize) -> AttentionConfig {
        AttentionConfig {
            d_model: d,
            layers: 1,
            heads,
            head_dim: 0,
            ffn: 2 * d,
            dropout: 0.15,
            attention_dropout: 0.15,
            position: Position::Relative,
            scaled: false,
            ..AttentionConfig::default()
        }
    }
}

/// A reading cue, as configurations name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CueName {
    Match,
    Idf,
    Distance,
    QuestionType,
    Shape,
}

impl CueName {
    pub const ALL: [CueName; corpus::qa::cues::CUES] =
        [CueName::Match, CueName::Idf, CueName::Distance, CueName::QuestionType, CueName::Shape];

    /// Its column in the cues of a token.
    pub fn cue(self) -> corpus::qa::cues::Cue {
        use corpus::qa::cues::Cue;
        match self {
            CueName::Match => Cue::Match,
            CueName::Idf => Cue::Idf,
            CueName::Distance => Cue::Distance,
            CueName::QuestionType => Cue::QuestionType,
            CueName::Shape => Cue::Shape,
        }
    }
}

/// Classes of the question-match feature.
pub const MATCH_CLASSES: usize = 3;
const MATCH_QUESTION_TOKEN: i64 = 2;

impl Default for FeaturesConfig {
    fn default() -> Self {
        FeaturesConfig {
            word_dim: 100,
            char_dim: 30,
            char_encoder: CharEncoder::Cnn,
            char_filters: 50,
            char_kernel: 3,
            char_heads: 3,
            caps_dim: 0,
            bigram_dim: 0,
            question_match_dim: 0,
            cue_dim: 0,
            cues: CueName::ALL.to_vec(),
            aligned_dim: 0,
            dropout: 0.5,
        }
    }
}

impl FeaturesConfig {
    /// Size of the feature vector of one token.
    pub fn output_dim(&self) -> usize {
        self.word_dim
            + if self.char_dim > 0 { self.char_filters } else { 0 }
            + self.caps_dim
            + self.bigram_dim
            + self.question_match_dim
            + self.cue_dim * self.active_cues().len()
            + if self.aligned_dim > 0 { self.word_dim } else { 0 }
    }

    /// The cues read, each once (none with `cue_dim` 0).
    pub fn active_cues(&self) -> Vec<CueName> {
        let mut seen = Vec::new();
        for &c in &self.cues {
            if self.cue_dim > 0 && !seen.contains(&c) {
                seen.push(c);
            }
        }
        seen
    }

    /// Builds the module for vocabularies of `words`, `chars` and
    /// `bigrams` items (`bigrams` > 0 when `bigram_dim` is). `pretrained`,
    /// if given, is a `[words, word_dim]` row-major matrix that initialises
    /// the word embeddings.
    pub fn init<B: Backend>(
        &self,
        words: usize,
        chars: usize,
        bigrams: usize,
        pretrained: Option<Vec<f32>>,
        device: &B::Device,
    ) -> Features<B> {
        assert!(self.bigram_dim == 0 || bigrams > 0, "bigram_dim > 0 needs a bigram vocabulary");
        let mut word = EmbeddingConfig::new(words, self.word_dim).init(device);
        if let Some(w) = pretrained {
            assert_eq!(w.len(), words * self.word_dim, "pretrained matrix has the wrong size");
            word.weight = Param::from_tensor(Tensor::from_data(TensorData::new(w, [words, self.word_dim]), device));
        }
        let char_emb = (self.char_dim > 0).then(|| EmbeddingConfig::new(chars, self.char_dim).init(device));
        let on = |kind: CharEncoder| self.char_dim > 0 && self.char_encoder == kind;
        let char_cnn = on(CharEncoder::Cnn).then(|| {
            Conv1dConfig::new(self.char_dim, self.char_filters, self.char_kernel)
                .with_padding(PaddingConfig1d::Same)
                .init(device)
        });
        let char_transformer = on(CharEncoder::Transformer)
            .then(|| CharEncoder::transformer(self.char_filters, self.char_heads).init(self.char_dim, device));
        let caps =
            (self.caps_dim > 0).then(|| EmbeddingConfig::new(corpus::batch::CAPS_CLASSES, self.caps_dim).init(device));
        let question_match = (self.question_match_dim > 0)
            .then(|| EmbeddingConfig::new(MATCH_CLASSES, self.question_match_dim).init(device));
        let active = self.active_cues();
        let cues = active
            .iter()
            .map(|c| EmbeddingConfig::new(corpus::qa::cues::CUE_CLASSES[c.cue() as usize], self.cue_dim).init(device))
            .collect();
        let cue_columns = active.iter().map(|c| c.cue() as usize).collect();
        let align = (self.aligned_dim > 0).then(|| LinearConfig::new(self.word_dim, self.aligned_dim).init(device));
        // Last, so that a tagger without bigrams draws its other weights as before.
        let bigram = (self.bigram_dim > 0).then(|| EmbeddingConfig::new(bigrams, self.bigram_dim).init(device));
        Features {
            word,
            char_emb,
            char_cnn,
            char_transformer,
            caps,
            bigram,
            question_match,
            cues,
            cue_columns,
            align,
            dropout: Dropout::new(self.dropout),
        }
    }
}

#[derive(Module, Debug)]
pub struct Features<B: Backend> {
    pub word: Embedding<B>,
    pub char_emb: Option<Embedding<B>>,
    pub char_cnn: Option<Conv1d<B>>,
    pub char_transformer: Option<AttentionEncoder<B>>,
    pub caps: Option<Embedding<B>>,
    pub bigram: Option<Embedding<B>>,
    pub question_match: Option<Embedding<B>>,
    /// One embedding per reading cue read.
    pub cues: Vec<Embedding<B>>,
    /// The cue column each of `cues` reads.
    #[module(skip)]
    cue_columns: Vec<usize>,
    /// The aligned question embedding's projection.
    pub align: Option<Linear<B>>,
    pub dropout: Dropout,
}

impl<B: SeqBackend> Features<B> {
    /// `[B, L, D]` features, zero at padded positions. `question`: the
    /// questions the sentences are read against (extractive QA), for the
    /// question-match feature and the aligned question embedding, and
    /// `cues` their reading cues `[B, L, CUES]`; `None` for questions
    /// themselves (their cue and aligned features are padding and zeros).
    pub fn forward(
        &self,
        input: &Tokens<B>,
        question: Option<&Tokens<B>>,
        cues: Option<&Tensor<B, 3, Int>>,
    ) -> Tensor<B, 3> {
        let [b, l] = input.dims();
        let words = self.word.forward(input.words.clone()); // [B, L, Dw]
        let mut parts = vec![words.clone()];
        if let (Some(emb), Some(cnn)) = (&self.char_emb, &self.char_cnn) {
            parts.push(char_features(emb, cnn, input.chars.clone()));
        }
        if let (Some(emb), Some(encoder)) = (&self.char_emb, &self.char_transformer) {
            parts.push(char_transformer_features(emb, encoder, input.chars.clone()));
        }
        if let Some(caps) = &self.caps {
            parts.push(caps.forward(input.caps.clone()));
        }
        if let Some(bigram) = &self.bigram {
            parts.push(bigram.forward(input.bigrams.clone())); // [B, L, Dbi]
        }
        if let Some(emb) = &self.question_match {
            parts.push(emb.forward(question_match(input, question)));
        }
        for (emb, &c) in self.cues.iter().zip(&self.cue_columns) {
            let ids = match cues {
                Some(all) => all.clone().slice([0..b, 0..l, c..c + 1]).reshape([b, l]), // [B, L]
                None => Tensor::zeros([b, l], &input.words.device()),
            };
            parts.push(emb.forward(ids));
        }
        if let Some(align) = &self.align {
            parts.push(match question {
                Some(q) => aligned(align, words, self.word.forward(q.words.clone()), q.mask.clone()),
                None => Tensor::zeros(words.dims(), &words.device()),
            });
        }
        let x = Tensor::cat(parts, 2); // [B, L, D]
        let d = x.dims()[2];
        let keep = input.mask.clone().float().unsqueeze_dim::<3>(2).expand([b, l, d]);
        self.dropout.forward(x * keep)
    }
}

/// DrQA's aligned question embedding: `Σ_j a_ij E(q_j)` with
/// `a_ij = softmax_j(α(E(p_i))·α(E(q_j)))`, `α` a ReLU projection;
/// `context [B, L, Dw]`, `question [B, Lq, Dw]` with its mask `[B, Lq]` →
/// `[B, L, Dw]`.
fn aligned<B: Backend>(
    align: &Linear<B>,
    context: Tensor<B, 3>,
    question: Tensor<B, 3>,
    mask: Tensor<B, 2, Bool>,
) -> Tensor<B, 3> {
    let [b, l, _] = context.dims();
    let lq = question.dims()[1];
    let pc = relu(align.forward(context)); // [B, L, A]
    let pq = relu(align.forward(question.clone())); // [B, Lq, A]
    let scores = pc.matmul(pq.swap_dims(1, 2)); // [B, L, Lq]
    let padding = mask.bool_not().unsqueeze_dim::<3>(1).expand([b, l, lq]);
    let weights = softmax(scores.mask_fill(padding, -1.0e4), 2); // [B, L, Lq]
    weights.matmul(question) // [B, L, Dw]
}

/// `[B, L]` question-match classes: for a context (read against
/// `question`), 1 where the token's word id occurs among its question's
/// real tokens and 0 elsewhere; for a question itself (`None`), all 2.
pub fn question_match<B: Backend>(input: &Tokens<B>, question: Option<&Tokens<B>>) -> Tensor<B, 2, Int> {
    let [b, l] = input.dims();
    let Some(q) = question else {
        return Tensor::full([b, l], MATCH_QUESTION_TOKEN, &input.words.device());
    };
    let lq = q.dims()[1];
    let c = input.words.clone().unsqueeze_dim::<3>(2).expand([b, l, lq]); // [B, L, Lq]
    let qw = q.words.clone().unsqueeze_dim::<3>(1).expand([b, l, lq]); // [B, L, Lq]
    let real_q = q.mask.clone().unsqueeze_dim::<3>(1).expand([b, l, lq]); // [B, L, Lq]
    let hit = c.equal(qw).bool_and(real_q).any_dim(2).squeeze_dim::<2>(2); // [B, L]
    hit.bool_and(input.mask.clone()).int()
}

/// TENER's character Transformer: each word's characters `[B, L, W]`
/// (0 at padding) embedded, encoded by one Transformer layer that only
/// attends to the word's real characters, and max-pooled over them →
/// `[B, L, F]`, zeros for padding tokens. Like the CNN's, a word's features
/// do not depend on the other words of its batch.
fn char_transformer_features<B: SeqBackend>(
    emb: &Embedding<B>,
    encoder: &AttentionEncoder<B>,
    chars: Tensor<B, 3, Int>,
) -> Tensor<B, 3> {
    let [b, l, w] = chars.dims();
    let n = b * l;
    let flat = chars.reshape([n, w]); // [N, W] with N = B·L
    let real = flat.clone().greater_elem(0); // [N, W]
    let (h, _) = encoder.forward(emb.forward(flat), real.clone(), false); // [N, W, F], 0 at padding
    let f = h.dims()[2];
    let padding = real.clone().bool_not().unsqueeze_dim::<3>(2).expand([n, w, f]);
    let pooled = h.mask_fill(padding, -1.0e4).max_dim(1).reshape([n, f]); // [N, F]
    let any = real.any_dim(1).float(); // [N, 1]: 0 for padding tokens
    (pooled * any).reshape([b, l, f])
}

/// Character CNN: embed, convolve over each word's characters, max-pool.
/// Padding characters are zero vectors (as the CNN's own edge padding), and
/// the max only covers real characters, so a word's features do not depend
/// on how long the other words of its batch are.
fn char_features<B: SeqBackend>(emb: &Embedding<B>, cnn: &Conv1d<B>, chars: Tensor<B, 3, Int>) -> Tensor<B, 3> {
    let [b, l, w] = chars.dims();
    let flat = chars.reshape([b * l, w]); // [N, W] with N = B·L, 0 at padding
    let bias = cnn.bias.as_ref().map(|bias| bias.val());
    let pooled = B::char_cnn(emb.weight.val(), cnn.weight.val(), bias, flat); // [N, F]
    let f = pooled.dims()[1];
    pooled.reshape([b, l, f]) // [B, L, F]
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use corpus::batch::{Batch, Encoded, Example};

    type B = NdArray<f32>;

    fn encoded(words: &[u32]) -> Encoded {
        Encoded {
            words: words.to_vec(),
            chars: words.iter().map(|&w| vec![w]).collect(),
            caps: vec![0; words.len()],
            bigrams: Vec::new(),
            tags: None,
        }
    }

    fn asked(words: &[u32], question: &[u32]) -> Example {
        Example::Asked {
            context: encoded(words),
            question: encoded(question),
            cues: vec![1; words.len() * corpus::qa::cues::CUES],
        }
    }

    fn classes(t: Tensor<B, 2, Int>) -> Vec<i64> {
        t.into_data().iter::<i64>().collect()
    }

    #[test]
    fn question_match_marks_context_tokens_found_in_their_own_question() {
        // Sentence 0: 6 occurs in its question, 7 only in sentence 1's; the
        // padding id 0 (context padding of sentence 1, question padding of
        // sentence 0) must never count as a match.
        let data = vec![asked(&[5, 6, 7, 6], &[6, 9]), asked(&[7, 8], &[7, 1, 2])];
        let device = Default::default();
        let input = crate::TaggerInput::<B>::from_batch(&Batch::pad(&data, &[0, 1]), &device);
        let q = input.question().unwrap();
        assert_eq!(classes(question_match(input.context(), Some(q))), vec![0, 1, 0, 1, 1, 0, 0, 0]);
        // The question itself: every position is a question token.
        assert_eq!(classes(question_match(q, None)), vec![2; 6]);
    }

    /// A token's bigram features are the row of its bigram id in the
    /// bigram table, after its other features; padding reads zeros.
    #[test]
    fn bigram_features_are_rows_of_the_bigram_table() {
        let device = Default::default();
        let cfg = FeaturesConfig { word_dim: 2, char_dim: 0, bigram_dim: 3, dropout: 0.0, ..Default::default() };
        assert_eq!(cfg.output_dim(), 5);
        let f = cfg.init::<B>(9, 4, 6, None, &device);
        let mut e = encoded(&[2, 3, 4]);
        e.bigrams = vec![5, 1, 3];
        let short = Encoded { bigrams: vec![2], ..encoded(&[7]) };
        let batch = Batch::pad(&[Example::Plain(e), Example::Plain(short)], &[0, 1]);
        let input = crate::TaggerInput::<B>::from_batch(&batch, &device);
        let out: Vec<f32> = f.forward(input.context(), None, None).into_data().to_vec().unwrap();
        let table: Vec<f32> = f.bigram.as_ref().unwrap().weight.val().into_data().to_vec().unwrap();
        for (pos, id) in [(0, Some(5)), (1, Some(1)), (2, Some(3)), (3, Some(2)), (4, None), (5, None)] {
            let got = &out[pos * 5 + 2..pos * 5 + 5];
            let want = id.map_or(vec![0.0; 3], |i: usize| table[i * 3..i * 3 + 3].to_vec());
            assert_eq!(got, want.as_slice(), "position {pos}");
        }
    }

    /// The character Transformer's features of a word are its own: the
    /// same alone as beside longer words, in a padded batch; padding
    /// tokens read zeros; different words differ.
    #[test]
    fn char_transformer_features_of_a_word_do_not_depend_on_its_batch() {
        let device = Default::default();
        let cfg = FeaturesConfig {
            word_dim: 2,
            char_dim: 4,
            char_encoder: CharEncoder::Transformer,
            char_filters: 6,
            char_heads: 2,
            dropout: 0.0,
            ..Default::default()
        };
        let f = cfg.init::<B>(9, 14, 0, None, &device);
        let with = |chars: Vec<Vec<u32>>| Encoded {
            words: vec![2; chars.len()],
            caps: vec![0; chars.len()],
            bigrams: Vec::new(),
            chars,
            tags: None,
        };
        let features = |data: Vec<Encoded>| -> Vec<f32> {
            let ids: Vec<usize> = (0..data.len()).collect();
            let batch = Batch::pad(&data.into_iter().map(Example::Plain).collect::<Vec<_>>(), &ids);
            let input = crate::TaggerInput::<B>::from_batch(&batch, &device);
            f.forward(input.context(), None, None).into_data().to_vec().unwrap()
        };
        let alone = features(vec![with(vec![vec![3, 4, 5]])]);
        // Sentence 0: the word, then a longer one; sentence 1 longer still.
        let batch = features(vec![
            with(vec![vec![3, 4, 5], vec![6, 7, 8, 9, 10, 11, 12]]),
            with(vec![vec![13], vec![5, 4], vec![3, 3, 3]]),
        ]);
        let chars = |v: &[f32], token: usize| v[token * 8 + 2..token * 8 + 8].to_vec();
        let (a, b) = (chars(&alone, 0), chars(&batch, 0));
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
        }
        assert!(a.iter().any(|x| x.abs() > 1e-3), "{a:?}");
        assert_eq!(chars(&batch, 2), vec![0.0; 6], "sentence 0's padding token");
        assert_ne!(chars(&batch, 1), a);
    }

    /// The character CNN as Burn's `Conv1d` module computes it: transpose to
    /// [N, C, W], convolve, mask, max-pool.
    fn char_features_by_conv1d<B: Backend>(
        emb: &Embedding<B>,
        cnn: &Conv1d<B>,
        chars: Tensor<B, 3, Int>,
    ) -> Tensor<B, 3> {
        let [b, l, w] = chars.dims();
        let flat = chars.reshape([b * l, w]);
        let real = flat.clone().greater_elem(0);
        let e = emb.forward(flat);
        let c = e.dims()[2];
        let e = e * real.clone().float().unsqueeze_dim::<3>(2).expand([b * l, w, c]);
        let conv = cnn.forward(e.swap_dims(1, 2)); // [N, F, W]
        let f = conv.dims()[1];
        let pad = real.clone().bool_not().unsqueeze_dim::<3>(1).expand([b * l, f, w]);
        let pooled = conv.mask_fill(pad, -1.0e4).max_dim(2).squeeze_dim::<2>(2);
        let any = real.any_dim(1).float().expand([b * l, f]);
        (pooled * any).reshape([b, l, f])
    }

    #[test]
    fn char_cnn_as_one_product_equals_the_conv1d_module() {
        use burn::backend::Autodiff;
        type A = Autodiff<B>;
        let device = Default::default();
        // 2 sentences × 3 words × up to 5 characters; 0 is padding (a whole
        // padding word in sentence 1).
        let ids: Vec<i64> = vec![
            3, 4, 5, 0, 0, /**/ 6, 0, 0, 0, 0, /**/ 7, 8, 9, 10, 11, //
            12, 13, 0, 0, 0, /**/ 0, 0, 0, 0, 0, /**/ 5, 5, 5, 0, 0,
        ];
        for k in [1, 2, 3, 4, 5] {
            let emb = EmbeddingConfig::new(14, 6).init::<A>(&device);
            let cnn = Conv1dConfig::new(6, 7, k).with_padding(PaddingConfig1d::Same).init::<A>(&device);
            let chars = || Tensor::<A, 3, Int>::from_data(TensorData::new(ids.clone(), [2, 3, 5]), &device);
            let weights = Tensor::<A, 3>::random([2, 3, 7], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
            let ours = char_features(&emb, &cnn, chars());
            let reference = char_features_by_conv1d(&emb, &cnn, chars());
            let g1 = (ours.clone() * weights.clone()).sum().backward();
            let g2 = (reference.clone() * weights).sum().backward();
            let close = |a: Vec<f32>, b: Vec<f32>, what: &str| {
                assert_eq!(a.len(), b.len(), "{what}");
                for (x, y) in a.iter().zip(&b) {
                    assert!((x - y).abs() < 1e-4 * (1.0 + y.abs()), "kernel {k}, {what}: {x} vs {y}");
                }
            };
            let v = |t: Tensor<A, 3>| t.into_data().to_vec::<f32>().unwrap();
            close(v(ours), v(reference), "features");
            let gw = |g: &<A as burn::tensor::backend::AutodiffBackend>::Gradients| {
                cnn.weight.val().grad(g).unwrap().into_data().to_vec::<f32>().unwrap()
            };
            close(gw(&g1), gw(&g2), "d/d conv weight");
            let gb = |g: &<A as burn::tensor::backend::AutodiffBackend>::Gradients| {
                cnn.bias.as_ref().unwrap().val().grad(g).unwrap().into_data().to_vec::<f32>().unwrap()
            };
            close(gb(&g1), gb(&g2), "d/d conv bias");
            let ge = |g: &<A as burn::tensor::backend::AutodiffBackend>::Gradients| {
                emb.weight.val().grad(g).unwrap().into_data().to_vec::<f32>().unwrap()
            };
            close(ge(&g1), ge(&g2), "d/d char embedding");
        }
    }
}
