//! `--html FILE`: one self-contained page (no scripts, no external files):
//! the tables of the report document ([`crate::document::document`], the
//! same the Markdown page shows, escaped by [`to_html`]),
//! an SVG timeline per device run (intervals less than a pixel apart drawn
//! as one) and wavefield snapshots as PNG images embedded in the page.
//!
//! Every element is written through `maud`'s templates, which escape each
//! interpolated string by construction: no text of a report reaches the
//! page unescaped.

use base64::Engine;
use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::document::{Block, document};
use crate::image::Image;
use crate::report::{Report, ResultRecord};
use crate::timeline::{Interval, Kind};

/// `text` with the characters that HTML gives meaning escaped.
pub fn escape(text: &str) -> String {
    html! { (text) }.into_string()
}

/// The document as HTML elements (for the body of a page).
pub fn to_html(blocks: &[Block]) -> String {
    document_markup(blocks).into_string()
}

fn document_markup(blocks: &[Block]) -> Markup {
    html! {
        @for block in blocks {
            @match block {
                Block::Title(t) => { h1 { (t) } "\n" }
                Block::Heading(h) => { h2 { (h) } "\n" }
                Block::Text(t) => { p { (t) } "\n" }
                Block::Table { header, rows } => {
                    table {
                        tr { @for h in header { th { (h) } } } "\n"
                        @for row in rows {
                            tr {
                                @for c in row {
                                    td { @if c.failed { b class="fail" { "FAIL" } " " } (c.text) }
                                }
                            } "\n"
                        }
                    } "\n"
                }
                Block::List(items) => { ul { @for item in items { li { (item) } } } "\n" }
            }
        }
    }
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
fn image_figure(image: &Image) -> Markup {
    html! {
        figure {
            @match png(image) {
                Ok(bytes) => {
                    img alt=(image.label) width=(image.width * 3) height=(image.height * 3)
                        src={ "data:image/png;base64," (base64::engine::general_purpose::STANDARD.encode(bytes)) };
                }
                Err(e) => { p { "no image: " (e) } }
            }
            figcaption { (image.label) }
        }
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
fn timeline_svg(results: &[ResultRecord]) -> Option<Markup> {
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
    let mut overlay: Vec<Markup> = Vec::new();
    for (t, track) in tracks.iter().enumerate() {
        let y = t as f64 * row_height;
        overlay.push(html! { text x="0" y=(y + 12.0) { (track) } });
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
            let x = format!("{:.1}", label_width + (ideal / span).min(1.0) * plot_width);
            overlay.push(html! {
                line x1=(x) x2=(x) y1=(format!("{y:.0}")) y2=(format!("{:.0}", y + row_height))
                    stroke="#c0392b" stroke-dasharray="3,2" {
                    title { "ideal: " (format!("{ideal:.3}")) " ms" }
                }
            });
        }
        for (from, to, kind, name, count) in merged(spans, span / plot_width) {
            let x = (from - start) / span * plot_width;
            let w = (to - from) / span * plot_width;
            bars.fill(x, w.max(0.5), y + 2.0, row_height - 4.0, kind);
            if w >= TOOLTIP_PX {
                let what = match (count, kind) {
                    (1, _) => name,
                    (n, Kind::Kernel) => format!("{n} kernels"),
                    (n, _) => format!("{n} copies"),
                };
                overlay.push(html! {
                    rect x=(format!("{:.1}", label_width + x)) y=(format!("{y:.0}")) width=(format!("{w:.1}"))
                        height=(row_height) fill-opacity="0" {
                        title { (what) " " (format!("{from:.3}-{to:.3}")) " ms" }
                    }
                });
            }
        }
    }
    let png = bars.png().ok().map(|png| base64::engine::general_purpose::STANDARD.encode(png));
    Some(html! {
        svg width=(label_width + plot_width + 10.0) height=(height + 10.0) font-size="11" font-family="sans-serif" {
            @if let Some(png) = png {
                image x=(label_width) y="0" width=(plot_width) height=(height) href={ "data:image/png;base64," (png) } {}
            }
            @for part in &overlay { (part) }
        }
    })
}

/// The page's style sheet.
const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}\
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}.fail{color:#b00}\
figure{display:inline-block;margin:4px}figcaption{font-size:12px;text-align:center}\
img,image{image-rendering:pixelated}";

/// A self-contained page titled `title` around `body` (HTML elements,
/// already escaped: what [`to_html`] returns).
pub fn page(title: &str, body: &str) -> String {
    page_markup(title, PreEscaped(body)).into_string()
}

fn page_markup(title: &str, body: impl maud::Render) -> Markup {
    html! {
        (DOCTYPE)
        html {
            head { meta charset="utf-8"; title { (title) } style { (PreEscaped(STYLE)) } }
            body { "\n" (body) }
        }
        "\n"
    }
}

/// The page.
pub fn render(report: &Report) -> String {
    // The variants of a run are checked bit-identical to each other, so the
    // first variant with snapshots stands for all.
    let snapshots: Vec<_> = report
        .runs
        .iter()
        .filter_map(|run| run.results.iter().find(|r| !r.images.is_empty()).map(|r| (run, r)))
        .collect();
    let body = html! {
        (document_markup(&document(report)))
        h2 { "Device timelines" }
        p { "Kernels in blue, copies in orange; the streams of one workload variant share a time scale." } "\n"
        @for run in &report.runs {
            @if let Some(svg) = timeline_svg(&run.results) {
                h3 { (run.backend) " (" (report.device_label(run)) ")" } (svg) "\n"
            }
        }
        @if !snapshots.is_empty() {
            h2 { "Wavefield snapshots" }
            p { "One variant per run: the checks require every variant's snapshots to equal the synchronous run's bit for bit." } "\n"
        }
        @for (run, r) in &snapshots {
            h3 { (run.backend) " (" (report.device_label(run)) ") " (r.workload.name()) " " (r.variant) }
            @for image in &r.images { (image_figure(image)) }
            "\n"
        }
    };
    page_markup("hetero conformance", body).into_string()
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
        assert!(image_figure(&image).into_string().contains("step &lt;1&gt;"));
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
