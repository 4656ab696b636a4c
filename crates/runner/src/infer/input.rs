//! What `seqlab predict` and `visualize` read: CoNLL columns, plain text
//! (one sentence per line), a SQuAD-format file of questions for a QA run,
//! or one sentence given on the command line.

use anyhow::Result;
use corpus::reader::{read_rows, RowOptions};
use corpus::{Sentence, Tag, Tokenization};
use std::path::Path;

/// How the input of `predict` is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// CoNLL columns if every line looks like them, else plain text.
    Auto,
    Conll,
    Text,
}

/// What `predict` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Conll,
    Jsonl,
}

/// Input sentences; `gold` is true when they carry tags.
pub struct Input {
    pub sentences: Vec<Sentence>,
    pub gold: bool,
}

pub fn parse_input(
    path: &Path,
    text: &str,
    format: InputFormat,
    scheme: corpus::Scheme,
    tokenization: Tokenization,
) -> Result<Input> {
    let as_conll = match format {
        InputFormat::Conll => true,
        InputFormat::Text => false,
        InputFormat::Auto => looks_like_conll(text),
    };
    if !as_conll {
        let sentences: Vec<Sentence> = corpus::reader::parse_plain(text, tokenization)
            .0
            .into_iter()
            .map(|(line, t)| Sentence { tags: vec![Tag::O; t.len()], tokens: t, doc: 0, line })
            .collect();
        if sentences.is_empty() {
            anyhow::bail!("{}: no sentences (expected one sentence per line, {})", path.display(), what(tokenization));
        }
        return Ok(Input { sentences, gold: false });
    }
    let raw = read_rows(path, text, RowOptions::default())?;
    let n = raw[0].rows[0].len();
    if n == 1 {
        let sentences = raw
            .into_iter()
            .map(|s| Sentence {
                tags: vec![Tag::O; s.rows.len()],
                tokens: s.rows.into_iter().map(|r| r[0].clone()).collect(),
                doc: s.doc,
                line: s.line,
            })
            .collect();
        return Ok(Input { sentences, gold: false });
    }
    let sentences = corpus::reader::parse_tagged(path, text, corpus::Columns::default(), Some(scheme))?;
    Ok(Input { sentences, gold: true })
}

/// Every non-blank line has the same number (≥ 2) of columns, and the last
/// column of each is a tag.
fn looks_like_conll(text: &str) -> bool {
    let mut width = None;
    let mut any = false;
    for (_, l) in corpus::io::numbered_lines(text) {
        let cols: Vec<&str> = l.split_ascii_whitespace().collect();
        if cols.is_empty() {
            continue;
        }
        any = true;
        if *width.get_or_insert(cols.len()) != cols.len() || cols.len() < 2 {
            return false;
        }
        if cols[0] != corpus::reader::DOCSTART && Tag::parse(cols[cols.len() - 1]).is_err() {
            return false;
        }
    }
    any
}

/// Questions to answer for a QA run: a SQuAD-format file (gold answers
/// optional), cut into sub-tokens by the run's own tokenizer.
pub fn qa_input(run_dir: &Path, name: &Path, text: &str) -> Result<(Vec<Sentence>, Vec<corpus::qa::squad::QaItem>)> {
    let path = run_dir.join(crate::setup::tokenizer::FILE);
    if !path.is_file() {
        anyhow::bail!(
            "{}: this QA run has no {} to cut questions into sub-tokens",
            run_dir.display(),
            crate::setup::tokenizer::FILE
        );
    }
    let tok = crate::setup::tokenizer::load(&path)?;
    if !text.trim_start().starts_with('{') {
        anyhow::bail!(
            "{}: this tagger answers questions: expected a SQuAD-format JSON file ({{\"data\": [{{\"paragraphs\": [{{\"context\", \"qas\": [{{\"id\", \"question\"}}]}}]}}]}})",
            name.display()
        );
    }
    let tokenize = |t: &str| crate::setup::tokenizer::pieces(&tok, t);
    let (sentences, items) = corpus::qa::squad::read_qa(name, text, &tokenize, corpus::qa::squad::Answers::Optional)?;
    if sentences.is_empty() {
        anyhow::bail!("{}: no questions", name.display());
    }
    Ok((sentences, items))
}

/// One question about one context (`predict --question … --context …`)
/// as a QA input of one item.
pub fn one_question(
    run_dir: &Path,
    question: &str,
    context: &str,
) -> Result<(Vec<Sentence>, Vec<corpus::qa::squad::QaItem>)> {
    if question.trim().is_empty() || context.trim().is_empty() {
        anyhow::bail!("--question and --context (or --context-file) must both have text");
    }
    let file = serde_json::json!({"version": "1.1", "data": [{"title": "", "paragraphs": [
        {"context": context, "qas": [{"id": "question", "question": question}]}]}]});
    qa_input(run_dir, Path::new("--context"), &file.to_string())
}

/// How a line of raw text is read, in words.
fn what(tokenization: Tokenization) -> &'static str {
    match tokenization {
        Tokenization::Words => "tokens separated by whitespace",
        Tokenization::Chars => "one token per character",
    }
}
