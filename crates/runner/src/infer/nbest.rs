//! The `k` best candidates of each sentence (`seqlab predict --top-k K`),
//! as NCRF++'s n-best decoding gives them: for a tagger, the `k` best tag
//! sequences with their probabilities under the decoder (k-best Viterbi on
//! the CRF); for a QA run, the `k` likeliest answers. The candidates come
//! from the one inference path ([`crate::infer::Request::top_k`]); this
//! file writes them and says where a sentence has fewer than `k`.

use crate::infer::input::Input;
use crate::infer::qa::Answer;
use crate::infer::Tagged;
use corpus::qa::squad::QaItem;
use serde::Serialize;
use std::fmt::Write as _;

/// The most candidates `--top-k` asks for.
pub const MAX_K: usize = 1000;

/// `k` checked: at least 1 and at most [`MAX_K`].
pub fn check_k(k: usize) -> anyhow::Result<usize> {
    anyhow::ensure!(k >= 1, "--top-k 0: asks for no candidate; give K ≥ 1 (1 is the best path alone)");
    anyhow::ensure!(
        k <= MAX_K,
        "--top-k {k}: at most {MAX_K} candidates per sentence (the probabilities of those beyond are rarely above rounding)"
    );
    Ok(k)
}

/// CoNLL with one block per candidate: a comment line
/// `# sentence S candidate C of N probability P`, then `token [gold]
/// predicted` per line and a blank line.
pub fn conll(input: &Input, tagged: &[Tagged]) -> String {
    let mut out = String::new();
    for (s, (sentence, t)) in input.sentences.iter().zip(tagged).enumerate() {
        let n = t.alternatives.len();
        for (c, (tags, p)) in t.alternatives.iter().enumerate() {
            let _ = writeln!(out, "# sentence {} candidate {} of {n} probability {p:.6}", s + 1, c + 1);
            for (i, w) in sentence.tokens.iter().enumerate() {
                if input.gold {
                    let _ = writeln!(out, "{w} {} {}", sentence.tags[i], tags[i]);
                } else {
                    let _ = writeln!(out, "{w} {}", tags[i]);
                }
            }
            out.push('\n');
        }
    }
    out
}

/// One answer candidate in the n-best JSON.
#[derive(Serialize)]
struct JsonAnswer<'a> {
    text: &'a str,
    /// Character offsets in the context, `start..end`.
    start: usize,
    end: usize,
    probability: f32,
}

/// `{"question id": [{"text", "start", "end", "probability"}, …], …}`,
/// best first: the n-best file of SQuAD readers (`nbest_predictions.json`).
pub fn qa_json(items: &[QaItem], top: &[Vec<Answer>]) -> String {
    let map: serde_json::Map<String, serde_json::Value> = items
        .iter()
        .zip(top)
        .map(|(item, answers)| {
            let list: Vec<JsonAnswer> = answers
                .iter()
                .map(|a| JsonAnswer { text: &a.text, start: a.start, end: a.end, probability: a.probability })
                .collect();
            (item.id.clone(), serde_json::to_value(list).expect("answers serialize"))
        })
        .collect();
    serde_json::to_string_pretty(&map).expect("answers serialize")
}

/// A note when some sentences have fewer than `k` candidates (a short
/// sentence has few allowed tag sequences; a short context few spans):
/// how many, and the first of them. `counts` is each sentence's number of
/// candidates; `what` names a sentence ("sentence", "question").
pub fn shortfall(counts: &[usize], k: usize, what: &str) -> Option<String> {
    let short: Vec<(usize, usize)> = counts.iter().copied().enumerate().filter(|&(_, n)| n < k).collect();
    let &(first, n) = short.first()?;
    Some(format!(
        "note: {} of {} {what}s have fewer than --top-k {k} candidates and list all they have ({what} {} has {n})",
        short.len(),
        counts.len(),
        first + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corpus::{Sentence, Tag};

    fn tag(s: &str) -> Tag {
        s.parse().unwrap()
    }

    #[test]
    fn k_is_checked() {
        assert!(check_k(0).unwrap_err().to_string().contains("K ≥ 1"));
        assert!(check_k(MAX_K + 1).unwrap_err().to_string().contains("at most 1000"));
        assert_eq!(check_k(5).unwrap(), 5);
    }

    #[test]
    fn conll_has_one_block_per_candidate() {
        let sentence = Sentence {
            tokens: vec!["EU".into(), "rejects".into()],
            tags: vec![tag("S-ORG"), tag("O")],
            doc: 0,
            line: 1,
        };
        let input = Input { sentences: vec![sentence], gold: true };
        let tagged = Tagged {
            alternatives: vec![(vec![tag("S-ORG"), tag("O")], 0.75), (vec![tag("S-LOC"), tag("O")], 0.125)],
            ..Default::default()
        };
        assert_eq!(
            conll(&input, &[tagged]),
            "# sentence 1 candidate 1 of 2 probability 0.750000\nEU S-ORG S-ORG\nrejects O O\n\n\
             # sentence 1 candidate 2 of 2 probability 0.125000\nEU S-ORG S-LOC\nrejects O O\n\n"
        );
    }

    #[test]
    fn shortfall_names_the_first_short_sentence() {
        assert_eq!(shortfall(&[5, 5], 5, "sentence"), None);
        assert_eq!(
            shortfall(&[5, 2, 3], 5, "sentence").unwrap(),
            "note: 2 of 3 sentences have fewer than --top-k 5 candidates and list all they have (sentence 2 has 2)"
        );
    }
}
