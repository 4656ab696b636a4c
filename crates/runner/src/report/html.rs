//! `seqlab compare`'s `report.html`: one self-contained page, opened in a
//! browser the way a TensorBoard or flair training report is — curves of
//! dev F1 and training loss per epoch, the settings table (mean ± std over
//! seeds), per-type F1 bars, the significance test and links to each run's
//! files. Charts are inline SVG and the style an inline sheet: no scripts,
//! no fonts or images fetched from anywhere. Text is UTF-8 with a font list
//! that covers Chinese ([`FONT_FAMILY`]).

use crate::analysis::visualize::{escape, FONT_FAMILY};
use anyhow::Result;
use plotters::prelude::*;
use std::fmt::Write as _;

/// One line of a chart: a run's values per epoch.
pub struct Curve {
    pub label: String,
    pub points: Vec<(usize, f64)>,
}

/// A table of text cells.
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Grouped bars: `values[s][c]` is series `s` (a setting) on category `c`
/// (an entity type); NaN where a series has no value.
pub struct Bars {
    pub categories: Vec<String>,
    pub series: Vec<String>,
    pub values: Vec<Vec<f64>>,
}

/// A run and its files, with the links as seen from the report's folder.
pub struct RunFiles {
    pub label: String,
    pub files: Vec<(String, String)>,
}

/// Everything on the page.
pub struct Report {
    pub title: String,
    pub dev_f1: Vec<Curve>,
    pub loss: Vec<Curve>,
    /// The tables, with their headings (the runs, the settings with mean ±
    /// std over seeds, the QA scores and differences).
    pub tables: Vec<(String, Table)>,
    pub per_type: Bars,
    pub significance: String,
    pub runs: Vec<RunFiles>,
}

/// The x axis of a line chart: its name and first value.
#[derive(Clone, Copy, Debug)]
pub struct Axis<'a> {
    pub desc: &'a str,
    pub from: usize,
}

/// A line chart of `curves` over epochs as an SVG string; the y axis spans
/// the values (rounded out to 0.05) within `[floor, ceil]` when given.
pub fn line_chart(title: &str, y_desc: &str, curves: &[Curve], bounds: (Option<f64>, Option<f64>)) -> Result<String> {
    line_chart_on(Axis { desc: "epoch", from: 1 }, title, y_desc, curves, bounds)
}

/// [`line_chart`] over another x axis.
pub fn line_chart_on(
    x: Axis<'_>,
    title: &str,
    y_desc: &str,
    curves: &[Curve],
    bounds: (Option<f64>, Option<f64>),
) -> Result<String> {
    let max_epoch = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0)).max().unwrap_or(1).max(x.from + 1);
    let ys: Vec<f64> = curves.iter().flat_map(|c| c.points.iter().map(|p| p.1)).filter(|y| y.is_finite()).collect();
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if ys.is_empty() { (0.0, 1.0) } else { (lo, hi) };
    let lo = bounds.0.map_or(lo, |f| lo.max(f));
    let hi = bounds.1.map_or(hi, |c| hi.min(c));
    let lo = (lo * 20.0).floor() / 20.0;
    let hi = ((hi * 20.0).ceil() / 20.0).max(lo + 0.05);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x.from..max_epoch, lo..hi)?;
        chart.configure_mesh().x_desc(x.desc).y_desc(y_desc).draw()?;
        for (i, c) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(usize, f64)> = c.points.iter().copied().filter(|p| p.1.is_finite()).collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
                .label(c.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// Grouped bars as an SVG string: one group per category, one bar per
/// series, the value written above each bar (F1 on a 0–1 axis).
/// The chart is as wide as the widest of its bars, its title and its
/// legend (so nothing is clipped at one category or at twenty).
pub fn bars_chart(title: &str, bars: &Bars) -> String {
    let (bar, gap, left, top, height) = (18.0, 24.0, 48.0, 40.0, 220.0);
    let per_group = bars.series.len().max(1) as f64 * bar + gap;
    let plot_width = left + per_group * bars.categories.len().max(1) as f64 + 20.0;
    let legend_width = bars.series.iter().map(|n| left + 18.0 + text_width(n, 12.0) + 20.0).fold(0.0, f64::max);
    let width = plot_width.max(left + text_width(title, 15.0) + 20.0).max(legend_width);
    let legend_top = top + height + 60.0;
    let total_h = legend_top + 18.0 * bars.series.len() as f64 + 10.0;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{total_h:.0}" font-family="{}" font-size="12">"#,
        escape(FONT_FAMILY)
    );
    let _ = write!(s, r#"<text x="{left}" y="20" font-size="15">{}</text>"#, escape(title));
    for k in 0..=4 {
        let v = k as f64 / 4.0;
        let y = top + height * (1.0 - v);
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{:.0}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{v:.2}</text>"##,
            plot_width - 20.0,
            left - 6.0,
            y + 4.0
        );
    }
    for (c, cat) in bars.categories.iter().enumerate() {
        let x0 = left + gap / 2.0 + per_group * c as f64;
        for (k, row) in bars.values.iter().enumerate() {
            let v = row.get(c).copied().unwrap_or(f64::NAN);
            if !v.is_finite() {
                continue;
            }
            let (h, x) = (height * v.clamp(0.0, 1.0), x0 + bar * k as f64);
            let _ = write!(
                s,
                r#"<rect class="bar" x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}: {v:.4}</title></rect><text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">{:.2}</text>"#,
                top + height - h,
                bar - 2.0,
                color(k),
                escape(&format!("{} {}", bars.series[k], cat)),
                x + bar / 2.0 - 1.0,
                top + height - h - 3.0,
                v
            );
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x0 + per_group / 2.0 - gap / 2.0,
            top + height + 18.0,
            escape(cat)
        );
    }
    for (k, name) in bars.series.iter().enumerate() {
        let y = legend_top + 18.0 * k as f64;
        let _ = write!(
            s,
            r#"<rect x="{left}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{y:.1}">{}</text>"#,
            y - 10.0,
            color(k),
            left + 18.0,
            escape(name)
        );
    }
    s.push_str("</svg>");
    s
}

/// A colour per series (Palette99's, as the line charts use).
fn color(k: usize) -> String {
    let RGBAColor(r, g, b, _) = Palette99::pick(k).to_rgba();
    format!("rgb({r},{g},{b})")
}

/// The tables of a markdown text with the `## ` heading above each:
/// `| a | b |` rows, the `|---|` line after the header skipped.
pub fn markdown_tables(md: &str) -> Vec<(String, Table)> {
    let mut out: Vec<(String, Table)> = Vec::new();
    let (mut heading, mut current): (String, Option<Table>) = (String::new(), None);
    let cells = |l: &str| -> Vec<String> {
        let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|c| c.trim().to_string()).collect()
    };
    for line in md.lines().chain(std::iter::once("")) {
        let t = line.trim();
        if t.starts_with('|') {
            match current.as_mut() {
                None => current = Some(Table { head: cells(t), rows: Vec::new() }),
                Some(_) if t.trim_matches(|c| "|-: ".contains(c)).is_empty() => {}
                Some(table) => table.rows.push(cells(t)),
            }
            continue;
        }
        if let Some(table) = current.take() {
            out.push((heading.clone(), table));
        }
        if let Some(h) = t.strip_prefix("## ") {
            heading = h.to_string();
        }
    }
    out
}

fn table_html(t: &Table) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in &t.head {
        let _ = write!(s, "<th>{}</th>", escape(h));
    }
    s.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        s.push_str("<tr>");
        for cell in row {
            let _ = write!(s, "<td>{}</td>", escape(cell));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// A generous estimate of the width of `text` at `size` px: CJK and other
/// wide characters a full em, anything else 0.62 em (wider than the mean
/// Latin glyph of the sans-serif fonts of [`FONT_FAMILY`]).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().map(|c| if (c as u32) >= 0x2E80 { size } else { 0.62 * size }).sum()
}

/// The title of the dev curve: what each run is selected on.
pub const DEV_CURVE_TITLE: &str = "dev F1 per epoch (entity F1; answer F1 for QA runs)";

/// The page.
pub fn html(r: &Report) -> Result<String> {
    let mut s = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>\
body{{font-family:{};margin:24px;color:#222}}table{{border-collapse:collapse;margin:8px 0 20px}}\
th,td{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f3f3f3}}\
td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){{text-align:left}}\
.charts{{display:flex;flex-wrap:wrap;gap:12px}}.charts svg{{max-width:100%;height:auto}}\
.wide{{overflow-x:auto;max-width:100%}}ul.files li{{overflow-wrap:anywhere;margin:4px 0}}\
ul.files a{{display:inline-block;margin-right:8px}}</style></head><body>\n",
        escape(&r.title),
        FONT_FAMILY
    );
    let _ = writeln!(s, "<h1>{}</h1>", escape(&r.title));
    for (heading, t) in &r.tables {
        let _ = writeln!(s, "\n<h2>{}</h2>", escape(heading));
        let _ = write!(s, "<div class=\"wide\">{}</div>", table_html(t));
    }
    let _ = writeln!(s, "\n<h2>Significance</h2>\n<p>{}</p>", escape(&r.significance));
    s.push_str("<h2>Curves</h2>\n<div class=\"charts\">");
    s.push_str(&line_chart(DEV_CURVE_TITLE, "dev F1", &r.dev_f1, (Some(0.0), Some(1.0)))?);
    s.push_str(&line_chart("training loss per epoch", "loss", &r.loss, (None, None))?);
    s.push_str("</div>\n<h2>Test F1 per type (mean over seeds)</h2>\n");
    s.push_str("<div class=\"wide\">");
    s.push_str(&bars_chart("test F1 per type", &r.per_type));
    s.push_str("</div>\n<h2>Run files</h2>\n<ul class=\"files\">");
    for run in &r.runs {
        let _ = write!(s, "<li>{}:", escape(&run.label));
        for (name, href) in &run.files {
            let _ = write!(s, " <a href=\"{}\">{}</a>", escape(href), escape(name));
        }
        s.push_str("</li>");
    }
    s.push_str("</ul>\n</body></html>\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let curve = |label: &str, ys: &[f64]| Curve {
            label: label.into(),
            points: ys.iter().enumerate().map(|(i, &y)| (i + 1, y)).collect(),
        };
        Report {
            title: "Comparison <resume>".into(),
            dev_f1: vec![curve("bilstm-s1", &[0.5, 0.8, 0.9]), curve("注意力-s1", &[0.4, 0.7, f64::NAN])],
            loss: vec![curve("bilstm-s1", &[9.0, 4.0, 2.0])],
            tables: vec![(
                "Settings".into(),
                Table {
                    head: vec!["setting".into(), "test F1".into()],
                    rows: vec![vec!["人名".into(), "0.9 ± 0.01".into()]],
                },
            )],
            per_type: Bars {
                categories: vec!["NAME".into(), "ORG".into()],
                series: vec!["bilstm".into(), "attention".into()],
                values: vec![vec![0.9, 0.8], vec![0.7, f64::NAN]],
            },
            significance: "p = 0.01".into(),
            runs: vec![RunFiles {
                label: "bilstm-s1".into(),
                files: vec![("summary.json".into(), "../runs/b/summary.json".into())],
            }],
        }
    }

    #[test]
    fn the_page_is_self_contained_and_holds_every_part() {
        let page = html(&report()).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<meta charset=\"utf-8\">"));
        // Nothing fetched: no scripts, no external style sheets, fonts or images.
        for banned in ["<script", "<link", "@import", "url(", "http://", "https://", "<img"] {
            let outside_svg_ns = page.replace("http://www.w3.org/2000/svg", "");
            assert!(!outside_svg_ns.contains(banned), "the page contains {banned}");
        }
        assert!(page.contains("Comparison &lt;resume&gt;"), "the title is escaped");
        assert!(page.contains("<td>人名</td>") && page.contains("注意力-s1"), "Chinese text is kept as text");
        assert!(page.contains("Noto Sans CJK SC"));
        assert_eq!(page.matches("<svg").count(), 3, "two line charts and the bars");
        assert!(page.contains("dev F1 per epoch") && page.contains("training loss per epoch"));
        assert!(page.contains("<a href=\"../runs/b/summary.json\">summary.json</a>"));
        assert!(page.contains("p = 0.01") && page.contains("<h2>Settings</h2>"));
    }

    #[test]
    fn markdown_tables_keep_their_headings_and_cells() {
        let md = "# T\n\n## Runs\n\n| run | F1 |\n|---|---:|\n| a | 0.5 |\n| 人 | 0.25 |\n\ntext\n\n## Next\n\n| x |\n|---|\n| 1 |";
        let t = markdown_tables(md);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].0, "Runs");
        assert_eq!(t[0].1.head, ["run", "F1"]);
        assert_eq!(t[0].1.rows, [vec!["a", "0.5"], vec!["人", "0.25"]]);
        assert_eq!((t[1].0.as_str(), t[1].1.rows.len()), ("Next", 1));
    }

    #[test]
    fn bars_are_as_tall_as_their_values_and_missing_values_are_left_out() {
        let svg = bars_chart("t", &report().per_type);
        let heights: Vec<f64> = svg
            .split("class=\"bar\"")
            .skip(1)
            .map(|b| b.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        // NAME: 0.9, 0.7; ORG: 0.8 (the attention bar is NaN) — of 220 px.
        assert_eq!(heights.len(), 3);
        for (h, v) in heights.iter().zip([0.9, 0.7, 0.8]) {
            assert!((h - 220.0 * v).abs() < 0.1, "{heights:?}");
        }
    }
}
