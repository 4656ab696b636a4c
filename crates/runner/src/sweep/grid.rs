//! A grid file (`GRID.toml`) and the named runs it expands to.
//!
//! ```toml
//! out = "experiments/runs/positions/resume"   # the sweep folder
//! name = "resume"                              # run names start with it
//! configs = ["experiments/configs/attention-relative-crf.toml"]
//! data = ["../shared/datasets/resume-ner"]     # dataset folders (default: each config's)
//! seeds = [1, 2, 3]
//! set = ["train.epochs=80"]                    # --set for every run
//! threads = 1                                  # per run
//! lanes = 2                                    # runs side by side on this machine
//!
//! [[axis]]                                     # one --set key, several values
//! key = "model.encoder.attention.position"
//! values = ["relative", "rope", "alibi"]
//! ```
//!
//! A run is named `NAME-[CONFIG]-[DATA]-AXIS…-sSEED`: the config's file stem
//! when the grid has several configs (or no `name`), the dataset folder's
//! name when it has several, then each axis's label (its `prefix` and the
//! value, or the value's entry in `labels`). Its `name` setting (what
//! `seqlab compare` groups seeds by) is the run name without `-sSEED`.
//! Runs come seed by seed: every setting's first seed before any second.
//!
//! `[[part]]` tables make one grid of several: each part takes what it
//! does not set from the top level (the QA comparison trains two configs on
//! five seeds and two more on three). Paths are read from the directory
//! `seqlab sweep` runs in.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One part of a grid file; the top level is a part too.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    out: Option<PathBuf>,
    name: Option<String>,
    configs: Option<Vec<PathBuf>>,
    data: Option<Vec<PathBuf>>,
    seeds: Option<Vec<u64>>,
    set: Option<Vec<String>>,
    axis: Option<Vec<Axis>>,
    threads: Option<usize>,
    lanes: Option<usize>,
    device: Option<String>,
    compare: Option<PathBuf>,
    slurm: Option<SlurmSpec>,
}

impl Spec {
    /// `self`, with what it leaves out taken from `base`.
    fn over(self, base: &Spec) -> Spec {
        Spec {
            out: self.out.or(base.out.clone()),
            name: self.name.or(base.name.clone()),
            configs: self.configs.or(base.configs.clone()),
            data: self.data.or(base.data.clone()),
            seeds: self.seeds.or(base.seeds.clone()),
            set: self.set.or(base.set.clone()),
            axis: self.axis.or(base.axis.clone()),
            threads: self.threads.or(base.threads),
            lanes: self.lanes.or(base.lanes),
            device: self.device.or(base.device.clone()),
            compare: self.compare.or(base.compare.clone()),
            slurm: self.slurm.or(base.slurm.clone()),
        }
    }
}

/// `[[axis]]`: a config key (or several, set together) and its values.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Axis {
    key: OneOrMany,
    values: Vec<toml::Value>,
    /// A name per value for the run names (default: the value itself).
    labels: Option<Vec<String>>,
    /// Written before each label in the run names (`h` gives `h8`).
    #[serde(default)]
    prefix: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn keys(&self) -> Vec<String> {
        match self {
            OneOrMany::One(k) => vec![k.clone()],
            OneOrMany::Many(ks) => ks.clone(),
        }
    }
}

/// `[slurm]`: how `--on slurm` submits (each also a command-line option).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlurmSpec {
    pub partition: Option<String>,
    /// sbatch's `--time` (e.g. `"2:00:00"`).
    pub time: Option<String>,
    /// sbatch's `--gres` (default `gpu:1` when the device is a GPU).
    pub gres: Option<String>,
    /// At most this many tasks of the array at once (`--array=…%N`).
    pub max_parallel: Option<usize>,
    /// More sbatch options, as written on its command line.
    #[serde(default)]
    pub extra: Vec<String>,
}

/// A grid file, expanded.
#[derive(Clone, Debug)]
pub struct Grid {
    /// The grid file.
    pub file: PathBuf,
    /// The sweep folder: one run folder per run, `logs/`, the comparison.
    pub out: PathBuf,
    /// Where `seqlab compare` of the finished runs writes (default: `out`).
    pub compare: PathBuf,
    /// Threads of each run.
    pub threads: usize,
    /// Runs side by side with `--on local`.
    pub lanes: usize,
    /// `--device` of every run.
    pub device: String,
    pub slurm: SlurmSpec,
    pub runs: Vec<PlannedRun>,
}

/// One run of a grid.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRun {
    /// Its folder's name under the sweep folder.
    pub name: String,
    /// Its `name` setting: `name` without the seed.
    pub group: String,
    pub config: PathBuf,
    /// Dataset folder (`None`: the config's `data.dir`).
    pub data: Option<PathBuf>,
    pub seed: u64,
    /// `key=value` overrides: the grid's `set`, then one per axis key.
    pub set: Vec<String>,
}

impl Grid {
    /// Reads and expands `file`; `out` replaces the file's `out`.
    pub fn load(file: &Path, out: Option<&Path>) -> Result<Grid> {
        let text = corpus::io::read_text(file)?;
        Grid::parse(&text, file, out).with_context(|| format!("{}", file.display()))
    }

    /// Expands the text of a grid file named `file`.
    pub fn parse(text: &str, file: &Path, out: Option<&Path>) -> Result<Grid> {
        let mut table: toml::Table = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        let parts = match table.remove("part") {
            None => Vec::new(),
            Some(v) => Vec::<Spec>::deserialize(v).map_err(|e| anyhow::anyhow!("[[part]]: {}", e.message()))?,
        };
        let top = Spec::deserialize(toml::Value::Table(table)).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        let stem = file.file_stem().map_or("sweep".into(), |s| s.to_string_lossy().to_string());
        let out = match (out, &top.out) {
            (Some(o), _) => o.to_path_buf(),
            (None, Some(o)) => o.clone(),
            (None, None) => PathBuf::from("experiments/runs/sweeps").join(&stem),
        };
        let parts =
            if parts.is_empty() { vec![top.clone()] } else { parts.into_iter().map(|p| p.over(&top)).collect() };
        for (i, p) in parts.iter().enumerate() {
            if p.out.as_ref().is_some_and(|o| Some(o) != top.out.as_ref()) {
                bail!("[[part]] {}: `out` is the sweep's, set at the top level only", i + 1);
            }
        }
        let mut runs = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let at = if parts.len() > 1 { format!("[[part]] {}: ", i + 1) } else { String::new() };
            runs.extend(expand(part).map_err(|e| anyhow::anyhow!("{at}{e:#}"))?);
        }
        check_unique(&runs)?;
        let threads = top.threads.unwrap_or(1);
        let lanes = top.lanes.unwrap_or(1);
        if threads == 0 || lanes == 0 {
            bail!("`threads` and `lanes` must be at least 1");
        }
        Ok(Grid {
            file: file.to_path_buf(),
            compare: top.compare.clone().unwrap_or_else(|| out.clone()),
            out,
            threads,
            lanes,
            device: top.device.clone().unwrap_or_else(|| "cpu".into()),
            slurm: top.slurm.clone().unwrap_or_default(),
            runs,
        })
    }

    /// The grid file's name without `.toml`.
    pub fn stem(&self) -> String {
        self.file.file_stem().map_or("sweep".into(), |s| s.to_string_lossy().to_string())
    }

    /// The folder of `run`.
    pub fn dir(&self, run: &PlannedRun) -> PathBuf {
        self.out.join(&run.name)
    }

    /// The log of `run`'s training (every attempt appended).
    pub fn log(&self, run: &PlannedRun) -> PathBuf {
        self.out.join("logs").join(format!("{}.log", run.name))
    }

    /// The run named `name`.
    pub fn run(&self, name: &str) -> Result<&PlannedRun> {
        self.runs.iter().find(|r| r.name == name).with_context(|| {
            format!("{}: no run named {name} in this grid (seqlab sweep --dry-run lists them)", self.file.display())
        })
    }
}

/// The runs of one part: seeds × configs × datasets × each axis's values.
fn expand(part: &Spec) -> Result<Vec<PlannedRun>> {
    let configs = part.configs.clone().unwrap_or_default();
    if configs.is_empty() {
        bail!("`configs` is empty: name at least one config file");
    }
    let seeds = part.seeds.clone().unwrap_or_else(|| vec![1]);
    if seeds.is_empty() {
        bail!("`seeds` is empty");
    }
    let data: Vec<Option<PathBuf>> = match &part.data {
        None => vec![None],
        Some(d) if d.is_empty() => {
            bail!("`data` is empty: name a dataset folder, or leave `data` out for each config's")
        }
        Some(d) => d.iter().cloned().map(Some).collect(),
    };
    let cells = axis_cells(part.axis.as_deref().unwrap_or_default())?;
    let mut runs = Vec::new();
    for &seed in &seeds {
        for config in &configs {
            for d in &data {
                for cell in &cells {
                    runs.push(planned(part, config, configs.len() > 1, d, data.len() > 1, cell, seed));
                }
            }
        }
    }
    Ok(runs)
}

/// One combination of the axes' values: (label, `key=value` settings).
type Cell = Vec<(String, Vec<String>)>;

/// Every combination of the axes' values, the first axis varying slowest.
fn axis_cells(axes: &[Axis]) -> Result<Vec<Cell>> {
    let mut cells: Vec<Cell> = vec![Vec::new()];
    for (i, axis) in axes.iter().enumerate() {
        let keys = axis.key.keys();
        if keys.is_empty() || keys.iter().any(|k| k.trim().is_empty()) {
            bail!("[[axis]] {}: `key` is empty", i + 1);
        }
        if axis.values.is_empty() {
            bail!("[[axis]] {} ({}): `values` is empty", i + 1, keys.join(", "));
        }
        if let Some(labels) = &axis.labels {
            if labels.len() != axis.values.len() {
                bail!(
                    "[[axis]] {} ({}): {} labels for {} values",
                    i + 1,
                    keys.join(", "),
                    labels.len(),
                    axis.values.len()
                );
            }
        }
        let mut next = Vec::new();
        for cell in &cells {
            for (j, value) in axis.values.iter().enumerate() {
                let label = axis.labels.as_ref().map_or_else(|| value_label(value), |l| l[j].clone());
                let sets = keys.iter().map(|k| format!("{}={value}", k.trim())).collect();
                let mut c = cell.clone();
                c.push((format!("{}{}", axis.prefix, label), sets));
                next.push(c);
            }
        }
        cells = next;
    }
    Ok(cells)
}

/// A value as it reads in a run name: a string without its quotes.
fn value_label(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn planned(
    part: &Spec,
    config: &Path,
    several_configs: bool,
    data: &Option<PathBuf>,
    several_data: bool,
    cell: &Cell,
    seed: u64,
) -> PlannedRun {
    let stem = |p: &Path| p.file_stem().map_or(String::new(), |s| s.to_string_lossy().to_string());
    let dir_name = |p: &Path| p.file_name().map_or(String::new(), |s| s.to_string_lossy().to_string());
    let mut parts: Vec<String> = Vec::new();
    match &part.name {
        Some(n) if !n.is_empty() => parts.push(n.clone()),
        Some(_) => {}
        None if !several_configs => parts.push(stem(config)),
        None => {}
    }
    if several_configs {
        parts.push(stem(config));
    }
    if let (true, Some(d)) = (several_data, data) {
        parts.push(dir_name(d));
    }
    parts.extend(cell.iter().map(|(label, _)| label.clone()));
    let group = if parts.is_empty() { stem(config) } else { slug(&parts.join("-")) };
    let mut set = part.set.clone().unwrap_or_default();
    set.extend(cell.iter().flat_map(|(_, s)| s.iter().cloned()));
    PlannedRun { name: format!("{group}-s{seed}"), group, config: config.to_path_buf(), data: data.clone(), seed, set }
}

/// `s` with every character other than letters, digits and `._+=-` made `_`
/// (a run name is a folder name and a shell word).
fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "._+=-".contains(c) { c } else { '_' }).collect()
}

fn check_unique(runs: &[PlannedRun]) -> Result<()> {
    let mut seen = std::collections::HashMap::new();
    for r in runs {
        if let Some(first) = seen.insert(r.name.clone(), r) {
            bail!(
                "two runs would be named {} ({} with {:?} and {} with {:?}): give the axes labels, or the grid a `name`",
                r.name,
                first.config.display(),
                first.set,
                r.config.display(),
                r.set
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(text: &str) -> Result<Grid> {
        Grid::parse(text, Path::new("grids/g.toml"), None)
    }

    fn names(g: &Grid) -> Vec<&str> {
        g.runs.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn axes_multiply_seed_by_seed_with_the_first_axis_slowest() {
        let g = grid(
            r#"
            configs = ["c/attention-crf.toml"]
            seeds = [1, 2]
            set = ["train.epochs=3"]
            [[axis]]
            key = "model.encoder.attention.heads"
            values = [8, 2]
            prefix = "h"
            [[axis]]
            key = "model.encoder.attention.attention_dropout"
            values = [0, 0.1]
            prefix = "d"
            "#,
        )
        .unwrap();
        assert_eq!(
            names(&g),
            [
                "attention-crf-h8-d0-s1",
                "attention-crf-h8-d0.1-s1",
                "attention-crf-h2-d0-s1",
                "attention-crf-h2-d0.1-s1",
                "attention-crf-h8-d0-s2",
                "attention-crf-h8-d0.1-s2",
                "attention-crf-h2-d0-s2",
                "attention-crf-h2-d0.1-s2",
            ]
        );
        let r = &g.runs[1];
        assert_eq!(r.group, "attention-crf-h8-d0.1");
        assert_eq!(r.seed, 1);
        assert_eq!(
            r.set,
            ["train.epochs=3", "model.encoder.attention.heads=8", "model.encoder.attention.attention_dropout=0.1"]
        );
        assert_eq!(r.data, None);
        // Defaults: the folder from the file's name, one lane of one thread, the cpu.
        assert_eq!(g.out, Path::new("experiments/runs/sweeps/g"));
        assert_eq!(g.compare, g.out);
        assert_eq!((g.threads, g.lanes, g.device.as_str()), (1, 1, "cpu"));
        assert_eq!(g.dir(r), Path::new("experiments/runs/sweeps/g/attention-crf-h8-d0.1-s1"));
        assert_eq!(g.log(r), Path::new("experiments/runs/sweeps/g/logs/attention-crf-h8-d0.1-s1.log"));
    }

    #[test]
    fn names_carry_the_config_and_data_only_where_they_vary() {
        let g = grid(
            r#"
            name = "pos"
            out = "runs/x"
            configs = ["a/qa-cross.toml", "a/qa-concat-self.toml"]
            data = ["d/squad-split", "d/cmrc-split"]
            "#,
        )
        .unwrap();
        assert_eq!(
            names(&g),
            [
                "pos-qa-cross-squad-split-s1",
                "pos-qa-cross-cmrc-split-s1",
                "pos-qa-concat-self-squad-split-s1",
                "pos-qa-concat-self-cmrc-split-s1"
            ]
        );
        assert_eq!(g.runs[1].data.as_deref(), Some(Path::new("d/cmrc-split")));
        assert_eq!(g.out, Path::new("runs/x"));
        // Several configs and no name: the config's stem alone.
        let g = grid(r#"configs = ["a/qa-cross.toml", "a/qa-concat-self.toml"]"#).unwrap();
        assert_eq!(names(&g), ["qa-cross-s1", "qa-concat-self-s1"]);
        // An empty name: the axes alone; a string value reads without quotes
        // and is set as a TOML string.
        let g = grid(
            r#"
            name = ""
            configs = ["a/x.toml"]
            [[axis]]
            key = "model.encoder.attention.position"
            values = ["rope", "t5"]
            "#,
        )
        .unwrap();
        assert_eq!(names(&g), ["rope-s1", "t5-s1"]);
        assert_eq!(g.runs[0].set, [r#"model.encoder.attention.position="rope""#]);
    }

    #[test]
    fn labels_and_several_keys_per_axis() {
        let g = grid(
            r#"
            name = "squad"
            configs = ["a/qa-bidaf.toml"]
            seeds = [3]
            [[axis]]
            key = ["model.features.cue_dim", "model.features.aligned_dim"]
            values = [0]
            labels = ["nocues"]
            "#,
        )
        .unwrap();
        assert_eq!(names(&g), ["squad-nocues-s3"]);
        assert_eq!(g.runs[0].set, ["model.features.cue_dim=0", "model.features.aligned_dim=0"]);
        assert_eq!(g.runs[0].group, "squad-nocues");
    }

    #[test]
    fn parts_inherit_the_top_level() {
        let g = grid(
            r#"
            out = "experiments/runs/qa"
            name = ""
            data = ["datasets/squad-split"]
            threads = 1
            lanes = 2
            compare = "experiments/qa"
            [slurm]
            partition = "cpu"
            time = "1:00:00"
            [[part]]
            configs = ["c/qa-cross.toml", "c/qa-concat-self.toml"]
            seeds = [1, 2]
            [[part]]
            configs = ["c/qa-bilstm.toml"]
            seeds = [1]
            "#,
        )
        .unwrap();
        assert_eq!(names(&g), ["qa-cross-s1", "qa-concat-self-s1", "qa-cross-s2", "qa-concat-self-s2", "qa-bilstm-s1"]);
        assert!(g.runs.iter().all(|r| r.data.as_deref() == Some(Path::new("datasets/squad-split"))));
        assert_eq!((g.lanes, g.compare.as_path()), (2, Path::new("experiments/qa")));
        assert_eq!(g.slurm.partition.as_deref(), Some("cpu"));
        assert_eq!(g.run("qa-bilstm-s1").unwrap().config, Path::new("c/qa-bilstm.toml"));
        let e = g.run("qa-bilstm-s9").unwrap_err().to_string();
        assert!(e.contains("no run named qa-bilstm-s9"), "{e}");
        // --out wins over the file's.
        let g = Grid::parse(r#"configs = ["c/x.toml"]"#, Path::new("g.toml"), Some(Path::new("elsewhere"))).unwrap();
        assert_eq!(g.out, Path::new("elsewhere"));
    }

    #[test]
    fn mistakes_are_named() {
        let err = |text: &str| format!("{:#}", grid(text).unwrap_err());
        assert!(err(r#"configs = ["c/x.toml"]
            seed = [1]"#)
        .contains("unknown field `seed`"));
        assert!(err("seeds = [1]").contains("`configs` is empty"));
        assert!(err(r#"configs = ["c/x.toml"]
            seeds = []"#)
        .contains("`seeds` is empty"));
        let e = err(r#"configs = ["c/x.toml"]
            [[axis]]
            key = "train.lr"
            values = []"#);
        assert!(e.contains("[[axis]] 1 (train.lr): `values` is empty"), "{e}");
        let e = err(r#"configs = ["c/x.toml"]
            [[axis]]
            key = "train.lr"
            values = [0.1, 0.2]
            labels = ["a"]"#);
        assert!(e.contains("1 labels for 2 values"), "{e}");
        // Two values that read the same in a name.
        let e = err(r#"configs = ["c/x.toml"]
            [[axis]]
            key = "name"
            values = ["a/b", "a_b"]"#);
        assert!(e.contains("two runs would be named x-a_b-s1"), "{e}");
        let e = err(r#"configs = ["c/x.toml"]
            [[part]]
            seeds = [1]
            [[part]]
            seeds = [1]
            bogus = 2"#);
        assert!(e.contains("[[part]]") && e.contains("unknown field `bogus`"), "{e}");
        let e = err(r#"configs = ["c/x.toml"]
            [[part]]
            out = "elsewhere""#);
        assert!(e.contains("`out` is the sweep's"), "{e}");
        let e = err(r#"configs = ["c/x.toml"]
            lanes = 0"#);
        assert!(e.contains("at least 1"), "{e}");
    }
}
