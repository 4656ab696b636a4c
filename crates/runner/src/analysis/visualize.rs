//! Attention pictures for one sentence: per-head heatmaps, a clustered
//! heatmap, a focus token's attention as bars, and an `index.html` that
//! shows them with the predicted tags.
//!
//! The SVG is written by hand (rectangles and `<text>`), so that labels stay
//! text: a browser renders CJK tokens with whatever CJK font the system has,
//! through the `font-family` fallback list below; no font file is needed.

use crate::infer::run::LoadedRun;
use crate::infer::{self, QuestionAttention, Request, SentenceAttention, Windows};
use anyhow::{bail, Context, Result};
use encoders::ops::SeqBackend;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Fonts tried in order; the CJK families cover Chinese, Japanese and Korean
/// on Linux (Noto/Source Han/WenQuanYi), macOS (PingFang, Hiragino) and
/// Windows (Microsoft YaHei); the generic family comes last.
pub const FONT_FAMILY: &str = "'Noto Sans CJK SC', 'Source Han Sans SC', 'PingFang SC', 'Hiragino Sans GB', \
'Microsoft YaHei', 'WenQuanYi Micro Hei', 'WenQuanYi Zen Hei', 'Noto Sans', 'DejaVu Sans', Arial, sans-serif";

/// Escapes text for SVG/HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// The tokens shown when a sentence is longer than `max`: a window of
/// `max` tokens centred on `focus` (or on the most-attended token), and a
/// note on what was left out (empty when everything is shown).
pub fn visible_range(len: usize, max: usize, focus: usize) -> (std::ops::Range<usize>, String) {
    let max = max.max(1);
    if len <= max {
        return (0..len, String::new());
    }
    let start = focus.saturating_sub(max / 2).min(len - max);
    let r = start..start + max;
    let mut omitted = Vec::new();
    if r.start > 0 {
        omitted.push(format!("tokens 0–{}", r.start - 1));
    }
    if r.end < len {
        omitted.push(format!("tokens {}–{}", r.end, len - 1));
    }
    let note = format!("showing tokens {}–{} of {}; omitted {}", r.start, r.end - 1, len, omitted.join(" and "));
    (r, note)
}

/// `<svg …>` of this size with the CJK-capable fonts, a white page and `title`.
fn svg_start(width: f64, height: f64, title: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="{}" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="10" y="22" font-size="14">{}</text>"#,
        escape(FONT_FAMILY),
        escape(title)
    )
}

/// A heatmap of `w` (`rows × cols`, row-major) with labels on both axes.
pub fn heatmap_svg(title: &str, w: &[f32], row_labels: &[String], col_labels: &[String]) -> String {
    let (rows, cols) = (row_labels.len(), col_labels.len());
    assert_eq!(w.len(), rows * cols, "heatmap of {rows}×{cols} needs that many values");
    let cell = 18.0;
    let label_w =
        8.0 + 9.0 * row_labels.iter().chain(col_labels).map(|l| l.chars().count()).max().unwrap_or(1).min(16) as f64;
    let (x0, y0) = (label_w + 10.0, 40.0 + label_w);
    let width = x0 + cols as f64 * cell + 70.0;
    let height = y0 + rows as f64 * cell + 20.0;
    let max = w.iter().cloned().fold(0f32, f32::max).max(1e-9);
    let mut s = svg_start(width, height, title);
    for (i, l) in row_labels.iter().enumerate() {
        let y = y0 + (i as f64 + 0.7) * cell;
        let _ = write!(s, r#"<text class="row" x="{:.1}" y="{y:.1}" text-anchor="end">{}</text>"#, x0 - 4.0, escape(l));
    }
    for (j, l) in col_labels.iter().enumerate() {
        let x = x0 + (j as f64 + 0.7) * cell;
        let _ = write!(
            s,
            r#"<text class="col" x="{x:.1}" y="{:.1}" transform="rotate(-60 {x:.1} {:.1})">{}</text>"#,
            y0 - 4.0,
            y0 - 4.0,
            escape(l)
        );
    }
    for i in 0..rows {
        for j in 0..cols {
            let v = (w[i * cols + j] / max).clamp(0.0, 1.0);
            // White → dark blue.
            let (r, g, b) = (255.0 - 225.0 * v, 255.0 - 180.0 * v, 255.0 - 75.0 * v);
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{cell}" height="{cell}" fill="rgb({r:.0},{g:.0},{b:.0})"><title>{} → {}: {:.3}</title></rect>"#,
                x0 + j as f64 * cell,
                y0 + i as f64 * cell,
                escape(&row_labels[i]),
                escape(&col_labels[j]),
                w[i * cols + j]
            );
        }
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="11">max {:.3}</text>"#,
        x0 + cols as f64 * cell + 6.0,
        y0 + 12.0,
        max
    );
    s.push_str("</svg>\n");
    s
}

/// One query token's attention over the shown tokens, as bars (one chart per head).
pub fn bars_svg(title: &str, values: &[f32], labels: &[String]) -> String {
    let n = labels.len();
    let (bar, x0, y0, h) = (20.0, 50.0, 40.0, 160.0);
    let width = x0 + n as f64 * bar + 20.0;
    let height =
        y0 + h + 20.0 + 9.0 * labels.iter().map(|l| l.chars().count()).max().unwrap_or(1).min(16) as f64 + 20.0;
    let max = values.iter().cloned().fold(0f32, f32::max).max(1e-9);
    let mut s = svg_start(width, height, title);
    for (j, (&v, l)) in values.iter().zip(labels).enumerate() {
        let bh = h * (v / max) as f64;
        let x = x0 + j as f64 * bar;
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="#3b6fb6"><title>{}: {v:.3}</title></rect>"##,
            x + 2.0,
            y0 + h - bh,
            bar - 4.0,
            escape(l)
        );
        let (lx, ly) = (x + bar * 0.6, y0 + h + 12.0);
        let _ = write!(
            s,
            r#"<text class="col" x="{lx:.1}" y="{ly:.1}" transform="rotate(60 {lx:.1} {ly:.1})">{}</text>"#,
            escape(l)
        );
    }
    let _ = write!(s, r#"<text x="4" y="{:.1}" font-size="11">{max:.2}</text>"#, y0 + 10.0);
    s.push_str("</svg>\n");
    s
}

/// Average-linkage hierarchical clustering of the rows of `m` (`n × d`) by
/// Euclidean distance; returns the leaf order of the dendrogram (a
/// permutation of `0..n`), as seaborn's clustermap orders its rows.
pub fn cluster_order(m: &[f32], n: usize, d: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let dist = |a: usize, b: usize| -> f64 {
        (0..d).map(|k| (m[a * d + k] - m[b * d + k]) as f64).map(|x| x * x).sum::<f64>().sqrt()
    };
    // Each cluster: its leaves in dendrogram order.
    let mut clusters: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut between: Vec<Vec<f64>> = (0..n).map(|a| (0..n).map(|b| dist(a, b)).collect()).collect();
    while clusters.len() > 1 {
        let mut best = (0, 1, f64::INFINITY);
        for a in 0..clusters.len() {
            for b in a + 1..clusters.len() {
                if between[a][b] < best.2 {
                    best = (a, b, between[a][b]);
                }
            }
        }
        let (a, b, _) = best;
        let (na, nb) = (clusters[a].len() as f64, clusters[b].len() as f64);
        // Average linkage: the merged cluster's distance to each other one.
        for c in 0..clusters.len() {
            let v = (between[a][c] * na + between[b][c] * nb) / (na + nb);
            between[a][c] = v;
            between[c][a] = v;
        }
        let merged = clusters.remove(b);
        clusters[a].extend(merged);
        between.remove(b);
        for row in &mut between {
            row.remove(b);
        }
    }
    clusters.pop().unwrap()
}

/// Everything `index.html` shows.
pub struct Page<'a> {
    pub title: &'a str,
    pub tokens: &'a [String],
    pub tags: &'a [String],
    pub note: &'a str,
    /// (caption, file name relative to the page).
    pub images: &'a [(String, String)],
}

/// A self-contained page: the sentence with its predicted tags, then every picture.
pub fn index_html(p: &Page) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title><style>body{{font-family:{};margin:24px}} \
table.tokens td{{padding:2px 6px;text-align:center;border-bottom:1px solid #ddd}} td.tag{{color:#555;font-size:12px}} \
figure{{display:inline-block;margin:8px;vertical-align:top}}</style></head><body>\n<h1>{}</h1>\n",
        escape(p.title),
        escape(FONT_FAMILY).replace("&#39;", "'"),
        escape(p.title)
    );
    if !p.note.is_empty() {
        let _ = writeln!(s, "<p>{}</p>", escape(p.note));
    }
    s.push_str("<table class=\"tokens\"><tr>");
    for t in p.tokens {
        let _ = write!(s, "<td>{}</td>", escape(t));
    }
    s.push_str("</tr><tr>");
    for t in p.tags {
        let _ = write!(s, "<td class=\"tag\">{}</td>", escape(t));
    }
    s.push_str("</tr></table>\n");
    for (caption, file) in p.images {
        let _ = writeln!(
            s,
            "<figure><img src=\"{}\" alt=\"{}\"><figcaption>{}</figcaption></figure>",
            escape(file),
            escape(caption),
            escape(caption)
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// Writes `contents` to `dir/name` atomically.
pub fn write(dir: &Path, name: &str, contents: &str) -> Result<()> {
    corpus::io::write_atomic(&dir.join(name), contents)?;
    Ok(())
}

/// What `seqlab visualize` draws, and where.
pub struct PictureOptions {
    /// Layer, 0-based (default: the last).
    pub layer: Option<usize>,
    /// Heads to draw: `all` or a list such as `0,2`.
    pub heads: String,
    /// Focus token: an index or the token itself (default: the most attended).
    pub focus: Option<String>,
    /// At most this many tokens on an axis (a window around the focus).
    pub max_tokens: usize,
    pub out: PathBuf,
}

/// One layer's attention over a sentence, and what of it is drawn.
struct Drawing<'a> {
    tokens: &'a [String],
    layer: usize,
    /// `[heads, l, l]`.
    weights: &'a [f32],
    l: usize,
    heads: Vec<usize>,
    focus: usize,
    range: Range<usize>,
    labels: Vec<String>,
    /// What the shown window leaves out (empty when it shows everything).
    note: String,
    /// The note as a title suffix.
    suffix: String,
}

impl Drawing<'_> {
    fn at(&self, head: usize, i: usize, j: usize) -> f32 {
        self.weights[(head * self.l + i) * self.l + j]
    }

    /// The shown window of one head's weights, row-major.
    fn sub(&self, head: usize) -> Vec<f32> {
        self.range
            .clone()
            .flat_map(|i| self.range.clone().map(move |j| (i, j)))
            .map(|(i, j)| self.at(head, i, j))
            .collect()
    }
}

/// Tags `tokens` (read against `question`, for a QA run) with the run's
/// model (through the inference path) and draws its attention into `opts.out`: per-head heatmaps, the clustered
/// mean, the focus token's bars, and `index.html`. Returns the line to print.
pub fn pictures<B: SeqBackend>(
    run: &LoadedRun,
    tokens: &[String],
    question: Option<&corpus::qa::squad::QaItem>,
    label: &str,
    opts: &PictureOptions,
    device: &B::Device,
) -> Result<String> {
    let model = run.model::<B>(device)?;
    let cues = question.map(|q| (q.cues(run.vocabs.idf.as_ref()), q.surfaces(tokens)));
    let asked =
        question.zip(cues.as_ref()).map(|(q, (cues, written))| corpus::Asked { question: &q.question, cues, written });
    let encoded = vec![run.vocabs.example(tokens, asked, None, run.cfg.data.max_word_chars)];
    let request = Request::tagging(Windows::NONE).with_attention();
    let tagged = infer::tag(&model, &run.vocabs, &encoded, &request, device)?.tagged.remove(0);
    let tags: Vec<String> = tagged.tags.iter().map(|t| t.to_string()).collect();
    let attention = tagged.attention.context("the model gave no attention weights")?;
    let d = drawing(tokens, &attention, opts)?;
    std::fs::create_dir_all(&opts.out)?;
    let mut images = draw_heads(&d, &opts.out)?;
    images.extend(draw_clustered(&d, &opts.out)?);
    images.extend(draw_focus(&d, &opts.out)?);
    if let (Some(asked), Some(item)) = (&attention.question, question) {
        images.extend(draw_question(&d, asked, &item.question, &opts.out)?);
    }
    let title = format!("{}: {label}", run.cfg.name);
    let html = index_html(&Page { title: &title, tokens, tags: &tags, note: &d.note, images: &images });
    write(&opts.out, "index.html", &html)?;
    Ok(format!(
        "{} pictures of layer {} for {label} ({} tokens) -> {}",
        images.len(),
        d.layer,
        d.l,
        opts.out.join("index.html").display()
    ))
}

/// Picks the layer, heads, focus token and shown window.
fn drawing<'a>(tokens: &'a [String], a: &'a SentenceAttention, opts: &PictureOptions) -> Result<Drawing<'a>> {
    let last = a.layers.len().saturating_sub(1);
    let layer = opts.layer.unwrap_or(last);
    let weights = a.layers.get(layer).with_context(|| format!("--layer {layer}: the model has layers 0–{last}"))?;
    let (h, l) = (a.heads, a.len);
    let heads: Vec<usize> = if opts.heads == "all" {
        (0..h).collect()
    } else {
        opts.heads
            .split(',')
            .map(|x| {
                x.trim().parse::<usize>().ok().filter(|&i| i < h).with_context(|| {
                    format!("--heads `{x}`: expected `all` or head numbers below {h}, separated by commas")
                })
            })
            .collect::<Result<_>>()?
    };
    let mut d = Drawing {
        tokens,
        layer,
        weights,
        l,
        heads,
        focus: 0,
        range: 0..0,
        labels: Vec::new(),
        note: String::new(),
        suffix: String::new(),
    };
    d.focus = match &opts.focus {
        Some(f) => match f.parse::<usize>() {
            Ok(i) if i < l => i,
            _ => tokens.iter().position(|t| t == f).with_context(|| {
                format!("--focus `{f}`: neither a token index below {l} nor a token of the sentence")
            })?,
        },
        // The token that receives the most attention, over the drawn heads.
        None => {
            let got: Vec<f32> =
                (0..l).map(|j| d.heads.iter().map(|&hd| (0..l).map(|i| d.at(hd, i, j)).sum::<f32>()).sum()).collect();
            (0..l).max_by(|&a, &b| got[a].total_cmp(&got[b])).unwrap_or(0)
        }
    };
    let (range, note) = visible_range(l, opts.max_tokens, d.focus);
    d.labels = range.clone().map(|i| format!("{i}:{}", tokens[i])).collect();
    d.range = range;
    d.suffix = if note.is_empty() { String::new() } else { format!(" ({note})") };
    d.note = note;
    Ok(d)
}

/// One heatmap per drawn head.
fn draw_heads(d: &Drawing, out: &Path) -> Result<Vec<(String, String)>> {
    let mut images = Vec::new();
    for &hd in &d.heads {
        let name = format!("layer{}-head{hd}.svg", d.layer);
        let title = format!("layer {}, head {hd}: rows attend to columns{}", d.layer, d.suffix);
        write(out, &name, &heatmap_svg(&title, &d.sub(hd), &d.labels, &d.labels))?;
        images.push((format!("layer {}, head {hd}", d.layer), name));
    }
    Ok(images)
}

/// The mean of the drawn heads, rows and columns reordered by clustering
/// (and the order, as JSON).
fn draw_clustered(d: &Drawing, out: &Path) -> Result<Vec<(String, String)>> {
    let n = d.range.len();
    let subs: Vec<Vec<f32>> = d.heads.iter().map(|&hd| d.sub(hd)).collect();
    let mean: Vec<f32> = (0..n * n).map(|k| subs.iter().map(|m| m[k]).sum::<f32>() / d.heads.len() as f32).collect();
    let row_order = cluster_order(&mean, n, n);
    let transposed: Vec<f32> = (0..n * n).map(|k| mean[(k % n) * n + k / n]).collect();
    let col_order = cluster_order(&transposed, n, n);
    let clustered: Vec<f32> =
        row_order.iter().flat_map(|&i| col_order.iter().map(|&j| mean[i * n + j]).collect::<Vec<_>>()).collect();
    let layer = d.layer;
    let name = format!("layer{layer}-clustered.svg");
    let title = format!("layer {layer}, mean of {} heads, clustered rows and columns{}", d.heads.len(), d.suffix);
    let rows: Vec<String> = row_order.iter().map(|&i| d.labels[i].clone()).collect();
    let cols: Vec<String> = col_order.iter().map(|&j| d.labels[j].clone()).collect();
    write(out, &name, &heatmap_svg(&title, &clustered, &rows, &cols))?;
    let order = serde_json::json!({
        "rows": row_order.iter().map(|&i| d.range.start + i).collect::<Vec<_>>(),
        "cols": col_order.iter().map(|&j| d.range.start + j).collect::<Vec<_>>(),
    });
    write(out, &format!("layer{layer}-clustered-order.json"), &format!("{order}\n"))?;
    Ok(vec![(format!("layer {layer}, clustered mean of the heads"), name)])
}

/// What the focus token looks at, per head.
fn draw_focus(d: &Drawing, out: &Path) -> Result<Vec<(String, String)>> {
    let (layer, focus) = (d.layer, d.focus);
    let mut images = Vec::new();
    for &hd in &d.heads {
        let name = format!("layer{layer}-head{hd}-focus.svg");
        let values: Vec<f32> = d.range.clone().map(|j| d.at(hd, focus, j)).collect();
        let title =
            format!("what \"{}\" (token {focus}) attends to: layer {layer}, head {hd}{}", d.tokens[focus], d.suffix);
        write(out, &name, &bars_svg(&title, &values, &d.labels))?;
        images.push((format!("\"{}\", head {hd}", d.tokens[focus]), name));
    }
    Ok(images)
}

/// Where the shown context tokens look on the question (mean of the
/// drawn heads): a cross reader's cross-attention, or a concat reader's
/// question block of its joint self-attention, with, for the latter, each
/// context token's share of attention on the question against the share
/// that uniform attention would give.
fn draw_question(d: &Drawing, a: &QuestionAttention, question: &[String], out: &Path) -> Result<Vec<(String, String)>> {
    let (layer, c) = (d.layer, a.columns());
    if layer >= a.layers.len() {
        bail!("the model gave no question attention for layer {layer}");
    }
    let mean = a.mean_over_heads(layer, &d.heads, d.l);
    let mean = mean[d.range.start * c..d.range.end * c].to_vec();
    let mut columns: Vec<String> = question.iter().take(a.len).enumerate().map(|(j, t)| format!("{j}:{t}")).collect();
    if a.joint {
        columns.push("[SEP]".into());
    }
    let (what, caption) = if a.joint {
        ("the question block of the joint self-attention", "context → question (concatenated)")
    } else {
        ("cross-attention, each row sums to 1", "context → question (cross-attention)")
    };
    let name = format!("layer{layer}-question.svg");
    let title = format!(
        "layer {layer}, mean of {} heads: context rows attend to question columns ({what}){}",
        d.heads.len(),
        d.suffix
    );
    write(out, &name, &heatmap_svg(&title, &mean, &d.labels, &columns))?;
    let mut images = vec![(format!("layer {layer}: {caption}"), name)];
    if a.joint {
        let share = a.share_on_question(layer, &d.heads, d.l);
        let mean_share = share.iter().sum::<f32>() / share.len().max(1) as f32;
        let uniform = a.uniform_share(d.l);
        let name = format!("layer{layer}-question-share.svg");
        let title = format!(
            "layer {layer}: share of each context token's attention on the question (mean {mean_share:.3}; uniform attention: {uniform:.3}){}",
            d.suffix
        );
        write(out, &name, &bars_svg(&title, &share[d.range.clone()], &d.labels))?;
        images
            .push((format!("layer {layer}: share on the question, mean {mean_share:.3} (uniform {uniform:.3})"), name));
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_labels_are_text_and_escaped() {
        let labels: Vec<String> = ["人工", "智能", "<b>&"].iter().map(|s| s.to_string()).collect();
        let svg = heatmap_svg("head 0", &[0.5; 9], &labels, &labels);
        assert!(svg.contains(">人工</text>") && svg.contains(">智能</text>"), "{svg}");
        assert!(svg.contains("&lt;b&gt;&amp;") && !svg.contains("<b>"));
        assert!(svg.contains("Noto Sans CJK SC") && svg.contains("sans-serif"));
        assert_eq!(svg.matches(r#"class="row""#).count(), 3);
        assert_eq!(svg.matches(r#"class="col""#).count(), 3);
    }

    #[test]
    fn long_sentences_show_a_window_and_say_what_is_left_out() {
        assert_eq!(visible_range(10, 50, 3), (0..10, String::new()));
        let (r, note) = visible_range(256, 50, 200);
        assert_eq!(r, 175..225);
        assert!(note.contains("omitted tokens 0–174 and tokens 225–255"), "{note}");
        let (r, _) = visible_range(256, 50, 2);
        assert_eq!(r, 0..50);
        let (r, _) = visible_range(256, 50, 255);
        assert_eq!(r, 206..256);
    }

    #[test]
    fn clustering_gives_a_permutation_that_groups_similar_rows() {
        // Rows 0, 2, 4 alike, rows 1, 3 alike.
        let m = [0.0, 0.0, 5.0, 5.0, 0.1, 0.0, 5.0, 5.1, 0.0, 0.2];
        let order = cluster_order(&m, 5, 2);
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
        let pos = |i| order.iter().position(|&x| x == i).unwrap();
        assert_eq!(pos(1).abs_diff(pos(3)), 1, "{order:?}");
        assert!(cluster_order(&[], 0, 3).is_empty());
    }

    #[test]
    fn page_lists_tokens_tags_and_images() {
        let tokens = vec!["李".to_string(), "明".to_string()];
        let tags = vec!["B-NAME".to_string(), "E-NAME".to_string()];
        let images = vec![("head 0".to_string(), "layer1-head0.svg".to_string())];
        let html = index_html(&Page { title: "t", tokens: &tokens, tags: &tags, note: "", images: &images });
        assert!(html.contains("<td>李</td>") && html.contains("E-NAME") && html.contains("src=\"layer1-head0.svg\""));
        assert!(html.contains("charset=\"utf-8\""));
    }
}
