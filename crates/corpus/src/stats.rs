//! `seqlab data stats`: sizes, entity counts and OOV rates of a dataset.

use crate::dataset::{Dataset, SplitName};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitStats {
    pub file: String,
    pub sentences: usize,
    pub tokens: usize,
    /// Entities per type, found with the scorer's chunk rules.
    pub entities: BTreeMap<String, usize>,
    pub longest: usize,
    /// Share of tokens not seen in the training split (dev and test only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oov_rate: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub scheme: String,
    pub splits: BTreeMap<String, SplitStats>,
}

pub fn stats(ds: &Dataset) -> Stats {
    let train_vocab: Option<HashSet<&str>> = ds
        .split(SplitName::Train)
        .map(|s| s.sentences.iter().flat_map(|s| s.tokens.iter().map(String::as_str)).collect());
    let mut splits = BTreeMap::new();
    for split in &ds.splits {
        let mut entities = BTreeMap::new();
        for s in &split.sentences {
            for span in ds.scheme.decode(&s.tags) {
                *entities.entry(span.label).or_insert(0) += 1;
            }
        }
        let tokens = split.tokens();
        let oov_rate = match (&train_vocab, split.name) {
            (Some(v), SplitName::Dev | SplitName::Test) => {
                let oov = split.sentences.iter().flat_map(|s| &s.tokens).filter(|t| !v.contains(t.as_str())).count();
                Some(if tokens == 0 { 0.0 } else { oov as f64 / tokens as f64 })
            }
            _ => None,
        };
        splits.insert(
            split.name.as_str().to_string(),
            SplitStats {
                file: split.path.display().to_string(),
                sentences: split.sentences.len(),
                tokens,
                entities,
                longest: split.sentences.iter().map(|s| s.tokens.len()).max().unwrap_or(0),
                oov_rate,
            },
        );
    }
    Stats { scheme: ds.scheme.to_string(), splits }
}

impl Stats {
    /// A plain-text table.
    pub fn table(&self) -> String {
        let types: std::collections::BTreeSet<&String> = self.splits.values().flat_map(|s| s.entities.keys()).collect();
        let mut out = format!("scheme: {}\n", self.scheme);
        let mut header = format!("{:<6} {:>9} {:>9} {:>8} {:>7}", "split", "sentences", "tokens", "longest", "OOV");
        for t in &types {
            header.push_str(&format!(" {:>7}", t));
        }
        header.push_str(&format!(" {:>8}", "entities"));
        out.push_str(&header);
        out.push('\n');
        for name in ["train", "dev", "test"] {
            let Some(s) = self.splits.get(name) else { continue };
            let oov = s.oov_rate.map_or("-".to_string(), |r| format!("{:.2}%", 100.0 * r));
            let mut row = format!("{:<6} {:>9} {:>9} {:>8} {:>7}", name, s.sentences, s.tokens, s.longest, oov);
            for t in &types {
                row.push_str(&format!(" {:>7}", s.entities.get(*t).copied().unwrap_or(0)));
            }
            row.push_str(&format!(" {:>8}", s.entities.values().sum::<usize>()));
            out.push_str(&row);
            out.push('\n');
        }
        for name in ["train", "dev", "test"] {
            if let Some(s) = self.splits.get(name) {
                out.push_str(&format!("{name}: {}\n", s.file));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_entities_with_scorer_rules_and_oov() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("train.txt"), "John I-PER\nSmith I-PER\nsaw O\nParis I-LOC\n\nhe O\n").unwrap();
        std::fs::write(d.path().join("test.txt"), "Mary I-PER\nsaw O\nParis I-LOC\nBerlin B-LOC\n").unwrap();
        let ds = Dataset::load(d.path()).unwrap();
        let s = stats(&ds);
        assert_eq!(s.scheme, "IOB1");
        let train = &s.splits["train"];
        assert_eq!((train.sentences, train.tokens, train.longest), (2, 5, 4));
        assert_eq!(train.entities["PER"], 1);
        let test = &s.splits["test"];
        assert_eq!(test.entities["LOC"], 2);
        assert_eq!(test.oov_rate, Some(0.5));
        assert!(s.table().contains("test"));
    }
}
