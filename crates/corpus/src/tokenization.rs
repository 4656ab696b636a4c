//! How a dataset's text was cut into tokens: whitespace-separated words
//! (CoNLL-2003), or one character per token (Chinese NER such as Resume or
//! Weibo). A run remembers it (in its `vocab.json`), so that raw text given
//! to `seqlab predict` or `visualize --text` is cut the way the model was
//! trained.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Character-level data: at least this share of the training tokens is a
/// single character (CoNLL-2003 English: about 15 %, punctuation and "a";
/// Resume NER: 100 %).
pub const CHAR_LEVEL_SHARE: f64 = 0.9;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tokenization {
    /// Tokens are separated by whitespace.
    #[default]
    Words,
    /// Every non-whitespace character is a token.
    Chars,
}

impl Tokenization {
    /// The tokenisation of `tokens` (a training set's): [`Tokenization::Chars`]
    /// when at least [`CHAR_LEVEL_SHARE`] of them are one character long.
    pub fn detect<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Tokenization {
        let (mut single, mut all) = (0usize, 0usize);
        for t in tokens {
            all += 1;
            single += usize::from(t.chars().count() == 1);
        }
        if all > 0 && single as f64 >= CHAR_LEVEL_SHARE * all as f64 {
            Tokenization::Chars
        } else {
            Tokenization::Words
        }
    }

    /// The tokens of one line of raw text.
    pub fn split(self, line: &str) -> Vec<String> {
        match self {
            Tokenization::Words => line.split_whitespace().map(str::to_string).collect(),
            Tokenization::Chars => line.chars().filter(|c| !c.is_whitespace()).map(String::from).collect(),
        }
    }
}

impl fmt::Display for Tokenization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tokenization::Words => "words",
            Tokenization::Chars => "chars",
        })
    }
}

impl FromStr for Tokenization {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "words" => Ok(Tokenization::Words),
            "chars" => Ok(Tokenization::Chars),
            _ => Err(format!("unknown tokenisation `{s}`: expected words or chars")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn character_level_data_is_recognised_and_split_per_character() {
        let resume = ["高", "勇", "：", "男", "，", "1", "9", "6", "6", "年"];
        assert_eq!(Tokenization::detect(resume), Tokenization::Chars);
        let conll = ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."];
        assert_eq!(Tokenization::detect(conll), Tokenization::Words);
        // 9 of 10 single characters is character level; 8 of 10 is not.
        let mut nine = vec!["a"; 9];
        nine.push("ab");
        assert_eq!(Tokenization::detect(nine.iter().copied()), Tokenization::Chars);
        nine[8] = "cd";
        assert_eq!(Tokenization::detect(nine.iter().copied()), Tokenization::Words);
        assert_eq!(Tokenization::detect(std::iter::empty()), Tokenization::Words);

        assert_eq!(Tokenization::Chars.split("我在 北京 "), ["我", "在", "北", "京"]);
        assert_eq!(Tokenization::Words.split(" 我在 北京\t"), ["我在", "北京"]);
        assert_eq!("chars".parse(), Ok(Tokenization::Chars));
        assert!("bytes".parse::<Tokenization>().unwrap_err().contains("expected words or chars"));
        assert_eq!(serde_json::to_string(&Tokenization::Chars).unwrap(), "\"chars\"");
    }
}
