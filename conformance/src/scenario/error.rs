//! A scenario file that could not be loaded, and where: `file:line:col: what is wrong`, with
//! the offending line and a caret under the column.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A scenario file that could not be loaded. Displays as `file:line:col: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}:{line}:{column}: {message}{}",
    file.display(),
    snippet.as_ref().map(|s| format!("\n{s}")).unwrap_or_default()
)]
pub struct LoadError {
    /// The file, as shown.
    pub file: PathBuf,
    /// 1-based line (0 when the error is about the whole file).
    pub line: u64,
    /// 1-based column.
    pub column: u64,
    /// What is wrong.
    pub message: String,
    /// The offending lines with a caret, when available.
    pub snippet: Option<String>,
}

pub(super) fn describe(vars: &BTreeMap<String, String>) -> String {
    if vars.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(" (with {})", parts.join(", "))
}

pub(super) fn yaml_error(
    shown: &Path,
    text: &str,
    e: &serde_saphyr::Error,
    vars: Option<&BTreeMap<String, String>>,
) -> LoadError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((0, 0));
    let plain = e.without_snippet().to_string();
    // serde-saphyr prefixes its message with "error: line N column M: "; we say where ourselves.
    let message = plain
        .split_once(": ")
        .filter(|(head, _)| head.starts_with("error"))
        .map(|(_, rest)| rest)
        .and_then(|rest| {
            rest.split_once(": ")
                .filter(|(head, _)| head.starts_with("line "))
                .map(|(_, msg)| msg)
        })
        .unwrap_or(&plain);
    let suffix = format!(" at line {line}, column {column}");
    let message = message.strip_suffix(&suffix).unwrap_or(message).to_owned();
    let snippet = (line > 0).then(|| caret(text, line, column));
    LoadError {
        file: shown.to_path_buf(),
        line,
        column,
        message: format!("{message}{}", vars.map(describe).unwrap_or_default()),
        snippet,
    }
}

/// The offending line with a caret under the column.
pub(super) fn caret(text: &str, line: u64, column: u64) -> String {
    let src = text
        .lines()
        .nth(usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX))
        .unwrap_or("");
    let pad = " ".repeat(usize::try_from(column.saturating_sub(1)).unwrap_or(0));
    format!("{line:>5} | {src}\n      | {pad}^")
}

/// Line and column (1-based) of byte offset `at`.
pub(super) fn position(text: &str, at: usize) -> (u64, u64) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line as u64, column as u64)
}

/// Where `needle` first appears in the text (1:1 if nowhere).
pub(super) fn locate(text: &str, needle: &str) -> (u64, u64) {
    text.find(needle)
        .map(|at| position(text, at))
        .unwrap_or((1, 1))
}
