//! Extractive QA on top of tagging: each question's answer from the tagged
//! context (the most probable span), the official SQuAD v1.1 metric, and the
//! official predictions file.

use crate::infer::Tagged;
use corpus::qa::metric::QaMetric;
use corpus::qa::squad::{QaItem, QaScore};

/// An answer: its text, its characters `start..end` in the context, and
/// the decoder's probability of its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub text: String,
    pub start: usize,
    pub end: usize,
    pub probability: f32,
}

/// The answer of each tagged QA sentence: its answer span as the decoder
/// picked it ([`encoders::span`]; every question gets one, as every SQuAD
/// v1.1 question has one, even where the Viterbi path tags none), widened
/// to whole words when it starts or ends inside one
/// ([`corpus::qa::squad::whole_words`]); `None` without a span (an empty context).
pub fn answered(items: &[QaItem], tagged: &[Tagged]) -> Vec<Option<Answer>> {
    items
        .iter()
        .zip(tagged)
        .map(|(item, tg)| {
            tg.span.map(|s| {
                let (i, j) = corpus::qa::squad::whole_words(&item.context, &item.offsets, s.start, s.end);
                let text = corpus::qa::squad::span_text(&item.context, &item.offsets, i, j);
                let start = item.offsets[i].0;
                Answer { end: start + text.chars().count(), text, start, probability: s.prob }
            })
        })
        .collect()
}

/// The `k` likeliest answers of each tagged QA sentence (tagged with
/// [`crate::infer::Request::top_k`]), best first: each span widened to
/// whole words as [`answered`] does; spans that widen to the same answer
/// are one answer, with their probabilities summed.
pub fn answered_top(items: &[QaItem], tagged: &[Tagged], k: usize) -> Vec<Vec<Answer>> {
    items
        .iter()
        .zip(tagged)
        .map(|(item, tg)| {
            let mut out: Vec<Answer> = Vec::new();
            for s in &tg.top_spans {
                let (i, j) = corpus::qa::squad::whole_words(&item.context, &item.offsets, s.start, s.end);
                let start = item.offsets[i].0;
                match out.iter_mut().find(|a| a.start == start && a.end == item.offsets[j].1.max(start)) {
                    Some(a) => a.probability += s.prob,
                    None => {
                        let text = corpus::qa::squad::span_text(&item.context, &item.offsets, i, j);
                        out.push(Answer { end: item.offsets[j].1.max(start), text, start, probability: s.prob });
                    }
                }
            }
            out.sort_by(|a, b| b.probability.total_cmp(&a.probability));
            out.truncate(k);
            out
        })
        .collect()
}

/// The answer texts of [`answered`] ("" without a span).
pub fn answers(items: &[QaItem], tagged: &[Tagged]) -> Vec<String> {
    answered(items, tagged).into_iter().map(|a| a.map_or_else(String::new, |a| a.text)).collect()
}

/// The metrics of `answers` against the gold answers of `items`.
pub fn score(items: &[QaItem], answers: &[String], metric: QaMetric) -> QaScore {
    metric.score(answers.iter().zip(items).map(|(a, i)| (a.as_str(), i.answers.as_slice())))
}

/// The question-shuffle ablation: each context read against the question
/// of the item half the split away (another paragraph, as a split holds
/// more than two of them), its gold answers kept. A reader that reads
/// the question falls towards its no-question level on these.
pub fn shuffled_questions(items: &[QaItem]) -> Vec<QaItem> {
    let n = items.len();
    (0..n)
        .map(|i| {
            let other = &items[(i + n / 2) % n.max(1)];
            QaItem { question: other.question.clone(), question_text: other.question_text.clone(), ..items[i].clone() }
        })
        .collect()
}

/// Each question's exact match and F1 (the max over its gold answers).
pub fn per_question(items: &[QaItem], answers: &[String], metric: QaMetric) -> Vec<(f64, f64)> {
    items
        .iter()
        .zip(answers)
        .map(|(i, a)| {
            let s = metric.score([(a.as_str(), i.answers.as_slice())]);
            (s.exact_match, s.f1)
        })
        .collect()
}

/// One line of the metric's scores, in percent.
pub fn line(qa: &QaScore, metric: QaMetric) -> String {
    format!(
        "answers ({} metric): exact match {:.2}, F1 {:.2}, {} questions",
        metric.name(),
        100.0 * qa.exact_match,
        100.0 * qa.f1,
        qa.questions
    )
}

/// Predictions in the official format, `{"question id": "answer", …}`.
pub fn predictions_json(items: &[corpus::qa::squad::QaItem], answers: &[String]) -> String {
    let map: serde_json::Map<String, serde_json::Value> =
        items.iter().zip(answers).map(|(i, a)| (i.id.clone(), serde_json::Value::from(a.as_str()))).collect();
    serde_json::to_string_pretty(&map).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use corpus::qa::squad::QaItem;
    use corpus::Tag;

    fn item(context: &str, offsets: Vec<(usize, usize)>) -> QaItem {
        QaItem {
            id: "q".into(),
            question: vec![],
            question_text: String::new(),
            context: context.into(),
            offsets,
            answers: vec![],
        }
    }

    #[test]
    fn an_answer_inside_a_word_becomes_the_whole_word_and_no_span_no_answer() {
        // nik ##ola tes ##la: the decoder's span is the single piece "##ola".
        let it = item("Nikola Tesla", vec![(0, 3), (3, 6), (7, 10), (10, 12)]);
        let span = Some(encoders::span::AnswerSpan { start: 1, end: 1, prob: 0.6 });
        let tagged = Tagged { tags: vec![Tag::O; 4], span, ..Default::default() };
        assert_eq!(answers(&[it.clone()], &[tagged]), ["Nikola"]);
        let span = Some(encoders::span::AnswerSpan { start: 1, end: 2, prob: 0.6 });
        let tagged = Tagged { tags: vec![Tag::O; 4], span, ..Default::default() };
        assert_eq!(answers(&[it.clone()], &[tagged.clone()]), ["Nikola Tesla"]);
        let a = answered(&[it.clone()], &[tagged]).remove(0).unwrap();
        assert_eq!((a.start, a.end, a.probability), (0, 12, 0.6));
        assert_eq!(answers(&[it], &[Tagged::default()]), [""]);
    }

    #[test]
    fn shuffled_questions_move_half_the_split_away_and_keep_the_answers() {
        let items: Vec<QaItem> = (0..5)
            .map(|k| QaItem {
                id: format!("q{k}"),
                question: vec![format!("w{k}")],
                question_text: format!("w{k}?"),
                context: format!("context {k}").into(),
                offsets: vec![(0, 7)],
                answers: vec![format!("a{k}")],
            })
            .collect();
        let s = shuffled_questions(&items);
        for (k, it) in s.iter().enumerate() {
            let from = (k + 2) % 5;
            assert_eq!(
                (it.question_text.as_str(), it.answers[0].as_str()),
                (format!("w{from}?").as_str(), format!("a{k}").as_str())
            );
            assert_eq!(it.question, items[from].question);
            assert_eq!(it.context, items[k].context);
        }
    }
}
