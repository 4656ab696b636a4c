//! Sliding-window tagging through the real binary: a long generated
//! document tagged in windows equals it tagged whole when every owned
//! token's window covers the model's receptive field, and uneven overlaps
//! never lose a token.

use std::path::Path;
mod common;

use common::{ok_both as ok, seqlab};

/// Predicted tags, one per token line of `predict --format conll` output.
fn predicted(conll: &str) -> Vec<String> {
    conll.lines().filter(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().last().unwrap().to_string()).collect()
}

#[test]
fn windowed_tagging_of_a_long_document() {
    let work = tempfile::tempdir().unwrap();
    let w = |p: &str| work.path().join(p).to_str().unwrap().to_string();
    ok(seqlab(&["data", "toy", "--out", &w("toy"), "--sentences", "120", "--seed", "9"]));
    // One long document: the whole test split with its sentence breaks removed.
    let test = std::fs::read_to_string(work.path().join("toy/test.txt")).unwrap();
    let doc: String = test.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("{l}\n")).collect();
    let tokens = doc.lines().count();
    assert!(tokens > 100, "document of {tokens} tokens");
    std::fs::create_dir(work.path().join("long")).unwrap();
    for f in ["train.txt", "dev.txt"] {
        std::fs::copy(work.path().join("toy").join(f), work.path().join("long").join(f)).unwrap();
    }
    std::fs::write(work.path().join("long/test.txt"), &doc).unwrap();
    std::fs::write(work.path().join("doc.conll"), &doc).unwrap();

    // One layer of local attention (±2 tokens) with relative positions: a
    // token's emissions depend on the tokens within 2 of it only, and not on
    // where the window starts.
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/configs/attention-relative-crf.toml");
    let mut args: Vec<String> = ["train", "--config", cfg.to_str().unwrap(), "--data", &w("toy"), "--out", &w("run")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for set in [
        "model.features.word_dim=16",
        "model.features.char_dim=8",
        "model.features.char_filters=8",
        "model.encoder.attention.d_model=16",
        "model.encoder.attention.heads=2",
        "model.encoder.attention.ffn=32",
        "model.encoder.attention.layers=1",
        "model.encoder.attention.impl=local",
        "model.encoder.attention.window=2",
        "train.epochs=8",
        "train.batch_size=8",
        "train.lr=0.01",
    ] {
        args.extend(["--set".to_string(), set.to_string()]);
    }
    args.push("--quiet".into());
    ok(seqlab(&args.iter().map(String::as_str).collect::<Vec<_>>()));

    let predict = |extra: &[&str]| {
        let (run, doc_path) = (w("run"), w("doc.conll"));
        let mut a = vec!["predict", "--run", &run, "--input", &doc_path, "--input-format", "conll"];
        if !extra.contains(&"--format") {
            a.extend(["--format", "conll"]);
        }
        a.extend_from_slice(extra);
        ok(seqlab(&a))
    };
    let (whole, err) = predict(&[]);
    assert!(!err.contains("windows"), "{err}");
    let whole = predicted(&whole);
    assert_eq!(whole.len(), tokens);
    // Windows of 16 every 8: each token is owned by a window where it has at
    // least 4 tokens of context on each side (≥ the ±2 receptive field).
    let (windowed, err) = predict(&["--max-len", "16", "--stride", "8"]);
    assert!(err.contains("1 of 1 sentences") && err.contains("overlapping windows"), "{err}");
    assert_eq!(predicted(&windowed), whole, "windowed tagging differs from tagging whole");
    assert!(whole.iter().any(|t| t != "O"), "the model tags everything O: {whole:?}");
    // The per-token CRF marginals agree too, to float rounding; windows too
    // small for the receptive field (margin 1 < 2) visibly do not.
    let confidence = |extra: &[&str]| {
        let mut a = vec!["--format", "jsonl"];
        a.extend_from_slice(extra);
        let (out, _) = predict(&a);
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        v["confidence"].as_array().unwrap().iter().map(|c| c.as_f64().unwrap()).collect::<Vec<f64>>()
    };
    let worst = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    let c_whole = confidence(&[]);
    assert_eq!(c_whole.len(), tokens);
    let d = worst(&c_whole, &confidence(&["--max-len", "16", "--stride", "8"]));
    assert!(d < 1e-4, "windowed confidences differ by {d}");
    let d = worst(&c_whole, &confidence(&["--max-len", "4", "--stride", "1"]));
    assert!(d > 1e-3, "windows smaller than the receptive field should change the scores (max difference {d})");
    // Uneven overlaps (7 tokens every 3, and a stride longer than half the
    // window): one tag per token, none lost, none doubled.
    for (len, stride) in [("7", "3"), ("10", "9"), ("5", "5")] {
        let (out, _) = predict(&["--max-len", len, "--stride", stride]);
        let tags = predicted(&out);
        assert_eq!(tags.len(), tokens, "max_len {len} stride {stride}");
        let words: Vec<&str> =
            out.lines().filter(|l| !l.trim().is_empty()).map(|l| l.split(' ').next().unwrap()).collect();
        let gold: Vec<&str> = doc.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(words, gold, "tokens out of order or lost (max_len {len} stride {stride})");
        // One Viterbi over the stitched scores: no illegal BIO transition at a seam.
        for (i, t) in tags.iter().enumerate().filter(|(_, t)| t.starts_with("I-")) {
            let prev = if i == 0 { "O" } else { tags[i - 1].as_str() };
            assert!(prev.len() > 2 && prev[2..] == t[2..], "token {i}: {prev} → {t} (max_len {len} stride {stride})");
        }
    }
    // eval reports how many sequences were windowed, and scores every token.
    let (json, _) =
        ok(seqlab(&["eval", "--run", &w("run"), "--data", &w("long"), "--json", "--max-len", "7", "--stride", "3"]));
    let r: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(r["windowed"], 1, "{r}");
    assert_eq!(r["sentences"], 1, "{r}");
    assert_eq!(r["overall"]["tokens"], tokens, "{r}");
}
