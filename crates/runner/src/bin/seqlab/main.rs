//! `seqlab`: train, evaluate, compare and explain sequence taggers.
//!
//! The command line over the `runner` library: [`cli`] parses, [`commands`]
//! and [`bench`] call the library and print, on the backend [`backend`]
//! picks (the only place that names concrete backends; everything else is
//! generic over `B: Backend` / `B: AutodiffBackend`).

mod backend;
mod bench;
mod cli;
mod commands;
mod console;

use anyhow::Result;
use clap::Parser;
use cli::{BenchCommand, Cli, Command, DataCommand, PrecisionArg, QaCommand, TokenizerCommand};
use encoders::ops::precision::{self, Precision};
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

/// Sets the precision of inference's linear layers
/// ([`encoders::ops::precision`]). bf16 is refused for the commands that
/// train, whose steps are f32 and whose dev scores choose the model, and
/// for the benchmarks of training memory and attention layers.
fn set_precision(arg: PrecisionArg, command: &Command) -> Result<()> {
    let precision = match arg {
        PrecisionArg::F32 => Precision::F32,
        PrecisionArg::Bf16 => Precision::Bf16,
    };
    // Training, and the benchmarks of training memory and of attention
    // layers (measured in child processes, which run f32).
    let f32_only = matches!(
        command,
        Command::Train(_)
            | Command::Bench { command: BenchCommand::Train(_) | BenchCommand::Memory(_) | BenchCommand::Attention(_) }
    );
    if f32_only && precision == Precision::Bf16 {
        anyhow::bail!(
            "--precision bf16 is for the commands that tag (predict, eval, bench predict, heads, visualize, qa attention); training runs in f32, and so do bench train, memory and attention"
        );
    }
    precision::set(precision).map_err(|e| anyhow::anyhow!("--precision {precision}: {e}"))
}

fn main() {
    flush_subnormals();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Bench { command: BenchCommand::Attention(_) | BenchCommand::Memory(_) }) {
        keep_freed_memory();
    }
    let result = set_threads(cli.threads).and_then(|()| set_precision(cli.precision, &cli.command)).and_then(|()| {
        match cli.command {
            Command::Train(args) => commands::train(args),
            Command::Eval(args) => commands::eval(args),
            Command::Predict(args) => commands::predict(args),
            Command::Compare(args) => commands::compare(&args),
            Command::Sweep(args) => commands::sweep(args),
            Command::Bench { command } => match command {
                BenchCommand::Crf(args) => bench::crf(args),
                BenchCommand::Attention(args) => bench::attention(args),
                BenchCommand::Memory(args) => bench::memory(args),
                BenchCommand::Train(args) => bench::throughput(args, Workload::Train),
                BenchCommand::Predict(args) => bench::throughput(args, Workload::Predict),
            },
            Command::Heads(args) => commands::heads(args),
            Command::Explain(args) => commands::explain(args),
            Command::HeadsSweep(args) => commands::heads_sweep(&args),
            Command::Visualize(args) => commands::visualize(args),
            Command::Score(args) => commands::score(&args),
            Command::Data { command } => match command {
                DataCommand::Toy(args) => commands::toy(&args),
                DataCommand::Stats(args) => commands::stats(&args),
                DataCommand::SplitQa(args) => commands::split_qa(&args),
                DataCommand::Concat(args) => commands::concat(&args),
            },
            Command::Tokenizer { command } => match command {
                TokenizerCommand::Train(args) => commands::train_tokenizer(&args),
            },
            Command::Qa { command } => match command {
                QaCommand::Baseline(args) => commands::qa_baseline(&args),
                QaCommand::Attention(args) => commands::qa_attention(args),
            },
        }
    });
    if let Err(e) = result {
        if let Some(stop) = e.downcast_ref::<runner::train::checkpoint::Interrupted>() {
            eprintln!("{stop}");
            std::process::exit(130);
        }
        if let Some(stop) = e.downcast_ref::<runner::sweep::SweepInterrupted>() {
            eprintln!("{stop}");
            std::process::exit(130);
        }
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
