//! `seqlab`: train, evaluate, compare and explain sequence taggers.

mod cli;
mod data_cmd;
mod score_cmd;

use clap::Parser;
use cli::{Cli, Command, DataCommand};

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
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
