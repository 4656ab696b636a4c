//! The real `seqlab` binary: `score`, `data toy`, `data stats`.

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
    std::fs::write(&input, format!("{{\"version\": \"1.1\", \"data\": [\n{}]}}", articles.join(",\n"))).unwrap();
    let out = d.path().join("split");
    let o = seqlab(&["data", "split-qa", input.to_str().unwrap(), "--held-out", "2", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("train.json: 4 articles, 4 paragraphs, 4 questions, 4 answers"), "{text}");
    assert!(text.contains("dev.json: 2 articles"), "{text}");
    let titles = |name: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap();
        v["data"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap().to_string()).collect()
    };
    let (train, dev) = (titles("train.json"), titles("dev.json"));
    assert!(dev.iter().all(|t| !train.contains(t)));
    // A moved answer offset: the error names the file, the line and the question.
    std::fs::write(&input, format!("{{\"data\": [\n{},\n{}]}}", articles[0], articles[1].replace(": 4}", ": 5}")))
        .unwrap();
    let o = seqlab(&["data", "split-qa", input.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("qa.json:3:") && err.contains("question A1-q"), "{err}");
}
