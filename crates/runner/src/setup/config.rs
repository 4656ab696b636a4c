//! The run configuration: a TOML file, every field with a default, unknown
//! keys rejected; overridden by `--set key.path=value` and a few flags.

use anyhow::{bail, Context, Result};
use corpus::dataset::toml_error;
use corpus::Scheme;
use encoders::TaggerConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Run name: the folder under `experiments/runs/` (default: the config
    /// file's name, plus the dataset's).
    pub name: String,
    /// Seed for parameters, batching and dropout.
    pub seed: u64,
    pub data: DataConfig,
    pub model: TaggerConfig,
    pub train: TrainConfig,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            name: String::new(),
            seed: 1,
            data: DataConfig::default(),
            model: TaggerConfig::default(),
            train: TrainConfig::default(),
        }
    }
}

/// How the data is read and turned into ids.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataConfig {
    /// Dataset folder (`--data` overrides it).
    pub dir: PathBuf,
    /// The scheme the tagger is trained in: "bioes", "bio", "iob1", "bmes",
    /// or "data" for the data's own. Predictions are written back in the
    /// data's scheme and scored with conlleval's rules.
    pub tag_scheme: String,
    /// Lowercase words before the word-embedding lookup.
    pub lowercase: bool,
    /// Replace digits by 0 before the word-embedding lookup.
    pub zero_digits: bool,
    /// Words seen fewer times in training map to `<unk>`.
    pub min_word_freq: usize,
    /// Characters of a word that feed the character CNN (tokens are never cut).
    pub max_word_chars: usize,
    /// Pretrained word vectors (GloVe or word2vec text), or empty.
    pub pretrained: PathBuf,
    /// Sentences longer than this are tagged (and trained on) in overlapping
    /// windows of this many tokens, stitched so that each token takes the
    /// prediction of the window where it is most central; 0 = never.
    pub max_len: usize,
    /// Tokens between window starts; 0 means `max_len / 2`.
    pub stride: usize,
    /// Question-answering data (SQuAD-format `train.json`/`dev.json`): the
    /// subword tokenizer (`tokenizer.json`); empty = `tokenizer.json` in the
    /// data folder (`seqlab tokenizer train` makes one).
    pub tokenizer: PathBuf,
    /// Character bigrams as a second input (with `model.features.bigram_dim`
    /// > 0): "auto" reads them when the data is character-level (Chinese
    /// NER), "on" always, "off" never.
    pub bigrams: Bigrams,
    /// Bigrams seen fewer times in training map to `<unk>`.
    pub min_bigram_freq: usize,
    /// Train on this many sentences of the training split, drawn at random
    /// (the draw fixed by the run's seed, kept in file order); dev and test
    /// unchanged, vocabularies built from the subset. 0 = all.
    pub train_sentences: usize,
}

/// When a run reads character bigrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bigrams {
    Auto,
    On,
    Off,
}

impl Bigrams {
    /// Whether data cut into tokens this way reads bigrams.
    pub fn read(self, tokenization: corpus::Tokenization) -> bool {
        match self {
            Bigrams::Auto => tokenization == corpus::Tokenization::Chars,
            Bigrams::On => true,
            Bigrams::Off => false,
        }
    }
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            dir: PathBuf::from("datasets/toy-en"),
            tag_scheme: "bioes".into(),
            lowercase: false,
            zero_digits: true,
            min_word_freq: 1,
            max_word_chars: 30,
            pretrained: PathBuf::new(),
            max_len: 0,
            stride: 0,
            tokenizer: PathBuf::new(),
            bigrams: Bigrams::Auto,
            min_bigram_freq: 1,
            train_sentences: 0,
        }
    }
}

impl DataConfig {
    /// The window plan for long sentences.
    pub fn windows(&self) -> crate::infer::Windows {
        crate::infer::Windows {
            max_len: self.max_len,
            stride: if self.stride == 0 { (self.max_len / 2).max(1) } else { self.stride },
        }
    }

    /// The tagger's scheme for data in `data_scheme`.
    pub fn tagger_scheme(&self, data_scheme: Scheme) -> Result<Scheme> {
        if self.tag_scheme == "data" {
            return Ok(data_scheme);
        }
        self.tag_scheme.parse::<Scheme>().map_err(|e| anyhow::anyhow!("data.tag_scheme: {e} (or \"data\")"))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    Adam,
    Adamw,
    Sgd,
}

/// What a non-finite loss or gradient does to a training run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnNan {
    Stop,
    Skip,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// `lr` throughout.
    Constant,
    /// `lr / (1 + lr_decay · epoch)` (NCRF++'s schedule).
    InverseDecay,
    /// Linear warm-up over `warmup_steps`, then linear decay to 0 at the last step.
    WarmupLinear,
    /// Linear warm-up, then cosine decay to 0.
    WarmupCosine,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Maximum epochs.
    pub epochs: usize,
    /// Sentences per batch (ignored when `batch_tokens` > 0).
    pub batch_size: usize,
    /// Padded tokens per batch; 0 batches by sentences.
    pub batch_tokens: usize,
    pub optimizer: OptimizerKind,
    pub lr: f64,
    pub schedule: Schedule,
    /// For `inverse_decay`.
    pub lr_decay: f64,
    /// Warm-up steps for the warm-up schedules.
    pub warmup_steps: usize,
    /// Warm-up as a share of all steps, used when `warmup_steps` is 0.
    pub warmup_fraction: f64,
    /// L2 (adam, sgd) or decoupled (adamw) weight decay.
    pub weight_decay: f64,
    /// SGD momentum.
    pub momentum: f64,
    /// Clip the gradient norm to this; 0 turns clipping off.
    pub grad_clip: f64,
    /// Stop after this many epochs without a better dev F1; 0 never stops early.
    pub patience: usize,
    /// Replace training words by `<unk>` with this probability (teaches the
    /// `<unk>` embedding, which test words unseen in training use): one
    /// rate, or one for each kind of data, `{ words = 0.15, chars = 0.05 }`.
    pub word_dropout: WordDropout,
    /// Replace each character of a training word by the character `<unk>`
    /// with this probability (the character encoder's word dropout; teaches
    /// the `<unk>` character, which test characters unseen in training use).
    pub char_dropout: f64,
    /// Weight averaging: dev F1 is measured on, and the run saves, an
    /// exponential moving average of the weights with this decay per step
    /// (0.999: about the last 1,000 steps); 0 turns it off. Free at
    /// inference ([`crate::train::average`]).
    pub average_decay: f64,
    /// Stochastic weight averaging instead (Izmailov et al. 2018): from the
    /// end of this epoch on, dev F1 is measured on, and the run saves, the
    /// plain mean of the weights at the end of each epoch since; 0 turns it
    /// off. One of `average_decay` and `swa_start` at most.
    pub swa_start: usize,
    /// Evaluate on dev every this many epochs.
    pub eval_every: usize,
    /// Stop after the epoch during which this many minutes (training and
    /// evaluation) have passed; 0 means no limit.
    pub max_minutes: f64,
    /// Memory budget such as "8GiB": before training, the largest batch
    /// (up to `batch_size`) whose step fits is chosen, or dense attention
    /// switches to chunked; empty means no budget.
    pub max_memory: String,
    /// Also write a checkpoint every this many optimizer steps inside an
    /// epoch (one is always written at the end of each epoch); 0: epochs only.
    pub checkpoint_every: usize,
    /// What a NaN or infinite loss or gradient does: `stop` the run (the
    /// last checkpoint stays as it was) or `skip` the batch and go on.
    pub on_nan: OnNan,
    /// Curriculum: for the first `answer_window_epochs` epochs, train on a
    /// window of this many tokens around each sentence's tagged span (the
    /// answer, for QA) instead of the whole sentence; 0 turns it off.
    pub answer_window: usize,
    /// Epochs of the curriculum (see `answer_window`).
    pub answer_window_epochs: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 30,
            batch_size: 32,
            batch_tokens: 0,
            optimizer: OptimizerKind::Adam,
            lr: 1e-3,
            schedule: Schedule::Constant,
            lr_decay: 0.0,
            warmup_steps: 0,
            warmup_fraction: 0.0,
            weight_decay: 0.0,
            momentum: 0.9,
            grad_clip: 5.0,
            patience: 5,
            word_dropout: WordDropout::Rate(0.0),
            char_dropout: 0.0,
            average_decay: 0.0,
            swa_start: 0,
            eval_every: 1,
            max_minutes: 0.0,
            max_memory: String::new(),
            checkpoint_every: 0,
            on_nan: OnNan::Stop,
            answer_window: 0,
            answer_window_epochs: 0,
        }
    }
}

/// Word dropout's rate: the same for every run, or one for data of
/// whitespace-separated words and one for character-level data. Unseen
/// words are common in a word-level test set (CoNLL-2003) and unseen
/// characters rare in a character-level one (Resume NER), so the `<unk>`
/// row that word dropout trains matters more for words.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WordDropout {
    /// `word_dropout = 0.05`.
    Rate(f64),
    /// `word_dropout = { words = 0.15, chars = 0.05 }`.
    ByTokens { words: f64, chars: f64 },
}

impl WordDropout {
    /// The rate for data cut into tokens this way.
    pub fn rate(self, tokenization: corpus::Tokenization) -> f64 {
        match (self, tokenization) {
            (WordDropout::Rate(r), _) => r,
            (WordDropout::ByTokens { words, .. }, corpus::Tokenization::Words) => words,
            (WordDropout::ByTokens { chars, .. }, corpus::Tokenization::Chars) => chars,
        }
    }

    /// Every rate it can give.
    fn rates(self) -> Vec<f64> {
        match self {
            WordDropout::Rate(r) => vec![r],
            WordDropout::ByTokens { words, chars } => vec![words, chars],
        }
    }
}

impl std::fmt::Display for WordDropout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WordDropout::Rate(r) => write!(f, "{r}"),
            WordDropout::ByTokens { words, chars } => write!(f, "{{ words = {words}, chars = {chars} }}"),
        }
    }
}

impl Serialize for WordDropout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        match *self {
            WordDropout::Rate(r) => s.serialize_f64(r),
            WordDropout::ByTokens { words, chars } => {
                let mut t = s.serialize_struct("WordDropout", 2)?;
                t.serialize_field("words", &words)?;
                t.serialize_field("chars", &chars)?;
                t.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for WordDropout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = toml::Value::deserialize(d)?;
        let number = |v: &toml::Value| match *v {
            toml::Value::Float(x) => Some(x),
            toml::Value::Integer(i) => Some(i as f64),
            _ => None,
        };
        if let Some(r) = number(&value) {
            return Ok(WordDropout::Rate(r));
        }
        if let toml::Value::Table(t) = &value {
            let rate = |k: &str| t.get(k).and_then(number);
            if let (2, Some(words), Some(chars)) = (t.len(), rate("words"), rate("chars")) {
                return Ok(WordDropout::ByTokens { words, chars });
            }
        }
        Err(serde::de::Error::custom(format!(
            "word_dropout: expected a rate such as 0.05, or {{ words = 0.15, chars = 0.05 }}, found {value}"
        )))
    }
}

impl TrainConfig {
    pub fn batch(&self) -> corpus::batch::BatchSize {
        if self.batch_tokens > 0 {
            corpus::batch::BatchSize::Tokens(self.batch_tokens)
        } else {
            corpus::batch::BatchSize::Sentences(self.batch_size.max(1))
        }
    }

    /// Learning rate at `step` (0-based) of `total` steps, in `epoch`.
    pub fn lr_at(&self, step: usize, total: usize, epoch: usize) -> f64 {
        let warmup = if self.warmup_steps > 0 {
            self.warmup_steps
        } else {
            (self.warmup_fraction * total as f64).round() as usize
        };
        let warm = |s: usize| (s + 1) as f64 / warmup.max(1) as f64;
        let progress = |s: usize| {
            let rest = total.saturating_sub(warmup).max(1);
            (s.saturating_sub(warmup) as f64 / rest as f64).min(1.0)
        };
        match self.schedule {
            Schedule::Constant => self.lr,
            Schedule::InverseDecay => self.lr / (1.0 + self.lr_decay * epoch as f64),
            Schedule::WarmupLinear => {
                if step < warmup {
                    self.lr * warm(step)
                } else {
                    self.lr * (1.0 - progress(step)).max(0.0)
                }
            }
            Schedule::WarmupCosine => {
                if step < warmup {
                    self.lr * warm(step)
                } else {
                    self.lr * 0.5 * (1.0 + (std::f64::consts::PI * progress(step)).cos())
                }
            }
        }
    }
}

/// Reads a config file and applies `key.path=value` overrides. The value is
/// read as TOML (`3`, `0.5`, `true`, `"x"`), else as a plain string.
pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<RunConfig> {
    let (mut value, text, name) = match path {
        Some(p) => {
            let text = corpus::io::read_text(p)?;
            let v: toml::Value = toml::from_str(&text).map_err(|e| toml_error(p, &text, &e))?;
            (v, Some(text), p.file_stem().map(|s| s.to_string_lossy().to_string()))
        }
        None => (toml::Value::Table(Default::default()), None, None),
    };
    for o in overrides {
        let (key, raw) = o.split_once('=').with_context(|| format!("--set {o}: expected key.path=value"))?;
        set_path(&mut value, key.trim(), parse_value(raw.trim()))?;
    }
    let mut cfg: RunConfig = match (path, &text) {
        // Re-serialise so that errors point at the file's own lines when no override moved them.
        (Some(p), Some(t)) if overrides.is_empty() => toml::from_str(t).map_err(|e| toml_error(p, t, &e))?,
        _ => value.try_into().map_err(|e: toml::de::Error| {
            anyhow::anyhow!("{}{}", path.map(|p| format!("{}: ", p.display())).unwrap_or_default(), e.message())
        })?,
    };
    if cfg.name.is_empty() {
        cfg.name = name.unwrap_or_else(|| "run".into());
    }
    validate(&cfg)?;
    Ok(cfg)
}

fn parse_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

fn set_path(root: &mut toml::Value, key: &str, value: toml::Value) -> Result<()> {
    let parts: Vec<&str> = key.split('.').collect();
    let mut cur = root;
    for (i, part) in parts.iter().enumerate() {
        let table =
            cur.as_table_mut().with_context(|| format!("--set {key}: `{}` is not a table", parts[..i].join(".")))?;
        if i + 1 == parts.len() {
            table.insert(part.to_string(), value);
            return Ok(());
        }
        cur = table.entry(part.to_string()).or_insert_with(|| toml::Value::Table(Default::default()));
    }
    bail!("--set: empty key")
}

fn validate(cfg: &RunConfig) -> Result<()> {
    cfg.model.validate().map_err(|e| anyhow::anyhow!("model.{e}"))?;
    if cfg.data.max_word_chars == 0 {
        bail!("data.max_word_chars must be at least 1");
    }
    let t = &cfg.train;
    for (name, v) in
        [("train.grad_clip", t.grad_clip), ("train.weight_decay", t.weight_decay), ("train.lr_decay", t.lr_decay)]
    {
        if !(v >= 0.0 && v.is_finite()) {
            bail!("{name} must be a number ≥ 0, found {v}");
        }
    }
    if !(0.0..1.0).contains(&t.momentum) {
        bail!("train.momentum must be in [0, 1), found {}", t.momentum);
    }
    if !(0.0..=1.0).contains(&t.warmup_fraction) {
        bail!("train.warmup_fraction must be in [0, 1], found {}", t.warmup_fraction);
    }
    if !(t.max_minutes >= 0.0 && t.max_minutes.is_finite()) {
        bail!("train.max_minutes must be a number ≥ 0, found {}", t.max_minutes);
    }
    if cfg.train.lr <= 0.0 || !cfg.train.lr.is_finite() {
        bail!("train.lr must be a positive number, found {}", cfg.train.lr);
    }
    if !(0.0..1.0).contains(&cfg.train.average_decay) {
        bail!("train.average_decay must be in [0, 1), found {}", cfg.train.average_decay);
    }
    if cfg.train.swa_start > 0 && cfg.train.average_decay > 0.0 {
        bail!(
            "train.swa_start = {} and train.average_decay = {} both average the weights; set one of them to 0",
            cfg.train.swa_start,
            cfg.train.average_decay
        );
    }
    if cfg.train.word_dropout.rates().iter().any(|r| !(0.0..1.0).contains(r)) {
        bail!("train.word_dropout: each rate must be in [0, 1), found {}", cfg.train.word_dropout);
    }
    if !(0.0..1.0).contains(&cfg.train.char_dropout) {
        bail!("train.char_dropout must be in [0, 1), found {}", cfg.train.char_dropout);
    }
    if cfg.train.epochs == 0 {
        bail!("train.epochs must be at least 1");
    }
    Ok(())
}

/// The resolved configuration as TOML, with a header.
pub fn to_toml(cfg: &RunConfig) -> String {
    format!(
        "# Fully resolved configuration of this run (every default written out).\n{}",
        toml::to_string_pretty(cfg).expect("config serialises")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_overrides_and_unknown_keys() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.toml");
        std::fs::write(&p, "[train]\nepochs = 3\n[model.encoder]\nkind = \"attention\"\n").unwrap();
        let c = load(Some(&p), &["train.lr=0.01".into(), "model.decoder=softmax".into()]).unwrap();
        assert_eq!(c.train.epochs, 3);
        assert_eq!(c.train.lr, 0.01);
        assert_eq!(c.model.decoder, encoders::DecoderKind::Softmax);
        assert_eq!(c.name, "c");
        std::fs::write(&p, "[train]\nepochs = 3\nepochz = 4\n").unwrap();
        let e = load(Some(&p), &[]).unwrap_err().to_string();
        assert!(e.contains("c.toml:3:"), "{e}");
        assert!(e.contains("unknown field `epochz`, expected one of"), "{e}");
        assert!(e.contains("`batch_size`"), "{e}");
        let e = load(None, &["train.bogus=1".into()]).unwrap_err().to_string();
        assert!(e.contains("unknown field `bogus`"), "{e}");
    }

    /// One weight average at a time: SWA alongside the exponential one is an
    /// error that names both keys.
    #[test]
    fn swa_and_the_exponential_average_exclude_each_other() {
        let both = ["train.swa_start=5".into(), "train.average_decay=0.999".into()];
        let e = load(None, &both).unwrap_err().to_string();
        assert!(e.contains("train.swa_start = 5 and train.average_decay = 0.999"), "{e}");
        let swa = load(None, &["train.swa_start=5".into()]).unwrap();
        assert_eq!(crate::train::average::Weighting::of(&swa.train), Some(crate::train::average::Weighting::Epochs(5)));
        let ema = load(None, &["train.average_decay=0.9".into()]).unwrap();
        assert_eq!(
            crate::train::average::Weighting::of(&ema.train),
            Some(crate::train::average::Weighting::Exponential(0.9))
        );
        assert_eq!(crate::train::average::Weighting::of(&RunConfig::default().train), None);
    }

    /// Every config that ships loads and validates, and `tener-resume.toml`
    /// resolves exactly as the command of the TENER rows in experiments/tagging.md did (the
    /// relative-attention config with TENER's sizes and SGD schedule set on
    /// the command line; d_model was 256 and at most 50 epochs there then,
    /// 128 and 80 now), so the file reproduces those runs.
    #[test]
    fn shipped_configs_load_and_tener_is_the_measured_command() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/configs");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "toml") {
                load(Some(&p), &[]).unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
                names.push(p.file_stem().unwrap().to_string_lossy().to_string());
            }
        }
        for name in ["bilstm-crf", "attention-relative-crf", "tener-resume", "qa-cross"] {
            assert!(names.iter().any(|n| n == name), "{name}.toml missing from {names:?}");
        }
        let sets: Vec<String> = [
            "model.encoder.attention.d_model=256",
            "model.encoder.attention.ffn=512",
            "model.encoder.attention.dropout=0.15",
            "model.encoder.attention.attention_dropout=0.15",
            "model.output_dropout=0.4",
            "train.optimizer=sgd",
            "train.lr=0.0007",
            "train.momentum=0.9",
            "train.warmup_fraction=0.01",
            "train.word_dropout=0.01",
            "train.patience=0",
            "train.epochs=50",
        ]
        .map(String::from)
        .into();
        let mut measured = load(Some(&dir.join("attention-relative-crf.toml")), &sets).unwrap();
        let tener = load(Some(&dir.join("tener-resume.toml")), &[]).unwrap();
        assert_eq!(tener.name, "tener-resume");
        measured.name = tener.name.clone();
        assert_eq!(tener, measured);
    }

    /// `train.word_dropout` reads a rate or a `{ words, chars }` table, in
    /// the file or as `--set`, writes back to the same, and rejects
    /// anything else with a message naming the file and what it expects.
    #[test]
    fn word_dropout_is_a_rate_or_one_per_kind_of_data() {
        use corpus::Tokenization::{Chars, Words};
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.toml");
        let read = |text: &str, sets: &[&str]| {
            std::fs::write(&p, text).unwrap();
            load(Some(&p), &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        let c = read("[train]\nword_dropout = { words = 0.15, chars = 0.05 }\nchar_dropout = 0.1\n", &[]).unwrap();
        assert_eq!(c.train.word_dropout, WordDropout::ByTokens { words: 0.15, chars: 0.05 });
        assert_eq!((c.train.word_dropout.rate(Words), c.train.word_dropout.rate(Chars)), (0.15, 0.05));
        assert_eq!(c.train.char_dropout, 0.1);
        let back: RunConfig = toml::from_str(&to_toml(&c)).unwrap();
        assert_eq!(back, c);
        let plain = read("[train]\nword_dropout = 0\n", &[]).unwrap().train.word_dropout;
        assert_eq!((plain.rate(Words), plain.rate(Chars)), (0.0, 0.0));
        let set = read("[train]\nword_dropout = { words = 0.15, chars = 0.05 }\n", &["train.word_dropout=0.2"]);
        assert_eq!(set.unwrap().train.word_dropout, WordDropout::Rate(0.2));
        let set = read("", &["train.word_dropout={ words = 0.3, chars = 0 }"]).unwrap();
        assert_eq!(set.train.word_dropout, WordDropout::ByTokens { words: 0.3, chars: 0.0 });
        for (bad, says) in [
            ("{ words = 0.15 }", "expected a rate such as 0.05, or { words = 0.15, chars = 0.05 }"),
            ("{ words = 0.1, chars = 0.1, tags = 0.1 }", "expected a rate"),
            ("\"high\"", "expected a rate"),
            ("{ words = 0.15, chars = 1.0 }", "train.word_dropout: each rate must be in [0, 1)"),
            ("-0.1", "train.word_dropout: each rate must be in [0, 1)"),
        ] {
            let e = format!("{:#}", read(&format!("[train]\nword_dropout = {bad}\n"), &[]).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.starts_with(&p.display().to_string()) || e.starts_with("train."), "{bad}: {e}");
        }
    }

    #[test]
    fn every_position_is_read_under_its_name() {
        use encoders::positional::Position;
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("c.toml");
        for p in [
            Position::None,
            Position::Sinusoidal,
            Position::Learned,
            Position::Relative,
            Position::Rope,
            Position::Alibi,
            Position::T5,
        ] {
            let text = format!(
                "[model.encoder]\nkind = \"attention\"\n[model.encoder.attention]\nposition = \"{}\"\n",
                p.as_str()
            );
            std::fs::write(&file, text).unwrap();
            let c = load(Some(&file), &[]).unwrap_or_else(|e| panic!("{}: {e:#}", p.as_str()));
            assert_eq!(c.model.encoder.attention.position, p);
        }
    }

    #[test]
    fn resolved_config_round_trips() {
        let c = RunConfig::default();
        let back: RunConfig = toml::from_str(&to_toml(&c)).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn schedules() {
        let t = TrainConfig { schedule: Schedule::WarmupLinear, warmup_steps: 10, lr: 1.0, ..Default::default() };
        assert!((t.lr_at(0, 110, 0) - 0.1).abs() < 1e-12);
        assert!((t.lr_at(9, 110, 0) - 1.0).abs() < 1e-12);
        assert!((t.lr_at(60, 110, 0) - 0.5).abs() < 1e-12);
        let t = TrainConfig { schedule: Schedule::WarmupCosine, warmup_fraction: 0.1, lr: 1.0, ..Default::default() };
        assert!((t.lr_at(4, 100, 0) - 0.5).abs() < 1e-12);
        assert!((t.lr_at(55, 100, 0) - 0.5).abs() < 1e-12);
        let t = TrainConfig { schedule: Schedule::InverseDecay, lr_decay: 0.05, lr: 0.015, ..Default::default() };
        assert!((t.lr_at(0, 1, 10) - 0.01).abs() < 1e-12);
    }

    /// Fuzzing the config parser: TOML built from every section's keys
    /// with good, edge and wrong values, unknown keys and junk lines. A
    /// config is rejected with an error naming the file, or it builds a
    /// tagger whose loss on a tiny batch is finite and whose decoding
    /// tags every token. `SEQLAB_FUZZ_CASES` runs more cases.
    mod fuzz {
        use super::*;
        use burn::backend::NdArray;
        use burn::tensor::ElementConversion;
        use corpus::{Normalize, Span, Vocabs};
        use encoders::input::tags_tensor;
        use encoders::{TaggerInput, TaggerShape};
        use proptest::prelude::*;

        const KEYS: &[(&str, &str, &[&str])] = &[
            ("", "seed", &["1", "18446744073709551615", "-1"]),
            ("", "name", &["\"x\"", "3"]),
            ("data", "tag_scheme", &["\"bioes\"", "\"bio\"", "\"iob1\"", "\"bmes\"", "\"data\"", "\"nope\""]),
            ("data", "lowercase", &["true", "false", "1"]),
            ("data", "min_word_freq", &["0", "1", "3"]),
            ("data", "max_word_chars", &["0", "1", "30"]),
            ("data", "max_len", &["0", "2", "16"]),
            ("model", "decoder", &["\"crf\"", "\"softmax\"", "\"hmm\""]),
            ("model", "constrained", &["true", "false"]),
            ("model", "output_dropout", &["0.0", "0.4", "1.0", "nan"]),
            ("model.features", "word_dim", &["0", "1", "8"]),
            ("model.features", "char_dim", &["0", "4"]),
            ("model.features", "char_filters", &["0", "3"]),
            ("model.features", "char_kernel", &["0", "1", "3", "9"]),
            ("model.features", "caps_dim", &["0", "2"]),
            ("model.features", "question_match_dim", &["0", "2"]),
            ("model.features", "dropout", &["0.0", "0.5", "1.0", "-0.1", "nan"]),
            ("model.features", "bigram_dim", &["0", "3"]),
            ("model.features", "char_encoder", &["\"cnn\"", "\"transformer\"", "\"lstm\""]),
            ("model.features", "char_heads", &["0", "1", "2", "3"]),
            ("data", "bigrams", &["\"auto\"", "\"on\"", "\"off\"", "\"yes\""]),
            ("data", "min_bigram_freq", &["0", "1", "2"]),
            ("model.encoder", "kind", &["\"bilstm\"", "\"attention\"", "\"rnn\""]),
            ("model.encoder.bilstm", "hidden", &["0", "1", "6"]),
            ("model.encoder.bilstm", "layers", &["0", "1", "2"]),
            ("model.encoder.bilstm", "dropout", &["0.0", "0.3", "1.5"]),
            ("model.encoder.attention", "d_model", &["0", "1", "6", "8"]),
            ("model.encoder.attention", "layers", &["0", "1", "2"]),
            ("model.encoder.attention", "heads", &["0", "1", "2", "3"]),
            ("model.encoder.attention", "head_dim", &["0", "2"]),
            ("model.encoder.attention", "ffn", &["0", "1", "8"]),
            ("model.encoder.attention", "dropout", &["0.0", "0.1", "1.0"]),
            ("model.encoder.attention", "attention_dropout", &["0.0", "0.1", "-1.0"]),
            (
                "model.encoder.attention",
                "position",
                &["\"sinusoidal\"", "\"learned\"", "\"relative\"", "\"rope\"", "\"alibi\"", "\"t5\"", "\"rotary\""],
            ),
            ("model.encoder.attention", "max_len", &["0", "1", "64"]),
            ("model.encoder.attention", "scaled", &["true", "false"]),
            ("model.encoder.attention", "impl", &["\"dense\"", "\"chunked\"", "\"local\"", "\"flash\""]),
            ("model.encoder.attention", "block", &["0", "1", "2"]),
            ("model.encoder.attention", "window", &["0", "1", "3"]),
            ("train", "epochs", &["0", "1"]),
            ("train", "batch_size", &["0", "1", "4"]),
            ("train", "lr", &["0.001", "0.0", "-1.0", "inf"]),
            ("train", "optimizer", &["\"adam\"", "\"adamw\"", "\"sgd\"", "\"lion\""]),
            ("train", "schedule", &["\"constant\"", "\"warmup_linear\"", "\"warmup_cosine\"", "\"inverse_decay\""]),
            ("train", "grad_clip", &["0.0", "5.0", "-1.0"]),
            ("train", "momentum", &["0.9", "1.0"]),
            ("train", "warmup_fraction", &["0.0", "0.5", "2.0"]),
            (
                "train",
                "word_dropout",
                &[
                    "0.0",
                    "0.5",
                    "1.0",
                    "{ words = 0.15, chars = 0.05 }",
                    "{ words = 0.1 }",
                    "{ words = 1.0, chars = 0.0 }",
                    "\"x\"",
                ],
            ),
            ("train", "char_dropout", &["0.0", "0.2", "1.0", "nan"]),
            ("train", "average_decay", &["0.0", "0.99", "1.0", "-0.5"]),
            ("train", "swa_start", &["0", "3", "-1"]),
            ("train", "on_nan", &["\"stop\"", "\"skip\"", "\"ignore\""]),
            ("train", "checkpoint_every", &["0", "3"]),
            ("train", "max_memory", &["\"\"", "\"8GiB\"", "\"lots\""]),
            ("train", "colour", &["\"red\""]),
            ("model.encoder.attention", "heads_count", &["4"]),
        ];

        /// A config file: chosen keys grouped by section, sometimes a junk line.
        fn config_text() -> impl Strategy<Value = String> {
            let entry = (0..KEYS.len(), any::<prop::sample::Index>());
            (prop::collection::vec(entry, 0..14), prop::option::of("[^\n]{0,12}")).prop_map(|(picks, junk)| {
                let mut sections: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
                for (k, v) in picks {
                    let (section, key, values) = KEYS[k];
                    let line = format!("{key} = {}", values[v.index(values.len())]);
                    let lines = sections.entry(section).or_default();
                    if !lines.iter().any(|l| l.starts_with(&format!("{key} ="))) {
                        lines.push(line);
                    }
                }
                let mut text = String::new();
                for (section, lines) in sections {
                    if !section.is_empty() {
                        text.push_str(&format!("[{section}]\n"));
                    }
                    text.push_str(&(lines.join("\n") + "\n"));
                }
                if let Some(j) = junk {
                    text.push_str(&j);
                    text.push('\n');
                }
                text
            })
        }

        /// Builds the tagger of `cfg` on two tiny sentences and runs it.
        fn tagger_runs(cfg: &RunConfig) -> std::result::Result<(), TestCaseError> {
            type B = burn::backend::Autodiff<NdArray<f32>>;
            let device = Default::default();
            let Ok(scheme) = cfg.data.tagger_scheme(Scheme::Iob2) else { return Ok(()) };
            let sentences: Vec<Vec<String>> = [vec!["EU", "rejects", "German", "call"], vec!["Peter"]]
                .iter()
                .map(|s| s.iter().map(|w| w.to_string()).collect())
                .collect();
            let spans = [
                vec![Span { start: 0, end: 1, label: "ORG".into() }, Span { start: 2, end: 3, label: "MISC".into() }],
                vec![Span { start: 0, end: 1, label: "PER".into() }],
            ];
            let labels: Vec<String> = ["MISC", "ORG", "PER"].map(String::from).to_vec();
            let normalize = Normalize { lowercase: cfg.data.lowercase, zero_digits: cfg.data.zero_digits };
            let mut vocabs = Vocabs::build(
                sentences.iter().map(|s| s.as_slice()),
                &labels,
                normalize,
                cfg.data.min_word_freq,
                scheme,
                Scheme::Iob2,
            );
            if cfg.model.features.bigram_dim > 0 {
                let v = corpus::bigrams::vocabulary(sentences.iter().map(|s| s.as_slice()), normalize, 1);
                vocabs.bigrams = Some(v);
            }
            let encoded: Vec<_> = sentences
                .iter()
                .zip(&spans)
                .map(|(s, sp)| vocabs.encode(s, Some(&scheme.encode(s.len(), sp)), cfg.data.max_word_chars))
                .collect();
            let model = cfg.model.init::<B>(
                TaggerShape {
                    words: vocabs.words.len(),
                    chars: vocabs.chars.len(),
                    bigrams: vocabs.bigrams.as_ref().map_or(0, |v| v.len()),
                    tags: &vocabs.parsed_tags(),
                    scheme,
                    pretrained: None,
                },
                &device,
            );
            let batch = corpus::batch::pad(&encoded, &[0, 1]);
            let input = TaggerInput::<B>::from_batch(&corpus::Batch::Plain(batch.clone()), &device);
            let loss = model.loss(&input, tags_tensor::<B>(&batch, &device).unwrap()).unwrap();
            let value: f64 = loss.clone().into_scalar().elem();
            prop_assert!(value.is_finite(), "loss {value}");
            // A training step's backward too (an autodiff graph is freed by its backward).
            let _grads = loss.backward();
            let tags = model.decode(&input).unwrap();
            prop_assert_eq!(tags.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 1]);
            Ok(())
        }

        /// Checks one config text; see the module comment.
        fn config_is_rejected_or_runs(text: &String) -> std::result::Result<(), TestCaseError> {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("c.toml");
            std::fs::write(&p, text).unwrap();
            match load(Some(&p), &[]) {
                Err(e) => {
                    let msg = format!("{e:#}");
                    let named = msg.starts_with(&p.display().to_string())
                        || ["model.", "data.", "train."].iter().any(|s| msg.starts_with(s));
                    prop_assert!(named, "error names neither the file nor the key: {msg}");
                }
                Ok(cfg) => tagger_runs(&cfg)?,
            }
            // The same keys given as --set overrides.
            let sets: Vec<String> = text
                .lines()
                .scan(String::new(), |section, l| {
                    if let Some(s) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                        *section = format!("{s}.");
                        return Some(None);
                    }
                    Some(l.split_once(" = ").map(|(k, v)| format!("{section}{k}={v}")))
                })
                .flatten()
                .collect();
            if let Ok(cfg) = load(None, &sets) {
                tagger_runs(&cfg)?;
            }
            Ok(())
        }

        /// 128 configs, or rounds of fresh ones until `SEQLAB_FUZZ_SECONDS` pass.
        #[test]
        fn fuzz_config_parser() {
            let seconds: Option<u64> = std::env::var("SEQLAB_FUZZ_SECONDS").ok().and_then(|v| v.parse().ok());
            let started = std::time::Instant::now();
            let mut tried = 0u64;
            loop {
                let config = ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() };
                let mut runner = proptest::test_runner::TestRunner::new(config);
                if let Err(e) = runner.run(&config_text(), |t| config_is_rejected_or_runs(&t)) {
                    panic!("config parser: {e}");
                }
                tried += 128;
                if seconds.is_none_or(|s| started.elapsed().as_secs() >= s) {
                    break;
                }
            }
            if seconds.is_some() {
                eprintln!("config parser: {tried} configs in {:.0} s, no failure", started.elapsed().as_secs_f64());
            }
        }
    }
}
