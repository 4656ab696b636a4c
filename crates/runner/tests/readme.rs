//! The README is the front door: short enough to read in ten minutes, with
//! every relative link (to the result documents, the docs, configs and
//! benchmarks) pointing at a file that exists. The same link check covers
//! `experiments/*.md` and `docs/*.md`, whose links are relative to their
//! own folders.

use std::path::{Path, PathBuf};

/// The most lines the README may have.
const MAX_README_LINES: usize = 300;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The targets of `[text](target)` links in `markdown`, without `#anchor`s,
/// leaving out web addresses and in-page anchors.
fn relative_links(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = markdown;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or("").trim();
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
    }
    out
}

#[test]
fn the_readme_is_short() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= MAX_README_LINES,
        "README.md has {lines} lines (at most {MAX_README_LINES}); results go into experiments/"
    );
    assert!(text.contains("cargo test --workspace --locked"), "the README names the test command CI runs");
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let root = root();
    let mut files = vec![root.join("README.md")];
    for dir in ["experiments", "docs"] {
        let mut md: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        md.sort();
        files.extend(md);
    }
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for link in relative_links(&text) {
            // Run folders are written by commands, not committed.
            if link.contains("runs/") {
                continue;
            }
            if !file.parent().unwrap().join(&link).exists() {
                broken.push(format!("{}: {link}", file.strip_prefix(&root).unwrap_or(file).display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to missing files:\n{}", broken.join("\n"));
}

#[test]
fn relative_links_are_found() {
    let md = "see [a](experiments/qa.md#x), [b](https://burn.dev), [c](#top) and [d](docs/gpu.md)";
    assert_eq!(relative_links(md), ["experiments/qa.md", "docs/gpu.md"]);
}
