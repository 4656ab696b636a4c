//! Sliding windows over long sequences: a sentence longer than `max_len` is
//! cut into overlapping windows that start every `stride` tokens (the last
//! one ends at the sentence's end), each token is owned by the window in
//! which it is most central, and no token is ever dropped.

use std::ops::Range;

/// The windows over `len` tokens. `stride` is clamped to `1..=max_len`, so
/// windows always overlap or touch.
pub fn windows(len: usize, max_len: usize, stride: usize) -> Vec<Range<usize>> {
    let max_len = max_len.max(1);
    if len <= max_len {
        return vec![0..len];
    }
    let stride = stride.clamp(1, max_len);
    let mut out = Vec::new();
    let mut start = 0;
    while start + max_len < len {
        out.push(start..start + max_len);
        start += stride;
    }
    out.push(len - max_len..len);
    out
}

/// For each token, the index of the window in which it is most central (the
/// largest distance to that window's nearer edge; ties go to the earlier
/// window). Owners never decrease along the sentence.
pub fn owners(len: usize, windows: &[Range<usize>]) -> Vec<usize> {
    (0..len)
        .map(|t| {
            let mut best = (0usize, i64::MIN);
            for (i, w) in windows.iter().enumerate() {
                if w.contains(&t) {
                    let margin = (t - w.start).min(w.end - 1 - t) as i64;
                    if margin > best.1 {
                        best = (i, margin);
                    }
                }
            }
            assert!(best.1 >= 0, "token {t} is in no window");
            best.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_sequences_are_one_window() {
        assert_eq!(windows(5, 10, 3), vec![0..5]);
        assert_eq!(owners(5, &windows(5, 10, 3)), vec![0; 5]);
    }

    #[test]
    fn windows_overlap_and_the_last_ends_at_the_end() {
        assert_eq!(windows(10, 4, 3), vec![0..4, 3..7, 6..10]);
        assert_eq!(windows(11, 4, 3), vec![0..4, 3..7, 6..10, 7..11]);
        // Each token goes to the window where it is furthest from an edge.
        assert_eq!(owners(10, &windows(10, 4, 3)), vec![0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
    }

    proptest! {
        #[test]
        fn no_token_is_lost(len in 1usize..400, max_len in 1usize..60, stride in 0usize..80) {
            let w = windows(len, max_len, stride);
            let own = owners(len, &w);
            prop_assert_eq!(own.len(), len);
            for (t, &o) in own.iter().enumerate() {
                prop_assert!(w[o].contains(&t));
            }
            prop_assert!(own.windows(2).all(|p| p[0] <= p[1]));
            prop_assert!(w.iter().all(|r| r.len() <= max_len.max(1)));
            prop_assert_eq!(w.last().unwrap().end, len);
        }
    }
}
