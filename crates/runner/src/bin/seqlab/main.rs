//! `seqlab`: train, evaluate, compare and explain sequence taggers.
//!
//! The command line over the `runner` library: [`cli`] parses, [`commands`]
//! calls the library and prints. This file is the only place that names
//! concrete backends; everything else is generic over `B: Backend` /
//! `B: AutodiffBackend`.

mod bench;
mod cli;
mod commands;
mod console;

use anyhow::Result;
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use clap::Parser;
use cli::{BenchCommand, Cli, Command, DataCommand, DeviceArg, TokenizerCommand};
use encoders::ops::SeqBackend;
use runner::bench::throughput::Workload;

/// mimalloc reuses freed memory instead of returning large blocks to the
/// kernel: with glibc's allocator every big tensor costs fresh page faults,
/// which made training about 1.7× slower.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's runtime options (`mimalloc.h`); the symbol is in the
    /// mimalloc library that the allocator above links.
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Keeps freed memory for reuse instead of handing it back to the kernel
/// after mimalloc's default 10 ms: a tensor allocated after a purge comes
/// back as fresh pages that the kernel faults in and zeroes (perf:
/// `clear_page_erms`, a few percent of attention inference; the page faults
/// of one `bench predict` fell from ~12,000 to ~470). The process then holds
/// its peak until it exits, which is what a training or tagging run does
/// anyway. `seqlab bench attention|memory` keep the default, so that their
/// per-cell peaks (measured from the resident set before each cell) stay
/// comparable; `MIMALLOC_PURGE_DELAY` in the environment wins.
fn keep_freed_memory() {
    const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; mimalloc reads options with atomics.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
    }
}

/// Work that runs on whichever backend the user picked.
pub trait Job {
    fn run<B: AutodiffBackend + SeqBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend;
}

/// Runs `job` on the backend named by `device`.
pub fn dispatch<J: Job>(device: DeviceArg, job: J) -> Result<()> {
    let name = device.name();
    match device {
        DeviceArg::Cpu => job.run::<Autodiff<burn::backend::Flex>>(Default::default(), name),
        DeviceArg::Ndarray => job.run::<Autodiff<burn::backend::NdArray>>(Default::default(), name),
        #[cfg(feature = "cuda")]
        DeviceArg::Cuda => {
            cache_compiled_kernels();
            job.run::<Autodiff<burn::backend::Cuda>>(Default::default(), name)
        }
        #[cfg(not(feature = "cuda"))]
        DeviceArg::Cuda => anyhow::bail!("this seqlab was built without CUDA: rebuild with `--features cuda`"),
    }
}

/// Keeps the CUDA kernels that CubeCL compiles in an on-disk cache, so that
/// only the first process pays for them. A fresh process otherwise
/// JIT-compiles every kernel it meets through NVRTC, roughly 0.5–1 s each:
/// on an H200, 89 compilations in a BiLSTM-CRF's first minute, before a
/// single benchmark batch finished (benchmarks/results-gpu.md). CubeCL
/// leaves this cache off unless a `cubecl.toml` turns it on; here it goes
/// where CubeCL keeps its autotune results (`target/` of the nearest Cargo
/// project above the working directory, else the user's cache directory).
/// The rest of CubeCL's configuration is read as CubeCL reads it (a
/// `cubecl.toml` above the working directory, then its `CUBECL_*`
/// environment variables); a cache location named there wins.
#[cfg(feature = "cuda")]
fn cache_compiled_kernels() {
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let config = CubeClRuntimeConfig::from_current_dir().override_from_env();
        CubeClRuntimeConfig::set(with_kernel_cache(config));
    });
}

/// `config` with the compiled-kernel cache on, where it names none.
#[cfg(feature = "cuda")]
fn with_kernel_cache(
    mut config: burn::cubecl::config::CubeClRuntimeConfig,
) -> burn::cubecl::config::CubeClRuntimeConfig {
    if config.compilation.cache.is_none() {
        config.compilation.cache = Some(burn::cubecl::config::cache::CacheConfig::Target);
    }
    config
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::with_kernel_cache;
    use burn::cubecl::config::{cache::CacheConfig, CubeClRuntimeConfig};

    #[test]
    fn kernel_cache_is_on_by_default_and_a_named_location_wins() {
        let on = with_kernel_cache(CubeClRuntimeConfig::default());
        assert!(matches!(on.compilation.cache, Some(CacheConfig::Target)));
        let named: CubeClRuntimeConfig = toml::from_str("[compilation]\ncache = { file = \"/tmp/kernels\" }").unwrap();
        let kept = with_kernel_cache(named);
        assert!(matches!(kept.compilation.cache, Some(CacheConfig::File(p)) if p.ends_with("kernels")));
    }
}

/// Sets the number of threads of the CPU backends (rayon's global pool;
/// default: one per core), with subnormal floats flushed to zero on each.
pub fn set_threads(threads: Option<usize>) -> Result<()> {
    let mut pool = rayon::ThreadPoolBuilder::new().start_handler(|_| flush_subnormals());
    if let Some(n) = threads {
        pool = pool.num_threads(n.max(1));
    }
    pool.build_global().map_err(|e| anyhow::anyhow!("cannot start the thread pool: {e}"))
}

/// Treats subnormal floats as zero on this thread (x86's FTZ and DAZ bits).
/// Adam's moments of embedding rows that get no gradient decay by β at every
/// step into the subnormal range, where each float operation costs ~100×:
/// on CoNLL-2003 the epochs grew from 78 s to 140 s before this.
fn flush_subnormals() {
    #[cfg(target_arch = "x86_64")]
    #[allow(deprecated)]
    // SAFETY: sets two bits of this thread's MXCSR (flush-to-zero,
    // denormals-are-zero); no memory is touched.
    unsafe {
        use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
        _mm_setcsr(_mm_getcsr() | 0x8040);
    }
}

fn main() {
    flush_subnormals();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Bench { command: BenchCommand::Attention(_) | BenchCommand::Memory(_) }) {
        keep_freed_memory();
    }
    let result = set_threads(cli.threads).and_then(|()| match cli.command {
        Command::Train(args) => commands::train(args),
        Command::Eval(args) => commands::eval(args),
        Command::Predict(args) => commands::predict(args),
        Command::Compare(args) => commands::compare(&args),
        Command::Bench { command } => match command {
            BenchCommand::Crf(args) => bench::crf(args),
            BenchCommand::Attention(args) => bench::attention(args),
            BenchCommand::Memory(args) => bench::memory(args),
            BenchCommand::Train(args) => bench::throughput(args, Workload::Train),
            BenchCommand::Predict(args) => bench::throughput(args, Workload::Predict),
        },
        Command::Heads(args) => commands::heads(args),
        Command::HeadsSweep(args) => commands::heads_sweep(&args),
        Command::Visualize(args) => commands::visualize(args),
        Command::Score(args) => commands::score(&args),
        Command::Data { command } => match command {
            DataCommand::Toy(args) => commands::toy(&args),
            DataCommand::Stats(args) => commands::stats(&args),
            DataCommand::SplitQa(args) => commands::split_qa(&args),
        },
        Command::Tokenizer { command } => match command {
            TokenizerCommand::Train(args) => commands::train_tokenizer(&args),
        },
    });
    if let Err(e) = result {
        if let Some(stop) = e.downcast_ref::<runner::checkpoint::Interrupted>() {
            eprintln!("{stop}");
            std::process::exit(130);
        }
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
