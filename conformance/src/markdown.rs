//! `--markdown FILE` and merged reports: the report document
//! ([`crate::document`]) as Markdown, one comparison table with a row per
//! workload, variant and size and a column per device run, so runs of
//! different backends and nodes read side by side.

use std::fmt::Write;

use crate::document::{Block, document};
use crate::report::Report;

/// The Markdown page of `report`: summary, comparison table, overlap figures, notes.
pub fn render(report: &Report) -> String {
    to_markdown(&document(report))
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
