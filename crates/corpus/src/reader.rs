//! Column files: CoNLL-2003 (`token POS chunk NER`), two-column `token tag`
//! files (tab or space), char-per-line Chinese files (`字 B-ORG`), WNUT-style
//! files; and plain text, one whitespace-tokenised sentence per line.
//!
//! Blank (or whitespace-only) lines end sentences. A line whose first column
//! is `-DOCSTART-` starts a new document: it is kept as metadata
//! ([`Sentence::doc`]), never as a sentence. CRLF line ends, a UTF-8 BOM and a
//! missing final newline are accepted.

use crate::error::{CorpusError, Result};
use crate::io::{numbered_lines, read_text};
use crate::tags::{Scheme, Tag};
use crate::tokenization::Tokenization;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const DOCSTART: &str = "-DOCSTART-";

/// A tagged sentence read from a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Sentence {
    pub tokens: Vec<String>,
    pub tags: Vec<Tag>,
    /// Index of the document (0 before the first `-DOCSTART-`).
    pub doc: usize,
    /// Line of the first token (1-based).
    pub line: usize,
}

/// Which columns hold the token and the tag, 0-based; negative counts from
/// the end (`-1` is the last column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Columns {
    pub token: isize,
    pub tag: isize,
}

impl Default for Columns {
    fn default() -> Self {
        Columns { token: 0, tag: -1 }
    }
}

impl Columns {
    fn resolve(col: isize, n: usize) -> Option<usize> {
        let i = if col < 0 { n as isize + col } else { col };
        (0..n as isize).contains(&i).then_some(i as usize)
    }
}

/// The rows of one sentence, before columns are picked out.
#[derive(Clone, Debug)]
pub struct RawSentence {
    pub line: usize,
    pub doc: usize,
    pub rows: Vec<Vec<String>>,
}

/// How sentence and document boundaries are recognised.
#[derive(Clone, Copy, Debug, Default)]
pub struct RowOptions {
    /// conlleval's boundary: a row whose first column is `-X-` ends a sentence.
    pub x_boundary: bool,
    /// Keep `-DOCSTART-` rows as one-token sentences (conlleval counts them
    /// as tokens) instead of document markers.
    pub docstart_as_row: bool,
}

/// Splits a column file into sentences of whitespace-separated rows, checking
/// that every row has the same number of columns.
pub fn read_rows(path: &Path, text: &str, opts: RowOptions) -> Result<Vec<RawSentence>> {
    let mut out = Vec::new();
    let mut cur: Option<RawSentence> = None;
    let mut doc = 0usize;
    let mut width: Option<(usize, usize)> = None; // (columns, line where first seen)
    for (line, l) in numbered_lines(text) {
        let cols: Vec<&str> = l.split_ascii_whitespace().collect();
        if cols.is_empty() {
            out.extend(cur.take());
            continue;
        }
        match width {
            None => width = Some((cols.len(), line)),
            Some((n, first)) if n != cols.len() => {
                return Err(CorpusError::at(
                    path,
                    line,
                    format!("expected {n} columns (as on line {first}), found {}: `{}`", cols.len(), l.trim()),
                ));
            }
            _ => {}
        }
        if cols[0] == DOCSTART && !opts.docstart_as_row {
            out.extend(cur.take());
            doc += 1;
            continue;
        }
        if opts.x_boundary && cols[0] == "-X-" {
            out.extend(cur.take());
            continue;
        }
        cur.get_or_insert_with(|| RawSentence { line, doc, rows: Vec::new() })
            .rows
            .push(cols.iter().map(|s| s.to_string()).collect());
    }
    out.extend(cur.take());
    if out.is_empty() {
        return Err(CorpusError::file(
            path,
            "no sentences: expected rows of whitespace-separated columns, sentences separated by blank lines",
        ));
    }
    Ok(out)
}

/// Reads a tagged column file. With a `scheme`, every tag must use that
/// scheme's prefixes.
pub fn read_tagged(path: &Path, columns: Columns, scheme: Option<Scheme>) -> Result<Vec<Sentence>> {
    let text = read_text(path)?;
    parse_tagged(path, &text, columns, scheme)
}

/// [`read_tagged`] on text already in memory; `path` names it in errors.
pub fn parse_tagged(path: &Path, text: &str, columns: Columns, scheme: Option<Scheme>) -> Result<Vec<Sentence>> {
    let raw = read_rows(path, text, RowOptions::default())?;
    let n = raw[0].rows[0].len();
    let pick = |col: isize, what: &str| {
        Columns::resolve(col, n).ok_or_else(|| {
            CorpusError::at(path, raw[0].line, format!("the {what} column {col} does not exist: rows have {n} columns"))
        })
    };
    let tok = pick(columns.token, "token")?;
    let tag = pick(columns.tag, "tag")?;
    if n < 2 || tok == tag {
        return Err(CorpusError::at(
            path,
            raw[0].line,
            format!("expected at least two columns (a token and a tag), found {n}"),
        ));
    }
    raw.into_iter()
        .map(|s| {
            let mut tokens = Vec::with_capacity(s.rows.len());
            let mut tags = Vec::with_capacity(s.rows.len());
            for (k, row) in s.rows.iter().enumerate() {
                tokens.push(row[tok].clone());
                tags.push(parse_tag(path, s.line + k, &row[tag], scheme)?);
            }
            Ok(Sentence { tokens, tags, doc: s.doc, line: s.line })
        })
        .collect()
}

/// Parses one tag, checking it against the scheme if one is given.
pub fn parse_tag(path: &Path, line: usize, s: &str, scheme: Option<Scheme>) -> Result<Tag> {
    let tag = Tag::parse(s).map_err(|m| CorpusError::at(path, line, m))?;
    if let Some(scheme) = scheme {
        if !scheme.admits(&tag) {
            let allowed: Vec<&str> = scheme.prefixes().iter().map(|p| p.as_str()).collect();
            return Err(CorpusError::at(
                path,
                line,
                format!(
                    "tag `{s}` is not valid in the {scheme} scheme: expected `O` or a prefix of {}",
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(tag)
}

/// Reads plain text: one sentence per line, tokens separated by whitespace.
/// Blank lines are skipped (and counted in the second value).
pub fn read_plain(path: &Path) -> Result<(Vec<(usize, Vec<String>)>, usize)> {
    let text = read_text(path)?;
    Ok(parse_plain(&text, Tokenization::Words))
}

/// Plain text: one sentence per line (with its 1-based line number), cut
/// into tokens by `tokenization`. Blank lines are skipped (and counted in
/// the second value).
pub fn parse_plain(text: &str, tokenization: Tokenization) -> (Vec<(usize, Vec<String>)>, usize) {
    let mut blank = 0;
    let mut out = Vec::new();
    for (line, l) in numbered_lines(text) {
        let toks = tokenization.split(l);
        if toks.is_empty() {
            blank += 1;
        } else {
            out.push((line, toks));
        }
    }
    // The empty string after a final newline is not a blank line.
    if text.ends_with('\n') || text.is_empty() {
        blank -= 1;
    }
    (out, blank)
}

/// Writes sentences as a column file: each row's columns joined by a space,
/// a blank line after each sentence, a `-DOCSTART- -X- O O`-style line (with
/// as many columns as the rows) before each new document after the first.
pub fn format_columns<'a>(sentences: impl IntoIterator<Item = (usize, Vec<Vec<&'a str>>)>) -> String {
    let mut out = String::new();
    let mut last_doc: Option<usize> = None;
    for (doc, rows) in sentences {
        if last_doc.is_some_and(|d| d != doc) {
            let width = rows.first().map_or(2, Vec::len);
            let mut marker = vec![DOCSTART, "-X-"];
            marker.resize(width.max(2), "O");
            marker.truncate(width.max(1));
            out.push_str(&marker.join(" "));
            out.push_str("\n\n");
        }
        last_doc = Some(doc);
        for row in rows {
            out.push_str(&row.join(" "));
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<Sentence>> {
        parse_tagged(Path::new("x.conll"), text, Columns::default(), None)
    }

    #[test]
    fn conll2003_with_docstart_and_four_columns() {
        let text = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP I-PER\n\n-DOCSTART- -X- -X- O\n\nBlackburn NNP B-NP I-PER\n";
        let s = read(text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].tokens, ["EU", "rejects"]);
        assert_eq!(s[0].tags[0].to_string(), "I-ORG");
        assert_eq!((s[0].doc, s[0].line), (1, 3));
        assert_eq!((s[1].doc, s[2].doc), (1, 2));
    }

    #[test]
    fn quirks_are_accepted_crlf_tabs_whitespace_lines_no_final_newline() {
        let text = "中\tB-ORG\r\n国\tE-ORG\r\n  \t \r\n人 O";
        let s = read(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].tokens, ["中", "国"]);
        assert_eq!(s[1].tokens, ["人"]);
    }

    #[test]
    fn configurable_columns() {
        let text = "O John x\nB-PER Smith y\n";
        let s = parse_tagged(Path::new("f"), text, Columns { token: 1, tag: 0 }, None).unwrap();
        assert_eq!(s[0].tokens, ["John", "Smith"]);
    }

    #[test]
    fn column_count_mismatch_names_file_and_line() {
        let err = read("a B-PER\nb I-PER x\n").unwrap_err().to_string();
        assert!(err.starts_with("x.conll:2: expected 2 columns (as on line 1), found 3"), "{err}");
    }

    #[test]
    fn bad_tag_names_file_line_and_expectation() {
        let err = read("a O\n\nb PER\n").unwrap_err().to_string();
        assert!(err.starts_with("x.conll:3: expected a tag"), "{err}");
        assert!(err.contains("`PER`"), "{err}");
    }

    #[test]
    fn tag_outside_declared_scheme_is_rejected() {
        let err =
            parse_tagged(Path::new("f"), "a S-PER\n", Columns::default(), Some(Scheme::Iob2)).unwrap_err().to_string();
        assert!(err.contains("f:1: tag `S-PER` is not valid in the BIO scheme"), "{err}");
    }

    #[test]
    fn empty_file_and_one_column_are_errors() {
        assert!(read("").unwrap_err().to_string().contains("no sentences"));
        assert!(read("\n\n  \n").unwrap_err().to_string().contains("no sentences"));
        assert!(read("a\nb\n").unwrap_err().to_string().contains("x.conll:1:"));
    }

    #[test]
    fn very_long_sentences_are_kept_whole() {
        let text: String = (0..12_000).map(|i| format!("w{i} O\n")).collect();
        let s = read(&text).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].tokens.len(), 12_000);
    }

    #[test]
    fn plain_text_counts_blank_lines() {
        let (s, blank) = parse_plain("a b\n\nc\n", Tokenization::Words);
        assert_eq!(s, vec![(1, vec!["a".to_string(), "b".to_string()]), (3, vec!["c".to_string()])]);
        assert_eq!(blank, 1);
        assert_eq!(parse_plain("a", Tokenization::Words).1, 0);
    }

    #[test]
    fn format_columns_round_trips_documents() {
        let text = format_columns(vec![(0, vec![vec!["a", "O"]]), (1, vec![vec!["b", "B-X"], vec!["c", "I-X"]])]);
        assert_eq!(text, "a O\n\n-DOCSTART- -X-\n\nb B-X\nc I-X\n\n");
        let s = read(&text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].doc, 1);
    }
}
