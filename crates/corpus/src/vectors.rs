//! Pretrained word vectors in text form: GloVe (`word v1 … vd` per line) or
//! word2vec text (the same, after a `count dim` header line).

use crate::error::{CorpusError, Result};
use crate::io::{numbered_lines, read_text};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Vectors for the words that were asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct Vectors {
    pub dim: usize,
    pub vectors: HashMap<String, Vec<f32>>,
    /// Lines (vectors) in the file.
    pub total: usize,
}

/// Reads the vectors of `wanted` words (all words if `None`). Every line
/// must have the same dimension; a bad number or a short line is an error
/// naming file and line. With `fold_case`, words are keyed in lowercase
/// (for a lowercased vocabulary); when a file has both `Paris` and `paris`,
/// the lowercase line wins, otherwise the first line does.
pub fn read_vectors(path: &Path, wanted: Option<&HashSet<String>>, fold_case: bool) -> Result<Vectors> {
    let text = read_text(path)?;
    let mut dim: Option<usize> = None;
    let mut vectors = HashMap::new();
    // Keys whose vector came from a line spelled exactly like the key.
    let mut exact: HashSet<String> = HashSet::new();
    let mut total = 0;
    for (line, l) in numbered_lines(&text) {
        let mut fields = l.split(' ').filter(|f| !f.is_empty());
        let Some(word) = fields.next() else { continue };
        let rest: Vec<&str> = fields.collect();
        // word2vec's header: two integers.
        if line == 1 && rest.len() == 1 && word.parse::<usize>().is_ok() && rest[0].parse::<usize>().is_ok() {
            dim = Some(rest[0].parse().unwrap());
            continue;
        }
        match dim {
            None => dim = Some(rest.len()),
            Some(d) if d != rest.len() => {
                return Err(CorpusError::at(
                    path,
                    line,
                    format!("expected a word and {d} numbers, found {} numbers", rest.len()),
                ));
            }
            _ => {}
        }
        if rest.is_empty() {
            return Err(CorpusError::at(path, line, "expected a word followed by numbers"));
        }
        total += 1;
        let key = if fold_case { word.to_lowercase() } else { word.to_string() };
        if wanted.is_some_and(|w| !w.contains(&key)) || exact.contains(&key) {
            continue;
        }
        if vectors.contains_key(&key) && key != word {
            continue;
        }
        let v = rest
            .iter()
            .map(|x| {
                x.parse::<f32>().map_err(|_| CorpusError::at(path, line, format!("expected a number, found `{x}`")))
            })
            .collect::<Result<Vec<f32>>>()?;
        if key == word {
            exact.insert(key.clone());
        }
        vectors.insert(key, v);
    }
    let dim = dim
        .filter(|_| total > 0)
        .ok_or_else(|| CorpusError::file(path, "no vectors: expected lines `word v1 v2 …`"))?;
    Ok(Vectors { dim, vectors, total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glove_and_word2vec_headers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v.txt");
        std::fs::write(&p, "the 0.1 0.2\nParis 1 2\n").unwrap();
        let v = read_vectors(&p, None, false).unwrap();
        assert_eq!((v.dim, v.total), (2, 2));
        assert_eq!(v.vectors["Paris"], vec![1.0, 2.0]);
        std::fs::write(&p, "2 3\na 1 2 3\nb 4 5 6\n").unwrap();
        let wanted: HashSet<String> = ["b".to_string()].into();
        let v = read_vectors(&p, Some(&wanted), false).unwrap();
        assert_eq!((v.dim, v.total, v.vectors.len()), (3, 2, 1));
        // Case folding: `Paris` serves `paris`; an exact lowercase line wins wherever it is.
        std::fs::write(&p, "Paris 1 1\nThe 2 2\nthe 3 3\nTHE 4 4\n").unwrap();
        let v = read_vectors(&p, None, true).unwrap();
        assert_eq!(v.vectors["paris"], vec![1.0, 1.0]);
        assert_eq!(v.vectors["the"], vec![3.0, 3.0]);
        assert_eq!(v.vectors.len(), 2);
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v.txt");
        std::fs::write(&p, "a 1 2\nb 1\n").unwrap();
        let e = read_vectors(&p, None, false).unwrap_err().to_string();
        assert!(e.contains("v.txt:2: expected a word and 2 numbers"), "{e}");
        std::fs::write(&p, "a 1 x\n").unwrap();
        let e = read_vectors(&p, None, false).unwrap_err().to_string();
        assert!(e.contains("v.txt:1: expected a number, found `x`"), "{e}");
    }
}
