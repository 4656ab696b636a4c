//! seqlab's engine: training, evaluation, inference, analysis and
//! benchmarks of sequence taggers, generic over the Burn backend. The
//! `seqlab` binary (`src/bin/seqlab`) parses the command line, picks the
//! backend, calls in here and prints; nothing in here parses arguments or
//! prints (output goes through a [`reporter::Reporter`]).
//!
//! Who calls what:
//!
//! ```text
//! config ─► prep ─► model ─► step ◄──────────── trainer ─► checkpoint, rundir
//!                     │        ▲                   │
//!                     │        └── bench ──┐       ▼
//!                     └──────────────────► infer ◄─ report, run, analysis, visualize
//!                                          │
//!                                          ▼
//!                                        qa (answers, official metric)
//! ```
//!
//! - [`step`]: the one training step (train, `bench train`, `bench memory`).
//! - [`infer`]: the one inference path (dev/test passes, eval, predict,
//!   `bench predict`, heads, visualize).

pub mod adam;
pub mod analysis;
pub mod attention_map;
pub mod average;
pub mod bench;
pub mod checkpoint;
pub mod compare;
pub mod config;
pub mod curriculum;
pub mod html_report;
pub mod infer;
pub mod input;
pub mod kernels;
pub mod launch;
pub mod memory;
pub mod model;
pub mod prep;
pub mod qa;
pub mod qa_attention;
pub mod qa_bootstrap;
pub mod report;
pub mod reporter;
pub mod run;
pub mod rundir;
pub mod step;
pub mod sweep;
#[cfg(test)]
mod testing;
pub mod tokenizer;
pub mod trainer;
pub mod visualize;
