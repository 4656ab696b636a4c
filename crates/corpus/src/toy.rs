//! A small, deterministic generated tagging dataset for tests and the
//! default run: several entity types, multi-token entities, ambiguous tokens
//! whose type depends on context (`Jordan` the person or the country, `中国`
//! the country or part of `中国银行`), and some long sentences.

use crate::dataset::DatasetToml;
use crate::error::Result;
use crate::io::write_atomic;
use crate::reader::format_columns;
use crate::tags::{Scheme, Span};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// English, word level, BIO.
    En,
    /// Chinese, character level, BMES.
    Zh,
}

impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        })
    }
}

impl std::str::FromStr for Lang {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "en" => Ok(Lang::En),
            "zh" => Ok(Lang::Zh),
            _ => Err(format!("unknown language `{s}`: expected en or zh")),
        }
    }
}

struct Lexicon {
    /// (type, entries); an entry's words are separated by spaces, and a `*`
    /// in an entry is replaced by a freshly generated name, so held-out
    /// splits hold many entities never seen in training.
    entities: &'static [(&'static str, &'static [&'static str])],
    /// What generated names are made of (syllables, or characters).
    syllables: &'static [&'static str],
    /// Templates: literal words and `{TYPE}` slots, space separated.
    templates: &'static [&'static str],
    /// Clauses joined into long sentences.
    joiner: &'static str,
}

const EN: Lexicon = Lexicon {
    entities: &[
        (
            "PER",
            &[
                "John Smith",
                "Mary Garcia",
                "Ahmed Okafor",
                "Li Wei",
                "Carlos Rossi",
                "Anna Ivanova",
                "Peter Kim",
                "Fatima Chen",
                "Michael Jordan",
                "George Washington",
                "May",
                "Jordan",
                "Paris Hilton",
                "Smith",
            ],
        ),
        (
            "LOC",
            &[
                "Paris",
                "London",
                "Berlin",
                "Jordan",
                "Washington",
                "Lagos",
                "Lima",
                "New York",
                "South Africa",
                "Chad",
                "Georgia",
                "Turkey",
            ],
        ),
        (
            "ORG",
            &[
                "Apple",
                "Reuters",
                "Siemens",
                "United Nations",
                "Bank of England",
                "Acme Corp",
                "Real Madrid",
                "General Motors",
                "Amazon",
                "Washington Post",
            ],
        ),
        (
            "MISC",
            &[
                "English",
                "French",
                "Olympic Games",
                "World Cup",
                "Nobel Prize",
                "Chinese",
                "Georgian",
                "*ian",
                "*ese",
                "* Cup",
            ],
        ),
    ],
    syllables: &[
        "ka", "ro", "vin", "tel", "son", "ber", "ski", "ov", "mar", "lin", "do", "zu", "an", "ek", "sal", "ti", "gor",
        "nu",
    ],
    templates: &[
        "{PER} visited {LOC} on Monday .",
        "{PER} said {ORG} would open an office in {LOC} .",
        "{ORG} shares rose 3 percent in {LOC} trading .",
        "the {MISC} team beat {LOC} 2 - 1 in the {MISC} final .",
        "{PER} , a spokesman for {ORG} , declined to comment .",
        "officials in {LOC} said {PER} had left for {LOC} .",
        "{ORG} bought a stake in {ORG} for 40 million dollars .",
        "{PER} won the {MISC} after a long career at {ORG} .",
        "in may , {PER} flew from {LOC} to {LOC} .",
        "she ate an apple and read the {MISC} papers .",
        "{PER} told {ORG} that {PER} would stay .",
        "rain fell over {LOC} and {LOC} on friday .",
        "the {MISC} speaker joined {ORG} in {LOC} .",
        "prices fell sharply as markets closed early .",
    ],
    joiner: ", and",
};

const ZH: Lexicon = Lexicon {
    entities: &[
        (
            "NAME",
            &[
                "张伟", "李娜", "王芳", "刘洋", "陈静", "杨帆", "赵磊", "黄丽", "周杰", "吴敏", "张*", "李*", "王*",
                "刘*", "陈*",
            ],
        ),
        ("CONT", &["中国", "美国", "加拿大", "新加坡", "英国"]),
        ("RACE", &["汉族", "回族", "满族", "壮族"]),
        ("TITLE", &["董事长", "总经理", "独立董事", "高级工程师", "财务总监", "副总裁", "监事"]),
        ("EDU", &["本科", "硕士", "博士", "大专", "研究生"]),
        ("ORG", &["华为技术有限公司", "中国银行", "北京大学", "腾讯控股", "上海汽车集团", "深圳发展银行", "清华大学"]),
        ("PRO", &["经济学", "计算机", "会计学", "法学", "金融"]),
        ("LOC", &["北京", "上海", "深圳", "广州", "杭州", "*州", "*市"]),
    ],
    syllables: &["海", "华", "明", "建", "国", "新", "晓", "文", "志", "平", "东", "丽", "强", "宁", "安", "春"],
    templates: &[
        "{NAME} ， 男 ， {CONT} 国 籍 ， {RACE} ， {EDU} 学 历 。",
        "现 任 {ORG} {TITLE} 。",
        "{NAME} 先 生 ， 毕 业 于 {ORG} {PRO} 专 业 ， {EDU} 。",
        "曾 任 {ORG} {TITLE} 、 {ORG} {TITLE} 。",
        "{NAME} ， 女 ， 出 生 于 {LOC} ， {CONT} 籍 ， 无 境 外 居 留 权 。",
        "历 任 {LOC} 分 行 {TITLE} ， 现 居 {LOC} 。",
        "{NAME} 女 士 ， {EDU} ， 高 级 经 济 师 。",
        "公 司 设 在 {LOC} ， 主 要 业 务 在 {CONT} 。",
    ],
    joiner: "；",
};

/// One generated sentence: tokens and entity spans.
fn sentence(lex: &Lexicon, rng: &mut ChaCha8Rng, clauses: usize) -> (Vec<String>, Vec<Span>) {
    let mut tokens: Vec<String> = Vec::new();
    let mut spans = Vec::new();
    for c in 0..clauses {
        if c > 0 {
            // Drop the previous clause's final punctuation, join with the joiner.
            tokens.pop();
            tokens.extend(lex.joiner.split_whitespace().map(str::to_string));
        }
        let template = lex.templates.choose(rng).unwrap();
        for piece in template.split_whitespace() {
            if let Some(ty) = piece.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                let (_, entries) = lex.entities.iter().find(|(t, _)| *t == ty).expect("template type");
                let entry = entries.choose(rng).unwrap();
                let entry = fill_names(lex, entry, rng);
                let start = tokens.len();
                tokens.extend(entry_tokens(lex, &entry));
                spans.push(Span { start, end: tokens.len(), label: ty.to_string() });
            } else {
                tokens.push(piece.to_string());
            }
        }
    }
    (tokens, spans)
}

/// Replaces each `*` by a generated name: 2–3 syllables, capitalised
/// (English), or 1–2 characters (Chinese).
fn fill_names(lex: &Lexicon, entry: &str, rng: &mut ChaCha8Rng) -> String {
    let zh = std::ptr::eq(lex, &ZH);
    let mut out = String::new();
    for c in entry.chars() {
        if c != '*' {
            out.push(c);
            continue;
        }
        let n = if zh { rng.random_range(1..=2) } else { rng.random_range(2..=3) };
        let name: String = (0..n).map(|_| *lex.syllables.choose(rng).unwrap()).collect();
        let mut chars = name.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.extend(chars);
        }
    }
    out
}

fn entry_tokens(lex: &Lexicon, entry: &str) -> Vec<String> {
    if std::ptr::eq(lex, &ZH) {
        entry.chars().map(|c| c.to_string()).collect()
    } else {
        entry.split_whitespace().map(str::to_string).collect()
    }
}

/// Generates `n` sentences; about one in 40 is long (8 to 20 clauses).
pub fn generate(lang: Lang, n: usize, seed: u64) -> Vec<(Vec<String>, Vec<Span>)> {
    let lex = match lang {
        Lang::En => &EN,
        Lang::Zh => &ZH,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let clauses = if rng.random_ratio(1, 40) {
                rng.random_range(8..=20)
            } else if rng.random_ratio(1, 4) {
                2
            } else {
                1
            };
            sentence(lex, &mut rng, clauses)
        })
        .collect()
}

/// Writes train/dev/test files and `dataset.toml` into `dir`: `n` training
/// sentences, `n / 5` (at least 1) each for dev and test, each split drawn
/// with its own seed.
pub fn write_dataset(dir: &Path, lang: Lang, n: usize, seed: u64) -> Result<()> {
    let (scheme, ext, name) = match lang {
        Lang::En => (Scheme::Iob2, "txt", "toy-en"),
        Lang::Zh => (Scheme::Bmes, "char.bmes", "toy-zh"),
    };
    let held_out = (n / 5).max(1);
    let mut files = Vec::new();
    for (k, (split, count)) in [("train", n), ("dev", held_out), ("test", held_out)].into_iter().enumerate() {
        let sentences = generate(lang, count, seed.wrapping_mul(1000).wrapping_add(k as u64));
        let tagged: Vec<(Vec<String>, Vec<String>)> = sentences
            .into_iter()
            .map(|(toks, spans)| {
                let tags = scheme.encode(toks.len(), &spans).iter().map(|t| t.to_string()).collect();
                (toks, tags)
            })
            .collect();
        let text = format_columns(
            tagged.iter().map(|(t, g)| (0, t.iter().zip(g).map(|(a, b)| vec![a.as_str(), b.as_str()]).collect())),
        );
        let file = format!("{split}.{ext}");
        write_atomic(&dir.join(&file), text)?;
        files.push(file);
    }
    let spec = DatasetToml {
        name: Some(name.into()),
        train: Some(files[0].clone()),
        dev: Some(files[1].clone()),
        test: Some(files[2].clone()),
        scheme: Some(scheme),
        token_column: Some(0),
        tag_column: Some(-1),
        qa_metric: None,
    };
    let header = format!("# Generated by `seqlab data toy --lang {lang} --sentences {n} --seed {seed}`.\n");
    write_atomic(
        &dir.join(crate::dataset::DATASET_TOML),
        header + &toml::to_string(&spec).expect("dataset.toml serialises"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Dataset, SplitName};

    #[test]
    fn generation_is_deterministic_and_seed_dependent() {
        assert_eq!(generate(Lang::En, 50, 3), generate(Lang::En, 50, 3));
        assert_ne!(generate(Lang::En, 50, 3), generate(Lang::En, 50, 4));
    }

    #[test]
    fn written_dataset_reads_back_with_all_types_and_long_sentences() {
        for (lang, types) in [(Lang::En, 4), (Lang::Zh, 8)] {
            let d = tempfile::tempdir().unwrap();
            write_dataset(d.path(), lang, 400, 1).unwrap();
            let ds = Dataset::load(d.path()).unwrap();
            assert_eq!(ds.splits.len(), 3);
            assert_eq!(ds.labels(SplitName::Train).len(), types);
            let train = ds.split(SplitName::Train).unwrap();
            assert_eq!(train.sentences.len(), 400);
            assert!(train.sentences.iter().any(|s| s.tokens.len() >= 60), "no long sentence");
            assert_eq!(ds.split(SplitName::Test).unwrap().sentences.len(), 80);
        }
    }

    #[test]
    fn ambiguous_token_takes_several_types() {
        let data = generate(Lang::En, 2000, 0);
        let mut types = std::collections::BTreeSet::new();
        for (toks, spans) in &data {
            for s in spans {
                if toks[s.start..s.end] == ["Jordan".to_string()] {
                    types.insert(s.label.clone());
                }
            }
        }
        assert_eq!(types.into_iter().collect::<Vec<_>>(), ["LOC", "PER"]);
    }
}
