//! Counting the GPU kernels a process compiles. CubeCL compiles a kernel
//! for every new operation and tensor shape it meets (on CUDA, a JIT
//! compile of CUDA C++ through NVRTC, roughly 0.5–1 s each; on wgpu, a
//! WGSL shader the driver compiles), and says so through the `log` crate
//! at trace level: on CUDA "Compiling kernel" for each one compiled and
//! "Using PTX cache" for each one loaded from its on-disk cache instead;
//! on wgpu "[cubecl-wgpu] compiling WGSL module …" (and "Using SPIR-V
//! cache" where CubeCL's SPIR-V compiler and its cache are on). [`install`] counts those records; `seqlab train
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
        let counter = match Opening::of(record.args()).as_str() {
            "Compiling kernel" | WGSL_COMPILE => &self.compiled,
            "Using PTX cache" | "Using SPIR-V cache" => &self.cached,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn flush(&self) {}
}

/// How burn-wgpu's record of a shader it compiles opens (the shader's
/// source follows it).
const WGSL_COMPILE: &str = "[cubecl-wgpu] compiling WGSL module";

/// The first characters of a record's message, up to the length of
/// [`WGSL_COMPILE`]: enough to tell the records apart without formatting
/// the shader source that follows.
struct Opening {
    buf: [u8; WGSL_COMPILE.len()],
    len: usize,
}

impl Opening {
    fn of(args: &std::fmt::Arguments) -> Opening {
        let mut o = Opening { buf: [0; WGSL_COMPILE.len()], len: 0 };
        // Writing stops with an error once the buffer is full: the rest is never formatted.
        let _ = std::fmt::write(&mut o, *args);
        o
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl std::fmt::Write for Opening {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for c in s.chars() {
            if self.len + c.len_utf8() > self.buf.len() {
                return Err(std::fmt::Error);
            }
            c.encode_utf8(&mut self.buf[self.len..]);
            self.len += c.len_utf8();
        }
        Ok(())
    }
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

/// Configures CubeCL for a GPU backend before its first use (the binary
/// calls it for `--device cuda|wgpu`; so do the tests that train on wgpu,
/// to run as the binary does). Keeps the CUDA kernels that CubeCL compiles
/// in an on-disk cache, so that only the first process pays for them, and
/// autotunes matrix products at CubeCL's minimal level. A fresh process otherwise
/// JIT-compiles every kernel it meets through NVRTC, roughly 0.5–1 s each:
/// on an H200, 89 compilations in a BiLSTM-CRF's first minute, before a
/// single benchmark batch finished (benchmarks/results-gpu.md). CubeCL
/// leaves this cache off unless a `cubecl.toml` turns it on; here it goes
/// where CubeCL keeps its autotune results (`target/` of the nearest Cargo
/// project above the working directory, else the user's cache directory).
/// The rest of CubeCL's configuration is read as CubeCL reads it (a
/// `cubecl.toml` above the working directory, then its `CUBECL_*`
/// environment variables); a cache location named there wins. On wgpu the
/// same configuration applies, but CubeCL 0.10 caches only the kernels of
/// its SPIR-V compiler (burn's `vulkan` feature, not built here): the WGSL
/// shaders burn-wgpu compiles by default are compiled again by each
/// process, and the autotune results are what the cache keeps.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub fn configure_cubecl() {
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let config = CubeClRuntimeConfig::from_current_dir().override_from_env();
        CubeClRuntimeConfig::set(with_kernel_cache(config));
    });
}

/// `config` with the compiled-kernel cache on, where it names none, and
/// matrix-product autotuning at its minimal level where it is at CubeCL's
/// default ("balanced") and `CUBECL_AUTOTUNE_LEVEL` is unset: each
/// candidate CubeCL tries is a kernel compiled for every new shape, which
/// a first run pays for before its first batch (`CUBECL_AUTOTUNE_LEVEL=
/// balanced`, or a `cubecl.toml`, brings it back).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn with_kernel_cache(
    mut config: burn::cubecl::config::CubeClRuntimeConfig,
) -> burn::cubecl::config::CubeClRuntimeConfig {
    use burn::cubecl::config::autotune::AutotuneLevel;
    if config.compilation.cache.is_none() {
        config.compilation.cache = Some(burn::cubecl::config::cache::CacheConfig::Target);
    }
    if matches!(config.autotune.level, AutotuneLevel::Balanced) && std::env::var_os("CUBECL_AUTOTUNE_LEVEL").is_none() {
        config.autotune.level = AutotuneLevel::Minimal;
    }
    config
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
        // burn-wgpu: the WGSL compile record carries the shader's source after its opening.
        let wgpu = "cubecl_wgpu::backend::base";
        let (name, source) = ("elemwise_fuse", "@compute fn main() {}");
        record(&c, wgpu, Level::Trace, format_args!("[cubecl-wgpu] compiling WGSL module `{name}`\n{source}"));
        record(&c, wgpu, Level::Trace, format_args!("Using SPIR-V cache"));
        record(&c, wgpu, Level::Trace, format_args!("[cubecl-wgpu] compiling"));
        assert_eq!(c.counts(), KernelCounts { compiled: 3, cached: 2 });
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

#[cfg(all(test, any(feature = "cuda", feature = "wgpu")))]
mod cubecl_config_tests {
    use super::with_kernel_cache;
    use burn::cubecl::config::{cache::CacheConfig, CubeClRuntimeConfig};

    #[test]
    fn kernel_cache_and_minimal_autotuning_are_on_by_default_and_a_named_location_wins() {
        let on = with_kernel_cache(CubeClRuntimeConfig::default());
        assert!(matches!(on.compilation.cache, Some(CacheConfig::Target)));
        if std::env::var_os("CUBECL_AUTOTUNE_LEVEL").is_none() {
            assert!(matches!(on.autotune.level, burn::cubecl::config::autotune::AutotuneLevel::Minimal));
        }
        let named: CubeClRuntimeConfig = toml::from_str("[compilation]\ncache = { file = \"/tmp/kernels\" }").unwrap();
        let kept = with_kernel_cache(named);
        assert!(matches!(kept.compilation.cache, Some(CacheConfig::File(p)) if p.ends_with("kernels")));
    }
}
