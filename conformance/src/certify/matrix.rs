//! The rows of a Markdown family x backend matrix, written the same way for one host's report
//! and for the merged one: a header with its rule, a row of cells, a cell of status counts.

use std::collections::BTreeMap;
use std::fmt::Display;

use super::{BackendReport, Status};

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

/// One row, `| head | cell | cell |`, without its line break; a `|` or a line break inside a
/// cell (a drawn world path may hold either) is escaped so the table keeps its columns.
pub(crate) fn row<T: Display>(head: &str, cells: impl IntoIterator<Item = T>) -> String {
    let mut line = format!("| {head} |");
    for cell in cells {
        let cell = cell.to_string().replace('|', "\\|").replace('\n', " ");
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

/// A backend's word for `class` in a matrix: its enforcement, with what a `partial` leaves
/// ungoverned (`partial (named-unix-sockets)`); `-` when no request of the run restricted the
/// class and the backend reported none.
pub(crate) fn class_word(backend: &BackendReport, class: sandbox::EnforcementClass) -> String {
    let Some(report) = backend.classes.as_ref().and_then(|c| {
        c.iter()
            .find(|(reported, _)| *reported == class)
            .map(|(_, r)| r)
    }) else {
        return "-".into();
    };
    let word = report.enforcement.as_str();
    if report.ungoverned.is_empty() {
        return word.into();
    }
    format!("{word} ({})", summarise(&report.ungoverned).join("; "))
}

/// What a class leaves ungoverned, summarised: each word as it is, and the entries naming a
/// world path (`<reason>: /path`) counted per reason, so a run's thousands of drawn paths read
/// as one line (`<reason>: 11677 paths, e.g. /path`). A trailing `... and N more` (the report
/// keeps only the first entries) counts toward the reason before it.
pub(crate) fn summarise(ungoverned: &[String]) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut paths: Vec<(String, usize, String)> = Vec::new();
    for entry in ungoverned {
        let more = entry
            .strip_prefix("... and ")
            .and_then(|m| m.strip_suffix(" more"))
            .and_then(|n| n.parse::<usize>().ok());
        if let (Some(more), Some(last)) = (more, paths.last_mut()) {
            last.1 += more;
            continue;
        }
        match entry.split_once(": /") {
            Some((reason, path)) => match paths.iter_mut().find(|(r, _, _)| r == reason) {
                Some(group) => group.1 += 1,
                None => paths.push((reason.to_owned(), 1, format!("/{path}"))),
            },
            None => words.push(entry.clone()),
        }
    }
    words.extend(paths.into_iter().map(|(reason, n, example)| {
        if n == 1 {
            format!("{reason}: {example}")
        } else {
            format!("{reason}: {n} paths, e.g. {example}")
        }
    }));
    words
}

#[cfg(test)]
mod tests {
    use super::summarise;

    #[test]
    fn a_bar_in_a_cell_keeps_the_columns() {
        assert_eq!(super::row("h", ["a|b", "c\nd"]), "| h | a\\|b | c d |");
    }

    #[test]
    fn world_paths_are_counted_per_reason_and_words_kept() {
        let entries: Vec<String> = [
            "named-unix-sockets",
            "not covered: /a/.git/hooks",
            "not covered: /b/.git/config",
            "... and 40 more",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            summarise(&entries),
            [
                "named-unix-sockets",
                "not covered: 42 paths, e.g. /a/.git/hooks"
            ]
        );
    }
}
