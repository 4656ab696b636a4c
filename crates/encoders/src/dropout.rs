//! Dropout whose mask is cheap to draw.
//!
//! burn-nn's `Dropout` samples its Bernoulli mask element by element through
//! the backend's generic distribution sampler (ChaCha underneath) and then
//! multiplies twice; in the reference attention tagger that was a fifth of
//! a CPU training step. Here the mask is drawn on the host with SplitMix64
//! (two 32-bit draws per call), already scaled by `1 / (1 − p)`, and applied
//! with one multiplication. Same expectation, same inference behaviour (the
//! identity when autodiff is off or `p = 0`).
//!
//! The generator is per thread and reseeded by [`seed`]; the training loop
//! seeds it and the backend together ([`seed_all`]) with each batch's seed:
//! a run is reproducible from its seed and a resumed run draws the same masks.

use burn::module::{Content, DisplaySettings, ModuleDisplay};
use burn::prelude::*;
use burn::tensor::TensorData;
use std::cell::Cell;

thread_local! {
    static STATE: Cell<u64> = const { Cell::new(0x853C_49E6_748F_EA9B) };
    static OFF: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every dropout of this thread the identity, autodiff or
/// not: a model asked for gradients outside training (gradient × input)
/// must read its input as it does at inference.
pub fn disabled<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the flag back however `f` ends (a caught panic too).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            OFF.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OFF.with(|o| o.replace(true)));
    f()
}

/// Reseeds this thread's dropout masks.
pub fn seed(seed: u64) {
    STATE.with(|s| s.set(seed ^ 0x853C_49E6_748F_EA9B));
}

/// Seeds everything random in a forward pass: the backend's generator
/// (initialisation, `Tensor::random`) and this thread's dropout masks.
pub fn seed_all<B: Backend>(device: &B::Device, seed: u64) {
    B::seed(device, seed);
    self::seed(seed);
}

/// Runs `f` with this thread's dropout masks drawn from `seed`, then puts
/// the generator back as it was. Parts of a batch that run concurrently
/// each draw from their own seed this way; and when rayon runs one part on
/// a thread that is waiting inside another part's forward pass (work
/// stealing), the waiting part's masks come out as they would have.
pub fn with_seed<R>(seed: u64, f: impl FnOnce() -> R) -> R {
    let saved = STATE.with(Cell::get);
    self::seed(seed);
    let out = f();
    STATE.with(|s| s.set(saved));
    out
}

/// SplitMix64's increment: the state after `i` draws is `seed + i·GAMMA`.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output for one state.
#[inline(always)]
fn mix(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` mask values: 0 with probability `p`, else `1 / (1 − p)`. Each
/// 64-bit draw gives two values (its low, then its high 32 bits); the
/// `i`-th draw is `mix(seed + i·GAMMA)`, computed from `i` rather than from
/// the draw before, so that the loop vectorises (the same values as drawing
/// one after another).
pub fn mask_values(n: usize, p: f64) -> Vec<f32> {
    let threshold = (p * 4_294_967_296.0).min(4_294_967_295.0) as u32;
    let keep = (1.0 / (1.0 - p)) as f32;
    STATE.with(|state| {
        let base = state.get();
        let draws = n.div_ceil(2);
        let mut out = vec![0.0f32; 2 * draws];
        fill(&mut out, base, threshold, keep);
        state.set(base.wrapping_add((draws as u64).wrapping_mul(GAMMA)));
        out.truncate(n);
        out
    })
}

/// Writes the mask pairs of draws `1, 2, …` after `base` into `out`, with
/// AVX-512's 64-bit multiplies where the CPU has them.
fn fill(out: &mut [f32], base: u64, threshold: u32, keep: f32) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq") {
        // SAFETY: the features the function is compiled for are present.
        return unsafe { fill_avx512(out, base, threshold, keep) };
    }
    fill_portable(out, base, threshold, keep)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn fill_avx512(out: &mut [f32], base: u64, threshold: u32, keep: f32) {
    fill_portable(out, base, threshold, keep)
}

#[inline(always)]
fn fill_portable(out: &mut [f32], base: u64, threshold: u32, keep: f32) {
    for (i, pair) in out.chunks_exact_mut(2).enumerate() {
        let r = mix(base.wrapping_add((i as u64 + 1).wrapping_mul(GAMMA)));
        pair[0] = if (r as u32) < threshold { 0.0 } else { keep };
        pair[1] = if ((r >> 32) as u32) < threshold { 0.0 } else { keep };
    }
}

#[derive(Module, Clone, Debug)]
#[module(custom_display)]
pub struct Dropout {
    pub prob: f64,
}

impl Dropout {
    /// # Panics
    /// When `prob` is outside `[0, 1)` (configs are validated before this).
    pub fn new(prob: f64) -> Dropout {
        assert!((0.0..1.0).contains(&prob), "dropout probability must be in [0, 1), got {prob}");
        Dropout { prob }
    }

    pub fn forward<B: Backend, const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        match self.mask(x.dims(), &x.device()) {
            Some(mask) => x * mask,
            None => x,
        }
    }

    /// The mask [`Dropout::forward`] would multiply a tensor of this shape
    /// by (the same draws), or none where it is the identity.
    pub fn mask<B: Backend, const D: usize>(&self, shape: [usize; D], device: &B::Device) -> Option<Tensor<B, D>> {
        if self.prob == 0.0 || !B::ad_enabled(device) || OFF.with(Cell::get) {
            return None;
        }
        let n = shape.iter().product();
        Some(Tensor::from_data(TensorData::new(mask_values(n, self.prob), shape), device))
    }
}

impl ModuleDisplay for Dropout {
    fn custom_settings(&self) -> Option<DisplaySettings> {
        DisplaySettings::new().with_new_line_after_attribute(false).optional()
    }

    fn custom_content(&self, content: Content) -> Option<Content> {
        content.add("prob", &self.prob).optional()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, NdArray};

    #[test]
    fn masks_drop_the_asked_share_and_keep_the_expectation() {
        seed(7);
        for p in [0.1, 0.3, 0.5] {
            let m = mask_values(200_000, p);
            let dropped = m.iter().filter(|&&v| v == 0.0).count() as f64 / m.len() as f64;
            assert!((dropped - p).abs() < 0.005, "p {p}: dropped {dropped}");
            let mean = m.iter().map(|&v| v as f64).sum::<f64>() / m.len() as f64;
            assert!((mean - 1.0).abs() < 0.01, "p {p}: mean {mean}");
        }
    }

    /// The masks as drawn before the vectorised loop: one SplitMix64 step
    /// after another, two values per draw.
    fn sequential(state: &mut u64, n: usize, p: f64) -> Vec<f32> {
        let threshold = (p * 4_294_967_296.0).min(4_294_967_295.0) as u32;
        let keep = (1.0 / (1.0 - p)) as f32;
        let mut out = Vec::new();
        while out.len() < n {
            *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = *state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            let r = z ^ (z >> 31);
            for half in [r as u32, (r >> 32) as u32] {
                out.push(if half < threshold { 0.0 } else { keep });
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn masks_are_splitmix64_drawn_one_after_another() {
        // Odd and even lengths, the empty mask, and lengths past a vector's width.
        seed(11);
        let mut state = 11 ^ 0x853C_49E6_748F_EA9B;
        for (n, p) in [(1, 0.5), (0, 0.1), (2, 0.3), (17, 0.1), (1000, 0.5), (33, 0.9), (4097, 0.25)] {
            assert_eq!(mask_values(n, p), sequential(&mut state, n, p), "n {n}, p {p}");
        }
        let mut out = vec![0.0; 64];
        fill_portable(&mut out, 5, 1 << 31, 2.0);
        let mut state = 5;
        assert_eq!(out, sequential(&mut state, 64, 0.5), "the portable loop");
    }

    #[test]
    fn same_seed_same_mask_and_identity_without_autodiff() {
        seed(3);
        let a = mask_values(1001, 0.5);
        seed(3);
        assert_eq!(a, mask_values(1001, 0.5));
        assert_ne!(a, mask_values(1001, 0.5));
        // A scoped seed draws the same masks and leaves the outer stream as it was.
        seed(3);
        let first = mask_values(10, 0.5);
        let inner = with_seed(3, || mask_values(1001, 0.5));
        assert_eq!(inner, a);
        assert_eq!(first, a[..10], "the same first draws");
        assert_eq!(mask_values(991, 0.5), a[10..], "the outer stream goes on where it was");
        let device = Default::default();
        let x = Tensor::<NdArray, 2>::ones([4, 5], &device);
        let d = Dropout::new(0.5);
        d.forward(x.clone()).into_data().assert_eq(&x.into_data(), true);
        let y = d.forward(Tensor::<Autodiff<NdArray>, 2>::ones([40, 50], &device));
        let v: Vec<f32> = y.into_data().to_vec().unwrap();
        assert!(v.iter().all(|&e| e == 0.0 || e == 2.0) && v.contains(&0.0) && v.contains(&2.0));
        // Disabled: the identity with autodiff too, then dropping again.
        let ad = Tensor::<Autodiff<NdArray>, 2>::ones([40, 50], &device);
        let kept = disabled(|| d.forward(ad.clone()));
        kept.into_data().assert_eq(&ad.clone().into_data(), true);
        let v: Vec<f32> = d.forward(ad).into_data().to_vec().unwrap();
        assert!(v.contains(&0.0), "dropout is back after the closure");
    }
}
