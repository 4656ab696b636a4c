//! The precision of the CPU backend's linear layers at inference: f32 (the
//! default), or bf16 products summed in f32 ([`super::bf16_gemm`]) on CPUs
//! with AVX-512 BF16. A process-wide switch (`seqlab --precision`), read by
//! burn-flex's [`super::flex_linear`] on every call: only the backend
//! without autodiff runs that path, so training steps stay f32 whatever it
//! says.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// How the linear layers multiply at inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// f32 inputs and sums.
    #[default]
    F32,
    /// Inputs rounded to bf16 (round to nearest even), sums in f32.
    Bf16,
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        })
    }
}

static BF16: AtomicBool = AtomicBool::new(false);

/// Sets the precision for the rest of the process. bf16 needs a CPU with
/// AVX-512 BF16; on one without, this says so and leaves f32.
pub fn set(precision: Precision) -> Result<(), String> {
    if precision == Precision::Bf16 && !super::bf16_gemm::available() {
        return Err("bf16 products need a CPU with AVX-512 BF16 (avx512_bf16), which this one lacks; use f32".into());
    }
    BF16.store(precision == Precision::Bf16, Ordering::Relaxed);
    Ok(())
}

/// The precision in force.
pub fn current() -> Precision {
    if BF16.load(Ordering::Relaxed) {
        Precision::Bf16
    } else {
        Precision::F32
    }
}
