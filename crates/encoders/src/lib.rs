//! Encoders for sequence tagging, on any Burn backend.
//!
//! tokens → [`features`] (word, character-CNN and capitalisation features)
//! → an encoder ([`bilstm`] or the self-attention [`transformer`], whose
//! heads live in [`attention`], positions in [`positional`]; QA readers
//! that fuse question and context after it: BiDAF's attention [`flow`] and
//! DCN's [`coattention`], read by a modelling BiLSTM) → emission
//! scores → a decoder (the `crf` crate, or softmax), all joined in
//! [`tagger`]. Token-wise linear layers go through [`linear::per_token`];
//! the operations with hand-written backward passes (attention, the LSTM
//! recurrence) are in [`ops`].

pub mod attention;
pub mod bilstm;
pub mod coattention;
pub mod dropout;
pub mod features;
pub mod flow;
pub mod footprint;
pub mod input;
pub mod linear;
pub mod ops;
pub mod positional;
pub mod prediction;
pub mod span;
pub mod tagger;
pub mod transformer;

pub use input::TaggerInput;
pub use tagger::{
    DecoderKind, EncoderConfig, EncoderKind, QuestionMode, Tagger, TaggerConfig, TaggerError, TaggerShape,
};
