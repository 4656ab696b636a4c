//! Sequence-labelling data, with no Burn dependency.
//!
//! files → [`reader`] (column files) / [`dataset`] (a folder of splits) →
//! [`tags`] (schemes, spans, conversion) → [`vocab`] (ids) → [`batch`]
//! (length-bucketed, padded batches) … and back: predicted tags →
//! [`score`] (conlleval-exact P/R/F1). [`toy`] generates small datasets,
//! [`stats`] describes one, [`concat`] joins its sentences into long passages; [`tokenization`] says how raw text is cut
//! into tokens; [`bigrams`] pairs each character with the next. [`qa::squad`] reads extractive-QA data (SQuAD
//! JSON) and scores answers with the official exact match and token F1;
//! [`qa::metric`] picks SQuAD's or CMRC 2018's metric for a dataset, and
//! [`qa::baseline`] answers without learning (sliding window, best sentence).

pub mod batch;
pub mod bigrams;
pub mod concat;
pub mod dataset;
pub mod error;
pub mod io;
pub mod qa;
pub mod reader;
pub mod score;
pub mod shape;
pub mod split;
pub mod stats;
pub mod tags;
pub mod tokenization;
pub mod toy;
pub mod vectors;
pub mod vocab;
pub mod window;

pub use batch::{Asked, Batch, Example};
pub use dataset::{Dataset, Split};
pub use error::{CorpusError, Result};
pub use reader::{Columns, Sentence};
pub use split::SplitName;
pub use tags::{Prefix, Scheme, Span, Tag};
pub use tokenization::Tokenization;
pub use vocab::{Normalize, Vocab, Vocabs};
