//! The readers on the real datasets beside the checkout, when present
//! (`../shared/datasets`); skipped with a message otherwise.

use corpus::stats::stats;
use corpus::{Dataset, Scheme};
use std::path::PathBuf;

fn shared(name: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets").join(name);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} not present", dir.display());
        None
    }
}

#[test]
fn conll2003_counts_match_its_readme() {
    let Some(dir) = shared("conll2003") else { return };
    let ds = Dataset::load(&dir).unwrap();
    assert_eq!(ds.scheme, Scheme::Iob1);
    let s = stats(&ds);
    let expect =
        [("train", 14041, 203621, 23499, 113), ("dev", 3250, 51362, 5942, 109), ("test", 3453, 46435, 5648, 124)];
    for (split, sentences, tokens, entities, longest) in expect {
        let st = &s.splits[split];
        assert_eq!(st.sentences, sentences, "{split}");
        assert_eq!(st.tokens, tokens, "{split}");
        assert_eq!(st.entities.values().sum::<usize>(), entities, "{split}");
        assert_eq!(st.longest, longest, "{split}");
    }
    assert_eq!(s.splits["train"].entities["PER"], 6600);
    assert_eq!(s.splits["test"].entities["MISC"], 702);
    // Documents are metadata: 946 documents in train.
    let train = ds.split(corpus::SplitName::Train).unwrap();
    assert_eq!(train.sentences.last().unwrap().doc, 946);
}

#[test]
fn resume_ner_counts_match_its_readme() {
    let Some(dir) = shared("resume-ner") else { return };
    let ds = Dataset::load(&dir).unwrap();
    assert_eq!(ds.scheme, Scheme::Bmes);
    let s = stats(&ds);
    let expect = [("train", 3821, 124099, 178), ("dev", 463, 13890, 178), ("test", 477, 15100, 167)];
    for (split, sentences, tokens, longest) in expect {
        let st = &s.splits[split];
        assert_eq!((st.sentences, st.tokens, st.longest), (sentences, tokens, longest), "{split}");
    }
    // The README: 1,497 dev and 1,630 test entities; train has two ORG spans
    // cut by a sentence break, which a lenient decoder counts as 4 (13,440).
    assert_eq!(s.splits["dev"].entities.values().sum::<usize>(), 1497);
    assert_eq!(s.splits["test"].entities.values().sum::<usize>(), 1630);
    assert_eq!(s.splits["train"].entities.values().sum::<usize>(), 13440);
    assert_eq!(s.splits["train"].entities["ORG"], 4613);
    // Strict BMES decoding drops the 4 fragments: 13,436 well-formed spans.
    let train = ds.split(corpus::SplitName::Train).unwrap();
    let strict: usize = train.sentences.iter().map(|s| Scheme::Bmes.decode_strict(&s.tags).len()).sum();
    assert_eq!(strict, 13436);
}
