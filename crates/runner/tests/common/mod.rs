//! Helpers shared by the end-to-end tests: run the real binary.
#![allow(dead_code)]

use std::process::{Command, Output};

pub fn seqlab<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seqlab")).args(args).output().expect("seqlab runs")
}

/// Stdout of a run that must succeed (else its stderr in the failure).
pub fn ok(o: Output) -> String {
    assert!(o.status.success(), "seqlab failed:\n{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}
