//! How sure is a QA difference? Each run writes its per-question test
//! scores (`answers.test.csv`: id, exact match, F1); the difference between
//! two settings' mean answer F1 is resampled over both sources of noise —
//! the seeds (paired by seed number when both settings ran the same seeds)
//! and the questions (the same questions for both) — for a 95 % interval.

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::Path;

/// The per-question scores file of a split.
pub fn file_name(split: &str) -> String {
    format!("answers.{split}.csv")
}

/// `id,exact_match,f1` per question.
pub fn write(path: &Path, items: &[corpus::qa::squad::QaItem], scores: &[(f64, f64)]) -> Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["id", "exact_match", "f1"])?;
    for (item, (em, f1)) in items.iter().zip(scores) {
        w.write_record([item.id.as_str(), &em.to_string(), &f1.to_string()])?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(corpus::io::write_atomic(path, bytes)?)
}

/// Question id → F1, from a run's per-question scores file.
pub fn read(path: &Path) -> Result<BTreeMap<String, f64>> {
    let mut r = csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = BTreeMap::new();
    for (k, row) in r.records().enumerate() {
        let row = row.with_context(|| format!("{}: row {}", path.display(), k + 2))?;
        let f1: f64 = row.get(2).and_then(|x| x.parse().ok()).with_context(|| {
            format!("{}:{}: expected `id,exact_match,f1` with a number as f1", path.display(), k + 2)
        })?;
        out.insert(row.get(0).unwrap_or_default().to_string(), f1);
    }
    Ok(out)
}

/// A setting's runs: seed → per-question F1.
pub type Setting = BTreeMap<u64, BTreeMap<String, f64>>;

/// The bootstrap estimate of `mean F1(a) − mean F1(b)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    pub delta: f64,
    pub low: f64,
    pub high: f64,
    pub questions: usize,
    /// Seeds resampled in pairs (both settings ran them).
    pub paired_seeds: bool,
    pub samples: usize,
}

/// Resamples seeds and questions `samples` times: the difference of the
/// settings' mean F1 over the questions both answered, and its 2.5 and 97.5
/// percentiles.
pub fn difference(a: &Setting, b: &Setting, samples: usize, seed: u64) -> Result<Difference> {
    let common: Vec<&String> = match (a.values().next(), b.values().next()) {
        (Some(x), Some(_)) => {
            x.keys().filter(|q| a.values().chain(b.values()).all(|run| run.contains_key(*q))).collect()
        }
        _ => bail!("a setting has no runs with per-question scores"),
    };
    if common.is_empty() {
        bail!("the runs share no test question");
    }
    // Scores as [seed][question] matrices over the common questions.
    let matrix =
        |s: &Setting| -> Vec<Vec<f64>> { s.values().map(|run| common.iter().map(|q| run[*q]).collect()).collect() };
    let (ma, mb) = (matrix(a), matrix(b));
    let paired_seeds = a.keys().eq(b.keys());
    let n = common.len();
    let mean = |m: &[Vec<f64>], seeds: &[usize], qs: &[usize]| {
        seeds.iter().map(|&s| qs.iter().map(|&q| m[s][q]).sum::<f64>()).sum::<f64>() / (seeds.len() * qs.len()) as f64
    };
    let all_q: Vec<usize> = (0..n).collect();
    let (sa, sb): (Vec<usize>, Vec<usize>) = ((0..ma.len()).collect(), (0..mb.len()).collect());
    let delta = mean(&ma, &sa, &all_q) - mean(&mb, &sb, &all_q);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut deltas = Vec::with_capacity(samples.max(1));
    for _ in 0..samples.max(1) {
        let qs: Vec<usize> = (0..n).map(|_| rng.random_range(0..n)).collect();
        let seeds_a: Vec<usize> = (0..ma.len()).map(|_| rng.random_range(0..ma.len())).collect();
        let seeds_b: Vec<usize> =
            if paired_seeds { seeds_a.clone() } else { (0..mb.len()).map(|_| rng.random_range(0..mb.len())).collect() };
        deltas.push(mean(&ma, &seeds_a, &qs) - mean(&mb, &seeds_b, &qs));
    }
    deltas.sort_by(f64::total_cmp);
    let at = |p: f64| deltas[((deltas.len() - 1) as f64 * p).round() as usize];
    Ok(Difference { delta, low: at(0.025), high: at(0.975), questions: n, paired_seeds, samples: deltas.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(runs: &[(u64, &[f64])]) -> Setting {
        runs.iter().map(|(s, f1)| (*s, f1.iter().enumerate().map(|(q, &x)| (format!("q{q}"), x)).collect())).collect()
    }

    #[test]
    fn a_clear_difference_has_an_interval_away_from_zero_and_noise_one_around_it() {
        let n = 400;
        let hi: Vec<f64> = (0..n).map(|q| if q % 10 < 7 { 1.0 } else { 0.0 }).collect();
        let lo: Vec<f64> = (0..n).map(|q| if q % 10 < 4 { 1.0 } else { 0.0 }).collect();
        let a = setting(&[(1, &hi), (2, &hi)]);
        let b = setting(&[(1, &lo), (2, &lo)]);
        let d = difference(&a, &b, 500, 1).unwrap();
        assert!((d.delta - 0.3).abs() < 1e-12 && d.low > 0.2 && d.high < 0.4 && d.paired_seeds, "{d:?}");
        // The same setting against itself: the interval holds 0.
        let d = difference(&a, &a, 500, 1).unwrap();
        assert!(d.delta == 0.0 && d.low <= 0.0 && d.high >= 0.0);
        // Seeds that disagree widen the interval.
        let noisy = setting(&[(1, &hi), (2, &lo)]);
        let d = difference(&noisy, &b, 500, 1).unwrap();
        assert!(d.high - d.low > 0.15, "{d:?}");
    }

    #[test]
    fn scores_round_trip_through_the_file_and_bad_rows_name_the_line() {
        let dir = std::env::temp_dir().join(format!("seqlab-qa-bootstrap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let items: Vec<corpus::qa::squad::QaItem> = ["a", "b"]
            .iter()
            .map(|id| corpus::qa::squad::QaItem {
                id: id.to_string(),
                question: vec![],
                question_text: String::new(),
                context: "x".into(),
                offsets: vec![(0, 1)],
                answers: vec![],
            })
            .collect();
        let path = dir.join(file_name("test"));
        write(&path, &items, &[(1.0, 1.0), (0.0, 0.5)]).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.get("b"), Some(&0.5));
        std::fs::write(&path, "id,exact_match,f1\na,1,x\n").unwrap();
        let e = format!("{:#}", read(&path).unwrap_err());
        assert!(e.contains(":2:") && e.contains("f1"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
