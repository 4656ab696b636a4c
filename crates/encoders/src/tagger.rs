//! The tagger: input features → encoder → emission scores → decoder (CRF
//! or softmax). Encoders and decoders are chosen by configuration; the code
//! path is the same for all of them.

use crate::bilstm::{BiLstm, BiLstmConfig};
use crate::coattention::Coattention;
use crate::dropout::Dropout;
use crate::features::{Features, FeaturesConfig};
use crate::flow::AttentionFlow;
use crate::input::{TaggerInput, Tokens};
use crate::linear::per_token;
use crate::ops::SeqBackend;
use crate::span::{AnswerSpan, SpanTags};
use crate::transformer::{AttentionConfig, AttentionEncoder, Encoded, Memory};
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
    /// Extractive QA: start and end distributions over the context (DrQA,
    /// BiDAF); the answer is the best span of at most `max_answer` tokens.
    Pointer,
    /// Extractive QA: the one-span CRF ([`crf::one_span`]), whose normaliser
    /// sums over single spans only.
    SpanCrf,
}

impl DecoderKind {
    /// Whether the decoder reads exactly one span per sentence (QA only).
    pub fn is_span(self) -> bool {
        matches!(self, DecoderKind::Pointer | DecoderKind::SpanCrf)
    }
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
    /// BiDAF: context and question through the same (BiLSTM) encoder, the
    /// attention flow layer ([`crate::flow`]), then the modelling BiLSTM.
    Flow,
    /// DCN: context and question through the same (BiLSTM) encoder, the
    /// co-attention layer ([`crate::coattention`]), then the modelling BiLSTM.
    Coattention,
}

impl QuestionMode {
    /// The name configurations use (`model.question`).
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionMode::None => "none",
            QuestionMode::Concat => "concat",
            QuestionMode::Cross => "cross",
            QuestionMode::Flow => "flow",
            QuestionMode::Coattention => "coattention",
        }
    }

    /// The modes that answer questions (every one but `None`).
    pub const ANSWERING: [QuestionMode; 4] =
        [QuestionMode::Concat, QuestionMode::Cross, QuestionMode::Flow, QuestionMode::Coattention];

    /// The answering modes as a message lists them:
    /// `"concat", "cross", "flow" or "coattention"`.
    pub fn answering_choices() -> String {
        let quoted: Vec<String> = Self::ANSWERING.iter().map(|m| format!("\"{}\"", m.as_str())).collect();
        let (last, rest) = quoted.split_last().expect("ANSWERING is not empty");
        format!("{} or {last}", rest.join(", "))
    }

    /// Whether the question and the context meet after the encoder, in a
    /// fusion layer read by the modelling BiLSTM (flow, coattention).
    pub fn fuses(self) -> bool {
        matches!(self, QuestionMode::Flow | QuestionMode::Coattention)
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
    /// Question-conditioned tagging (QA data): "none", "concat", "cross",
    /// "flow" or "coattention".
    pub question: QuestionMode,
    /// The modelling BiLSTM over the fused context of the flow and
    /// coattention readers (unused by the others).
    pub modelling: BiLstmConfig,
    /// Longest answer span the QA decoders pick, in tokens.
    pub max_answer: usize,
    /// Dropout on the encoder's output, before the emission layer (TENER's
    /// `fc_dropout`, 0.4 in its configurations); 0 turns it off.
    pub output_dropout: f64,
}

impl Default for TaggerConfig {
    fn default() -> Self {
        TaggerConfig {
            features: FeaturesConfig::default(),
            encoder: EncoderConfig::default(),
            decoder: DecoderKind::Crf,
            constrained: true,
            question: QuestionMode::None,
            // BiDAF's modelling layer: two BiLSTM layers (d = 100 there).
            modelling: BiLstmConfig { hidden: 100, layers: 2, dropout: 0.2 },
            max_answer: 30,
            output_dropout: 0.0,
        }
    }
}

/// Sizes that come from the data, not the configuration.
#[derive(Clone, Debug)]
pub struct TaggerShape<'a> {
    pub words: usize,
    pub chars: usize,
    /// Character bigrams (0: the run has no bigram vocabulary).
    pub bigrams: usize,
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
            if f.char_encoder == crate::features::CharEncoder::Transformer {
                positive("features.char_heads", f.char_heads)?;
                if f.char_filters % f.char_heads != 0 {
                    return Err(format!(
                        "features.char_filters ({}) must be a multiple of features.char_heads ({}) for char_encoder = \"transformer\"",
                        f.char_filters, f.char_heads
                    ));
                }
            }
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
        let qa_only = [
            ("features.question_match_dim", f.question_match_dim > 0),
            ("features.cue_dim", f.cue_dim > 0),
            ("features.aligned_dim", f.aligned_dim > 0),
            ("decoder = \"pointer\"", self.decoder == DecoderKind::Pointer),
            ("decoder = \"span_crf\"", self.decoder == DecoderKind::SpanCrf),
        ];
        for (what, on) in qa_only {
            if on && self.question == QuestionMode::None {
                return Err(format!(
                    "{what} needs question-answering data and model.question = {}",
                    QuestionMode::answering_choices()
                ));
            }
        }
        positive("max_answer", self.max_answer)?;
        probability("output_dropout", self.output_dropout)?;
        if self.question == QuestionMode::Cross && self.encoder.kind != EncoderKind::Attention {
            return Err("question = \"cross\" needs encoder.kind = \"attention\" (use \"concat\" with a BiLSTM)".into());
        }
        if self.question.fuses() {
            if self.encoder.kind != EncoderKind::Bilstm {
                return Err(format!(
                    "question = \"{}\" reads the question with a BiLSTM: it needs encoder.kind = \"bilstm\"",
                    self.question.as_str()
                ));
            }
            positive("modelling.hidden", self.modelling.hidden)?;
            positive("modelling.layers", self.modelling.layers)?;
            probability("modelling.dropout", self.modelling.dropout)?;
        }
        Ok(())
    }

    pub fn init<B: Backend>(&self, shape: TaggerShape<'_>, device: &B::Device) -> Tagger<B> {
        let features = self.features.init(shape.words, shape.chars, shape.bigrams, shape.pretrained, device);
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
        // The fusion layer and the modelling BiLSTM that reads it (flow, coattention).
        let (fusion, d_fused) = match self.question {
            QuestionMode::Flow => (Some(Fusion::Flow(AttentionFlow::new(d_out, device))), 4 * d_out),
            QuestionMode::Coattention => (Some(Fusion::Coattention(Coattention::new(d_out, device))), 3 * d_out),
            _ => (None, d_out),
        };
        let modelling = fusion.as_ref().map(|_| self.modelling.init(d_fused, device));
        let d_out = if fusion.is_some() { self.modelling.output_dim() } else { d_out };
        // A learned separator between question and context, N(0, 1) like an embedding row.
        let separator = (self.question == QuestionMode::Concat)
            .then(|| Param::from_tensor(Tensor::random([d_in], burn::tensor::Distribution::Normal(0.0, 1.0), device)));
        let t = shape.tags.len();
        let (crf, outputs) = match self.decoder {
            DecoderKind::Crf => {
                let cons = if self.constrained {
                    Constraints::from_scheme(shape.scheme, shape.tags)
                } else {
                    Constraints::none(t)
                };
                (Some(Crf::new(&cons, 0.1, device)), t)
            }
            DecoderKind::Softmax => (None, t),
            DecoderKind::Pointer => (None, 2),
            DecoderKind::SpanCrf => (Some(Crf::new(&crf::one_span::constraints(), 0.1, device)), crf::one_span::STATES),
        };
        Tagger {
            features,
            encoder,
            separator,
            fusion,
            modelling,
            emit: LinearConfig::new(d_out, outputs).init(device),
            crf,
            question: self.question,
            decoder: self.decoder,
            spans: SpanTags::new(shape.tags),
            max_answer: self.max_answer,
            output_dropout: Dropout::new(self.output_dropout),
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
        let out = self.forward_with_memory(x, mask, None, want_weights);
        (out.h, out.attention)
    }

    /// [`Self::forward`] with a memory for cross-encoder blocks to attend
    /// to, and their cross-attention weights when asked.
    pub fn forward_with_memory(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2, Bool>,
        memory: Option<&Memory<B>>,
        want_weights: bool,
    ) -> Encoded<B>
    where
        B: SeqBackend,
    {
        match self {
            Encoder::BiLstm(m) => Encoded { h: m.forward(x, mask), attention: Vec::new(), cross: Vec::new() },
            Encoder::Attention(m) => m.forward_with_memory(x, mask, memory, want_weights),
        }
    }
}

/// The layer where a fusing reader's encoded question and context meet.
#[derive(Module, Debug)]
pub enum Fusion<B: Backend> {
    Flow(AttentionFlow<B>),
    Coattention(Coattention<B>),
}

impl<B: SeqBackend> Fusion<B> {
    /// `c [B, L, D]`, `q [B, Lq, D]` (both zero at padding) and their masks →
    /// the fused context `[B, L, 4D]` (flow) or `[B, L, 3D]` (coattention),
    /// and the context-to-question weights `[B, L, Lq]`.
    pub fn forward(
        &self,
        c: Tensor<B, 3>,
        c_mask: Tensor<B, 2>,
        q: Tensor<B, 3>,
        q_mask: Tensor<B, 2>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>) {
        match self {
            Fusion::Flow(f) => {
                let out = f.forward(c, c_mask, q, q_mask);
                (out.g, out.c2q)
            }
            Fusion::Coattention(f) => {
                let out = f.forward(c, c_mask, q, q_mask);
                (out.u, out.c2q)
            }
        }
    }
}

#[derive(Module, Debug)]
pub struct Tagger<B: Backend> {
    pub features: Features<B>,
    pub encoder: Encoder<B>,
    /// `[D_in]`, the separator of `question [SEP] context` (concat mode only).
    pub separator: Option<Param<Tensor<B, 1>>>,
    /// Where the encoded question and context meet (flow and coattention only).
    pub fusion: Option<Fusion<B>>,
    /// The modelling BiLSTM over the fused context (flow and coattention only).
    pub modelling: Option<BiLstm<B>>,
    /// Encoder output → one score per tag.
    pub emit: Linear<B>,
    /// `None` for the softmax decoder.
    pub crf: Option<Crf<B>>,
    /// How questions reach the encoder, as configured. Not a parameter: it
    /// is not saved in records (it comes from the configuration the tagger
    /// is built from before a record is loaded into it).
    #[module(skip)]
    question: QuestionMode,
    /// The decoder, as configured (its parameters are `emit` and `crf`).
    #[module(skip)]
    pub(crate) decoder: DecoderKind,
    /// Where the span tags sit in the tag set (QA decoders).
    #[module(skip)]
    spans: SpanTags,
    #[module(skip)]
    max_answer: usize,
    /// Before `emit`, in training only (not a parameter, so not in records:
    /// it comes from the configuration, like `question`).
    #[module(skip)]
    output_dropout: Dropout,
}

/// Emission scores and, when asked, attention weights.
pub struct TaggerOutput<B: Backend> {
    /// `[B, L, T]`.
    pub emissions: Tensor<B, 3>,
    /// Per layer, the encoder's self-attention: `[B, H, L, L]` over the
    /// context, or for a concat reader `[B, H, Lj, Lj]` over `question
    /// [SEP] context`, each row packed as [`join_question`] packs it (the
    /// question at `0..nq`, the separator at `nq`, the context from `nq + 1`).
    pub attention: Vec<Tensor<B, 4>>,
    /// Per layer, a cross reader's context → question cross-attention,
    /// `[B, H, L, Lq]` (empty for other readers).
    pub cross: Vec<Tensor<B, 4>>,
}

impl<B: Backend> Tagger<B> {
    /// How the tagger reads questions, as it was built.
    pub fn question_mode(&self) -> QuestionMode {
        self.question
    }

    /// The decoder, as the tagger was built.
    pub fn decoder(&self) -> DecoderKind {
        self.decoder
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
        self.forward_embedded(self.embed(input), input, want_weights)
    }

    /// The context's input features `[B, L, D]`: what the encoder reads of
    /// each context token (for QA, with its reading cues).
    pub fn embed(&self, input: &TaggerInput<B>) -> Tensor<B, 3> {
        self.features.forward(input.context(), input.question(), input.cues())
    }

    /// [`Self::forward`] from the context's features `x [B, L, D]` as
    /// [`Self::embed`] gives them (gradient × input takes its gradient
    /// with respect to `x`).
    pub fn forward_embedded(
        &self,
        x: Tensor<B, 3>,
        input: &TaggerInput<B>,
        want_weights: bool,
    ) -> Result<TaggerOutput<B>, TaggerError> {
        let (c, q) = (input.context(), input.question());
        let out = match (self.question, q) {
            (QuestionMode::None, None) => self.encoder.forward_with_memory(x, c.mask.clone(), None, want_weights), // [B, L, D_out]
            (QuestionMode::None, Some(_)) => return Err(TaggerError::UnexpectedQuestion),
            (mode, None) => return Err(TaggerError::MissingQuestion(mode)),
            (QuestionMode::Concat, Some(q)) => self.encode_concat(x, c, q, want_weights),
            (QuestionMode::Cross, Some(q)) => self.encode_cross(x, c, q, want_weights),
            (QuestionMode::Flow | QuestionMode::Coattention, Some(q)) => self.encode_fused(x, c, q, want_weights),
        };
        let h = self.output_dropout.forward(out.h); // [B, L, D_out]
        Ok(TaggerOutput { emissions: per_token(&self.emit, h), attention: out.attention, cross: out.cross })
    }

    /// `question [SEP] context` through the encoder; the context's
    /// positions of the output, `[B, L, D_out]`.
    fn encode_concat(&self, x: Tensor<B, 3>, input: &Tokens<B>, q: &Tokens<B>, want_weights: bool) -> Encoded<B> {
        let sep = self.separator.as_ref().expect("a tagger built for question = \"concat\" has a separator");
        let qx = self.features.forward(q, None, None); // [B, Lq, D]
        let (joint, joint_mask, context_at) = join_question(qx, &q.lengths, sep.val(), x, &input.lengths);
        let out = self.encoder.forward_with_memory(joint, joint_mask, None, want_weights); // [B, Lq+1+L, D_out]
        let [b, l] = input.dims();
        let d = out.h.dims()[2];
        let h = out.h.gather(1, context_at.unsqueeze_dim::<3>(2).expand([b, l, d])); // [B, L, D_out]
        Encoded { h, ..out }
    }

    /// The question through the encoder, then the context through it
    /// attending to the encoded question: `[B, L, D_out]`.
    fn encode_cross(&self, x: Tensor<B, 3>, input: &Tokens<B>, q: &Tokens<B>, want_weights: bool) -> Encoded<B> {
        let qx = self.features.forward(q, None, None); // [B, Lq, D]
        let (memory, _) = self.encoder.forward(qx, q.mask.clone(), false); // [B, Lq, D_out]
        let memory = (memory, q.mask.clone());
        self.encoder.forward_with_memory(x, input.mask.clone(), Some(&memory), want_weights)
        // [B, L, D_out]
    }

    /// Context and question through the same encoder, met in the fusion
    /// layer, the fused context through the modelling BiLSTM: `[B, L, D_out]`,
    /// with the context-to-question weights as one single-head cross layer
    /// `[B, 1, L, Lq]` when asked.
    fn encode_fused(&self, x: Tensor<B, 3>, input: &Tokens<B>, q: &Tokens<B>, want_weights: bool) -> Encoded<B> {
        let fused_by =
            "a tagger built for question = \"flow\" or \"coattention\" has a fusion layer and a modelling BiLSTM";
        let (fusion, modelling) = (self.fusion.as_ref().expect(fused_by), self.modelling.as_ref().expect(fused_by));
        let qx = self.features.forward(q, None, None); // [B, Lq, D_in]
        let (qh, _) = self.encoder.forward(qx, q.mask.clone(), false); // [B, Lq, D]
        let (ch, _) = self.encoder.forward(x, input.mask.clone(), false); // [B, L, D]
        let c_mask = input.mask.clone().float(); // [B, L]
        let (fused, c2q) = fusion.forward(ch, c_mask.clone(), qh, q.mask.clone().float()); // [B, L, kD]
        let h = modelling.forward(fused, input.mask.clone()); // [B, L, 2H_m]
        let cross = if want_weights {
            vec![(c2q * c_mask.unsqueeze_dim::<3>(2)).unsqueeze_dim::<4>(1)] // [B, 1, L, Lq], zero at padded rows
        } else {
            Vec::new()
        };
        Encoded { h, attention: Vec::new(), cross }
    }

    /// Training loss, averaged over sentences: the CRF's negative
    /// log-likelihood, the summed token cross-entropy for softmax, or for
    /// the QA decoders the negative log-likelihood of the gold span (the
    /// first to the last token not tagged `O`; a window without its answer
    /// adds 0). Errors as [`Self::forward`].
    pub fn loss(&self, input: &TaggerInput<B>, tags: Tensor<B, 2, Int>) -> Result<Tensor<B, 1>, TaggerError> {
        let e = self.forward(input, false)?.emissions; // [B, L, T]
        let mask = input.context().mask.clone();
        let [b, _, _] = e.dims();
        Ok(match (self.decoder, &self.crf) {
            (DecoderKind::Crf, Some(crf)) => crf.nll(e, tags, mask, Reduction::Mean),
            (DecoderKind::Pointer, _) => self.pointer_loss(e, &tags, mask),
            (DecoderKind::SpanCrf, Some(crf)) => {
                let (states, answered) = self.span_states(&tags, &input.context().lengths, &e.device());
                let nll = crf.nll(e, states, mask, Reduction::None); // [B]
                (nll * answered).sum().div_scalar(b as f64)
            }
            _ => {
                let logp = log_softmax(e, 2); // [B, L, T]
                let gold = logp.gather(2, tags.unsqueeze_dim::<3>(2)).squeeze_dim::<2>(2); // [B, L]
                (gold * mask.float()).sum().neg().div_scalar(b as f64)
            }
        })
    }

    /// Each row's gold span (first and last non-`O` token), on the host.
    fn gold_spans(&self, tags: &Tensor<B, 2, Int>, lengths: &[usize]) -> Vec<Option<(usize, usize)>> {
        let l = tags.dims()[1];
        let ids: Vec<i64> = tags.clone().into_data().iter::<i64>().collect();
        lengths.iter().enumerate().map(|(r, &n)| self.spans.gold(&ids[r * l..r * l + n])).collect()
    }

    /// `−log P(start) − log P(end)` of the gold spans, averaged over the batch.
    fn pointer_loss(&self, e: Tensor<B, 3>, tags: &Tensor<B, 2, Int>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 1> {
        let [b, l, _] = e.dims();
        let device = e.device();
        let lengths: Vec<usize> = mask.clone().int().sum_dim(1).into_data().iter::<i64>().map(|n| n as usize).collect();
        let gold = self.gold_spans(tags, &lengths);
        let at = |pick: fn((usize, usize)) -> usize| {
            let v: Vec<i64> = gold.iter().map(|g| g.map_or(0, pick) as i64).collect();
            Tensor::<B, 2, Int>::from_data(TensorData::new(v, [b, 1]), &device)
        };
        let answered: Vec<f32> = gold.iter().map(|g| f32::from(u8::from(g.is_some()))).collect();
        let answered = Tensor::<B, 1>::from_data(TensorData::new(answered, [b]), &device);
        let padding = mask.bool_not();
        let logp = |col: usize| {
            let x = e.clone().slice([0..b, 0..l, col..col + 1]).reshape([b, l]); // [B, L]
            log_softmax(x.mask_fill(padding.clone(), -1.0e4), 1)
        };
        let start = logp(0).gather(1, at(|g| g.0)).reshape([b]); // [B]
        let end = logp(1).gather(1, at(|g| g.1)).reshape([b]); // [B]
        ((start + end) * answered).sum().neg().div_scalar(b as f64)
    }

    /// The one-span CRF's gold state paths `[B, L]` and which rows have a
    /// span `[B]` (the others get any legal path and weight 0).
    fn span_states(
        &self,
        tags: &Tensor<B, 2, Int>,
        lengths: &[usize],
        device: &B::Device,
    ) -> (Tensor<B, 2, Int>, Tensor<B, 1>) {
        let [b, l] = tags.dims();
        let gold = self.gold_spans(tags, lengths);
        let mut states = vec![0i64; b * l];
        for (r, (g, &n)) in gold.iter().zip(lengths).enumerate() {
            let (i, j) = g.unwrap_or((0, 0));
            for (k, x) in crf::one_span::states(n, i, j).into_iter().enumerate() {
                states[r * l + k] = x as i64;
            }
        }
        let answered: Vec<f32> = gold.iter().map(|g| f32::from(u8::from(g.is_some()))).collect();
        (
            Tensor::from_data(TensorData::new(states, [b, l]), device),
            Tensor::from_data(TensorData::new(answered, [b]), device),
        )
    }

    /// Best tag path per sentence (Viterbi for the CRF, argmax for softmax).
    /// Errors as [`Self::forward`].
    pub fn decode(&self, input: &TaggerInput<B>) -> Result<Vec<Vec<usize>>, TaggerError> {
        let e = self.forward(input, false)?.emissions;
        Ok(self.decode_emissions(e, input.context().mask.clone()))
    }

    pub fn decode_emissions(&self, e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Vec<Vec<usize>> {
        match (self.decoder, &self.crf) {
            (DecoderKind::Crf, Some(crf)) => crf.decode(e, mask),
            (DecoderKind::Softmax, _) => {
                let [b, l, _] = e.dims();
                let lengths: Vec<i64> = mask.int().sum_dim(1).into_data().iter::<i64>().collect();
                let best: Vec<i64> = e.argmax(2).into_data().iter::<i64>().collect();
                (0..b).map(|s| (0..lengths[s] as usize).map(|i| best[s * l + i] as usize).collect()).collect()
            }
            _ => {
                let host = host_rows(e, mask);
                self.decode_host(&host.iter().map(Vec::as_slice).collect::<Vec<_>>())
            }
        }
    }

    /// Per-token tag probabilities `[B, L, T]`: CRF marginals, the softmax,
    /// or the marginals of a QA decoder's span distribution.
    pub fn probabilities(&self, e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        match (self.decoder, &self.crf) {
            (DecoderKind::Crf, Some(crf)) => crf.marginals(e, mask),
            (DecoderKind::Softmax, _) => {
                let [b, l, t] = e.dims();
                softmax(e, 2) * mask.float().unsqueeze_dim::<3>(2).expand([b, l, t])
            }
            _ => {
                let [b, l, _] = e.dims();
                let (device, t) = (e.device(), self.spans.t);
                let host = host_rows(e, mask);
                let mut out = vec![0.0f32; b * l * t];
                let rows = self.probabilities_host(&host.iter().map(Vec::as_slice).collect::<Vec<_>>());
                for (r, m) in rows.iter().enumerate() {
                    out[r * l * t..r * l * t + m.len()].copy_from_slice(m);
                }
                Tensor::from_data(TensorData::new(out, [b, l, t]), &device)
            }
        }
    }

    /// The decoder's outputs per token: tags, or 2 (pointer) / 4 (one-span CRF).
    pub fn outputs(&self) -> usize {
        self.emit.weight.dims()[1]
    }

    /// Best tag path of each sentence from emissions already on the host,
    /// one `[n, outputs]` slice per sentence (Viterbi for the CRF, argmax
    /// for softmax, the best span's tags for the QA decoders).
    pub fn decode_host(&self, sentences: &[&[f32]]) -> Vec<Vec<usize>> {
        match (self.decoder, &self.crf) {
            (DecoderKind::Crf, Some(crf)) => crf.decode_host(sentences),
            (DecoderKind::Softmax, _) => {
                let t = self.outputs();
                sentences.iter().map(|em| em.chunks(t).map(first_max).collect()).collect()
            }
            _ => {
                let spans = self.best_spans_host(sentences);
                sentences
                    .iter()
                    .zip(spans)
                    .map(|(em, sp)| {
                        let n = em.len() / self.outputs();
                        sp.map_or_else(|| vec![self.spans.o; n], |s| self.spans.path(n, s.start, s.end))
                    })
                    .collect()
            }
        }
    }

    /// Per-token tag probabilities `[n, T]` of each sentence from host
    /// emissions: CRF marginals, the softmax, or the marginals of a QA
    /// decoder's spans (those of at most `max_answer` tokens).
    pub fn probabilities_host(&self, sentences: &[&[f32]]) -> Vec<Vec<f32>> {
        match (self.decoder, &self.crf) {
            (DecoderKind::Crf, Some(crf)) => crf.marginals_host(sentences),
            (DecoderKind::Softmax, _) => {
                let t = self.outputs();
                sentences.iter().map(|em| em.chunks(t).flat_map(softmax_row).collect()).collect()
            }
            _ => sentences
                .iter()
                .map(|em| self.spans.marginals_of_spans(em.len() / self.outputs(), &self.span_distribution(em)))
                .collect(),
        }
    }

    /// Each sentence's answer span (at most `max_answer` tokens) with its
    /// probability, from host emissions: see [`crate::span`]. `None` for
    /// an empty sentence.
    pub fn best_spans_host(&self, sentences: &[&[f32]]) -> Vec<Option<AnswerSpan>> {
        self.top_spans_host(sentences, 1).into_iter().map(|spans| spans.into_iter().next()).collect()
    }

    /// Each sentence's `k` likeliest answer spans (at most `max_answer`
    /// tokens), best first, as [`Self::best_spans_host`] ranks them; fewer
    /// where the sentence has fewer spans.
    pub fn top_spans_host(&self, sentences: &[&[f32]], k: usize) -> Vec<Vec<AnswerSpan>> {
        match self.decoder {
            DecoderKind::Crf | DecoderKind::Softmax => self
                .probabilities_host(sentences)
                .iter()
                .map(|m| crate::span::top(&self.spans.candidates_from_marginals(m, self.max_answer), k))
                .collect(),
            _ => sentences.iter().map(|em| crate::span::top(&self.span_distribution(em), k)).collect(),
        }
    }

    /// The `k` best tag paths of each sentence from host emissions, best
    /// first, each with its probability (fewer where fewer paths exist):
    /// - the CRF: k-best Viterbi over the allowed paths
    ///   ([`crf::Crf::k_best_host`]);
    /// - softmax: the same list search over per-token log-probabilities
    ///   with no transitions (tokens are independent, so a path's
    ///   probability is the product of its tokens');
    /// - the QA decoders: the tags of the `k` likeliest spans
    ///   ([`Self::top_spans_host`]), with the span's probability.
    ///
    /// The first path is [`Self::decode_host`]'s, except for a QA decoder
    /// over a tagging decoder's marginals, whose first is the best span's.
    pub fn k_best_host(&self, sentences: &[&[f32]], k: usize) -> Vec<Vec<(Vec<usize>, f64)>> {
        match (self.decoder, &self.crf) {
            (DecoderKind::Crf, Some(crf)) => crf.k_best_host(sentences, k),
            (DecoderKind::Softmax, _) => {
                let t = self.outputs();
                let free = crf::host::Scores::new(t, vec![0.0; t * t], vec![0.0; t], vec![0.0; t]);
                sentences
                    .iter()
                    .map(|em| {
                        let log_p: Vec<f64> = em.chunks(t).flat_map(log_softmax_row).collect();
                        let best = crf::host::k_best(&free, &log_p, k);
                        best.into_iter().map(|(path, log_prob)| (path, log_prob.exp())).collect()
                    })
                    .collect()
            }
            _ => sentences
                .iter()
                .zip(self.top_spans_host(sentences, k))
                .map(|(em, spans)| {
                    let n = em.len() / self.outputs();
                    spans.into_iter().map(|s| (self.spans.path(n, s.start, s.end), f64::from(s.prob))).collect()
                })
                .collect(),
        }
    }

    /// A QA decoder's spans of at most `max_answer` tokens with their
    /// probabilities (renormalised over those spans).
    fn span_distribution(&self, em: &[f32]) -> Vec<(usize, usize, f32)> {
        match &self.crf {
            Some(crf) if self.decoder == DecoderKind::SpanCrf => {
                let wide: Vec<f64> = em.iter().map(|&x| f64::from(x)).collect();
                let spans = crf::one_span::span_log_probs(&crf.host_scores(), &wide, self.max_answer);
                crate::span::normalise(spans.into_iter().map(|(i, j, lp)| (i, j, lp as f32)).collect())
            }
            _ => crate::span::pointer_spans(em, self.max_answer),
        }
    }
}

/// Each row's emissions over its real tokens, on the host.
fn host_rows<B: Backend>(e: Tensor<B, 3>, mask: Tensor<B, 2, Bool>) -> Vec<Vec<f32>> {
    let [b, l, t] = e.dims();
    let lengths: Vec<i64> = mask.int().sum_dim(1).into_data().iter::<i64>().collect();
    let all: Vec<f32> = e.into_data().iter::<f32>().collect();
    (0..b).map(|r| all[r * l * t..(r * l + lengths[r] as usize) * t].to_vec()).collect()
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
/// `log softmax(row)` in f64.
fn log_softmax_row(row: &[f32]) -> Vec<f64> {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let z = m + row.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln();
    row.iter().map(|&x| x as f64 - z).collect()
}

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
