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
    /// Character offset of the answer in the context.
    pub answer_start: usize,
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
    /// Reads and checks a SQuAD-format file: JSON errors name the line;
    /// an answer whose offset and text disagree with its context names the
    /// question id and the line where that id is written.
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
        let file: SquadFile = serde_json::from_str(text).map_err(|e| crate::vocab::json_error(path, &e))?;
        let line_of = |id: &str| {
            let needle = serde_json::to_string(id).unwrap_or_default();
            text.find(&needle).map_or(1, |at| text[..at].matches('\n').count() + 1)
        };
        for article in &file.data {
            for p in &article.paragraphs {
                let chars: Vec<char> = p.context.chars().collect();
                for q in &p.qas {
                    if q.answers.is_empty() && answers == Answers::Required {
                        return Err(CorpusError::at(
                            path,
                            line_of(&q.id),
                            format!("question {} has no answer (SQuAD v1.1 questions have at least one)", q.id),
                        ));
                    }
                    for a in &q.answers {
                        let n = a.text.chars().count();
                        let found: Option<String> =
                            chars.get(a.answer_start..a.answer_start + n).map(|s| s.iter().collect());
                        if found.as_deref() != Some(a.text.as_str()) {
                            return Err(CorpusError::at(
                                path,
                                line_of(&q.id),
                                format!(
                                    "question {}: expected the answer {:?} at character {} of its context ({} characters), found {:?}",
                                    q.id,
                                    a.text,
                                    a.answer_start,
                                    chars.len(),
                                    found.unwrap_or_default()
                                ),
                            ));
                        }
                    }
                }
            }
        }
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
        };
        (part(&|i| held.binary_search(&i).is_err()), part(&|i| held.binary_search(&i).is_ok()))
    }
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
    let (mut em, mut f1, mut n) = (0.0, 0.0, 0usize);
    for (pred, golds) in pairs {
        em += golds.iter().map(|g| exact_match(pred, g)).fold(0.0, f64::max);
        f1 += golds.iter().map(|g| token_f1(pred, g)).fold(0.0, f64::max);
        n += 1;
    }
    let d = n.max(1) as f64;
    QaScore { exact_match: em / d, f1: f1 / d, questions: n }
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
    /// ([`crate::cues::context_cues`]).
    pub fn cues(&self, idf: Option<&crate::cues::Idf>) -> Vec<u32> {
        crate::cues::context_cues(&self.context, &self.offsets, &self.question_text, idf)
    }
}

/// The context's characters from the start of sub-token `first` to the end
/// of sub-token `last` (inclusive): the answer text of a tagged span.
pub fn span_text(context: &str, offsets: &[(usize, usize)], first: usize, last: usize) -> String {
    let (start, end) = (offsets[first].0, offsets[last].1.max(offsets[first].0));
    context.chars().skip(start).take(end - start).collect()
}

/// Characters BERT's basic tokenizer splits one by one (CJK ideographs):
/// each is a word of its own.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

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
                        let end = first.answer_start + first.text.chars().count();
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
    fn a_wrong_offset_names_the_question_and_its_line() {
        let bad = FIXTURE.replace("\"answer_start\": 53", "\"answer_start\": 50");
        let e = SquadFile::parse(Path::new("dev.json"), &bad).unwrap_err().to_string();
        assert!(e.starts_with("dev.json:6:") && e.contains("question q2") && e.contains("\"France\""), "{e}");
        let bad = FIXTURE.replace("\"answer_start\": 53", "\"answer_start\": 5300");
        assert!(SquadFile::parse(Path::new("dev.json"), &bad).is_err());
        let e = SquadFile::parse(Path::new("dev.json"), &FIXTURE.replace("\"qas\"", "\"qs\"")).unwrap_err();
        assert!(e.to_string().starts_with("dev.json:") && e.to_string().contains("qas"), "{e}");
        let e = SquadFile::parse(Path::new("dev.json"), "{\"data\": [\n{\"title\": 3}]}").unwrap_err();
        assert!(e.to_string().starts_with("dev.json:2:"), "{e}");
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
        let tokenize = |t: &str| -> std::result::Result<Vec<Piece>, String> {
            let mut pieces = Vec::new();
            let mut start = None;
            for (i, c) in t.chars().chain(std::iter::once(' ')).enumerate() {
                match (c.is_alphanumeric(), start) {
                    (true, None) => start = Some(i),
                    (false, Some(s)) => {
                        pieces.push(Piece { text: t.chars().skip(s).take(i - s).collect(), start: s, end: i });
                        start = None;
                    }
                    _ => {}
                }
            }
            Ok(pieces)
        };
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
