//! A bf16 matrix product for inference on CPUs with AVX-512 BF16
//! (`vdpbf16ps`: AMD Zen 4 and later, Intel Cooper Lake and Sapphire Rapids
//! and later): `y [M, N] = x [M, K] · w [K, N] + b [N]` with `x` and `w`
//! rounded to bf16 (round to nearest even) and every product summed in
//! f32. One instruction multiplies 32 bf16 pairs and adds them into 16 f32
//! lanes, twice the products of an f32 FMA.
//!
//! Layouts. `w` is packed in panels of [`NR`] = 32 columns; in a panel, k
//! runs in pairs `(2p, 2p+1)` and each 32-bit word holds the pair of one
//! column, low half first: `panel[p][j] = w[2p][j] | w[2p+1][j] << 16`.
//! `x` becomes rows of the same pairs, so that one word of a row
//! broadcast to 16 lanes meets 16 columns' pairs. An odd K and the last
//! panel's missing columns are padded with zeros.
//!
//! The kernel keeps an [`MR`] × 32 block of the output in 2·MR registers
//! while k runs, then adds the bias and stores it (masked at the last
//! panel's edge).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;
use std::mem::MaybeUninit;

/// Output columns per panel: two 16-lane registers.
pub const NR: usize = 32;
/// Output rows per kernel call.
pub const MR: usize = 12;

/// Whether this CPU runs [`matmul`] (AVX-512 F and BF16).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `x` rounded to bf16 as the CPU's `vcvtne2ps2bf16` rounds it (round to
/// nearest even, subnormals to zero, a NaN stays a NaN), as the bits of the
/// bf16 value. The packing below converts with that instruction; this is
/// its definition, for the tests.
pub fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    if x.is_subnormal() {
        return ((bits >> 16) & 0x8000) as u16;
    }
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
    (rounded >> 16) as u16
}

/// The f32 value of a bf16.
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// A weight matrix `[K, N]` packed for [`matmul`].
#[derive(Debug, Clone)]
pub struct Packed {
    k: usize,
    n: usize,
    /// k pairs: ⌈K / 2⌉.
    pairs: usize,
    /// ⌈N / 32⌉ panels of `pairs × 32` words.
    words: Vec<u32>,
}

impl Packed {
    /// Packs a row-major `w [K, N]`. Panics unless [`available`].
    pub fn new(w: &[f32], k: usize, n: usize) -> Self {
        assert!(available(), "bf16 packing needs AVX-512 BF16");
        assert_eq!(w.len(), k * n, "weights [{k}, {n}]");
        let pairs = k.div_ceil(2);
        let mut words = vec![0u32; n.div_ceil(NR) * pairs * NR];
        for (panel, out) in words.chunks_exact_mut(pairs * NR).enumerate() {
            let (c0, cols) = (panel * NR, (n - panel * NR).min(NR));
            for (p, row) in out.chunks_exact_mut(NR).enumerate() {
                let even = &w[2 * p * n + c0..][..cols];
                // An odd K's last pair has a zero row.
                let odd = if 2 * p + 1 < k { &w[(2 * p + 1) * n + c0..][..cols] } else { &[] };
                // SAFETY: available() was checked; the slices bound every read
                // (pack_pair masks the lanes past their ends), row holds 32 words.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    pack_pair(even, odd, row)
                };
            }
        }
        Packed { k, n, pairs, words }
    }

    /// `[K, N]`.
    pub fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }
}

/// Element `i` of the result takes element `i / 2` of the low half (even
/// `i`) or of the high half (odd `i`): two 16-value rows interleaved.
const INTERLEAVE: [u16; 32] = {
    let mut idx = [0u16; 32];
    let mut i = 0;
    while i < 32 {
        idx[i] = (i / 2 + if i % 2 == 1 { 16 } else { 0 }) as u16;
        i += 1;
    }
    idx
};

/// `row[j] = bf16(even[j]) | bf16(odd[j]) << 16` for `j < 32`, zero where
/// a slice has no value `j`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pack_pair(even: &[f32], odd: &[f32], row: &mut [u32]) {
    debug_assert!(even.len() <= NR && odd.len() <= NR && row.len() == NR);
    let idx = _mm512_loadu_si512(INTERLEAVE.as_ptr().cast());
    for h in 0..2 {
        let lo =
            _mm512_maskz_loadu_ps(lane_mask(even.len().saturating_sub(16 * h)), even.as_ptr().wrapping_add(16 * h));
        let hi = _mm512_maskz_loadu_ps(lane_mask(odd.len().saturating_sub(16 * h)), odd.as_ptr().wrapping_add(16 * h));
        let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo)); // [lo as bf16 | hi as bf16]
        _mm512_storeu_si512(row.as_mut_ptr().add(16 * h).cast(), _mm512_permutexvar_epi16(idx, both));
    }
}

/// Rows of `x [M, K]` as bf16 pairs, `pairs` words per row: each row is
/// its values in bf16, in order (a word holds values 2p and 2p + 1).
fn pack_rows(x: &[f32], k: usize, pairs: usize) -> Vec<u32> {
    let mut words = vec![0u32; x.len() / k.max(1) * pairs];
    for (row, out) in x.chunks_exact(k).zip(words.chunks_exact_mut(pairs)) {
        for (values, out) in row.chunks(32).zip(out.chunks_mut(16)) {
            // SAFETY: available() was checked by matmul; values has at most 32
            // values and out room for their ⌈len/2⌉ words.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                pack_run(values, out)
            };
        }
    }
    words
}

/// Up to 32 values as bf16 into `⌈len / 2⌉` words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn pack_run(values: &[f32], out: &mut [u32]) {
    debug_assert!(values.len() <= 32 && out.len() >= values.len().div_ceil(2));
    let n = values.len();
    let lo = _mm512_maskz_loadu_ps(lane_mask(n), values.as_ptr());
    let hi = _mm512_maskz_loadu_ps(lane_mask(n.saturating_sub(16)), values.as_ptr().wrapping_add(16));
    let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
    _mm512_mask_storeu_epi32(out.as_mut_ptr().cast(), lane_mask(n.div_ceil(2)), both);
}

/// `y [M, N] = x [M, K] · w + bias`, row-major, `x` and `w` in bf16 and
/// the sums in f32. Rows are split among rayon's threads when
/// `parallel`. Panics unless [`available`].
pub fn matmul(x: &[f32], m: usize, w: &Packed, bias: Option<&[f32]>, parallel: bool) -> Vec<f32> {
    assert!(available(), "bf16 matmul needs AVX-512 BF16");
    let (k, n) = (w.k, w.n);
    assert_eq!(x.len(), m * k, "x [{m}, {k}]");
    if let Some(b) = bias {
        assert_eq!(b.len(), n, "bias [{n}]");
    }
    if m == 0 || n == 0 || k == 0 {
        return bias.map_or_else(|| vec![0.0; m * n], |b| b.repeat(m));
    }
    let a = pack_rows(x, k, w.pairs);
    // Every value is written by one kernel call below (no zero-fill pass).
    let mut y: Vec<f32> = Vec::with_capacity(m * n);
    // Blocks of whole kernel calls, so that a thread's rows share its B panels in cache.
    let rows_per_task = if parallel { MR * 4 } else { m };
    let task = |(t, out): (usize, &mut [MaybeUninit<f32>])| {
        let r0 = t * rows_per_task;
        let rows = out.len() / n;
        block(&a[r0 * w.pairs..(r0 + rows) * w.pairs], rows, w, bias, out);
    };
    let spare = &mut y.spare_capacity_mut()[..m * n];
    if parallel {
        use rayon::prelude::*;
        spare.par_chunks_mut(rows_per_task * n).enumerate().for_each(task);
    } else {
        spare.chunks_mut(rows_per_task * n).enumerate().for_each(task);
    }
    // SAFETY: the blocks cover rows 0..m, their panels columns 0..n, and
    // each kernel call stores all its rows × columns.
    unsafe { y.set_len(m * n) };
    y
}

/// One block of rows: every panel, [`MR`] rows at a time.
fn block(a: &[u32], rows: usize, w: &Packed, bias: Option<&[f32]>, out: &mut [MaybeUninit<f32>]) {
    let pairs = w.pairs;
    let mut padded = vec![0u32; MR * pairs];
    for (panel, b) in w.words.chunks_exact(pairs * NR).enumerate() {
        let c0 = panel * NR;
        let cols = (w.n - c0).min(NR);
        let mut bias_panel = [0f32; NR];
        if let Some(bias) = bias {
            bias_panel[..cols].copy_from_slice(&bias[c0..c0 + cols]);
        }
        for r0 in (0..rows).step_by(MR) {
            let take = (rows - r0).min(MR);
            let rows_a = if take == MR {
                &a[r0 * pairs..(r0 + MR) * pairs]
            } else {
                padded[..take * pairs].copy_from_slice(&a[r0 * pairs..(r0 + take) * pairs]);
                padded[take * pairs..].fill(0);
                &padded[..]
            };
            let dst = &mut out[r0 * w.n + c0..];
            // SAFETY: `available()` was checked by `matmul`; rows_a holds MR
            // rows of `pairs` words, b one panel of `pairs × NR` words, and
            // dst `take` rows of stride w.n with `cols` columns from its start
            // (the last one ends within `out`).
            #[cfg(target_arch = "x86_64")]
            unsafe {
                kernel(pairs, rows_a, b, &bias_panel, dst.as_mut_ptr().cast(), w.n, take, cols);
            }
        }
    }
}

/// `dst[r·ld + c] = Σ_p a[r][p] ⋅ b[p][c] + bias[c]` for `r < rows`, `c < cols`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    pairs: usize,
    a: &[u32],
    b: &[u32],
    bias: &[f32; NR],
    dst: *mut f32,
    ld: usize,
    rows: usize,
    cols: usize,
) {
    debug_assert!(a.len() >= MR * pairs && b.len() >= pairs * NR && rows <= MR && cols <= NR);
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    let (a, b) = (a.as_ptr(), b.as_ptr());
    for p in 0..pairs {
        let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * NR).cast()));
        let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(p * NR + 16).cast()));
        for (r, acc) in acc.iter_mut().enumerate() {
            let ar: __m512bh = std::mem::transmute(_mm512_set1_epi32(*a.add(r * pairs + p) as i32));
            acc[0] = _mm512_dpbf16_ps(acc[0], ar, b0);
            acc[1] = _mm512_dpbf16_ps(acc[1], ar, b1);
        }
    }
    let bias = [_mm512_loadu_ps(bias.as_ptr()), _mm512_loadu_ps(bias.as_ptr().add(16))];
    let masks = [lane_mask(cols.min(16)), lane_mask(cols.saturating_sub(16))];
    for (r, acc) in acc.iter().enumerate().take(rows) {
        let row = dst.add(r * ld);
        for h in 0..2 {
            // wrapping_add: with `cols` ≤ 16 the second half's address may lie
            // past the buffer; its mask is empty, so nothing is touched there.
            _mm512_mask_storeu_ps(row.wrapping_add(16 * h), masks[h], _mm512_add_ps(acc[h], bias[h]));
        }
    }
}

/// The first `n` of 16 lanes (all of them from 16 on).
#[cfg(target_arch = "x86_64")]
fn lane_mask(n: usize) -> __mmask16 {
    if n >= 16 {
        0xffff
    } else {
        (1u16 << n) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn bf16_rounding_is_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1).
        assert_eq!(to_bf16(1.0 + 2f32.powi(-8)), 0x3f80);
        // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
        assert_eq!(to_bf16(1.0 + 3.0 * 2f32.powi(-8)), 0x3f82);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(to_bf16(f32::INFINITY)), f32::INFINITY);
        for x in random(10_000, 3) {
            let y = from_bf16(to_bf16(x * 100.0));
            assert!((y - x * 100.0).abs() <= (x * 100.0).abs() * 2f32.powi(-8), "{x}");
        }
    }

    #[test]
    fn packing_rounds_as_the_definition_and_pads_with_zeros() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        // Ties to even both ways, a subnormal, -0, values that round up to
        // infinity or stay finite, a NaN, and random ones; K odd, N ragged.
        let special = [1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), 1e-40, -0.0, f32::MAX, -3.38e38, f32::NAN];
        let (k, n) = (7, 37);
        let mut w = random(k * n, 9);
        w[..special.len()].copy_from_slice(&special);
        w[k * n - 3..].copy_from_slice(&special[..3]);
        let packed = Packed::new(&w, k, n);
        let bits = |r: usize, c: usize| if r < k && c < n { u32::from(to_bf16(w[r * n + c])) } else { 0 };
        for (panel, words) in packed.words.chunks_exact(packed.pairs * NR).enumerate() {
            for (p, row) in words.chunks_exact(NR).enumerate() {
                for (j, &word) in row.iter().enumerate() {
                    let c = panel * NR + j;
                    assert_eq!(word, bits(2 * p, c) | bits(2 * p + 1, c) << 16, "pair {p}, column {c}");
                }
            }
        }
        let rows = pack_rows(&w, n, n.div_ceil(2));
        for (i, &v) in w.iter().enumerate() {
            let word = rows[i / n * n.div_ceil(2) + i % n / 2];
            assert_eq!((word >> (16 * (i % n % 2))) as u16, to_bf16(v), "value {i}");
        }
        assert_eq!(rows[n.div_ceil(2) - 1] >> 16, 0, "an odd row's last word is padded with zero");
    }

    /// Exactly what the kernel computes: bf16 inputs, sums in f64.
    fn reference(x: &[f32], w: &[f32], bias: Option<&[f32]>, m: usize, k: usize, n: usize) -> Vec<f64> {
        let r = |v: f32| f64::from(from_bf16(to_bf16(v)));
        let mut y = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|p| r(x[i * k + p]) * r(w[p * n + j])).sum();
                y[i * n + j] = dot + bias.map_or(0.0, |b| f64::from(b[j]));
            }
        }
        y
    }

    #[test]
    fn matches_bf16_rounded_products_on_ragged_shapes() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        // Rows not a multiple of MR, columns not of 32, odd and even K, one
        // row, one column, and a product large enough for several tasks.
        for (m, k, n) in [(1, 1, 1), (5, 7, 3), (13, 64, 33), (12, 2, 32), (30, 255, 70), (100, 96, 64)] {
            let (x, w, b) = (random(m * k, 1), random(k * n, 2), random(n, 3));
            let packed = Packed::new(&w, k, n);
            assert_eq!(packed.dims(), (k, n));
            for parallel in [false, true] {
                for bias in [Some(&b[..]), None] {
                    let ours = matmul(&x, m, &packed, bias, parallel);
                    let want = reference(&x, &w, bias, m, k, n);
                    for (i, (o, w)) in ours.iter().zip(&want).enumerate() {
                        // f32 sums of exact bf16 products: within K ulps of the sum's size.
                        let tol = 1e-6 * (k as f64) * (1.0 + w.abs());
                        assert!((f64::from(*o) - w).abs() <= tol, "[{m},{k},{n}] at {i}: {o} vs {w}");
                    }
                }
            }
        }
    }

    #[test]
    fn stays_within_bf16_error_of_the_f32_product() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        let (m, k, n) = (20, 256, 40);
        let (x, w) = (random(m * k, 4), random(k * n, 5));
        let ours = matmul(&x, m, &Packed::new(&w, k, n), None, false);
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k).map(|p| f64::from(x[i * k + p]) * f64::from(w[p * n + j])).sum();
                let scale: f64 = (0..k).map(|p| f64::from((x[i * k + p] * w[p * n + j]).abs())).sum();
                // Each rounded input is off by at most 2^-9 relative: each product by ~2^-8.
                assert!((f64::from(ours[i * n + j]) - exact).abs() <= scale * 2f64.powi(-8), "({i}, {j})");
            }
        }
    }
}
