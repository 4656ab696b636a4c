//! Extractive QA on top of tagging: each question's answer from the tagged
//! context (the most probable span), the official SQuAD v1.1 metric, and the
//! official predictions file.

use crate::infer::Tagged;
use corpus::Tag;

/// Longest answer considered, in sub-tokens.
pub const MAX_ANSWER: usize = 30;

/// The answer of each tagged QA sentence, as extractive QA systems choose
/// it: the span `i..=j` (at most [`MAX_ANSWER`] sub-tokens) with the highest
/// P(chunk starts at i)·P(chunk ends at j) under the tagger's per-token
/// marginals (P(S) for a single token) — every question gets an answer, as
/// every SQuAD v1.1 question has one, even where the Viterbi path tags
/// none. Without marginals, the first decoded span, or "". A span that
/// starts or ends inside a word is widened to the whole word
/// ([`corpus::squad::whole_words`]).
pub fn answers(items: &[corpus::squad::QaItem], tagged: &[Tagged], tag_set: &[Tag]) -> Vec<String> {
    use corpus::Prefix;
    let t = tag_set.len();
    let with = |f: &dyn Fn(&Prefix) -> bool| -> Vec<usize> {
        (0..t).filter(|&k| matches!(&tag_set[k], Tag::Chunk { prefix, .. } if f(prefix))).collect()
    };
    let begin = with(&|p| *p == Prefix::B);
    let single = with(&|p| *p == Prefix::S);
    let end_tags = with(&|p| *p == Prefix::E);
    let inside = with(&|p| *p == Prefix::I);
    // BIOES: a span i..=j is B at i and E at j, or S at i = j. BIO: B at i
    // and no I at j + 1 (IOB1 data is trained in BIOES or BIO).
    let bioes = !end_tags.is_empty();
    items
        .iter()
        .zip(tagged)
        .map(|(item, tg)| {
            let n = tg.tags.len();
            let best = match &tg.marginals {
                Some(m) if n > 0 => {
                    let p = |i: usize, ks: &[usize]| ks.iter().map(|&k| m[i * t + k]).sum::<f32>();
                    let start: Vec<f32> = (0..n).map(|i| p(i, &begin)).collect();
                    let end: Vec<f32> = (0..n)
                        .map(|j| match (bioes, j + 1 < n) {
                            (true, _) => p(j, &end_tags),
                            (false, true) => 1.0 - p(j + 1, &inside),
                            (false, false) => 1.0,
                        })
                        .collect();
                    let mut best = (f32::MIN, 0, 0);
                    for i in 0..n {
                        let one = if bioes { p(i, &single) } else { start[i] * end[i] };
                        if one > best.0 {
                            best = (one, i, i);
                        }
                        for j in i + 1..n.min(i + MAX_ANSWER) {
                            if start[i] * end[j] > best.0 {
                                best = (start[i] * end[j], i, j);
                            }
                        }
                    }
                    Some((best.1, best.2))
                }
                _ => corpus::Scheme::Iob2.decode(&tg.tags).first().map(|s| (s.start, s.end - 1)),
            };
            best.map_or_else(String::new, |(i, j)| {
                let (i, j) = corpus::squad::whole_words(&item.context, &item.offsets, i, j);
                corpus::squad::span_text(&item.context, &item.offsets, i, j)
            })
        })
        .collect()
}

/// The official metrics of `answers` against the gold answers of `items`.
pub fn score(items: &[corpus::squad::QaItem], answers: &[String]) -> corpus::squad::QaScore {
    corpus::squad::qa_score(answers.iter().zip(items).map(|(a, i)| (a.as_str(), i.answers.as_slice())))
}

/// One line of the official metrics, in percent.
pub fn line(qa: &corpus::squad::QaScore) -> String {
    format!(
        "answers (official SQuAD v1.1 metric): exact match {:.2}, F1 {:.2}, {} questions",
        100.0 * qa.exact_match,
        100.0 * qa.f1,
        qa.questions
    )
}

/// Predictions in the official format, `{"question id": "answer", …}`.
pub fn predictions_json(items: &[corpus::squad::QaItem], answers: &[String]) -> String {
    let map: serde_json::Map<String, serde_json::Value> =
        items.iter().zip(answers).map(|(i, a)| (i.id.clone(), serde_json::Value::from(a.as_str()))).collect();
    serde_json::to_string_pretty(&map).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use corpus::squad::QaItem;

    fn item(context: &str, offsets: Vec<(usize, usize)>) -> QaItem {
        QaItem { id: "q".into(), question: vec![], question_text: String::new(), context: context.into(), offsets, answers: vec![] }
    }

    #[test]
    fn the_answer_is_the_best_start_end_pair_even_when_viterbi_tags_none() {
        // Tag set in BIOES: O, B-ANS, I-ANS, E-ANS, S-ANS.
        let tag_set: Vec<Tag> = ["O", "B-ANS", "I-ANS", "E-ANS", "S-ANS"].iter().map(|t| t.parse().unwrap()).collect();
        let it = item("ab cd ef gh", vec![(0, 2), (3, 5), (6, 8), (9, 11)]);
        // Every token is most likely O, but "cd ef" is the most likely span:
        // P(B at 1) 0.4 × P(E at 2) 0.45 = 0.18 beats P(S at 3) = 0.15.
        let marginals = vec![
            0.9, 0.05, 0.0, 0.0, 0.05, //
            0.5, 0.4, 0.0, 0.0, 0.1, //
            0.5, 0.0, 0.05, 0.45, 0.0, //
            0.8, 0.05, 0.0, 0.0, 0.15,
        ];
        let tagged = Tagged { tags: vec![Tag::O; 4], marginals: Some(marginals), ..Default::default() };
        assert_eq!(answers(&[it.clone()], &[tagged], &tag_set), ["cd ef"]);
        // Without marginals: the first decoded span, else nothing.
        let b: Tag = "B-ANS".parse().unwrap();
        let i: Tag = "I-ANS".parse().unwrap();
        let decoded = Tagged { tags: vec![Tag::O, Tag::O, b, i], ..Default::default() };
        assert_eq!(answers(&[it.clone()], &[decoded], &tag_set), ["ef gh"]);
        let none = Tagged { tags: vec![Tag::O; 4], ..Default::default() };
        assert_eq!(answers(&[it], &[none], &tag_set), [""]);
    }

    #[test]
    fn an_answer_inside_a_word_becomes_the_whole_word() {
        let tag_set: Vec<Tag> = ["O", "B-ANS", "I-ANS", "E-ANS", "S-ANS"].iter().map(|t| t.parse().unwrap()).collect();
        // nik ##ola tes ##la: the most likely span is the single piece "##ola".
        let it = item("Nikola Tesla", vec![(0, 3), (3, 6), (7, 10), (10, 12)]);
        let mut marginals = vec![0.9, 0.02, 0.0, 0.0, 0.08].repeat(4);
        marginals[5..10].copy_from_slice(&[0.4, 0.0, 0.0, 0.0, 0.6]);
        let tagged = Tagged { tags: vec![Tag::O; 4], marginals: Some(marginals), ..Default::default() };
        assert_eq!(answers(&[it], &[tagged], &tag_set), ["Nikola"]);
    }

    #[test]
    fn bio_spans_end_where_no_inside_tag_follows() {
        let tag_set: Vec<Tag> = ["O", "B-ANS", "I-ANS"].iter().map(|t| t.parse().unwrap()).collect();
        let it = item("北京是首都", (0..5).map(|c| (c, c + 1)).collect());
        // B at 0 (0.6), I at 1 (0.7), nothing continues at 2: "北京".
        let marginals = vec![0.4, 0.6, 0.0, 0.3, 0.0, 0.7, 0.9, 0.1, 0.0, 0.9, 0.1, 0.0, 0.9, 0.1, 0.0];
        let tagged = Tagged { tags: vec![Tag::O; 5], marginals: Some(marginals), ..Default::default() };
        assert_eq!(answers(&[it], &[tagged], &tag_set), ["北京"]);
    }
}
