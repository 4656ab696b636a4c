//! Helpers shared by the end-to-end tests: run the real binary.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub fn seqlab<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seqlab")).args(args).output().expect("seqlab runs")
}

/// Stdout of a run that must succeed (else its stderr in the failure).
pub fn ok(o: Output) -> String {
    assert!(o.status.success(), "seqlab failed:\n{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Stdout and stderr of a run that must succeed.
pub fn ok_both(o: Output) -> (String, String) {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "seqlab failed:\n{err}");
    (String::from_utf8(o.stdout).unwrap(), err)
}

/// A config file of `experiments/configs`.
pub fn config(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/configs").join(name).to_str().unwrap().to_string()
}

pub const COUNTRIES: [&str; 8] = ["Norway", "Chile", "Kenya", "Peru", "Japan", "Spain", "Egypt", "Canada"];
pub const CITIES: [&str; 8] = ["Oslo", "Lima", "Nairobi", "Cusco", "Kyoto", "Seville", "Cairo", "Ottawa"];

/// A SQuAD-format file of `n` questions: each context states three
/// capitals (drawn at random), the question asks for one of them.
pub fn squad(n: usize, seed: u64, prefix: &str) -> String {
    let mut state = seed;
    let mut next = |m: usize| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 33) % m as u64) as usize
    };
    let mut paragraphs = Vec::new();
    for i in 0..n {
        let mut countries: Vec<usize> = Vec::new();
        while countries.len() < 3 {
            let c = next(COUNTRIES.len());
            if !countries.contains(&c) {
                countries.push(c);
            }
        }
        let cities: Vec<usize> = (0..3).map(|_| next(CITIES.len())).collect();
        let mut context = String::new();
        let mut starts = Vec::new();
        for k in 0..3 {
            context.push_str(&format!("The capital of {} is ", COUNTRIES[countries[k]]));
            starts.push(context.chars().count());
            context.push_str(&format!("{}. ", CITIES[cities[k]]));
        }
        let asked = next(3);
        paragraphs.push(serde_json::json!({
            "context": context.trim_end(),
            "qas": [{
                "id": format!("{prefix}{i}"),
                "question": format!("What is the capital of {}?", COUNTRIES[countries[asked]]),
                "answers": [{"text": CITIES[cities[asked]], "answer_start": starts[asked]}]
            }]
        }));
    }
    serde_json::json!({"version": "1.1", "data": [{"title": prefix, "paragraphs": paragraphs}]}).to_string()
}

/// Trains the WordPiece tokenizer of the SQuAD-format dataset in `data`
/// (120 pieces) to `data/tokenizer.json`; returns what seqlab printed.
pub fn train_tokenizer(data: &Path) -> String {
    let tok = data.join("tokenizer.json");
    ok(seqlab(&[
        "tokenizer",
        "train",
        "--data",
        data.to_str().unwrap(),
        "--vocab-size",
        "120",
        "--out",
        tok.to_str().unwrap(),
    ]))
}

/// Small tagger sizes for training runs of seconds on the toy data.
pub const SMALL: &[&str] = &[
    "--set",
    "model.features.word_dim=24",
    "--set",
    "model.features.char_dim=12",
    "--set",
    "model.features.char_filters=16",
    "--set",
    "model.encoder.bilstm.hidden=32",
    "--set",
    "model.encoder.attention.d_model=32",
    "--set",
    "model.encoder.attention.ffn=64",
    "--set",
    "train.batch_size=8",
    "--set",
    "train.lr=0.01",
    "--set",
    "train.patience=0",
];

/// Small QA tagger sizes for generated SQuAD data.
pub const SMALL_QA: &[&str] = &[
    "--set",
    "model.features.word_dim=32",
    "--set",
    "model.features.question_match_dim=4",
    "--set",
    "model.features.cue_dim=4",
    "--set",
    "model.features.aligned_dim=16",
    "--set",
    "model.encoder.attention.d_model=32",
    "--set",
    "model.encoder.attention.ffn=64",
    "--set",
    "train.batch_size=8",
    "--set",
    "train.lr=0.005",
    "--set",
    "train.patience=0",
];
