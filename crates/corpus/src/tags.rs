//! Tags, tag schemes and spans.
//!
//! A tag is `O` or `PREFIX-TYPE` (prefix one of B, I, E, S, M). A scheme says
//! which prefixes exist and which tag may follow which. Everything else is
//! derived from that: span decoding (lenient, as conlleval does, and strict),
//! encoding spans back into tags, lossless conversion between schemes, the
//! legal transitions a CRF may use, and detection of the scheme of a file.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The part of a tag before the hyphen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Prefix {
    B,
    I,
    E,
    S,
    M,
}

impl Prefix {
    fn from_str(s: &str) -> Option<Prefix> {
        Some(match s {
            "B" => Prefix::B,
            "I" => Prefix::I,
            "E" => Prefix::E,
            "S" => Prefix::S,
            "M" => Prefix::M,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Prefix::B => "B",
            Prefix::I => "I",
            Prefix::E => "E",
            Prefix::S => "S",
            Prefix::M => "M",
        }
    }
}

/// One tag: outside, or a prefix and an entity type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tag {
    O,
    Chunk { prefix: Prefix, label: String },
}

/// What a tag must look like, for error messages.
pub const TAG_FORMAT: &str = "`O` or PREFIX-TYPE with PREFIX one of B, I, E, S, M and a non-empty TYPE";

impl Tag {
    pub fn new(prefix: Prefix, label: &str) -> Tag {
        Tag::Chunk { prefix, label: label.to_string() }
    }

    /// Parses `O` or `PREFIX-TYPE`. The type is everything after the first
    /// hyphen, so types may contain hyphens (`B-creative-work`).
    pub fn parse(s: &str) -> Result<Tag, String> {
        if s == "O" {
            return Ok(Tag::O);
        }
        let bad = || format!("expected a tag ({TAG_FORMAT}), found `{s}`");
        let (prefix, label) = s.split_once('-').ok_or_else(bad)?;
        let prefix = Prefix::from_str(prefix).ok_or_else(bad)?;
        if label.is_empty() {
            return Err(bad());
        }
        Ok(Tag::Chunk { prefix, label: label.to_string() })
    }

    pub fn prefix(&self) -> Option<Prefix> {
        match self {
            Tag::O => None,
            Tag::Chunk { prefix, .. } => Some(*prefix),
        }
    }

    pub fn label(&self) -> Option<&str> {
        match self {
            Tag::O => None,
            Tag::Chunk { label, .. } => Some(label),
        }
    }

    /// The (prefix, type) pair as conlleval sees it: `O` has prefix "O" and
    /// an empty type.
    pub(crate) fn conll_parts(&self) -> (&str, &str) {
        match self {
            Tag::O => ("O", ""),
            Tag::Chunk { prefix, label } => (prefix.as_str(), label),
        }
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tag::O => f.write_str("O"),
            Tag::Chunk { prefix, label } => write!(f, "{}-{}", prefix.as_str(), label),
        }
    }
}

impl FromStr for Tag {
    type Err = String;
    fn from_str(s: &str) -> Result<Tag, String> {
        Tag::parse(s)
    }
}

/// A labelled span of tokens, `start..end` (end exclusive).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub label: String,
}

/// A tag scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scheme {
    /// IOB1 (CoNLL-2003 as distributed): `I-X` starts a chunk, `B-X` only
    /// separates two adjacent chunks of the same type.
    #[serde(rename = "iob1", alias = "IOB1")]
    Iob1,
    /// IOB2, also called BIO: every chunk starts with `B-X`.
    #[serde(rename = "bio", alias = "iob2", alias = "BIO", alias = "IOB2")]
    Iob2,
    /// BIOES (IOBES): `S-X` single-token chunks, `B-X I-X* E-X` longer ones.
    #[serde(rename = "bioes", alias = "iobes", alias = "BIOES", alias = "IOBES")]
    Bioes,
    /// BMES (Chinese segmentation style): like BIOES with `M` for `I`.
    #[serde(rename = "bmes", alias = "BMES")]
    Bmes,
}

pub const ALL_SCHEMES: [Scheme; 4] = [Scheme::Iob2, Scheme::Iob1, Scheme::Bioes, Scheme::Bmes];

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheme::Iob1 => "IOB1",
            Scheme::Iob2 => "BIO",
            Scheme::Bioes => "BIOES",
            Scheme::Bmes => "BMES",
        })
    }
}

impl FromStr for Scheme {
    type Err = String;
    fn from_str(s: &str) -> Result<Scheme, String> {
        match s.to_ascii_lowercase().as_str() {
            "iob1" => Ok(Scheme::Iob1),
            "iob2" | "bio" => Ok(Scheme::Iob2),
            "bioes" | "iobes" => Ok(Scheme::Bioes),
            "bmes" => Ok(Scheme::Bmes),
            _ => Err(format!("unknown tag scheme `{s}`: expected one of iob1, bio (iob2), bioes (iobes), bmes")),
        }
    }
}

impl Scheme {
    /// The prefixes this scheme uses.
    pub fn prefixes(self) -> &'static [Prefix] {
        match self {
            Scheme::Iob1 | Scheme::Iob2 => &[Prefix::B, Prefix::I],
            Scheme::Bioes => &[Prefix::B, Prefix::I, Prefix::E, Prefix::S],
            Scheme::Bmes => &[Prefix::B, Prefix::M, Prefix::E, Prefix::S],
        }
    }

    /// The prefix used for tokens inside a chunk, neither first nor last.
    fn inside(self) -> Prefix {
        match self {
            Scheme::Bmes => Prefix::M,
            _ => Prefix::I,
        }
    }

    /// Whether `tag` may appear at all in this scheme.
    pub fn admits(self, tag: &Tag) -> bool {
        match tag.prefix() {
            None => true,
            Some(p) => self.prefixes().contains(&p),
        }
    }

    /// Every tag of this scheme for the given entity types: `O` first, then
    /// per type the prefixes in scheme order.
    pub fn tag_set(self, labels: &[String]) -> Vec<Tag> {
        let mut tags = vec![Tag::O];
        for label in labels {
            for &p in self.prefixes() {
                tags.push(Tag::new(p, label));
            }
        }
        tags
    }

    /// Encodes sorted, non-overlapping spans as tags of this scheme.
    pub fn encode(self, len: usize, spans: &[Span]) -> Vec<Tag> {
        let mut tags = vec![Tag::O; len];
        let mut prev: Option<&Span> = None;
        for span in spans {
            debug_assert!(span.start < span.end && span.end <= len);
            let n = span.end - span.start;
            let l = span.label.as_str();
            for (k, t) in tags[span.start..span.end].iter_mut().enumerate() {
                let p = match self {
                    Scheme::Iob1 => {
                        let touches_same = prev.is_some_and(|q| q.end == span.start && q.label == span.label);
                        if k == 0 && touches_same {
                            Prefix::B
                        } else {
                            Prefix::I
                        }
                    }
                    Scheme::Iob2 => {
                        if k == 0 {
                            Prefix::B
                        } else {
                            Prefix::I
                        }
                    }
                    Scheme::Bioes | Scheme::Bmes => {
                        if n == 1 {
                            Prefix::S
                        } else if k == 0 {
                            Prefix::B
                        } else if k == n - 1 {
                            Prefix::E
                        } else {
                            self.inside()
                        }
                    }
                };
                *t = Tag::new(p, l);
            }
            prev = Some(span);
        }
        tags
    }

    /// Lenient span decoding, as scorers do it. For IOB1 and BIO this is
    /// conlleval's chunk rules exactly (an `I-X` after `O` starts a chunk, a
    /// type change starts a chunk). For BIOES and BMES it is conlleval's rules
    /// extended for `S-` and `E-` the way seqeval's default mode does (`E-`
    /// and `S-` end a chunk, `B-` and `S-` start one; `M-` reads as `I-`).
    pub fn decode(self, tags: &[Tag]) -> Vec<Span> {
        match self {
            Scheme::Iob1 | Scheme::Iob2 => decode_with(tags, conll_start, conll_end),
            Scheme::Bioes | Scheme::Bmes => decode_with(tags, ext_start, ext_end),
        }
    }

    /// Strict decoding: only chunks whose tag sequence is well formed under
    /// this scheme count (BIO: `B I*`; IOB1: `I I*`, or `B I*` right after a
    /// chunk of the same type; BIOES/BMES: `S` or `B I* E`).
    pub fn decode_strict(self, tags: &[Tag]) -> Vec<Span> {
        let mut spans = Vec::new();
        let mut open: Option<(usize, &str)> = None;
        for (i, tag) in tags.iter().enumerate() {
            let prev = if i == 0 { None } else { Some(&tags[i - 1]) };
            // Does `tag` legally continue the open chunk?
            if let Some((start, label)) = open {
                let continues = self.allowed(prev, Some(tag))
                    && tag.label() == Some(label)
                    && matches!(tag.prefix(), Some(p) if p == self.inside() || p == Prefix::E)
                    && !(self == Scheme::Iob1 && tag.prefix() == Some(Prefix::B));
                if continues {
                    if tag.prefix() == Some(Prefix::E) {
                        spans.push(Span { start, end: i + 1, label: label.to_string() });
                        open = None;
                    }
                    continue;
                }
                // The open chunk ends before `tag`. In BIO/IOB1 that is a
                // complete chunk; in BIOES/BMES a chunk must end on `E`.
                if matches!(self, Scheme::Iob1 | Scheme::Iob2) {
                    spans.push(Span { start, end: i, label: label.to_string() });
                }
                open = None;
            }
            let Some(label) = tag.label() else { continue };
            let begins = match (self, tag.prefix().unwrap()) {
                (Scheme::Iob2, Prefix::B) => true,
                (Scheme::Iob1, Prefix::I) => true,
                (Scheme::Iob1, Prefix::B) => prev.and_then(Tag::label) == Some(label),
                (Scheme::Bioes | Scheme::Bmes, Prefix::B) => true,
                (Scheme::Bioes | Scheme::Bmes, Prefix::S) => {
                    spans.push(Span { start: i, end: i + 1, label: label.to_string() });
                    false
                }
                _ => false,
            };
            if begins {
                open = Some((i, label));
            }
        }
        if let Some((start, label)) = open {
            if matches!(self, Scheme::Iob1 | Scheme::Iob2) {
                spans.push(Span { start, end: tags.len(), label: label.to_string() });
            }
        }
        spans
    }

    /// Whether the scheme allows `to` right after `from`; `None` stands for
    /// the sentence start (as `from`) or end (as `to`). This is the single
    /// source of the CRF's transition constraints, in the spirit of
    /// AllenNLP's `allowed_transitions`.
    pub fn allowed(self, from: Option<&Tag>, to: Option<&Tag>) -> bool {
        if let Some(t) = from {
            if !self.admits(t) {
                return false;
            }
        }
        if let Some(t) = to {
            if !self.admits(t) {
                return false;
            }
        }
        let same = |a: &Tag, b: &Tag| a.label().is_some() && a.label() == b.label();
        let fp = from.map(Tag::prefix);
        let tp = to.map(Tag::prefix);
        use Prefix::*;
        match self {
            Scheme::Iob1 => match (fp, tp) {
                // B-X only separates two chunks of the same type.
                (_, Some(Some(B))) => matches!(fp, Some(Some(B | I))) && same(from.unwrap(), to.unwrap()),
                _ => true,
            },
            Scheme::Iob2 => match tp {
                Some(Some(I)) => matches!(fp, Some(Some(B | I))) && same(from.unwrap(), to.unwrap()),
                _ => true,
            },
            Scheme::Bioes | Scheme::Bmes => {
                let inside = self.inside();
                // Inside a chunk (after B or inside): only inside/E of the same type.
                let open = matches!(fp, Some(Some(p)) if p == B || p == inside);
                let continues = matches!(tp, Some(Some(p)) if p == inside || p == E);
                if open {
                    continues && same(from.unwrap(), to.unwrap())
                } else {
                    !continues
                }
            }
        }
    }

    /// How many transitions in `tags` (start and end included) this scheme
    /// forbids, or `None` if a tag's prefix is not in the scheme at all.
    pub fn violations(self, tags: &[Tag]) -> Option<usize> {
        if !tags.iter().all(|t| self.admits(t)) {
            return None;
        }
        let mut n = 0;
        let mut prev: Option<&Tag> = None;
        for t in tags.iter().map(Some).chain(std::iter::once(None)) {
            if !self.allowed(prev, t) {
                n += 1;
            }
            prev = t;
        }
        Some(n)
    }

    /// Detects the scheme of a set of sentences: among the schemes that admit
    /// every prefix seen, the one with the fewest forbidden transitions (ties
    /// go to BIO, then IOB1, BIOES, BMES). Returns an error naming the
    /// prefixes when no scheme admits them all.
    pub fn detect<'a>(sentences: impl IntoIterator<Item = &'a [Tag]>) -> Result<Scheme, String> {
        let mut counts: [Option<usize>; 4] = [Some(0); 4];
        let mut seen = std::collections::BTreeSet::new();
        for tags in sentences {
            seen.extend(tags.iter().filter_map(Tag::prefix));
            for (slot, scheme) in counts.iter_mut().zip(ALL_SCHEMES) {
                if let Some(n) = slot {
                    match scheme.violations(tags) {
                        Some(v) => *n += v,
                        None => *slot = None,
                    }
                }
            }
        }
        counts
            .iter()
            .zip(ALL_SCHEMES)
            .filter_map(|(c, s)| c.map(|c| (c, s)))
            .min_by_key(|(c, _)| *c)
            .map(|(_, s)| s)
            .ok_or_else(|| {
                let seen: Vec<&str> = seen.iter().map(|p| p.as_str()).collect();
                format!(
                    "the tags mix prefixes of different schemes ({}): no single scheme of IOB1, BIO, BIOES, BMES admits them all",
                    seen.join(", ")
                )
            })
    }
}

/// Converts tags from one scheme to another through their spans. For
/// well-formed input the spans are preserved exactly.
pub fn convert(tags: &[Tag], from: Scheme, to: Scheme) -> Vec<Tag> {
    to.encode(tags.len(), &from.decode(tags))
}

/// conlleval's `startOfChunk`, on (prefix, type) pairs.
pub(crate) fn conll_start(prev: (&str, &str), cur: (&str, &str)) -> bool {
    let (p, pt) = prev;
    let (c, ct) = cur;
    matches!((p, c), ("B", "B") | ("I", "B") | ("O", "B") | ("O", "I") | ("E", "E") | ("E", "I") | ("O", "E"))
        || (c != "O" && c != "." && pt != ct)
        || c == "["
        || c == "]"
}

/// conlleval's `endOfChunk`, on (prefix, type) pairs.
pub(crate) fn conll_end(prev: (&str, &str), cur: (&str, &str)) -> bool {
    let (p, pt) = prev;
    let (c, ct) = cur;
    matches!((p, c), ("B", "B") | ("B", "O") | ("I", "B") | ("I", "O") | ("E", "E") | ("E", "I") | ("E", "O"))
        || (p != "O" && p != "." && pt != ct)
        || p == "]"
        || p == "["
}

/// seqeval's extension of `startOfChunk` for `S-`/`E-` (`M-` reads as `I-`).
fn ext_start(prev: (&str, &str), cur: (&str, &str)) -> bool {
    let p = if prev.0 == "M" { "I" } else { prev.0 };
    let c = if cur.0 == "M" { "I" } else { cur.0 };
    c == "B"
        || c == "S"
        || matches!((p, c), ("E", "E") | ("E", "I") | ("S", "E") | ("S", "I") | ("O", "E") | ("O", "I"))
        || (c != "O" && prev.1 != cur.1)
}

/// seqeval's extension of `endOfChunk` for `S-`/`E-` (`M-` reads as `I-`).
fn ext_end(prev: (&str, &str), cur: (&str, &str)) -> bool {
    let p = if prev.0 == "M" { "I" } else { prev.0 };
    let c = if cur.0 == "M" { "I" } else { cur.0 };
    p == "E"
        || p == "S"
        || matches!((p, c), ("B", "B") | ("B", "S") | ("B", "O") | ("I", "B") | ("I", "S") | ("I", "O"))
        || (p != "O" && prev.1 != cur.1)
}

type Rule = fn((&str, &str), (&str, &str)) -> bool;

/// Chunks by start/end rules: a chunk opens where `start` fires and closes
/// where `end` fires or the next chunk opens; the sentence end closes all.
fn decode_with(tags: &[Tag], start: Rule, end: Rule) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut open: Option<(usize, &str)> = None;
    let mut prev = ("O", "");
    for (i, tag) in tags.iter().enumerate() {
        let cur = tag.conll_parts();
        let starts = start(prev, cur);
        if let Some((s, label)) = open {
            if end(prev, cur) || starts {
                spans.push(Span { start: s, end: i, label: label.to_string() });
                open = None;
            }
        }
        if starts {
            open = Some((i, cur.1));
        }
        prev = cur;
    }
    if let Some((s, label)) = open {
        spans.push(Span { start: s, end: tags.len(), label: label.to_string() });
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(s: &str) -> Vec<Tag> {
        s.split_whitespace().map(|t| Tag::parse(t).unwrap()).collect()
    }

    fn span(start: usize, end: usize, label: &str) -> Span {
        Span { start, end, label: label.into() }
    }

    #[test]
    fn parse_accepts_o_and_prefix_type_only() {
        assert_eq!(Tag::parse("O").unwrap(), Tag::O);
        assert_eq!(Tag::parse("B-creative-work").unwrap(), Tag::new(Prefix::B, "creative-work"));
        for bad in ["", "o", "B", "B-", "X-PER", "PER", "-PER", "b-PER"] {
            assert!(Tag::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn iob1_i_after_o_starts_a_chunk_and_b_splits_same_type() {
        let t = tags("I-PER I-PER B-PER O I-LOC I-ORG");
        assert_eq!(
            Scheme::Iob1.decode(&t),
            vec![span(0, 2, "PER"), span(2, 3, "PER"), span(4, 5, "LOC"), span(5, 6, "ORG")]
        );
    }

    #[test]
    fn conlleval_rules_on_ill_formed_bio() {
        // I after O starts; a type change inside a chunk starts a new chunk.
        let t = tags("O I-PER B-LOC I-PER I-PER");
        assert_eq!(Scheme::Iob2.decode(&t), vec![span(1, 2, "PER"), span(2, 3, "LOC"), span(3, 5, "PER")]);
    }

    #[test]
    fn bioes_lenient_decoding_handles_s_and_e() {
        let t = tags("S-PER S-PER B-LOC E-LOC B-LOC I-LOC E-LOC O E-ORG");
        assert_eq!(
            Scheme::Bioes.decode(&t),
            vec![span(0, 1, "PER"), span(1, 2, "PER"), span(2, 4, "LOC"), span(4, 7, "LOC"), span(8, 9, "ORG")]
        );
    }

    #[test]
    fn strict_decoding_drops_ill_formed_chunks() {
        let t = tags("I-PER O B-LOC I-LOC B-ORG E-ORG");
        assert_eq!(Scheme::Iob2.decode_strict(&t), vec![span(2, 4, "LOC"), span(4, 5, "ORG")]);
        let t = tags("B-PER I-PER O S-LOC B-ORG O I-ORG E-ORG");
        assert_eq!(Scheme::Bioes.decode_strict(&t), vec![span(3, 4, "LOC")]);
        let t = tags("B-PER M-PER E-PER S-LOC");
        assert_eq!(Scheme::Bmes.decode_strict(&t), vec![span(0, 3, "PER"), span(3, 4, "LOC")]);
        let t = tags("I-PER B-PER O B-LOC");
        assert_eq!(Scheme::Iob1.decode_strict(&t), vec![span(0, 1, "PER"), span(1, 2, "PER")]);
    }

    #[test]
    fn encode_each_scheme() {
        let spans = vec![span(0, 2, "PER"), span(2, 3, "PER"), span(4, 7, "LOC")];
        let show = |s: Scheme| s.encode(7, &spans).iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" ");
        assert_eq!(show(Scheme::Iob1), "I-PER I-PER B-PER O I-LOC I-LOC I-LOC");
        assert_eq!(show(Scheme::Iob2), "B-PER I-PER B-PER O B-LOC I-LOC I-LOC");
        assert_eq!(show(Scheme::Bioes), "B-PER E-PER S-PER O B-LOC I-LOC E-LOC");
        assert_eq!(show(Scheme::Bmes), "B-PER E-PER S-PER O B-LOC M-LOC E-LOC");
    }

    #[test]
    fn allowed_transitions_follow_the_scheme() {
        let t = |s: &str| Tag::parse(s).unwrap();
        let a = |s: Scheme, f: Option<&str>, to: Option<&str>| s.allowed(f.map(t).as_ref(), to.map(t).as_ref());
        assert!(!a(Scheme::Iob2, Some("O"), Some("I-PER")));
        assert!(!a(Scheme::Iob2, Some("B-PER"), Some("I-LOC")));
        assert!(!a(Scheme::Iob2, None, Some("I-PER")));
        assert!(a(Scheme::Iob2, Some("B-PER"), Some("I-PER")));
        assert!(a(Scheme::Iob2, Some("I-PER"), None));
        assert!(a(Scheme::Iob1, Some("O"), Some("I-PER")));
        assert!(!a(Scheme::Iob1, Some("O"), Some("B-PER")));
        assert!(a(Scheme::Iob1, Some("I-PER"), Some("B-PER")));
        assert!(!a(Scheme::Iob1, Some("I-LOC"), Some("B-PER")));
        assert!(!a(Scheme::Bioes, None, Some("E-PER")));
        assert!(!a(Scheme::Bioes, Some("B-PER"), None));
        assert!(!a(Scheme::Bioes, Some("I-PER"), Some("O")));
        assert!(!a(Scheme::Bioes, Some("B-PER"), Some("E-LOC")));
        assert!(a(Scheme::Bioes, Some("E-PER"), Some("S-PER")));
        assert!(a(Scheme::Bioes, Some("S-PER"), None));
        assert!(!a(Scheme::Bmes, Some("B-PER"), Some("I-PER")));
        assert!(a(Scheme::Bmes, Some("B-PER"), Some("M-PER")));
    }

    #[test]
    fn detection_picks_the_scheme_without_violations() {
        let iob1 = [tags("I-PER I-PER B-PER O"), tags("O I-LOC")];
        assert_eq!(Scheme::detect(iob1.iter().map(|v| v.as_slice())).unwrap(), Scheme::Iob1);
        let bio = [tags("B-PER I-PER B-PER O"), tags("O B-LOC")];
        assert_eq!(Scheme::detect(bio.iter().map(|v| v.as_slice())).unwrap(), Scheme::Iob2);
        let bioes = [tags("B-PER E-PER S-PER O")];
        assert_eq!(Scheme::detect(bioes.iter().map(|v| v.as_slice())).unwrap(), Scheme::Bioes);
        let bmes = [tags("B-PER M-PER E-PER")];
        assert_eq!(Scheme::detect(bmes.iter().map(|v| v.as_slice())).unwrap(), Scheme::Bmes);
        let mixed = [tags("B-PER M-PER I-PER")];
        assert!(Scheme::detect(mixed.iter().map(|v| v.as_slice())).is_err());
    }
}
