//! Command-line interface.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "seqlab",
    version,
    about = "Train, evaluate, compare and explain sequence taggers (BiLSTM-CRF, attention)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Score a file in conlleval format (…, gold tag, predicted tag per line).
    Score(ScoreArgs),
    /// Generate or describe datasets.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
}

#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// The file: whitespace-separated columns, the last two the gold and the
    /// predicted tag, a blank line between sentences.
    pub file: PathBuf,
    /// Print one JSON object instead of conlleval's report.
    #[arg(long)]
    pub json: bool,
    /// Strict, scheme-aware scoring: only chunks well formed under this
    /// scheme count (iob1, bio, bioes, bmes). Default: conlleval's rules.
    #[arg(long)]
    pub scheme: Option<corpus::Scheme>,
    /// Count `-DOCSTART-` lines as tokens, as conlleval.pl does (by default
    /// they are ignored; chunk counts and P/R/F1 are the same either way).
    #[arg(long)]
    pub keep_docstart: bool,
}

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// Write a small generated dataset (train/dev/test + dataset.toml).
    Toy(ToyArgs),
    /// Sentences, tokens, entities per type, longest sentence and OOV rate per split.
    Stats(StatsArgs),
}

#[derive(Args, Debug)]
pub struct ToyArgs {
    /// Output folder.
    #[arg(long)]
    pub out: PathBuf,
    /// Language: en (word level, BIO) or zh (character level, BMES).
    #[arg(long, default_value = "en")]
    pub lang: corpus::toy::Lang,
    /// Training sentences (dev and test get a fifth each).
    #[arg(long, default_value_t = 1500)]
    pub sentences: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Dataset folder (dataset.toml or conventional file names).
    pub dir: PathBuf,
    #[arg(long)]
    pub json: bool,
}
