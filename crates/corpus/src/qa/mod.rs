//! Extractive question answering: SQuAD-format files ([`squad`]), the
//! reading cues of a context against its question ([`cues`]), the metric of
//! each dataset ([`metric`]) and the baselines that learn nothing
//! ([`baseline`]).

pub mod baseline;
pub mod cues;
pub mod metric;
pub mod squad;
