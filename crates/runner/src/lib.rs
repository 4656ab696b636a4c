//! seqlab's engine: training, evaluation, inference, analysis and
//! benchmarks of sequence taggers, generic over the Burn backend. The
//! `seqlab` binary (`src/bin/seqlab`) parses the command line, picks the
//! backend, calls in here and prints; nothing in here parses arguments or
//! prints (output goes through a [`reporter::Reporter`]).
//!
//! Who calls what (each folder is a concern; its `mod.rs` says what is in it):
//!
//! ```text
//! setup/ config ─► prep ─► model ─► train/ step ◄── trainer ─► checkpoint, rundir, finish
//!                            │         ▲               │
//!                            │         └── bench/ ─┐   ▼
//!                            └───────────────────► infer/ ◄─ run, report/, analysis/
//!                                                    │
//!                                                    ▼
//!                                                   qa (answers, official metric)
//! ```
//!
//! - [`setup`]: configuration, launch, data preparation, tokenizer, model.
//! - [`train`]: [`train::step`], the one training step (train, `bench
//!   train`, `bench memory`), and the loop around it.
//! - [`infer`]: the one inference path (dev/test passes, eval, predict,
//!   `bench predict`, heads, visualize) and QA answers.
//! - [`analysis`]: heads, attention maps, pictures, the head sweep.
//! - [`report`]: `seqlab compare`, its HTML page, QA bootstrap.
//! - [`bench`]: benchmarks, memory and kernel counting.
//! - [`sweep`]: grids of runs, as `seqlab train` processes on this machine
//!   or as a Slurm job array, then [`report`]'s comparison of them.
//! - [`reporter`]: how results and messages leave the library.

pub mod analysis;
pub mod bench;
pub mod infer;
pub mod report;
pub mod reporter;
pub mod setup;
pub mod sweep;
#[cfg(test)]
mod testing;
pub mod train;
