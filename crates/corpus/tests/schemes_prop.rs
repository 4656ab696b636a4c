//! Property tests: scheme conversion keeps spans, scoring agrees with span
//! matching on well-formed input, detection finds the scheme of clean data.

use corpus::score::{conlleval, strict};
use corpus::tags::{convert, Scheme, Span, Tag, ALL_SCHEMES};
use proptest::prelude::*;

/// Sorted, non-overlapping random spans over `len` tokens.
fn spans() -> impl Strategy<Value = (usize, Vec<Span>)> {
    (1usize..30).prop_flat_map(|len| {
        proptest::collection::vec((0..len, 1usize..5, 0usize..3), 0..8).prop_map(move |raw| {
            let labels = ["PER", "LOC", "creative-work"];
            let mut taken = vec![false; len];
            let mut out: Vec<Span> = Vec::new();
            for (start, width, l) in raw {
                let end = (start + width).min(len);
                if taken[start..end].iter().any(|&t| t) {
                    continue;
                }
                taken[start..end].iter_mut().for_each(|t| *t = true);
                out.push(Span { start, end, label: labels[l].to_string() });
            }
            out.sort();
            (len, out)
        })
    })
}

fn scheme() -> impl Strategy<Value = Scheme> {
    prop::sample::select(ALL_SCHEMES.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_then_decode_gives_the_same_spans((len, spans) in spans(), s in scheme()) {
        let tags = s.encode(len, &spans);
        prop_assert_eq!(s.decode(&tags), spans.clone());
        prop_assert_eq!(s.decode_strict(&tags), spans.clone());
        prop_assert_eq!(s.violations(&tags), Some(0));
    }

    #[test]
    fn conversion_between_schemes_keeps_spans((len, spans) in spans(), a in scheme(), b in scheme()) {
        let tags = a.encode(len, &spans);
        let converted = convert(&tags, a, b);
        prop_assert_eq!(b.decode(&converted), spans.clone());
        // And back again: the original tags.
        prop_assert_eq!(convert(&converted, b, a), tags);
    }

    #[test]
    fn conlleval_equals_exact_span_matching_on_well_formed_tags(
        (len, gold) in spans(), pred_seed in any::<u64>(), s in scheme()
    ) {
        // A prediction: the gold spans with some dropped, shifted or relabelled.
        let mut pred = Vec::new();
        let mut x = pred_seed;
        for sp in &gold {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            match x >> 62 {
                0 => {}
                1 => pred.push(Span { label: "LOC".into(), ..sp.clone() }),
                2 if sp.end - sp.start > 1 => pred.push(Span { end: sp.end - 1, ..sp.clone() }),
                _ => pred.push(sp.clone()),
            }
        }
        let g = s.encode(len, &gold);
        let p = s.encode(len, &pred);
        let c = conlleval([(g.as_slice(), p.as_slice())]);
        let correct = pred.iter().filter(|sp| gold.contains(sp)).count();
        prop_assert_eq!((c.correct_chunks, c.gold_chunks, c.pred_chunks), (correct, gold.len(), pred.len()));
        let st = strict([(g.as_slice(), p.as_slice())], s);
        prop_assert_eq!((st.correct_chunks, st.gold_chunks, st.pred_chunks), (correct, gold.len(), pred.len()));
    }

    #[test]
    fn lenient_decoding_never_panics_and_spans_are_disjoint(
        raw in proptest::collection::vec((0usize..6, 0usize..2), 0..40), s in scheme()
    ) {
        let prefixes = ["O", "B", "I", "E", "S", "M"];
        let tags: Vec<Tag> = raw.iter().map(|&(p, l)| {
            if p == 0 { Tag::O } else { Tag::parse(&format!("{}-{}", prefixes[p], ["X", "Y"][l])).unwrap() }
        }).collect();
        for spans in [s.decode(&tags), s.decode_strict(&tags)] {
            for w in spans.windows(2) {
                prop_assert!(w[0].end <= w[1].start);
            }
            for sp in &spans {
                prop_assert!(sp.start < sp.end && sp.end <= tags.len());
            }
        }
    }
}
