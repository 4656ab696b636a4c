//! The tagger: input features → encoder → emission scores → decoder (CRF
//! or softmax). Encoders and decoders are chosen by configuration; the code
//! path is the same for all of them.

use crate::bilstm::{BiLstm, BiLstmConfig};
use crate::features::{Features, FeaturesConfig};
use crate::input::{TaggerInput, Tokens};
use crate::linear::per_token;
use crate::ops::SeqBackend;
use crate::transformer::{AttentionConfig, AttentionEncoder, Memory};
use burn::module::Param;
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::TensorData;
use corpus::{Scheme, Tag};
use crf::{Constraints, Crf, Reduction};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderKind {
    Bilstm,
    Attention,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecoderKind {
    /// Linear-chain CRF, constrained by the tag scheme.
    Crf,
    /// Independent softmax per token (cross-entropy loss, argmax decoding).
    Softmax,
}

/// How a sentence's question (extractive QA) reaches the encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum QuestionMode {
    /// No question: plain sequence tagging.
    #[default]
    None,
    /// `question [SEP] context` as one sequence through the encoder (any
    /// kind); the context's positions are tagged.
    Concat,
    /// The context through attention blocks that also cross-attend to the
    /// question, encoded by the same blocks (attention encoder only).
    Cross,
}

impl QuestionMode {
    /// The name configurations use (`model.question`).
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionMode::None => "none",
            QuestionMode::Concat => "concat",
            QuestionMode::Cross => "cross",
        }
    }
}

/// A batch that does not fit the question mode the tagger was built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaggerError {
    /// The batch has questions; the tagger was built for plain tagging
    /// (`QuestionMode::None`).
    UnexpectedQuestion,
    /// The tagger was built to answer questions (this mode); the batch has none.
    MissingQuestion(QuestionMode),
}

impl std::fmt::Display for TaggerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaggerError::UnexpectedQuestion => write!(
                f,
                "the batch has questions, but the tagger was built for plain tagging (model.question = \"none\")"
            ),
            TaggerError::MissingQuestion(mode) => write!(
                f,
                "the tagger was built to answer questions (model.question = \"{}\"), but the batch has none",
                mode.as_str()
            ),
        }
    }
}

impl std::error::Error for TaggerError {}

/// Which encoder, and the settings of each kind (only the chosen one is used).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncoderConfig {
    pub kind: EncoderKind,
    pub bilstm: BiLstmConfig,
    pub attention: AttentionConfig,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig {
            kind: EncoderKind::Bilstm,
            bilstm: BiLstmConfig::default(),
            attention: AttentionConfig::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TaggerConfig {
    pub features: FeaturesConfig,
    pub encoder: EncoderConfig,
    pub decoder: DecoderKind,
    /// Exclude the transitions the tag scheme forbids (CRF only).
    pub constrained: bool,
    /// Question-conditioned tagging (QA data): "none", "concat" or "cross".
    pub question: QuestionMode,
}

impl Default for TaggerConfig {
    fn default() -> Self {
        TaggerConfig {
            features: FeaturesConfig::default(),
            encoder: EncoderConfig::default(),
            decoder: DecoderKind::Crf,
            constrained: true,
            question: QuestionMode::None,
        }
    }
}

/// Sizes that come from the data, not the configuration.
#[derive(Clone, Debug)]
pub struct TaggerShape<'a> {
    pub words: usize,
    pub chars: usize,
    pub tags: &'a [Tag],
    pub scheme: Scheme,
    /// `[words, word_dim]` pretrained word vectors.
    pub pretrained: Option<Vec<f32>>,
}

impl TaggerConfig {
    /// Settings that cannot build a working tagger, as `section.key: why`
    /// (sizes of 0, dropout outside [0, 1), incompatible attention options).
    pub fn validate(&self) -> Result<(), String> {
        let f = &self.features;
        let positive = |name: &str, v: usize| if v == 0 { Err(format!("{name} must be at least 1")) } else { Ok(()) };
        let probability = |name: &str, p: f64| {
            if (0.0..1.0).contains(&p) {
                Ok(())
            } else {
                Err(format!("{name} must be a probability in [0, 1), found {p}"))
            }
        };
        positive("features.word_dim", f.word_dim)?;
        if f.char_dim > 0 {
            positive("features.char_filters", f.char_filters)?;
            positive("features.char_kernel", f.char_kernel)?;
        }
        probability("features.dropout", f.dropout)?;
        match self.encoder.kind {
            EncoderKind::Bilstm => {
                let b = &self.encoder.bilstm;
                positive("encoder.bilstm.hidden", b.hidden)?;
                positive("encoder.bilstm.layers", b.layers)?;
                probability("encoder.bilstm.dropout", b.dropout)?;
            }
            EncoderKind::Attention => {
                let a = &self.encoder.attention;
                a.validate().map_err(|e| format!("encoder.attention: {e}"))?;
                positive("encoder.attention.d_model", a.d_model)?;
                positive("encoder.attention.layers", a.layers)?;
                positive("encoder.attention.ffn", a.ffn)?;
                probability("encoder.attention.dropout", a.dropout)?;
                probability("encoder.attention.attention_dropout", a.attention_dropout)?;
            }
        }
        if f.question_match_dim > 0 && self.question == QuestionMode::None {
            return Err("features.question_match_dim needs question-answering data and model.question = \"concat\" or \"cross\"".into());
        }
        if self.question == QuestionMode::Cross && self.encoder.kind != EncoderKind::Attention {
            return Err("question = \"cross\" needs encoder.kind = \"attention\" (use \"concat\" with a BiLSTM)".into());
        }
        Ok(())
    }

    pub fn init<B: Backend>(&self, shape: TaggerShape<'_>, device: &B::Device) -> Tagger<B> {
        let features = self.features.init(shape.words, shape.chars, shape.pretrained, device);
        let d_in = self.features.output_dim();
        let (encoder, d_out) = match self.encoder.kind {
            EncoderKind::Bilstm => {
                (Encoder::BiLstm(self.encoder.bilstm.init(d_in, device)), self.encoder.bilstm.output_dim())
            }
            EncoderKind::Attention => {
                let a = &self.encoder.attention;
                let enc = if self.question == QuestionMode::Cross {
                    a.init_cross(d_in, device)
                } else {
                    a.init(d_in, device)
                };
                (Encoder::Attention(enc), a.d_model)
            }
        };
        // A learned separator between question and context, N(0, 1) like an embedding row.
        let separator = (self.question == QuestionMode::Concat)
            .then(|| Param::from_tensor(Tensor::random([d_in], burn::tensor::Distribution::Normal(0.0, 1.0), device)));
        let t = shape.tags.len();
        let crf = match self.decoder {
            DecoderKind::Crf => {
                let cons = if self.constrained {
                    Constraints::from_scheme(shape.scheme, shape.tags)
                } else {
                    Constraints::none(t)
                };
                Some(Crf::new(&cons, 0.1, device))
            }
            DecoderKind::Softmax => None,
        };
        Tagger {
            features,
            encoder,
            separator,
            emit: LinearConfig::new(d_out, t).init(device),
            crf,
            question: self.question,
        }
    }
}

#[derive(Module, Debug)]
pub enum Encoder<B: Backend> {
    BiLstm(BiLstm<B>),
    Attention(AttentionEncoder<B>),
}

impl<B: Backend> Encoder<B> {
    /// `[B, L, D]` features → `[B, L, D_out]`, plus attention weights per
    /// layer when asked (attention encoders only).
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        want_weights: bool,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>)
    where
        B: SeqBackend,
    {
        self.forward_with_memory(x, mask, None, want_weights)
    }

    /// [`Self::forward`] with a memory for cross-encoder blocks to attend to.
    pub fn forward_with_memory(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        memory: Option<&Memory<B>>,
        want_weights: bool,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>)
    where
        B: SeqBackend,
    {
        match self {
            Encoder::BiLstm(m) => (m.forward(x, mask), Vec::new()),
            Encoder::Attention(m) => m.forward_with_memory(x, mask, memory, want_weights),
        }
    }
}

#[derive(Module, Debug)]
pub struct Tagger<B: Backend> {
    pub features: Features<B>,
    pub encoder: Encoder<B>,
    /// `[D_in]`, the separator of `question [SEP] context` (concat mode only).
    pub separator: Option<Param<Tensor<B, 1>>>,
    /// Encoder output → one score per tag.
    pub emit: Linear<B>,
    /// `None` for the softmax decoder.
    pub crf: Option<Crf<B>>,
    /// How questions reach the encoder, as configured. Not a parameter: it
    /// is not saved in records (it comes from the configuration the tagger
    /// is built from before a record is loaded into it).
    #[module(skip)]
    question: QuestionMode,
}

/// Emission scores and, when asked, attention weights.
pub struct TaggerOutput<B: Backend> {
    /// `[B, L, T]`.
    pub emissions: Tensor<B, 3>,
    /// Per layer `[B, H, L, L]`.
    pub attention: Vec<Tensor<B, 4>>,
}

impl<B: Backend> Tagger<B> {
    /// How the tagger reads questions, as it was built.
    pub fn question_mode(&self) -> QuestionMode {
        self.question
    }

    /// The number of attention blocks of the encoder (0 for a BiLSTM).
    pub fn attention_layers(&self) -> usize {
        match &self.encoder {
            Encoder::BiLstm(_) => 0,
            Encoder::Attention(a) => a.blocks.len(),
        }
    }
}

impl<B: SeqBackend> Tagger<B> {
    /// Emission scores of the sentences of `input` (for QA data, of the
    /// context positions, the question joined as the tagger was built to:
    /// [`QuestionMode`]). An error when the batch has questions and the
    /// tagger was built without a question mode, or the other way round.
    pub fn forward(&self, input: &TaggerInput<B>, want_weights: bool) -> Result<TaggerOutput<B>, TaggerError> {
        let (c, q) = (input.context(), input.question());
        let x = self.features.forward(c, q); // [B, L, D]
        let (h, attention) = match (self.question, q) {
            (QuestionMode::None, None) => self.encoder.forward(x, c.mask.clone(), want_weights), // [B, L, D_out]
            (QuestionMode::None, Some(_)) => return Err(TaggerError::UnexpectedQuestion),
            (mode, None) => return Err(TaggerError::MissingQuestion(mode)),
            (QuestionMode::Concat, Some(q)) => self.encode_concat(x, c, q, want_weights),
            (QuestionMode::Cross, Some(q)) => self.encode_cross(x, c, q, want_weights),
        };
        Ok(TaggerOutput { emissions: per_token(&self.emit, h), attention })
    }

    /// `question [SEP] context` through the encoder; the context's
    /// positions of the output, `[B, L, D_out]`.
    fn encode_concat(
        &self,
        x: Tensor<B, 3>,
        input: &Tokens<B>,
        q: &Tokens<B>,
        want_weights: bool,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>) {
        let sep = self.separator.as_ref().expect("a tagger built for question = \"concat\" has a separator");
        let qx = self.features.forward(q, None); // [B, Lq, D]
        let (joint, joint_mask, context_at) = join_question(qx, &q.lengths, sep.val(), x, &input.lengths);
        let (h, attention) = self.encoder.forward(joint, joint_mask, want_weights); // [B, Lq+1+L, D_out]
        let [b, l] = input.dims();
        let d = h.dims()[2];
        (h.gather(1, context_at.unsqueeze_dim::<3>(2).expand([b, l, d])), attention)
        // [B, L, D_out]
    }

    /// The question through the encoder, then the context through it
    /// attending to the encoded question: `[B, L, D_out]`.
    fn encode_cross(
        &self,
        x: Tensor<B, 3>,
        input: &Tokens<B>,
        q: &Tokens<B>,
        want_weights: bool,
    ) -> (Tensor<B, 3>, Vec<Tensor<B, 4>>) {
        let qx = self.features.forward(q, None); // [B, Lq, D]
        let (memory, _) = self.encoder.forward(qx, q.mask.clone(), false); // [B, Lq, D_out]
        let memory = (memory, q.mask.clone());
        self.encoder.forward_with_memory(x, input.mask.clone(), Some(&memory), want_weights)
        // [B, L, D_out]
    }

    /// Training loss, averaged over sentences: the CRF's negative
    /// log-likelihood, or the summed token cross-entropy for softmax.
    /// Errors as [`Self::forward`].
    pub fn loss(&self, input: &TaggerInput<B>, tags: Tensor<B, 2, Int>) -> Result<Tensor<B, 1>, TaggerError> {
        let e = self.forward(input, false)?.emissions; // [B, L, T]
        Ok(match &self.crf {
            Some(crf) => crf.nll(e, tags, input.context().mask.clone(), Reduction::Mean),
            None => {
                let [b, _, _] = e.dims();
                let logp = log_softmax(e, 2); // [B, L, T]
                let gold = logp.gather(2, tags.unsqueeze_dim::<3>(2)).squeeze_dim::<2>(2); // [B, L]
                (gold * input.context().mask.clone().float()).sum().neg().div_scalar(b as f64)
            }
        })
    }

    /// Best tag path per sentence (Viterbi for the CRF, argmax for softmax).
    /// Errors as [`Self::forward`].
    pub fn decode(&self, input: &TaggerInput<B>) -> Result<Vec<Vec<usize>>, TaggerError> {
        let e = self.forward(input, false)?.emissions;
        Ok(self.decode_emissions(e, input.context().mask.clone()))
    }

    pub fn decode_emissions(&self, e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Vec<Vec<usize>> {
        match &self.crf {
            Some(crf) => crf.decode(e, mask),
            None => {
                let [b, l, _] = e.dims();
                let lengths: Vec<i64> = mask.int().sum_dim(1).into_data().iter::<i64>().collect();
                let best: Vec<i64> = e.argmax(2).into_data().iter::<i64>().collect();
                (0..b).map(|s| (0..lengths[s] as usize).map(|i| best[s * l + i] as usize).collect()).collect()
            }
        }
    }

    /// Per-token tag probabilities `[B, L, T]`: CRF marginals, or the softmax.
    pub fn probabilities(&self, e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        match &self.crf {
            Some(crf) => crf.marginals(e, mask),
            None => {
                let [b, l, t] = e.dims();
                softmax(e, 2) * mask.float().unsqueeze_dim::<3>(2).expand([b, l, t])
            }
        }
    }

    /// Best tag path of each sentence from emissions already on the host,
    /// one `[n, T]` slice per sentence (Viterbi for the CRF, argmax for softmax).
    pub fn decode_host(&self, sentences: &[&[f32]]) -> Vec<Vec<usize>> {
        match &self.crf {
            Some(crf) => crf.decode_host(sentences),
            None => {
                let t = self.emit.weight.dims()[1];
                sentences.iter().map(|em| em.chunks(t).map(first_max).collect()).collect()
            }
        }
    }

    /// Per-token tag probabilities `[n, T]` of each sentence from host
    /// emissions: CRF marginals, or the softmax.
    pub fn probabilities_host(&self, sentences: &[&[f32]]) -> Vec<Vec<f32>> {
        match &self.crf {
            Some(crf) => crf.marginals_host(sentences),
            None => {
                let t = self.emit.weight.dims()[1];
                sentences.iter().map(|em| em.chunks(t).flat_map(softmax_row).collect()).collect()
            }
        }
    }
}

/// The index of the first largest value.
fn first_max(row: &[f32]) -> usize {
    let mut best = 0;
    for (k, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = k;
        }
    }
    best
}

/// The softmax of one row.
fn softmax_row(row: &[f32]) -> Vec<f32> {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = row.iter().map(|&x| (x - m).exp()).collect();
    let s: f32 = e.iter().sum();
    e.into_iter().map(|x| x / s).collect()
}

/// `question [SEP] context` per sentence, packed without inner padding:
/// `q [B, Lq, D]` (real lengths `q_len`), `sep [D]`, `c [B, Lc, D]` (real
/// lengths `c_len`) → the joint sequence `[B, Lt, D]` (Lt the longest
/// `q_len + 1 + c_len`), its mask `[B, Lt]`, and for each context position
/// its place in the joint sequence `[B, Lc]` (0 at padding).
pub fn join_question<B: Backend>(
    q: Tensor<B, 3>,
    q_len: &[usize],
    sep: Tensor<B, 1>,
    c: Tensor<B, 3>,
    c_len: &[usize],
) -> (Tensor<B, 3>, Tensor<B, 2, Bool>, Tensor<B, 2, Int>) {
    let [b, lq, d] = q.dims();
    let lc = c.dims()[1];
    let device = q.device();
    let source = Tensor::cat(vec![q, sep.reshape([1, 1, d]).expand([b, 1, d]), c], 1); // [B, Lq+1+Lc, D]
    let lt = (0..b).map(|s| q_len[s] + 1 + c_len[s]).max().unwrap_or(1);
    // Joint position p of sentence s reads source row: question p, then
    // the separator (row Lq), then context p − q − 1; padding reads the separator.
    let mut from = Vec::with_capacity(b * lt);
    let mut mask = Vec::with_capacity(b * lt);
    let mut back = Vec::with_capacity(b * lc);
    for s in 0..b {
        let (nq, nc) = (q_len[s], c_len[s]);
        for p in 0..lt {
            from.push(if p < nq {
                p
            } else if p > nq && p <= nq + nc {
                lq + p - nq
            } else {
                lq
            } as i64);
            mask.push(p < nq + 1 + nc);
        }
        back.extend((0..lc).map(|j| if j < nc { (nq + 1 + j) as i64 } else { 0 }));
    }
    let from = Tensor::<B, 2, Int>::from_data(TensorData::new(from, [b, lt]), &device);
    let joint = source.gather(1, from.unsqueeze_dim::<3>(2).expand([b, lt, d])); // [B, Lt, D]
    let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(mask, [b, lt]), &device);
    let back = Tensor::<B, 2, Int>::from_data(TensorData::new(back, [b, lc]), &device);
    (joint, mask, back)
}
