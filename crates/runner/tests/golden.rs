//! Golden runs: the same seed gives the same training curve and the same
//! test predictions as when the files in `tests/golden/` were recorded
//! (before the runner became a library; re-recorded only on purpose). One
//! BiLSTM-CRF, one attention-CRF on toy data, and both question modes on
//! generated SQuAD-format data, each a few epochs of a small model.
//!
//! `SEQLAB_BLESS=1 cargo test -p runner --test golden` rewrites the files.
//! Losses may differ in the last digits between CPUs (the matrix products
//! sum in another order with AVX-512 kernels than with AVX2), so they are
//! compared to a relative 1e-4; F1 and every predicted tag exactly.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
mod common;

use common::{config, ok, seqlab, squad, train_tokenizer, SMALL, SMALL_QA};

fn work() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// Toy tagging data (train, dev, test), made once.
fn toy() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = work().join("toy");
        ok(seqlab(&["data", "toy", "--out", d.to_str().unwrap(), "--sentences", "200", "--seed", "5"]));
        d
    })
}

/// Generated QA data (train, dev, test) with a WordPiece tokenizer, made once.
fn qa() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = work().join("qa");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("train.json"), squad(160, 1, "t")).unwrap();
        std::fs::write(d.join("dev.json"), squad(30, 2, "d")).unwrap();
        std::fs::write(d.join("test.json"), squad(30, 3, "e")).unwrap();
        train_tokenizer(&d);
        d
    })
}

/// Trains `cfg` on `data` (seed 3, `epochs`) and checks the run against
/// `tests/golden/NAME`: metrics.csv's epoch, train_loss and dev_f1
/// columns, and the files of `outputs`.
fn golden(name: &str, cfg: &str, data: &Path, epochs: &str, small: &[&str], outputs: &[&str]) {
    let out = work().join(name);
    let mut args: Vec<String> =
        ["train", "--config", &config(cfg), "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()]
            .map(String::from)
            .to_vec();
    args.extend(["--seed", "3", "--epochs", epochs, "--quiet"].map(String::from));
    args.extend(small.iter().map(|s| s.to_string()));
    ok(seqlab(&args));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let mut files = vec![("metrics.csv".to_string(), curve(&out.join("metrics.csv")))];
    for f in outputs {
        files.push((f.to_string(), std::fs::read_to_string(out.join(f)).unwrap()));
    }
    if std::env::var_os("SEQLAB_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (f, text) in &files {
            std::fs::write(dir.join(f), text).unwrap();
        }
        return;
    }
    for (f, text) in &files {
        let want = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{name}/{f}: {e}"));
        if f == "metrics.csv" {
            same_curve(name, &want, text);
        } else {
            assert!(want == *text, "{name}: {f} differs from the golden run:\n{}", first_difference(&want, text));
        }
    }
}

/// `epoch,train_loss,dev_f1` rows of a metrics.csv.
fn curve(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cols: Vec<usize> =
        ["epoch", "train_loss", "dev_f1"].iter().map(|n| header.iter().position(|h| h == n).unwrap()).collect();
    let mut out = String::from("epoch,train_loss,dev_f1\n");
    for row in lines {
        let c: Vec<&str> = row.split(',').collect();
        out += &cols.iter().map(|&i| c[i]).collect::<Vec<_>>().join(",");
        out.push('\n');
    }
    out
}

fn same_curve(name: &str, want: &str, got: &str) {
    let rows = |t: &str| -> Vec<Vec<f64>> {
        t.lines().skip(1).map(|l| l.split(',').map(|x| x.parse::<f64>().unwrap()).collect()).collect()
    };
    let (w, g) = (rows(want), rows(got));
    assert_eq!(w.len(), g.len(), "{name}: {} epochs, the golden run had {}", g.len(), w.len());
    for (a, b) in w.iter().zip(&g) {
        let loss_close = (a[1] - b[1]).abs() <= 1e-4 * a[1].abs().max(1.0);
        let f1_same = a[2] == b[2] || (a[2].is_nan() && b[2].is_nan());
        assert!(a[0] == b[0] && loss_close && f1_same, "{name}: epoch {}: got {b:?}, golden {a:?}", a[0]);
    }
}

fn first_difference(want: &str, got: &str) -> String {
    let at = want
        .lines()
        .zip(got.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(want.lines().count().min(got.lines().count()));
    format!(
        "line {}: golden {:?}, got {:?}",
        at + 1,
        want.lines().nth(at).unwrap_or("<end>"),
        got.lines().nth(at).unwrap_or("<end>")
    )
}

#[test]
fn bilstm_crf_matches_the_golden_run() {
    golden("bilstm-crf", "bilstm-crf.toml", toy(), "3", SMALL, &["predictions.test.conll"]);
}

#[test]
fn attention_crf_matches_the_golden_run() {
    golden("attention-crf", "attention-crf.toml", toy(), "3", SMALL, &["predictions.test.conll"]);
}

#[test]
fn qa_cross_matches_the_golden_run() {
    let outputs = ["predictions.test.conll", "predictions.test.json"];
    golden("qa-cross", "qa-cross.toml", qa(), "2", SMALL_QA, &outputs);
}

#[test]
fn qa_concat_matches_the_golden_run() {
    let outputs = ["predictions.test.conll", "predictions.test.json"];
    golden("qa-concat-self", "qa-concat-self.toml", qa(), "2", SMALL_QA, &outputs);
}
