//! Character bigrams, the second input of Chinese NER taggers since Zhang &
//! Yang's Lattice LSTM baselines and TENER (Yan et al. 2019): each
//! character also looks up the pair it forms with the next one, `c_i c_{i+1}`
//! (the last one with [`END`]). A bigram is written as its two normalised
//! tokens joined by a space (tokens never hold whitespace), so
//! `北京大学` gives `北 京`, `京 大`, `大 学`, `学 </s>`.
//!
//! The vocabulary comes from the training text; a bigram seen fewer than
//! `min_freq` times there, or never, reads `<unk>`.

use crate::vocab::{Normalize, Vocab};

/// What follows the last token of a sentence.
pub const END: &str = "</s>";

/// The bigram of every token of `tokens`: itself and the next one.
pub fn keys(tokens: &[String], normalize: Normalize) -> Vec<String> {
    let norm: Vec<String> = tokens.iter().map(|t| normalize.apply(t)).collect();
    (0..norm.len()).map(|i| format!("{} {}", norm[i], norm.get(i + 1).map_or(END, String::as_str))).collect()
}

/// The bigram vocabulary of training sentences: bigrams seen at least
/// `min_freq` times, most frequent first.
pub fn vocabulary<'a>(
    sentences: impl IntoIterator<Item = &'a [String]>,
    normalize: Normalize,
    min_freq: usize,
) -> Vocab {
    Vocab::build(sentences.into_iter().flat_map(|s| keys(s, normalize)), min_freq)
}

/// The ids of the bigrams of `tokens`.
pub fn ids(vocab: &Vocab, tokens: &[String], normalize: Normalize) -> Vec<u32> {
    keys(tokens, normalize).iter().map(|k| vocab.id(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::UNK_ID;

    fn chars(s: &str) -> Vec<String> {
        s.chars().map(String::from).collect()
    }

    #[test]
    fn each_token_pairs_with_the_next_and_the_last_with_the_end() {
        assert_eq!(keys(&chars("北京大学"), Normalize::default()), ["北 京", "京 大", "大 学", "学 </s>"]);
        assert_eq!(keys(&chars("A1"), Normalize { lowercase: true, zero_digits: true }), ["a 0", "0 </s>"]);
        assert!(keys(&[], Normalize::default()).is_empty());
    }

    #[test]
    fn rare_and_unseen_bigrams_read_unk() {
        let train = [chars("北京大学"), chars("北京")];
        let v = vocabulary(train.iter().map(Vec::as_slice), Normalize::default(), 2);
        // Only 北京 occurs twice; every other bigram once.
        assert_eq!(v.items(), ["<pad>", "<unk>", "北 京"]);
        assert_eq!(ids(&v, &chars("北京人"), Normalize::default()), [2, UNK_ID, UNK_ID]);
        let all = vocabulary(train.iter().map(Vec::as_slice), Normalize::default(), 1);
        assert_eq!(all.len(), 2 + 5, "北京, 京大, 大学, 学</s>, 京</s>");
        assert_eq!(ids(&all, &chars("京"), Normalize::default()), [all.id("京 </s>")]);
        assert_ne!(all.id("京 </s>"), UNK_ID);
    }
}
