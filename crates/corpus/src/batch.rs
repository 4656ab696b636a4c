//! Turning sentences into ids, planning length-bucketed batches, padding.
//!
//! A batch never truncates a sentence: it is as long as its longest
//! sentence, and the mask says which positions are real.

use crate::qa::cues::{Cue, CUES};
use crate::tags::Tag;
use crate::vocab::{Vocabs, PAD_ID, UNK_ID};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use crate::shape::{caps_class, CAPS_CLASSES};

/// A sentence as ids.
#[derive(Clone, Debug, PartialEq)]
pub struct Encoded {
    pub words: Vec<u32>,
    /// Character ids per word, at most `max_word_chars` each.
    pub chars: Vec<Vec<u32>>,
    pub caps: Vec<u32>,
    /// Character-bigram ids ([`crate::bigrams`]), one per token; empty when
    /// the vocabulary has no bigrams.
    pub bigrams: Vec<u32>,
    /// Tag ids in the tagger's scheme, when known.
    pub tags: Option<Vec<u32>>,
}

impl Encoded {
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// The tokens `range` of this sentence (without tags).
    pub fn slice(&self, range: std::ops::Range<usize>) -> Encoded {
        Encoded {
            words: self.words[range.clone()].to_vec(),
            chars: self.chars[range.clone()].to_vec(),
            caps: self.caps[range.clone()].to_vec(),
            bigrams: if self.bigrams.is_empty() { Vec::new() } else { self.bigrams[range].to_vec() },
            tags: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// This sentence with the tokens at `positions` replaced by the unknown
    /// word: word `<unk>`, one unknown character, no letters (case class
    /// 1), and the character bigrams that read them unknown too. Tags are
    /// kept. Positions past the end are an error of the caller.
    pub fn erased(&self, positions: &[usize]) -> Encoded {
        let mut e = self.clone();
        for &i in positions {
            e.words[i] = UNK_ID;
            e.chars[i] = vec![UNK_ID];
            e.caps[i] = 1;
            if !e.bigrams.is_empty() {
                // Bigram i pairs token i with the next; bigram i − 1 pairs the previous with it.
                e.bigrams[i] = UNK_ID;
                if i > 0 {
                    e.bigrams[i - 1] = UNK_ID;
                }
            }
        }
        e
    }
}

impl Vocabs {
    /// Encodes tokens, and tags already in the tagger's scheme. Tags the
    /// vocabulary lacks make `tags` `None` (the sentence can still be
    /// tagged and scored, not trained on). Only the first `max_word_chars`
    /// characters of a word feed the character features; every token is kept.
    pub fn encode(&self, tokens: &[String], tags: Option<&[Tag]>, max_word_chars: usize) -> Encoded {
        self.encode_written(tokens, tokens, tags, max_word_chars)
    }

    /// [`Vocabs::encode`] with the character and case features read from
    /// `written`, each token as the original text writes it (a QA context's
    /// lowercased sub-words: [`crate::qa::squad::QaItem::surfaces`]).
    pub fn encode_written(
        &self,
        tokens: &[String],
        written: &[String],
        tags: Option<&[Tag]>,
        max_word_chars: usize,
    ) -> Encoded {
        assert_eq!(tokens.len(), written.len(), "one written form per token");
        let words = tokens.iter().map(|w| self.words.id(&self.normalize.apply(w))).collect();
        let chars = written
            .iter()
            .map(|w| w.chars().take(max_word_chars.max(1)).map(|c| self.chars.id(c.encode_utf8(&mut [0; 4]))).collect())
            .collect();
        let caps = written.iter().map(|w| caps_class(w)).collect();
        let bigrams = self.bigrams.as_ref().map_or_else(Vec::new, |v| crate::bigrams::ids(v, tokens, self.normalize));
        let tags = tags.and_then(|t| t.iter().map(|t| self.tag_id(t)).collect::<Option<Vec<u32>>>());
        Encoded { words, chars, caps, bigrams, tags }
    }

    /// [`Vocabs::encode`] of a sentence, read against its question when it
    /// has one (extractive QA: the sentence is its context).
    pub fn example(
        &self,
        tokens: &[String],
        question: Option<Asked>,
        tags: Option<&[Tag]>,
        max_word_chars: usize,
    ) -> Example {
        match question {
            None => Example::Plain(self.encode(tokens, tags, max_word_chars)),
            Some(a) => {
                assert_eq!(a.cues.len(), tokens.len() * CUES, "one row of cues per context token");
                Example::Asked {
                    context: self.encode_written(tokens, a.written, tags, max_word_chars),
                    question: self.encode(a.question, None, max_word_chars),
                    cues: a.cues.to_vec(),
                }
            }
        }
    }
}

/// What a QA context is read against, for [`Vocabs::example`].
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    /// The question's tokens.
    pub question: &'a [String],
    /// The context's reading cues, `[tokens × CUES]` ([`crate::qa::cues`]).
    pub cues: &'a [u32],
    /// The context's tokens as written in the original text (characters
    /// and case: [`crate::qa::squad::QaItem::surfaces`]).
    pub written: &'a [String],
}

/// What the encoder reads for one sentence: its ids and, for extractive
/// QA, its question's. Plain tagging has no question anywhere; QA carries
/// it in this one variant (and in [`Batch::Asked`] once padded).
#[derive(Clone, Debug, PartialEq)]
pub enum Example {
    Plain(Encoded),
    /// A context to tag, read against its question.
    Asked {
        context: Encoded,
        question: Encoded,
        /// `[context tokens × CUES]` reading cues ([`crate::qa::cues`]).
        cues: Vec<u32>,
    },
}

impl Example {
    /// The sentence that is tagged.
    pub fn context(&self) -> &Encoded {
        match self {
            Example::Plain(e) | Example::Asked { context: e, .. } => e,
        }
    }

    pub fn question(&self) -> Option<&Encoded> {
        match self {
            Example::Plain(_) => None,
            Example::Asked { question, .. } => Some(question),
        }
    }

    /// The context's reading cues, `[len × CUES]` (QA only).
    pub fn cues(&self) -> Option<&[u32]> {
        match self {
            Example::Plain(_) => None,
            Example::Asked { cues, .. } => Some(cues),
        }
    }

    /// [`Self::slice`] keeping the tags: a training window of the sentence.
    pub fn window(&self, range: std::ops::Range<usize>, tags: Option<Vec<u32>>) -> Example {
        let mut w = self.slice(range);
        match &mut w {
            Example::Plain(e) | Example::Asked { context: e, .. } => e.tags = tags,
        }
        w
    }

    /// [`Encoded::erased`] of the tagged sentence; a QA context's erased
    /// tokens also lose their match with the question (reading cues "no
    /// match", "no content-word match", "no letter or digit"; the cues that
    /// describe the rest of the context or the question stay, so an erased
    /// matched word keeps its distance cue "this word").
    pub fn erased(&self, positions: &[usize]) -> Example {
        match self {
            Example::Plain(e) => Example::Plain(e.erased(positions)),
            Example::Asked { context, question, cues } => {
                let mut cues = cues.clone();
                for &i in positions {
                    for cue in [Cue::Match, Cue::Idf, Cue::Shape] {
                        cues[i * CUES + cue as usize] = 1;
                    }
                }
                Example::Asked { context: context.erased(positions), question: question.clone(), cues }
            }
        }
    }

    /// Tokens of the tagged sentence.
    pub fn len(&self) -> usize {
        self.context().len()
    }

    pub fn is_empty(&self) -> bool {
        self.context().is_empty()
    }

    /// The tokens `range` of the tagged sentence (without tags), read
    /// against the whole question.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Example {
        match self {
            Example::Plain(e) => Example::Plain(e.slice(range)),
            Example::Asked { context, question, cues } => Example::Asked {
                context: context.slice(range.clone()),
                question: question.clone(),
                cues: cues[range.start * CUES..range.end * CUES].to_vec(),
            },
        }
    }
}

/// How big a batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchSize {
    /// At most this many sentences.
    Sentences(usize),
    /// At most this many padded tokens (sentences × longest), at least one sentence.
    Tokens(usize),
}

/// Plans batches over sentences of the given lengths. Without a seed,
/// sentences are sorted by length (ties by index) and cut in order. With a
/// seed, sentences are shuffled, sorted by length within pools of 50
/// batches, cut, and the batches shuffled: similar lengths in a batch
/// (little padding) but a different order every epoch. Every sentence
/// appears in exactly one batch.
pub fn plan_batches(lengths: &[usize], size: BatchSize, seed: Option<u64>) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    let mut rng = seed.map(ChaCha8Rng::seed_from_u64);
    let pool = match (&rng, size) {
        (None, _) => lengths.len().max(1),
        (Some(_), BatchSize::Sentences(n)) => 50 * n.max(1),
        (Some(_), BatchSize::Tokens(t)) => {
            let mean = (lengths.iter().sum::<usize>() / lengths.len().max(1)).max(1);
            50 * (t / mean).max(1)
        }
    };
    if let Some(r) = rng.as_mut() {
        order.shuffle(r);
    }
    let mut batches = Vec::new();
    for chunk in order.chunks_mut(pool) {
        chunk.sort_by_key(|&i| lengths[i]);
        let mut cur: Vec<usize> = Vec::new();
        let mut longest = 0;
        for &i in chunk.iter() {
            let l = lengths[i].max(longest);
            let full = match size {
                BatchSize::Sentences(n) => cur.len() >= n.max(1),
                BatchSize::Tokens(t) => !cur.is_empty() && l * (cur.len() + 1) > t,
            };
            if full {
                batches.push(std::mem::take(&mut cur));
                longest = 0;
            }
            longest = longest.max(lengths[i]);
            cur.push(i);
        }
        if !cur.is_empty() {
            batches.push(cur);
        }
    }
    if let Some(r) = rng.as_mut() {
        batches.shuffle(r);
    }
    batches
}

/// A padded batch as flat row-major arrays, ready to become tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct PaddedBatch {
    /// Indices of the sentences, in batch order.
    pub ids: Vec<usize>,
    pub batch: usize,
    /// Longest sentence in the batch.
    pub len: usize,
    /// Longest word (in characters) in the batch, at least 1.
    pub word_len: usize,
    pub lengths: Vec<usize>,
    /// `[batch, len]`, padding = 0.
    pub words: Vec<i64>,
    /// `[batch, len]`, padding = 0.
    pub caps: Vec<i64>,
    /// `[batch, len]` character-bigram ids, padding = 0 (all 0 without bigrams).
    pub bigrams: Vec<i64>,
    /// `[batch, len, word_len]`, padding = 0.
    pub chars: Vec<i64>,
    /// `[batch, len]` tag ids, 0 at padding; `None` unless every sentence has tags.
    pub tags: Option<Vec<i64>>,
    /// `[batch, len]`, true at real tokens.
    pub mask: Vec<bool>,
}

/// Pads the sentences `ids` of `data` into one batch.
pub fn pad(data: &[Encoded], ids: &[usize]) -> PaddedBatch {
    pad_by(ids, |i| &data[i])
}

/// Pads the sentences `at(i)` for `i` in `ids` into one batch.
fn pad_by<'a>(ids: &[usize], at: impl Fn(usize) -> &'a Encoded) -> PaddedBatch {
    let batch = ids.len();
    let len = ids.iter().map(|&i| at(i).len()).max().unwrap_or(0).max(1);
    let word_len = ids.iter().flat_map(|&i| at(i).chars.iter().map(Vec::len)).max().unwrap_or(1).max(1);
    let pad = PAD_ID as i64;
    let mut words = vec![pad; batch * len];
    let mut caps = vec![pad; batch * len];
    let mut bigrams = vec![pad; batch * len];
    let mut chars = vec![pad; batch * len * word_len];
    let mut mask = vec![false; batch * len];
    let all_tagged = ids.iter().all(|&i| at(i).tags.is_some());
    let mut tags = all_tagged.then(|| vec![0i64; batch * len]);
    for (b, &i) in ids.iter().enumerate() {
        let s = at(i);
        for t in 0..s.len() {
            let pos = b * len + t;
            words[pos] = s.words[t] as i64;
            caps[pos] = s.caps[t] as i64;
            bigrams[pos] = s.bigrams.get(t).map_or(pad, |&g| g as i64);
            mask[pos] = true;
            for (c, &ch) in s.chars[t].iter().enumerate() {
                chars[pos * word_len + c] = ch as i64;
            }
            if let (Some(out), Some(st)) = (tags.as_mut(), s.tags.as_ref()) {
                out[pos] = st[t] as i64;
            }
        }
    }
    PaddedBatch {
        ids: ids.to_vec(),
        batch,
        len,
        word_len,
        lengths: ids.iter().map(|&i| at(i).len()).collect(),
        words,
        caps,
        bigrams,
        chars,
        tags,
        mask,
    }
}

/// The smallest of 8, 12, 16, 24, 32, 48, 64, 96, … (the powers of two and
/// the points halfway between them) that holds `n`: the lengths a batch is
/// padded up to where every new tensor shape costs kernel compilations (a
/// GPU: [`Batch::bucketed`]). CoNLL-2003's sentences (up to 124 words) then
/// come in 9 lengths, and a bucket is never more than a third padding.
pub fn bucket(n: usize) -> usize {
    let mut b = 8;
    loop {
        if n <= b {
            return b;
        }
        if n <= b + b / 2 {
            return b + b / 2;
        }
        b *= 2;
    }
}

/// Row-major rows of `from` values each, every row filled up to `to`
/// values with `fill`.
fn widen_rows<T: Copy>(x: &[T], from: usize, to: usize, fill: T) -> Vec<T> {
    x.chunks(from.max(1)).flat_map(|row| row.iter().copied().chain((from..to).map(move |_| fill))).collect()
}

impl PaddedBatch {
    /// The batch padded further, to `len` positions of `word_len`
    /// characters (each at least the batch's own): the same sentences,
    /// more padding.
    pub fn widened(&self, len: usize, word_len: usize) -> PaddedBatch {
        let (len, word_len) = (len.max(self.len), word_len.max(self.word_len));
        let (old_len, old_wl) = (self.len, self.word_len);
        let pad = PAD_ID as i64;
        let rows = |x: &[i64], fill: i64| widen_rows(x, old_len, len, fill);
        let mut chars = vec![pad; self.batch * len * word_len];
        for b in 0..self.batch {
            for t in 0..old_len {
                let from = (b * old_len + t) * old_wl;
                let to = (b * len + t) * word_len;
                chars[to..to + old_wl].copy_from_slice(&self.chars[from..from + old_wl]);
            }
        }
        PaddedBatch {
            ids: self.ids.clone(),
            batch: self.batch,
            len,
            word_len,
            lengths: self.lengths.clone(),
            words: rows(&self.words, pad),
            caps: rows(&self.caps, pad),
            bigrams: rows(&self.bigrams, pad),
            chars,
            tags: self.tags.as_deref().map(|t| rows(t, 0)),
            mask: widen_rows(&self.mask, old_len, len, false),
        }
    }

    /// The batch cut into `parts` batches of consecutive sentences (sizes
    /// differing by at most one; fewer parts when there are fewer
    /// sentences), each trimmed to its own longest sentence and word: what
    /// [`pad`] gives for those sentences, with this batch's token ids (word
    /// dropout included).
    pub fn split(&self, parts: usize) -> Vec<PaddedBatch> {
        let parts = parts.clamp(1, self.batch.max(1));
        let (base, extra) = (self.batch / parts, self.batch % parts);
        let mut start = 0;
        (0..parts)
            .map(|k| {
                let end = start + base + usize::from(k < extra);
                let part = self.rows(start..end);
                start = end;
                part
            })
            .collect()
    }

    /// Sentences `rows` of the batch, trimmed to their longest sentence and word.
    fn rows(&self, rows: std::ops::Range<usize>) -> PaddedBatch {
        let (old_len, old_wl) = (self.len, self.word_len);
        let lengths = self.lengths[rows.clone()].to_vec();
        let len = lengths.iter().copied().max().unwrap_or(0).max(1);
        // A word's characters are contiguous from position 0; padding is PAD_ID.
        let chars_of = |at: usize| {
            let word = &self.chars[at * old_wl..(at + 1) * old_wl];
            word.iter().rposition(|&c| c != PAD_ID as i64).map_or(0, |p| p + 1)
        };
        let word_len = rows
            .clone()
            .flat_map(|b| (0..self.lengths[b]).map(move |t| b * old_len + t))
            .map(chars_of)
            .max()
            .unwrap_or(1)
            .max(1);
        let take =
            |x: &[i64]| -> Vec<i64> { rows.clone().flat_map(|b| x[b * old_len..b * old_len + len].to_vec()).collect() };
        let chars = rows
            .clone()
            .flat_map(|b| (0..len).map(move |t| b * old_len + t))
            .flat_map(|at| self.chars[at * old_wl..at * old_wl + word_len].to_vec())
            .collect();
        PaddedBatch {
            ids: self.ids[rows.clone()].to_vec(),
            batch: rows.len(),
            len,
            word_len,
            lengths,
            words: take(&self.words),
            caps: take(&self.caps),
            bigrams: take(&self.bigrams),
            chars,
            tags: self.tags.as_deref().map(take),
            mask: rows.clone().flat_map(|b| self.mask[b * old_len..b * old_len + len].to_vec()).collect(),
        }
    }
}

/// A padded batch of [`Example`]s: the sentences, and for extractive QA
/// their questions padded into a batch of their own (same order).
#[derive(Clone, Debug, PartialEq)]
pub enum Batch {
    Plain(PaddedBatch),
    Asked {
        context: PaddedBatch,
        question: PaddedBatch,
        /// `[batch × len × CUES]` reading cues of the context tokens, 0 at padding.
        cues: Vec<i64>,
    },
}

impl Batch {
    /// Pads the examples `ids` of `data` into one batch (with questions when
    /// any of them has one; a plain one then gets an empty question row).
    pub fn pad(data: &[Example], ids: &[usize]) -> Batch {
        let context = pad_by(ids, |i| data[i].context());
        if ids.iter().all(|&i| data[i].question().is_none()) {
            return Batch::Plain(context);
        }
        let empty = Encoded { words: Vec::new(), chars: Vec::new(), caps: Vec::new(), bigrams: Vec::new(), tags: None };
        // A question batch's ids number its rows.
        let rows: Vec<usize> = (0..ids.len()).collect();
        let question = pad_by(&rows, |k| data[ids[k]].question().unwrap_or(&empty));
        let mut cues = vec![0i64; context.batch * context.len * CUES];
        for (b, &i) in ids.iter().enumerate() {
            let row = &mut cues[b * context.len * CUES..];
            for (to, &c) in row.iter_mut().zip(data[i].cues().unwrap_or(&[])) {
                *to = c as i64;
            }
        }
        Batch::Asked { context, question, cues }
    }

    /// The padded sentences that are tagged.
    pub fn context(&self) -> &PaddedBatch {
        match self {
            Batch::Plain(b) | Batch::Asked { context: b, .. } => b,
        }
    }

    pub fn context_mut(&mut self) -> &mut PaddedBatch {
        match self {
            Batch::Plain(b) | Batch::Asked { context: b, .. } => b,
        }
    }

    /// Sentences in the batch.
    pub fn size(&self) -> usize {
        self.context().batch
    }

    /// The batch padded up to [`bucket`] lengths: sentences and words (and
    /// questions) to the bucket of their longest, so that the batches of a
    /// run come in a few shapes. What a GPU backend runs
    /// (`SeqBackend::shape_buckets`), where each new shape compiles kernels;
    /// padding never changes what the model computes for a real token.
    pub fn bucketed(&self) -> Batch {
        let widen = |b: &PaddedBatch| b.widened(bucket(b.len), bucket(b.word_len));
        match self {
            Batch::Plain(b) => Batch::Plain(widen(b)),
            Batch::Asked { context: old, question, cues } => {
                let context = widen(old);
                let cues = widen_rows(cues, old.len * CUES, context.len * CUES, 0);
                Batch::Asked { context, question: widen(question), cues }
            }
        }
    }

    /// [`PaddedBatch::split`], questions cut along with their sentences.
    pub fn split(&self, parts: usize) -> Vec<Batch> {
        match self {
            Batch::Plain(b) => b.split(parts).into_iter().map(Batch::Plain).collect(),
            Batch::Asked { context: whole, question, cues } => {
                let mut first = 0;
                whole
                    .split(parts)
                    .into_iter()
                    .zip(question.split(parts))
                    .map(|(context, mut question)| {
                        question.ids = (0..question.batch).collect();
                        let (old, len) = (whole.len * CUES, context.len * CUES);
                        let cues = (first..first + context.batch)
                            .flat_map(|b| cues[b * old..b * old + len].iter().copied())
                            .collect();
                        first += context.batch;
                        Batch::Asked { context, question, cues }
                    })
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A QA context: words from the (lowercased) pieces, characters and
    /// case from the pieces as written.
    #[test]
    fn asked_contexts_read_characters_and_case_as_written() {
        let pieces: Vec<String> = ["paris", "is"].map(String::from).to_vec();
        let written: Vec<String> = ["Paris", "is"].map(String::from).to_vec();
        let text = [written.clone(), pieces.clone()];
        let v = Vocabs::build(
            text.iter().map(|s| s.as_slice()),
            &[],
            Default::default(),
            1,
            crate::Scheme::Iob2,
            crate::Scheme::Iob2,
        );
        let cues = vec![0; 2 * CUES];
        let asked = Asked { question: &pieces[1..], cues: &cues, written: &written };
        let Example::Asked { context, question, .. } = v.example(&pieces, Some(asked), None, 20) else {
            panic!("a question makes an asked example")
        };
        assert_eq!(context.words, v.encode(&pieces, None, 20).words);
        assert_eq!(context.chars[0][0], v.chars.id("P"));
        assert_ne!(v.chars.id("P"), v.chars.id("p"));
        assert_eq!(context.caps, [caps_class("Paris"), caps_class("is")]);
        assert_eq!(question, v.encode(&pieces[1..], None, 20));
    }

    /// Erasing reads a token as the unknown word everywhere it shows, and
    /// touches nothing else: not the other tokens, their bigrams beyond the
    /// neighbour's pair, the tags, the question, or the context's cues.
    #[test]
    fn erased_tokens_read_as_the_unknown_word_and_nothing_else_changes() {
        let e = Encoded {
            words: vec![5, 6, 7, 8],
            chars: vec![vec![2, 3], vec![4], vec![5, 6, 7], vec![8]],
            caps: vec![4, 2, 3, 2],
            bigrams: vec![10, 11, 12, 13],
            tags: Some(vec![1, 2, 0, 0]),
        };
        let x = e.erased(&[2]);
        assert_eq!(x.words, [5, 6, UNK_ID, 8]);
        assert_eq!(x.chars, [vec![2, 3], vec![4], vec![UNK_ID], vec![8]]);
        assert_eq!(x.caps, [4, 2, 1, 2]);
        assert_eq!(x.bigrams, [10, UNK_ID, UNK_ID, 13]);
        assert_eq!(x.tags, e.tags);
        assert_eq!(e.erased(&[0]).bigrams, [UNK_ID, 11, 12, 13], "the first token has no bigram before it");
        assert_eq!(e.erased(&[]), e);
        let cues: Vec<u32> = (0..4 * CUES as u32).map(|c| 2 + c % 3).collect();
        let asked = Example::Asked { context: e.clone(), question: e.slice(0..2), cues: cues.clone() };
        let Example::Asked { context, question, cues: got } = asked.erased(&[1, 3]) else { unreachable!() };
        assert_eq!((context, question), (e.erased(&[1, 3]), e.slice(0..2)));
        for (k, (&was, &now)) in cues.iter().zip(&got).enumerate() {
            let (token, cue) = (k / CUES, k % CUES);
            let lost = [Cue::Match as usize, Cue::Idf as usize, Cue::Shape as usize].contains(&cue);
            assert_eq!(now, if [1, 3].contains(&token) && lost { 1 } else { was }, "token {token}, cue {cue}");
        }
    }

    #[test]
    fn caps_classes() {
        assert_eq!(caps_class("123"), 1);
        assert_eq!(caps_class("中国"), 1);
        assert_eq!(caps_class("john"), 2);
        assert_eq!(caps_class("EU"), 3);
        assert_eq!(caps_class("John"), 4);
        assert_eq!(caps_class("McDonald"), 5);
    }

    /// Splitting a padded batch gives what padding each part directly
    /// gives: trimmed lengths, word lengths, tags and questions included.
    #[test]
    fn split_parts_equal_padding_the_parts() {
        let word = |n: usize| (1..=n as u32).collect::<Vec<u32>>();
        let sentence = |len: usize, long_word: usize, question: bool| {
            let context = Encoded {
                words: (0..len as u32).map(|w| w + 2).collect(),
                chars: (0..len).map(|t| word(if t == 0 { long_word } else { 2 })).collect(),
                caps: vec![1; len],
                bigrams: (0..len as u32).map(|t| 10 + t).collect(),
                tags: Some((0..len as u32).map(|t| t % 3).collect()),
            };
            let q = Encoded {
                words: vec![5; len + 1],
                chars: vec![word(3); len + 1],
                caps: vec![2; len + 1],
                bigrams: Vec::new(),
                tags: None,
            };
            if question {
                let cues = (0..len * CUES).map(|k| (k % 4 + len) as u32).collect();
                Example::Asked { context, question: q, cues }
            } else {
                Example::Plain(context)
            }
        };
        for question in [false, true] {
            let data: Vec<Example> =
                [(3, 2), (7, 9), (1, 1), (4, 4), (2, 6)].iter().map(|&(l, w)| sentence(l, w, question)).collect();
            let ids = [4, 0, 2, 1, 3];
            let whole = Batch::pad(&data, &ids);
            assert_eq!(matches!(whole, Batch::Asked { .. }), question);
            for parts in 1..=6 {
                let split = whole.split(parts);
                assert_eq!(split.len(), parts.min(ids.len()));
                let mut start = 0;
                for part in &split {
                    let direct = Batch::pad(&data, &ids[start..start + part.size()]);
                    assert_eq!(part, &direct, "{parts} parts, from {start}");
                    start += part.size();
                }
                assert_eq!(start, ids.len());
                let sizes: Vec<usize> = split.iter().map(Batch::size).collect();
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
            }
        }
    }

    #[test]
    fn every_sentence_in_exactly_one_batch() {
        let lengths: Vec<usize> = (0..1000).map(|i| 1 + (i * 37) % 120).collect();
        for size in [BatchSize::Sentences(32), BatchSize::Tokens(500)] {
            for seed in [None, Some(7)] {
                let b = plan_batches(&lengths, size, seed);
                let mut all: Vec<usize> = b.iter().flatten().copied().collect();
                all.sort();
                assert_eq!(all, (0..1000).collect::<Vec<_>>());
                if let BatchSize::Tokens(t) = size {
                    for batch in &b {
                        let longest = batch.iter().map(|&i| lengths[i]).max().unwrap();
                        assert!(batch.len() == 1 || longest * batch.len() <= t);
                    }
                }
            }
        }
    }

    #[test]
    fn a_sentence_longer_than_the_token_budget_gets_its_own_batch() {
        let b = plan_batches(&[3, 5000, 4], BatchSize::Tokens(100), None);
        assert_eq!(b, vec![vec![0, 2], vec![1]]);
    }

    #[test]
    fn seeded_plans_are_deterministic_and_differ_by_seed() {
        let lengths: Vec<usize> = (0..300).map(|i| 1 + i % 17).collect();
        let a = plan_batches(&lengths, BatchSize::Sentences(8), Some(1));
        assert_eq!(a, plan_batches(&lengths, BatchSize::Sentences(8), Some(1)));
        assert_ne!(a, plan_batches(&lengths, BatchSize::Sentences(8), Some(2)));
    }

    #[test]
    fn padding_and_mask() {
        let data = vec![
            Encoded {
                words: vec![5, 6, 7],
                chars: vec![vec![2], vec![3, 4], vec![2]],
                caps: vec![2, 2, 2],
                bigrams: vec![11, 12, 13],
                tags: Some(vec![1, 2, 0]),
            },
            Encoded {
                words: vec![8],
                chars: vec![vec![9, 9, 9]],
                caps: vec![4],
                bigrams: vec![14],
                tags: Some(vec![3]),
            },
        ];
        let b = pad(&data, &[1, 0]);
        assert_eq!((b.batch, b.len, b.word_len), (2, 3, 3));
        assert_eq!(b.words, vec![8, 0, 0, 5, 6, 7]);
        assert_eq!(b.bigrams, vec![14, 0, 0, 11, 12, 13]);
        assert_eq!(b.mask, vec![true, false, false, true, true, true]);
        assert_eq!(b.tags.unwrap(), vec![3, 0, 0, 1, 2, 0]);
        assert_eq!(&b.chars[9..15], &[2, 0, 0, 3, 4, 0]);
        assert_eq!(b.lengths, vec![1, 3]);
    }

    #[test]
    fn buckets_are_few_and_never_more_than_a_third_padding() {
        let cases =
            [(0, 8), (1, 8), (8, 8), (9, 12), (12, 12), (13, 16), (17, 24), (25, 32), (33, 48), (124, 128), (129, 192)];
        for (n, b) in cases {
            assert_eq!(bucket(n), b, "bucket({n})");
        }
        for n in 1..5000 {
            let b = bucket(n);
            assert!(b >= n && (b == 8 || 2 * b <= 3 * n), "bucket({n}) = {b}");
        }
        let shapes: std::collections::BTreeSet<usize> = (1..=124).map(bucket).collect();
        assert_eq!(shapes.len(), 9, "{shapes:?}");
    }

    fn encoded(words: &[u32], word_chars: &[usize], tagged: bool) -> Encoded {
        Encoded {
            words: words.to_vec(),
            chars: word_chars
                .iter()
                .enumerate()
                .map(|(k, &n)| (0..n as u32).map(|c| 2 + c + k as u32).collect())
                .collect(),
            caps: words.iter().map(|w| w % 3 + 1).collect(),
            bigrams: words.iter().map(|w| w + 100).collect(),
            tags: tagged.then(|| words.iter().map(|w| w % 4).collect()),
        }
    }

    /// Bucketing only adds padding: trimmed back (`split(1)` trims a batch to
    /// its longest sentence and word), the batch is the one `pad` gave.
    #[test]
    fn a_bucketed_batch_is_the_batch_with_more_padding() {
        let data = vec![
            Example::Plain(encoded(&[5, 6, 7, 8, 9, 10, 11, 12, 13], &[2, 9, 1, 1, 1, 1, 1, 1, 1], true)),
            Example::Plain(encoded(&[8], &[3], true)),
        ];
        let b = Batch::pad(&data, &[1, 0]);
        let wide = b.bucketed();
        let w = wide.context();
        assert_eq!((w.batch, w.len, w.word_len), (2, 12, 12));
        assert_eq!(w.mask.iter().filter(|&&m| m).count(), 10);
        assert_eq!(w.words.len(), 24);
        assert_eq!(w.chars.len(), 2 * 12 * 12);
        assert_eq!(wide.split(1), vec![b.clone()]);
        assert_eq!(wide.bucketed(), wide, "a bucketed batch is its own bucket");

        let asked = |words: &[u32], cue: u32| Example::Asked {
            context: encoded(words, &vec![2; words.len()], true),
            question: encoded(&[3, 4, 5], &[1, 2, 13], false),
            cues: (0..words.len() * CUES).map(|k| cue + k as u32).collect(),
        };
        let qa = vec![asked(&[5, 6, 7], 10), asked(&[5; 14], 50)];
        let b = Batch::pad(&qa, &[0, 1]);
        let wide = b.bucketed();
        let Batch::Asked { context, question, cues } = &wide else { panic!("a QA batch stays one") };
        assert_eq!((context.len, context.word_len, question.len, question.word_len), (16, 8, 8, 16));
        assert_eq!(cues.len(), 2 * 16 * CUES);
        assert_eq!(wide.split(1), vec![b]);
    }
}
