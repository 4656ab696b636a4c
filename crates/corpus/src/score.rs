//! conlleval-exact chunk scoring, and strict scheme-aware scoring.
//!
//! [`conlleval`] is a transcription of the state machine of conlleval.pl
//! (version 2004-01-26, default options): the same chunk start/end rules,
//! the same counting of correct chunks, the same per-type table. conlleval
//! does not understand `S-`/`M-` tags (and reads `E-` as IOE), so sentences
//! whose tags use S/E/M prefixes are first converted to BIO with the lenient
//! BIOES decoding of [`Scheme::decode`], gold and prediction alike.

use crate::error::{CorpusError, Result};
use crate::io::read_text;
use crate::reader::{parse_tag, read_rows, RowOptions, DOCSTART};
use crate::tags::{conll_end, conll_start, Prefix, Scheme, Span, Tag};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

/// Overall figures, as conlleval prints them (rates as fractions in [0, 1]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Overall {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub accuracy: f64,
    pub gold_chunks: usize,
    pub pred_chunks: usize,
    pub correct_chunks: usize,
    pub tokens: usize,
}

/// Figures for one entity type; `support` is the number of gold chunks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeScore {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub support: usize,
}

/// A scoring report: the object `seqlab score --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub overall: Overall,
    pub per_type: BTreeMap<String, TypeScore>,
}

/// How chunks are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// conlleval's lenient rules (BIOES/BMES converted to BIO first).
    Conlleval,
    /// Only chunks well formed under the scheme count.
    Strict(Scheme),
}

/// Raw counts, before rates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    pub correct_chunks: usize,
    pub gold_chunks: usize,
    pub pred_chunks: usize,
    pub correct_tags: usize,
    pub tokens: usize,
    /// Per type: (correct, gold, predicted).
    pub per_type: BTreeMap<String, (usize, usize, usize)>,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn f1(p: f64, r: f64) -> f64 {
    if p + r > 0.0 {
        2.0 * p * r / (p + r)
    } else {
        0.0
    }
}

impl Counts {
    pub fn report(&self) -> Report {
        let p = ratio(self.correct_chunks, self.pred_chunks);
        let r = ratio(self.correct_chunks, self.gold_chunks);
        let per_type = self
            .per_type
            .iter()
            .map(|(t, &(c, g, f))| {
                let (p, r) = (ratio(c, f), ratio(c, g));
                (t.clone(), TypeScore { precision: p, recall: r, f1: f1(p, r), support: g })
            })
            .collect();
        Report {
            overall: Overall {
                precision: p,
                recall: r,
                f1: f1(p, r),
                accuracy: ratio(self.correct_tags, self.tokens),
                gold_chunks: self.gold_chunks,
                pred_chunks: self.pred_chunks,
                correct_chunks: self.correct_chunks,
                tokens: self.tokens,
            },
            per_type,
        }
    }

    /// The report in conlleval's own text layout.
    pub fn conlleval_text(&self) -> String {
        let r = self.report();
        let o = &r.overall;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "processed {} tokens with {} phrases; found: {} phrases; correct: {}.",
            o.tokens, o.gold_chunks, o.pred_chunks, o.correct_chunks
        );
        if o.tokens > 0 {
            let _ = writeln!(
                s,
                "accuracy: {:6.2}%; precision: {:6.2}%; recall: {:6.2}%; FB1: {:6.2}",
                100.0 * o.accuracy,
                100.0 * o.precision,
                100.0 * o.recall,
                100.0 * o.f1
            );
        }
        for (t, ts) in &r.per_type {
            let found = self.per_type[t].2;
            let _ = writeln!(
                s,
                "{:>17}: precision: {:6.2}%; recall: {:6.2}%; FB1: {:6.2}  {}",
                t,
                100.0 * ts.precision,
                100.0 * ts.recall,
                100.0 * ts.f1,
                found
            );
        }
        s
    }

    fn type_entry(&mut self, t: &str) -> &mut (usize, usize, usize) {
        self.per_type.entry(t.to_string()).or_default()
    }
}

/// Scores (gold, predicted) tag sequences, one pair per sentence.
pub fn score<'a>(sentences: impl IntoIterator<Item = (&'a [Tag], &'a [Tag])>, mode: Mode) -> Counts {
    match mode {
        Mode::Conlleval => conlleval(sentences),
        Mode::Strict(scheme) => strict(sentences, scheme),
    }
}

fn uses_ses(tags: &[Tag]) -> bool {
    tags.iter().any(|t| matches!(t.prefix(), Some(Prefix::S | Prefix::E | Prefix::M)))
}

/// conlleval.pl's algorithm. A sentence end acts as conlleval's boundary
/// line (gold and guess `O`, not counted as a token).
pub fn conlleval<'a>(sentences: impl IntoIterator<Item = (&'a [Tag], &'a [Tag])>) -> Counts {
    let mut c = Counts::default();
    for (gold, pred) in sentences {
        assert_eq!(gold.len(), pred.len(), "gold and predicted tags differ in length");
        // conlleval cannot read S-/M- (and reads E- as IOE): go through BIO.
        let (gold, pred): (Vec<Tag>, Vec<Tag>) = if uses_ses(gold) || uses_ses(pred) {
            (
                Scheme::Iob2.encode(gold.len(), &Scheme::Bioes.decode(gold)),
                Scheme::Iob2.encode(pred.len(), &Scheme::Bioes.decode(pred)),
            )
        } else {
            (gold.to_vec(), pred.to_vec())
        };
        let mut state = State::default();
        for (g, p) in gold.iter().zip(&pred) {
            state.step(&mut c, g.conll_parts(), p.conll_parts(), true);
        }
        state.step(&mut c, ("O", ""), ("O", ""), false);
    }
    c
}

/// conlleval's running state between lines.
struct State<'t> {
    in_correct: bool,
    last_correct: (&'t str, &'t str),
    last_guessed: (&'t str, &'t str),
}

impl Default for State<'_> {
    fn default() -> Self {
        State { in_correct: false, last_correct: ("O", ""), last_guessed: ("O", "") }
    }
}

impl<'t> State<'t> {
    fn step(&mut self, c: &mut Counts, correct: (&'t str, &'t str), guessed: (&'t str, &'t str), token: bool) {
        let end_c = conll_end(self.last_correct, correct);
        let end_g = conll_end(self.last_guessed, guessed);
        let start_c = conll_start(self.last_correct, correct);
        let start_g = conll_start(self.last_guessed, guessed);
        if self.in_correct {
            if end_c && end_g && self.last_guessed.1 == self.last_correct.1 {
                self.in_correct = false;
                c.correct_chunks += 1;
                c.type_entry(self.last_correct.1).0 += 1;
            } else if end_c != end_g || guessed.1 != correct.1 {
                self.in_correct = false;
            }
        }
        if start_c && start_g && guessed.1 == correct.1 {
            self.in_correct = true;
        }
        if start_c {
            c.gold_chunks += 1;
            c.type_entry(correct.1).1 += 1;
        }
        if start_g {
            c.pred_chunks += 1;
            c.type_entry(guessed.1).2 += 1;
        }
        if token {
            if correct == guessed {
                c.correct_tags += 1;
            }
            c.tokens += 1;
        }
        self.last_correct = correct;
        self.last_guessed = guessed;
    }
}

/// Strict scoring: chunks are the well-formed spans of the scheme, and a
/// predicted chunk is correct when a gold chunk has the same start, end and type.
pub fn strict<'a>(sentences: impl IntoIterator<Item = (&'a [Tag], &'a [Tag])>, scheme: Scheme) -> Counts {
    let mut c = Counts::default();
    for (gold, pred) in sentences {
        assert_eq!(gold.len(), pred.len(), "gold and predicted tags differ in length");
        let g: Vec<Span> = scheme.decode_strict(gold);
        let p: Vec<Span> = scheme.decode_strict(pred);
        let gs: HashSet<&Span> = g.iter().collect();
        for s in &g {
            c.type_entry(&s.label).1 += 1;
        }
        for s in &p {
            c.type_entry(&s.label).2 += 1;
            if gs.contains(s) {
                c.type_entry(&s.label).0 += 1;
                c.correct_chunks += 1;
            }
        }
        c.gold_chunks += g.len();
        c.pred_chunks += p.len();
        c.tokens += gold.len();
        c.correct_tags += gold.iter().zip(pred).filter(|(a, b)| a == b).count();
    }
    c
}

/// A file in conlleval's input format: whitespace-separated columns, the
/// last two are the gold and the predicted tag; blank lines (or `-X-` lines)
/// separate sentences; `-DOCSTART-` lines are ignored unless `keep_docstart`,
/// in which case they count as tokens tagged `O O`, exactly as conlleval does.
pub struct ScoreFile {
    pub sentences: Vec<(Vec<Tag>, Vec<Tag>)>,
}

impl ScoreFile {
    pub fn read(path: &Path, keep_docstart: bool) -> Result<ScoreFile> {
        let text = read_text(path)?;
        Self::parse(path, &text, keep_docstart)
    }

    pub fn parse(path: &Path, text: &str, keep_docstart: bool) -> Result<ScoreFile> {
        let opts = RowOptions { x_boundary: true, docstart_as_row: keep_docstart };
        let raw = read_rows(path, text, opts)?;
        let n = raw[0].rows[0].len();
        if n < 2 {
            return Err(CorpusError::at(
                path,
                raw[0].line,
                format!("expected at least 2 columns (…, gold tag, predicted tag), found {n}"),
            ));
        }
        let mut sentences = Vec::with_capacity(raw.len());
        for s in raw {
            let mut gold = Vec::with_capacity(s.rows.len());
            let mut pred = Vec::with_capacity(s.rows.len());
            for (k, row) in s.rows.iter().enumerate() {
                let line = s.line + k;
                if row[0] == DOCSTART {
                    // Only with keep_docstart: conlleval reads `-DOCSTART- -X- -X- O`
                    // as a token outside any chunk, whatever its tag columns hold.
                    gold.push(Tag::parse(&row[n - 2]).unwrap_or(Tag::O));
                    pred.push(Tag::parse(&row[n - 1]).unwrap_or(Tag::O));
                    continue;
                }
                gold.push(parse_tag(path, line, &row[n - 2], None)?);
                pred.push(parse_tag(path, line, &row[n - 1], None)?);
            }
            sentences.push((gold, pred));
        }
        Ok(ScoreFile { sentences })
    }

    pub fn score(&self, mode: Mode) -> Counts {
        score(self.sentences.iter().map(|(g, p)| (g.as_slice(), p.as_slice())), mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(s: &str) -> Vec<Tag> {
        s.split_whitespace().map(|t| Tag::parse(t).unwrap()).collect()
    }

    fn counts(pairs: &[(&str, &str)]) -> Counts {
        let v: Vec<(Vec<Tag>, Vec<Tag>)> = pairs.iter().map(|(g, p)| (tags(g), tags(p))).collect();
        conlleval(v.iter().map(|(g, p)| (g.as_slice(), p.as_slice())))
    }

    fn cgp(c: &Counts) -> (usize, usize, usize) {
        (c.correct_chunks, c.gold_chunks, c.pred_chunks)
    }

    #[test]
    fn perfect_prediction() {
        let c = counts(&[("B-PER I-PER O B-LOC", "B-PER I-PER O B-LOC")]);
        assert_eq!(cgp(&c), (2, 2, 2));
        let r = c.report();
        assert_eq!((r.overall.f1, r.overall.accuracy), (1.0, 1.0));
    }

    #[test]
    fn i_after_o_starts_a_chunk_in_both_gold_and_guess() {
        // IOB1 gold vs BIO guess of the same chunks: all correct.
        let c = counts(&[("I-PER I-PER O I-LOC", "B-PER I-PER O B-LOC")]);
        assert_eq!(cgp(&c), (2, 2, 2));
        assert_eq!(c.correct_tags, 2);
    }

    #[test]
    fn boundary_mismatch_is_not_correct() {
        // Guess ends one token early: chunk counts but not correct.
        let c = counts(&[("B-PER I-PER I-PER O", "B-PER I-PER O O")]);
        assert_eq!(cgp(&c), (0, 1, 1));
        // Guess runs one token long.
        let c = counts(&[("B-PER I-PER O", "B-PER I-PER I-PER")]);
        assert_eq!(cgp(&c), (0, 1, 1));
    }

    #[test]
    fn type_change_inside_a_chunk_splits_it() {
        let c = counts(&[("B-PER I-PER", "B-PER I-LOC")]);
        assert_eq!(cgp(&c), (0, 1, 2));
        assert_eq!(c.per_type["LOC"], (0, 0, 1));
        assert_eq!(c.per_type["PER"], (0, 1, 1));
    }

    #[test]
    fn type_mismatch_with_same_boundaries_is_wrong() {
        let c = counts(&[("B-PER I-PER O", "B-ORG I-ORG O")]);
        assert_eq!(cgp(&c), (0, 1, 1));
    }

    #[test]
    fn chunk_ending_at_sentence_end_and_adjacent_b() {
        let c = counts(&[("B-PER B-PER", "B-PER B-PER"), ("O I-ORG", "O B-ORG")]);
        assert_eq!(cgp(&c), (3, 3, 3));
    }

    #[test]
    fn ncrfpp_issue_87_leading_i_counts_as_chunk() {
        // gold [B-NP I-NP O], guess [I-NP I-NP O]: conlleval's default mode
        // counts the guess as correct; strict BIO does not.
        let c = counts(&[("B-NP I-NP O", "I-NP I-NP O")]);
        assert_eq!(cgp(&c), (1, 1, 1));
        let g = tags("B-NP I-NP O");
        let p = tags("I-NP I-NP O");
        let s = strict([(g.as_slice(), p.as_slice())], Scheme::Iob2);
        assert_eq!(cgp(&s), (0, 1, 0));
    }

    #[test]
    fn bioes_is_converted_so_adjacent_singletons_stay_apart() {
        // Fed raw to conlleval, S-PER S-PER would merge into one chunk.
        let c = counts(&[("S-PER S-PER B-LOC E-LOC", "S-PER S-PER B-LOC E-LOC")]);
        assert_eq!(cgp(&c), (3, 3, 3));
        let c = counts(&[("S-PER S-PER", "B-PER E-PER")]);
        assert_eq!(cgp(&c), (0, 2, 1));
    }

    #[test]
    fn precision_recall_and_per_type_rates() {
        let c = counts(&[("B-PER O B-LOC O B-ORG", "B-PER O B-LOC B-LOC O")]);
        let r = c.report();
        assert_eq!(cgp(&c), (2, 3, 3));
        assert!((r.overall.precision - 2.0 / 3.0).abs() < 1e-12);
        assert!((r.overall.recall - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.per_type["LOC"].precision, 0.5);
        assert_eq!(r.per_type["LOC"].recall, 1.0);
        assert_eq!(r.per_type["ORG"].support, 1);
        assert_eq!(r.per_type["ORG"].f1, 0.0);
        assert_eq!(c.tokens, 5);
        assert_eq!(c.correct_tags, 3);
    }

    #[test]
    fn conlleval_text_layout() {
        let c = counts(&[("B-PER O B-LOC O B-ORG", "B-PER O B-LOC B-LOC O")]);
        let text = c.conlleval_text();
        let expected = concat!(
            "processed 5 tokens with 3 phrases; found: 3 phrases; correct: 2.\n",
            "accuracy:  60.00%; precision:  66.67%; recall:  66.67%; FB1:  66.67\n",
            "              LOC: precision:  50.00%; recall: 100.00%; FB1:  66.67  2\n",
            "              ORG: precision:   0.00%; recall:   0.00%; FB1:   0.00  0\n",
            "              PER: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n",
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn score_file_with_x_boundary_and_docstart() {
        let text = "-DOCSTART- -X- O O\n\nJohn NNP B-PER B-PER\nlives VBZ O O\n-X- -X- O O\nParis NNP B-LOC I-LOC\n";
        let f = ScoreFile::parse(Path::new("s"), text, false).unwrap();
        assert_eq!(f.sentences.len(), 2);
        let c = f.score(Mode::Conlleval);
        assert_eq!((c.tokens, c.correct_chunks), (3, 2));
        let f = ScoreFile::parse(Path::new("s"), text, true).unwrap();
        assert_eq!(f.score(Mode::Conlleval).tokens, 4);
    }

    #[test]
    fn score_file_errors_name_the_line() {
        let err = ScoreFile::parse(Path::new("s.txt"), "a O O\nb O\n", false).err().unwrap().to_string();
        assert!(err.starts_with("s.txt:2: expected 3 columns"), "{err}");
        let err = ScoreFile::parse(Path::new("s.txt"), "a O O\nb O B-\n", false).err().unwrap().to_string();
        assert!(err.starts_with("s.txt:2: expected a tag"), "{err}");
    }
}
