//! Looking inside a trained tagger: head diagnostics over a split
//! ([`heads`]) and the head-count sweep's report ([`sweep`]), attention maps
//! cut per sentence ([`attention_map`]), where a concatenating QA reader's
//! context looks ([`qa_attention`]) and the pictures ([`visualize`]).

pub mod attention_map;
pub mod heads;
pub mod qa_attention;
pub mod sweep;
pub mod visualize;
