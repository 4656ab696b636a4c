//! A dataset folder: train/dev/test column files, named in an optional
//! `dataset.toml` or recognised by conventional names.
//!
//! ```toml
//! # dataset.toml (every key optional)
//! name = "conll2003"
//! train = "eng.train"
//! dev = "eng.testa"
//! test = "eng.testb"
//! scheme = "iob1"        # iob1 | bio | bioes | bmes; detected when absent
//! token_column = 0       # 0-based; negative counts from the end
//! tag_column = -1        # the last column
//! qa_metric = "cmrc"     # QA folders: squad | cmrc; detected when absent
//! ```
//!
//! Without `dataset.toml`, file names are matched (case-insensitively):
//! `*train*` is the training split, `*dev*`/`*valid*`/`*testa*` the
//! development split, `*test*`/`*testb*` the test split.

use crate::error::{CorpusError, Result};
use crate::io::read_text;
use crate::qa::metric::QaMetric;
use crate::qa::squad::{qa_files, qa_sentences, Answers, QaItem, SquadFile, Tokenize};
use crate::reader::{parse_tagged, Columns, Sentence};
use crate::split::classify;
use crate::tags::Scheme;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Split names live in [`crate::split`] (shared with [`crate::qa::squad`]).
pub use crate::split::SplitName;

pub const DATASET_TOML: &str = "dataset.toml";

/// The contents of `dataset.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetToml {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_column: Option<isize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag_column: Option<isize>,
    /// Question-answering folders: the answer metric (`squad` or `cmrc`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qa_metric: Option<QaMetric>,
}

impl DatasetToml {
    pub fn read(path: &Path) -> Result<DatasetToml> {
        let text = read_text(path)?;
        toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))
    }
}

/// Turns a TOML error into one that names file and line.
pub fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> CorpusError {
    let msg = e.message().to_string();
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            CorpusError::at(path, line, msg)
        }
        None => CorpusError::file(path, msg),
    }
}

/// The names of the three split files of a dataset folder.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitFiles {
    pub train: Option<PathBuf>,
    pub dev: Option<PathBuf>,
    pub test: Option<PathBuf>,
}

/// Files that are never data, whatever their name.
fn is_data_candidate(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let skip_ext = [
        ".md", ".toml", ".json", ".jsonl", ".py", ".sh", ".zip", ".gz", ".tar", ".bz2", ".xz", ".pdf", ".html",
        ".lock", ".log",
    ];
    !lower.starts_with('.') && !lower.starts_with("readme") && !skip_ext.iter().any(|e| lower.ends_with(e))
}

/// Finds the split files of a folder: from `dataset.toml` if present, else
/// by conventional names. Two files claiming one split is an error.
pub fn locate(dir: &Path, spec: &DatasetToml) -> Result<SplitFiles> {
    let meta = std::fs::metadata(dir).map_err(|e| CorpusError::io(dir, e))?;
    if !meta.is_dir() {
        return Err(CorpusError::file(dir, "expected a dataset folder, found a file"));
    }
    let mut found: [Vec<PathBuf>; 3] = Default::default();
    let entries = std::fs::read_dir(dir).map_err(|e| CorpusError::io(dir, e))?;
    let mut names: Vec<PathBuf> = Vec::new();
    for e in entries {
        let e = e.map_err(|e| CorpusError::io(dir, e))?;
        if e.path().is_file() {
            names.push(e.path());
        }
    }
    names.sort();
    for p in names {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !is_data_candidate(&name) {
            continue;
        }
        if let Some(split) = classify(&name) {
            found[split as usize].push(p);
        }
    }
    let pick = |named: &Option<String>, split: SplitName| -> Result<Option<PathBuf>> {
        if let Some(n) = named {
            let p = dir.join(n);
            if !p.is_file() {
                return Err(CorpusError::file(
                    &dir.join(DATASET_TOML),
                    format!("{} file `{}` does not exist", split.as_str(), p.display()),
                ));
            }
            return Ok(Some(p));
        }
        let c = &found[split as usize];
        match c.len() {
            0 => Ok(None),
            1 => Ok(Some(c[0].clone())),
            _ => Err(CorpusError::file(
                dir,
                format!(
                    "several files look like the {} split ({}): name one in {DATASET_TOML} (`{} = \"…\"`)",
                    split.as_str(),
                    c.iter()
                        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    split.as_str()
                ),
            )),
        }
    };
    Ok(SplitFiles {
        train: pick(&spec.train, SplitName::Train)?,
        dev: pick(&spec.dev, SplitName::Dev)?,
        test: pick(&spec.test, SplitName::Test)?,
    })
}

/// One split, read.
#[derive(Clone, Debug)]
pub struct Split {
    pub name: SplitName,
    pub path: PathBuf,
    pub sentences: Vec<Sentence>,
    /// For question-answering data: per sentence, its question id, context
    /// and gold answers, to map tagged spans back to answer text.
    pub qa: Option<Vec<QaItem>>,
}

impl Split {
    pub fn tokens(&self) -> usize {
        self.sentences.iter().map(|s| s.tokens.len()).sum()
    }
}

/// A dataset folder, read and checked.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    pub dir: PathBuf,
    pub scheme: Scheme,
    /// Whether the scheme came from `dataset.toml` (else it was detected).
    pub scheme_declared: bool,
    pub columns: Columns,
    pub splits: Vec<Split>,
    /// Question-answering folders: the answer metric, repairs and notes.
    pub qa: Option<QaInfo>,
}

impl Dataset {
    /// Reads every split of a dataset folder.
    pub fn load(dir: &Path) -> Result<Dataset> {
        let toml_path = dir.join(DATASET_TOML);
        let spec = if toml_path.is_file() { DatasetToml::read(&toml_path)? } else { DatasetToml::default() };
        let files = locate(dir, &spec)?;
        let columns = Columns { token: spec.token_column.unwrap_or(0), tag: spec.tag_column.unwrap_or(-1) };
        let mut splits = Vec::new();
        for (name, path) in
            [(SplitName::Train, &files.train), (SplitName::Dev, &files.dev), (SplitName::Test, &files.test)]
        {
            if let Some(path) = path {
                let text = read_text(path)?;
                let sentences = parse_tagged(path, &text, columns, spec.scheme)?;
                splits.push(Split { name, path: path.clone(), sentences, qa: None });
            }
        }
        if splits.is_empty() {
            return Err(CorpusError::file(
                dir,
                format!(
                    "no data files: expected {DATASET_TOML} or files named *train*, *dev*/*valid*/*testa*, *test*/*testb*"
                ),
            ));
        }
        // The scheme is detected over all splits together: a training file
        // with no `M-` tag is still BMES if the test file has them.
        let scheme = match spec.scheme {
            Some(s) => s,
            None => Scheme::detect(splits.iter().flat_map(|s| s.sentences.iter().map(|s| s.tags.as_slice())))
                .map_err(|m| CorpusError::file(&splits[0].path, m))?,
        };
        let name = spec.name.clone().unwrap_or_else(|| {
            dir.canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
                .unwrap_or_else(|| "dataset".into())
        });
        Ok(Dataset {
            name,
            dir: dir.to_path_buf(),
            scheme,
            scheme_declared: spec.scheme.is_some(),
            columns,
            splits,
            qa: None,
        })
    }

    /// Reads a question-answering folder (SQuAD-format `train.json`,
    /// `dev.json`, `test.json`; see [`crate::qa::squad::qa_sentences`]), its
    /// texts cut into sub-tokens by `tokenize`. Tags are BIO (`B-ANS`, `I-ANS`).
    /// [`Dataset::load_qa_info`] also says which metric scores it and what
    /// reading it repaired.
    pub fn load_qa(dir: &Path, tokenize: Tokenize) -> Result<Dataset> {
        Ok(Self::load_qa_info(dir, tokenize)?.0)
    }

    /// [`Dataset::load_qa`], and what else the folder says: its answer
    /// metric (`qa_metric` in `dataset.toml`, else detected from the
    /// contexts), how many answer offsets each split's file had repaired,
    /// and notes for people about both.
    pub fn load_qa_info(dir: &Path, tokenize: Tokenize) -> Result<(Dataset, QaInfo)> {
        let files = qa_files(dir).ok_or_else(|| {
            CorpusError::file(dir, "no question-answering files: expected *train*.json, *dev*.json or *test*.json")
        })?;
        let (splits, repaired) = load_qa_splits(dir, &files, tokenize)?;
        let contexts = splits.iter().flat_map(|s| s.qa.iter().flatten()).map(|i| &*i.context);
        let choice = qa_metric_of(dir, contexts)?;
        let mut notes: Vec<String> = repaired
            .iter()
            .filter(|(_, _, n)| *n > 0)
            .map(|(_, path, n)| {
                let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into());
                if *n == 1 {
                    format!("{name}: 1 answer's offset repaired to the nearest occurrence of its text")
                } else {
                    format!("{name}: {n} answers' offsets repaired to the nearest occurrence of their text")
                }
            })
            .collect();
        notes.push(choice.note());
        let spec = read_spec(dir)?;
        let name = spec.name.clone().unwrap_or_else(|| {
            dir.canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
                .unwrap_or_else(|| "qa".into())
        });
        let dataset = Dataset {
            name,
            dir: dir.to_path_buf(),
            scheme: Scheme::Iob2,
            scheme_declared: true,
            columns: Columns::default(),
            splits,
            qa: None,
        };
        let repaired = repaired.into_iter().map(|(split, _, n)| (split, n)).collect();
        let info = QaInfo { metric: choice.metric, metric_declared: choice.declared, repaired, notes };
        Ok((Dataset { qa: Some(info.clone()), ..dataset }, info))
    }

    /// Whether the sentences come with questions (a QA dataset).
    pub fn is_qa(&self) -> bool {
        self.splits.iter().any(|s| s.qa.is_some())
    }

    pub fn split(&self, name: SplitName) -> Option<&Split> {
        self.splits.iter().find(|s| s.name == name)
    }

    /// Entity types of a split, sorted.
    pub fn labels(&self, name: SplitName) -> BTreeSet<String> {
        self.split(name)
            .map(|s| {
                s.sentences.iter().flat_map(|s| s.tags.iter().filter_map(|t| t.label().map(str::to_string))).collect()
            })
            .unwrap_or_default()
    }

    /// The dataset with its training split cut to `n` sentences drawn at
    /// random, the draw fixed by `seed`, kept in file order (for QA data,
    /// with their questions); dev and test unchanged. `n` at least the
    /// split's size keeps it whole. Returns the split's size before the
    /// cut.
    pub fn cut_train(&mut self, n: usize, seed: u64) -> usize {
        use rand::SeedableRng;
        let Some(train) = self.splits.iter_mut().find(|s| s.name == SplitName::Train) else {
            return 0;
        };
        let total = train.sentences.len();
        if n >= total {
            return total;
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut keep = rand::seq::index::sample(&mut rng, total, n).into_vec();
        keep.sort_unstable();
        train.sentences = keep.iter().map(|&i| train.sentences[i].clone()).collect();
        if let Some(qa) = &mut train.qa {
            *qa = keep.iter().map(|&i| qa[i].clone()).collect();
        }
        total
    }

    /// Entity types found in dev or test but not in train, per split.
    pub fn unseen_labels(&self) -> Vec<(SplitName, String)> {
        let train = self.labels(SplitName::Train);
        let mut out = Vec::new();
        for split in [SplitName::Dev, SplitName::Test] {
            for l in self.labels(split) {
                if !train.contains(&l) {
                    out.push((split, l));
                }
            }
        }
        out
    }
}

/// What [`Dataset::load_qa_info`] finds besides the splits.
#[derive(Clone, Debug, PartialEq)]
pub struct QaInfo {
    /// The metric that scores the folder's answers.
    pub metric: QaMetric,
    /// Whether `dataset.toml` names it (else it was detected).
    pub metric_declared: bool,
    /// Per split, the first answers whose offsets were repaired
    /// ([`SquadFile::repaired`]).
    pub repaired: Vec<(SplitName, usize)>,
    /// For people: repairs per file, and which metric and why.
    pub notes: Vec<String>,
}

/// A folder's answer metric and where it came from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricChoice {
    pub metric: QaMetric,
    /// `qa_metric` in `dataset.toml`.
    pub declared: bool,
    /// The share of CJK characters in the contexts (when detected).
    pub cjk_share: f64,
}

impl MetricChoice {
    /// "answers are scored with …" and why.
    pub fn note(&self) -> String {
        let why = if self.declared {
            format!("{DATASET_TOML}: qa_metric = \"{}\"", self.metric.key())
        } else {
            format!(
                "detected: {:.0}% of the context characters are CJK, the threshold is {:.0}%",
                100.0 * self.cjk_share,
                100.0 * crate::qa::metric::CJK_SHARE
            )
        };
        format!("answers are scored with the {} metric ({why})", self.metric.name())
    }
}

/// `dataset.toml` of a folder, or every key unset when there is none.
fn read_spec(dir: &Path) -> Result<DatasetToml> {
    let path = dir.join(DATASET_TOML);
    if path.is_file() {
        DatasetToml::read(&path)
    } else {
        Ok(DatasetToml::default())
    }
}

/// The answer metric of the QA folder `dir`: `qa_metric` in its
/// `dataset.toml`, else [`QaMetric::detect`] on `contexts`.
pub fn qa_metric_of<'a>(dir: &Path, contexts: impl IntoIterator<Item = &'a str>) -> Result<MetricChoice> {
    let spec = read_spec(dir)?;
    Ok(match spec.qa_metric {
        Some(metric) => MetricChoice { metric, declared: true, cjk_share: f64::NAN },
        None => {
            let (metric, cjk_share) = QaMetric::detect(contexts);
            MetricChoice { metric, declared: false, cjk_share }
        }
    })
}

/// Reads the SQuAD files of `files` into QA splits (see
/// [`crate::qa::squad::qa_sentences`]), each with its file and how many
/// answer offsets reading it repaired; two files for one split is an error.
fn load_qa_splits(
    dir: &Path,
    files: &[(SplitName, PathBuf)],
    tokenize: Tokenize,
) -> Result<(Vec<Split>, Vec<(SplitName, PathBuf, usize)>)> {
    let mut splits: Vec<Split> = Vec::new();
    let mut repaired = Vec::new();
    for (name, path) in files {
        if let Some(other) = splits.iter().find(|s| s.name == *name) {
            return Err(CorpusError::file(
                dir,
                format!(
                    "two files look like the {} split: {} and {}",
                    name.as_str(),
                    other.path.display(),
                    path.display()
                ),
            ));
        }
        let text = read_text(path)?;
        let file = SquadFile::parse_with(path, &text, Answers::Required)?;
        let (sentences, items) = qa_sentences(path, &text, &file, tokenize, Answers::Required)?;
        splits.push(Split { name: *name, path: path.clone(), sentences, qa: Some(items) });
        repaired.push((*name, path.clone(), file.repaired));
    }
    Ok((splits, repaired))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tags::{Prefix, Tag};

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    /// `data.train_sentences`: the same seed keeps the same sentences, in
    /// file order; another seed others; dev and test are untouched; a
    /// size at least the split's keeps it whole.
    #[test]
    fn cut_train_keeps_a_subset_fixed_by_the_seed() {
        let d = tempfile::tempdir().unwrap();
        crate::toy::write_dataset(d.path(), crate::toy::Lang::En, 200, 3).unwrap();
        let full = Dataset::load(d.path()).unwrap();
        let lines = |ds: &Dataset, name| ds.split(name).unwrap().sentences.iter().map(|s| s.line).collect::<Vec<_>>();
        let cut = |seed| {
            let mut ds = full.clone();
            let total = ds.cut_train(30, seed);
            assert_eq!(total, full.split(SplitName::Train).unwrap().sentences.len());
            assert_eq!(lines(&ds, SplitName::Dev), lines(&full, SplitName::Dev));
            assert_eq!(lines(&ds, SplitName::Test), lines(&full, SplitName::Test));
            lines(&ds, SplitName::Train)
        };
        let (a, b, other) = (cut(1), cut(1), cut(2));
        assert_eq!(a.len(), 30);
        assert_eq!(a, b, "same seed, same sentences");
        assert_ne!(a, other, "another seed, other sentences");
        assert!(a.windows(2).all(|w| w[0] < w[1]), "file order");
        let all = lines(&full, SplitName::Train);
        assert!(a.iter().all(|l| all.contains(l)));
        let mut whole = full.clone();
        assert_eq!(whole.cut_train(10_000, 1), all.len());
        assert_eq!(lines(&whole, SplitName::Train), all);
    }

    #[test]
    fn conventional_names_are_recognised() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "eng.train", "a I-PER\n");
        write(d.path(), "eng.testa", "b I-LOC\n");
        write(d.path(), "eng.testb", "c O\n");
        write(d.path(), "README.md", "x");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.splits.len(), 3);
        assert_eq!(ds.scheme, Scheme::Iob1);
        assert_eq!(ds.split(SplitName::Dev).unwrap().path.file_name().unwrap(), "eng.testa");
        assert_eq!(ds.unseen_labels(), vec![(SplitName::Dev, "LOC".to_string())]);
    }

    #[test]
    fn bmes_names() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "train.char.bmes", "中 B-ORG\n国 E-ORG\n");
        write(d.path(), "dev.char.bmes", "中 S-ORG\n");
        write(d.path(), "test.char.bmes", "中 B-ORG\n国 M-ORG\n人 E-ORG\n");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.scheme, Scheme::Bmes);
    }

    #[test]
    fn dataset_toml_names_files_and_columns() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "a.txt", "B-PER x John\n");
        write(
            d.path(),
            DATASET_TOML,
            "name = \"t\"\ntrain = \"a.txt\"\nscheme = \"bio\"\ntoken_column = 2\ntag_column = 0\n",
        );
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.name, "t");
        assert_eq!(ds.splits[0].sentences[0].tokens, ["John"]);
        assert!(ds.scheme_declared);
    }

    #[test]
    fn unknown_key_in_dataset_toml_is_rejected_with_line() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "train.txt", "a O\n");
        write(d.path(), DATASET_TOML, "train = \"train.txt\"\ntrian = \"x\"\n");
        let err = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(err.contains("dataset.toml:2:"), "{err}");
        assert!(err.contains("unknown field `trian`"), "{err}");
        assert!(err.contains("train"), "{err}");
    }

    #[test]
    fn ambiguous_and_missing_files_are_errors() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "train1.txt", "a O\n");
        write(d.path(), "train2.txt", "a O\n");
        let err = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(err.contains("several files look like the train split"), "{err}");
        let e = tempfile::tempdir().unwrap();
        let err = Dataset::load(e.path()).unwrap_err().to_string();
        assert!(err.contains("no data files"), "{err}");
    }

    /// A SQuAD-format file of one article with the given paragraphs
    /// (context, question, answer, offset).
    fn squad(paragraphs: &[(&str, &str, &str, i64)]) -> String {
        let ps: Vec<String> = paragraphs
            .iter()
            .enumerate()
            .map(|(i, (c, q, a, at))| {
                format!(
                    "{{\"context\": {c:?}, \"qas\": [{{\"id\": \"q{i}\", \"question\": {q:?},\n \"answers\": [{{\"text\": {a:?}, \"answer_start\": {at}}}]}}]}}"
                )
            })
            .collect();
        format!("{{\"data\": [{{\"title\": \"T\", \"paragraphs\": [\n{}]}}]}}", ps.join(",\n"))
    }

    fn words(t: &str) -> std::result::Result<Vec<crate::qa::squad::Piece>, String> {
        Ok(crate::qa::squad::words(t))
    }

    #[test]
    fn chinese_qa_folder_gets_the_cmrc_metric_and_repairs_are_noted() {
        let d = tempfile::tempdir().unwrap();
        let train = [
            ("北京是中国的首都。", "中国的首都是哪里？", "北京", 0),
            ("上海在中国东部。", "上海在哪里？", "中国东部", -1),
        ];
        write(d.path(), "train.json", &squad(&train));
        write(d.path(), "dev.json", &squad(&[("长江是中国最长的河流。", "中国最长的河流是什么？", "长江", 2)]));
        let (ds, info) = Dataset::load_qa_info(d.path(), &words).unwrap();
        assert_eq!((info.metric, info.metric_declared), (QaMetric::Cmrc, false));
        assert_eq!(info.repaired, [(SplitName::Train, 1), (SplitName::Dev, 1)]);
        assert_eq!(info.notes[0], "train.json: 1 answer's offset repaired to the nearest occurrence of its text");
        assert!(info.notes[2].contains("CMRC 2018") && info.notes[2].contains("detected"), "{:?}", info.notes);
        // The repaired offsets tag the right characters.
        let dev = ds.split(SplitName::Dev).unwrap();
        let ans = |p| Tag::new(p, "ANS");
        assert_eq!(dev.sentences[0].tags[..3], [ans(Prefix::B), ans(Prefix::I), Tag::O]);
        assert_eq!(Dataset::load_qa(d.path(), &words).unwrap().splits.len(), 2);
    }

    #[test]
    fn dataset_toml_names_the_qa_metric_and_english_is_detected_as_squad() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "train.json", &squad(&[("The Normans came.", "Who came?", "Normans", 4)]));
        let (_, info) = Dataset::load_qa_info(d.path(), &words).unwrap();
        assert_eq!((info.metric, info.metric_declared, info.notes.len()), (QaMetric::Squad, false, 1));
        write(d.path(), DATASET_TOML, "qa_metric = \"cmrc\"\n");
        let (_, info) = Dataset::load_qa_info(d.path(), &words).unwrap();
        assert_eq!((info.metric, info.metric_declared), (QaMetric::Cmrc, true));
        assert!(info.notes[0].contains("qa_metric = \"cmrc\""), "{:?}", info.notes);
        write(d.path(), DATASET_TOML, "name = \"x\"\nqa_metric = \"bleu\"\n");
        let e = Dataset::load_qa_info(d.path(), &words).unwrap_err().to_string();
        assert!(e.contains("dataset.toml:2:") && e.contains("squad") && e.contains("cmrc"), "{e}");
    }

    #[test]
    fn an_answer_missing_from_its_context_names_the_file_line_and_question() {
        let d = tempfile::tempdir().unwrap();
        let text = squad(&[("The Normans came.", "Who came?", "Normans", 4), ("It rained.", "What?", "snow", -1)]);
        write(d.path(), "train.json", &text);
        let e = Dataset::load_qa_info(d.path(), &words).unwrap_err().to_string();
        assert!(e.contains("train.json:4:") && e.contains("question q1") && e.contains("\"snow\""), "{e}");
    }

    #[test]
    fn mixed_schemes_across_splits_are_an_error() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "train.txt", "a B-PER\nb I-PER\n");
        write(d.path(), "dev.txt", "a O\n\nb M-PER\n");
        let err = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(err.contains("mix prefixes of different schemes (B, I, M)"), "{err}");
    }
}
