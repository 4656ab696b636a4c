//! `report.html` in a headless browser: the page `seqlab compare` writes is
//! screenshotted by Chromium and the pixels checked — the charts are drawn in
//! their series' colours, the text is there, and Chinese renders as glyphs
//! rather than empty boxes.
//!
//! Runs where a browser is available: `SEQLAB_BROWSER`, or `chromium`,
//! `chromium-browser`, `google-chrome` on the PATH (`.ci/run` installs
//! Debian's chromium and a CJK font when it can). Without one it says so and
//! passes; with one, every check must hold.

use runner::report::html::{bars_chart, html, Bars, Curve, Report, RunFiles, Table};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 1800;

fn browser() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("SEQLAB_BROWSER") {
        return Some(PathBuf::from(b));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

/// A comparison of two settings on Chinese data: Chinese in the title,
/// the table, the curve labels and the entity types.
fn report(chinese: &dyn Fn(&str) -> String) -> Report {
    let curve = |label: &str, ys: &[f64]| Curve {
        label: label.into(),
        points: ys.iter().enumerate().map(|(i, &y)| (i + 1, y)).collect(),
    };
    Report {
        title: chinese("简历 NER 对比"),
        dev_f1: vec![
            curve("bilstm-crf-s1", &[0.55, 0.78, 0.88, 0.91, 0.93, 0.935]),
            curve(&chinese("注意力-s1"), &[0.40, 0.70, 0.84, 0.89, 0.91, 0.92]),
        ],
        loss: vec![
            curve("bilstm-crf-s1", &[9.0, 4.0, 2.5, 1.8, 1.4, 1.2]),
            curve(&chinese("注意力-s1"), &[12.0, 6.0, 3.5, 2.4, 1.9, 1.6]),
        ],
        tables: vec![(
            "Settings".into(),
            Table {
                head: vec!["setting".into(), chinese("类型"), "test F1".into()],
                rows: vec![
                    vec!["bilstm-crf".into(), chinese("人名"), "0.9408 ± 0.0041".into()],
                    vec!["attention-relative-crf".into(), chinese("地名"), "0.9313".into()],
                ],
            },
        )],
        per_type: Bars {
            categories: vec![chinese("人名"), chinese("组织"), chinese("职位")],
            series: vec!["bilstm-crf".into(), "attention-relative-crf".into()],
            values: vec![vec![0.98, 0.93, 0.95], vec![0.97, 0.91, 0.94]],
        },
        significance: "bilstm-crf − attention-relative-crf: +0.0143, p = 0.002".into(),
        runs: vec![RunFiles {
            label: "bilstm-crf-s1".into(),
            files: vec![("summary.json".into(), "runs/b/summary.json".into())],
        }],
    }
}

/// Every CJK ideograph moved to the next code point: the same layout (the
/// ideographs are all full width) with different glyphs.
fn shifted(s: &str) -> String {
    s.chars()
        .map(|c| if ('\u{4e00}'..'\u{9fa5}').contains(&c) { char::from_u32(c as u32 + 1).unwrap() } else { c })
        .collect()
}

/// RGB pixels of a screenshot of `page`, `WIDTH × HEIGHT`.
fn screenshot(browser: &Path, dir: &Path, name: &str, page: &str) -> Vec<[u8; 3]> {
    let html_path = dir.join(format!("{name}.html"));
    let png_path = dir.join(format!("{name}.png"));
    std::fs::write(&html_path, page).unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--window-size={WIDTH},{HEIGHT}"))
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("file://{}", html_path.display()))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", browser.display()));
    // A browser that hangs fails the test instead of the whole CI run.
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{} took over 2 minutes to screenshot {}", browser.display(), html_path.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let stderr = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
    assert!(png_path.is_file(), "{} wrote no screenshot; it said:\n{stderr}", browser.display());
    let mut decoder = png::Decoder::new(BufReader::new(std::fs::File::open(&png_path).unwrap()));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (WIDTH, HEIGHT), "the screenshot's size");
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    buf[..info.line_size * info.height as usize].chunks(channels).map(|p| [p[0], p[1], p[2]]).collect()
}

/// `rgb(r,g,b)` of the page's colour of series `k` (the bars' fill).
fn series_color(page: &str, k: usize) -> [u8; 3] {
    let bars = &page[page.rfind("<svg").unwrap()..];
    let mut fills: Vec<&str> = Vec::new();
    for part in bars.split("fill=\"rgb(").skip(1) {
        let c = &part[..part.find(')').unwrap()];
        if !fills.contains(&c) {
            fills.push(c);
        }
    }
    let v: Vec<u8> = fills[k].split(',').map(|x| x.trim().parse().unwrap()).collect();
    [v[0], v[1], v[2]]
}

#[test]
fn the_report_renders_in_a_headless_browser_chinese_included() {
    let Some(browser) = browser() else {
        eprintln!("no headless browser (chromium): the screenshot test of report.html is skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = html(&report(&|s| s.to_string())).unwrap();
    let pixels = screenshot(&browser, dir.path(), "report", &page);

    // Not blank: dark text (the page's #222) and white background.
    let dark = pixels.iter().filter(|p| p.iter().all(|&c| c < 80)).count();
    let white = pixels.iter().filter(|p| p.iter().all(|&c| c > 245)).count();
    assert!(dark > 2_000, "only {dark} dark pixels: the text did not render");
    assert!(white > pixels.len() / 2, "the page is not mostly white background");

    // The charts: each series' colour fills its bars and draws its curves.
    for k in 0..2 {
        let c = series_color(&page, k);
        let n = pixels.iter().filter(|p| p.iter().zip(c).all(|(&a, b)| a.abs_diff(b) <= 2)).count();
        assert!(n > 1_500, "series {k}'s colour rgb{c:?} covers only {n} pixels: a chart did not render");
    }

    // Chinese: with other ideographs in the same places the picture must
    // change. Were there no font for them, both pages would show the same
    // empty boxes.
    let other = screenshot(&browser, dir.path(), "shifted", &html(&report(&shifted)).unwrap());
    let differ = pixels.iter().zip(&other).filter(|(a, b)| a != b).count();
    assert!(
        differ > 200,
        "Chinese renders as empty boxes ({differ} pixels differ when the ideographs change): \
         no font in the report's list or the system's fallbacks covers CJK (Debian: fonts-wqy-zenhei)"
    );
}

/// Pixels that are not background.
fn inked(pixels: &[[u8; 3]]) -> usize {
    pixels.iter().filter(|p| p.iter().any(|&c| c < 235)).count()
}

/// The per-type chart is sized to its content: at one entity type (a
/// narrow plot under a long title and long legend names) and at twelve, it
/// shows exactly what the same chart shows on a canvas 2,000 px wider — no
/// title, legend or label is clipped.
#[test]
fn the_per_type_chart_fits_its_title_and_legend_at_one_type_and_at_many() {
    let Some(browser) = browser() else {
        eprintln!("no headless browser (chromium): the chart-size test of report.html is skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let series = vec!["attention-relative-crf (conll2003)".to_string(), "bilstm-crf (conll2003)".to_string()];
    for types in [1usize, 12] {
        let bars = Bars {
            categories: (0..types).map(|k| format!("TYPE{k}")).collect(),
            series: series.clone(),
            values: vec![vec![0.91; types], vec![0.87; types]],
        };
        let svg = bars_chart("test F1 per type", &bars);
        let width: f64 = svg.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
        assert!(width < 1000.0, "{types} types: {width} px, wider than the screenshot");
        let page = |svg: &str| format!("<!DOCTYPE html><html><body style=\"margin:0\">{svg}</body></html>");
        let wide = svg.replacen(&format!("width=\"{width:.0}\""), &format!("width=\"{:.0}\"", width + 2000.0), 1);
        let shown = inked(&screenshot(&browser, dir.path(), &format!("bars{types}"), &page(&svg)));
        let whole = inked(&screenshot(&browser, dir.path(), &format!("wide{types}"), &page(&wide)));
        assert!(shown > 1_000, "{types} types: the chart did not render ({shown} inked pixels)");
        assert_eq!(shown, whole, "{types} types: the chart clips {} inked pixels", whole.saturating_sub(shown));
    }
}
