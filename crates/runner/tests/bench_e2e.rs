//! `seqlab bench train|predict|memory` through the real binary: the JSON line, the
//! batches written for the PyTorch reference, a dataset folder as input.

mod common;

use common::{ok, seqlab};
use serde_json::Value;

const BILSTM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../benchmarks/configs/ref-bilstm-crf.toml");
const ATTENTION: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../benchmarks/configs/ref-attention-crf.toml");
const QA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/configs/qa-cross.toml");

/// Smaller layers than the reference, same code path.
const SMALL: &[&str] = &[
    "--set",
    "model.features.word_dim=16",
    "--set",
    "model.features.char_dim=8",
    "--set",
    "model.features.char_filters=8",
    "--set",
    "model.encoder.bilstm.hidden=16",
    "--set",
    "model.encoder.attention.d_model=16",
    "--set",
    "model.encoder.attention.ffn=32",
];

fn bench(workload: &str, config: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--threads", "1", "bench", workload, "--config", config, "--batch", "8", "--steps", "3"];
    args.extend(["--warmup", "1", "--json"]);
    args.extend(SMALL);
    args.extend(extra);
    let out = ok(seqlab(&args));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not one JSON line ({e}): {out}"))
}

#[test]
fn bench_reports_tokens_per_second_of_the_batches_it_dumps() {
    for (workload, config, encoder) in
        [("train", BILSTM, "bilstm"), ("predict", BILSTM, "bilstm"), ("train", ATTENTION, "attention-sinusoidal")]
    {
        let v = bench(workload, config, &[]);
        assert_eq!(v["workload"], workload);
        assert_eq!(v["encoder"], encoder);
        assert_eq!(v["decoder"], "crf");
        assert_eq!((v["batch"].as_u64(), v["steps"].as_u64()), (Some(8), Some(3)));
        let (tokens, padded) = (v["tokens"].as_f64().unwrap(), v["padded_tokens"].as_f64().unwrap());
        let seconds = v["seconds"].as_f64().unwrap();
        assert!(tokens > 0.0 && tokens <= padded && seconds > 0.0, "{v}");
        assert!((v["tokens_per_second"].as_f64().unwrap() - tokens / seconds).abs() < 1e-6 * tokens / seconds);
        assert_eq!(v["data"], "generated");
        // The untimed warm-up steps are reported on their own (on CUDA, where kernels compile).
        assert_eq!(v["warmup_steps"], 1, "{v}");
        assert!(v["warmup_seconds"].as_f64().is_some_and(|s| s > 0.0), "{v}");
    }
    // The dump holds the warm-up and timed batches the measurement ran.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("batches.json");
    let mut args = vec!["bench", "train", "--config", BILSTM, "--batch", "8", "--steps", "3", "--warmup", "1"];
    args.extend(["--dump", file.to_str().unwrap()]);
    args.extend(SMALL);
    ok(seqlab(&args));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let batches = d["batches"].as_array().unwrap();
    assert_eq!((batches.len(), d["warmup"].as_u64()), (4, Some(1)));
    let (words, tags) = (d["words"].as_i64().unwrap(), d["tags"].as_i64().unwrap());
    for b in batches {
        let n = |k: &str| b[k].as_u64().unwrap() as usize;
        let (size, len, word_len) = (n("batch"), n("len"), n("word_len"));
        let lengths: Vec<usize> =
            b["lengths"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        assert_eq!(lengths.len(), size);
        assert_eq!(lengths.iter().max(), Some(&len));
        assert_eq!(b["words"].as_array().unwrap().len(), size * len);
        assert_eq!(b["chars"].as_array().unwrap().len(), size * len * word_len);
        assert!(b["words"].as_array().unwrap().iter().all(|w| (0..words).contains(&w.as_i64().unwrap())));
        assert!(b["tags"].as_array().unwrap().iter().all(|t| (0..tags).contains(&t.as_i64().unwrap())));
    }
    let timed: u64 =
        batches[1..].iter().flat_map(|b| b["lengths"].as_array().unwrap()).map(|x| x.as_u64().unwrap()).sum();
    assert_eq!(Some(timed), bench("train", BILSTM, &[])["tokens"].as_u64());
}

/// The shipped BiLSTM-CRF's dump carries what its PyTorch twin needs beyond
/// words and characters: capitalisation ids, the (absent, on word data)
/// bigrams and the training step's token dropout rates.
#[test]
fn the_dump_carries_capitalisation_bigrams_and_token_dropout() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("batches.json");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/configs/bilstm-crf.toml");
    let mut args = vec!["bench", "train", "--config", config, "--batch", "8", "--steps", "2", "--warmup", "1"];
    args.extend(["--dump", file.to_str().unwrap()]);
    args.extend(SMALL);
    ok(seqlab(&args));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    // bilstm-crf.toml: word dropout 0.15 on word-level data, character dropout 0.1, bigrams only on characters.
    assert_eq!(
        (d["word_dropout"].as_f64(), d["char_dropout"].as_f64()),
        (Some(0.15), Some(0.1)),
        "{}",
        d["word_dropout"]
    );
    assert_eq!(d["bigrams"].as_u64(), Some(0));
    for b in d["batches"].as_array().unwrap() {
        let cells = (b["batch"].as_u64().unwrap() * b["len"].as_u64().unwrap()) as usize;
        let caps = b["caps"].as_array().unwrap();
        assert_eq!(caps.len(), cells);
        assert!(caps.iter().all(|c| c.as_u64().is_some_and(|c| c < 6)), "{caps:?}");
        assert!(caps.iter().any(|c| c.as_u64() != Some(0)), "generated words have capitals");
        assert!(
            b["bigrams"].as_array().unwrap().iter().all(|x| x.as_u64() == Some(0)),
            "no bigram ids without bigrams"
        );
    }
}

#[test]
fn bench_reads_a_dataset_folder_and_a_qa_config_needs_one() {
    let dir = tempfile::tempdir().unwrap();
    let toy = dir.path().join("toy");
    ok(seqlab(&["data", "toy", "--out", toy.to_str().unwrap(), "--sentences", "60", "--seed", "2"]));
    let v = bench("predict", ATTENTION, &["--data", toy.to_str().unwrap()]);
    assert_eq!(v["data"], toy.to_str().unwrap());
    assert_eq!(v["encoder"], "attention-sinusoidal");
    let o = seqlab(&["bench", "train", "--config", QA]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("needs --data"), "{err}");
}

/// `bench memory` on a shipped config whose character bigrams would switch
/// on for character-level data: its synthetic word-level batches leave
/// them off (as `data.bigrams = "auto"` does), and the step runs.
#[test]
fn bench_memory_runs_a_shipped_config_with_bigrams() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/configs/bilstm-crf.toml");
    let mut args = vec!["--threads", "1", "bench", "memory", "--config", config, "--batch", "2", "--seq-len", "8"];
    args.extend(["--json"]);
    args.extend(SMALL);
    let out = ok(seqlab(&args));
    let line: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not one JSON line ({e}): {out}"));
    assert!(line.get("error").is_none(), "{line}");
    assert!(line["peak_bytes"].as_f64().unwrap() > 0.0, "{line}");
}
