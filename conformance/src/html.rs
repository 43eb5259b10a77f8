//! `--html FILE`: one self-contained page (no scripts, no external files):
//! the tables of the report document ([`crate::document::document`], the
//! same the Markdown page shows, escaped by [`to_html`]),
//! an SVG timeline per device run (intervals less than a pixel apart drawn
//! as one) and wavefield snapshots as PNG images embedded in the page.

use std::fmt::Write;

use base64::Engine;

use crate::document::{Block, document};
use crate::image::Image;
use crate::report::{Report, ResultRecord};
use crate::timeline::{Interval, Kind};

/// `text` with the characters that HTML gives meaning escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The document as HTML elements (for the body of a page).
pub fn to_html(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Title(t) => {
                let _ = writeln!(out, "<h1>{}</h1>", escape(t));
            }
            Block::Heading(h) => {
                let _ = writeln!(out, "<h2>{}</h2>", escape(h));
            }
            Block::Text(t) => {
                let _ = writeln!(out, "<p>{}</p>", escape(t));
            }
            Block::Table { header, rows } => {
                out.push_str("<table><tr>");
                for h in header {
                    let _ = write!(out, "<th>{}</th>", escape(h));
                }
                out.push_str("</tr>\n");
                for row in rows {
                    out.push_str("<tr>");
                    for c in row {
                        let mark = if c.failed { "<b class=\"fail\">FAIL</b> " } else { "" };
                        let _ = write!(out, "<td>{mark}{}</td>", escape(&c.text));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</table>\n");
            }
            Block::List(items) => {
                out.push_str("<ul>");
                for item in items {
                    let _ = write!(out, "<li>{}</li>", escape(item));
                }
                out.push_str("</ul>\n");
            }
        }
    }
    out
}

/// Blue-white-red for signed values scaled by `peak`.
fn colour(value: f32, peak: f32) -> [u8; 3] {
    let t = if peak > 0.0 { (value / peak).clamp(-1.0, 1.0) } else { 0.0 };
    let fade = (255.0 * (1.0 - t.abs())) as u8;
    if t >= 0.0 { [255, fade, fade] } else { [fade, fade, 255] }
}

/// The image as a PNG file (RGB, one pixel per value).
fn png(image: &Image) -> Result<Vec<u8>, png::EncodingError> {
    let peak = image.values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let pixels: Vec<u8> = image.values.iter().flat_map(|&v| colour(v, peak)).collect();
    encode_png(image.width, image.height, &pixels)
}

/// RGB `pixels` (`width` x `height`, row-major) as a PNG file.
fn encode_png(width: usize, height: usize, pixels: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut bytes = Vec::new();
    let (width, height) = (u32::try_from(width).unwrap_or(0), u32::try_from(height).unwrap_or(0));
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(pixels)?;
    writer.finish()?;
    Ok(bytes)
}

/// The image as a figure with an embedded PNG, shown three times its size.
fn image_figure(image: &Image) -> String {
    let caption = format!("<figcaption>{}</figcaption>", escape(&image.label));
    match png(image) {
        Ok(bytes) => format!(
            "<figure><img alt=\"{}\" width=\"{}\" height=\"{}\" src=\"data:image/png;base64,{}\">{caption}</figure>",
            escape(&image.label),
            image.width * 3,
            image.height * 3,
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ),
        Err(e) => format!("<figure><p>no image: {}</p>{caption}</figure>", escape(&e.to_string())),
    }
}

/// Bars at least this wide (pixels) get a tooltip.
const TOOLTIP_PX: f64 = 12.0;

/// Kernel (blue) and copy (orange) colours of the timeline bars.
const KERNEL_RGB: [u8; 3] = [0x3b, 0x6f, 0xb6];
const COPY_RGB: [u8; 3] = [0xe8, 0x89, 0x2b];

/// A white RGB canvas for timeline bars.
struct Bars {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Bars {
    fn new(width: usize, height: usize) -> Self {
        Self { width, height, pixels: vec![255; width * height * 3] }
    }

    /// Paints the rectangle at `x, y` (pixels, clipped to the canvas); a
    /// bar under a pixel wide still paints the pixel it starts in.
    fn fill(&mut self, x: f64, w: f64, y: f64, h: f64, kind: Kind) {
        let rgb = if kind == Kind::Kernel { KERNEL_RGB } else { COPY_RGB };
        let clip = |v: f64, max: usize| (v.max(0.0) as usize).min(max);
        let (x0, y0) = (clip(x, self.width), clip(y, self.height));
        let (x1, y1) = (clip(x + w, self.width).max(x0 + 1).min(self.width), clip(y + h, self.height));
        for row in y0..y1 {
            for col in x0..x1 {
                let at = (row * self.width + col) * 3;
                self.pixels[at..at + 3].copy_from_slice(&rgb);
            }
        }
    }

    fn png(&self) -> Result<Vec<u8>, png::EncodingError> {
        encode_png(self.width, self.height, &self.pixels)
    }
}

/// Intervals of one track as drawn: runs of intervals of one kind whose
/// gaps are under a pixel (at `ms_per_px`) become one, with their count.
fn merged(mut intervals: Vec<&Interval>, ms_per_px: f64) -> Vec<(f64, f64, Kind, String, usize)> {
    intervals.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    let mut out: Vec<(f64, f64, Kind, String, usize)> = Vec::new();
    for i in intervals {
        match out.last_mut() {
            Some((_, end, kind, _, count)) if *kind == i.kind && i.start_ms - *end < ms_per_px => {
                *end = end.max(i.end_ms);
                *count += 1;
            }
            _ => out.push((i.start_ms, i.end_ms, i.kind, i.name.clone(), 1)),
        }
    }
    out
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
    let height = row_height * tracks.len() as f64;
    // The bars are drawn into one PNG (a few kilobytes however many
    // intervals there are); labels, ideal marks and tooltips of bars wide
    // enough to point at are SVG over it.
    let mut bars = Bars::new(plot_width as usize, height as usize);
    let mut overlay = String::new();
    for (t, track) in tracks.iter().enumerate() {
        let y = t as f64 * row_height;
        let _ = write!(overlay, "<text x=\"0\" y=\"{}\">{}</text>", y + 12.0, escape(track));
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
                overlay,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y:.0}\" y2=\"{:.0}\" stroke=\"#c0392b\" stroke-dasharray=\"3,2\"><title>ideal: {ideal:.3} ms</title></line>",
                y + row_height
            );
        }
        for (from, to, kind, name, count) in merged(spans, span / plot_width) {
            let x = (from - start) / span * plot_width;
            let w = (to - from) / span * plot_width;
            bars.fill(x, w.max(0.5), y + 2.0, row_height - 4.0, kind);
            if w >= TOOLTIP_PX {
                let what = match (count, kind) {
                    (1, _) => escape(&name),
                    (n, Kind::Kernel) => format!("{n} kernels"),
                    (n, _) => format!("{n} copies"),
                };
                let _ = write!(
                    overlay,
                    "<rect x=\"{:.1}\" y=\"{y:.0}\" width=\"{w:.1}\" height=\"{row_height}\" fill-opacity=\"0\"><title>{what} {from:.3}-{to:.3} ms</title></rect>",
                    label_width + x
                );
            }
        }
    }
    let mut svg = format!(
        "<svg width=\"{}\" height=\"{}\" font-size=\"11\" font-family=\"sans-serif\">",
        label_width + plot_width + 10.0,
        height + 10.0
    );
    if let Ok(png) = bars.png() {
        let _ = write!(
            svg,
            "<image x=\"{label_width}\" y=\"0\" width=\"{plot_width}\" height=\"{height}\" href=\"data:image/png;base64,{}\"/>",
            base64::engine::general_purpose::STANDARD.encode(png)
        );
    }
    svg += &overlay;
    svg.push_str("</svg>");
    Some(svg)
}

/// A self-contained page titled `title` around `body` (HTML elements).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px}}.fail{{color:#b00}}\
         figure{{display:inline-block;margin:4px}}figcaption{{font-size:12px;text-align:center}}\
         img,image{{image-rendering:pixelated}}</style></head><body>\n{body}</body></html>\n",
        escape(title)
    )
}

/// The page.
pub fn render(report: &Report) -> String {
    let mut page = to_html(&document(report));
    page += "<h2>Device timelines</h2><p>Kernels in blue, copies in orange; the streams of one workload variant share a time scale.</p>\n";
    for run in &report.runs {
        if let Some(svg) = timeline_svg(&run.results) {
            let _ = writeln!(page, "<h3>{} ({})</h3>{svg}", escape(&run.backend), escape(&report.device_label(run)));
        }
    }
    // The variants of a run are checked bit-identical to each other, so the
    // first variant with snapshots stands for all.
    let mut first = true;
    for run in &report.runs {
        let Some(r) = run.results.iter().find(|r| !r.images.is_empty()) else { continue };
        if first {
            page += "<h2>Wavefield snapshots</h2><p>One variant per run: the checks require every variant's snapshots to equal the synchronous run's bit for bit.</p>\n";
            first = false;
        }
        let _ = write!(
            page,
            "<h3>{} ({}) {} {}</h3>",
            escape(&run.backend),
            escape(&report.device_label(run)),
            r.workload.name(),
            escape(&r.variant)
        );
        for image in &r.images {
            page += &image_figure(image);
        }
        page.push('\n');
    }
    self::page("hetero conformance", &page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_signed() {
        assert_eq!(colour(1.0, 1.0), [255, 0, 0]);
        assert_eq!(colour(-1.0, 1.0), [0, 0, 255]);
        assert_eq!(colour(0.0, 1.0), [255, 255, 255]);
    }

    #[test]
    fn images_are_png_files() {
        let image =
            Image { label: "step <1>".into(), width: 3, height: 2, values: vec![0.0, 1.0, -1.0, 0.5, 0.0, 0.0] };
        let bytes = png(&image).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let info = decoder.read_info().unwrap().info().clone();
        assert_eq!((info.width, info.height), (3, 2));
        assert!(image_figure(&image).contains("step &lt;1&gt;"));
    }

    #[test]
    fn intervals_closer_than_a_pixel_merge() {
        let iv = |s: f64, e: f64, kind| Interval { name: "k".into(), track: "t".into(), kind, start_ms: s, end_ms: e };
        let (a, b, c, d) = (
            iv(0.0, 1.0, Kind::Kernel),
            iv(1.01, 2.0, Kind::Kernel),
            iv(2.0, 3.0, Kind::Copy),
            iv(9.0, 10.0, Kind::Kernel),
        );
        let drawn = merged(vec![&d, &b, &a, &c], 0.1);
        assert_eq!(drawn.len(), 3, "{drawn:?}");
        assert_eq!((drawn[0].0, drawn[0].1, drawn[0].4), (0.0, 2.0, 2));
    }
}
