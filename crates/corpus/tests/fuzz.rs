//! Fuzzing the readers with proptest: the column reader, `seqlab score`'s
//! reader, SQuAD JSON, pretrained vectors, vocabularies and dataset.toml get noisy
//! files built from the pieces real files are made of (rows of 1–5
//! columns, good and bad tags, BOM, CRLF, tabs, `-DOCSTART-`, CJK, invalid
//! UTF-8, truncation) and arbitrary bytes. Each must return its value or an
//! error naming the file and a line inside it; never panic, never drop a
//! token.
//!
//! CI runs a few hundred cases per target. Fuzz for ten minutes a target with
//! `SEQLAB_FUZZ_SECONDS=600 cargo test -p corpus --test fuzz -- --nocapture`
//! (`just fuzz`); each target then prints how many inputs it tried.
//! Inputs that once broke a reader live in `tests/fuzz-corpus/<target>/`
//! and are replayed by `the_corpus_of_interesting_inputs_still_passes`.

use corpus::error::CorpusError;
use corpus::reader::{parse_tagged, Columns};
use corpus::score::{Mode, ScoreFile};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::Path;
use std::time::{Duration, Instant};

/// Runs `check` on inputs drawn from `strategy`: 256 of them, or rounds of
/// fresh random inputs until `SEQLAB_FUZZ_SECONDS` have passed. A failure
/// panics with the shrunk input.
fn fuzz<S: Strategy>(name: &str, strategy: S, check: fn(&S::Value) -> Result<(), TestCaseError>) {
    let seconds: Option<u64> = std::env::var("SEQLAB_FUZZ_SECONDS").ok().and_then(|v| v.parse().ok());
    let started = Instant::now();
    let mut tried = 0u64;
    loop {
        let config = Config { cases: 256, failure_persistence: None, ..Config::default() };
        let mut runner = TestRunner::new(config);
        if let Err(e) = runner.run(&strategy, |v| check(&v)) {
            panic!("{name}: {e}");
        }
        tried += 256;
        if seconds.is_none_or(|s| started.elapsed() >= Duration::from_secs(s)) {
            break;
        }
    }
    if seconds.is_some() {
        eprintln!("{name}: {tried} inputs in {:.0} s, no failure", started.elapsed().as_secs_f64());
    }
}

/// One line of a column file, as noisy as the files people have.
fn line() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "EU",
        "rejects",
        "German",
        "call",
        ".",
        "中",
        "国",
        "人工智能",
        "🙂",
        "-X-",
        "\u{a0}x",
        "O",
        "B-PER",
        "a\u{0}b",
    ]);
    let tag = prop::sample::select(vec![
        "O",
        "B-PER",
        "I-PER",
        "E-PER",
        "S-LOC",
        "M-ORG",
        "B-",
        "I-",
        "X-PER",
        "b-per",
        "B-creative-work",
        "-",
        "I-MISC",
    ]);
    let sep = prop::sample::select(vec![" ", "\t", "  ", " \t "]);
    prop_oneof![
        4 => (token.clone(), sep.clone(), tag.clone()).prop_map(|(w, s, t)| format!("{w}{s}{t}")),
        2 => (token.clone(), sep.clone(), tag.clone()).prop_map(|(w, s, t)| format!("{w}{s}NNP{s}I-NP{s}{t}")),
        1 => token.prop_map(|w| w.to_string()),
        2 => Just(String::new()),
        1 => prop::sample::select(vec!["   ", "\t", "\r"]).prop_map(String::from),
        1 => Just("-DOCSTART- -X- -X- O".to_string()),
        1 => any::<String>(),
    ]
}

/// A whole file: lines, line ends, maybe a BOM, maybe cut short, maybe a
/// stray invalid byte.
fn noisy_file() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(line(), 0..40),
        prop::sample::select(vec!["\n", "\r\n"]),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<prop::sample::Index>()),
        prop::option::of(any::<prop::sample::Index>()),
    )
        .prop_map(|(lines, end, bom, final_newline, cut, bad_byte)| {
            let mut text = lines.join(end);
            if final_newline {
                text.push_str(end);
            }
            let mut bytes = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
            bytes.extend_from_slice(text.as_bytes());
            if let Some(i) = cut {
                let keep = i.index(bytes.len() + 1);
                bytes.truncate(keep);
            }
            if let Some(i) = bad_byte {
                if !bytes.is_empty() {
                    let at = i.index(bytes.len());
                    bytes.insert(at, 0xFF);
                }
            }
            bytes
        })
}

fn any_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![4 => noisy_file(), 1 => prop::collection::vec(any::<u8>(), 0..300)]
}

/// Writes `bytes` to a file called `name` in a fresh folder.
fn file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

/// The text as the readers see it (BOM dropped), if it is UTF-8.
fn text_of(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)).ok()
}

/// Number of lines an error may point at.
fn line_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count() + 1
}

/// An error must name the file, and a line inside it when it names one.
fn check_error(e: &CorpusError, path: &Path, bytes: &[u8]) -> Result<(), TestCaseError> {
    let msg = e.to_string();
    prop_assert!(msg.starts_with(&path.display().to_string()), "error does not name the file: {msg}");
    if let CorpusError::At { line, .. } = e {
        prop_assert!(*line >= 1 && *line <= line_count(bytes), "line {line} outside the file: {msg}");
    }
    Ok(())
}

/// Rows the column reader must turn into tokens: non-blank, not `-DOCSTART-`.
fn token_rows(text: &str) -> usize {
    text.split('\n')
        .map(|l| l.split_ascii_whitespace().collect::<Vec<_>>())
        .filter(|c| !c.is_empty() && c[0] != "-DOCSTART-")
        .count()
}

fn column_reader(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (_d, path) = file("train.txt", bytes);
    match corpus::reader::read_tagged(&path, Columns::default(), None) {
        Err(e) => check_error(&e, &path, bytes)?,
        Ok(sentences) => {
            let text = text_of(bytes).expect("read_tagged accepted invalid UTF-8");
            let mut tokens = 0;
            for s in &sentences {
                prop_assert!(!s.tokens.is_empty(), "an empty sentence came out");
                prop_assert_eq!(s.tokens.len(), s.tags.len());
                for t in &s.tokens {
                    prop_assert!(!t.is_empty() && !t.chars().any(|c| c.is_ascii_whitespace()), "token {t:?}");
                }
                tokens += s.tokens.len();
            }
            prop_assert_eq!(tokens, token_rows(text), "a token was dropped or invented");
            // The same text in memory reads the same.
            let again = parse_tagged(&path, text, Columns::default(), None).unwrap();
            prop_assert_eq!(again.len(), sentences.len());
        }
    }
    Ok(())
}

fn score_reader(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (_d, path) = file("predictions.conll", bytes);
    for keep_docstart in [false, true] {
        match ScoreFile::read(&path, keep_docstart) {
            Err(e) => check_error(&e, &path, bytes)?,
            Ok(f) => {
                for mode in [Mode::Conlleval, Mode::Strict(corpus::tags::Scheme::Iob2)] {
                    let counts = f.score(mode);
                    let tokens: usize = f.sentences.iter().map(|(g, _)| g.len()).sum();
                    prop_assert_eq!(counts.tokens, tokens);
                    prop_assert!(counts.correct_chunks <= counts.gold_chunks.min(counts.pred_chunks));
                    let r = counts.report();
                    for x in [r.overall.precision, r.overall.recall, r.overall.f1, r.overall.accuracy] {
                        prop_assert!((0.0..=1.0).contains(&x), "rate {x}");
                    }
                    // The text report renders whatever the counts are.
                    prop_assert!(counts.conlleval_text().contains("accuracy"));
                }
            }
        }
    }
    Ok(())
}

fn vectors_reader(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (_d, path) = file("vectors.txt", bytes);
    for fold in [false, true] {
        if let Err(e) = corpus::vectors::read_vectors(&path, None, fold) {
            check_error(&e, &path, bytes)?;
        }
    }
    Ok(())
}

fn vocab_reader(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (_d, path) = file("vocab.json", bytes);
    if let Err(e) = corpus::Vocabs::load(&path) {
        check_error(&e, &path, bytes)?;
    }
    Ok(())
}

fn squad_reader(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (_d, path) = file("dev-v1.1.json", bytes);
    match corpus::qa::squad::SquadFile::read(&path) {
        Err(e) => check_error(&e, &path, bytes)?,
        Ok(f) => {
            // Every first answer it accepts is where it says (repaired if
            // need be); the others are only compared as text.
            for p in f.data.iter().flat_map(|a| &a.paragraphs) {
                for a in p.qas.iter().filter_map(|q| q.answers.first()) {
                    let got: String = p.context.chars().skip(a.answer_start).take(a.text.chars().count()).collect();
                    prop_assert_eq!(&got, &a.text);
                }
            }
            let (x, y) = f.split_by_article(1);
            prop_assert_eq!(x.data.len() + y.data.len(), f.data.len());
        }
    }
    Ok(())
}

/// SQuAD JSON: a valid skeleton with fields dropped, retyped, offsets moved.
fn squad_file() -> impl Strategy<Value = Vec<u8>> {
    let context = prop::sample::select(vec!["The Normans came.", "北京是中国的首都。", "", "a\\nb \\u00e9"]);
    let start = prop::sample::select(vec!["0", "4", "17", "-1", "\"0\"", "1e3", "99999999999999999999"]);
    let text = prop::sample::select(vec!["The", "Normans", "北京", "", "\\ud800"]);
    let answers = prop::collection::vec((text, start), 0..3).prop_map(|v| {
        v.iter().map(|(t, s)| format!("{{\"text\": \"{t}\", \"answer_start\": {s}}}")).collect::<Vec<_>>().join(", ")
    });
    let qa = (answers, prop::sample::select(vec!["\"id\": \"q\", ", "", "\"id\": 3, "]))
        .prop_map(|(a, id)| format!("{{{id}\"question\": \"Who?\", \"answers\": [{a}]}}"));
    let doc = (context, prop::collection::vec(qa, 0..3), any::<bool>()).prop_map(|(c, qas, crlf)| {
        let text = format!(
            "{{\"version\": \"1.1\", \"data\": [\n{{\"title\": \"T\", \"paragraphs\": [\n{{\"context\": \"{c}\", \"qas\": [{}]}}]}}]}}",
            qas.join(",\n")
        );
        if crlf { text.replace('\n', "\r\n") } else { text }.into_bytes()
    });
    prop_oneof![4 => doc, 1 => any_input()]
}

fn dataset_toml_reader(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (_d, path) = file("dataset.toml", bytes);
    if let Err(e) = corpus::dataset::DatasetToml::read(&path) {
        check_error(&e, &path, bytes)?;
    }
    Ok(())
}

/// A vectors file: lines of a word and a few numbers, some not numbers.
fn vectors_file() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        4 => ("[a-zA-Z中]{1,4}", prop::collection::vec(-5.0f32..5.0, 1..4))
            .prop_map(|(w, v)| format!("{w} {}", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" "))),
        1 => Just("3 2".to_string()),
        1 => Just("word nan inf".to_string()),
        1 => Just("word 1e999 x".to_string()),
        1 => any::<String>(),
    ];
    prop_oneof![
        3 => (prop::collection::vec(line, 0..12), any::<bool>()).prop_map(|(l, crlf)| l.join(if crlf { "\r\n" } else { "\n" }).into_bytes()),
        1 => any_input(),
    ]
}

/// A dataset.toml: known and unknown keys with good and bad values.
fn dataset_toml() -> impl Strategy<Value = Vec<u8>> {
    let entry = prop_oneof![
        Just("name = \"x\"".to_string()),
        Just("scheme = \"bio\"".to_string()),
        Just("scheme = \"nope\"".to_string()),
        Just("train = \"train.txt\"".to_string()),
        Just("test = 3".to_string()),
        Just("token_column = 0".to_string()),
        Just("tag_column = -1".to_string()),
        Just("qa_metric = \"cmrc\"".to_string()),
        Just("qa_metric = \"bleu\"".to_string()),
        Just("tag_column = 99999999999999999999".to_string()),
        Just("[extra]".to_string()),
        Just("colour = \"red\"".to_string()),
        Just("= =".to_string()),
        any::<String>(),
    ];
    prop_oneof![3 => prop::collection::vec(entry, 0..8).prop_map(|l| l.join("\n").into_bytes()), 1 => any_input()]
}

#[test]
fn fuzz_column_reader() {
    fuzz("column reader", any_input(), |b| column_reader(b));
}

#[test]
fn fuzz_score_reader() {
    fuzz("score reader", any_input(), |b| score_reader(b));
}

#[test]
fn fuzz_vectors_reader() {
    fuzz("vectors reader", vectors_file(), |b| vectors_reader(b));
}

#[test]
fn fuzz_vocab_reader() {
    fuzz("vocab reader", any_input(), |b| vocab_reader(b));
}

#[test]
fn fuzz_squad_reader() {
    fuzz("SQuAD reader", squad_file(), |b| squad_reader(b));
}

#[test]
fn fuzz_dataset_toml() {
    fuzz("dataset.toml reader", dataset_toml(), |b| dataset_toml_reader(b));
}

#[test]
fn the_corpus_of_interesting_inputs_still_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus");
    let targets: [(&str, fn(&[u8]) -> Result<(), TestCaseError>); 6] = [
        ("squad", squad_reader),
        ("columns", column_reader),
        ("score", score_reader),
        ("vectors", vectors_reader),
        ("vocab", vocab_reader),
        ("dataset-toml", dataset_toml_reader),
    ];
    let mut seen = 0;
    for (target, check) in targets {
        for entry in std::fs::read_dir(root.join(target)).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            if let Err(e) = check(&bytes) {
                panic!("{}: {e}", path.display());
            }
            seen += 1;
        }
    }
    assert!(seen >= 20, "only {seen} corpus files");
}

#[test]
fn a_sentence_of_twenty_thousand_tokens_is_read_whole() {
    let mut text = String::from("\u{feff}");
    for i in 0..20_000 {
        text.push_str(&format!("w{i}\t{}\r\n", if i % 7 == 0 { "B-PER" } else { "O" }));
    }
    let (_d, path) = file("long.txt", text.as_bytes());
    let s = corpus::reader::read_tagged(&path, Columns::default(), None).unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].tokens.len(), 20_000);
    assert_eq!(s[0].tokens[19_999], "w19999");
}
