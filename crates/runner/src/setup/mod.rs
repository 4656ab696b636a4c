//! Before anything runs: the configuration ([`config`]), what `seqlab
//! train` settles before its loop ([`launch`]), the data prepared as ids
//! ([`prep`]), the QA subword tokenizer ([`tokenizer`]) and the tagger built
//! from them ([`model`]).

pub mod config;
pub mod launch;
pub mod model;
pub mod prep;
pub mod tokenizer;
