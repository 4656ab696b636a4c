//! Training on the GPU path (burn-wgpu; in CI Mesa's software Vulkan
//! driver, lavapipe) gives the CPU's run. Three reference models (the
//! BiLSTM-CRF, the attention-CRF with relative positions, the QA pointer
//! reader over question [SEP] context), each at small sizes with every
//! dropout off, start from the same weights (drawn on the CPU from the
//! seed, copied to the GPU) and train two epochs through `Learner::step`,
//! the step `seqlab train` runs: on the GPU with its batches padded up to
//! bucket lengths, on the CPU without. Per-batch losses agree to 1e-3
//! relative, and dev F1 and every dev token's tag after each epoch are the
//! same. The BiLSTM-CRF's run
//! also counts the kernels CubeCL compiles: a repeated epoch compiles none.
//!
//! With the shipped dropout the two backends draw their initial weights
//! from different generators and their masks over differently padded
//! batches, so only the outcome can agree: `seqlab train --device wgpu`
//! and `--device cpu` reach dev F1 within 0.02 of each other.
//!
//! They need a GPU adapter, so `cargo test` lists them as ignored; CI
//! runs them on lavapipe: `cargo test --workspace --test wgpu_train --
//! --ignored` (`just test-wgpu`). The no-adapter error needs none and runs
//! with the rest. Built with the default `wgpu` feature.
#![cfg(feature = "wgpu")]

mod common;

use burn::backend::wgpu::WgpuDevice;
use burn::backend::{Autodiff, Flex, Wgpu};
use burn::module::Module;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use common::{ok, seqlab, squad, train_tokenizer, SMALL, SMALL_QA};
use corpus::batch::plan_batches;
use corpus::SplitName;
use encoders::ops::{SeqBackend, TrainBackend};
use runner::infer::{self, Request};
use runner::reporter::Silent;
use runner::setup::launch::{launch, Launch, TrainRequest};
use runner::setup::model::build_model;
use runner::train::average::Weighting;
use runner::train::step::{Learner, Opt, Outcome, TokenDropout};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

type Cpu = Autodiff<Flex>;
type Gpu = Autodiff<Wgpu>;

/// One test at a time: the kernel counter is the process's, and lavapipe
/// uses every core anyway. CubeCL is configured as `seqlab` configures it
/// (minimal autotuning) before any test touches the GPU.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    runner::bench::kernels::configure_cubecl();
    assert!(runner::bench::kernels::install(), "the kernel counter is this test binary's logger");
    guard
}

/// Every dropout off, no answer-window curriculum (the loop below trains
/// on whole examples, as `seqlab train` does after it), and the schedule of
/// a two-epoch run (`--epochs 2`: warm-up and decay over those epochs).
const NO_DROPOUT: &[&str] = &[
    "train.epochs=2",
    "model.features.dropout=0",
    "model.encoder.bilstm.dropout=0",
    "model.encoder.attention.dropout=0",
    "model.encoder.attention.attention_dropout=0",
    "train.word_dropout=0",
    "train.char_dropout=0",
    "train.answer_window=0",
];

fn config(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/configs").join(name)
}

/// A toy NER dataset of `sentences` sentences in `dir`.
fn toy(dir: &Path, sentences: usize) -> PathBuf {
    let data = dir.join("toy");
    let n = sentences.to_string();
    ok(seqlab(&["data", "toy", "--out", data.to_str().unwrap(), "--sentences", &n, "--seed", "5"]));
    data
}

/// A generated SQuAD-format dataset with its tokenizer in `dir`.
fn qa(dir: &Path) -> PathBuf {
    let data = dir.join("qa");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("train.json"), squad(32, 1, "t")).unwrap();
    std::fs::write(data.join("dev.json"), squad(16, 2, "d")).unwrap();
    std::fs::write(data.join("test.json"), squad(16, 3, "e")).unwrap();
    train_tokenizer(&data);
    data
}

/// The run `seqlab train --config CONFIG --data DATA` would train, with
/// `sizes` and every dropout off.
fn prepared(config_name: &str, data: &Path, out: &Path, sizes: &[&str]) -> Launch {
    let mut set: Vec<String> = sizes.iter().filter(|s| **s != "--set").map(|s| s.to_string()).collect();
    set.extend(NO_DROPOUT.iter().map(|s| s.to_string()));
    let req = TrainRequest {
        config: Some(config(config_name)),
        set,
        data: Some(data.to_path_buf()),
        seed: Some(3),
        out: Some(out.to_path_buf()),
        ..TrainRequest::default()
    };
    launch(req, true, &Silent).expect("the run prepares")
}

/// The initial weights `seqlab train` draws on the CPU from the run's seed, as a record.
fn initial_weights(run: &Launch) -> Vec<u8> {
    let cpu = Default::default();
    encoders::dropout::seed_all::<Cpu>(&cpu, run.cfg.seed);
    let model = build_model::<Cpu>(&run.cfg, &run.prep.vocabs, run.prep.pretrained.clone(), &cpu);
    Recorder::<Cpu>::record(&BinBytesRecorder::<FullPrecisionSettings>::default(), model.into_record(), ()).unwrap()
}

/// What two epochs gave: each batch's loss, dev F1 after each epoch, and
/// the kernels compiled in each epoch (then in a repeat of the last).
#[derive(Debug, Default)]
struct Trained {
    losses: Vec<f64>,
    dev_f1: Vec<f64>,
    /// Every dev token's predicted tag after each epoch (the same tags, not
    /// only the same F1, even where a short run tags no entity yet).
    dev_tags: Vec<Vec<String>>,
    compiled: Vec<usize>,
}

/// Kernels compiled so far in this process.
fn compiled() -> usize {
    runner::bench::kernels::counts().map_or(0, |c| c.compiled)
}

/// Trains `run` from `weights` for `epochs` epochs as `seqlab train`
/// does (batches planned from the seed, padded for the backend, the
/// learning-rate schedule, the weights' average), then repeats the last
/// epoch's batches once more when `repeat`.
fn train<B: TrainBackend>(run: &Launch, weights: &[u8], epochs: usize, repeat: bool, device: &B::Device) -> Trained
where
    B::InnerBackend: SeqBackend,
{
    let (cfg, prep, t) = (&run.cfg, &run.prep, &run.cfg.train);
    let record = Recorder::<B>::load(&BinBytesRecorder::<FullPrecisionSettings>::default(), weights.to_vec(), device);
    let model = build_model::<B>(cfg, &prep.vocabs, prep.pretrained.clone(), device).load_record(record.unwrap());
    let mut learner = Learner::new(model, Opt::<B>::new(cfg), TokenDropout::of(cfg, prep.vocabs.tokenization()))
        .averaging(Weighting::of(t), 0);
    let lengths: Vec<usize> = prep.train.iter().map(corpus::Example::len).collect();
    let total = plan_batches(&lengths, t.batch(), Some(0)).len() * t.epochs;
    let dev = prep.split(SplitName::Dev).expect("a dev split");
    let (mut out, mut step) = (Trained::default(), 0);
    for epoch in 1..=epochs + usize::from(repeat) {
        let planned = epoch.min(epochs) as u64;
        let batches = plan_batches(&lengths, t.batch(), Some(cfg.seed.wrapping_mul(1_000_003).wrapping_add(planned)));
        let before = compiled();
        for (b, ids) in batches.iter().enumerate() {
            let batch = encoders::input::pad_batch::<B>(&prep.train, ids);
            let lr = t.lr_at(step, total, epoch.min(epochs) - 1);
            match learner.step(&batch, (epoch * 1000 + b) as u64, lr, device).expect("the batch fits the tagger") {
                Outcome::Stepped(loss) => out.losses.push(loss),
                Outcome::Skipped(why) => panic!("epoch {epoch}, batch {b}: {why}"),
            }
            step += 1;
        }
        learner.end_epoch(epoch);
        let request = Request::tagging(cfg.data.windows()).with_answers(dev.qa.is_some());
        let tagged = infer::tag(&learner.evaluated(), &prep.vocabs, &dev.encoded, &request, device).unwrap().tagged;
        out.dev_f1.push(infer::score_predictions(&dev.sentences, &tagged).report().overall.f1);
        out.dev_tags.push(tagged.iter().flat_map(|t| t.tags.iter().map(|tag| tag.to_string())).collect());
        out.compiled.push(compiled() - before);
    }
    out
}

/// Trains `config_name` on the CPU and on wgpu from the same weights; checks
/// the losses and dev F1; returns the GPU run.
fn same_run_on_both(config_name: &str, data: &Path, sizes: &[&str], repeat: bool) -> Trained {
    let dir = tempfile::tempdir().unwrap();
    let run = prepared(config_name, data, &dir.path().join("run"), sizes);
    let weights = initial_weights(&run);
    let started = std::time::Instant::now();
    let cpu = train::<Cpu>(&run, &weights, 2, false, &Default::default());
    let cpu_seconds = started.elapsed().as_secs_f64();
    let started = std::time::Instant::now();
    let gpu = train::<Gpu>(&run, &weights, 2, repeat, &WgpuDevice::default());
    eprintln!(
        "{config_name}: {} batches; CPU {cpu_seconds:.1} s, wgpu {:.1} s; kernels compiled per epoch {:?}; \
         dev F1 cpu {:?} wgpu {:?}",
        cpu.losses.len(),
        started.elapsed().as_secs_f64(),
        gpu.compiled,
        cpu.dev_f1,
        gpu.dev_f1
    );
    let mut worst = 0f64;
    for (b, (g, c)) in gpu.losses.iter().zip(&cpu.losses).enumerate() {
        let rel = (g - c).abs() / c.abs().max(1e-6);
        assert!(rel <= 1e-3, "{config_name}: batch {b}: loss {g} on wgpu, {c} on the CPU ({rel:.2e} relative)");
        worst = worst.max(rel);
    }
    eprintln!("{config_name}: per-batch losses agree to {worst:.1e} relative at worst");
    assert_eq!(&gpu.dev_f1[..2], &cpu.dev_f1[..], "{config_name}: dev F1 after each epoch");
    assert_eq!(&gpu.dev_tags[..2], &cpu.dev_tags[..], "{config_name}: dev tags after each epoch");
    gpu
}

#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn bilstm_crf_trains_on_wgpu_as_on_the_cpu_and_a_repeated_epoch_compiles_no_kernel() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let gpu = same_run_on_both("bilstm-crf.toml", &toy(dir.path(), 48), SMALL, true);
    let [first, second, repeated] = gpu.compiled[..] else { panic!("three epochs: {:?}", gpu.compiled) };
    assert!(first > 0, "the first epoch compiles kernels (is the counter hearing CubeCL?)");
    assert!(second <= first, "epoch 2 meets fewer new shapes than epoch 1: {first} then {second}");
    assert_eq!(repeated, 0, "epoch 2's batches again compile nothing new");
}

#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn attention_crf_with_relative_positions_trains_on_wgpu_as_on_the_cpu() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    same_run_on_both("attention-relative-crf.toml", &toy(dir.path(), 48), SMALL, false);
}

#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn qa_pointer_reader_trains_on_wgpu_as_on_the_cpu() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let small: Vec<&str> =
        SMALL_QA.iter().copied().chain(["model.encoder.bilstm.hidden=16", "model.encoder.bilstm.layers=1"]).collect();
    same_run_on_both("qa-bilstm.toml", &qa(dir.path()), &small, false);
}

/// dev F1 of `seqlab train` on `device` (the shipped config's dropout).
fn dev_f1_of_seqlab_train(data: &Path, out: &Path, device: &str, epochs: &str) -> f64 {
    let cfg = config("bilstm-crf.toml");
    let mut args: Vec<String> = ["train", "--config", cfg.to_str().unwrap(), "--data", data.to_str().unwrap()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(
        ["--out", out.to_str().unwrap(), "--seed", "1", "--epochs", epochs, "--quiet", "--device", device]
            .map(String::from),
    );
    args.extend(SMALL.iter().map(|s| s.to_string()));
    ok(seqlab(&args));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    summary["dev"]["f1"].as_f64().expect("dev F1 in summary.json")
}

#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn seqlab_train_with_the_shipped_dropout_reaches_the_cpus_dev_f1_on_wgpu() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let data = toy(dir.path(), 160);
    let cpu = dev_f1_of_seqlab_train(&data, &dir.path().join("cpu"), "cpu", "4");
    let gpu = dev_f1_of_seqlab_train(&data, &dir.path().join("gpu"), "wgpu", "4");
    eprintln!("bilstm-crf.toml with its dropout, 4 epochs: dev F1 cpu {cpu:.4}, wgpu {gpu:.4}");
    assert!((gpu - cpu).abs() <= 0.02, "dev F1 {gpu} on wgpu against {cpu} on the CPU");
}

/// A binary built without the feature names the rebuild; this one, with
/// it, names the adapter it trains on.
#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn seqlab_names_the_adapter_it_runs_on() {
    let _one = one_at_a_time();
    let o = seqlab(&["bench", "crf", "--device", "wgpu", "--batch", "2", "--len", "4", "--tags", "3", "--iters", "1"]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(out.contains("wgpu (burn-wgpu): "), "the device line names the adapter: {out}");
}

/// No GPU adapter (here: the Vulkan loader pointed at no driver): a clear
/// error naming what was looked for and the software driver, no panic.
#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "Metal and DX12 adapters do not go through the Vulkan loader")]
fn no_adapter_is_a_clear_error() {
    let _one = one_at_a_time();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_seqlab"))
        .args(["bench", "crf", "--device", "wgpu", "--batch", "2", "--len", "4", "--iters", "1"])
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("no GPU adapter found") && err.contains("mesa-vulkan-drivers"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `seqlab bench attention --device wgpu` reports the allocator's own
/// memory (CubeCL's pool), and chunked attention needs a fraction of
/// dense attention's at length 1,024: dense holds the `[B, H, L, L]`
/// scores and weights (16 MiB each here), chunked one block of keys.
#[test]
#[ignore = "needs a GPU adapter (in CI: lavapipe): cargo test --workspace -- --ignored"]
fn bench_attention_on_wgpu_reports_the_allocators_memory() {
    let _one = one_at_a_time();
    let peak = |imp: &str| -> serde_json::Value {
        let args = ["bench", "attention", "--device", "wgpu", "--impl", imp, "--seq-len", "1024", "--batch", "1"];
        let out = ok(seqlab(
            &[&args[..], &["--heads", "4", "--d-model", "64", "--train", "--iters", "1", "--json"]].concat(),
        ));
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let (dense, chunked) = (peak("dense"), peak("chunked"));
    eprintln!("bench attention on wgpu, L 1024: dense {dense}, chunked {chunked}");
    for v in [&dense, &chunked] {
        assert_eq!(v["memory"], "device allocator pool", "{v}");
    }
    let (d, c) = (dense["peak_bytes"].as_f64().unwrap(), chunked["peak_bytes"].as_f64().unwrap());
    assert!(d >= (4 * 1024 * 1024 * 4) as f64, "dense holds at least its scores: {d} bytes");
    assert!(c > 0.0 && c * 4.0 < d, "chunked {c} bytes against dense {d}");
}
