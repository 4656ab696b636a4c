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
            runner::bench::kernels::configure_cubecl();
            job.run::<Autodiff<burn::backend::Cuda>>(Default::default(), name)
        }
        #[cfg(not(feature = "cuda"))]
        DeviceArg::Cuda => anyhow::bail!(
            "this seqlab was built without CUDA: rebuild with `cargo build --release -p runner --features cuda`"
        ),
        #[cfg(feature = "wgpu")]
        DeviceArg::Wgpu => {
            runner::bench::kernels::configure_cubecl();
            let device = burn::backend::wgpu::WgpuDevice::default();
            let adapter = wgpu_adapter(&device)?;
            job.run::<Autodiff<burn::backend::Wgpu>>(device, &format!("{name}: {adapter}"))
        }
        #[cfg(not(feature = "wgpu"))]
        DeviceArg::Wgpu => anyhow::bail!(
            "this seqlab was built without wgpu (Vulkan, Metal, DX12): rebuild with \
             `cargo build --release -p runner --features wgpu`"
        ),
    }
}

/// Opens the machine's preferred GPU adapter for `device` (Vulkan on Linux
/// and Windows, Metal on macOS, DX12 on Windows) and names it, or says
/// clearly that there is none. burn-wgpu panics when it finds no adapter;
/// that panic is caught here, before any tensor exists, and its message
/// kept for the error.
#[cfg(feature = "wgpu")]
fn wgpu_adapter(device: &burn::backend::wgpu::WgpuDevice) -> Result<String> {
    use burn::backend::wgpu::{graphics::AutoGraphicsApi, init_setup, RuntimeOptions};
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let setup = std::panic::catch_unwind(|| init_setup::<AutoGraphicsApi>(device, RuntimeOptions::default()));
    std::panic::set_hook(quiet);
    match setup {
        Ok(setup) => {
            let info = setup.adapter.get_info();
            Ok(format!("{:?} on {} ({:?}, driver {})", setup.backend, info.name, info.device_type, info.driver))
        }
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("no reason given");
            anyhow::bail!(
                "--device wgpu: no GPU adapter found ({why}). Looked for a Vulkan device on Linux and Windows, \
                 Metal on macOS, DX12 on Windows. Is the GPU's driver installed (`vulkaninfo --summary` lists \
                 Vulkan devices)? On a machine without a GPU, Mesa's software Vulkan driver runs the same \
                 kernels on the CPU (slowly): `apt-get install mesa-vulkan-drivers` on Debian and Ubuntu"
            )
        }
    }
}
