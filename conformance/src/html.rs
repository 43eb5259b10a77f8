//! `--html FILE`: one self-contained page (no scripts, no external files):
//! the comparison table, the backends compared, the overlap figures, an SVG
//! timeline per device run and wavefield snapshots of the wave workload.

use std::fmt::Write;

use crate::report::{Report, ResultRecord};
use crate::timeline::Kind;

/// A small image of a field (row-major, `width x height`), e.g. a wavefield snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Caption, e.g. `step 300`.
    pub label: String,
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Values, row-major.
    pub values: Vec<f32>,
}

impl Image {
    /// `field` (`nx` by `ny`, row-major) sampled down to at most `side` pixels a side.
    pub fn downsample(label: String, field: &[f32], nx: usize, ny: usize, side: usize) -> Self {
        let (width, height) = (nx.min(side).max(1), ny.min(side).max(1));
        let values = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x * nx / width, y * ny / height)))
            .map(|(x, y)| field.get(y * nx + x).copied().unwrap_or(0.0))
            .collect();
        Self { label, width, height, values }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Blue-white-red for signed values scaled by `peak`.
fn colour(value: f32, peak: f32) -> String {
    let t = if peak > 0.0 { (value / peak).clamp(-1.0, 1.0) } else { 0.0 };
    let fade = |c: f32| (255.0 * (1.0 - c.abs())) as u8;
    if t >= 0.0 { format!("rgb(255,{},{})", fade(t), fade(t)) } else { format!("rgb({},{},255)", fade(t), fade(t)) }
}

fn image_svg(image: &Image) -> String {
    let peak = image.values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = 3;
    let mut svg = format!(
        "<figure><svg width=\"{}\" height=\"{}\" shape-rendering=\"crispEdges\">",
        image.width * scale,
        image.height * scale
    );
    for (i, &v) in image.values.iter().enumerate() {
        let (x, y) = (i % image.width, i / image.width);
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"{scale}\" height=\"{scale}\" fill=\"{}\"/>",
            x * scale,
            y * scale,
            colour(v, peak)
        );
    }
    let _ = write!(svg, "</svg><figcaption>{}</figcaption></figure>", escape(&image.label));
    svg
}

/// One SVG timeline of every result of a run that has intervals: a row per
/// track. Where a result has an `ideal_ms` (overlapped wave variants), a
/// dashed mark on each of its rows shows where perfect overlap would have
/// ended, counted from the variant's first interval.
fn timeline_svg(results: &[ResultRecord]) -> Option<String> {
    let ideals: Vec<(String, f64)> = results
        .iter()
        .filter_map(|r| r.metrics.get("ideal_ms").map(|&ms| (format!("{} {}", r.workload.name(), r.variant), ms)))
        .collect();
    let rows: Vec<(String, &crate::timeline::Interval)> = results
        .iter()
        .flat_map(|r| {
            r.intervals.iter().map(move |i| (format!("{} {} / {}", r.workload.name(), r.variant, i.track), i))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut tracks: Vec<String> = Vec::new();
    for (track, _) in &rows {
        if !tracks.contains(track) {
            tracks.push(track.clone());
        }
    }
    let (label_width, plot_width, row_height) = (230.0, 900.0, 16.0);
    let mut svg = format!(
        "<svg width=\"{}\" height=\"{}\" font-size=\"11\" font-family=\"sans-serif\">",
        label_width + plot_width + 10.0,
        row_height * tracks.len() as f64 + 10.0
    );
    for (t, track) in tracks.iter().enumerate() {
        let y = t as f64 * row_height;
        let _ = write!(svg, "<text x=\"0\" y=\"{}\">{}</text>", y + 12.0, escape(track));
        // One time scale per workload variant, so its streams line up;
        // variants ran one after another, each gets the full width.
        let variant = track.split(" / ").next().unwrap_or_default();
        let spans: Vec<_> = rows.iter().filter(|(k, _)| k == track).map(|(_, i)| *i).collect();
        let same_variant: Vec<_> =
            rows.iter().filter(|(k, _)| k.split(" / ").next() == Some(variant)).map(|(_, i)| *i).collect();
        let start = same_variant.iter().map(|i| i.start_ms).fold(f64::INFINITY, f64::min);
        let end = same_variant.iter().map(|i| i.end_ms).fold(f64::NEG_INFINITY, f64::max);
        let span = (end - start).max(1e-9);
        if let Some((_, ideal)) = ideals.iter().find(|(k, _)| k == variant) {
            let x = label_width + (ideal / span).min(1.0) * plot_width;
            let _ = write!(
                svg,
                "<line x1=\"{x:.2}\" x2=\"{x:.2}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#c0392b\" stroke-dasharray=\"3,2\"><title>ideal: {ideal:.3} ms</title></line>",
                y,
                y + row_height
            );
        }
        for i in spans {
            let x = label_width + (i.start_ms - start) / span * plot_width;
            let w = ((i.end_ms - i.start_ms) / span * plot_width).max(0.5);
            let fill = if i.kind == Kind::Kernel { "#3b6fb6" } else { "#e8892b" };
            let _ = write!(
                svg,
                "<rect x=\"{x:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{}\" fill=\"{fill}\"><title>{} {:.3}-{:.3} ms</title></rect>",
                y + 2.0,
                row_height - 4.0,
                escape(&i.name),
                i.start_ms,
                i.end_ms
            );
        }
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// Converts the Markdown tables of [`crate::markdown::render`] to HTML tables.
fn tables(markdown: &str) -> String {
    let mut out = String::new();
    let mut in_table = false;
    for line in markdown.lines() {
        if line.starts_with('|') {
            if line.starts_with("|---") {
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            let tag = if in_table { "td" } else { "th" };
            if !in_table {
                out.push_str("<table>");
                in_table = true;
            }
            out.push_str("<tr>");
            for c in cells {
                let c = escape(c).replace("**FAIL**", "<b class=\"fail\">FAIL</b>");
                let _ = write!(out, "<{tag}>{c}</{tag}>");
            }
            out.push_str("</tr>\n");
        } else {
            if in_table {
                out.push_str("</table>\n");
                in_table = false;
            }
            if let Some(h) = line.strip_prefix("## ") {
                let _ = writeln!(out, "<h2>{}</h2>", escape(h));
            } else if let Some(h) = line.strip_prefix("# ") {
                let _ = writeln!(out, "<h1>{}</h1>", escape(h));
            } else if !line.trim().is_empty() {
                let _ = writeln!(out, "<p>{}</p>", escape(line));
            }
        }
    }
    if in_table {
        out.push_str("</table>\n");
    }
    out
}

/// The page.
pub fn render(report: &Report) -> String {
    let mut page = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>hetero conformance</title><style>\
         body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}.fail{color:#b00}\
         figure{display:inline-block;margin:4px}figcaption{font-size:12px;text-align:center}</style></head><body>\n",
    );
    page += &tables(&crate::markdown::render(report));
    page += "<h2>Device timelines</h2><p>Kernels in blue, copies in orange; the streams of one workload variant share a time scale.</p>\n";
    for run in &report.runs {
        if let Some(svg) = timeline_svg(&run.results) {
            let _ = writeln!(page, "<h3>{} ({})</h3>{svg}", escape(&run.backend), escape(&run.device.name));
        }
    }
    let mut first = true;
    for run in &report.runs {
        for r in run.results.iter().filter(|r| !r.images.is_empty()) {
            if first {
                page += "<h2>Wavefield snapshots</h2>\n";
                first = false;
            }
            let _ = write!(
                page,
                "<h3>{} ({}) {} {}</h3>",
                escape(&run.backend),
                escape(&run.device.name),
                r.workload.name(),
                r.variant
            );
            for image in &r.images {
                page += &image_svg(image);
            }
            page.push('\n');
        }
    }
    page += "</body></html>\n";
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsampling_keeps_corners_and_shape() {
        let field: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let image = Image::downsample("x".into(), &field, 10, 10, 5);
        assert_eq!((image.width, image.height, image.values.len()), (5, 5, 25));
        assert_eq!(image.values[0], 0.0);
        assert_eq!(image.values[24], 88.0);
        let small = Image::downsample("y".into(), &field, 10, 10, 64);
        assert_eq!(small.values, field);
    }

    #[test]
    fn colours_are_signed() {
        assert_eq!(colour(1.0, 1.0), "rgb(255,0,0)");
        assert_eq!(colour(-1.0, 1.0), "rgb(0,0,255)");
        assert_eq!(colour(0.0, 1.0), "rgb(255,255,255)");
    }
}
