//! `seqlab`: train, evaluate, compare and explain sequence taggers.
//!
//! This file is the only place that names concrete backends; everything
//! else is generic over `B: Backend` / `B: AutodiffBackend`.

mod bench;
mod cli;
mod commands;
mod compare;
mod config;
mod data_cmd;
mod evaluate;
mod prep;
mod rundir;
mod score_cmd;
mod train;

use anyhow::Result;
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use clap::Parser;
use cli::{BenchCommand, Cli, Command, DataCommand, DeviceArg};

/// mimalloc reuses freed memory instead of returning large blocks to the
/// kernel: with glibc's allocator every big tensor costs fresh page faults,
/// which made training about 1.7× slower.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Work that runs on whichever backend the user picked.
pub trait Job {
    fn run<B: AutodiffBackend>(self, device: B::Device, device_name: &str) -> Result<()>;
}

/// Runs `job` on the backend named by `device`.
pub fn dispatch<J: Job>(device: DeviceArg, job: J) -> Result<()> {
    let name = device.name();
    match device {
        DeviceArg::Cpu => job.run::<Autodiff<burn::backend::Flex>>(Default::default(), name),
        DeviceArg::Ndarray => job.run::<Autodiff<burn::backend::NdArray>>(Default::default(), name),
        #[cfg(feature = "cuda")]
        DeviceArg::Cuda => job.run::<Autodiff<burn::backend::Cuda>>(Default::default(), name),
        #[cfg(not(feature = "cuda"))]
        DeviceArg::Cuda => anyhow::bail!("this seqlab was built without CUDA: rebuild with `--features cuda`"),
    }
}

/// Sets the number of threads of the CPU backends (rayon's global pool).
pub fn set_threads(threads: Option<usize>) -> Result<()> {
    if let Some(n) = threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global()
            .map_err(|e| anyhow::anyhow!("cannot set {n} threads: {e}"))?;
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(args) => commands::train(args),
        Command::Eval(args) => commands::eval(args),
        Command::Predict(args) => commands::predict(args),
        Command::Compare(args) => compare::run(&args),
        Command::Bench { command } => match command {
            BenchCommand::Crf(args) => bench::crf(args),
        },
        Command::Score(args) => score_cmd::run(&args),
        Command::Data { command } => match command {
            DataCommand::Toy(args) => data_cmd::toy(&args),
            DataCommand::Stats(args) => data_cmd::stats(&args),
        },
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
