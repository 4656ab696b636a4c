//! Extractive-QA baselines that learn nothing: what a tagger must beat.
//!
//! Texts are cut into words by [`crate::qa::squad::words`] (letters and digits,
//! each CJK character and each punctuation mark alone) and matched
//! lowercased; words are weighted by their inverse document frequency
//! ([`Idf`], over contexts). Sentences end at `.`, `!`, `?` followed by
//! whitespace and a word that does not start in lower case (not after a
//! single letter, as in "U.S." or "J. K.", nor after a few abbreviations),
//! and at `。！？`; closing quotes and brackets stay with the sentence.
//!
//! - [`Baseline::SlidingWindow`]: the SQuAD paper's sliding-window
//!   baseline (Rajpurkar et al. 2016, §5), after MCTest's SW+D (Richardson
//!   et al. 2013). Candidates: the paper used constituents; here every word
//!   n-gram of at most [`MAX_SPAN`] words inside one sentence that contains
//!   no content word of the question and neither starts nor ends with
//!   punctuation or a stop word (so no candidate is only stop words or
//!   punctuation, and "in Paris" or "the Broncos" give way to "Paris" and
//!   "Broncos": SW favours longer candidates, see below, and answers are
//!   mostly noun phrases, whose articles SQuAD's metric drops anyway). As
//!   in the paper, only the sentences
//!   with the most unigram (content words) plus bigram overlap with the
//!   question are kept — removing a candidate from its sentence cannot
//!   change that overlap, since it holds no question word — and the
//!   sentence, not the passage, is the window's context. Each candidate
//!   scores SW − D: SW is the largest IDF-weighted count of words of
//!   (question ∪ candidate) in a window of |question ∪ candidate| words
//!   sliding over the sentence; D is SW+D's distance term, the fewest words
//!   from a question word to a candidate word in the sentence (stop words
//!   and the question's words left out of both sides), divided by the
//!   sentence length − 1, and 1 when either side is empty. (SW+D takes
//!   that minimum over pairs, not a mean.) Best score wins; ties go to the
//!   shorter, then earlier, candidate. Since a candidate's own words are
//!   always in its sentence, each word more in it adds its weight to SW:
//!   the longest candidates tend to win (MCTest's answers were given, so
//!   there SW did not choose their length).
//! - [`Baseline::BestSentence`]: the sentence with the largest IDF-weighted
//!   overlap with the question's content words, whole.
//! - [`Baseline::NearestWords`]: in that sentence, the run of consecutive
//!   words that are neither question words, stop words nor punctuation
//!   closest to a question content word found there; questions asking for
//!   a name (who, whom, whose, where) prefer runs with a capitalised word,
//!   those asking for a number (when, how many/much/long/old/far, what
//!   year, …) runs with a digit, when the sentence has any.
//! - [`Baseline::RandomSpan`]: one of the sliding window's candidates from
//!   the whole context at random (a fixed seed), as a floor.

use crate::qa::metric::QaMetric;
use crate::qa::squad::{words, Piece, QaScore, SquadFile};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// The longest candidate of the sliding window, in words.
pub const MAX_SPAN: usize = 4;

/// Function words matched lowercased: English (with the question words)
/// and a few Chinese characters that are words on their own.
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
    "between", "both", "but", "by", "can", "could", "did", "do", "does", "during", "each", "for", "from", "had", "has",
    "have", "he", "her", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "many", "may", "more",
    "most", "much", "name", "no", "not", "of", "on", "one", "or", "other", "our", "over", "s", "she", "should", "so",
    "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "through", "to", "type", "under", "up", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "whom", "whose", "why", "will", "with", "would", "you", "的", "了", "是", "在", "和", "与", "及", "或", "也", "被",
    "把", "吗", "呢", "么", "什", "哪", "谁", "这", "那", "个", "为",
];

/// Abbreviations whose period does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "no", "inc", "co", "ltd", "gen", "col", "lt", "prof",
    "rev", "mt", "ft", "approx",
];

fn is_stop(w: &str) -> bool {
    STOP_WORDS.contains(&w)
}

/// A piece of punctuation: no letter or digit in it.
fn is_punct(w: &str) -> bool {
    !w.chars().any(char::is_alphanumeric)
}

/// Inverse document frequencies of lowercased words over a set of texts.
#[derive(Clone, Debug, Default)]
pub struct Idf {
    docs: usize,
    df: HashMap<String, usize>,
}

impl Idf {
    pub fn from_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Idf {
        let mut idf = Idf::default();
        for t in texts {
            idf.docs += 1;
            let seen: HashSet<String> = words(t).into_iter().map(|p| p.text.to_lowercase()).collect();
            for w in seen {
                *idf.df.entry(w).or_default() += 1;
            }
        }
        idf
    }

    /// The contexts of a SQuAD-format file.
    pub fn from_file(file: &SquadFile) -> Idf {
        Self::from_texts(file.data.iter().flat_map(|a| &a.paragraphs).map(|p| p.context.as_str()))
    }

    /// ln(1 + N/df): positive, largest for rare words; a word in no text
    /// counts as in one.
    pub fn weight(&self, w: &str) -> f64 {
        let df = self.df.get(w).copied().unwrap_or(0).max(1);
        (1.0 + self.docs.max(1) as f64 / df as f64).ln()
    }
}

/// A context cut into words and sentences.
#[derive(Clone, Debug)]
pub struct Passage<'a> {
    pub text: &'a str,
    pub words: Vec<Piece>,
    /// The words lowercased.
    pub lower: Vec<String>,
    /// Word ranges, in order, covering every word.
    pub sentences: Vec<Range<usize>>,
}

impl<'a> Passage<'a> {
    pub fn new(text: &'a str) -> Passage<'a> {
        let words = words(text);
        let lower = words.iter().map(|p| p.text.to_lowercase()).collect();
        let sentences = sentences(&words);
        Passage { text, words, lower, sentences }
    }

    /// The context's characters from word `first` to word `last` (inclusive).
    pub fn span_text(&self, first: usize, last: usize) -> String {
        let (start, end) = (self.words[first].start, self.words[last].end);
        self.text.chars().skip(start).take(end - start).collect()
    }
}

/// Sentence boundaries of a text's words (see the module docs).
pub fn sentences(words: &[Piece]) -> Vec<Range<usize>> {
    let closing = |p: &Piece| matches!(p.text.as_str(), "\"" | "'" | "”" | "’" | ")" | "]" | "」" | "』" | "）");
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < words.len() {
        let w = words[i].text.as_str();
        let strong = matches!(w, "。" | "！" | "？");
        let weak = matches!(w, "." | "!" | "?");
        if !(strong || weak) {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        while end < words.len() && closing(&words[end]) && words[end].start == words[end - 1].end {
            end += 1;
        }
        let ends = strong || {
            let before = i.checked_sub(1).map(|b| words[b].text.to_lowercase());
            let initial = before.as_deref().is_some_and(|b| b.chars().count() == 1 && w == ".");
            let abbreviation = before.as_deref().is_some_and(|b| w == "." && ABBREVIATIONS.contains(&b));
            let next_ok = words
                .get(end)
                .is_none_or(|n| n.start > words[end - 1].end && !n.text.chars().next().is_some_and(char::is_lowercase));
            !initial && !abbreviation && next_ok
        };
        if ends {
            out.push(start..end);
            start = end;
        }
        i = end;
    }
    if start < words.len() {
        out.push(start..words.len());
    }
    out
}

/// What a question asks for, from its wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asks {
    Name,
    Number,
    Other,
}

/// Questions that ask for a number (English as whole words).
const NUMBER_CUES: &[&str] = &[
    "how many",
    "how much",
    "how long",
    "how old",
    "how far",
    "what year",
    "when",
    "which year",
    "what percentage",
    "几",
    "多少",
    "哪一年",
    "何时",
];

/// Questions that ask for a name or place.
const NAME_CUES: &[&str] = &["who", "whom", "whose", "where", "谁"];

/// A question as the baselines read it.
#[derive(Clone, Debug)]
struct Question {
    /// Its words (no punctuation), lowercased.
    all: HashSet<String>,
    /// Those that are not stop words.
    content: HashSet<String>,
    bigrams: HashSet<(String, String)>,
    asks: Asks,
}

impl Question {
    fn new(text: &str) -> Question {
        let lower: Vec<String> =
            words(text).into_iter().map(|p| p.text.to_lowercase()).filter(|w| !is_punct(w)).collect();
        let all: HashSet<String> = lower.iter().cloned().collect();
        let content = all.iter().filter(|w| !is_stop(w)).cloned().collect();
        let bigrams = lower.windows(2).map(|b| (b[0].clone(), b[1].clone())).collect();
        let joined = format!(" {} ", lower.join(" "));
        // English cues as whole words, Chinese ones anywhere.
        let has = |cues: &[&str]| {
            cues.iter().any(|c| if c.is_ascii() { joined.contains(&format!(" {c} ")) } else { text.contains(c) })
        };
        let asks = if has(NUMBER_CUES) {
            Asks::Number
        } else if has(NAME_CUES) {
            Asks::Name
        } else {
            Asks::Other
        };
        Question { all, content, bigrams, asks }
    }
}

/// A no-learning answerer (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    SlidingWindow,
    BestSentence,
    NearestWords,
    RandomSpan,
}

impl Baseline {
    pub const ALL: [Baseline; 4] =
        [Baseline::SlidingWindow, Baseline::BestSentence, Baseline::NearestWords, Baseline::RandomSpan];

    pub fn name(&self) -> &'static str {
        match self {
            Baseline::SlidingWindow => "sliding window (SW+D)",
            Baseline::BestSentence => "best-overlap sentence",
            Baseline::NearestWords => "nearest content words",
            Baseline::RandomSpan => "random span",
        }
    }
}

/// The answer of `baseline` to `question` about `passage` ("" when it has
/// none: an empty context, or no candidate at all).
pub fn answer(baseline: Baseline, passage: &Passage, question: &str, idf: &Idf, rng: &mut ChaCha8Rng) -> String {
    let q = Question::new(question);
    let span = match baseline {
        Baseline::SlidingWindow => sliding_window(passage, &q, idf),
        Baseline::BestSentence => best_sentence(passage, &q, idf).map(|s| (s.start, s.end - 1)),
        Baseline::NearestWords => nearest_words(passage, &q, idf),
        Baseline::RandomSpan => {
            let all: Vec<(usize, usize)> = passage.sentences.iter().flat_map(|s| candidates(passage, &q, s)).collect();
            (!all.is_empty()).then(|| all[rng.random_range(0..all.len())])
        }
    };
    span.map(|(a, b)| passage.span_text(a, b)).unwrap_or_default()
}

/// The sliding window's candidates in one sentence: `(first, last)` words.
fn candidates(p: &Passage, q: &Question, sentence: &Range<usize>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for a in sentence.clone() {
        for b in a..sentence.end.min(a + MAX_SPAN) {
            let w = &p.lower[a..=b];
            if w.iter().any(|w| q.content.contains(w)) {
                break;
            }
            let edge = |w: &str| !is_punct(w) && !is_stop(w);
            if edge(&w[0]) && edge(&w[w.len() - 1]) {
                out.push((a, b));
            }
        }
    }
    out
}

/// Unigram (content words) plus bigram overlap of a sentence with the question.
fn overlap(p: &Passage, q: &Question, s: &Range<usize>) -> usize {
    let ws: Vec<&String> = p.lower[s.clone()].iter().filter(|w| !is_punct(w)).collect();
    let unigrams: HashSet<&String> = ws.iter().copied().filter(|w| q.content.contains(*w)).collect();
    let bigrams: HashSet<(&String, &String)> = ws
        .windows(2)
        .map(|b| (b[0], b[1]))
        .filter(|(x, y)| q.bigrams.contains(&((*x).clone(), (*y).clone())))
        .collect();
    unigrams.len() + bigrams.len()
}

/// SW − D of candidate `(first, last)` in its sentence (see the module docs).
fn sw_d(p: &Passage, q: &Question, s: &Range<usize>, (first, last): (usize, usize), idf: &Idf) -> f64 {
    // The sentence's words without punctuation, with their word indices.
    let ws: Vec<(usize, &str)> = s.clone().map(|i| (i, p.lower[i].as_str())).filter(|(_, w)| !is_punct(w)).collect();
    let answer: HashSet<&str> = p.lower[first..=last].iter().map(String::as_str).filter(|w| !is_punct(w)).collect();
    let set: HashSet<&str> = q.all.iter().map(String::as_str).chain(answer.iter().copied()).collect();
    let size = set.len().max(1);
    let mut sw = 0.0f64;
    for j in 0..ws.len() {
        let window = &ws[j..(j + size).min(ws.len())];
        sw = sw.max(window.iter().filter(|(_, w)| set.contains(w)).map(|(_, w)| idf.weight(w)).sum());
    }
    let question_at: Vec<usize> =
        ws.iter().enumerate().filter(|(_, (_, w))| q.all.contains(*w) && !is_stop(w)).map(|(k, _)| k).collect();
    let answer_at: Vec<usize> = ws
        .iter()
        .enumerate()
        .filter(|(_, (_, w))| answer.contains(w) && !q.all.contains(*w) && !is_stop(w))
        .map(|(k, _)| k)
        .collect();
    let nearest = question_at.iter().flat_map(|&a| answer_at.iter().map(move |&b| a.abs_diff(b))).min();
    let d = nearest.map_or(1.0, |n| n as f64 / (ws.len().max(2) - 1) as f64);
    sw - d
}

fn sliding_window(p: &Passage, q: &Question, idf: &Idf) -> Option<(usize, usize)> {
    let best = p.sentences.iter().map(|s| overlap(p, q, s)).max()?;
    let mut top: Option<(f64, (usize, usize))> = None;
    for s in p.sentences.iter().filter(|s| overlap(p, q, s) == best) {
        for c in candidates(p, q, s) {
            let score = sw_d(p, q, s, c, idf);
            let better = top.is_none_or(|(t, (a, b))| score > t || (score == t && c.1 - c.0 < b - a));
            if better {
                top = Some((score, c));
            }
        }
    }
    top.map(|(_, c)| c)
}

/// The sentence with the largest IDF-weighted overlap with the question's
/// content words (the first of equals).
fn best_sentence(p: &Passage, q: &Question, idf: &Idf) -> Option<Range<usize>> {
    let weight = |s: &Range<usize>| -> f64 {
        let found: HashSet<&String> = p.lower[s.clone()].iter().filter(|w| q.content.contains(*w)).collect();
        found.iter().map(|w| idf.weight(w)).sum()
    };
    let mut best: Option<(f64, &Range<usize>)> = None;
    for s in &p.sentences {
        let w = weight(s);
        if best.is_none_or(|(b, _)| w > b) {
            best = Some((w, s));
        }
    }
    best.map(|(_, s)| s.clone())
}

fn nearest_words(p: &Passage, q: &Question, idf: &Idf) -> Option<(usize, usize)> {
    let s = best_sentence(p, q, idf)?;
    let free = |i: usize| {
        let w = &p.lower[i];
        !is_punct(w) && !is_stop(w) && !q.all.contains(w)
    };
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for i in s.clone().filter(|&i| free(i)) {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == i => *last = i,
            _ => runs.push((i, i)),
        }
    }
    let fits = |&(a, b): &(usize, usize)| match q.asks {
        Asks::Name => p.words[a..=b].iter().any(|w| w.text.chars().next().is_some_and(char::is_uppercase)),
        Asks::Number => p.words[a..=b].iter().any(|w| w.text.chars().any(|c| c.is_ascii_digit())),
        Asks::Other => true,
    };
    if runs.iter().any(fits) {
        runs.retain(fits);
    }
    let matched: Vec<usize> = s.clone().filter(|&i| q.content.contains(&p.lower[i])).collect();
    let distance = |&(a, b): &(usize, usize)| {
        matched.iter().map(|&m| if m < a { a - m } else { m.saturating_sub(b) }).min().unwrap_or(a - s.start)
    };
    runs.into_iter().min_by_key(|r| (distance(r), r.0))
}

/// One baseline's score on a file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaselineScore {
    pub baseline: Baseline,
    pub name: String,
    pub exact_match: f64,
    pub f1: f64,
    pub questions: usize,
}

/// Every [`Baseline`] on every question of `file`, scored by `metric`
/// against all gold answers; `seed` drives [`Baseline::RandomSpan`].
pub fn evaluate(file: &SquadFile, idf: &Idf, metric: QaMetric, seed: u64) -> Vec<BaselineScore> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut answers: Vec<Vec<String>> = vec![Vec::new(); Baseline::ALL.len()];
    let mut golds: Vec<Vec<String>> = Vec::new();
    for para in file.data.iter().flat_map(|a| &a.paragraphs) {
        let passage = Passage::new(&para.context);
        for q in &para.qas {
            for (k, b) in Baseline::ALL.iter().enumerate() {
                answers[k].push(answer(*b, &passage, &q.question, idf, &mut rng));
            }
            golds.push(q.answers.iter().map(|a| a.text.clone()).collect());
        }
    }
    Baseline::ALL
        .iter()
        .zip(&answers)
        .map(|(b, given)| {
            let QaScore { exact_match, f1, questions } =
                metric.score(given.iter().zip(&golds).map(|(a, g)| (a.as_str(), g.as_slice())));
            BaselineScore { baseline: *b, name: b.name().into(), exact_match, f1, questions }
        })
        .collect()
}

/// The scores as a markdown table.
pub fn table(rows: &[BaselineScore]) -> String {
    let mut out = String::from("| baseline | EM | F1 | questions |\n|---|---:|---:|---:|\n");
    for r in rows {
        out.push_str(&format!("| {} | {:.3} | {:.3} | {} |\n", r.name, r.exact_match, r.f1, r.questions));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(p: &Passage, spans: &[Range<usize>]) -> Vec<String> {
        spans.iter().map(|s| p.span_text(s.start, s.end - 1)).collect()
    }

    #[test]
    fn sentences_end_at_final_punctuation_but_not_after_initials_or_abbreviations() {
        let p = Passage::new(
            "Mr. Smith went to the U.S. in 1990. He said \"yes.\" Then he left! 3.5 is a number. 北京是首都。上海",
        );
        assert_eq!(
            texts(&p, &p.sentences),
            [
                "Mr. Smith went to the U.S. in 1990.",
                "He said \"yes.\"",
                "Then he left!",
                "3.5 is a number.",
                "北京是首都。",
                "上海"
            ]
        );
        assert!(Passage::new("").sentences.is_empty());
        // A lower-case word after the period: the sentence goes on.
        assert_eq!(Passage::new("It cost approx. five. Yes").sentences.len(), 2);
    }

    #[test]
    fn rare_words_weigh_more() {
        let idf = Idf::from_texts(["the cat sat", "the dog ran", "The bird"]);
        assert!(idf.weight("cat") > idf.weight("the"));
        assert!((idf.weight("the") - 2f64.ln()).abs() < 1e-12, "in all 3 of 3: ln(1 + 1)");
        assert!((idf.weight("unseen") - 4f64.ln()).abs() < 1e-12, "as if in one: ln(1 + 3)");
    }

    const CONTEXT: &str = "The Eiffel Tower is in Paris. The Broncos won the Super Bowl in 2016. \
        The company was founded in 1998 by Larry Page and Sergey Brin in a garage.";

    fn ask(b: Baseline, question: &str) -> String {
        let idf = Idf::from_texts([CONTEXT, "The Super Bowl was long.", "A garage in Paris."]);
        answer(b, &Passage::new(CONTEXT), question, &idf, &mut ChaCha8Rng::seed_from_u64(1))
    }

    #[test]
    fn sliding_window_picks_the_span_beside_the_question_words() {
        // The best sentence's only candidate without a question or stop
        // word at its ends.
        assert_eq!(ask(Baseline::SlidingWindow, "Which team won the Super Bowl in 2016?"), "Broncos");
        assert_eq!(ask(Baseline::SlidingWindow, "Where is the Eiffel Tower?"), "Paris");
    }

    #[test]
    fn the_distance_term_prefers_the_candidate_nearer_the_question_words() {
        let p = Passage::new("Paris hosted the games before Rome");
        let q = Question::new("Which city hosted the games?");
        let idf = Idf::from_texts(["paris rome"]);
        let s = &p.sentences[0];
        assert_eq!(candidates(&p, &q, s), [(0, 0), (5, 5)], "no question word, no stop word at the ends");
        let (paris, rome) = (sw_d(&p, &q, s, (0, 0), &idf), sw_d(&p, &q, s, (5, 5), &idf));
        // Same window sum; D is 1/5 for Paris (next to "hosted") and 2/5
        // for Rome (two words after "games").
        assert!((rome - paris + 0.2).abs() < 1e-12, "{paris} {rome}");
        // A candidate of more words gets more of the window: SW's bias.
        let p = Passage::new("Paris hosted the games before Rome fell");
        assert!(sw_d(&p, &q, &p.sentences[0], (5, 6), &idf) > sw_d(&p, &q, &p.sentences[0], (5, 5), &idf));
    }

    #[test]
    fn best_sentence_and_nearest_content_words() {
        let q = "Who founded the company in 1998?";
        assert_eq!(
            ask(Baseline::BestSentence, q),
            "The company was founded in 1998 by Larry Page and Sergey Brin in a garage."
        );
        // A name: capitalised runs only, the nearest to "1998".
        assert_eq!(ask(Baseline::NearestWords, q), "Larry Page");
        // A number: the run with a digit, though "Larry Page" is nearer "founded".
        assert_eq!(ask(Baseline::NearestWords, "When was the company founded by Larry Page?"), "1998");
        assert_eq!(ask(Baseline::NearestWords, "The Broncos won what in 2016?"), "Super Bowl");
        assert_eq!(ask(Baseline::BestSentence, "Nothing matches?"), "The Eiffel Tower is in Paris.");
    }

    #[test]
    fn random_span_is_a_candidate_and_nothing_comes_from_an_empty_context() {
        let a = ask(Baseline::RandomSpan, "Who founded the company?");
        assert!(!a.is_empty() && CONTEXT.contains(&a), "{a}");
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for b in Baseline::ALL {
            assert_eq!(answer(b, &Passage::new(""), "Who?", &Idf::default(), &mut rng), "");
        }
    }

    #[test]
    fn evaluate_scores_every_baseline_with_the_metric() {
        let json = format!(
            r#"{{"data": [{{"title": "T", "paragraphs": [{{"context": "{}", "qas": [
            {{"id": "a", "question": "Which team won the Super Bowl in 2016?", "answers": [{{"text": "The Broncos", "answer_start": 30}}]}},
            {{"id": "b", "question": "Who founded the company in 1998?", "answers": [{{"text": "Larry Page and Sergey Brin", "answer_start": -1}}]}}]}}]}}]}}"#,
            CONTEXT.replace("        ", "")
        );
        let file = SquadFile::parse(std::path::Path::new("t.json"), &json).unwrap();
        let rows = evaluate(&file, &Idf::from_file(&file), QaMetric::Squad, 1);
        assert_eq!(rows.iter().map(|r| r.baseline).collect::<Vec<_>>(), Baseline::ALL);
        assert!(rows.iter().all(|r| r.questions == 2));
        // "Broncos" = "The Broncos" after normalisation.
        assert!(rows[0].exact_match >= 0.5, "{:?}", rows[0]);
        // Nearest words: "Broncos", then "Larry Page" with F1
        // 2·(2/2)(2/5)/(1 + 2/5) = 4/7 against "Larry Page and Sergey Brin".
        assert_eq!(rows[2].exact_match, 0.5);
        assert!((rows[2].f1 - (1.0 + 4.0 / 7.0) / 2.0).abs() < 1e-12, "{:?}", rows[2]);
        let md = table(&rows);
        assert!(
            md.starts_with("| baseline | EM | F1 | questions |") && md.contains("| sliding window (SW+D) |"),
            "{md}"
        );
    }

    #[test]
    fn chinese_answers_with_the_cmrc_metric() {
        let json = r#"{"data": [{"title": "Z", "paragraphs": [{"context": "李白是唐朝的诗人。杜甫也是诗人。",
            "qas": [{"id": "c", "question": "唐朝的诗人是谁？", "answers": [{"text": "李白", "answer_start": 0}]}]}]}]}"#;
        let file = SquadFile::parse(std::path::Path::new("zh.json"), json).unwrap();
        let contexts = file.data.iter().flat_map(|a| &a.paragraphs).map(|p| p.context.as_str());
        assert_eq!(QaMetric::detect(contexts).0, QaMetric::Cmrc);
        let rows = evaluate(&file, &Idf::from_file(&file), QaMetric::Cmrc, 1);
        // The best sentence is the first: 8 characters once "。" (CMRC
        // punctuation) goes, against 李白: P 2/8, R 1 → F1 0.4.
        assert!((rows[1].f1 - 0.4).abs() < 1e-12, "{:?}", rows[1]);
        // The nearest run of characters that are not the question's: 李白.
        assert_eq!((rows[2].exact_match, rows[2].f1), (1.0, 1.0), "{:?}", rows[2]);
    }
}
