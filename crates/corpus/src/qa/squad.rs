//! Extractive question answering data: SQuAD v1.1-style JSON (CMRC files
//! share the format), a deterministic split by article, and the official
//! SQuAD v1.1 exact-match and token-F1 metrics.
//!
//! Offsets are in characters (Unicode scalar values), as in the files.
//!
//! Extractive QA as sequence labelling: [`qa_sentences`] turns each
//! question into one sentence (its context's sub-tokens, tagged
//! `B-ANS`/`I-ANS`/`O` from the first gold answer by character offsets)
//! with the question's sub-tokens attached, and a [`QaItem`] that maps
//! tagged sub-tokens back to answer text ([`span_text`]).

use crate::error::{CorpusError, Result};
use crate::io::{read_text, write_atomic};
use crate::reader::Sentence;
use crate::split::{classify, SplitName};
use crate::tags::{Prefix, Tag};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SquadFile {
    #[serde(default)]
    pub version: String,
    pub data: Vec<Article>,
    /// How many first answers [`SquadFile::parse_with`] moved to the
    /// nearest occurrence of their text (their offset disagreed with the
    /// context); not part of the file.
    #[serde(skip)]
    pub repaired: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Article {
    pub title: String,
    pub paragraphs: Vec<Paragraph>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Paragraph {
    pub context: String,
    pub qas: Vec<Question>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    /// Missing in files of questions to answer (see [`Answers::Optional`]).
    #[serde(default)]
    pub answers: Vec<Answer>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub text: String,
    /// Character offset of the answer in the context. A negative offset in
    /// the file (DrQA-style files write -1 for "unknown") reads as
    /// [`NO_OFFSET`] and is written back as -1. After
    /// [`SquadFile::parse_with`], a question's first answer is always where
    /// this says; the others (used only for scoring) may be anywhere.
    #[serde(with = "offset")]
    pub answer_start: usize,
}

/// `answer_start` of an answer whose file gave a negative offset.
pub const NO_OFFSET: usize = usize::MAX;

/// `answer_start` as the files write it: a non-negative number, or a
/// negative one for "unknown" ([`NO_OFFSET`], written as -1).
mod offset {
    use super::NO_OFFSET;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &usize, s: S) -> Result<S::Ok, S::Error> {
        if *v == NO_OFFSET {
            s.serialize_i64(-1)
        } else {
            s.serialize_u64(*v as u64)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        d.deserialize_i64(Offset)
    }

    struct Offset;

    impl serde::de::Visitor<'_> for Offset {
        type Value = usize;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a character offset (an integer, negative for none)")
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<usize, E> {
            Ok(usize::try_from(v).unwrap_or(NO_OFFSET))
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<usize, E> {
            usize::try_from(v)
                .ok()
                .filter(|&v| v != NO_OFFSET)
                .ok_or_else(|| E::custom(format!("offset {v} is too large")))
        }
    }
}

/// Counts of a SQuAD file.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SquadStats {
    pub articles: usize,
    pub paragraphs: usize,
    pub questions: usize,
    pub answers: usize,
}

impl SquadFile {
    /// Reads and checks a SQuAD-format file: JSON errors name the line.
    /// A question's first answer (the one training tags) whose offset
    /// disagrees with its context is moved to the nearest occurrence of its
    /// text (counted in [`SquadFile::repaired`]); one whose text is not in
    /// the context at all is an error naming the question id and the line
    /// where that id is written. The other answers are only compared as
    /// text, so their offsets are not checked.
    pub fn read(path: &Path) -> Result<SquadFile> {
        let text = read_text(path)?;
        Self::parse(path, &text)
    }

    /// [`SquadFile::read`] on text already in memory; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<SquadFile> {
        Self::parse_with(path, text, Answers::Required)
    }

    /// [`SquadFile::parse`], with questions that have no answer allowed
    /// (input to answer, not training or scoring data) when `answers` says so.
    pub fn parse_with(path: &Path, text: &str, answers: Answers) -> Result<SquadFile> {
        let mut file: SquadFile = serde_json::from_str(text).map_err(|e| crate::error::json_error(path, &e))?;
        let line_of = |id: &str| {
            let needle = serde_json::to_string(id).unwrap_or_default();
            text.find(&needle).map_or(1, |at| text[..at].matches('\n').count() + 1)
        };
        let mut repaired = 0;
        for p in file.data.iter_mut().flat_map(|a| a.paragraphs.iter_mut()) {
            let chars: Vec<char> = p.context.chars().collect();
            for q in &mut p.qas {
                if q.answers.is_empty() && answers == Answers::Required {
                    return Err(CorpusError::at(
                        path,
                        line_of(&q.id),
                        format!("question {} has no answer (SQuAD v1.1 questions have at least one)", q.id),
                    ));
                }
                let Some(first) = q.answers.first_mut() else { continue };
                match repair_offset(&chars, first) {
                    Some(moved) => repaired += usize::from(moved),
                    None => {
                        let given = if first.answer_start == NO_OFFSET {
                            "no offset".to_string()
                        } else {
                            format!("offset {}", first.answer_start)
                        };
                        return Err(CorpusError::at(
                            path,
                            line_of(&q.id),
                            format!(
                                "question {}: expected its first answer {:?} ({given}) in its context ({} characters), which does not contain that text",
                                q.id,
                                first.text,
                                chars.len()
                            ),
                        ));
                    }
                }
            }
        }
        file.repaired = repaired;
        Ok(file)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string(self).map_err(|e| CorpusError::Invalid(e.to_string()))?;
        write_atomic(path, json)
    }

    pub fn stats(&self) -> SquadStats {
        let paragraphs = self.data.iter().flat_map(|a| &a.paragraphs);
        SquadStats {
            articles: self.data.len(),
            paragraphs: paragraphs.clone().count(),
            questions: paragraphs.clone().map(|p| p.qas.len()).sum(),
            answers: paragraphs.flat_map(|p| &p.qas).map(|q| q.answers.len()).sum(),
        }
    }

    /// Splits by article, so that no article is in both parts: the
    /// `held_out` articles whose titles hash lowest (FNV-1a of the title,
    /// then the title, so the split depends neither on file order nor on a
    /// random generator) form the second part, the rest keep their order in
    /// the first.
    pub fn split_by_article(&self, held_out: usize) -> (SquadFile, SquadFile) {
        let fnv = |s: &str| s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        let mut order: Vec<usize> = (0..self.data.len()).collect();
        order.sort_by(|&a, &b| {
            let (ta, tb) = (&self.data[a].title, &self.data[b].title);
            (fnv(ta), ta, a).cmp(&(fnv(tb), tb, b))
        });
        let mut held: Vec<usize> = order.into_iter().take(held_out.min(self.data.len())).collect();
        held.sort_unstable();
        let part = |keep: &dyn Fn(usize) -> bool| SquadFile {
            version: self.version.clone(),
            data: (0..self.data.len()).filter(|&i| keep(i)).map(|i| self.data[i].clone()).collect(),
            repaired: 0,
        };
        (part(&|i| held.binary_search(&i).is_err()), part(&|i| held.binary_search(&i).is_ok()))
    }

    /// Train, dev and test parts by article: test is what
    /// [`SquadFile::split_by_article`] holds out (`test` articles), dev the
    /// `dev` articles the same rule holds out of the rest, train the rest
    /// (each in file order). No article is in two parts.
    pub fn split_train_dev_test(&self, test: usize, dev: usize) -> (SquadFile, SquadFile, SquadFile) {
        let (rest, test) = self.split_by_article(test);
        let (train, dev) = rest.split_by_article(dev);
        (train, dev, test)
    }
}

/// Checks that `answer` is where its offset says in `chars`; if not, moves
/// it to the nearest occurrence of its text (the first one when it has
/// [`NO_OFFSET`]). `Some(moved)`, or `None` when the text does not occur.
fn repair_offset(chars: &[char], answer: &mut Answer) -> Option<bool> {
    let text: Vec<char> = answer.text.chars().collect();
    let at = |s: usize| s.checked_add(text.len()).and_then(|e| chars.get(s..e)) == Some(text.as_slice());
    if at(answer.answer_start) {
        return Some(false);
    }
    let starts = (0..=chars.len().checked_sub(text.len())?).filter(|&s| at(s));
    let near = answer.answer_start;
    let best = if near == NO_OFFSET { starts.min() } else { starts.min_by_key(|&s| (s.abs_diff(near), s)) };
    answer.answer_start = best?;
    Some(true)
}

/// The official SQuAD v1.1 normalisation: lowercase, drop ASCII
/// punctuation, drop the articles a/an/the, collapse whitespace.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower.chars().filter(|c| !c.is_ascii_punctuation()).collect();
    // The official script's `\b(a|an|the)\b` then `' '.join(text.split())`:
    // words are what whitespace and the regex's word boundaries separate.
    let mut out: Vec<String> = Vec::new();
    for word in no_punct.split_whitespace() {
        let kept = remove_articles(word);
        out.extend(kept.split_whitespace().map(String::from));
    }
    out.join(" ")
}

/// `re.sub(r'\b(a|an|the)\b', ' ', word)` on one whitespace-free word: an
/// article counts only between word boundaries (letters, digits and `_` are
/// word characters).
fn remove_articles(word: &str) -> String {
    let chars: Vec<char> = word.chars().collect();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let boundary_before = i == 0 || !is_word(chars[i - 1]);
        let mut matched = 0;
        if boundary_before {
            for art in ["the", "an", "a"] {
                let n = art.len();
                let hit = chars.len() >= i + n && chars[i..i + n].iter().copied().eq(art.chars());
                if hit && (i + n == chars.len() || !is_word(chars[i + n])) {
                    matched = n;
                    break;
                }
            }
        }
        if matched > 0 {
            out.push(' ');
            i += matched;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// 1 if the normalised strings are equal.
pub fn exact_match(prediction: &str, gold: &str) -> f64 {
    f64::from(normalize_answer(prediction) == normalize_answer(gold))
}

/// Token F1 between the normalised answers (bag of words).
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let p = normalize_answer(prediction);
    let g = normalize_answer(gold);
    let (p, g): (Vec<&str>, Vec<&str>) = (p.split_whitespace().collect(), g.split_whitespace().collect());
    let mut counts: HashMap<&str, isize> = HashMap::new();
    for t in &g {
        *counts.entry(t).or_default() += 1;
    }
    let mut same = 0;
    for t in &p {
        if let Some(c) = counts.get_mut(t) {
            if *c > 0 {
                *c -= 1;
                same += 1;
            }
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Exact match and F1 over a set of questions, each the max over its gold answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QaScore {
    /// Fractions in [0, 1] (the official script prints them × 100).
    pub exact_match: f64,
    pub f1: f64,
    pub questions: usize,
}

/// Scores `(prediction, gold answers)` pairs as the official v1.1 script does.
pub fn qa_score<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [String])>) -> QaScore {
    qa_score_with(pairs, exact_match, token_f1)
}

/// Exact match and F1 of each question, the max over its gold answers
/// under the metric's `em` and `f1`, averaged over the questions.
pub fn qa_score_with<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a [String])>,
    em: fn(&str, &str) -> f64,
    f1: fn(&str, &str) -> f64,
) -> QaScore {
    let (mut em_sum, mut f1_sum, mut n) = (0.0, 0.0, 0usize);
    for (pred, golds) in pairs {
        em_sum += golds.iter().map(|g| em(pred, g)).fold(0.0, f64::max);
        f1_sum += golds.iter().map(|g| f1(pred, g)).fold(0.0, f64::max);
        n += 1;
    }
    let d = n.max(1) as f64;
    QaScore { exact_match: em_sum / d, f1: f1_sum / d, questions: n }
}

/// Whether every question must come with its gold answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answers {
    /// Training and scoring data: SQuAD v1.1 questions have at least one.
    Required,
    /// Questions to answer: those without answers are tagged all `O`.
    Optional,
}

/// A sub-token of a text and its characters `start..end` in that text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    pub start: usize,
    pub end: usize,
}

/// A tokenizer as QA tagging sees it: text to pieces with character offsets.
pub type Tokenize<'a> = &'a dyn Fn(&str) -> std::result::Result<Vec<Piece>, String>;

/// What a QA sentence needs to become an answer again.
#[derive(Clone, Debug, PartialEq)]
pub struct QaItem {
    pub id: String,
    /// The question's sub-tokens: what the context is tagged against.
    pub question: Vec<String>,
    /// The question as written (for the word-level reading cues).
    pub question_text: String,
    pub context: std::sync::Arc<str>,
    /// Characters `start..end` of the context covered by each sub-token.
    pub offsets: Vec<(usize, usize)>,
    /// Gold answer texts.
    pub answers: Vec<String>,
}

/// The label of answer spans.
pub const ANSWER: &str = "ANS";

/// `B-ANS`/`I-ANS`/`O` for the pieces overlapping characters `start..end`;
/// `None` when no piece does (a tokenizer that dropped the answer).
pub fn answer_tags(offsets: &[(usize, usize)], start: usize, end: usize) -> Option<Vec<Tag>> {
    let mut tags = vec![Tag::O; offsets.len()];
    let mut inside = false;
    for (t, &(s, e)) in tags.iter_mut().zip(offsets) {
        if s < end && e > start && e > s {
            let prefix = if inside { Prefix::I } else { Prefix::B };
            *t = Tag::Chunk { prefix, label: ANSWER.into() };
            inside = true;
        }
    }
    inside.then_some(tags)
}

impl QaItem {
    /// The context's reading cues against the question, `[pieces × CUES]`
    /// ([`crate::qa::cues::context_cues`]).
    pub fn cues(&self, idf: Option<&crate::qa::cues::Idf>) -> Vec<u32> {
        crate::qa::cues::context_cues(&self.context, &self.offsets, &self.question_text, idf)
    }

    /// Each of the context's sub-tokens `pieces` as written in the context
    /// (its characters `offsets[i]`: case and accents kept, no `##`), what
    /// the character and case features read; a piece that covers no
    /// character keeps its own text.
    pub fn surfaces(&self, pieces: &[String]) -> Vec<String> {
        let chars: Vec<char> = self.context.chars().collect();
        pieces
            .iter()
            .zip(&self.offsets)
            .map(|(piece, &(s, e))| match chars.get(s..e.min(chars.len())) {
                Some(written) if !written.is_empty() => written.iter().collect(),
                _ => piece.clone(),
            })
            .collect()
    }
}

/// The context's characters from the start of sub-token `first` to the end
/// of sub-token `last` (inclusive): the answer text of a tagged span.
pub fn span_text(context: &str, offsets: &[(usize, usize)], first: usize, last: usize) -> String {
    let (start, end) = (offsets[first].0, offsets[last].1.max(offsets[first].0));
    context.chars().skip(start).take(end - start).collect()
}

pub(crate) use crate::qa::cues::is_cjk;

/// Sub-tokens `first..=last` widened to whole words: while the piece before
/// (after) touches the span with letters or digits on both sides, as the
/// pieces of one WordPiece word do ("nik" "##ola"), it joins the span. CJK
/// characters are words of their own. Answers are words, as in the
/// official data, not fragments of them.
pub fn whole_words(context: &str, offsets: &[(usize, usize)], first: usize, last: usize) -> (usize, usize) {
    let chars: Vec<char> = context.chars().collect();
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() && !is_cjk(*c));
    let joined = |a: usize, b: usize| {
        let ((_, end), (start, _)) = (offsets[a], offsets[b]);
        end == start && end > 0 && word(chars.get(end - 1)) && word(chars.get(start))
    };
    let (mut first, mut last) = (first, last);
    while first > 0 && joined(first - 1, first) {
        first -= 1;
    }
    while last + 1 < offsets.len() && joined(last, last + 1) {
        last += 1;
    }
    (first, last)
}

/// Words of a text with their character offsets, for methods that read
/// words rather than sub-tokens (the baselines of [`crate::qa::baseline`]):
/// runs of letters and digits (a `.` or `,` between two digits stays
/// inside: "1,000", "3.5"), each CJK character alone, and each other
/// character that is not whitespace alone (punctuation).
pub fn words(text: &str) -> Vec<Piece> {
    let chars: Vec<char> = text.chars().collect();
    let word = |c: char| c.is_alphanumeric() && !is_cjk(c);
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        i += 1;
        if c.is_whitespace() {
            continue;
        }
        if word(c) {
            while i < chars.len() {
                let joins = matches!(chars[i], '.' | ',')
                    && chars[i - 1].is_ascii_digit()
                    && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit());
                if word(chars[i]) || joins {
                    i += 1;
                } else {
                    break;
                }
            }
        }
        out.push(Piece { text: chars[start..i].iter().collect(), start, end: i });
    }
    out
}

/// A SQuAD-format file's text as QA sentences: [`SquadFile::parse_with`]
/// and [`qa_sentences`] with the same `answers`.
pub fn read_qa(path: &Path, text: &str, tokenize: Tokenize, answers: Answers) -> Result<(Vec<Sentence>, Vec<QaItem>)> {
    let file = SquadFile::parse_with(path, text, answers)?;
    qa_sentences(path, text, &file, tokenize, answers)
}

/// One sentence per question (see the module docs), in file order, and the
/// items that map its tags back to text. Errors name the file, the line of
/// the question id, and what went wrong. `file` must have been parsed with
/// the same `answers`.
pub fn qa_sentences(
    path: &Path,
    text: &str,
    file: &SquadFile,
    tokenize: Tokenize,
    answers: Answers,
) -> Result<(Vec<Sentence>, Vec<QaItem>)> {
    let mut sentences = Vec::new();
    let mut items = Vec::new();
    // Question ids appear in file order: find each after the previous one.
    let (mut pos, mut line) = (0usize, 1usize);
    for (doc, article) in file.data.iter().enumerate() {
        for p in &article.paragraphs {
            let context: std::sync::Arc<str> = p.context.as_str().into();
            let mut pieces: Option<Vec<Piece>> = None;
            for q in &p.qas {
                let needle = serde_json::to_string(&q.id).unwrap_or_default();
                if let Some(at) = text[pos..].find(&needle) {
                    line += text[pos..pos + at].matches('\n').count();
                    pos += at;
                }
                let fail = |m: String| CorpusError::at(path, line, format!("question {}: {m}", q.id));
                if pieces.is_none() {
                    let ps = tokenize(&p.context).map_err(|e| fail(format!("tokenizing its context: {e}")))?;
                    if ps.is_empty() {
                        return Err(fail("the tokenizer gives no token for its context".into()));
                    }
                    pieces = Some(ps);
                }
                let ps = pieces.as_ref().expect("tokenized above");
                let offsets: Vec<(usize, usize)> = ps.iter().map(|p| (p.start, p.end)).collect();
                let question = tokenize(&q.question).map_err(|e| fail(format!("tokenizing the question: {e}")))?;
                let tags = match (q.answers.first(), answers) {
                    (None, Answers::Optional) => vec![Tag::O; offsets.len()],
                    (None, Answers::Required) => return Err(fail("no answer".into())),
                    (Some(first), _) => {
                        let end = first.answer_start.saturating_add(first.text.chars().count());
                        answer_tags(&offsets, first.answer_start, end).ok_or_else(|| {
                            fail(format!(
                                "no token of the tokenized context covers the answer {:?} (characters {}..{end})",
                                first.text, first.answer_start
                            ))
                        })?
                    }
                };
                sentences.push(Sentence { tokens: ps.iter().map(|p| p.text.clone()).collect(), tags, doc, line });
                items.push(QaItem {
                    id: q.id.clone(),
                    question: question.into_iter().map(|p| p.text).collect(),
                    question_text: q.question.clone(),
                    context: context.clone(),
                    offsets,
                    answers: q.answers.iter().map(|a| a.text.clone()).collect(),
                });
            }
        }
    }
    Ok((sentences, items))
}

/// The SQuAD files of a QA dataset folder: `*train*.json`, `*dev*.json`
/// (or `*valid*`, `*testa*`), `*test*.json`, named as tagged files are;
/// `None` when the folder has no such file.
pub fn qa_files(dir: &Path) -> Option<Vec<(SplitName, std::path::PathBuf)>> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_ascii_lowercase();
        if !name.ends_with(".json") || !e.path().is_file() {
            continue;
        }
        if let Some(split) = classify(&name) {
            found.push((split, e.path()));
        }
    }
    found.sort();
    (!found.is_empty()).then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lowercased WordPiece pieces read back as the context writes them;
    /// a piece over no character keeps its own text.
    #[test]
    fn surfaces_are_the_pieces_as_written() {
        let item = QaItem {
            id: "q".into(),
            question: vec![],
            question_text: String::new(),
            context: "Élan in FRance".into(),
            offsets: vec![(0, 4), (5, 7), (8, 10), (10, 14), (14, 14)],
            answers: vec![],
        };
        let pieces: Vec<String> = ["elan", "in", "fr", "##ance", "[x]"].map(String::from).to_vec();
        assert_eq!(item.surfaces(&pieces), ["Élan", "in", "FR", "ance", "[x]"]);
    }

    const FIXTURE: &str = r#"{"version": "1.1", "data": [
 {"title": "Normans", "paragraphs": [
  {"context": "The Normans gave their name to Normandy, a region in France.",
   "qas": [{"id": "q1", "question": "Who gave their name to Normandy?",
            "answers": [{"text": "The Normans", "answer_start": 0}, {"text": "Normans", "answer_start": 4}]},
           {"id": "q2", "question": "In what country is Normandy?",
            "answers": [{"text": "France", "answer_start": 53}]}]}]},
 {"title": "\u4e2d\u56fd", "paragraphs": [
  {"context": "\u5317\u4eac\u662f\u4e2d\u56fd\u7684\u9996\u90fd\u3002",
   "qas": [{"id": "q3", "question": "\u4e2d\u56fd\u7684\u9996\u90fd\u662f\u54ea\u91cc\uff1f",
            "answers": [{"text": "\u5317\u4eac", "answer_start": 0}]}]}]}
]}"#;

    #[test]
    fn reads_a_fixture_with_chinese_and_counts_it() {
        let f = SquadFile::parse(Path::new("dev.json"), FIXTURE).unwrap();
        assert_eq!(f.stats(), SquadStats { articles: 2, paragraphs: 2, questions: 3, answers: 4 });
        assert_eq!(f.data[1].paragraphs[0].qas[0].answers[0].text, "北京");
    }

    #[test]
    fn bad_json_names_the_file_and_line() {
        let e = SquadFile::parse(Path::new("dev.json"), &FIXTURE.replace("\"qas\"", "\"qs\"")).unwrap_err();
        assert!(e.to_string().starts_with("dev.json:") && e.to_string().contains("qas"), "{e}");
        let e = SquadFile::parse(Path::new("dev.json"), "{\"data\": [\n{\"title\": 3}]}").unwrap_err();
        assert!(e.to_string().starts_with("dev.json:2:"), "{e}");
        // An offset that is not an integer is still a JSON error.
        let e = SquadFile::parse(Path::new("dev.json"), &FIXTURE.replace(": 53}", ": \"53\"}")).unwrap_err();
        assert!(
            e.to_string().starts_with("dev.json:7:") && e.to_string().contains("expected a character offset"),
            "{e}"
        );
    }

    /// Words of the test texts: runs of letters and digits.
    fn alnum_pieces(t: &str) -> std::result::Result<Vec<Piece>, String> {
        Ok(words(t).into_iter().filter(|p| p.text.chars().all(char::is_alphanumeric)).collect())
    }

    #[test]
    fn a_first_answer_at_offset_minus_one_moves_to_the_first_occurrence_and_is_counted() {
        let text = FIXTURE.replace("\"answer_start\": 53", "\"answer_start\": -1");
        let f = SquadFile::parse(Path::new("dev.json"), &text).unwrap();
        assert_eq!(f.data[0].paragraphs[0].qas[1].answers[0].answer_start, 53);
        assert_eq!(f.repaired, 1);
        assert_eq!(SquadFile::parse(Path::new("dev.json"), FIXTURE).unwrap().repaired, 0);
        // Tags follow the repaired offset.
        let (sentences, items) =
            qa_sentences(Path::new("dev.json"), &text, &f, &alnum_pieces, Answers::Required).unwrap();
        let spans = crate::tags::Scheme::Iob2.decode(&sentences[1].tags);
        assert_eq!(span_text(&items[1].context, &items[1].offsets, spans[0].start, spans[0].end - 1), "France");
    }

    #[test]
    fn a_first_answer_off_by_two_is_repaired() {
        for wrong in ["51", "55"] {
            let text = FIXTURE.replace("\"answer_start\": 53", &format!("\"answer_start\": {wrong}"));
            let f = SquadFile::parse(Path::new("dev.json"), &text).unwrap();
            assert_eq!(f.data[0].paragraphs[0].qas[1].answers[0].answer_start, 53, "{wrong}");
            assert_eq!(f.repaired, 1);
        }
    }

    #[test]
    fn a_repaired_offset_goes_to_the_nearest_occurrence() {
        // "Paris" at characters 0, 14 and 28.
        let file = |start: &str| {
            format!(
                r#"{{"data": [{{"title": "P", "paragraphs": [{{"context": "Paris is big. Paris is old. Paris is far.",
                "qas": [{{"id": "p1", "question": "Where?", "answers": [{{"text": "Paris", "answer_start": {start}}}]}}]}}]}}]}}"#
            )
        };
        let at = |start: &str| {
            let f = SquadFile::parse(Path::new("p.json"), &file(start)).unwrap();
            (f.data[0].paragraphs[0].qas[0].answers[0].answer_start, f.repaired)
        };
        assert_eq!(at("14"), (14, 0), "a right offset stays");
        assert_eq!(at("12"), (14, 1), "2 away from 14, 12 from 0");
        assert_eq!(at("25"), (28, 1), "3 away from 28, 11 from 14");
        assert_eq!(at("7"), (0, 1), "a tie goes to the earlier occurrence");
        assert_eq!(at("-1"), (0, 1), "no offset: the first occurrence");
        assert_eq!(at("9000"), (28, 1), "past the end: the last occurrence");
    }

    #[test]
    fn a_first_answer_whose_text_is_not_in_the_context_names_file_line_and_id() {
        let text = FIXTURE
            .replace("{\"text\": \"France\", \"answer_start\": 53}", "{\"text\": \"Germany\", \"answer_start\": 53}");
        let e = SquadFile::parse(Path::new("dev.json"), &text).unwrap_err().to_string();
        assert!(e.starts_with("dev.json:6:") && e.contains("question q2") && e.contains("\"Germany\""), "{e}");
        assert!(e.contains("does not contain"), "{e}");
        // Also when the offset is -1.
        let text = text.replace("\"Germany\", \"answer_start\": 53", "\"Germany\", \"answer_start\": -1");
        let e = SquadFile::parse(Path::new("dev.json"), &text).unwrap_err().to_string();
        assert!(e.starts_with("dev.json:6:") && e.contains("question q2") && e.contains("no offset"), "{e}");
    }

    #[test]
    fn later_answers_need_no_offset_and_minus_one_is_written_back() {
        // q1's second answer: offset -1; q2 gets a second answer at a wrong
        // offset and a third whose text is not even in the context.
        let text = FIXTURE.replace("{\"text\": \"Normans\", \"answer_start\": 4}", "{\"text\": \"Normans\", \"answer_start\": -1}").replace(
            "[{\"text\": \"France\", \"answer_start\": 53}]",
            "[{\"text\": \"France\", \"answer_start\": 53}, {\"text\": \"France\", \"answer_start\": 2}, {\"text\": \"in Europe\", \"answer_start\": 7}]",
        );
        let f = SquadFile::parse(Path::new("dev.json"), &text).unwrap();
        assert_eq!(f.repaired, 0, "only first answers are repaired");
        let q1 = &f.data[0].paragraphs[0].qas[0];
        assert_eq!(q1.answers[1].answer_start, NO_OFFSET);
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains(r#"{"text":"Normans","answer_start":-1}"#), "{json}");
        assert!(json.contains(r#"{"text":"in Europe","answer_start":7}"#), "{json}");
        // A good file is written as it was read (no extra keys).
        let good = serde_json::to_string(&SquadFile::parse(Path::new("dev.json"), FIXTURE).unwrap()).unwrap();
        let expect: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&good).unwrap(), expect);
        // The extra answers are still gold answers to score against.
        let (_, items) = read_qa(Path::new("dev.json"), &text, &alnum_pieces, Answers::Required).unwrap();
        assert_eq!(items[1].answers, ["France", "France", "in Europe"]);
    }

    #[test]
    fn words_keep_numbers_and_split_punctuation_and_cjk() {
        let w = |t: &str| words(t).into_iter().map(|p| p.text).collect::<Vec<_>>();
        assert_eq!(
            w("In 1,000.5 years, Tesla's U.S."),
            ["In", "1,000.5", "years", ",", "Tesla", "'", "s", "U", ".", "S", "."]
        );
        assert_eq!(w("北京是 2008年"), ["北", "京", "是", "2008", "年"]);
        let p = &words("a  bc")[1];
        assert_eq!((p.start, p.end), (3, 5));
    }

    #[test]
    fn questions_without_answers_are_refused_for_training_and_tagged_all_o_for_answering() {
        // q2 loses its answers (key and all), q3 keeps an empty list.
        let text = FIXTURE
            .replace(",\n            \"answers\": [{\"text\": \"France\", \"answer_start\": 53}]", "")
            .replace("\"answers\": [{\"text\": \"\\u5317\\u4eac\", \"answer_start\": 0}]", "\"answers\": []");
        assert!(!text.contains("France\""), "the fixture edit took");
        let e = SquadFile::parse(Path::new("q.json"), &text).unwrap_err().to_string();
        assert!(e.starts_with("q.json:6:") && e.contains("question q2 has no answer"), "{e}");
        let file = SquadFile::parse_with(Path::new("q.json"), &text, Answers::Optional).unwrap();
        let tokenize = alnum_pieces;
        let (sentences, items) = qa_sentences(Path::new("q.json"), &text, &file, &tokenize, Answers::Optional).unwrap();
        assert_eq!(items.iter().map(|i| i.answers.len()).collect::<Vec<_>>(), [2, 0, 0]);
        assert!(sentences[0].tags.iter().any(|t| *t != Tag::O), "q1 keeps its gold span");
        for s in &sentences[1..] {
            assert!(s.tags.iter().all(|t| *t == Tag::O) && s.tags.len() == s.tokens.len());
        }
        assert!(qa_sentences(Path::new("q.json"), &text, &file, &tokenize, Answers::Required).is_err());
    }

    #[test]
    fn answers_widen_to_whole_words_but_not_across_spaces_punctuation_or_cjk() {
        // "Nikola Tesla, 1856" as WordPiece cuts it: nik ##ola tes ##la , 1856
        let context = "Nikola Tesla, 1856";
        let offsets = [(0, 3), (3, 6), (7, 10), (10, 12), (12, 13), (14, 18)];
        assert_eq!(whole_words(context, &offsets, 0, 0), (0, 1));
        assert_eq!(whole_words(context, &offsets, 3, 3), (2, 3));
        assert_eq!(whole_words(context, &offsets, 1, 2), (0, 3));
        assert_eq!(whole_words(context, &offsets, 4, 4), (4, 4), "the comma stays alone");
        assert_eq!(whole_words(context, &offsets, 5, 5), (5, 5));
        // Chinese: one piece per character, each a word.
        let offsets: Vec<(usize, usize)> = (0..5).map(|c| (c, c + 1)).collect();
        assert_eq!(whole_words("北京是首都", &offsets, 1, 1), (1, 1));
    }

    #[test]
    fn split_by_article_is_disjoint_complete_and_stable() {
        let mut f = SquadFile::parse(Path::new("dev.json"), FIXTURE).unwrap();
        for i in 0..8 {
            let mut a = f.data[0].clone();
            a.title = format!("Article {i}");
            f.data.push(a);
        }
        let (train, held) = f.split_by_article(3);
        assert_eq!((train.data.len(), held.data.len()), (7, 3));
        let titles = |s: &SquadFile| s.data.iter().map(|a| a.title.clone()).collect::<Vec<_>>();
        assert!(titles(&held).iter().all(|t| !titles(&train).contains(t)));
        // The same articles are held out whatever the file order.
        let mut reversed = f.clone();
        reversed.data.reverse();
        let mut a = titles(&reversed.split_by_article(3).1);
        let mut b = titles(&held);
        a.sort();
        b.sort();
        assert_eq!(a, b);
        // Three parts: test is what split_by_article holds out, dev comes
        // from the rest, no article in two parts, none lost.
        let (train, dev, test) = f.split_train_dev_test(3, 2);
        assert_eq!((train.data.len(), dev.data.len(), test.data.len()), (5, 2, 3));
        assert_eq!(titles(&test), titles(&held));
        let mut all: Vec<String> = [&train, &dev, &test].iter().flat_map(|p| titles(p)).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), f.data.len(), "every article in exactly one part");
        let (_, dev0, _) = f.split_train_dev_test(3, 0);
        assert!(dev0.data.is_empty());
    }

    #[test]
    fn official_normalisation_and_metrics() {
        assert_eq!(normalize_answer("The  Cat's hat!"), "cats hat");
        assert_eq!(normalize_answer("an apple, a day"), "apple day");
        // Only whole words: "theory", "Anna" and "a1" keep their letters.
        assert_eq!(normalize_answer("theory of Anna a1"), "theory of anna a1");
        // Punctuation goes first, so "the-end" becomes "theend".
        assert_eq!(normalize_answer("the-end"), "theend");
        assert_eq!(exact_match("the Normans", "Normans"), 1.0);
        assert_eq!(exact_match("Normans.", "Norman"), 0.0);
        // pred "Denver Broncos team", gold "Denver Broncos": P 2/3, R 1 → 0.8.
        assert!((token_f1("Denver Broncos team", "Denver Broncos") - 0.8).abs() < 1e-12);
        assert_eq!(token_f1("", "x"), 0.0);
        let golds = vec!["Denver Broncos".to_string(), "Broncos".to_string()];
        let s = qa_score([("Broncos", golds.as_slice()), ("Carolina", golds.as_slice())]);
        assert_eq!(s, QaScore { exact_match: 0.5, f1: 0.5, questions: 2 });
    }
}
