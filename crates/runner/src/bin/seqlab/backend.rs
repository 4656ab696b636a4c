//! The backends `--device` picks: the only place that names concrete
//! backends. A [`Job`] is a command's work, generic over the backend.

use crate::cli::DeviceArg;
use anyhow::Result;
use burn::backend::Autodiff;
use encoders::ops::{SeqBackend, TrainBackend};

/// Work that runs on whichever backend the user picked.
pub trait Job {
    fn run<B: TrainBackend>(self, device: B::Device, device_name: &str) -> Result<()>
    where
        B::InnerBackend: SeqBackend;
}

/// Runs `job` on the backend named by `device`.
pub fn dispatch<J: Job>(device: DeviceArg, job: J) -> Result<()> {
    let name = device.name();
    if encoders::ops::precision::current() == encoders::ops::precision::Precision::Bf16 && device != DeviceArg::Cpu {
        anyhow::bail!("--precision bf16 runs on the cpu device (burn-flex) only, not {name}");
    }
    match device {
        DeviceArg::Cpu => job.run::<Autodiff<burn::backend::Flex>>(Default::default(), name),
        DeviceArg::Ndarray => job.run::<Autodiff<burn::backend::NdArray>>(Default::default(), name),
        #[cfg(feature = "cuda")]
        DeviceArg::Cuda => {
            cache_compiled_kernels();
            job.run::<Autodiff<burn::backend::Cuda>>(Default::default(), name)
        }
        #[cfg(not(feature = "cuda"))]
        DeviceArg::Cuda => anyhow::bail!("this seqlab was built without CUDA: rebuild with `--features cuda`"),
    }
}

/// Keeps the CUDA kernels that CubeCL compiles in an on-disk cache, so that
/// only the first process pays for them. A fresh process otherwise
/// JIT-compiles every kernel it meets through NVRTC, roughly 0.5–1 s each:
/// on an H200, 89 compilations in a BiLSTM-CRF's first minute, before a
/// single benchmark batch finished (benchmarks/results-gpu.md). CubeCL
/// leaves this cache off unless a `cubecl.toml` turns it on; here it goes
/// where CubeCL keeps its autotune results (`target/` of the nearest Cargo
/// project above the working directory, else the user's cache directory).
/// The rest of CubeCL's configuration is read as CubeCL reads it (a
/// `cubecl.toml` above the working directory, then its `CUBECL_*`
/// environment variables); a cache location named there wins.
#[cfg(feature = "cuda")]
fn cache_compiled_kernels() {
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let config = CubeClRuntimeConfig::from_current_dir().override_from_env();
        CubeClRuntimeConfig::set(with_kernel_cache(config));
    });
}

/// `config` with the compiled-kernel cache on, where it names none, and
/// matrix-product autotuning at its minimal level where it is at CubeCL's
/// default ("balanced") and `CUBECL_AUTOTUNE_LEVEL` is unset: each
/// candidate CubeCL tries is a kernel compiled for every new shape, which
/// a first run pays for before its first batch (`CUBECL_AUTOTUNE_LEVEL=
/// balanced`, or a `cubecl.toml`, brings it back).
#[cfg(feature = "cuda")]
fn with_kernel_cache(
    mut config: burn::cubecl::config::CubeClRuntimeConfig,
) -> burn::cubecl::config::CubeClRuntimeConfig {
    use burn::cubecl::config::autotune::AutotuneLevel;
    if config.compilation.cache.is_none() {
        config.compilation.cache = Some(burn::cubecl::config::cache::CacheConfig::Target);
    }
    if matches!(config.autotune.level, AutotuneLevel::Balanced) && std::env::var_os("CUBECL_AUTOTUNE_LEVEL").is_none() {
        config.autotune.level = AutotuneLevel::Minimal;
    }
    config
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::with_kernel_cache;
    use burn::cubecl::config::{cache::CacheConfig, CubeClRuntimeConfig};

    #[test]
    fn kernel_cache_and_minimal_autotuning_are_on_by_default_and_a_named_location_wins() {
        let on = with_kernel_cache(CubeClRuntimeConfig::default());
        assert!(matches!(on.compilation.cache, Some(CacheConfig::Target)));
        if std::env::var_os("CUBECL_AUTOTUNE_LEVEL").is_none() {
            assert!(matches!(on.autotune.level, burn::cubecl::config::autotune::AutotuneLevel::Minimal));
        }
        let named: CubeClRuntimeConfig = toml::from_str("[compilation]\ncache = { file = \"/tmp/kernels\" }").unwrap();
        let kept = with_kernel_cache(named);
        assert!(matches!(kept.compilation.cache, Some(CacheConfig::File(p)) if p.ends_with("kernels")));
    }
}
