//! The terminal reporter: result lines on standard output, messages on
//! standard error, progress bars by indicatif.

use indicatif::{ProgressBar, ProgressStyle};
use runner::reporter::{Progress, Reporter};

pub struct Console;

impl Reporter for Console {
    fn output(&self, line: &str) {
        println!("{line}");
    }

    fn message(&self, line: &str) {
        eprintln!("{line}");
    }

    fn progress(&self, len: u64, prefix: &str) -> Box<dyn Progress> {
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({eta})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(prefix.to_string());
        Box::new(Bar(bar))
    }
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn set_position(&self, done: u64) {
        self.0.set_position(done);
    }
    fn inc(&self, by: u64) {
        self.0.inc(by);
    }
    fn set_message(&self, message: String) {
        self.0.set_message(message);
    }
    fn message(&self, line: &str) {
        self.0.suspend(|| eprintln!("{line}"));
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
