//! The real `seqlab` binary: `score`, `data toy`, `data stats`, `data split-qa`, `qa baseline`.

use std::path::Path;
use std::process::Output;
mod common;

use common::seqlab;

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "seqlab failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name).display().to_string()
}

#[test]
fn score_prints_conllevals_report_exactly() {
    // Expected output recorded from conlleval.pl (2004-01-26) on the same
    // file without its -DOCSTART- line.
    let expected = concat!(
        "processed 17 tokens with 7 phrases; found: 7 phrases; correct: 3.\n",
        "accuracy:  76.47%; precision:  42.86%; recall:  42.86%; FB1:  42.86\n",
        "              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  3\n",
        "             MISC: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n",
        "              ORG: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n",
        "              PER: precision:  50.00%; recall:  33.33%; FB1:  40.00  2\n",
    );
    assert_eq!(stdout(&seqlab(&["score", &fixture("score_small.txt")])), expected);
}

#[test]
fn score_json_is_one_object_with_fractions() {
    let out = stdout(&seqlab(&["score", "--json", &fixture("score_small.txt")]));
    assert_eq!(out.lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let o = &v["overall"];
    assert_eq!(o["gold_chunks"], 7);
    assert_eq!(o["pred_chunks"], 7);
    assert_eq!(o["correct_chunks"], 3);
    assert_eq!(o["tokens"], 17);
    assert!((o["f1"].as_f64().unwrap() - 3.0 / 7.0).abs() < 1e-12);
    assert_eq!(v["per_type"]["PER"]["support"], 3);
    assert!((v["per_type"]["PER"]["precision"].as_f64().unwrap() - 0.5).abs() < 1e-12);
}

#[test]
fn score_bad_tag_is_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.txt");
    std::fs::write(&f, "a O O\nb B-PER PER\n").unwrap();
    let o = seqlab(&["score", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.txt:2: expected a tag"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn toy_data_then_stats() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("toy");
    stdout(&seqlab(&["data", "toy", "--out", out.to_str().unwrap(), "--sentences", "200", "--seed", "3"]));
    let json = stdout(&seqlab(&["data", "stats", "--json", out.to_str().unwrap()]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["scheme"], "BIO");
    assert_eq!(v["splits"]["train"]["sentences"], 200);
    assert_eq!(v["splits"]["dev"]["sentences"], 40);
    assert!(v["splits"]["test"]["oov_rate"].as_f64().unwrap() < 0.2);
    assert!(v["splits"]["train"]["entities"]["PER"].as_u64().unwrap() > 20);
    // Same seed, same bytes.
    let again = dir.path().join("again");
    stdout(&seqlab(&["data", "toy", "--out", again.to_str().unwrap(), "--sentences", "200", "--seed", "3"]));
    assert_eq!(std::fs::read(out.join("train.txt")).unwrap(), std::fs::read(again.join("train.txt")).unwrap());
}

/// `seqlab data concat` joins a split's sentences into passages of at most
/// --max-len tokens: the same rows in the same order, blank lines only
/// between passages; bad arguments are errors naming what was expected.
#[test]
fn data_concat_joins_sentences_into_long_passages() {
    let dir = tempfile::tempdir().unwrap();
    let toy = dir.path().join("toy");
    stdout(&seqlab(&["data", "toy", "--out", toy.to_str().unwrap(), "--sentences", "50", "--seed", "3"]));
    let (input, out) = (toy.join("test.txt"), dir.path().join("long.txt"));
    let said = stdout(&seqlab(&[
        "data",
        "concat",
        input.to_str().unwrap(),
        "--max-len",
        "40",
        "--out",
        out.to_str().unwrap(),
    ]));
    let blocks = |text: &str| -> Vec<Vec<String>> {
        text.split("\n\n").filter(|b| !b.trim().is_empty()).map(|b| b.lines().map(String::from).collect()).collect()
    };
    let (before, after) =
        (blocks(&std::fs::read_to_string(&input).unwrap()), blocks(&std::fs::read_to_string(&out).unwrap()));
    assert!(after.len() < before.len(), "{} passages from {} sentences", after.len(), before.len());
    assert_eq!(after.concat(), before.concat(), "the same rows in the same order");
    assert!(after.iter().all(|p| p.len() <= 40), "every passage within 40 tokens");
    assert!(said.contains(&format!("{} sentences joined into {} passages", before.len(), after.len())), "{said}");
    let o = seqlab(&["data", "concat", input.to_str().unwrap(), "--max-len", "0", "--out", out.to_str().unwrap()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--max-len must be at least 1"));
    let missing = dir.path().join("missing.txt");
    let o = seqlab(&["data", "concat", missing.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("missing.txt"));
}

#[test]
fn split_qa_splits_by_article_and_bad_files_name_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let article = |t: &str| {
        format!(
            r#"{{"title": "{t}", "paragraphs": [{{"context": "The Normans came.", "qas": [{{"id": "{t}-q", "question": "Who?", "answers": [{{"text": "Normans", "answer_start": 4}}]}}]}}]}}"#
        )
    };
    let articles: Vec<String> = (0..6).map(|i| article(&format!("A{i}"))).collect();
    let input = d.path().join("qa.json");
    // A1's offset is off by one: repaired, and written repaired.
    let text = format!("{{\"version\": \"1.1\", \"data\": [\n{}]}}", articles.join(",\n"));
    std::fs::write(
        &input,
        text.replace(
            "A1-q\", \"question\": \"Who?\", \"answers\": [{\"text\": \"Normans\", \"answer_start\": 4",
            "A1-q\", \"question\": \"Who?\", \"answers\": [{\"text\": \"Normans\", \"answer_start\": 5",
        ),
    )
    .unwrap();
    let out = d.path().join("split");
    let args =
        ["data", "split-qa", input.to_str().unwrap(), "--held-out", "2", "--dev", "1", "--out", out.to_str().unwrap()];
    let text = stdout(&seqlab(&args));
    assert!(text.contains("qa.json: 1 answers' offsets repaired"), "{text}");
    assert!(text.contains("train.json: 3 articles, 3 paragraphs, 3 questions, 3 answers"), "{text}");
    assert!(text.contains("dev.json: 1 articles, 1 paragraphs, 1 questions"), "{text}");
    assert!(text.contains("test.json: 2 articles"), "{text}");
    let titles = |name: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap();
        v["data"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap().to_string()).collect()
    };
    let (train, dev, test) = (titles("train.json"), titles("dev.json"), titles("test.json"));
    let mut all: Vec<&String> = train.iter().chain(&dev).chain(&test).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 6, "no article in two parts, none lost: {train:?} {dev:?} {test:?}");
    let written = [&out.join("train.json"), &out.join("dev.json"), &out.join("test.json")]
        .map(|p| std::fs::read_to_string(p).unwrap())
        .join("\n");
    assert!(!written.contains("\"answer_start\":5"), "{written}");
    // The same held-out articles as before dev existed, in test.json.
    let again = d.path().join("two");
    let args = [
        "data",
        "split-qa",
        input.to_str().unwrap(),
        "--held-out",
        "2",
        "--dev",
        "0",
        "--out",
        again.to_str().unwrap(),
    ];
    let text = stdout(&seqlab(&args));
    assert!(text.contains("train.json: 4 articles") && !text.contains("dev.json"), "{text}");
    assert!(!again.join("dev.json").exists());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("test.json")).unwrap()).unwrap();
    let test_titles: Vec<&str> = v["data"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap()).collect();
    assert_eq!(test_titles, test);
    // Too many articles asked for.
    let o = seqlab(&["data", "split-qa", input.to_str().unwrap(), "--held-out", "2", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--held-out + --dev (2 + 4)"));
    // An answer that is not in its context: the error names the file, the line and the question.
    std::fs::write(
        &input,
        format!(
            "{{\"data\": [\n{},\n{}]}}",
            articles[0],
            articles[1].replace("\"Normans\", \"answer", "\"Saxons\", \"answer")
        ),
    )
    .unwrap();
    let o = seqlab(&["data", "split-qa", input.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("qa.json:3:") && err.contains("question A1-q") && err.contains("Saxons"), "{err}");
}

#[test]
fn qa_baseline_scores_a_split_and_writes_json() {
    let d = tempfile::tempdir().unwrap();
    let file = |context: &str, question: &str, answer: &str| {
        format!(
            r#"{{"data": [{{"title": "T", "paragraphs": [{{"context": "{context}", "qas": [{{"id": "q", "question": "{question}", "answers": [{{"text": "{answer}", "answer_start": -1}}]}}]}}]}}]}}"#
        )
    };
    let test = file("The Eiffel Tower is in Paris. Rome is old.", "Where is the Eiffel Tower?", "Paris");
    std::fs::write(d.path().join("test.json"), test).unwrap();
    std::fs::write(d.path().join("train.json"), file("Rome is in Italy.", "Where is Rome?", "Italy")).unwrap();
    let out = d.path().join("baselines.json");
    let args = ["qa", "baseline", "--data", d.path().to_str().unwrap(), "--out", out.to_str().unwrap()];
    let text = stdout(&seqlab(&args));
    assert!(text.contains("| baseline | EM | F1 | questions |"), "{text}");
    assert!(text.contains("| sliding window (SW+D) | 1.000 | 1.000 | 1 |"), "{text}");
    assert!(text.contains("train.json") && text.contains("official SQuAD v1.1"), "{text}");
    assert!(text.contains("1 answers' offsets repaired"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["split"], "test");
    assert_eq!(v["baselines"].as_array().unwrap().len(), 4);
    assert_eq!(v["baselines"][1]["baseline"], "best-sentence");
    // A split the folder does not have.
    let o = seqlab(&["qa", "baseline", "--data", d.path().to_str().unwrap(), "--split", "dev"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no dev split"));
}

/// `--device cuda` on a binary built without CUDA (the default build) names
/// the command that builds one with it; so does `--device wgpu` on one
/// built with `--no-default-features`.
#[test]
#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
fn a_gpu_device_this_binary_lacks_names_the_rebuild() {
    let missing: &[(&str, &str)] = &[
        #[cfg(not(feature = "cuda"))]
        ("cuda", "built without CUDA"),
        #[cfg(not(feature = "wgpu"))]
        ("wgpu", "built without wgpu"),
    ];
    for (device, says) in missing {
        let o = seqlab(&["bench", "crf", "--device", device, "--batch", "2", "--len", "4", "--iters", "1"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(err.contains(says) && err.contains(&format!("--features {device}")), "{err}");
    }
}
