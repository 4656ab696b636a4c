//! Answer spans (extractive QA): the one span a question's context is
//! tagged with, as each decoder scores it.
//!
//! - a tagging decoder (BIOES/BIO CRF, softmax): the span with the highest
//!   `P(starts at i)·P(ends at j)` under its per-token marginals;
//! - the pointer: independent start and end distributions over the
//!   context, the best `i ≤ j < i + N` by `P(start = i)·P(end = j)`;
//! - the one-span CRF ([`crf::one_span`]): every single span's exact
//!   probability.
//!
//! Spans are inclusive token ranges `start..=end`.

use corpus::{Prefix, Scheme, Tag};

/// A span and its probability under the decoder (for tagging decoders the
/// product of the start and end marginals).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnswerSpan {
    pub start: usize,
    pub end: usize,
    pub prob: f32,
}

/// Where the span tags of one label sit in a tag set.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanTags {
    pub t: usize,
    pub o: usize,
    pub b: Vec<usize>,
    pub i: Vec<usize>,
    pub e: Vec<usize>,
    pub s: Vec<usize>,
}

impl SpanTags {
    /// The ids of `O` and of each prefix of the first chunk label.
    pub fn new(tags: &[Tag]) -> SpanTags {
        let label = tags.iter().find_map(|t| match t {
            Tag::Chunk { label, .. } => Some(label.clone()),
            Tag::O => None,
        });
        let with = |p: Prefix| -> Vec<usize> {
            (0..tags.len())
                .filter(|&k| matches!(&tags[k], Tag::Chunk { prefix, label: l } if *prefix == p && Some(l) == label.as_ref()))
                .collect()
        };
        SpanTags {
            t: tags.len(),
            o: tags.iter().position(|t| *t == Tag::O).unwrap_or(0),
            b: with(Prefix::B),
            i: with(Prefix::I),
            e: with(Prefix::E),
            s: with(Prefix::S),
        }
    }

    fn bioes(&self) -> bool {
        !self.e.is_empty()
    }

    /// The tag path of `n` tokens with the one span `start..=end`.
    pub fn path(&self, n: usize, start: usize, end: usize) -> Vec<usize> {
        let first = |v: &[usize], or: usize| v.first().copied().unwrap_or(or);
        let (b, i) = (first(&self.b, self.o), first(&self.i, self.o));
        (0..n)
            .map(|k| match k {
                k if k < start || k > end => self.o,
                _ if self.bioes() && start == end => first(&self.s, b),
                k if k == start => b,
                k if self.bioes() && k == end => first(&self.e, i),
                _ => i,
            })
            .collect()
    }

    /// The gold span of a row of tag ids (its first `len`): from the first
    /// to the last token not tagged `O`; `None` when all are `O`.
    pub fn gold(&self, row: &[i64]) -> Option<(usize, usize)> {
        let inside = |k: &usize| row[*k] as usize != self.o;
        let start = (0..row.len()).find(inside)?;
        let end = (0..row.len()).rev().find(inside)?;
        Some((start, end))
    }

    /// The best span of a sentence from its per-token marginals `[n, T]`,
    /// at most `max_len` tokens: BIOES spans are B at i and E at j, or S at
    /// i = j; BIO spans B at i and no I at j + 1.
    pub fn from_marginals(&self, m: &[f32], max_len: usize) -> Option<AnswerSpan> {
        best(&self.candidates_from_marginals(m, max_len))
    }

    /// Every span of at most `max_len` tokens with its score
    /// `P(starts at i)·P(ends at j)` (for a BIOES single token,
    /// `P(S at i)`) under per-token marginals `m` (`[n, T]`), in order of
    /// start, then end. Not a distribution: the scores need not sum to one.
    pub fn candidates_from_marginals(&self, m: &[f32], max_len: usize) -> Vec<(usize, usize, f32)> {
        let t = self.t;
        let n = m.len() / t;
        let p = |k: usize, ks: &[usize]| ks.iter().map(|&x| m[k * t + x]).sum::<f32>();
        let start: Vec<f32> = (0..n).map(|k| p(k, &self.b)).collect();
        let end: Vec<f32> = (0..n)
            .map(|j| match (self.bioes(), j + 1 < n) {
                (true, _) => p(j, &self.e),
                (false, true) => 1.0 - p(j + 1, &self.i),
                (false, false) => 1.0,
            })
            .collect();
        let mut out = Vec::new();
        for i in 0..n {
            out.push((i, i, if self.bioes() { p(i, &self.s) } else { start[i] * end[i] }));
            for j in i + 1..n.min(i + max_len) {
                out.push((i, j, start[i] * end[j]));
            }
        }
        out
    }

    /// Per-token marginals `[n, T]` of a distribution over single spans
    /// (`(start, end, prob)`, probabilities summing to one).
    pub fn marginals_of_spans(&self, n: usize, spans: &[(usize, usize, f32)]) -> Vec<f32> {
        let t = self.t;
        let mut m = vec![0.0f32; n * t];
        let mut covered = vec![0.0f32; n];
        for &(i, j, p) in spans {
            for (k, y) in self.path(n, i, j).into_iter().enumerate().skip(i).take(j + 1 - i) {
                m[k * t + y] += p;
                covered[k] += p;
            }
        }
        for (k, c) in covered.into_iter().enumerate() {
            m[k * t + self.o] += (1.0 - c).max(0.0);
        }
        m
    }
}

/// The pointer's spans of one sentence (emissions `[n, 2]`: start and end
/// scores), at most `max_len` tokens, with `P(start = i)·P(end = j)`
/// renormalised over those spans.
pub fn pointer_spans(em: &[f32], max_len: usize) -> Vec<(usize, usize, f32)> {
    let n = em.len() / 2;
    let log_softmax = |col: usize| {
        let xs: Vec<f32> = (0..n).map(|k| em[k * 2 + col]).collect();
        let m = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let z = m + xs.iter().map(|x| (x - m).exp()).sum::<f32>().ln();
        xs.into_iter().map(|x| x - z).collect::<Vec<f32>>()
    };
    let (ls, le) = (log_softmax(0), log_softmax(1));
    let spans: Vec<(usize, usize, f32)> = (0..n)
        .flat_map(|i| (i..n.min(i + max_len.max(1))).map(move |j| (i, j)))
        .map(|(i, j)| (i, j, ls[i] + le[j]))
        .collect();
    normalise(spans)
}

/// Log scores → probabilities summing to one.
pub fn normalise(spans: Vec<(usize, usize, f32)>) -> Vec<(usize, usize, f32)> {
    let m = spans.iter().map(|s| s.2).fold(f32::NEG_INFINITY, f32::max);
    let z: f32 = spans.iter().map(|s| (s.2 - m).exp()).sum();
    spans.into_iter().map(|(i, j, x)| (i, j, (x - m).exp() / z)).collect()
}

/// The most probable of `spans` (the first on ties).
pub fn best(spans: &[(usize, usize, f32)]) -> Option<AnswerSpan> {
    top(spans, 1).into_iter().next()
}

/// The `k` most probable of `spans`, best first; ties keep the order of
/// `spans` (so the first is [`best`]'s).
pub fn top(spans: &[(usize, usize, f32)], k: usize) -> Vec<AnswerSpan> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    // A stable sort: equal probabilities stay in their given order.
    // A NaN probability ranks last.
    let key = |i: usize| if spans[i].2.is_nan() { f32::NEG_INFINITY } else { spans[i].2 };
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)));
    order.into_iter().take(k).map(|i| AnswerSpan { start: spans[i].0, end: spans[i].1, prob: spans[i].2 }).collect()
}

/// `scheme`'s span tags of the label `label` (for tests and tools).
pub fn span_tag_set(scheme: Scheme, label: &str) -> Vec<Tag> {
    let mut tags = vec![Tag::O];
    let prefixes: &[Prefix] = match scheme {
        Scheme::Bioes => &[Prefix::B, Prefix::I, Prefix::E, Prefix::S],
        _ => &[Prefix::B, Prefix::I],
    };
    tags.extend(prefixes.iter().map(|&prefix| Tag::Chunk { prefix, label: label.into() }));
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bioes() -> SpanTags {
        SpanTags::new(&span_tag_set(Scheme::Bioes, "ANS"))
    }

    #[test]
    fn paths_and_gold_spans_round_trip() {
        let st = bioes();
        // O B-ANS I-ANS E-ANS S-ANS = 0 1 2 3 4
        assert_eq!(st.path(5, 1, 3), [0, 1, 2, 3, 0]);
        assert_eq!(st.path(3, 2, 2), [0, 0, 4]);
        assert_eq!(st.gold(&[0, 1, 2, 3, 0]), Some((1, 3)));
        assert_eq!(st.gold(&[0, 0, 0]), None);
        let bio = SpanTags::new(&span_tag_set(Scheme::Iob2, "ANS"));
        assert_eq!(bio.path(4, 1, 1), [0, 1, 0, 0]);
        assert_eq!(bio.path(4, 0, 2), [1, 2, 2, 0]);
    }

    /// The pointer's best span and its span distribution against brute
    /// force over every start/end pair.
    #[test]
    fn pointer_spans_against_brute_force() {
        let em: Vec<f32> = vec![0.1, -1.0, 2.0, 0.3, -0.5, 1.5, 0.7, 2.2, 0.0, -0.3];
        let n = 5;
        for max_len in 1..=5 {
            let spans = pointer_spans(&em, max_len);
            let softmax = |col: usize| {
                let e: Vec<f64> = (0..n).map(|k| (em[k * 2 + col] as f64).exp()).collect();
                let z: f64 = e.iter().sum();
                e.into_iter().map(|x| x / z).collect::<Vec<f64>>()
            };
            let (ps, pe) = (softmax(0), softmax(1));
            let mut all = Vec::new();
            for i in 0..n {
                for j in i..n {
                    if j - i < max_len {
                        all.push((i, j, ps[i] * pe[j]));
                    }
                }
            }
            let z: f64 = all.iter().map(|s| s.2).sum();
            assert_eq!(spans.len(), all.len());
            for (a, b) in spans.iter().zip(&all) {
                assert_eq!((a.0, a.1), (b.0, b.1));
                assert!((a.2 as f64 - b.2 / z).abs() < 1e-5);
            }
            let top = all.iter().cloned().fold((0, 0, -1.0), |a, b| if b.2 > a.2 { b } else { a });
            let got = best(&spans).unwrap();
            assert_eq!((got.start, got.end), (top.0, top.1), "max_len {max_len}");
        }
    }

    /// Marginals of a span distribution: each token's tag probabilities
    /// sum to one, and they are the sums over the spans by enumeration.
    #[test]
    fn marginals_of_spans_sum_over_the_spans() {
        let st = bioes();
        let spans = vec![(0, 1, 0.5), (1, 1, 0.3), (2, 3, 0.2)];
        let m = st.marginals_of_spans(4, &spans);
        for k in 0..4 {
            let row = &m[k * 5..(k + 1) * 5];
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6, "token {k}: {row:?}");
        }
        // Token 1: E of span 0..=1 (0.5), S of 1..=1 (0.3), O otherwise (0.2).
        let want = [0.2, 0.0, 0.0, 0.5, 0.3];
        assert!(m[5..10].iter().zip(want).all(|(x, y)| (x - y).abs() < 1e-6), "{:?}", &m[5..10]);
        // From these marginals P(S at 1) = 0.3 beats P(B at 0)·P(E at 1) = 0.25.
        let b = st.from_marginals(&m, 30).unwrap();
        assert_eq!((b.start, b.end), (1, 1));
        assert!((b.prob - 0.3).abs() < 1e-6);
    }

    /// `top` against sorting every span by probability: best first, ties in
    /// the given order, `k` beyond the count gives all; its first is `best`.
    #[test]
    fn top_spans_are_the_sorted_spans() {
        let em: Vec<f32> = vec![0.1, -1.0, 2.0, 0.3, -0.5, 1.5, 0.7, 2.2, 0.0, -0.3];
        let mut spans = pointer_spans(&em, 3);
        spans.push((4, 4, spans[0].2)); // an exact tie with the first span
        let mut sorted: Vec<(usize, (usize, usize, f32))> = spans.iter().copied().enumerate().collect();
        sorted.sort_by(|a, b| b.1 .2.partial_cmp(&a.1 .2).unwrap().then(a.0.cmp(&b.0)));
        for k in [1, 2, 5, spans.len(), spans.len() + 4] {
            let got = top(&spans, k);
            assert_eq!(got.len(), k.min(spans.len()));
            for (g, (_, (i, j, p))) in got.iter().zip(&sorted) {
                assert_eq!((g.start, g.end, g.prob), (*i, *j, *p));
            }
        }
        assert_eq!(top(&spans, 1).first().copied(), best(&spans));
        assert!(top(&[], 3).is_empty());
    }

    /// The marginals' best span is the first of their candidates' top list.
    #[test]
    fn candidates_from_marginals_rank_as_from_marginals_picks() {
        let st = bioes();
        // 3 tokens × 5 tags (O B I E S), rows summing to one.
        let m: Vec<f32> = vec![
            0.15, 0.6, 0.0, 0.0, 0.25, //
            0.2, 0.0, 0.5, 0.3, 0.0, //
            0.3, 0.1, 0.0, 0.5, 0.1,
        ];
        let c = st.candidates_from_marginals(&m, 3);
        assert_eq!(c.len(), 6);
        assert_eq!(top(&c, 1).first().copied(), st.from_marginals(&m, 3));
        let best = st.from_marginals(&m, 3).unwrap();
        assert_eq!((best.start, best.end), (0, 2)); // B at 0 · E at 2 = 0.30 > S at 0 = 0.25
    }
}
