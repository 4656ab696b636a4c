//! Short windows before whole contexts: a curriculum for extractive QA.
//! For the first `train.answer_window_epochs` epochs each training example
//! is cut to a window of `train.answer_window` tokens that holds its tagged
//! span (the answer) at a random place, different every epoch; later epochs
//! read whole contexts. Short windows make an epoch several times cheaper
//! while the reader learns what answers look like; the whole contexts then
//! teach it to find them among distractors.

use corpus::Example;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ops::Range;

/// The window of `width` tokens (wider when the span is) around the span
/// `first..=last` of a sentence of `len` tokens, placed by `draw` in
/// `[0, choices)`; an untagged sentence (`None`) gets any window.
pub fn window(
    len: usize,
    span: Option<(usize, usize)>,
    width: usize,
    draw: &mut impl FnMut(usize) -> usize,
) -> Range<usize> {
    if len <= width {
        return 0..len;
    }
    // The window's start s: s ≤ first, s + width > last, 0 ≤ s ≤ len − width.
    let (width, lo, hi) = match span {
        Some((first, last)) => {
            let width = width.max(last + 1 - first);
            (width, (last + 1).saturating_sub(width), first.min(len - width))
        }
        None => (width, 0, len - width),
    };
    let start = lo + draw(hi.saturating_sub(lo) + 1);
    start..start + width
}

/// Every example of `train` cut to its window for `epoch`: tags kept (the
/// span is whole in its window), the sentence's index unchanged.
pub fn windows(train: &[Example], o_tag: u32, width: usize, seed: u64, epoch: usize) -> Vec<Example> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC0FF_EE00 ^ ((epoch as u64) << 40));
    let mut draw = |n: usize| rng.random_range(0..n.max(1));
    train
        .iter()
        .map(|e| {
            let tags = e.context().tags.as_deref();
            let span = tags.and_then(|t| {
                let first = t.iter().position(|&y| y != o_tag)?;
                Some((first, t.iter().rposition(|&y| y != o_tag)?))
            });
            let r = window(e.len(), span, width, &mut draw);
            if r.len() == e.len() {
                return e.clone();
            }
            e.window(r.clone(), tags.map(|t| t[r].to_vec()))
        })
        .collect()
}

/// The lengths of the examples once cut (the same for every epoch).
pub fn lengths(train: &[Example], o_tag: u32, width: usize) -> Vec<usize> {
    windows(train, o_tag, width, 0, 0).iter().map(Example::len).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_window_holds_the_span_and_fits_the_sentence() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut draw = |n: usize| rng.random_range(0..n.max(1));
        for len in 1..40 {
            for width in 1..12 {
                for first in 0..len {
                    for last in first..len.min(first + 15) {
                        let r = window(len, Some((first, last)), width, &mut draw);
                        assert!(
                            r.start <= first && r.end > last && r.end <= len,
                            "{len} {width} {first} {last}: {r:?}"
                        );
                        assert_eq!(r.len(), len.min(width.max(last + 1 - first)));
                    }
                }
                let r = window(len, None, width, &mut draw);
                assert_eq!(r.len(), len.min(width));
            }
        }
        // Every placement is possible: span 5..=6 in 20 tokens, width 4.
        let mut starts = std::collections::BTreeSet::new();
        for _ in 0..200 {
            starts.insert(window(20, Some((5, 6)), 4, &mut draw).start);
        }
        assert_eq!(starts.into_iter().collect::<Vec<_>>(), [3, 4, 5]);
    }

    #[test]
    fn cut_examples_keep_their_tags_and_cues_and_change_with_the_epoch() {
        let (vocabs, encoded) = crate::testing::toy_qa_examples(20);
        let o = vocabs.tag_id(&corpus::Tag::O).unwrap();
        let a = windows(&encoded, o, 5, 1, 1);
        let b = windows(&encoded, o, 5, 1, 2);
        assert_eq!(a.len(), encoded.len());
        assert_ne!(a, b, "another epoch, other windows");
        for (w, e) in a.iter().zip(&encoded) {
            let (wt, et) = (w.context().tags.as_ref().unwrap(), e.context().tags.as_ref().unwrap());
            assert_eq!(
                wt.iter().filter(|&&y| y != o).count(),
                et.iter().filter(|&&y| y != o).count(),
                "the span is whole"
            );
            assert_eq!(w.cues().unwrap().len(), w.len() * corpus::qa::cues::CUES);
            assert!(w.len() <= e.len().min(5).max(wt.iter().filter(|&&y| y != o).count()));
        }
        assert_eq!(lengths(&encoded, o, 5), a.iter().map(Example::len).collect::<Vec<_>>());
    }
}
