//! Extractive QA end to end through the real binary, on a generated
//! SQuAD-format dataset: tokenizer training, cross-attention and
//! question [SEP] context taggers, answers scored with the official metric.

use std::path::Path;
mod common;

use common::{ok, seqlab, squad, train_tokenizer, CITIES, SMALL_QA as SMALL};
use std::process::Output;

fn train(data: &Path, config: &str, out: &Path, epochs: &str) -> Output {
    train_with(data, config, out, epochs, &[])
}

/// [`train`] with more `--set` arguments after [`SMALL`].
fn train_with(data: &Path, config: &str, out: &Path, epochs: &str, more: &[&str]) -> Output {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/configs").join(config);
    let mut args: Vec<String> = vec![
        "train".into(),
        "--config".into(),
        cfg.to_str().unwrap().into(),
        "--data".into(),
        data.to_str().unwrap().into(),
        "--out".into(),
        out.to_str().unwrap().into(),
        "--epochs".into(),
        epochs.into(),
        "--quiet".into(),
    ];
    args.extend(SMALL.iter().chain(more).map(|s| s.to_string()));
    seqlab(&args)
}

/// A SQuAD file of [`squad`]'s kind with every question asking about
/// another fact of its context, one whose capital differs from the gold
/// answer (kept as the gold answer).
fn other_fact_questions(file: &Path) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    for article in v["data"].as_array_mut().unwrap() {
        for p in article["paragraphs"].as_array_mut().unwrap() {
            let context = p["context"].as_str().unwrap().to_string();
            // "The capital of X is C." → (X, C), in the order stated.
            let facts: Vec<(&str, &str)> = context
                .split(". ")
                .filter_map(|f| f.trim_end_matches('.').strip_prefix("The capital of ")?.split_once(" is "))
                .collect();
            assert_eq!(facts.len(), 3, "{context}");
            for q in p["qas"].as_array_mut().unwrap() {
                let gold = q["answers"][0]["text"].as_str().unwrap().to_string();
                if let Some((country, _)) = facts.iter().find(|(_, city)| *city != gold) {
                    q["question"] = format!("What is the capital of {country}?").into();
                }
            }
        }
    }
    v.to_string()
}

#[test]
fn qa_taggers_train_and_report_official_answer_scores() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("qa");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("train.json"), squad(240, 1, "t")).unwrap();
    std::fs::write(data.join("dev.json"), squad(40, 2, "d")).unwrap();
    std::fs::write(data.join("test.json"), squad(40, 3, "e")).unwrap();

    // No tokenizer yet: the error says how to make one.
    let run = dir.path().join("cross");
    let o = train(&data, "qa-cross.toml", &run, "1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("seqlab tokenizer train"), "{err}");

    let said = train_tokenizer(&data);
    assert!(said.contains("WordPiece") && said.contains("480 texts"), "{said}");

    // A plain tagger config on QA data is refused, naming the key.
    let o = train(&data, "bilstm-crf.toml", &dir.path().join("plain"), "1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("model.question"), "{err}");

    // The character CNN and case features read the context as written
    // (cased), under its lowercased pieces: its characters are in the
    // run's vocabulary, and one question is answered through them.
    let chars_run = dir.path().join("chars");
    let cfg = common::config("qa-bilstm.toml");
    let mut args = vec!["train", "--config", &cfg, "--data", data.to_str().unwrap()];
    args.extend(["--out", chars_run.to_str().unwrap(), "--epochs", "1", "--quiet"]);
    args.extend(SMALL);
    args.extend(["--set", "model.encoder.bilstm.layers=1", "--set", "model.encoder.bilstm.hidden=16"]);
    args.extend(["--set", "model.features.char_dim=8", "--set", "model.features.char_filters=8"]);
    args.extend(["--set", "model.features.caps_dim=4"]);
    ok(seqlab(&args));
    let vocab: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(chars_run.join("vocab.json")).unwrap()).unwrap();
    let chars: Vec<&str> = vocab["chars"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert!(chars.contains(&"O") && chars.contains(&"o"), "the cased context's characters: {chars:?}");
    let said = ok(seqlab(&[
        "predict",
        "--run",
        chars_run.to_str().unwrap(),
        "--question",
        "What is the capital of Peru?",
        "--context",
        "The capital of Peru is Lima.",
    ]));
    assert!(said.contains("probability"), "{said}");

    // Picking any of the three capitals scores 1/3; a reader that reads
    // the question answers nearly all.
    // The BiLSTM readers that fuse question and context after the encoder
    // (BiDAF's attention flow, DCN's co-attention), at 16 units.
    let fusing = ["--set", "model.encoder.bilstm.hidden=16", "--set", "model.modelling.hidden=16"];
    for (config, run, more) in [
        ("qa-cross.toml", dir.path().join("cross"), &[][..]),
        ("qa-concat-self.toml", dir.path().join("concat"), &[][..]),
        ("qa-bidaf.toml", dir.path().join("bidaf"), &fusing[..]),
        ("qa-coattention.toml", dir.path().join("coattention"), &fusing[..]),
    ] {
        let finished = ok(train_with(&data, config, &run, "12", more));
        assert!(
            finished.contains("test answer F1 ") && finished.contains("(SQuAD v1.1 metric); span F1"),
            "{finished}"
        );
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
        let (dev, qa) = (&summary["qa"]["dev"], &summary["qa"]["test"]);
        assert_eq!((&dev["questions"], &qa["questions"]), (&40.into(), &40.into()), "{config}: {summary}");
        assert_eq!(summary["qa"]["metric"], "official SQuAD v1.1");
        let (em, f1) = (qa["exact_match"].as_f64().unwrap(), qa["f1"].as_f64().unwrap());
        eprintln!("{config}: test answer EM {em} F1 {f1}, dev F1 {}", dev["f1"]);
        assert!(f1 > 0.9 && em <= f1, "{config}: answer F1 {f1}, EM {em}");
        // Per-question scores, for the bootstrap of compare.
        let per_question = std::fs::read_to_string(run.join("answers.test.csv")).unwrap();
        assert_eq!(per_question.lines().count(), 41, "{config}");
        // The question-shuffle ablation: read against other questions, the
        // reader's answers fall towards chance (about 0.43 for a pick among
        // the three capitals of this test file, 0.58 for a perfect reader of
        // the other question: capitals repeat, and the third fact is asked
        // most often).
        let shuffled: serde_json::Value = serde_json::from_str(&ok(seqlab(&[
            "eval",
            "--run",
            run.to_str().unwrap(),
            "--split",
            "test",
            "--shuffle-questions",
            "--json",
        ])))
        .unwrap();
        let f1_shuffled = shuffled["qa"]["f1"].as_f64().unwrap();
        assert!(f1_shuffled < 0.7, "{config}: F1 {f1_shuffled} with shuffled questions");
        // The sharper test: each question asks about another fact of its own
        // context (gold answers kept). A reader that reads the question
        // answers that fact; one that guesses from the context alone keeps
        // its answers.
        let other_fact = dir.path().join(format!("other-fact-{config}.json"));
        std::fs::write(&other_fact, other_fact_questions(&data.join("test.json"))).unwrap();
        let o = seqlab(&["predict", "--run", run.to_str().unwrap(), "--input", other_fact.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        ok(o);
        let f1_other: f64 = err
            .split(", F1 ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("{config}: no F1 in {err}"));
        eprintln!("{config}: test answer F1 {f1_shuffled} with shuffled questions, {f1_other} % about another fact");
        assert!(f1_other < 30.0, "{config}: F1 {f1_other} % on questions about another fact");
        let predictions: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("predictions.test.json")).unwrap()).unwrap();
        let predictions = predictions.as_object().unwrap();
        assert_eq!(predictions.len(), 40);
        assert!(predictions.values().filter_map(|a| a.as_str()).any(|a| CITIES.contains(&a)), "{predictions:?}");
        assert!(run.join("tokenizer.json").is_file(), "the run keeps its tokenizer");
        // eval on the run reproduces the tagging scores.
        let eval: serde_json::Value =
            serde_json::from_str(&ok(seqlab(&["eval", "--run", run.to_str().unwrap(), "--split", "test", "--json"])))
                .unwrap();
        assert_eq!(eval["overall"]["f1"], summary["test"]["f1"], "{config}");
        assert_eq!(eval["qa"]["f1"], qa["f1"], "{config}");
        // predict answers a SQuAD-format file: the official predictions
        // JSON, the same answers as training wrote, scored when gold answers
        // are there; a file of questions without answers gets the same answers.
        let predict =
            |input: &Path| seqlab(&["predict", "--run", run.to_str().unwrap(), "--input", input.to_str().unwrap()]);
        let o = predict(&data.join("test.json"));
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let answered: serde_json::Value = serde_json::from_str(&ok(o)).unwrap();
        assert_eq!(answered.as_object().unwrap(), predictions, "{config}");
        let line = format!("exact match {:.2}, F1 {:.2}, 40 questions", 100.0 * em, 100.0 * f1);
        assert!(err.contains(&line), "{config}: {err}");
        let mut questions: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(data.join("test.json")).unwrap()).unwrap();
        for article in questions["data"].as_array_mut().unwrap() {
            for p in article["paragraphs"].as_array_mut().unwrap() {
                for q in p["qas"].as_array_mut().unwrap() {
                    q.as_object_mut().unwrap().remove("answers");
                }
            }
        }
        let unanswered = dir.path().join("questions.json");
        std::fs::write(&unanswered, questions.to_string()).unwrap();
        let o = predict(&unanswered);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let answered: serde_json::Value = serde_json::from_str(&ok(o)).unwrap();
        assert_eq!(answered.as_object().unwrap(), predictions, "{config}");
        assert!(!err.contains("exact match"), "{err}");
        // One question about one context: the answer, its characters, its probability.
        let said = ok(seqlab(&[
            "predict",
            "--run",
            run.to_str().unwrap(),
            "--question",
            "What is the capital of Peru?",
            "--context",
            "The capital of Chile is Lima. The capital of Peru is Oslo.",
        ]));
        assert!(said.contains("answer: ") && said.contains("characters: ") && said.contains("probability: "), "{said}");
        let answer = said.lines().next().unwrap().trim_start_matches("answer: ");
        assert!(CITIES.contains(&answer), "{config}: {said}");
        // The three likeliest answers, best first, the first the one above.
        let top = ok(seqlab(&[
            "predict",
            "--run",
            run.to_str().unwrap(),
            "--question",
            "What is the capital of Peru?",
            "--context",
            "The capital of Chile is Lima. The capital of Peru is Oslo.",
            "--top-k",
            "3",
        ]));
        let answers: Vec<&str> = top.lines().filter_map(|l| l.strip_prefix("answer: ")).collect();
        assert_eq!(answers.len(), 3, "{top}");
        assert_eq!(answers[0], answer, "{top}");
        let probs: Vec<f64> =
            top.lines().filter_map(|l| l.strip_prefix("probability: ")).map(|p| p.parse().unwrap()).collect();
        assert!(probs.windows(2).all(|w| w[0] >= w[1]) && probs.iter().sum::<f64>() <= 1.0 + 1e-3, "{top}");
        // A file of questions: the n-best JSON, each list led by the answer above.
        let nbest: serde_json::Value = serde_json::from_str(&ok(seqlab(&[
            "predict",
            "--run",
            run.to_str().unwrap(),
            "--input",
            data.join("test.json").to_str().unwrap(),
            "--top-k",
            "2",
        ])))
        .unwrap();
        for (id, list) in nbest.as_object().unwrap() {
            let list = list.as_array().unwrap();
            assert!(!list.is_empty() && list.len() <= 2, "{id}: {list:?}");
            assert_eq!(list[0]["text"], predictions[id], "{config}, {id}");
        }
        // The run reports what it is selected on: answer EM and F1 per epoch.
        let metrics = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
        assert!(
            metrics.starts_with("epoch,") && metrics.lines().next().unwrap().ends_with(",dev_answer_em,dev_answer_f1"),
            "{metrics}"
        );
        let last = metrics.lines().last().unwrap().rsplit(',').next().unwrap().parse::<f64>().unwrap();
        assert!((0.0..=1.0).contains(&last), "{metrics}");
        // Sentences are not questions: a clear refusal.
        let plain = dir.path().join("plain.txt");
        std::fs::write(&plain, "Paris is a city\n").unwrap();
        let o = predict(&plain);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("answers questions") && err.contains("SQuAD-format"), "{err}");
        // Attention pictures of a test question: where context tokens look on
        // the question (the cross-attention, or the concat reader's question
        // block with each context token's share on the question).
        let pictures = dir.path().join(format!("pictures-{config}"));
        if more == fusing {
            // The BiLSTM readers have no attention blocks to draw: a clear refusal.
            let o = seqlab(&["visualize", "--run", run.to_str().unwrap(), "--out", pictures.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success() && err.contains("has no attention to draw"), "{config}: {err}");
            assert!(!run.join("heads.csv").exists(), "{config}");
            continue;
        }
        let said = ok(seqlab(&[
            "visualize",
            "--run",
            run.to_str().unwrap(),
            "--sentence",
            "0",
            "--out",
            pictures.to_str().unwrap(),
        ]));
        assert!(said.contains("pictures of layer 1"), "{said}");
        let html = std::fs::read_to_string(pictures.join("index.html")).unwrap();
        let question = std::fs::read_to_string(pictures.join("layer1-question.svg")).unwrap();
        let concat = config == "qa-concat-self.toml";
        assert!(html.contains(if concat { "(concatenated)" } else { "(cross-attention)" }), "{config}: {html}");
        // Head diagnostics cover the attention on the question too.
        let heads = std::fs::read_to_string(run.join("heads.csv")).unwrap();
        let on_question = if concat { ",question" } else { ",cross" };
        assert!(
            heads.lines().any(|l| l.ends_with(",self")) && heads.lines().any(|l| l.ends_with(on_question)),
            "{config}: {heads}"
        );
        assert!(question.contains("[SEP]") == concat && question.contains("question columns"), "{config}");
        assert_eq!(pictures.join("layer1-question-share.svg").is_file(), concat, "{config}");
    }
    // compare reports the answer scores of QA runs.
    let out = dir.path().join("cmp");
    let (cross, concat) = (dir.path().join("cross"), dir.path().join("concat"));
    ok(seqlab(&[
        "compare",
        cross.to_str().unwrap(),
        concat.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--samples",
        "50",
    ]));
    let md = std::fs::read_to_string(out.join("comparison.md")).unwrap();
    assert!(md.contains("## Question answering") && md.contains("qa-cross") && md.contains("qa-concat-self"), "{md}");
    assert!(md.contains("95 % interval") && md.contains("1 × 1, paired"), "{md}");
    let csv = std::fs::read_to_string(out.join("comparison.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with("qa_test_exact_match,qa_test_f1"), "{csv}");
}
