//! Long inputs made of short ones, for length extrapolation: the
//! consecutive sentences of a column file joined, in file order and never
//! across a document boundary, into passages of at most `max_len` tokens.
//! Every row (token and tags) is kept as it was, so entities stay whole and
//! the passages score as the sentences do; only the lengths change. A
//! sentence already longer than `max_len` becomes a passage by itself and
//! is counted. Two sentences are never joined where the second's first tag
//! would continue the first's last entity (IOB1, as in the CoNLL-2003
//! files: `I-X` after an entity), which would merge two entities into one.

use crate::error::Result;
use crate::io::{read_text, write_atomic};
use crate::reader::{format_columns, read_rows, RawSentence, RowOptions};
use std::path::Path;

/// Passages and what went into them.
#[derive(Clone, Debug)]
pub struct Concatenated {
    pub passages: Vec<RawSentence>,
    /// Sentences read.
    pub sentences: usize,
    /// Sentences longer than `max_len` by themselves (each its own passage).
    pub too_long: usize,
}

impl Concatenated {
    /// Tokens in the longest passage.
    pub fn longest(&self) -> usize {
        self.passages.iter().map(|p| p.rows.len()).max().unwrap_or(0)
    }

    /// Mean tokens per passage.
    pub fn mean_len(&self) -> f64 {
        let tokens: usize = self.passages.iter().map(|p| p.rows.len()).sum();
        tokens as f64 / self.passages.len().max(1) as f64
    }

    /// The passages as a column file (documents marked as in the input).
    pub fn to_columns(&self) -> String {
        format_columns(
            self.passages
                .iter()
                .map(|p| (p.doc, p.rows.iter().map(|r| r.iter().map(String::as_str).collect()).collect())),
        )
    }
}

/// Joins consecutive `sentences` greedily: a sentence goes into the
/// current passage while the passage stays within `max_len` tokens and in
/// the same document, and its first tag does not continue the passage's
/// last entity; else it starts the next one.
pub fn concatenate(sentences: &[RawSentence], max_len: usize) -> Concatenated {
    let mut passages: Vec<RawSentence> = Vec::new();
    let mut too_long = 0;
    for s in sentences {
        too_long += usize::from(s.rows.len() > max_len);
        match passages.last_mut() {
            Some(p) if p.doc == s.doc && p.rows.len() + s.rows.len() <= max_len && !continues(p, s) => {
                p.rows.extend(s.rows.iter().cloned())
            }
            _ => passages.push(s.clone()),
        }
    }
    Concatenated { passages, sentences: sentences.len(), too_long }
}

/// Whether `next`'s first tag (the last column) would read as part of an
/// entity `prev` ends with: `I-…` after any tag but `O`.
fn continues(prev: &RawSentence, next: &RawSentence) -> bool {
    fn tag(row: Option<&Vec<String>>) -> Option<&str> {
        row.and_then(|r| r.last()).map(String::as_str)
    }
    matches!(tag(prev.rows.last()), Some(t) if t != "O")
        && matches!(tag(next.rows.first()), Some(t) if t.starts_with("I-"))
}

/// Reads the column file `input`, joins its sentences into passages of at
/// most `max_len` tokens and writes them to `output` (a temporary file,
/// then renamed).
pub fn concatenate_file(input: &Path, output: &Path, max_len: usize) -> Result<Concatenated> {
    let text = read_text(input)?;
    let joined = concatenate(&read_rows(input, &text, RowOptions::default())?, max_len);
    write_atomic(output, joined.to_columns())?;
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentence(doc: usize, words: &[&str]) -> RawSentence {
        RawSentence { line: 1, doc, rows: words.iter().map(|w| vec![w.to_string(), "O".to_string()]).collect() }
    }

    fn words(p: &RawSentence) -> Vec<&str> {
        p.rows.iter().map(|r| r[0].as_str()).collect()
    }

    #[test]
    fn sentences_fill_passages_in_order_up_to_max_len() {
        let s = [sentence(0, &["a", "b"]), sentence(0, &["c"]), sentence(0, &["d", "e"]), sentence(0, &["f"])];
        let c = concatenate(&s, 3);
        let got: Vec<Vec<&str>> = c.passages.iter().map(words).collect();
        assert_eq!(got, vec![vec!["a", "b", "c"], vec!["d", "e", "f"]]);
        assert_eq!((c.sentences, c.too_long, c.longest()), (4, 0, 3));
        assert_eq!(c.mean_len(), 3.0);
    }

    #[test]
    fn a_document_boundary_starts_a_passage_and_a_long_sentence_stays_whole() {
        let s = [sentence(0, &["a"]), sentence(1, &["b"]), sentence(1, &["c", "d", "e", "f"]), sentence(1, &["g"])];
        let c = concatenate(&s, 3);
        let got: Vec<Vec<&str>> = c.passages.iter().map(words).collect();
        assert_eq!(got, vec![vec!["a"], vec!["b"], vec!["c", "d", "e", "f"], vec!["g"]]);
        assert_eq!(c.too_long, 1);
    }

    #[test]
    fn an_iob1_entity_at_a_sentence_end_is_not_continued_by_the_next_sentence() {
        let tagged = |rows: &[(&str, &str)]| RawSentence {
            line: 1,
            doc: 0,
            rows: rows.iter().map(|(w, t)| vec![w.to_string(), t.to_string()]).collect(),
        };
        let s = [
            tagged(&[("in", "O"), ("Bonn", "I-LOC")]),
            tagged(&[("Paris", "I-LOC"), ("won", "O")]),
            tagged(&[("Rome", "I-LOC")]),
            tagged(&[("Oslo", "B-LOC")]),
        ];
        let c = concatenate(&s, 10);
        let got: Vec<Vec<&str>> = c.passages.iter().map(words).collect();
        // "Paris" would extend "Bonn" into one entity; "Rome" follows an O
        // and "Oslo" begins its own entity, so both may join.
        assert_eq!(got, vec![vec!["in", "Bonn"], vec!["Paris", "won", "Rome", "Oslo"]]);
    }

    #[test]
    fn every_row_survives_the_round_trip_through_a_file() {
        let dir = std::env::temp_dir().join(format!("seqlab-concat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.txt");
        std::fs::write(&input, "\u{feff}A B-PER\r\nb I-PER\r\n\r\nc O\n\nd B-LOC\ne O\n").unwrap();
        let c = concatenate_file(&input, &dir.join("out.txt"), 4).unwrap();
        assert_eq!(c.passages.len(), 2);
        let out = std::fs::read_to_string(dir.join("out.txt")).unwrap();
        assert_eq!(out, "A B-PER\nb I-PER\nc O\n\nd B-LOC\ne O\n\n");
        assert!(concatenate_file(&dir.join("missing.txt"), &dir.join("x.txt"), 4).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
