//! Which metric scores a QA dataset's answers: the official SQuAD v1.1
//! script's (English: token F1 after dropping punctuation and articles) or
//! the official CMRC 2018 script's (`cmrc2018_evaluate.py`, for Chinese:
//! character-level F1 over the longest common substring, and exact match,
//! with its punctuation list removed).
//!
//! A dataset chooses with `qa_metric = "squad" | "cmrc"` in its
//! `dataset.toml` ([`crate::dataset::qa_metric_of`]); without it,
//! [`QaMetric::detect`] looks at the contexts' characters.

use crate::qa::squad::{is_cjk, qa_score, QaScore};
use serde::{Deserialize, Serialize};

/// A QA answer metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QaMetric {
    /// The official SQuAD v1.1 evaluation script.
    #[default]
    Squad,
    /// The official CMRC 2018 evaluation script.
    Cmrc,
}

/// The share of CJK characters in the contexts above which
/// [`QaMetric::detect`] picks [`QaMetric::Cmrc`].
pub const CJK_SHARE: f64 = 0.3;

impl QaMetric {
    pub fn name(&self) -> &'static str {
        match self {
            QaMetric::Squad => "official SQuAD v1.1",
            QaMetric::Cmrc => "CMRC 2018",
        }
    }

    /// The value of `qa_metric` in `dataset.toml`.
    pub fn key(&self) -> &'static str {
        match self {
            QaMetric::Squad => "squad",
            QaMetric::Cmrc => "cmrc",
        }
    }

    /// Scores `(prediction, gold answers)` pairs: exact match and F1 of each
    /// question are the max over its gold answers, averaged over questions
    /// (fractions in [0, 1]; the official scripts print them × 100).
    pub fn score<'a>(&self, pairs: impl IntoIterator<Item = (&'a str, &'a [String])>) -> QaScore {
        match self {
            QaMetric::Squad => qa_score(pairs),
            QaMetric::Cmrc => crate::qa::squad::qa_score_with(pairs, cmrc_exact_match, cmrc_f1),
        }
    }

    /// [`QaMetric::Cmrc`] when more than [`CJK_SHARE`] of the contexts'
    /// characters (whitespace left out) are CJK ideographs, else
    /// [`QaMetric::Squad`]; also returns the share.
    pub fn detect<'a>(contexts: impl IntoIterator<Item = &'a str>) -> (QaMetric, f64) {
        let (mut cjk, mut all) = (0usize, 0usize);
        for c in contexts.into_iter().flat_map(str::chars).filter(|c| !c.is_whitespace()) {
            all += 1;
            cjk += usize::from(is_cjk(c));
        }
        let share = cjk as f64 / all.max(1) as f64;
        (if share > CJK_SHARE { QaMetric::Cmrc } else { QaMetric::Squad }, share)
    }
}

impl std::fmt::Display for QaMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The official script's `sp_char`: what it drops as punctuation (its
/// two-character entry "……" never equals one character, so `…` stays).
const CMRC_PUNCTUATION: &[char] = &[
    '-', ':', '_', '*', '^', '/', '\\', '~', '`', '+', '=', '，', '。', '：', '？', '！', '“', '”', '；', '’', '《',
    '》', '·', '、', '「', '」', '（', '）', '－', '～', '『', '』',
];

/// The script's `re.search(r'[\u4e00-\u9fa5]', char)`.
fn cmrc_chinese(c: char) -> bool {
    ('\u{4e00}'..='\u{9fa5}').contains(&c)
}

/// The script's `remove_punctuation`: lowercase, strip, drop `sp_char`.
pub fn cmrc_remove_punctuation(s: &str) -> String {
    s.to_lowercase().trim().chars().filter(|c| !CMRC_PUNCTUATION.contains(c)).collect()
}

/// The script's `mixed_segmentation(s, rm_punc=True)`: lowercase, strip,
/// drop `sp_char` (without breaking the run around it), each Chinese
/// character a segment, the text between them cut into words. The script
/// cuts that text with `nltk.word_tokenize`; here it is cut at whitespace
/// into runs of letters and digits (with `.` or `,` between two digits
/// inside, as NLTK keeps "3.5" and "1,000") and single other characters,
/// which is NLTK's result on most answer text ("U.S." and "n't" differ).
pub fn cmrc_segments(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut run = String::new();
    for c in s.to_lowercase().trim().chars() {
        if CMRC_PUNCTUATION.contains(&c) {
            continue;
        }
        if cmrc_chinese(c) {
            out.extend(word_tokens(&run));
            run.clear();
            out.push(c.to_string());
        } else {
            run.push(c);
        }
    }
    out.extend(word_tokens(&run));
    out
}

/// Non-Chinese text cut into words (see [`cmrc_segments`]).
fn word_tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        i += 1;
        if chars[start].is_whitespace() {
            continue;
        }
        if chars[start].is_alphanumeric() {
            while i < chars.len() {
                let inner = matches!(chars[i], '.' | ',')
                    && chars[i - 1].is_ascii_digit()
                    && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit());
                if !(chars[i].is_alphanumeric() && !cmrc_chinese(chars[i]) || inner) {
                    break;
                }
                i += 1;
            }
        }
        out.push(chars[start..i].iter().collect());
    }
    out
}

/// Length of the longest common contiguous run of segments (the script's
/// `find_lcs`: a substring, not a subsequence).
fn longest_common_run(a: &[String], b: &[String]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    let mut best = 0;
    for x in a {
        let mut row = vec![0usize; b.len() + 1];
        for (j, y) in b.iter().enumerate() {
            if x == y {
                row[j + 1] = prev[j] + 1;
                best = best.max(row[j + 1]);
            }
        }
        prev = row;
    }
    best
}

/// The script's `calc_f1_score` for one gold answer: precision and recall
/// of the longest common run of segments.
pub fn cmrc_f1(prediction: &str, gold: &str) -> f64 {
    let (g, p) = (cmrc_segments(gold), cmrc_segments(prediction));
    let same = longest_common_run(&g, &p);
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The script's `calc_em_score` for one gold answer.
pub fn cmrc_exact_match(prediction: &str, gold: &str) -> f64 {
    f64::from(cmrc_remove_punctuation(prediction) == cmrc_remove_punctuation(gold))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn segments_are_chinese_characters_and_words_without_punctuation() {
        assert_eq!(cmrc_segments(" 北京，2008年Olympic Games。"), ["北", "京", "2008", "年", "olympic", "games"]);
        // sp_char goes without cutting the run around it: "a-b" is one word.
        assert_eq!(cmrc_segments("a-b"), ["ab"]);
        // Other punctuation is a segment of its own, as NLTK cuts it.
        assert_eq!(cmrc_segments("3.5亿(约)"), ["3.5", "亿", "(", "约", ")"]);
        assert_eq!(cmrc_remove_punctuation(" 《红楼梦》 "), "红楼梦");
        assert_eq!(cmrc_remove_punctuation("A B"), "a b", "spaces inside count");
    }

    #[test]
    fn cmrc_f1_and_em_by_hand() {
        // gold 北京市 (3 segments), prediction 北京 (2): common run 2,
        // P 1, R 2/3 → F1 0.8.
        assert!(close(cmrc_f1("北京", "北京市"), 0.8));
        // The common run must be contiguous: gold 中国的首都, prediction
        // 中首都: runs 首都 (2); P 2/3, R 2/5 → F1 = 2·(2/3)(2/5)/(2/3+2/5) = 0.5.
        assert!(close(cmrc_f1("中首都", "中国的首都"), 0.5));
        // Punctuation and case do not count.
        assert!(close(cmrc_f1("《红楼梦》", "红楼梦"), 1.0));
        assert_eq!(cmrc_exact_match("《红楼梦》", "红楼梦"), 1.0);
        assert_eq!(cmrc_exact_match("红楼梦。", "红楼"), 0.0);
        assert_eq!(cmrc_f1("", "红楼"), 0.0);
        // Mixed text: gold "1998年 Apple" → [1998, 年, apple], prediction
        // "1998年" → [1998, 年]: P 1, R 2/3 → 0.8.
        assert!(close(cmrc_f1("1998年", "1998年 Apple"), 0.8));
    }

    #[test]
    fn score_takes_the_best_gold_answer_and_averages() {
        let golds = vec!["北京市".to_string(), "北京".to_string()];
        let other = vec!["上海".to_string()];
        let s = QaMetric::Cmrc.score([("北京", golds.as_slice()), ("北京", other.as_slice())]);
        assert_eq!(s, QaScore { exact_match: 0.5, f1: 0.5, questions: 2 });
        // The SQuAD metric sees "北京" and "北京市" as different single words.
        let s = QaMetric::Squad.score([("北京", &golds[..1])]);
        assert_eq!((s.exact_match, s.f1), (0.0, 0.0));
        assert!(close(QaMetric::Cmrc.score([("北京", &golds[..1])]).f1, 0.8));
    }

    #[test]
    fn detection_by_the_share_of_cjk_characters() {
        assert_eq!(QaMetric::detect(["The Normans gave their name to Normandy."]).0, QaMetric::Squad);
        let (m, share) = QaMetric::detect(["北京是中国的首都。", "Beijing"]);
        assert_eq!(m, QaMetric::Cmrc);
        assert!(close(share, 8.0 / 16.0), "{share}");
        // An English text with a few Chinese names stays SQuAD.
        assert_eq!(QaMetric::detect(["Mao Zedong (毛泽东) was born in Shaoshan in 1893."]).0, QaMetric::Squad);
        assert_eq!(QaMetric::detect([]).0, QaMetric::Squad);
        assert_eq!((QaMetric::Squad.name(), QaMetric::Cmrc.name()), ("official SQuAD v1.1", "CMRC 2018"));
    }
}
