//! Vocabularies of words, characters and tags, saved as JSON.

use crate::error::{CorpusError, Result};
use crate::io::{read_text, write_atomic};
use crate::tags::{Scheme, Tag};
use crate::tokenization::Tokenization;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

pub const PAD: &str = "<pad>";
pub const UNK: &str = "<unk>";
pub const PAD_ID: u32 = 0;
pub const UNK_ID: u32 = 1;

/// How a word is normalised before lookup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalize {
    /// Lowercase words (the capitalisation feature keeps the lost information).
    #[serde(default)]
    pub lowercase: bool,
    /// Replace every ASCII digit by `0`, as NCRF++ and TENER do.
    #[serde(default)]
    pub zero_digits: bool,
}

impl Normalize {
    pub fn apply(&self, word: &str) -> String {
        let mut w = if self.lowercase { word.to_lowercase() } else { word.to_string() };
        if self.zero_digits && w.bytes().any(|b| b.is_ascii_digit()) {
            w = w.chars().map(|c| if c.is_ascii_digit() { '0' } else { c }).collect();
        }
        w
    }
}

/// A string-to-id map with `<pad>` = 0 and `<unk>` = 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Vocab {
    items: Vec<String>,
    index: HashMap<String, u32>,
}

impl Vocab {
    /// Builds a vocabulary from a stream of items, keeping those seen at
    /// least `min_freq` times; ids are assigned by descending frequency, ties
    /// in first-seen order, so the result is deterministic.
    pub fn build<I, S>(items: I, min_freq: usize) -> Vocab
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
        for (i, it) in items.into_iter().enumerate() {
            let e = counts.entry(it.as_ref().to_string()).or_insert((0, i));
            e.0 += 1;
        }
        let mut kept: Vec<(String, (usize, usize))> =
            counts.into_iter().filter(|(k, (c, _))| *c >= min_freq.max(1) && k != PAD && k != UNK).collect();
        kept.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
        Self::from_items([PAD.to_string(), UNK.to_string()].into_iter().chain(kept.into_iter().map(|(k, _)| k)))
            .expect("built vocabulary is valid")
    }

    /// A vocabulary from its items in id order (the first two must be
    /// `<pad>` and `<unk>`, no duplicates).
    pub fn from_items(items: impl IntoIterator<Item = String>) -> Result<Vocab, String> {
        let items: Vec<String> = items.into_iter().collect();
        if items.len() < 2 || items[0] != PAD || items[1] != UNK {
            return Err(format!("a vocabulary must start with \"{PAD}\", \"{UNK}\""));
        }
        let mut index = HashMap::with_capacity(items.len());
        for (i, it) in items.iter().enumerate() {
            if index.insert(it.clone(), i as u32).is_some() {
                return Err(format!("duplicate vocabulary entry {it:?} at position {i}"));
            }
        }
        Ok(Vocab { items, index })
    }

    /// Adds an item if absent; returns its id.
    pub fn insert(&mut self, item: &str) -> u32 {
        if let Some(&i) = self.index.get(item) {
            return i;
        }
        let i = self.items.len() as u32;
        self.items.push(item.to_string());
        self.index.insert(item.to_string(), i);
        i
    }

    pub fn get(&self, item: &str) -> Option<u32> {
        self.index.get(item).copied()
    }

    /// The id of `item`, or `<unk>`.
    pub fn id(&self, item: &str) -> u32 {
        self.get(item).unwrap_or(UNK_ID)
    }

    pub fn item(&self, id: u32) -> &str {
        &self.items[id as usize]
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn items(&self) -> &[String] {
        &self.items
    }
}

impl Serialize for Vocab {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.items.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Vocab {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let items = Vec::<String>::deserialize(d)?;
        Vocab::from_items(items).map_err(serde::de::Error::custom)
    }
}

/// Everything a tagger needs to turn text into ids and ids into tags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vocabs {
    pub normalize: Normalize,
    pub words: Vocab,
    pub chars: Vocab,
    /// The scheme the tagger is trained in.
    pub scheme: Scheme,
    /// The scheme of the source data, used when writing predictions.
    pub data_scheme: Scheme,
    /// Tags in id order.
    pub tags: Vec<String>,
    /// Question-answering data: document frequencies of the training
    /// contexts' words, for the IDF reading cue ([`crate::qa::cues`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idf: Option<crate::qa::cues::Idf>,
    /// Question-answering data: the metric its answers are scored with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qa_metric: Option<crate::qa::metric::QaMetric>,
    /// How the training text was cut into tokens (absent in runs made
    /// before it was recorded: see [`Vocabs::tokenization`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenization: Option<Tokenization>,
    /// Character bigrams of the training text ([`crate::bigrams`]), when the
    /// tagger reads them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bigrams: Option<Vocab>,
}

impl Vocabs {
    /// Builds vocabularies from training sentences (token lists with their
    /// entity types), in tagger scheme `scheme`.
    pub fn build<'a>(
        sentences: impl IntoIterator<Item = &'a [String]> + Clone,
        labels: &[String],
        normalize: Normalize,
        min_word_freq: usize,
        scheme: Scheme,
        data_scheme: Scheme,
    ) -> Vocabs {
        let words = Vocab::build(sentences.clone().into_iter().flatten().map(|w| normalize.apply(w)), min_word_freq);
        let chars = Vocab::build(
            sentences.clone().into_iter().flatten().flat_map(|w| w.chars().map(|c| c.to_string()).collect::<Vec<_>>()),
            1,
        );
        let tags = scheme.tag_set(labels).iter().map(Tag::to_string).collect();
        let tokenization = Some(Tokenization::detect(sentences.into_iter().flatten().map(String::as_str)));
        Vocabs {
            normalize,
            words,
            chars,
            scheme,
            data_scheme,
            tags,
            idf: None,
            qa_metric: None,
            tokenization,
            bigrams: None,
        }
    }

    /// How raw text is cut into tokens for this model: as its training text
    /// was, or, for a run that did not record it, as its word vocabulary
    /// suggests.
    pub fn tokenization(&self) -> Tokenization {
        self.tokenization.unwrap_or_else(|| {
            // Past <pad> and <unk>.
            Tokenization::detect(self.words.items()[2..].iter().map(String::as_str))
        })
    }

    pub fn tag_id(&self, tag: &Tag) -> Option<u32> {
        let s = tag.to_string();
        self.tags.iter().position(|t| *t == s).map(|i| i as u32)
    }

    pub fn parsed_tags(&self) -> Vec<Tag> {
        self.tags.iter().map(|t| Tag::parse(t).expect("vocabulary tags are valid")).collect()
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(|e| CorpusError::Invalid(e.to_string()))?;
        write_atomic(path, json)
    }

    pub fn load(path: &Path) -> Result<Vocabs> {
        let text = read_text(path)?;
        let v: Vocabs = serde_json::from_str(&text).map_err(|e| json_error(path, &e))?;
        for (i, t) in v.tags.iter().enumerate() {
            let tag = Tag::parse(t).map_err(|m| CorpusError::file(path, format!("tag {i}: {m}")))?;
            if !v.scheme.admits(&tag) {
                return Err(CorpusError::file(path, format!("tag {i} `{t}` is not in the {} scheme", v.scheme)));
            }
        }
        Ok(v)
    }
}

pub use crate::error::json_error;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_orders_by_frequency_and_respects_min_freq() {
        let v = Vocab::build(["b", "a", "a", "c", "b", "a"], 2);
        assert_eq!(v.items(), [PAD, UNK, "a", "b"]);
        assert_eq!(v.id("c"), UNK_ID);
        assert_eq!(v.id("b"), 3);
    }

    #[test]
    fn normalisation() {
        let n = Normalize { lowercase: true, zero_digits: true };
        assert_eq!(n.apply("Apr-2019"), "apr-0000");
        assert_eq!(Normalize::default().apply("Apr"), "Apr");
    }

    #[test]
    fn vocabs_round_trip_through_json() {
        let sents = [vec!["John".to_string(), "runs".to_string()]];
        let v = Vocabs::build(
            sents.iter().map(|s| s.as_slice()),
            &["PER".into()],
            Normalize::default(),
            1,
            Scheme::Bioes,
            Scheme::Iob1,
        );
        assert_eq!(v.tags, ["O", "B-PER", "I-PER", "E-PER", "S-PER"]);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vocab.json");
        v.save(&p).unwrap();
        assert_eq!(Vocabs::load(&p).unwrap(), v);
        assert_eq!(v.tokenization, Some(Tokenization::Words));
        // A run made before the tokenisation was recorded: read from its vocabulary.
        let mut old = v.clone();
        old.tokenization = None;
        old.words = Vocab::from_items(["<pad>", "<unk>", "高", "勇", "男"].map(String::from)).unwrap();
        assert_eq!(old.tokenization(), Tokenization::Chars);
    }

    #[test]
    fn corrupt_vocab_json_names_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vocab.json");
        std::fs::write(
            &p,
            "{\n \"normalize\": {\"lowercase\": false, \"zero_digits\": false},\n \"words\": [\"a\"]\n}",
        )
        .unwrap();
        let err = Vocabs::load(&p).unwrap_err().to_string();
        assert!(err.contains("vocab.json:4: a vocabulary must start with"), "{err}");
        assert!(err.contains("must start with"), "{err}");
    }
}
