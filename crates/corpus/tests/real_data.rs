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

#[test]
fn squad_dev_counts_match_its_readme_and_split_by_article() {
    let Some(dir) = shared("squad11") else { return };
    let f = corpus::qa::squad::SquadFile::read(&dir.join("dev-v1.1.json")).unwrap();
    let s = f.stats();
    assert_eq!((s.articles, s.paragraphs, s.questions, s.answers), (48, 2067, 10570, 34726));
    let (train, held) = f.split_by_article(10);
    assert_eq!((train.data.len(), held.data.len()), (38, 10));
    assert_eq!(train.stats().questions + held.stats().questions, 10570);
    // Every gold answer scores 1 against itself, under the official normalisation.
    let golds: Vec<(String, Vec<String>)> = f
        .data
        .iter()
        .flat_map(|a| &a.paragraphs)
        .flat_map(|p| &p.qas)
        .map(|q| (q.answers[0].text.clone(), q.answers.iter().map(|a| a.text.clone()).collect()))
        .collect();
    let score = corpus::qa::squad::qa_score(golds.iter().map(|(p, g)| (p.as_str(), g.as_slice())));
    assert_eq!((score.exact_match, score.f1, score.questions), (1.0, 1.0, 10570));
    // Every offset of the official file is right: nothing to repair.
    assert_eq!(f.repaired, 0);
    // Train / dev / test: 34 / 4 / 10 articles, test the same 10 as above.
    let (train, dev, test) = f.split_train_dev_test(10, 4);
    let questions = |s: &corpus::qa::squad::SquadFile| s.stats().questions;
    assert_eq!((train.data.len(), dev.data.len(), test.data.len()), (34, 4, 10));
    assert_eq!((questions(&train), questions(&dev), questions(&test)), (7265, 837, 2468));
    assert_eq!(test, held);
    let contexts = f.data.iter().flat_map(|a| &a.paragraphs).map(|p| p.context.as_str());
    assert_eq!(corpus::qa::metric::QaMetric::detect(contexts).0, corpus::qa::metric::QaMetric::Squad);
}
