//! Word-level reading cues of a QA context against its question: what a
//! reader learning from little data needs handed to it rather than
//! discovered (DrQA's exact-match features, Chen et al. 2017, with the
//! answer-type cues that WordPiece's lowercased pieces lose).
//!
//! Every cue is a small class id per context piece (0 is padding), taken
//! from the whole word the piece belongs to, in the original, cased text:
//!
//! | cue | classes |
//! |---|---|
//! | [`Cue::Match`] | 1 no match, 2 light-stem match, 3 lowercase match, 4 exact (cased) match with a question word |
//! | [`Cue::Idf`] | 1 no content-word match, 2–6 the IDF bucket of the matched content word (rarer = higher) |
//! | [`Cue::Distance`] | 1 no matched content word in the context, 2 this word, 3… buckets of words to the nearest one (1, 2, 3–4, 5–8, 9–16, 17–32, more) |
//! | [`Cue::QuestionType`] | the question's wh-word: 1 other, 2 what, 3 which, 4 who, 5 when, 6 where, 7 why, 8 how many/much/long…, 9 how |
//! | [`Cue::Shape`] | 1 no letter or digit, 2 lowercase, 3 uppercase, 4 capitalised, 5 mixed case, 6 has a digit |

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// The cues, in the order they are stored per piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cue {
    Match = 0,
    Idf = 1,
    Distance = 2,
    QuestionType = 3,
    Shape = 4,
}

/// Cues per piece.
pub const CUES: usize = 5;

/// Classes of each cue, padding (0) included.
pub const CUE_CLASSES: [usize; CUES] = [5, 7, 10, 10, 7];

/// A word of a text: characters `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word {
    pub start: usize,
    pub end: usize,
}

/// Characters BERT's basic tokenizer splits one by one (CJK ideographs).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// The words of `chars`: runs of letters and digits (apostrophes inside
/// them kept), each CJK character alone, each other non-space character alone.
pub fn words(chars: &[char]) -> Vec<Word> {
    let mut out = Vec::new();
    let mut i = 0;
    let alnum = |c: char| c.is_alphanumeric() && !is_cjk(c);
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if alnum(c) {
            let start = i;
            while i < chars.len()
                && (alnum(chars[i]) || (chars[i] == '\'' && i + 1 < chars.len() && alnum(chars[i + 1]) && i > start))
            {
                i += 1;
            }
            out.push(Word { start, end: i });
        } else {
            out.push(Word { start: i, end: i + 1 });
            i += 1;
        }
    }
    out
}

/// A light English stem of a lowercase word: possessive, plural and
/// common verb endings off (`"tesla's"` → `"tesla"`, `"cities"` →
/// `"city"`, `"played"` → `"play"`). Not a real stemmer: enough that
/// "won"/"win" stay apart but "wins"/"win" meet.
pub fn stem(lower: &str) -> String {
    let w = lower.strip_suffix("'s").unwrap_or(lower);
    let n = w.chars().count();
    let strip = |suffix: &str, min: usize| (n >= min && w.ends_with(suffix)).then(|| &w[..w.len() - suffix.len()]);
    if let Some(s) = strip("ies", 5) {
        return format!("{s}y");
    }
    for (suffix, min) in [("ing", 6), ("ed", 5), ("es", 5), ("ly", 5)] {
        if let Some(s) = strip(suffix, min) {
            return s.to_string();
        }
    }
    let w = match strip("s", 4) {
        Some(s) if !s.ends_with('s') => s,
        _ => w,
    };
    // "move" and "moved" meet at "mov".
    match w.strip_suffix('e') {
        Some(s) if n >= 4 => s.to_string(),
        _ => w.to_string(),
    }
}

/// English function words: a match on one says little about where the answer is.
pub fn is_stop(lower: &str) -> bool {
    const STOP: &[&str] = &[
        "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
        "between", "both", "but", "by", "can", "could", "did", "do", "does", "during", "each", "for", "from", "had",
        "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "many", "may", "more",
        "most", "much", "name", "no", "not", "of", "on", "one", "or", "other", "our", "she", "should", "so", "some",
        "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through",
        "to", "two", "type", "under", "up", "was", "we", "were", "what", "when", "where", "which", "while", "who",
        "whom", "whose", "why", "will", "with", "would", "you", "called", "kind", "year", "use", "used",
    ];
    STOP.contains(&lower) || !lower.chars().any(char::is_alphanumeric)
}

/// Document frequencies of stemmed words over a collection of contexts
/// (each distinct context one document), for inverse document frequency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Idf {
    pub documents: u32,
    pub df: HashMap<String, u32>,
}

impl Idf {
    /// Counts the stems of each distinct context once.
    pub fn build<'a>(contexts: impl IntoIterator<Item = &'a str>) -> Idf {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut idf = Idf::default();
        for c in contexts {
            if !seen.insert(c) {
                continue;
            }
            idf.documents += 1;
            let chars: Vec<char> = c.chars().collect();
            let stems: HashSet<String> = words(&chars).iter().map(|w| stem(&lower(&chars, w))).collect();
            for s in stems {
                *idf.df.entry(s).or_default() += 1;
            }
        }
        idf
    }

    /// `ln((N + 1) / (df + 1))`: 0 for a stem in every context, largest for
    /// one never seen.
    pub fn idf(&self, stem: &str) -> f64 {
        let df = self.df.get(stem).copied().unwrap_or(0);
        ((self.documents as f64 + 1.0) / (df as f64 + 1.0)).ln()
    }
}

fn lower(chars: &[char], w: &Word) -> String {
    chars[w.start..w.end].iter().collect::<String>().to_lowercase()
}

/// The question's type from its first wh-word ([`Cue::QuestionType`] classes).
pub fn question_type(question: &str) -> u32 {
    let chars: Vec<char> = question.chars().collect();
    let ws: Vec<String> = words(&chars).iter().map(|w| lower(&chars, w)).collect();
    for (i, w) in ws.iter().enumerate() {
        let class = match w.as_str() {
            "what" => 2,
            "which" => 3,
            "who" | "whom" | "whose" => 4,
            "when" => 5,
            "where" => 6,
            "why" => 7,
            "how" => {
                let next = ws.get(i + 1).map_or("", String::as_str);
                if matches!(next, "many" | "much" | "long" | "old" | "far" | "large" | "big" | "often" | "tall") {
                    8
                } else {
                    9
                }
            }
            _ => continue,
        };
        return class;
    }
    1
}

/// [`Cue::Shape`] of a word.
pub fn shape(word: &str) -> u32 {
    if word.chars().any(|c| c.is_ascii_digit()) {
        return 6;
    }
    match crate::shape::caps_class(word) {
        1 => 1,
        c => c,
    }
}

/// [`Cue::Distance`] class of a distance in words.
fn distance_class(d: Option<usize>) -> u32 {
    match d {
        None => 1,
        Some(0) => 2,
        Some(1) => 3,
        Some(2) => 4,
        Some(3..=4) => 5,
        Some(5..=8) => 6,
        Some(9..=16) => 7,
        Some(17..=32) => 8,
        Some(_) => 9,
    }
}

/// [`Cue::Idf`] class of a matched content word's IDF.
fn idf_class(idf: f64) -> u32 {
    match idf {
        x if x < 1.5 => 2,
        x if x < 3.0 => 3,
        x if x < 4.5 => 4,
        x if x < 6.0 => 5,
        _ => 6,
    }
}

/// The cues of each context piece (`offsets`: its characters in
/// `context`), row-major `[pieces × CUES]`. Without an IDF table every
/// matched content word counts as rare.
pub fn context_cues(context: &str, offsets: &[(usize, usize)], question: &str, idf: Option<&Idf>) -> Vec<u32> {
    let chars: Vec<char> = context.chars().collect();
    let qchars: Vec<char> = question.chars().collect();
    let qwords: Vec<String> =
        words(&qchars).iter().map(|w| qchars[w.start..w.end].iter().collect::<String>()).collect();
    let exact: HashSet<&str> = qwords.iter().map(String::as_str).collect();
    let lowered: HashSet<String> = qwords.iter().map(|w| w.to_lowercase()).collect();
    let stems: HashSet<String> = lowered.iter().map(|w| stem(w)).collect();
    let qtype = question_type(question);
    let ws = words(&chars);
    // Per word: (match, idf, shape).
    let per_word: Vec<(u32, u32, u32)> = ws
        .iter()
        .map(|w| {
            let text: String = chars[w.start..w.end].iter().collect();
            let low = text.to_lowercase();
            let st = stem(&low);
            let m = if !text.chars().any(char::is_alphanumeric) {
                1
            } else if exact.contains(text.as_str()) {
                4
            } else if lowered.contains(&low) {
                3
            } else if stems.contains(&st) {
                2
            } else {
                1
            };
            let content = m > 1 && !is_stop(&low);
            let i = if content { idf_class(idf.map_or(f64::INFINITY, |t| t.idf(&st))) } else { 1 };
            (m, i, shape(&text))
        })
        .collect();
    let anchors: Vec<usize> = (0..ws.len()).filter(|&k| per_word[k].1 > 1).collect();
    let nearest = |k: usize| {
        let at = anchors.partition_point(|&a| a < k);
        let after = anchors.get(at).map(|&a| a - k);
        let before = at.checked_sub(1).map(|p| k - anchors[p]);
        after.into_iter().chain(before).min()
    };
    let mut out = Vec::with_capacity(offsets.len() * CUES);
    let mut k = 0;
    for &(s, _) in offsets {
        while k < ws.len() && ws[k].end <= s {
            k += 1;
        }
        match ws.get(k).filter(|w| w.start <= s) {
            Some(_) => {
                let (m, i, sh) = per_word[k];
                out.extend([m, i, distance_class(nearest(k)), qtype, sh]);
            }
            None => out.extend([1, 1, distance_class(None), qtype, 1]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces of whole words (each word one piece), as offsets.
    fn offsets(text: &str) -> Vec<(usize, usize)> {
        let chars: Vec<char> = text.chars().collect();
        words(&chars).iter().map(|w| (w.start, w.end)).collect()
    }

    fn cue(all: &[u32], piece: usize, c: Cue) -> u32 {
        all[piece * CUES + c as usize]
    }

    #[test]
    fn words_keep_inner_apostrophes_and_split_cjk_and_punctuation() {
        let chars: Vec<char> = "Tesla's 1856 car, 北京!".chars().collect();
        let w: Vec<String> = words(&chars).iter().map(|w| chars[w.start..w.end].iter().collect()).collect();
        assert_eq!(w, ["Tesla's", "1856", "car", ",", "北", "京", "!"]);
    }

    #[test]
    fn stems_meet_where_inflections_differ() {
        assert_eq!(stem("tesla's"), "tesla");
        assert_eq!(stem("cities"), "city");
        assert_eq!(stem("played"), "play");
        assert_eq!(stem("wins"), "win");
        assert_eq!(stem("building"), "build");
        assert_eq!(stem("class"), "class");
        assert_eq!(stem("moved"), stem("move"));
        assert_eq!(stem("is"), "is");
        assert!(is_stop("the") && is_stop("?") && !is_stop("tesla"));
    }

    #[test]
    fn question_types_from_the_first_wh_word() {
        assert_eq!(question_type("What year did Tesla die?"), 2);
        assert_eq!(question_type("In which city?"), 3);
        assert_eq!(question_type("Whose idea was it?"), 4);
        assert_eq!(question_type("How many patents did he hold?"), 8);
        assert_eq!(question_type("How did he die?"), 9);
        assert_eq!(question_type("Tesla died when?"), 5);
        assert_eq!(question_type("Name the inventor."), 1);
    }

    #[test]
    fn match_levels_idf_distance_and_shape_of_each_piece() {
        let context = "In 1882 Tesla moved to Paris . The Cities paid him .";
        let question = "When did tesla move to the city of Paris?";
        let off = offsets(context);
        let c = context_cues(context, &off, question, None);
        assert_eq!(c.len(), off.len() * CUES);
        // In 1882 Tesla moved to Paris . The Cities paid him .
        let matches: Vec<u32> = (0..off.len()).map(|p| cue(&c, p, Cue::Match)).collect();
        assert_eq!(matches, [1, 1, 3, 2, 4, 4, 1, 3, 2, 1, 1, 1]);
        // Content matches: tesla, moved, paris, cities ("to", "the" are stop words).
        let idf: Vec<u32> = (0..off.len()).map(|p| cue(&c, p, Cue::Idf)).collect();
        assert_eq!(idf, [1, 1, 6, 6, 1, 6, 1, 1, 6, 1, 1, 1]);
        // "1882" is one word from "Tesla": class 3; "In" two: class 4.
        assert_eq!(cue(&c, 1, Cue::Distance), 3);
        assert_eq!(cue(&c, 0, Cue::Distance), 4);
        assert_eq!(cue(&c, 2, Cue::Distance), 2);
        assert!((0..off.len()).all(|p| cue(&c, p, Cue::QuestionType) == 5));
        let shapes: Vec<u32> = (0..3).map(|p| cue(&c, p, Cue::Shape)).collect();
        assert_eq!(shapes, [4, 6, 4]);
        // Every class is within its cue's range.
        for p in 0..off.len() {
            for (k, &n) in CUE_CLASSES.iter().enumerate() {
                assert!((1..n as u32).contains(&c[p * CUES + k]));
            }
        }
    }

    #[test]
    fn idf_ranks_common_words_low_and_pieces_take_their_words_cues() {
        let contexts = ["the river flows", "the river is long", "a city by the river", "the river"];
        let idf = Idf::build(contexts.iter().copied().chain(["the river"]));
        assert_eq!(idf.documents, 4, "a repeated context counts once");
        assert!(idf.idf("river") < idf.idf("city") && idf.idf("city") < idf.idf("zebra"));
        // WordPiece-like cut: "rivers" as "river" + "##s" share the word's cues.
        let context = "big rivers flow";
        let off = [(0, 3), (4, 9), (9, 10), (11, 15)];
        let c = context_cues(context, &off, "Which river?", Some(&idf));
        assert_eq!(cue(&c, 1, Cue::Match), 2);
        assert_eq!(c[CUES..2 * CUES], c[2 * CUES..3 * CUES]);
        assert_eq!(cue(&c, 1, Cue::Idf), 2, "river is in every context: lowest bucket");
        assert_eq!(cue(&c, 0, Cue::QuestionType), 3);
    }
}
