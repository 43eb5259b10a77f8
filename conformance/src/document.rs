//! The report as a document: headings, text, tables and lists, built once
//! from the report data ([`crate::markdown::document`]) and written as
//! Markdown or as HTML. The HTML writer escapes every string it is given,
//! so no report content (a device name, a note) can add markup.

use std::fmt::Write;

/// One part of a document.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// The page title.
    Title(String),
    /// A section heading.
    Heading(String),
    /// A paragraph.
    Text(String),
    /// A table with a header row.
    Table {
        /// Column names.
        header: Vec<String>,
        /// Rows, each with one cell per column.
        rows: Vec<Vec<Cell>>,
    },
    /// A bulleted list.
    List(Vec<String>),
}

/// A table cell: text, marked as a failure when it reports one (written
/// `**FAIL**` in Markdown and highlighted in HTML, before the text).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Whether the cell reports a failure.
    pub failed: bool,
    /// What follows the failure mark, or the whole cell.
    pub text: String,
}

impl Cell {
    /// A cell of plain text.
    pub fn plain(text: impl Into<String>) -> Self {
        Self { failed: false, text: text.into() }
    }
}

/// A cell's text for a Markdown table (a `|` would end the cell).
fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The document as Markdown.
pub fn to_markdown(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Title(t) => {
                let _ = writeln!(out, "# {t}\n");
            }
            Block::Heading(h) => {
                let _ = writeln!(out, "## {h}\n");
            }
            Block::Text(t) => {
                let _ = writeln!(out, "{t}\n");
            }
            Block::Table { header, rows } => {
                let header: Vec<String> = header.iter().map(|h| markdown_cell(h)).collect();
                let _ = writeln!(out, "| {} |", header.join(" | "));
                let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
                for row in rows {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|c| match (c.failed, c.text.is_empty()) {
                            (true, true) => "**FAIL**".to_string(),
                            (true, false) => format!("**FAIL** {}", markdown_cell(&c.text)),
                            (false, _) => markdown_cell(&c.text),
                        })
                        .collect();
                    let _ = writeln!(out, "| {} |", cells.join(" | "));
                }
                out.push('\n');
            }
            Block::List(items) => {
                for item in items {
                    let _ = writeln!(out, "- {item}");
                }
                out.push('\n');
            }
        }
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> Vec<Block> {
        vec![
            Block::Title("t".into()),
            Block::Table {
                header: vec!["run".into(), name.into()],
                rows: vec![vec![Cell::plain(name), Cell { failed: true, text: "1.0e-3".into() }]],
            },
            Block::List(vec![name.into()]),
        ]
    }

    /// Report content is text in either format, never markup.
    #[test]
    fn content_cannot_add_markup() {
        let hostile = "<script>alert(1)</script> | a&b \"q\"";
        let html = to_html(&sample(hostile));
        assert!(!html.contains("<script>") && html.contains("&lt;script&gt;") && html.contains("a&amp;b"));
        assert!(html.contains("<td><b class=\"fail\">FAIL</b> 1.0e-3</td>"));
        let md = to_markdown(&sample(hostile));
        assert!(md.contains("\\| a&b") && md.contains("| **FAIL** 1.0e-3 |"), "{md}");
    }
}
