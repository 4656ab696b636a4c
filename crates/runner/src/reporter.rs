//! How the engine talks to whoever runs it: result lines, messages and
//! progress go through a [`Reporter`], so the library never prints. The
//! `seqlab` binary's reporter writes to the terminal; [`Silent`] drops
//! everything (tests, measurement children).

/// Where the engine's output goes.
pub trait Reporter: Sync {
    /// A result line (the binary prints it on standard output).
    fn output(&self, line: &str);
    /// A note or warning for the user (standard error).
    fn message(&self, line: &str);
    /// A progress bar of `len` steps, labelled `prefix`.
    fn progress(&self, len: u64, prefix: &str) -> Box<dyn Progress>;
}

/// A progress bar.
pub trait Progress {
    fn set_position(&self, done: u64);
    fn inc(&self, by: u64);
    fn set_message(&self, message: String);
    /// Prints `line` as a message without tearing the bar.
    fn message(&self, line: &str);
    /// Removes the bar.
    fn finish(&self);
}

/// Reports nothing.
pub struct Silent;

impl Reporter for Silent {
    fn output(&self, _: &str) {}
    fn message(&self, _: &str) {}
    fn progress(&self, _: u64, _: &str) -> Box<dyn Progress> {
        Box::new(NoProgress)
    }
}

/// A progress bar nobody sees.
pub struct NoProgress;

impl Progress for NoProgress {
    fn set_position(&self, _: u64) {}
    fn inc(&self, _: u64) {}
    fn set_message(&self, _: String) {}
    fn message(&self, _: &str) {}
    fn finish(&self) {}
}
