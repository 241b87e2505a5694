//! `certify diff OLD NEW`: what changed between two runs (a run's report directory or
//! `report.json`, or a merge's directory or `merged.json`): the cases newly failing, the new
//! XPASSes (an expectation gone stale) and the fixes, each named by host and trial.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::merge::{self, MergeError};
use super::{Report, Status};

/// Why a diff cannot be made; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// A report could not be read.
    #[error(transparent)]
    Report(#[from] MergeError),
    /// A `merged.json` is not a merge's.
    #[error("{path}: not a certify merge: {reason}")]
    NotAMerge {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// One case that changed: where, which trial, and its outcome before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The host's label (empty when both sides are one host each).
    pub host: String,
    /// The trial.
    pub trial: String,
    /// Its outcome in the old run (`None`: it did not run there).
    pub old: Option<Status>,
    /// Its outcome in the new run.
    pub new: Status,
}

/// What changed between two runs.
#[derive(Clone, Debug, Default)]
pub struct Diff {
    /// Bad in the new run (FAIL, ERROR, TIMEOUT, INCONSISTENT) and not in the old one.
    pub new_failures: Vec<Change>,
    /// XPASS in the new run and not in the old one: an expectation to remove.
    pub new_xpasses: Vec<Change>,
    /// Bad in the old run, PASS or XFAIL in the new one.
    pub fixed: Vec<Change>,
    /// Cases of the old run the new one did not run.
    pub gone: usize,
}

impl Diff {
    /// True when nothing newly fails (no new failure, no new XPASS).
    pub fn clean(&self) -> bool {
        self.new_failures.is_empty() && self.new_xpasses.is_empty()
    }
}

/// The hosts of a run or a merge at `path`: a directory holding `merged.json` or `report.json`,
/// or either file.
pub fn read_hosts(path: &Path) -> Result<Vec<(String, Report)>, DiffError> {
    let merged = if path.is_dir() {
        Some(path.join("merged.json")).filter(|p| p.is_file())
    } else {
        Some(path.to_path_buf()).filter(|p| p.file_name().is_some_and(|n| n == "merged.json"))
    };
    let Some(file) = merged else {
        return Ok(vec![(String::new(), merge::read(path)?)]);
    };
    #[derive(serde::Deserialize)]
    struct Hosts {
        hosts: Vec<(String, Report)>,
    }
    let text = std::fs::read_to_string(&file).map_err(|source| MergeError::Missing {
        path: file.clone(),
        source,
    })?;
    let hosts: Hosts = serde_json::from_str(&text).map_err(|e| DiffError::NotAMerge {
        path: file,
        reason: e.to_string(),
    })?;
    Ok(hosts.hosts)
}

/// The changes from `old` to `new`. Cases are matched by trial, and by host label when either
/// side has more than one host.
pub fn diff(old: &[(String, Report)], new: &[(String, Report)]) -> Diff {
    let by_host = old.len() > 1 || new.len() > 1;
    let key = |host: &str| {
        if by_host {
            host.to_owned()
        } else {
            String::new()
        }
    };
    let mut before: BTreeMap<(String, &str), Status> = BTreeMap::new();
    for (host, r) in old {
        for c in &r.cases {
            before.insert((key(host), c.trial.as_str()), c.status);
        }
    }
    let mut out = Diff::default();
    for (host, r) in new {
        for c in &r.cases {
            let was = before.remove(&(key(host), c.trial.as_str()));
            let change = Change {
                host: key(host),
                trial: c.trial.clone(),
                old: was,
                new: c.status,
            };
            let was_bad = was.is_some_and(Status::is_bad);
            match c.status {
                Status::Xpass if was != Some(Status::Xpass) => out.new_xpasses.push(change),
                s if s.is_bad() && s != Status::Xpass && !was_bad => out.new_failures.push(change),
                Status::Pass | Status::Xfail if was_bad => out.fixed.push(change),
                _ => {}
            }
        }
    }
    out.gone = before.len();
    out
}

/// The diff as Markdown: each list with its count, each change as `host trial: OLD -> NEW`.
pub fn markdown(diff: &Diff) -> String {
    let mut out = String::from("# Changes between the two runs\n\n");
    for (title, changes) in [
        ("New failures", &diff.new_failures),
        ("New XPASSes (expectations to remove)", &diff.new_xpasses),
        ("Fixed", &diff.fixed),
    ] {
        let _ = writeln!(out, "## {title} ({})\n", changes.len());
        for c in changes {
            let _ = writeln!(
                out,
                "- {}`{}`: {} -> {}",
                if c.host.is_empty() {
                    String::new()
                } else {
                    format!("{} ", c.host)
                },
                c.trial,
                c.old.map_or("not run", Status::code),
                c.new.code()
            );
        }
        out.push('\n');
    }
    if diff.gone > 0 {
        let _ = writeln!(
            out,
            "{} case(s) of the old run did not run in the new one.",
            diff.gone
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cases: &[(&str, &str)]) -> Vec<(String, Report)> {
        let cases: Vec<serde_json::Value> = cases
            .iter()
            .map(|(trial, status)| {
                serde_json::json!({"trial": trial, "backend": "b", "family": "f",
                                   "scenario": "S", "status": status, "message": null,
                                   "duration_ms": 0.0})
            })
            .collect();
        let report = serde_json::json!({"suite_version": "0", "host": {"os": "linux"},
            "backends": [], "cases": cases, "verdict": "NOT CERTIFIED"});
        vec![(
            String::new(),
            serde_json::from_value(report).expect("a report"),
        )]
    }

    #[test]
    fn new_failures_xpasses_and_fixes_are_told_apart() {
        let old = run(&[
            ("a", "PASS"),
            ("b", "FAIL"),
            ("c", "XFAIL"),
            ("d", "FAIL"),
            ("e", "PASS"),
        ]);
        let new = run(&[
            ("a", "FAIL"),
            ("b", "PASS"),
            ("c", "XPASS"),
            ("d", "FAIL"),
            ("f", "TIMEOUT"),
        ]);
        let d = diff(&old, &new);
        let trials = |c: &[Change]| c.iter().map(|c| c.trial.clone()).collect::<Vec<_>>();
        assert_eq!(trials(&d.new_failures), ["a", "f"]);
        assert_eq!(trials(&d.new_xpasses), ["c"]);
        assert_eq!(trials(&d.fixed), ["b"]);
        assert_eq!(d.gone, 1);
        assert!(!d.clean());
        assert!(markdown(&d).contains("- `a`: PASS -> FAIL"));
        assert!(diff(&old, &old).clean());
    }
}
