//! Counting the GPU kernels a process compiles. CubeCL compiles a kernel
//! for every new operation and tensor shape it meets (on CUDA, a JIT
//! compile of CUDA C++ through NVRTC, roughly 0.5–1 s each), and says so
//! through the `log` crate at trace level: "Compiling kernel" for each
//! one compiled, "Using PTX cache" for each one loaded from its on-disk
//! cache instead. [`install`] counts those records; `seqlab train
//! --verbose` prints the counts after each epoch. Nothing is counted until
//! it is installed, and the CPU backends compile no kernels.

use corpus::batch::Batch;
use log::{Level, Log, Metadata, Record};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The distinct tensor shapes an epoch's batches came in: what a GPU
/// backend compiles kernels for (`[sentences, tokens, characters]` of the
/// sentences, and of the questions for QA), and the share of padding.
#[derive(Debug, Default)]
pub struct BatchShapes {
    shapes: BTreeSet<[usize; 6]>,
    batches: usize,
    real: usize,
    padded: usize,
}

impl BatchShapes {
    pub fn add(&mut self, batch: &Batch) {
        let c = batch.context();
        let q = match batch {
            Batch::Plain(_) => [0; 3],
            Batch::Asked { question, .. } => [question.batch, question.len, question.word_len],
        };
        self.shapes.insert([c.batch, c.len, c.word_len, q[0], q[1], q[2]]);
        self.batches += 1;
        self.real += c.lengths.iter().sum::<usize>();
        self.padded += c.batch * c.len;
    }

    /// Distinct shapes.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// "23 batch shapes over 880 batches (lengths padded up to buckets), 4.1 % padding".
    pub fn summary(&self, bucketed: bool) -> String {
        let padding = 100.0 * (1.0 - self.real as f64 / self.padded.max(1) as f64);
        let how = if bucketed { "lengths padded up to buckets" } else { "each padded to its longest" };
        format!("{} batch shapes over {} batches ({how}), {padding:.1} % padding", self.len(), self.batches)
    }
}

/// Kernels compiled and loaded from the compiled-kernel cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounts {
    pub compiled: usize,
    pub cached: usize,
}

/// A `log` sink that counts CubeCL's kernel records and drops the rest.
#[derive(Debug, Default)]
pub struct KernelCounter {
    compiled: AtomicUsize,
    cached: AtomicUsize,
}

impl KernelCounter {
    pub fn counts(&self) -> KernelCounts {
        KernelCounts { compiled: self.compiled.load(Ordering::Relaxed), cached: self.cached.load(Ordering::Relaxed) }
    }
}

impl Log for KernelCounter {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() == Level::Trace && metadata.target().starts_with("cubecl")
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let counter = match record.args().as_str() {
            Some("Compiling kernel") => &self.compiled,
            Some("Using PTX cache") => &self.cached,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn flush(&self) {}
}

static COUNTER: KernelCounter = KernelCounter { compiled: AtomicUsize::new(0), cached: AtomicUsize::new(0) };
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Starts counting (once per process; `false` when another logger was
/// installed first). Every trace record of every crate then reaches the
/// counter's filter, so only a verbose run turns it on.
pub fn install() -> bool {
    *INSTALLED.get_or_init(|| {
        let ours = log::set_logger(&COUNTER).is_ok();
        if ours {
            log::set_max_level(log::LevelFilter::Trace);
        }
        ours
    })
}

/// The counts so far, once [`install`]ed.
pub fn counts() -> Option<KernelCounts> {
    INSTALLED.get().copied().unwrap_or(false).then(|| COUNTER.counts())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corpus::batch::{Encoded, Example};

    #[test]
    fn shapes_are_counted_once_each_and_padding_is_the_padded_share() {
        let sentence = |n: usize| {
            Example::Plain(Encoded {
                words: vec![2; n],
                chars: vec![vec![3, 4]; n],
                caps: vec![1; n],
                bigrams: Vec::new(),
                tags: None,
            })
        };
        let data: Vec<Example> = [3, 5, 3, 5, 9].into_iter().map(sentence).collect();
        let mut shapes = BatchShapes::default();
        for ids in [[0, 1], [2, 3]] {
            shapes.add(&Batch::pad(&data, &ids));
        }
        assert_eq!(shapes.len(), 1);
        shapes.add(&Batch::pad(&data, &[4]));
        shapes.add(&Batch::pad(&data, &[0, 1]).bucketed());
        assert_eq!(shapes.len(), 3);
        // 8 + 8 + 9 + 8 real tokens of 10 + 10 + 9 + 16 padded.
        assert_eq!(shapes.summary(false), "3 batch shapes over 4 batches (each padded to its longest), 26.7 % padding");
    }

    fn record(counter: &KernelCounter, target: &str, level: Level, message: std::fmt::Arguments) {
        counter.log(&Record::builder().target(target).level(level).args(message).build());
    }

    #[test]
    fn counts_cubecl_compilations_and_cache_loads_and_nothing_else() {
        let c = KernelCounter::default();
        let cuda = "cubecl_cuda::compute::context";
        record(&c, cuda, Level::Trace, format_args!("Compiling kernel"));
        record(&c, cuda, Level::Trace, format_args!("Compiling kernel"));
        record(&c, cuda, Level::Trace, format_args!("Using PTX cache"));
        record(&c, cuda, Level::Debug, format_args!("Compiling kernel"));
        record(&c, "burn_autodiff::graph", Level::Trace, format_args!("Compiling kernel"));
        record(&c, cuda, Level::Trace, format_args!("Autotuning"));
        assert_eq!(c.counts(), KernelCounts { compiled: 2, cached: 1 });
    }

    #[test]
    fn installed_counter_sees_records_sent_through_log() {
        assert!(install(), "no other logger in this test binary");
        assert!(install(), "installing twice is harmless");
        let before = counts().expect("installed");
        log::trace!(target: "cubecl_cuda::compute::context", "Compiling kernel");
        log::trace!(target: "cubecl_cuda::compute::context", "Using PTX cache");
        let after = counts().expect("installed");
        assert_eq!((after.compiled - before.compiled, after.cached - before.cached), (1, 1));
    }
}
