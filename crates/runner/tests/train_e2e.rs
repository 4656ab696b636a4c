//! End to end, through the real binary, on tiny generated data: train,
//! eval, predict, compare. Small models and few epochs keep each run to
//! seconds.

use std::path::{Path, PathBuf};
mod common;

use common::{ok, ok_both, seqlab, SMALL};
use std::process::Command;
use std::sync::OnceLock;

/// A toy dataset shared by the tests of this file.
fn toy() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        ok(seqlab(&["data", "toy", "--out", d.path().to_str().unwrap(), "--sentences", "300", "--seed", "5"]));
        d
    })
    .path()
}

/// `seqlab train` arguments: `config` (a file of experiments/configs) on the
/// toy data, with the small sizes and `extra`.
fn train_args(config: &str, out: &Path, seed: &str, epochs: &str, extra: &[&str]) -> Vec<String> {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/configs").join(config);
    let mut args: Vec<String> = ["train", "--config", cfg.to_str().unwrap(), "--data", toy().to_str().unwrap()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--out", out.to_str().unwrap(), "--seed", seed, "--epochs", epochs, "--quiet"].map(String::from));
    args.extend(SMALL.iter().chain(extra).map(|s| s.to_string()));
    args
}

fn train(config: &str, out: &Path, seed: &str, epochs: &str, extra: &[&str]) -> String {
    ok(seqlab(&train_args(config, out, seed, epochs, extra)))
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// (train_loss, dev_f1) per epoch from metrics.csv.
fn metrics(dir: &Path) -> Vec<(f64, f64)> {
    let text = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (l, f) = (col("train_loss"), col("dev_f1"));
    lines
        .map(|row| {
            let c: Vec<&str> = row.split(',').collect();
            (c[l].parse().unwrap(), c[f].parse().unwrap())
        })
        .collect()
}

#[test]
fn bilstm_crf_learns_writes_every_file_and_predict_reproduces_eval() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    let out = train("bilstm-crf.toml", &run, "1", "4", &[]);
    assert!(out.contains("test F1"), "{out}");
    for f in ["config.toml", "vocab.json", "model.ckpt", "metrics.csv", "summary.json", "predictions.test.conll"] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    let m = metrics(&run);
    assert_eq!(m.len(), 4);
    assert!(m[3].0 < m[0].0 * 0.5, "loss did not fall: {m:?}");
    let s = json(&run.join("summary.json"));
    for key in [
        "name",
        "encoder",
        "decoder",
        "dataset",
        "params",
        "epochs",
        "best_epoch",
        "train_seconds",
        "tokens_per_second",
    ] {
        assert!(!s[key].is_null(), "summary lacks {key}");
    }
    assert_eq!(s["encoder"], "bilstm");
    assert_eq!(s["decoder"], "crf");
    let test_f1 = s["test"]["f1"].as_f64().unwrap();
    assert!(test_f1 > 0.8, "test F1 {test_f1}");
    assert!(s["test"]["per_type"]["PER"]["f1"].as_f64().is_some());
    // The resolved config reads back.
    let cfg = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(cfg.contains("hidden = 32"), "{cfg}");

    // eval --json equals the summary's test figures.
    let ev: serde_json::Value =
        serde_json::from_str(&ok(seqlab(&["eval", "--run", run.to_str().unwrap(), "--json"]))).unwrap();
    assert_eq!(ev["overall"]["f1"], s["test"]["f1"]);
    assert_eq!(ev["overall"]["correct_chunks"], s["test"]["correct_chunks"]);

    // predict on the test file, then score it: the same figures again.
    let test_file = toy().join("test.txt");
    let pred = ok(seqlab(&["predict", "--run", run.to_str().unwrap(), "--input", test_file.to_str().unwrap()]));
    let pred_file = work.path().join("pred.conll");
    std::fs::write(&pred_file, &pred).unwrap();
    let sc: serde_json::Value =
        serde_json::from_str(&ok(seqlab(&["score", "--json", pred_file.to_str().unwrap()]))).unwrap();
    assert_eq!(sc["overall"], ev["overall"]);
    assert_eq!(pred, std::fs::read_to_string(run.join("predictions.test.conll")).unwrap());

    // Raw text in, JSON lines out, with spans and confidences.
    let text = work.path().join("in.txt");
    std::fs::write(&text, "John Smith visited Paris on Monday .\nprices fell .\n").unwrap();
    let jl = ok(seqlab(&[
        "predict",
        "--run",
        run.to_str().unwrap(),
        "--input",
        text.to_str().unwrap(),
        "--format",
        "jsonl",
    ]));
    let lines: Vec<serde_json::Value> = jl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["tokens"].as_array().unwrap().len(), 7);
    assert_eq!(lines[0]["tags"].as_array().unwrap().len(), 7);
    let conf = lines[0]["confidence"].as_array().unwrap();
    assert!(conf.iter().all(|c| (0.0..=1.0 + 1e-6).contains(&c.as_f64().unwrap())));
    let spans = lines[0]["spans"].as_array().unwrap();
    assert!(spans.iter().any(|s| s["label"] == "LOC" && s["text"] == "Paris"), "{jl}");

    predict_top_k_lists_the_best_tag_sequences(&run, &test_file, &pred, &text, work.path());
}

/// `predict --top-k`: the K best tag sequences of each sentence, best
/// first, the first being the one `predict` gives, with probabilities that
/// fall and sum to at most one; CoNLL blocks and JSONL lists; a clear
/// error for K = 0 and a note for sentences with fewer than K sequences.
fn predict_top_k_lists_the_best_tag_sequences(run: &Path, test_file: &Path, best: &str, text: &Path, work: &Path) {
    let run = run.to_str().unwrap();
    let conll = ok(seqlab(&["predict", "--run", run, "--input", test_file.to_str().unwrap(), "--top-k", "3"]));
    let sentences: Vec<&str> = best.split("\n\n").filter(|s| !s.trim().is_empty()).collect();
    let blocks: Vec<&str> = conll.split("\n\n").filter(|s| !s.trim().is_empty()).collect();
    let mut b = 0;
    for (i, sentence) in sentences.iter().enumerate() {
        let mut last = f64::INFINITY;
        let mut sum = 0.0;
        for c in 1..=3 {
            let Some(block) =
                blocks.get(b).filter(|bl| bl.starts_with(&format!("# sentence {} candidate {c} of", i + 1)))
            else {
                break;
            };
            b += 1;
            let (head, tokens) = block.split_once('\n').unwrap();
            let p: f64 = head.rsplit(' ').next().unwrap().parse().unwrap();
            assert!(p <= last + 1e-9 && p > 0.0, "sentence {}: probabilities {last} then {p}", i + 1);
            (last, sum) = (p, sum + p);
            if c == 1 {
                assert_eq!(tokens.trim_end(), sentence.trim_end(), "the first candidate is predict's path");
            } else {
                assert_ne!(
                    tokens.trim_end(),
                    sentence.trim_end(),
                    "sentence {}: candidate {c} repeats the best",
                    i + 1
                );
            }
        }
        assert!(sum <= 1.0 + 1e-6, "sentence {}: probabilities sum to {sum}", i + 1);
    }
    assert_eq!(b, blocks.len(), "every block belongs to a sentence");
    assert!(blocks.len() > 2 * sentences.len(), "most sentences have 3 candidates: {} blocks", blocks.len());

    let jl =
        ok(seqlab(&["predict", "--run", run, "--input", text.to_str().unwrap(), "--format", "jsonl", "--top-k", "4"]));
    for line in jl.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let top = v["top_k"].as_array().unwrap();
        assert_eq!(top.len(), 4, "{line}");
        assert_eq!(top[0]["tags"], v["tags"], "{line}");
        assert_eq!(top[0]["spans"], v["spans"], "{line}");
        assert!(top.windows(2).all(|w| w[0]["probability"].as_f64() >= w[1]["probability"].as_f64()), "{line}");
    }

    // K = 0 is refused; a one-word sentence has fewer than 50 sequences.
    let o = seqlab(&["predict", "--run", run, "--input", text.to_str().unwrap(), "--top-k", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--top-k 0") && err.contains("K ≥ 1"), "{err}");
    let one = work.join("one.txt");
    std::fs::write(&one, "Paris\n").unwrap();
    let o = seqlab(&["predict", "--run", run, "--input", one.to_str().unwrap(), "--top-k", "50"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let out = ok(o);
    let n = out.matches("# sentence 1 candidate").count();
    assert!((2..50).contains(&n), "{out}");
    assert!(
        err.contains(&format!(
            "1 of 1 sentences have fewer than --top-k 50 candidates and list all they have (sentence 1 has {n})"
        )),
        "{err}"
    );
}

/// A run on character-level Chinese remembers it: raw text without spaces
/// is cut into characters, and tagged as the same sentences in columns are.
#[test]
fn predict_cuts_raw_chinese_text_as_the_training_data_was() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("zh");
    ok(seqlab(&["data", "toy", "--lang", "zh", "--out", data.to_str().unwrap(), "--sentences", "200", "--seed", "3"]));
    let run = work.path().join("run");
    let cfg = common::config("bilstm-crf.toml");
    let mut args = vec!["train", "--config", &cfg, "--data", data.to_str().unwrap(), "--out", run.to_str().unwrap()];
    args.extend(["--epochs", "2", "--quiet"]);
    args.extend(SMALL);
    ok(seqlab(&args));
    let vocab = json(&run.join("vocab.json"));
    assert_eq!(vocab["tokenization"], "chars");
    // Character-level data: the shipped config's bigrams switch on.
    let bigrams = vocab["bigrams"].as_array().expect("a bigram vocabulary");
    assert!(bigrams.len() > 100 && bigrams[2].as_str().unwrap().contains(' '), "{bigrams:?}");
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("bigram_dim = 50"), "{config}");

    // The test sentences as raw lines (characters joined, no spaces) and
    // the tags the run gave them in columns.
    let conll = std::fs::read_to_string(run.join("predictions.test.conll")).unwrap();
    let sentences: Vec<Vec<(&str, &str)>> = conll
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| b.lines().map(|l| l.split(' ').collect::<Vec<_>>()).map(|c| (c[0], c[2])).collect())
        .collect();
    let raw: String = sentences.iter().map(|s| s.iter().map(|(t, _)| *t).collect::<String>() + "\n").collect();
    let text = work.path().join("raw.txt");
    std::fs::write(&text, &raw).unwrap();
    let predict = |extra: &[&str]| {
        let mut a =
            vec!["predict", "--run", run.to_str().unwrap(), "--input", text.to_str().unwrap(), "--format", "jsonl"];
        a.extend(extra);
        let out = ok(seqlab(&a));
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect::<Vec<serde_json::Value>>()
    };
    let lines = predict(&[]);
    assert_eq!(lines.len(), sentences.len());
    for (line, s) in lines.iter().zip(&sentences) {
        let tokens: Vec<&str> = line["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        let tags: Vec<&str> = line["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert_eq!(tokens, s.iter().map(|(t, _)| *t).collect::<Vec<_>>());
        assert_eq!(tags, s.iter().map(|(_, g)| *g).collect::<Vec<_>>(), "raw text tagged unlike its columns");
    }
    // --tokenize words overrides: each line is then one token.
    for line in predict(&["--tokenize", "words"]) {
        assert_eq!(line["tokens"].as_array().unwrap().len(), 1, "{line}");
    }
}

#[test]
fn same_seed_twice_gives_identical_metrics() {
    let work = tempfile::tempdir().unwrap();
    let (a, b) = (work.path().join("a"), work.path().join("b"));
    train("bilstm-crf.toml", &a, "7", "2", &[]);
    // The second run verbose: the same run, and each epoch's batch shapes.
    let mut args = train_args("bilstm-crf.toml", &b, "7", "2", &[]);
    args.retain(|a| a != "--quiet");
    args.push("--verbose".into());
    let (out, err) = ok_both(seqlab(&args));
    let said = format!("{out}{err}");
    assert!(said.contains("first batch done"), "{said}");
    for epoch in 1..=2 {
        let line =
            said.lines().find(|l| l.starts_with(&format!("epoch {epoch}: "))).unwrap_or_else(|| panic!("{said}"));
        assert!(line.contains("batch shapes over") && line.contains("(each padded to its longest)"), "{line}");
        assert!(!line.contains("kernels"), "the CPU compiles no kernels: {line}");
    }
    assert_eq!(metrics(&a), metrics(&b));
    // Word-level data: the shipped config's bigrams stay off, and say so.
    assert!(json(&a.join("vocab.json")).get("bigrams").is_none());
    assert!(std::fs::read_to_string(a.join("config.toml")).unwrap().contains("bigram_dim = 0"));
    let (sa, sb) = (json(&a.join("summary.json")), json(&b.join("summary.json")));
    assert_eq!(sa["test"], sb["test"]);
    assert_eq!(
        std::fs::read(a.join("predictions.test.conll")).unwrap(),
        std::fs::read(b.join("predictions.test.conll")).unwrap()
    );
}

#[test]
fn attention_softmax_trains_and_compare_reports_the_runs() {
    let work = tempfile::tempdir().unwrap();
    let runs: Vec<PathBuf> = ["attention-softmax.toml", "attention-relative-crf.toml"]
        .iter()
        .map(|c| {
            let dir = work.path().join(c.trim_end_matches(".toml"));
            // Character dropout from the command line (words too, by the configs).
            train(c, &dir, "1", "3", &["--set", "train.warmup_fraction=0.1", "--set", "train.char_dropout=0.1"]);
            let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
            assert!(config.contains("char_dropout = 0.1"), "{config}");
            let m = metrics(&dir);
            assert!(m[2].0 < m[0].0, "{c}: loss did not fall: {m:?}");
            assert!(m[2].1 > 0.3, "{c}: dev F1 {m:?}");
            dir
        })
        .collect();
    let out = work.path().join("cmp");
    let mut args = vec!["compare", "--out", out.to_str().unwrap(), "--samples", "200"];
    args.extend(runs.iter().map(|r| r.to_str().unwrap()));
    let md = ok(seqlab(&args));
    assert!(md.contains("attention-sinusoidal"), "{md}");
    assert!(md.contains("attention-relative"), "{md}");
    assert!(md.contains("Paired bootstrap"), "{md}");
    let csv = std::fs::read_to_string(out.join("comparison.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert!(csv.lines().next().unwrap().contains("test_f1_PER"));
    let svg = std::fs::read_to_string(out.join("dev-f1.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("attention-softmax"), "plot lacks a run label");
    // report.html: the tables, curves, per-type bars, and links that reach
    // each run's files from the report's folder.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for part in
        ["Settings (seeds grouped: mean ± std)", "dev F1 per epoch", "training loss per epoch", "Paired bootstrap"]
    {
        assert!(html.contains(part), "report.html lacks {part}");
    }
    assert!(html.contains(">PER</text>"), "per-type bars lack the PER group");
    let hrefs: Vec<&str> = html.split("href=\"").skip(1).map(|s| s.split('"').next().unwrap()).collect();
    assert!(hrefs.iter().any(|h| h.ends_with("attention-softmax/summary.json")), "{hrefs:?}");
    for h in &hrefs {
        assert!(out.join(h).is_file(), "report.html links to a missing {h}");
    }
    // Head diagnostics: written at the end of training, and on demand.
    for run in &runs {
        let csv = std::fs::read_to_string(run.join("heads.csv")).unwrap();
        assert!(csv.starts_with("layer,head,entropy,boundary_share,distance,redundancy,collapsed,queries"), "{csv}");
        assert_eq!(csv.lines().count(), 1 + 2 * 4, "2 layers × 4 heads:\n{csv}");
    }
    let heads_out = work.path().join("heads");
    std::fs::create_dir(&heads_out).unwrap();
    let lines = ok(seqlab(&[
        "heads",
        "--run",
        runs[0].to_str().unwrap(),
        "--split",
        "test",
        "--json",
        "--out",
        heads_out.to_str().unwrap(),
    ]));
    let report: serde_json::Value = serde_json::from_str(&lines).unwrap();
    let heads = report["heads"].as_array().unwrap();
    assert_eq!(heads.len(), 8);
    let layers = report["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2, "{report}");
    for (l, layer) in layers.iter().enumerate() {
        assert_eq!((layer["layer"].as_u64(), layer["heads"].as_u64()), (Some(l as u64), Some(4)), "{layer}");
        let of_layer: Vec<&serde_json::Value> = heads.iter().filter(|h| h["layer"] == layer["layer"]).collect();
        let mean = of_layer.iter().map(|h| h["entropy"].as_f64().unwrap()).sum::<f64>() / 4.0;
        assert!((layer["entropy"].as_f64().unwrap() - mean).abs() < 1e-9, "{layer}");
    }
    for h in heads {
        for k in ["entropy", "boundary_share", "redundancy"] {
            let v = h[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{k} = {v}: {h}");
        }
        assert!(h["distance"].as_f64().unwrap() >= 0.0 && h["queries"].as_u64().unwrap() > 0);
    }
    assert!(heads_out.join("heads.test.csv").is_file());
    bf16_inference_scores_as_f32_and_training_refuses_it(&runs[1], work.path());
    explain_erases_and_reports_every_method(&runs[1], work.path());
    // Pictures of one sentence, and of Chinese text (split into characters:
    // the run was trained on English words, so --tokenize says so).
    let vis = work.path().join("vis");
    let out = ok(seqlab(&[
        "visualize",
        "--run",
        runs[1].to_str().unwrap(),
        "--text",
        "人工智能改变了北京的大学和上海的公司",
        "--tokenize",
        "chars",
        "--focus",
        "智",
        "--max-tokens",
        "6",
        "--out",
        vis.to_str().unwrap(),
    ]));
    assert!(out.contains("index.html"), "{out}");
    let html = std::fs::read_to_string(vis.join("index.html")).unwrap();
    assert!(html.contains("<td>人</td>"), "predicted tags table lacks the tokens");
    let srcs: Vec<&str> = html.split("src=\"").skip(1).map(|s| s.split('"').next().unwrap()).collect();
    assert_eq!(srcs.len(), 4 + 1 + 4, "4 heads, the clustered mean, 4 focus charts: {srcs:?}");
    for src in &srcs {
        let svg = std::fs::read_to_string(vis.join(src)).unwrap_or_else(|_| panic!("index.html names a missing {src}"));
        assert!(svg.starts_with("<svg") && svg.contains("Noto Sans CJK SC"));
        assert!(svg.matches(r#"class="col""#).count() <= 6, "{src} has more than --max-tokens labels");
        assert!(svg.contains(":智</text>"), "{src} lacks the CJK label as text");
    }
    let heat = std::fs::read_to_string(vis.join("layer1-head0.svg")).unwrap();
    assert!(heat.contains("omitted tokens 6–17"), "the title must say what is left out");
    let order: serde_json::Value = json(&vis.join("layer1-clustered-order.json"));
    let mut rows: Vec<u64> = order["rows"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    rows.sort();
    assert_eq!(rows, (0..6).collect::<Vec<u64>>());
    // Errors: a focus that is not in the sentence.
    let o = seqlab(&[
        "visualize",
        "--run",
        runs[1].to_str().unwrap(),
        "--text",
        "a b",
        "--focus",
        "zzz",
        "--out",
        vis.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--focus `zzz`"));
}

/// `seqlab explain` on a trained attention-CRF: every method's AOPC in
/// the summary, the files, and a clear error for `--max-k 0`.
fn explain_erases_and_reports_every_method(run: &Path, work: &Path) {
    let out = work.join("explain");
    let run = run.to_str().unwrap();
    let args = ["explain", "--run", run, "--items", "30", "--max-k", "3", "--out", out.to_str().unwrap()];
    let summary = ok(seqlab(&args));
    for method in ["attention", "rollout", "gradient", "random"] {
        assert!(summary.contains(&format!("| {method} | ")), "{method}:\n{summary}");
    }
    assert!(summary.contains("30 predictions"), "{summary}");
    let items = std::fs::read_to_string(out.join("items.csv")).unwrap();
    assert_eq!(items.lines().count(), 1 + 30 * 4, "{items}");
    assert!(items.starts_with("sentence,start,end,label,candidates,method,prob,aopc,prob_erased_1"));
    let curves = std::fs::read_to_string(out.join("curves.csv")).unwrap();
    assert_eq!(curves.lines().count(), 1 + 4 * 4);
    assert!(out.join("curves.svg").is_file() && out.join("summary.md").is_file());
    let o = seqlab(&["explain", "--run", run, "--max-k", "0"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--max-k"));
}

/// `--precision bf16`: eval of an attention run within bf16's rounding of
/// the f32 scores where the CPU has AVX-512 BF16 (a clear error where it
/// has not); refused for training and for a device other than the CPU.
fn bf16_inference_scores_as_f32_and_training_refuses_it(run: &Path, work: &Path) {
    let eval = |precision: &str, device: &str| {
        seqlab(&["--precision", precision, "eval", "--run", run.to_str().unwrap(), "--device", device, "--json"])
    };
    let f32_scores: serde_json::Value = serde_json::from_str(&ok(eval("f32", "cpu"))).unwrap();
    let o = eval("bf16", "cpu");
    if encoders::ops::bf16_gemm::available() {
        let bf16_scores: serde_json::Value = serde_json::from_str(&ok(o)).unwrap();
        for key in ["f1", "accuracy"] {
            let (a, b) = (f32_scores["overall"][key].as_f64().unwrap(), bf16_scores["overall"][key].as_f64().unwrap());
            assert!((a - b).abs() <= 0.01, "{key}: f32 {a}, bf16 {b}");
        }
        let o = eval("bf16", "ndarray");
        assert!(String::from_utf8_lossy(&o.stderr).contains("cpu device"), "{}", String::from_utf8_lossy(&o.stderr));
    } else {
        assert!(String::from_utf8_lossy(&o.stderr).contains("AVX-512 BF16"), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let mut args = train_args("bilstm-crf.toml", &work.join("bf16-train"), "1", "1", &[]);
    args.splice(0..0, ["--precision".to_string(), "bf16".to_string()]);
    let o = seqlab(&args);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("training runs in f32"));
}

#[test]
fn bad_config_key_and_missing_data_are_clear_errors() {
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("bad.toml");
    std::fs::write(&cfg, "[train]\nepochs = 2\nbatchsize = 3\n").unwrap();
    let o = seqlab(&["train", "--config", cfg.to_str().unwrap(), "--data", toy().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.toml:3:") && err.contains("unknown field `batchsize`"), "{err}");
    let o = seqlab(&["train", "--data", work.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope"));
    let o = seqlab(&["heads", "--run", work.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a seqlab run folder"));
}

#[test]
fn pretrained_vectors_initialise_words_and_coverage_is_reported() {
    let work = tempfile::tempdir().unwrap();
    let vectors = work.path().join("glove.txt");
    // 8-dimensional vectors for a few toy words (one deliberately absent from the data).
    let words = ["visited", "said", "Paris", "London", "the", "zzzunseen"];
    let text: String = words
        .iter()
        .enumerate()
        .map(|(i, w)| format!("{w} {}\n", vec![format!("{}", i as f32 * 0.1); 8].join(" ")))
        .collect();
    std::fs::write(&vectors, text).unwrap();
    let run = work.path().join("run");
    let set = format!("data.pretrained={}", vectors.display());
    let args = train_args("bilstm-crf.toml", &run, "1", "1", &["--set", &set]);
    let o = seqlab(&args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("model.features.word_dim set to 8"), "{err}");
    assert!(err.contains("pretrained vectors") && err.contains("5 of "), "{err}");
    let cfg = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(cfg.contains("word_dim = 8"), "{cfg}");
}

#[test]
fn memory_budget_is_planned_and_reported() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    let args = |budget: &str| train_args("attention-crf.toml", &run, "1", "1", &["--max-memory", budget]);
    // Far too small: a clear error before any training.
    let o = seqlab(&args("1MiB"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("does not fit in 1 MiB") && err.contains("--max-memory"), "{err}");
    assert!(!run.join("model.ckpt").exists());
    // Ample: the configured batch is kept, and the decision is printed.
    let o = seqlab(&args("64GiB"));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("memory plan for 64.00 GiB: keeping the configured settings"), "{err}");
    // A budget that is not a size.
    let o = seqlab(&args("lots"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected a size such as 8GiB"));
}

#[test]
fn heads_sweep_report_groups_runs_by_head_count() {
    let work = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for (heads, seed) in [("1", "1"), ("1", "2"), ("2", "1")] {
        let dir = work.path().join(format!("h{heads}-s{seed}"));
        let set = format!("model.encoder.attention.heads={heads}");
        train("attention-crf.toml", &dir, seed, "2", &["--set", &set]);
        runs.push(dir);
    }
    let pictures = work.path().join("pics");
    ok(seqlab(&[
        "visualize",
        "--run",
        runs[2].to_str().unwrap(),
        "--sentence",
        "0",
        "--data",
        toy().to_str().unwrap(),
        "--out",
        pictures.join("h2").to_str().unwrap(),
    ]));
    let out = work.path().join("sweep.md");
    let mut args = vec!["heads-sweep", "--out", out.to_str().unwrap(), "--pictures", pictures.to_str().unwrap()];
    args.extend(runs.iter().map(|r| r.to_str().unwrap()));
    let md = ok(seqlab(&args));
    assert_eq!(md, std::fs::read_to_string(&out).unwrap());
    let row =
        |prefix: &str| md.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} row:\n{md}"));
    // Whole training set, attention dropout 0.1 (the config's), heads × head_dim.
    assert!(row("| all | 1 × 32 | 0.1 | 2 |").contains(" of 2 |"), "{md}");
    assert!(row("| all | 2 × 16 | 0.1 | 1 |").contains("[h2](pics/h2/index.html)"), "{md}");
}

#[test]
fn a_run_folder_is_locked_while_training_and_a_stale_lock_is_taken_over() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    let args = |epochs: &str| train_args("bilstm-crf.toml", &run, "1", epochs, &[]);
    let mut first = Command::new(env!("CARGO_BIN_EXE_seqlab")).args(args("500")).spawn().unwrap();
    let lock = run.join(".lock");
    let t0 = std::time::Instant::now();
    // The file is created, locked, then given the pid: wait for the pid
    // (reading between the first two steps gave "" in CI).
    let written = || std::fs::read_to_string(&lock).ok().filter(|s| !s.trim().is_empty());
    let pid = loop {
        if let Some(pid) = written() {
            break pid;
        }
        assert!(t0.elapsed().as_secs() < 60, "no lock file with a pid appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(pid.trim(), first.id().to_string());
    let second = seqlab(&args("1"));
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(err.contains("in use by another seqlab train") && err.contains(&first.id().to_string()), "{err}");
    // Killed: the lock stays behind, and the next run takes it over and removes it at the end.
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(lock.exists());
    let third = seqlab(&args("1"));
    let err = String::from_utf8_lossy(&third.stderr);
    assert!(third.status.success(), "{err}");
    assert!(err.contains("was left by a run that is gone"), "{err}");
    // A BiLSTM run has no attention heads to diagnose or draw.
    let o = seqlab(&["heads", "--run", run.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no attention heads"));
    let o = seqlab(&["visualize", "--run", run.to_str().unwrap(), "--text", "a b", "--out", run.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no attention to draw"));
    assert!(!lock.exists(), "the lock outlived its run");
}

/// Checkpoint state files in `dir`, sorted.
fn checkpoint_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("checkpoint-e") && n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// Starts a training run and waits until a checkpoint satisfying `ready` exists.
fn start_until(args: &[String], dir: &Path, ready: impl Fn(&str) -> bool) -> std::process::Child {
    let child =
        Command::new(env!("CARGO_BIN_EXE_seqlab")).args(args).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let t0 = std::time::Instant::now();
    while !dir.exists() || !checkpoint_names(dir).iter().any(|n| ready(n)) {
        assert!(t0.elapsed().as_secs() < 120, "no checkpoint appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child
}

/// Trains 6 epochs with `average`'s settings whole, and again with
/// checkpoints every 5 steps, killed inside epoch 2 and resumed past a
/// damaged newest checkpoint: the same metrics. The resumed run's folder.
fn killed_and_resumed_gives_the_whole_runs_metrics(work: &Path, average: &[&str]) -> PathBuf {
    let whole = work.join("whole");
    train("bilstm-crf.toml", &whole, "3", "6", average);
    // The same run with checkpoints every 5 steps, killed (SIGKILL) once
    // one inside epoch 2 is written: it resumes mid-epoch.
    let cut = work.join("cut");
    let args =
        train_args("bilstm-crf.toml", &cut, "3", "6", &[average, &["--set", "train.checkpoint_every=5"]].concat());
    let mut child = start_until(&args, &cut, |n| n.starts_with("checkpoint-e0001-b") && !n.contains("-b000000"));
    assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!cut.join("summary.json").exists());
    // A damaged newest checkpoint is skipped for the one before.
    let newest = checkpoint_names(&cut).pop().unwrap();
    let model = cut.join(newest.replace(".json", ".model"));
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    let o = seqlab(&["train", "--resume", cut.to_str().unwrap(), "--quiet"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("skipping the checkpoint at epoch") && err.contains("truncated"), "{err}");
    let a = metrics(&whole);
    let b = metrics(&cut);
    assert_eq!(a.len(), 6);
    assert_eq!(a, b, "resumed run differs from the uninterrupted one");
    let f1 = |d: &Path| json(&d.join("summary.json"))["test"]["f1"].as_f64().unwrap();
    assert_eq!(f1(&whole), f1(&cut));
    // The weight average too, weight for weight (on toy data every epoch
    // from the second scores dev F1 1.0, whatever the average holds).
    let (a, b) = (last_average(&whole), last_average(&cut));
    assert!(a.len() > 1000);
    assert!(a == b, "the resumed run's weight average differs");
    cut
}

/// Every weight of the average in a 6-epoch run's last checkpoint.
fn last_average(dir: &Path) -> Vec<f32> {
    use burn::module::{Module, ModuleVisitor, Param};
    use burn::tensor::Tensor;
    type B = burn::backend::NdArray<f32>;
    struct Collect(Vec<f32>);
    impl ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.extend(param.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let run = runner::infer::run::LoadedRun::load(dir).unwrap();
    let device = Default::default();
    let model = runner::setup::model::build_model::<B>(&run.cfg, &run.vocabs, None, &device);
    let average = dir.join("checkpoint-e0006-b000000.average");
    let model = runner::train::rundir::load_module::<B, _>(model, &average, &device).unwrap();
    let mut c = Collect(Vec::new());
    model.visit(&mut c);
    c.0
}

#[test]
fn a_killed_run_resumes_to_the_same_metrics() {
    let work = tempfile::tempdir().unwrap();
    // With weight averaging, whose running average the checkpoints carry.
    let cut = killed_and_resumed_gives_the_whole_runs_metrics(work.path(), &["--set", "train.average_decay=0.9"]);
    // Nothing to resume: a clear error.
    let o = seqlab(&["train", "--resume", work.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a seqlab run folder"));
    // A fresh run into a folder with old checkpoints starts clean (they are removed).
    train("bilstm-crf.toml", &cut, "3", "1", &[]);
    assert_eq!(checkpoint_names(&cut), vec!["checkpoint-e0001-b000000.json".to_string()]);
}

/// Stochastic weight averaging from epoch 1: the checkpoint inside epoch 2
/// carries the mean of one epoch's weights, which the resumed run must
/// count as one.
#[test]
fn a_killed_run_with_swa_resumes_to_the_same_metrics() {
    let work = tempfile::tempdir().unwrap();
    let swa = ["--set", "train.average_decay=0", "--set", "train.swa_start=1"];
    killed_and_resumed_gives_the_whole_runs_metrics(work.path(), &swa);
}

#[test]
fn ctrl_c_writes_a_checkpoint_and_exits_130_with_the_resume_command() {
    let work = tempfile::tempdir().unwrap();
    let whole = work.path().join("whole");
    train("bilstm-crf.toml", &whole, "4", "3", &[]);
    let cut = work.path().join("cut");
    let args = train_args("bilstm-crf.toml", &cut, "4", "3", &[]);
    let child = start_until(&args, &cut, |n| n.starts_with("checkpoint-e0001-"));
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let resume = format!("seqlab train --resume {}", cut.display());
    assert!(err.contains("interrupted: checkpoint written at epoch") && err.contains(&resume), "{err}");
    assert!(!cut.join(".lock").exists(), "the lock outlived the interrupted run");
    // The interrupted step's checkpoint is the newest, and resuming from it
    // ends where the uninterrupted run did.
    let o = seqlab(&["train", "--resume", cut.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(metrics(&whole), metrics(&cut));
}

#[test]
fn a_nan_loss_stops_the_run_naming_epoch_batch_and_cause_or_is_skipped() {
    let work = tempfile::tempdir().unwrap();
    let run = work.path().join("run");
    // Adam with lr 1e30 and no clipping sends every weight to ~1e30 in one step.
    let blow_up = ["--set", "train.lr=1e30", "--set", "train.grad_clip=0", "--set", "train.checkpoint_every=1"];
    let o = seqlab(&train_args("bilstm-crf.toml", &run, "1", "1", &blow_up));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("epoch 1, batch 2 of "), "{err}");
    assert!(err.contains("NaN") || err.contains("inf"), "{err}");
    assert!(err.contains("learning rate too high (train.lr = 1e30)") && err.contains("train.txt:"), "{err}");
    // The checkpoint written before the bad batch is intact and resumable.
    assert_eq!(checkpoint_names(&run), vec!["checkpoint-e0000-b000001.json".to_string()]);
    assert!(err.contains("last checkpoint (epoch 1, batch 1) is untouched"), "{err}");
    // on_nan = "skip" goes on, and says how many batches it skipped.
    let mut skip = blow_up.to_vec();
    skip.extend(["--set", "train.on_nan=skip"]);
    let o = seqlab(&train_args("bilstm-crf.toml", &run, "1", "1", &skip));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("batch skipped") && err.contains("batches were skipped"), "{err}");
    assert!(run.join("summary.json").exists());
}
