//! The rows of a Markdown family x backend matrix, written the same way for one host's report
//! and for the merged one: a header with its rule, a row of cells, a cell of status counts.

use std::collections::BTreeMap;
use std::fmt::Display;

use super::Status;

/// One matrix cell: the non-zero counts.
pub(crate) fn cell(counts: &BTreeMap<Status, usize>) -> String {
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|s| {
            counts
                .get(s)
                .filter(|n| **n > 0)
                .map(|n| format!("{n} {}", s.word()))
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The cell of the cases whose statuses are `statuses`: how many of each.
pub(crate) fn tally(statuses: impl Iterator<Item = Status>) -> String {
    let mut counts: BTreeMap<Status, usize> = BTreeMap::new();
    for status in statuses {
        *counts.entry(status).or_default() += 1;
    }
    cell(&counts)
}

/// One row, `| head | cell | cell |`, without its line break.
pub(crate) fn row<T: Display>(head: &str, cells: impl IntoIterator<Item = T>) -> String {
    let mut line = format!("| {head} |");
    for cell in cells {
        line.push_str(&format!(" {cell} |"));
    }
    line
}

/// The header row (`| family | column | ... |`) and its rule, each with its line break.
pub(crate) fn header<T: Display>(columns: impl IntoIterator<Item = T>) -> String {
    let mut n = 0;
    let head = row(
        "family",
        columns.into_iter().inspect(|_| n += 1).collect::<Vec<_>>(),
    );
    format!("{head}\n|---|{}\n", "---|".repeat(n))
}

/// One row per family, each with a line break: a cell per column, tallying the statuses that
/// `statuses(column, family)` yields (the column's cases of that family).
pub(crate) fn family_rows<'a, C>(
    families: impl IntoIterator<Item = &'a str>,
    columns: &[C],
    statuses: impl Fn(&C, &str) -> Vec<Status>,
) -> String {
    let mut out = String::new();
    for family in families {
        out.push_str(&row(
            family,
            columns
                .iter()
                .map(|c| tally(statuses(c, family).into_iter())),
        ));
        out.push('\n');
    }
    out
}

/// The word of a `certified` cell.
pub(crate) fn certified(yes: bool) -> &'static str {
    if yes { "yes" } else { "**no**" }
}
