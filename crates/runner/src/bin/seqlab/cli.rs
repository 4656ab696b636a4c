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
    /// Threads for the CPU backends (default: one per core).
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    /// Precision of the linear layers' products at inference on the cpu
    /// device: f32, or bf16 inputs with f32 sums (CPUs with AVX-512 BF16).
    /// Training steps are always f32.
    #[arg(long, global = true, value_enum, default_value_t = PrecisionArg::F32)]
    pub precision: PrecisionArg,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Train a tagger from a TOML config; writes experiments/runs/<name>/.
    Train(TrainArgs),
    /// Evaluate a trained run on a split of its dataset (or another one).
    Eval(EvalArgs),
    /// Tag text or a CoNLL file with a trained run (a QA run answers a SQuAD-format file).
    Predict(PredictArgs),
    /// Compare runs: experiments/comparison.md, .csv and a dev-F1 plot.
    Compare(CompareArgs),
    /// Train a grid of runs (GRID.toml: configs × datasets × seeds × axes of
    /// --set values) into one sweep folder, on this machine or as a Slurm
    /// job array: finished runs are skipped, interrupted ones resumed; then a
    /// table of the runs and seqlab compare of them (report.html).
    Sweep(SweepArgs),
    /// Micro-benchmarks.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Attention pictures for one sentence: per-head heatmaps, a clustered
    /// heatmap, a focus token's attention, and index.html.
    Visualize(VisualizeArgs),
    /// The head-count sweep's report (experiments/heads-sweep.md) from its runs.
    HeadsSweep(HeadsSweepArgs),
    /// Attention head diagnostics over a split: entropy, boundary share,
    /// distance, redundancy; collapsed heads flagged; writes heads.csv.
    Heads(HeadsArgs),
    /// Is attention an explanation? Ranks the tokens around each prediction
    /// (entity or answer) by attention, attention rollout, gradient × input
    /// and at random, erases the top k = 1…K and measures the drop in the
    /// prediction's probability: AOPC per method, curves.csv and .svg.
    Explain(ExplainArgs),
    /// Score a file in conlleval format (…, gold tag, predicted tag per line).
    Score(ScoreArgs),
    /// Generate or describe datasets.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Subword tokenizers for question-answering data.
    Tokenizer {
        #[command(subcommand)]
        command: TokenizerCommand,
    },
    /// Question answering: baselines, and where a trained reader looks.
    Qa {
        #[command(subcommand)]
        command: QaCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum QaCommand {
    /// No-learning baselines on a split of a SQuAD-format folder (the SQuAD
    /// paper's sliding window, the best-overlap sentence, the nearest
    /// content words, a random span), scored with the dataset's metric
    /// (official SQuAD v1.1, or CMRC 2018 for Chinese): a markdown table.
    Baseline(QaBaselineArgs),
    /// A question [SEP] context run's attention from context tokens to the
    /// question, per layer, against the share uniform attention would give
    /// (does concatenation dilute the question?).
    Attention(QaAttentionArgs),
}

#[derive(Args, Debug)]
pub struct QaAttentionArgs {
    /// A QA run folder (model.question = "concat", attention encoder).
    #[arg(long)]
    pub run: PathBuf,
    /// Dataset folder (default: the run's).
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[arg(long, default_value = "dev")]
    pub split: corpus::SplitName,
    /// Questions to average over (the first ones whose context fits data.max_len).
    #[arg(long, default_value_t = 400)]
    pub questions: usize,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
}

#[derive(Args, Debug)]
pub struct QaBaselineArgs {
    /// A folder of SQuAD-format files (*train*.json, *dev*.json, *test*.json).
    #[arg(long)]
    pub data: PathBuf,
    /// The split to answer (IDF weights come from the training file when
    /// there is one, else from this split's contexts).
    #[arg(long, default_value = "test")]
    pub split: corpus::SplitName,
    /// Also write the scores as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the random-span baseline.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Subcommand, Debug)]
pub enum TokenizerCommand {
    /// Train a WordPiece tokenizer (BERT normaliser and pre-tokenizer:
    /// lowercase, accents stripped, each CJK character a word) on the
    /// contexts and questions of a SQuAD-format training file.
    Train(TokenizerTrainArgs),
}

#[derive(Args, Debug)]
pub struct TokenizerTrainArgs {
    /// A SQuAD-format JSON file, or a QA dataset folder (its *train*.json).
    #[arg(long)]
    pub data: PathBuf,
    /// Largest vocabulary (special tokens and the alphabet included).
    #[arg(long, default_value_t = 16000)]
    pub vocab_size: usize,
    /// Where to write the tokenizer (e.g. DATA/tokenizer.json).
    #[arg(long)]
    pub out: PathBuf,
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
    /// Split a SQuAD-format file by article (no article in two parts) into
    /// OUT/train.json, OUT/dev.json and OUT/test.json, and print their counts.
    SplitQa(SplitQaArgs),
    /// Join a column file's consecutive sentences (in file order, within a
    /// document) into passages of at most --max-len tokens, rows unchanged:
    /// a long test set for length extrapolation.
    Concat(ConcatArgs),
}

#[derive(Args, Debug)]
pub struct ConcatArgs {
    /// A column file (CoNLL, BMES): a dataset split.
    pub file: PathBuf,
    /// Tokens per passage at most (a longer sentence stays whole, alone).
    #[arg(long, default_value_t = 512)]
    pub max_len: usize,
    /// Output file.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct SplitQaArgs {
    /// A SQuAD v1.1-format JSON file (e.g. ../shared/datasets/squad11/dev-v1.1.json).
    pub file: PathBuf,
    /// Articles held out for test.json (chosen by a hash of their titles,
    /// so the split is the same on every machine and for any file order).
    #[arg(long, default_value_t = 10)]
    pub held_out: usize,
    /// Articles of the rest for dev.json (chosen the same way); 0 writes
    /// only train.json and test.json.
    #[arg(long, default_value_t = 4)]
    pub dev: usize,
    /// Output folder.
    #[arg(long)]
    pub out: PathBuf,
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

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrecisionArg {
    F32,
    Bf16,
}

/// Compute device: `cpu` is burn-flex, `ndarray` burn-ndarray, `cuda`
/// burn-cuda (built with `--features cuda`), `wgpu` burn-wgpu: Vulkan,
/// Metal or DX12, whichever the machine has (the default `wgpu` feature).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceArg {
    Cpu,
    Ndarray,
    Cuda,
    Wgpu,
}

impl DeviceArg {
    pub fn name(self) -> &'static str {
        match self {
            DeviceArg::Cpu => "cpu (burn-flex)",
            DeviceArg::Ndarray => "ndarray (burn-ndarray)",
            DeviceArg::Cuda => "cuda (burn-cuda)",
            DeviceArg::Wgpu => "wgpu (burn-wgpu)",
        }
    }

    /// The value `--device` takes for this device.
    pub fn cli_name(self) -> &'static str {
        match self {
            DeviceArg::Cpu => "cpu",
            DeviceArg::Ndarray => "ndarray",
            DeviceArg::Cuda => "cuda",
            DeviceArg::Wgpu => "wgpu",
        }
    }
}

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Run configuration (TOML); without it, every default.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Dataset folder (overrides data.dir).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Run folder (default: experiments/runs/<name>-<dataset>-s<seed>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
    /// Seed (overrides `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Epochs (overrides train.epochs).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Override any config key: `--set train.lr=0.01 --set model.encoder.kind=attention`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// No progress bar or per-epoch lines.
    #[arg(long)]
    pub quiet: bool,
    /// Also, per epoch, the distinct batch shapes and the share of padding,
    /// and on a GPU the kernels compiled so far; and when the first batch
    /// finished.
    #[arg(long, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Continue the run in this folder from its newest intact checkpoint
    /// (written after every epoch), with its own config and seed.
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// Memory budget (e.g. 8GiB; sets train.max_memory): picks the largest
    /// batch that fits, or switches dense attention to chunked.
    #[arg(long)]
    pub max_memory: Option<String>,
}

#[derive(Args, Debug)]
pub struct VisualizeArgs {
    /// A run folder of an attention tagger.
    #[arg(long)]
    pub run: PathBuf,
    /// The sentence (0-based) of --split to show.
    #[arg(long, conflicts_with = "text")]
    pub sentence: Option<usize>,
    #[arg(long, default_value = "test")]
    pub split: corpus::SplitName,
    /// Text to tag and show instead, cut into tokens as the run's training
    /// text was (see --tokenize).
    #[arg(long)]
    pub text: Option<String>,
    /// How --text is cut into tokens: `words` (separated by whitespace) or
    /// `chars` (one per character). Default: as the run's training data
    /// was (recorded in its vocab.json).
    #[arg(long, requires = "text")]
    pub tokenize: Option<corpus::Tokenization>,
    /// Dataset folder for --sentence (default: the run's).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Layer, 0-based (default: the last).
    #[arg(long)]
    pub layer: Option<usize>,
    /// Heads to draw: `all` or a list such as 0,2.
    #[arg(long, default_value = "all")]
    pub heads: String,
    /// Focus token: an index or the token itself (default: the most attended).
    #[arg(long)]
    pub focus: Option<String>,
    /// At most this many tokens on an axis (a window around the focus).
    #[arg(long, default_value_t = 50)]
    pub max_tokens: usize,
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
}

#[derive(Args, Debug)]
pub struct HeadsSweepArgs {
    /// The sweep's run folders, or its sweep folder (`seqlab sweep`'s `out`).
    pub runs: Vec<PathBuf>,
    #[arg(long, default_value = "experiments/heads-sweep.md")]
    pub out: PathBuf,
    /// Folder with one `seqlab visualize` output per head count (`h<N>/`).
    #[arg(long)]
    pub pictures: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct HeadsArgs {
    /// A run folder of an attention tagger.
    #[arg(long)]
    pub run: PathBuf,
    /// Dataset folder (default: the run's).
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[arg(long, default_value = "dev")]
    pub split: corpus::SplitName,
    /// One JSON object per head instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where heads.csv goes (default: the run folder).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// A run folder written by `seqlab train`.
    #[arg(long)]
    pub run: PathBuf,
    /// Dataset folder (default: the run's).
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[arg(long, default_value = "test")]
    pub split: corpus::SplitName,
    /// Explain this many predictions (sentences taken in a seeded random order).
    #[arg(long, default_value_t = 500)]
    pub items: usize,
    /// Erase up to this many tokens (K).
    #[arg(long, default_value_t = 10)]
    pub max_k: usize,
    /// Orders the sentences and seeds the random ranking.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output folder (default: RUN/explain-SPLIT).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A run folder written by `seqlab train`.
    #[arg(long)]
    pub run: PathBuf,
    /// Dataset folder (default: the run's).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Split to evaluate.
    #[arg(long, default_value = "test")]
    pub split: corpus::SplitName,
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
    /// Tag sentences longer than this in overlapping windows (overrides the run's data.max_len; 0: never).
    #[arg(long)]
    pub max_len: Option<usize>,
    /// Step between windows (overrides data.stride; default max_len/2).
    #[arg(long)]
    pub stride: Option<usize>,
    /// QA runs: read each context against another context's question (the
    /// question-shuffle ablation; the gold answers stay with their context).
    #[arg(long)]
    pub shuffle_questions: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// `token [gold] predicted` per line, blank line between sentences.
    Conll,
    /// One JSON object per sentence: tokens, tags, spans, confidence.
    Jsonl,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// CoNLL if every line has the same number of columns and the last is a tag, else text.
    Auto,
    /// One sentence per line, tokens separated by whitespace.
    Text,
    /// A column file (token first, tag last, as the run's data).
    Conll,
}

#[derive(Args, Debug)]
pub struct PredictArgs {
    #[arg(long)]
    pub run: PathBuf,
    /// Input file, or `-` for standard input. For a question-answering run:
    /// a SQuAD-format JSON file (gold answers optional), answered as the
    /// official predictions JSON `{"id": "answer"}` (scored on stderr when
    /// every question has gold answers).
    #[arg(long, default_value = "-")]
    pub input: PathBuf,
    #[arg(long, value_enum, default_value = "auto")]
    pub input_format: InputFormat,
    /// How lines of plain text are cut into tokens: `words` (separated by
    /// whitespace) or `chars` (one per character, for text such as Chinese
    /// written without spaces). Default: as the run's training data was
    /// (recorded in its vocab.json).
    #[arg(long)]
    pub tokenize: Option<corpus::Tokenization>,
    /// The K best tag sequences of each sentence with their probabilities
    /// (k-best Viterbi on a CRF), one CoNLL block or a JSONL `top_k` list
    /// per sentence; for a QA run the K likeliest answers of each question
    /// (the n-best JSON `{"id": [{"text", "start", "end", "probability"}]}`).
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    #[arg(long, value_enum, default_value = "conll")]
    pub format: OutputFormat,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
    /// Tag sentences longer than this in overlapping windows (overrides the run's data.max_len; 0: never).
    #[arg(long)]
    pub max_len: Option<usize>,
    /// Step between windows (overrides data.stride; default max_len/2).
    #[arg(long)]
    pub stride: Option<usize>,
    /// QA runs: answer this one question (about --context or --context-file),
    /// printing the answer, its character span and its probability.
    #[arg(long, requires = "context_text")]
    pub question: Option<String>,
    /// The context of --question.
    #[arg(long, group = "context_text")]
    pub context: Option<String>,
    /// A file holding the context of --question.
    #[arg(long, group = "context_text")]
    pub context_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The grid file (format: docs/sweeps.md; examples in experiments/grids/).
    pub grid: PathBuf,
    /// Where the runs go: this machine, or a Slurm job array.
    #[arg(long, value_enum, default_value = "local")]
    pub on: OnArg,
    /// List the runs, their state and command (and the batch script) without starting any.
    #[arg(long)]
    pub dry_run: bool,
    /// The sweep folder (replaces the grid's `out`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Runs side by side on this machine (replaces the grid's `lanes`).
    #[arg(long)]
    pub lanes: Option<usize>,
    /// Threads of each run, and Slurm CPUs per task (replaces the grid's `threads`).
    #[arg(long)]
    pub threads_per_run: Option<usize>,
    /// Train only this run of the grid, in the foreground (what each Slurm task does).
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// Slurm partition (sbatch --partition).
    #[arg(long)]
    pub partition: Option<String>,
    /// Slurm time limit of each run (sbatch --time, e.g. 2:00:00).
    #[arg(long)]
    pub time: Option<String>,
    /// Slurm generic resources of each run (default gpu:1 for --device cuda or wgpu in the grid).
    #[arg(long)]
    pub gres: Option<String>,
    /// At most this many runs at once on Slurm (--array=…%N).
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// Another sbatch option, as written on its command line (repeatable): --sbatch-arg=--mem=8G.
    #[arg(long = "sbatch-arg", value_name = "OPTION", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
    /// Seconds between two looks at the Slurm queue.
    #[arg(long, default_value_t = 5.0)]
    pub poll: f64,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnArg {
    Local,
    Slurm,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Run folders, or folders of runs such as a sweep's (default: every run under experiments/runs).
    pub runs: Vec<PathBuf>,
    /// Where comparison.md, comparison.csv and dev-f1.svg go.
    #[arg(long, default_value = "experiments")]
    pub out: PathBuf,
    /// Bootstrap samples for the paired significance test.
    #[arg(long, default_value_t = 1000)]
    pub samples: usize,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// CRF throughput: NLL forward+backward and Viterbi, sentences/s.
    Crf(BenchCrfArgs),
    /// One self-attention layer per implementation and length: wall time and
    /// peak memory, each measurement in a fresh process.
    Attention(BenchAttentionArgs),
    /// Training-step memory of a configured tagger: the planner's estimate
    /// against the measured peak, each in a fresh process.
    Memory(BenchMemoryArgs),
    /// Training throughput of a configured tagger: forward, backward and
    /// optimizer step on length-bucketed batches, tokens/s.
    Train(BenchRunArgs),
    /// Inference throughput (no autodiff, CRF decoding included), tokens/s.
    Predict(BenchRunArgs),
}

#[derive(Args, Debug, Clone)]
pub struct BenchRunArgs {
    /// The tagger's config (TOML), e.g. benchmarks/configs/ref-bilstm-crf.toml.
    #[arg(long)]
    pub config: PathBuf,
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A dataset folder: batches of its training split (else generated
    /// sentences with CoNLL-2003-like lengths: mean 14, max 124 tokens).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Sentences per batch (batches are length-bucketed).
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Timed batches.
    #[arg(long, default_value_t = 50)]
    pub steps: usize,
    /// Untimed batches first.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Seed of the model, the generated sentences and the batch order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Write the batches (ids, tags, lengths) as JSON for the PyTorch
    /// reference (benchmarks/pytorch) and exit without measuring.
    #[arg(long)]
    pub dump: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
}

#[derive(Args, Debug, Clone)]
pub struct BenchAttentionArgs {
    /// Implementations: dense (composed from tensor operations), chunked,
    /// local, and fused (dense as one operation: `SeqBackend::dense_attention`).
    #[arg(long = "impl", value_delimiter = ',', default_value = "dense,chunked,local")]
    pub imps: Vec<String>,
    #[arg(long, value_delimiter = ',', default_value = "512,1024,2048,4096,8192")]
    pub seq_len: Vec<usize>,
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    #[arg(long, default_value_t = 8)]
    pub heads: usize,
    #[arg(long, default_value_t = 512)]
    pub d_model: usize,
    /// Keys per block (chunked).
    #[arg(long, default_value_t = 64)]
    pub block: usize,
    /// Half-width of the window (local).
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// Forward and backward (else forward only).
    #[arg(long)]
    pub train: bool,
    /// Timed repetitions (the median is reported) after the measured first run.
    #[arg(long, default_value_t = 3)]
    pub iters: usize,
    #[arg(long)]
    pub json: bool,
    /// Write a log-log plot of peak memory against length (SVG).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
    /// Measure one implementation at one length in this process (used by the parent run).
    #[arg(long, hide = true)]
    pub child: bool,
}

#[derive(Args, Debug, Clone)]
pub struct BenchMemoryArgs {
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    #[arg(long, value_delimiter = ',', default_value = "16,32")]
    pub batch: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_value = "64,128,256")]
    pub seq_len: Vec<usize>,
    /// Word vocabulary of the synthetic model.
    #[arg(long, default_value_t = 20000)]
    pub words: usize,
    /// Characters per word in the synthetic batch.
    #[arg(long, default_value_t = 10)]
    pub word_len: usize,
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
    #[arg(long, hide = true)]
    pub child: bool,
}

#[derive(Args, Debug)]
pub struct BenchCrfArgs {
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    #[arg(long, default_value_t = 50)]
    pub len: usize,
    /// Tags (17 = CoNLL-2003's 4 types in BIOES).
    #[arg(long, default_value_t = 17)]
    pub tags: usize,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    #[arg(long, value_enum, default_value = "ndarray")]
    pub device: DeviceArg,
    #[arg(long)]
    pub json: bool,
}
