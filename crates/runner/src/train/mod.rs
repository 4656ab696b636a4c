//! Training: the one step ([`step`]), the loop ([`trainer`]) with its
//! optimiser ([`adam`]), weight averaging ([`average`]) and QA curriculum
//! ([`curriculum`]); checkpoints ([`checkpoint`]), the run folder
//! ([`rundir`]) and the end of a run, best model on dev and test
//! ([`finish`]).

pub mod adam;
pub mod average;
pub mod checkpoint;
pub mod curriculum;
pub mod finish;
pub mod rundir;
pub mod step;
pub mod trainer;
