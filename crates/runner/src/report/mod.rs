//! Comparing runs: `seqlab compare`'s tables and bootstrap ([`compare`]),
//! its `report.html` ([`html`]), and the paired bootstrap over QA answers
//! ([`bootstrap`]).

pub mod bootstrap;
pub mod compare;
pub mod html;
