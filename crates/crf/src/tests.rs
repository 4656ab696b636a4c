//! Every CRF quantity checked against brute-force enumeration of all tag
//! paths (as pytorch-crf and AllenNLP test theirs), plus padding invariance,
//! long-sequence stability, gradients and a training smoke test.

use super::*;
use burn::backend::{Autodiff, NdArray};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type TB = NdArray<f32>;
type AD = Autodiff<NdArray<f32>>;

/// Plain-Rust parameters and emissions of one test case.
#[derive(Clone, Debug)]
struct Case {
    t: usize,
    trans: Vec<f64>, // [T*T]
    start: Vec<f64>,
    end: Vec<f64>,
    /// Per sentence: emissions [n][T].
    sents: Vec<Vec<Vec<f64>>>,
}

fn random_case(rng: &mut ChaCha8Rng, t: usize, lengths: &[usize], scale: f64) -> Case {
    // Parameters uniform in (-5, 5) so that transitions matter (as pytorch-crf's tests do).
    let mut u = |n: usize, s: f64| (0..n).map(|_| rng.random_range(-s..s)).collect::<Vec<f64>>();
    let trans = u(t * t, 5.0);
    let start = u(t, 5.0);
    let end = u(t, 5.0);
    let sents = lengths.iter().map(|&n| (0..n).map(|_| u(t, scale)).collect()).collect();
    Case { t, trans, start, end, sents }
}

fn crf_of<B: Backend>(c: &Case, cons: &Constraints, dev: &B::Device) -> Crf<B> {
    let mut crf = Crf::<B>::new(cons, 0.0, dev);
    let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    crf.transitions = Param::from_tensor(Tensor::from_data(TensorData::new(f(&c.trans), [c.t, c.t]), dev));
    crf.start = Param::from_tensor(Tensor::from_data(TensorData::new(f(&c.start), [c.t]), dev));
    crf.end = Param::from_tensor(Tensor::from_data(TensorData::new(f(&c.end), [c.t]), dev));
    crf
}

/// Emissions `[B, L, T]` and mask `[B, L]`, padded with large junk values
/// (padding must not matter).
fn batch<B: Backend>(c: &Case, dev: &B::Device) -> (Tensor<B, 3>, Tensor<B, 2, Bool>) {
    let b = c.sents.len();
    let l = c.sents.iter().map(Vec::len).max().unwrap();
    let mut e = vec![123.0f32; b * l * c.t];
    let mut m = vec![false; b * l];
    for (s, sent) in c.sents.iter().enumerate() {
        for (i, row) in sent.iter().enumerate() {
            m[s * l + i] = true;
            for (j, &v) in row.iter().enumerate() {
                e[(s * l + i) * c.t + j] = v as f32;
            }
        }
    }
    (Tensor::from_data(TensorData::new(e, [b, l, c.t]), dev), Tensor::from_data(TensorData::new(m, [b, l]), dev))
}

fn tags_tensor<B: Backend>(paths: &[Vec<usize>], dev: &B::Device) -> Tensor<B, 2, Int> {
    let l = paths.iter().map(Vec::len).max().unwrap();
    let mut v = vec![0i64; paths.len() * l];
    for (s, p) in paths.iter().enumerate() {
        for (i, &x) in p.iter().enumerate() {
            v[s * l + i] = x as i64;
        }
    }
    Tensor::from_data(TensorData::new(v, [paths.len(), l]), dev)
}

fn all_paths(t: usize, n: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for _ in 0..n {
        out = out.into_iter().flat_map(|p| (0..t).map(move |j| [p.clone(), vec![j]].concat())).collect();
    }
    out
}

fn path_score(c: &Case, sent: &[Vec<f64>], path: &[usize]) -> f64 {
    let mut s = c.start[path[0]] + c.end[*path.last().unwrap()];
    for (i, &y) in path.iter().enumerate() {
        s += sent[i][y];
        if i > 0 {
            s += c.trans[path[i - 1] * c.t + y];
        }
    }
    s
}

/// Brute force over allowed paths: (log Z, best path, marginals [n][T]).
fn brute(c: &Case, cons: &Constraints, sent: &[Vec<f64>]) -> (f64, Vec<usize>, Vec<Vec<f64>>) {
    let paths: Vec<Vec<usize>> = all_paths(c.t, sent.len()).into_iter().filter(|p| cons.path_allowed(p)).collect();
    let scores: Vec<f64> = paths.iter().map(|p| path_score(c, sent, p)).collect();
    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let log_z = m + scores.iter().map(|s| (s - m).exp()).sum::<f64>().ln();
    let best = paths[scores.iter().enumerate().max_by(|a, b| a.1.partial_cmp(b.1).unwrap()).unwrap().0].clone();
    let mut marg = vec![vec![0.0; c.t]; sent.len()];
    for (p, s) in paths.iter().zip(&scores) {
        let w = (s - log_z).exp();
        for (i, &y) in p.iter().enumerate() {
            marg[i][y] += w;
        }
    }
    (log_z, best, marg)
}

fn floats<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f64> {
    t.into_data().iter::<f64>().collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

/// BIOES constraints over two types: O, B-X, I-X, E-X, S-X, B-Y, I-Y, E-Y, S-Y.
fn bioes(types: &[&str]) -> (Vec<Tag>, Constraints) {
    let labels: Vec<String> = types.iter().map(|s| s.to_string()).collect();
    let tags = Scheme::Bioes.tag_set(&labels);
    let c = Constraints::from_scheme(Scheme::Bioes, &tags);
    (tags, c)
}

/// The brute-force checks for one backend.
fn check_against_brute_force<B: Backend>(dev: &B::Device) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    for seed in 0..12 {
        let constrained = seed % 2 == 1;
        let (t, cons) = if constrained {
            let (tags, c) = bioes(&["X"]); // 5 tags
            (tags.len(), c)
        } else {
            (4, Constraints::none(4))
        };
        let lengths = [4usize, 1, 3, 2];
        let case = random_case(&mut rng, t, &lengths, 3.0);
        let crf = crf_of::<B>(&case, &cons, dev);
        let (e, m) = batch::<B>(&case, dev);
        let log_z = floats(crf.log_partition(e.clone(), m.clone()));
        let decoded = crf.decode(e.clone(), m.clone());
        let marg = floats(crf.marginals(e.clone(), m.clone()));
        let l = 4;
        let mut gold_paths = Vec::new();
        for (s, sent) in case.sents.iter().enumerate() {
            let (bz, best, bm) = brute(&case, &cons, sent);
            assert!(close(log_z[s], bz, 1e-4), "seed {seed} sentence {s}: log Z {} vs brute {}", log_z[s], bz);
            assert_eq!(decoded[s], best, "seed {seed} sentence {s}: Viterbi path");
            for i in 0..l {
                for j in 0..t {
                    let got = marg[(s * l + i) * t + j];
                    let want = if i < sent.len() { bm[i][j] } else { 0.0 };
                    assert!((got - want).abs() < 1e-4, "seed {seed} s {s} marginal [{i}][{j}] {got} vs {want}");
                }
            }
            gold_paths.push(best);
        }
        // NLL of the best path = log Z − score(best), per sentence and reduced.
        let tags = tags_tensor::<B>(&gold_paths, dev);
        let nll = floats(crf.nll(e.clone(), tags.clone(), m.clone(), Reduction::None));
        let mut sum = 0.0;
        for (s, sent) in case.sents.iter().enumerate() {
            let want = brute(&case, &cons, sent).0 - path_score(&case, sent, &gold_paths[s]);
            assert!(close(nll[s], want, 1e-4), "nll {} vs {}", nll[s], want);
            sum += want;
        }
        let total = floats(crf.nll(e.clone(), tags.clone(), m.clone(), Reduction::Sum))[0];
        assert!(close(total, sum, 1e-4));
        let mean = floats(crf.nll(e.clone(), tags.clone(), m.clone(), Reduction::Mean))[0];
        assert!(close(mean, sum / 4.0, 1e-4));
        let token_mean = floats(crf.nll(e, tags, m, Reduction::TokenMean))[0];
        assert!(close(token_mean, sum / 10.0, 1e-4));
    }
}

#[test]
fn matches_brute_force_on_ndarray() {
    check_against_brute_force::<TB>(&Default::default());
}

#[test]
fn matches_brute_force_on_flex() {
    check_against_brute_force::<burn::backend::Flex>(&Default::default());
}

#[test]
fn constraints_follow_the_scheme() {
    let (tags, c) = bioes(&["PER", "LOC"]);
    let id = |s: &str| tags.iter().position(|t| t.to_string() == s).unwrap();
    assert!(!c.trans[id("O")][id("I-PER")]);
    assert!(!c.trans[id("B-PER")][id("I-LOC")]);
    assert!(!c.trans[id("B-PER")][id("O")]);
    assert!(c.trans[id("B-PER")][id("E-PER")]);
    assert!(!c.start[id("I-PER")] && !c.start[id("E-PER")]);
    assert!(!c.end[id("B-PER")] && !c.end[id("I-PER")]);
    assert!(c.end[id("S-PER")] && c.end[id("O")]);
    let bio = Scheme::Iob2.tag_set(&["PER".into()]);
    let cb = Constraints::from_scheme(Scheme::Iob2, &bio);
    assert!(!cb.trans[0][2] && !cb.start[2] && cb.trans[1][2]);
}

#[test]
fn padding_never_changes_a_result() {
    let dev = Default::default();
    let (_, cons) = bioes(&["X", "Y"]);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let case = random_case(&mut rng, 9, &[5, 12, 1], 2.0);
    let crf = crf_of::<TB>(&case, &cons, &dev);
    let (e, m) = batch::<TB>(&case, &dev);
    let z = floats(crf.log_partition(e.clone(), m.clone()));
    let d = crf.decode(e.clone(), m.clone());
    let mg = floats(crf.marginals(e, m));
    for s in 0..3 {
        let alone = Case { sents: vec![case.sents[s].clone()], ..case.clone() };
        let (e1, m1) = batch::<TB>(&alone, &dev);
        assert_eq!(floats(crf.log_partition(e1.clone(), m1.clone()))[0], z[s], "log Z of sentence {s}");
        assert_eq!(crf.decode(e1.clone(), m1.clone())[0], d[s]);
        let m_alone = floats(crf.marginals(e1, m1));
        let n = case.sents[s].len();
        for i in 0..n * 9 {
            assert!((m_alone[i] - mg[s * 12 * 9 + i]).abs() < 1e-6);
        }
    }
}

#[test]
fn long_sequences_and_large_emissions_stay_finite() {
    let dev = Default::default();
    let (_, cons) = bioes(&["X", "Y"]);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let case = random_case(&mut rng, 9, &[1200, 700], 500.0);
    let crf = crf_of::<TB>(&case, &cons, &dev);
    let (e, m) = batch::<TB>(&case, &dev);
    let paths = crf.decode(e.clone(), m.clone());
    assert_eq!(paths[0].len(), 1200);
    assert!(paths.iter().all(|p| cons.path_allowed(p)));
    let nll = floats(crf.nll(e.clone(), tags_tensor::<TB>(&paths, &dev), m.clone(), Reduction::None));
    assert!(nll.iter().all(|x| x.is_finite() && *x >= -1e-2), "{nll:?}");
    let mg = floats(crf.marginals(e, m));
    assert!(mg.iter().all(|x| x.is_finite()));
    // Each real position's marginals sum to 1.
    let row: f64 = mg[500 * 9..501 * 9].iter().sum();
    assert!((row - 1.0).abs() < 1e-3, "{row}");
}

#[test]
fn autodiff_gradient_equals_the_brute_force_gradient() {
    // d NLL / d e[t, j] = P(y_t = j) − [gold_t = j]; d NLL / d trans[i, j] =
    // E[#(i→j)] − #gold(i→j): both from brute-force enumeration.
    let dev = Default::default();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (_, cons) = bioes(&["X"]);
    let case = random_case(&mut rng, 5, &[3, 2], 2.0);
    let crf = crf_of::<AD>(&case, &cons, &dev);
    let (e, m) = batch::<AD>(&case, &dev);
    let e = e.require_grad();
    let gold = vec![vec![1, 3, 0], vec![4, 0]]; // B-X E-X O / S-X O
    let loss = crf.nll(e.clone(), tags_tensor::<AD>(&gold, &dev), m, Reduction::Sum);
    let grads = loss.backward();
    let ge = floats(e.grad(&grads).unwrap());
    let gt = floats(crf.transitions.val().grad(&grads).unwrap());
    let (g_start, g_end) = (floats(crf.start.val().grad(&grads).unwrap()), floats(crf.end.val().grad(&grads).unwrap()));
    let mut want_t = vec![0.0; 25];
    let (mut want_start, mut want_end) = (vec![0.0; 5], vec![0.0; 5]);
    for (s, sent) in case.sents.iter().enumerate() {
        let (log_z, _, marg) = brute(&case, &cons, sent);
        let n = sent.len();
        for j in 0..5 {
            // d NLL / d start[j] = P(y_0 = j) − [gold_0 = j]; likewise end at the last token.
            want_start[j] += marg[0][j] - f64::from(gold[s][0] == j);
            want_end[j] += marg[n - 1][j] - f64::from(gold[s][n - 1] == j);
        }
        for i in 0..3 {
            for j in 0..5 {
                let want = if i < sent.len() { marg[i][j] - f64::from(gold[s][i] == j) } else { 0.0 };
                assert!((ge[(s * 3 + i) * 5 + j] - want).abs() < 1e-4, "d/de[{s},{i},{j}]");
            }
        }
        for p in all_paths(5, sent.len()).into_iter().filter(|p| cons.path_allowed(p)) {
            let w = (path_score(&case, sent, &p) - log_z).exp();
            for k in 1..p.len() {
                want_t[p[k - 1] * 5 + p[k]] += w;
            }
        }
        for k in 1..gold[s].len() {
            want_t[gold[s][k - 1] * 5 + gold[s][k]] -= 1.0;
        }
    }
    for k in 0..25 {
        assert!((gt[k] - want_t[k]).abs() < 1e-4, "d/dtrans[{k}] {} vs {}", gt[k], want_t[k]);
    }
    for j in 0..5 {
        assert!((g_start[j] - want_start[j]).abs() < 1e-4, "d/dstart[{j}] {} vs {}", g_start[j], want_start[j]);
        assert!((g_end[j] - want_end[j]).abs() < 1e-4, "d/dend[{j}] {} vs {}", g_end[j], want_end[j]);
    }
}

#[test]
fn gradient_matches_finite_differences_on_start_scores() {
    let dev = burn::backend::ndarray::NdArrayDevice::default();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let cons = Constraints::none(3);
    let case = random_case(&mut rng, 3, &[3], 1.0);
    let gold = vec![vec![2, 0, 1]];
    let nll_of = |c: &Case| {
        let crf = crf_of::<TB>(c, &cons, &dev);
        let (e, m) = batch::<TB>(c, &dev);
        floats(crf.nll(e, tags_tensor::<TB>(&gold, &dev), m, Reduction::Sum))[0]
    };
    let crf = crf_of::<AD>(&case, &cons, &Default::default());
    let (e, m) = batch::<AD>(&case, &Default::default());
    let grads = crf.nll(e, tags_tensor::<AD>(&gold, &Default::default()), m, Reduction::Sum).backward();
    let g = floats(crf.start.val().grad(&grads).unwrap());
    for j in 0..3 {
        let h = 1e-2;
        let mut plus = case.clone();
        plus.start[j] += h;
        let mut minus = case.clone();
        minus.start[j] -= h;
        let fd = (nll_of(&plus) - nll_of(&minus)) / (2.0 * h);
        assert!((g[j] - fd).abs() < 2e-3, "start[{j}]: autodiff {} vs finite difference {fd}", g[j]);
    }
}

// ---------------------------------------------------------------------------
// k-best Viterbi and path counting, against brute-force enumeration.

/// Constraint sets of 3 to 5 tags for the k-best checks: none, BIO, IOB1,
/// BIOES, BMES and the one-span CRF's.
fn k_best_constraints() -> Vec<(&'static str, Constraints)> {
    let scheme = |scheme: Scheme, types: &[&str]| {
        let labels: Vec<String> = types.iter().map(|s| s.to_string()).collect();
        Constraints::from_scheme(scheme, &scheme.tag_set(&labels))
    };
    vec![
        ("none 3", Constraints::none(3)),
        ("none 4", Constraints::none(4)),
        ("none 5", Constraints::none(5)),
        ("BIO 1 type", scheme(Scheme::Iob2, &["X"])),
        ("BIO 2 types", scheme(Scheme::Iob2, &["X", "Y"])),
        ("IOB1 2 types", scheme(Scheme::Iob1, &["X", "Y"])),
        ("BIOES 1 type", scheme(Scheme::Bioes, &["X"])),
        ("BMES 1 type", scheme(Scheme::Bmes, &["X"])),
        ("one span", one_span::constraints()),
    ]
}

/// A path's score under host scores, summed in the order the recursions
/// sum it (start + em, then + trans + em per position, then + end), so
/// equal to theirs bit for bit. 0 for the empty path.
fn host_path_score(s: &host::Scores, em: &[f64], path: &[usize]) -> f64 {
    let (Some(&first), Some(&last)) = (path.first(), path.last()) else { return 0.0 };
    let t = s.t;
    let mut score = s.start[first] + em[first];
    for i in 1..path.len() {
        score += s.trans[path[i - 1] * t + path[i]];
        score += em[i * t + path[i]];
    }
    score + s.end[last]
}

/// Every allowed path with its score, best first; ties by the documented
/// rule (tags compared from the last position backwards, lower first).
fn brute_ranking(s: &host::Scores, cons: &Constraints, em: &[f64]) -> Vec<(Vec<usize>, f64)> {
    let n = em.len() / s.t;
    let mut ranked: Vec<(Vec<usize>, f64)> = all_paths(s.t, n)
        .into_iter()
        .filter(|p| cons.path_allowed(p))
        .map(|p| {
            let score = host_path_score(s, em, &p);
            (p, score)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then_with(|| a.0.iter().rev().cmp(b.0.iter().rev())));
    ranked
}

/// `k_best` for k = 1, 2, 5, all and all + 3 against the brute-force ranking.
fn check_k_best(s: &host::Scores, cons: &Constraints, em: &[f64], what: &str) {
    let want = brute_ranking(s, cons, em);
    let all = want.len();
    let n = em.len() / s.t;
    assert_eq!(host::count_paths(s, n), all as u128, "{what}: count_paths");
    let everything = host::k_best(s, em, all + 3);
    for k in [1, 2, 5, all, all + 3] {
        let got = host::k_best(s, em, k);
        assert_eq!(got.len(), k.min(all), "{what}: k = {k} gives min(k, {all}) paths");
        assert_eq!(got[..], everything[..got.len()], "{what}: k = {k} is a prefix of the full ranking");
        for (r, ((p, sc), (wp, wsc))) in got.iter().zip(&want).enumerate() {
            assert_eq!(p, wp, "{what}: k = {k}, path {r}");
            assert!((sc - wsc).abs() <= 1e-9, "{what}: k = {k}, score {r}: {sc} vs {wsc}");
            assert!(cons.path_allowed(p), "{what}: forbidden path {p:?}");
        }
    }
    assert_eq!(everything[0].0, host::viterbi(s, em), "{what}: the best path is Viterbi's");
}

#[test]
fn k_best_matches_brute_force() {
    let dev = Default::default();
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    for (name, cons) in k_best_constraints() {
        let t = cons.num_tags();
        for seed in 0..6 {
            // Emissions rounded to f32 and back, as `Crf::k_best_host` sees them.
            let case = random_case(&mut rng, t, &[0, 1, 2, 3, 4, 5], 3.0);
            let scores = crf_of::<TB>(&case, &cons, &dev).host_scores();
            for sent in &case.sents {
                let em: Vec<f64> = sent.iter().flatten().map(|&x| x as f32 as f64).collect();
                check_k_best(&scores, &cons, &em, &format!("{name}, seed {seed}, n = {}", sent.len()));
            }
        }
    }
}

#[test]
fn k_best_orders_exact_ties_by_the_documented_rule() {
    // Integer scores in {-1, 0, 1}: many exact ties, every sum exact.
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for (name, cons) in k_best_constraints() {
        let t = cons.num_tags();
        for seed in 0..4 {
            let mut ints = |len: usize| (0..len).map(|_| rng.random_range(-1i32..=1) as f64).collect::<Vec<f64>>();
            let pen = |ok: bool| if ok { 0.0 } else { FORBIDDEN as f64 };
            let trans = ints(t * t).iter().zip(cons.trans.iter().flatten()).map(|(x, &ok)| x + pen(ok)).collect();
            let start = ints(t).iter().zip(&cons.start).map(|(x, &ok)| x + pen(ok)).collect();
            let end = ints(t).iter().zip(&cons.end).map(|(x, &ok)| x + pen(ok)).collect();
            let scores = host::Scores::new(t, trans, start, end);
            for n in 0..=5 {
                // Half the sentences all zeros: every allowed path ties with the same transitions.
                let em = if seed % 2 == 0 { vec![0.0; n * t] } else { ints(n * t) };
                check_k_best(&scores, &cons, &em, &format!("ties, {name}, seed {seed}, n = {n}"));
            }
        }
    }
}

#[test]
fn k_best_host_gives_probabilities_of_the_brute_force_distribution() {
    let dev = Default::default();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for (name, cons) in k_best_constraints() {
        let t = cons.num_tags();
        for seed in 0..3 {
            let case = random_case(&mut rng, t, &[0, 1, 2, 3, 4, 5], 3.0);
            let crf = crf_of::<TB>(&case, &cons, &dev);
            let scores = crf.host_scores();
            let ems: Vec<Vec<f32>> =
                case.sents.iter().map(|s| s.iter().flatten().map(|&x| x as f32).collect()).collect();
            let refs: Vec<&[f32]> = ems.iter().map(Vec::as_slice).collect();
            let all = crf.k_best_host(&refs, usize::MAX);
            let top2 = crf.k_best_host(&refs, 2);
            assert_eq!(crf.decode_host(&refs), all.iter().map(|ps| ps[0].0.clone()).collect::<Vec<_>>());
            for (s, em) in ems.iter().enumerate() {
                let what = format!("{name}, seed {seed}, n = {}", case.sents[s].len());
                let em: Vec<f64> = em.iter().map(|&x| x as f64).collect();
                let want = brute_ranking(&scores, &cons, &em);
                let log_z = log_sum_exp_of(want.iter().map(|w| w.1));
                assert_eq!(all[s].len(), want.len(), "{what}: every allowed path");
                assert_eq!(top2[s][..], all[s][..want.len().min(2)], "{what}: k = 2");
                for ((p, prob), (wp, wsc)) in all[s].iter().zip(&want) {
                    assert_eq!(p, wp, "{what}");
                    let want_prob = (wsc - log_z).exp();
                    assert!((prob - want_prob).abs() <= 1e-9, "{what}: P({p:?}) = {prob} vs {want_prob}");
                }
                let total: f64 = all[s].iter().map(|(_, p)| p).sum();
                assert!((total - 1.0).abs() <= 1e-6, "{what}: probabilities sum to {total}");
            }
        }
    }
}

fn log_sum_exp_of(x: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = x.clone().fold(f64::NEG_INFINITY, f64::max);
    m + x.map(|v| (v - m).exp()).sum::<f64>().ln()
}

#[test]
fn k_best_edge_cases() {
    let (_, cons) = bioes(&["X"]);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let case = random_case(&mut rng, 5, &[3], 1.0);
    let crf = crf_of::<TB>(&case, &cons, &Default::default());
    let s = crf.host_scores();
    let em: Vec<f64> = case.sents[0].iter().flatten().copied().collect();
    assert!(host::k_best(&s, &em, 0).is_empty(), "k = 0: no path");
    assert_eq!(host::k_best(&s, &[], 3), vec![(vec![], 0.0)], "n = 0: the one empty path");
    assert_eq!(host::count_paths(&s, 0), 1);
    assert_eq!(crf.k_best_host(&[&[]], 4), vec![vec![(vec![], 1.0)]]);
    // BIOES over one type at n = 1: only O and S-X.
    assert_eq!(host::count_paths(&s, 1), 2);
    assert_eq!(host::k_best(&s, &em[..5], 10).len(), 2);
    // Saturation: 2^127 paths of 127 tokens over two free tags, 2^128 saturates.
    let free = host::Scores::new(2, vec![0.0; 4], vec![0.0; 2], vec![0.0; 2]);
    assert_eq!(host::count_paths(&free, 127), 1u128 << 127);
    assert_eq!(host::count_paths(&free, 128), u128::MAX);
    assert_eq!(
        host::count_paths(
            &crf_of::<TB>(&random_case(&mut rng, 9, &[], 1.0), &bioes(&["X", "Y"]).1, &Default::default())
                .host_scores(),
            500
        ),
        u128::MAX
    );
    // Where forbidden is recognised: half of FORBIDDEN, and -inf too.
    assert!(host::allowed(-1.0e8) && !host::allowed(FORBIDDEN as f64 + 10.0) && !host::allowed(f64::NEG_INFINITY));
}

#[test]
#[should_panic(expected = "k must be at least 1")]
fn k_best_host_rejects_k_zero() {
    let crf = Crf::<TB>::new(&Constraints::none(3), 0.1, &Default::default());
    crf.k_best_host(&[&[0.0; 6]], 0);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn constrained_decoding_never_emits_an_illegal_sequence(
            seed in any::<u64>(), scheme_i in 0usize..4, n in 1usize..25, scale in 0.1f64..50.0
        ) {
            let scheme = [Scheme::Iob1, Scheme::Iob2, Scheme::Bioes, Scheme::Bmes][scheme_i];
            let tags = scheme.tag_set(&["A".into(), "B".into()]);
            let cons = Constraints::from_scheme(scheme, &tags);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let case = random_case(&mut rng, tags.len(), &[n, 1 + n / 2], scale);
            let dev = Default::default();
            let crf = crf_of::<TB>(&case, &cons, &dev);
            let (e, m) = batch::<TB>(&case, &dev);
            for path in crf.decode(e, m) {
                prop_assert!(cons.path_allowed(&path), "{:?}", path);
                let t: Vec<Tag> = path.iter().map(|&i| tags[i].clone()).collect();
                prop_assert_eq!(scheme.violations(&t), Some(0));
            }
        }

        #[test]
        fn k_best_paths_are_legal_distinct_and_ranked(
            seed in any::<u64>(), scheme_i in 0usize..4, n in 1usize..25, scale in 0.1f64..50.0, k in 1usize..12
        ) {
            let scheme = [Scheme::Iob1, Scheme::Iob2, Scheme::Bioes, Scheme::Bmes][scheme_i];
            let tags = scheme.tag_set(&["A".into(), "B".into()]);
            let cons = Constraints::from_scheme(scheme, &tags);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let case = random_case(&mut rng, tags.len(), &[n], scale);
            let crf = crf_of::<TB>(&case, &cons, &Default::default());
            let em: Vec<f32> = case.sents[0].iter().flatten().map(|&x| x as f32).collect();
            let best = &crf.k_best_host(&[&em], k)[0];
            let count = host::count_paths(&crf.host_scores(), n);
            prop_assert_eq!(best.len() as u128, count.min(k as u128));
            prop_assert_eq!(&best[0].0, &crf.decode_host(&[&em])[0]);
            for (r, (path, p)) in best.iter().enumerate() {
                prop_assert!(cons.path_allowed(path), "{:?}", path);
                prop_assert!(*p >= 0.0 && *p <= 1.0 + 1e-9, "probability {}", p);
                if r > 0 {
                    prop_assert!(*p <= best[r - 1].1, "ranked: {} after {}", p, best[r - 1].1);
                    prop_assert!(best[..r].iter().all(|(q, _)| q != path), "distinct");
                }
            }
            prop_assert!(best.iter().map(|(_, p)| p).sum::<f64>() <= 1.0 + 1e-6);
        }
    }
}

#[test]
fn a_tiny_linear_tagger_learns_a_toy_rule() {
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{AdamConfig, GradientsParams, Optimizer};

    // Rule: token 1 opens an X chunk, following 2s continue it, all else O.
    // Tags (BIO): 0 = O, 1 = B-X, 2 = I-X. The emissions only see the
    // current token, so I-X after O must be ruled out by transitions.
    #[derive(Module, Debug)]
    struct Tagger<B: Backend> {
        emit: Linear<B>,
        crf: Crf<B>,
    }
    let dev = Default::default();
    <AD as Backend>::seed(&dev, 7);
    let tags = Scheme::Iob2.tag_set(&["X".into()]);
    let cons = Constraints::from_scheme(Scheme::Iob2, &tags);
    let mut model = Tagger::<AD> { emit: LinearConfig::new(4, 3).init(&dev), crf: Crf::new(&cons, 0.1, &dev) };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let (b, l) = (16, 10);
    let mut toks = vec![0usize; b * l];
    let mut gold = vec![0i64; b * l];
    for s in 0..b {
        let mut inside = false;
        for i in 0..l {
            let tok = rng.random_range(0..4);
            toks[s * l + i] = tok;
            gold[s * l + i] = match (tok, inside) {
                (1, _) => {
                    inside = true;
                    1
                }
                (2, true) => 2,
                _ => {
                    inside = false;
                    0
                }
            };
        }
    }
    let mut onehot = vec![0f32; b * l * 4];
    for (k, &t) in toks.iter().enumerate() {
        onehot[k * 4 + t] = 1.0;
    }
    let x = Tensor::<AD, 3>::from_data(TensorData::new(onehot, [b, l, 4]), &dev);
    let y = Tensor::<AD, 2, Int>::from_data(TensorData::new(gold.clone(), [b, l]), &dev);
    let mask = Tensor::<AD, 2, Bool>::from_data(TensorData::new(vec![true; b * l], [b, l]), &dev);
    let mut opt = AdamConfig::new().init();
    let mut first = None;
    let mut last = 0.0;
    for _ in 0..200 {
        let loss = model.crf.nll(model.emit.forward(x.clone()), y.clone(), mask.clone(), Reduction::Mean);
        last = floats(loss.clone())[0];
        first.get_or_insert(last);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = opt.step(0.1, model, grads);
    }
    assert!(last < first.unwrap() * 0.1, "loss {first:?} → {last}");
    let decoded = model.crf.decode(model.emit.forward(x), mask);
    let flat: Vec<i64> = decoded.into_iter().flatten().map(|v| v as i64).collect();
    assert_eq!(flat, gold);
}
