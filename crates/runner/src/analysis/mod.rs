//! Looking inside a trained tagger: head diagnostics over a split
//! ([`heads`]) and the head-count sweep's report ([`sweep`]), attention maps
//! cut per sentence ([`attention_map`]), where a concatenating QA reader's
//! context looks ([`qa_attention`]), the pictures ([`visualize`]) and
//! whether attention explains the predictions ([`explain`]: erasure
//! against gradients and random).

pub mod attention_map;
pub mod explain;
pub mod heads;
pub mod qa_attention;
pub mod sweep;
pub mod visualize;
