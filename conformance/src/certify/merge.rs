//! `certify merge`: joins the reports of several hosts (the legs of a CI matrix) into one report
//! and one Markdown matrix, so a maintainer reads one table instead of one per leg.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::matrix::{certified, class_word, family_rows, header, row};
use super::{BackendReport, Report, Status, Verdict};

/// Why a report cannot be merged; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No `report.json` where one was named (a stopped run writes none).
    #[error("{path}: no report.json ({source}); a run that was stopped or failed writes none")]
    Missing {
        /// The file looked for.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// The file is not a certify report.
    #[error("{path}: not a certify report: {reason}")]
    NotAReport {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The reports come from different suite versions.
    #[error(
        "{path}: suite version {found}, but {first} is {expected}; reports of different suites \
         do not compare (--allow-mixed-versions to merge them anyway)"
    )]
    MixedVersions {
        /// The report of another version.
        path: PathBuf,
        /// Its version.
        found: String,
        /// The first report.
        first: PathBuf,
        /// The first report's version.
        expected: String,
    },
    /// The reports come from different scenario sets (the same version, other scenarios: a
    /// `--scenarios DIR` run, or an edited clone).
    #[error(
        "{path}: scenario set {found}, but {first} is {expected}; reports of different suites \
         do not compare (--allow-mixed-versions to merge them anyway)"
    )]
    MixedScenarioSets {
        /// The report of another scenario set.
        path: PathBuf,
        /// Its scenario set's hash (`unknown` for a report that names none).
        found: String,
        /// The first report.
        first: PathBuf,
        /// The first report's hash.
        expected: String,
    },
    /// Nothing to merge.
    #[error("no report to merge: name at least one report directory or report.json")]
    Nothing,
}

/// Several hosts' reports, each under its label (its leg, or the name of the directory it was
/// read from).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Merged {
    /// The suite version of the first report.
    pub suite_version: String,
    /// The scenario set's hash of the first report (`None`: it names none).
    pub suite_hash: Option<String>,
    /// Each host's report, by label, in the order given.
    pub hosts: Vec<(String, Report)>,
    /// Expected legs (`--expect`) that wrote no report, each with where it was looked for.
    pub missing: Vec<(String, String)>,
    /// Every host's run is `CERTIFIED` (every backend certified, no family left out) and no
    /// expected leg is missing.
    pub certified: bool,
}

/// Reads `path`: a report directory (its `report.json`) or a `report.json` itself.
pub fn read(path: &Path) -> Result<Report, MergeError> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|source| MergeError::Missing {
        path: file.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| MergeError::NotAReport {
        path: file,
        reason: e.to_string(),
    })
}

/// The label of a report read from `path`: the leg it names, else its directory's name.
fn label(path: &Path, report: Option<&Report>) -> String {
    if let Some(leg) = report.and_then(|r| r.host.leg.clone()) {
        return leg;
    }
    // A report.json is labelled by its folder; a folder (present or not) by its own name.
    let dir = if path.file_name().is_some_and(|n| n == "report.json") {
        path.parent().unwrap_or(path)
    } else {
        path
    };
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Merges the reports at `paths`; refuses reports of different suite versions unless
/// `allow_mixed_versions`. Two reports with the same label get `#2`, `#3`, ... appended. With
/// `expect` (the legs a matrix has), a named path without a report is no error but a missing
/// leg, and so is an expected leg no report names: the merge is then not certified.
pub fn merge(
    paths: &[PathBuf],
    allow_mixed_versions: bool,
    expect: &[String],
) -> Result<Merged, MergeError> {
    let Some(first_path) = paths.first() else {
        return Err(MergeError::Nothing);
    };
    let mut hosts: Vec<(String, Report)> = Vec::new();
    let mut missing: Vec<(String, String)> = Vec::new();
    let mut first: Option<(PathBuf, String, Option<String>)> = None;
    for path in paths {
        let report = match read(path) {
            Err(MergeError::Missing { path: file, source }) if !expect.is_empty() => {
                missing.push((
                    label(path, None),
                    format!("no {} ({source})", file.display()),
                ));
                continue;
            }
            other => other?,
        };
        match &first {
            None => {
                first = Some((
                    path.clone(),
                    report.suite_version.clone(),
                    report.suite_hash.clone(),
                ));
            }
            Some(_) if allow_mixed_versions => {}
            Some((first_path, version, hash)) => {
                same_suite(path, &report, first_path, version, hash)?
            }
        }
        let mut name = label(path, Some(&report));
        let taken = |n: &str| hosts.iter().any(|(l, _)| l == n);
        if taken(&name) {
            let mut n = 2;
            while taken(&format!("{name}#{n}")) {
                n += 1;
            }
            name = format!("{name}#{n}");
        }
        hosts.push((name, report));
    }
    for leg in expect {
        if !hosts.iter().any(|(l, _)| l == leg) && !missing.iter().any(|(l, _)| l == leg) {
            missing.push((leg.clone(), "no report names this leg".into()));
        }
    }
    let (suite_version, suite_hash) = first.map_or_else(
        || (first_path.display().to_string(), None),
        |(_, v, h)| (v, h),
    );
    // A host's PARTIAL run (families left out) is no certificate there, whatever its backends.
    let certified = missing.is_empty()
        && !hosts.is_empty()
        && hosts.iter().all(|(_, r)| {
            r.verdict == Verdict::Certified
                && !r.backends.is_empty()
                && r.backends.iter().all(|b| b.certified)
        });
    Ok(Merged {
        suite_version,
        suite_hash,
        hosts,
        missing,
        certified,
    })
}

/// The report at `path` is of the first report's suite version and scenario set.
fn same_suite(
    path: &Path,
    report: &Report,
    first_path: &Path,
    version: &str,
    hash: &Option<String>,
) -> Result<(), MergeError> {
    if *hash != report.suite_hash {
        let unknown = |h: &Option<String>| h.clone().unwrap_or_else(|| "unknown".into());
        return Err(MergeError::MixedScenarioSets {
            path: path.to_path_buf(),
            found: unknown(&report.suite_hash),
            first: first_path.to_path_buf(),
            expected: unknown(hash),
        });
    }
    if version != report.suite_version {
        return Err(MergeError::MixedVersions {
            path: path.to_path_buf(),
            found: report.suite_version.clone(),
            first: first_path.to_path_buf(),
            expected: version.to_owned(),
        });
    }
    Ok(())
}

/// The merged matrix: one column per (host, backend), one row per family, then each column's
/// enforcement per class and verdict, then every host's facts, the missing legs and the cases
/// whose outcome differs between hosts.
pub fn markdown(merged: &Merged) -> String {
    let columns: Vec<(&str, &Report, &BackendReport)> = merged
        .hosts
        .iter()
        .flat_map(|(label, r)| r.backends.iter().map(move |b| (label.as_str(), r, b)))
        .collect();
    let families: BTreeSet<&str> = merged
        .hosts
        .iter()
        .flat_map(|(_, r)| r.cases.iter().map(|c| c.family.as_str()))
        .filter(|f| !f.is_empty())
        .collect();
    let mut out = format!(
        "# Certification across {} hosts (suite {}, {})\n\n{}\n\n",
        merged.hosts.len(),
        merged.suite_version,
        merged
            .suite_hash
            .as_deref()
            .unwrap_or("scenario set unknown"),
        if merged.certified {
            "Every host's run is CERTIFIED."
        } else if !merged.missing.is_empty() {
            "**Not certified everywhere**: a leg wrote no report (see Missing legs)."
        } else {
            "**Not certified everywhere**: see the columns marked **no** and each host's verdict."
        }
    );
    out.push_str(&header(
        columns
            .iter()
            .map(|(host, _, b)| format!("{host}: {}", b.name)),
    ));
    out.push_str(&family_rows(
        families.iter().copied(),
        &columns,
        |(_, r, b), family| {
            r.cases
                .iter()
                .filter(|c| c.family == family && c.backend == b.name)
                .map(|c| c.status)
                .collect()
        },
    ));
    out.push_str(&row(
        "**enforcement**",
        columns
            .iter()
            .map(|(_, _, b)| b.enforcement.map_or("-", |e| e.as_str())),
    ));
    for class in sandbox::EnforcementClass::ALL {
        out.push('\n');
        out.push_str(&row(
            &format!("**{}**", class.as_str()),
            columns.iter().map(|(_, _, b)| class_word(b, class)),
        ));
    }
    out.push('\n');
    out.push_str(&row(
        "**certified**",
        columns.iter().map(|(_, _, b)| certified(b.certified)),
    ));
    out.push_str("\n\n");
    out.push_str(super::markdown::PARTIAL_LEGEND);
    hosts_section(&mut out, merged);
    differences(&mut out, merged);
    out
}

/// Each host: its label, verdict, leg, user, kernel, Landlock ABI, whether bwrap was usable,
/// its commit; what it left out and its backends' problems; then the missing legs.
fn hosts_section(out: &mut String, merged: &Merged) {
    out.push_str("## Hosts\n\n");
    for (label, r) in &merged.hosts {
        let h = &r.host;
        let _ = writeln!(
            out,
            "- **{label}**: {}; leg {}, uid {}, {} {}, Landlock ABI {}, bwrap {}; host {}, \
             commit {}, seed {}",
            r.verdict,
            h.leg.as_deref().unwrap_or("not named"),
            h.uid.map_or("?".into(), |u| u.to_string()),
            h.os,
            h.kernel.as_deref().unwrap_or("?"),
            h.landlock_abi.map_or("none".into(), |a| a.to_string()),
            match (h.bwrap_usable, &h.bwrap_version) {
                (Some(true), Some(v)) => format!("usable ({v})"),
                (Some(false), Some(v)) => format!("not usable ({v})"),
                (_, None) => "not installed".into(),
                (None, Some(v)) => format!("{v}, not probed"),
            },
            h.hostname.as_deref().unwrap_or("?"),
            r.commit.as_deref().unwrap_or("unknown"),
            r.seed,
        );
        if !r.left_out_families.is_empty() {
            let _ = writeln!(out, "  - left out: {}", r.left_out_families.join(", "));
        }
        for p in r.run_problems() {
            let _ = writeln!(out, "  - {p}");
        }
    }
    if !merged.missing.is_empty() {
        out.push_str("\n## Missing legs\n\n");
        for (leg, why) in &merged.missing {
            let _ = writeln!(out, "- **{leg}**: {why}");
        }
    }
}

/// The cases whose outcome differs between the hosts that ran them (the first hundred).
fn differences(out: &mut String, merged: &Merged) {
    let differing = differing(merged);
    if differing.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n## Cases that differ between hosts ({})\n",
        differing.len()
    );
    for (trial, outcomes) in differing.iter().take(100) {
        let outcomes: Vec<String> = outcomes
            .iter()
            .map(|(host, status)| format!("{host} {}", status.code()))
            .collect();
        let _ = writeln!(out, "- `{trial}`: {}", outcomes.join(", "));
    }
    if differing.len() > 100 {
        let _ = writeln!(
            out,
            "- ... and {} more (report.html)",
            differing.len() - 100
        );
    }
}

/// Every trial that ran on two or more hosts with different outcomes, with each host's.
pub fn differing(merged: &Merged) -> BTreeMap<&str, Vec<(&str, Status)>> {
    let mut all: BTreeMap<&str, Vec<(&str, Status)>> = BTreeMap::new();
    for (host, r) in &merged.hosts {
        for c in &r.cases {
            all.entry(&c.trial).or_default().push((host, c.status));
        }
    }
    all.retain(|_, outcomes| {
        outcomes.len() > 1 && outcomes.iter().any(|(_, s)| *s != outcomes[0].1)
    });
    all
}

/// Writes `merged.json`, `matrix.md` and `report.html` into `dir`.
pub fn write(merged: &Merged, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(merged).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("merged.json"), json)?;
    std::fs::write(dir.join("matrix.md"), markdown(merged))?;
    let hosts: Vec<(&str, &Report)> = merged.hosts.iter().map(|(l, r)| (l.as_str(), r)).collect();
    let title = format!("Certification across {} hosts", merged.hosts.len());
    std::fs::write(dir.join("report.html"), super::html::html(&title, &hosts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leg's report as `report.json` has it: one landlock backend, its protected class as
    /// given, one case with `status`.
    fn leg(dir: &Path, leg: &str, uid: u32, protected: &str, status: &str) -> PathBuf {
        let report = serde_json::json!({
            "suite_version": "0.1.0",
            "suite_hash": "sha256:same",
            "commit": "abc",
            "host": {"os": "linux", "kernel": "6.18", "landlock_abi": 7, "uid": uid,
                     "bwrap_version": "bubblewrap 0.8.0", "bwrap_usable": leg != "landlock-fallback",
                     "leg": leg},
            "backends": [{"name": "landlock", "certified": true, "enforcement": "partial",
                          "classes": {"files": {"enforcement": "full"},
                                      "protected": {"enforcement": protected}}}],
            "cases": [{"trial": "protected::landlock::hooks::write", "backend": "landlock",
                       "family": "protected", "scenario": "PR-001", "level": "must",
                       "status": status, "message": null, "duration_ms": 1.0}],
            "verdict": "CERTIFIED",
            "seed": 7
        });
        let path = dir.join(leg);
        std::fs::create_dir_all(&path).expect("mkdir");
        std::fs::write(path.join("report.json"), report.to_string()).expect("write");
        path
    }

    #[test]
    fn the_fallback_legs_protected_row_survives_and_hosts_are_labelled_by_leg() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = [
            leg(dir.path(), "root", 0, "full", "PASS"),
            leg(dir.path(), "user", 1001, "full", "PASS"),
            leg(
                dir.path(),
                "landlock-fallback",
                1001,
                "not-governed",
                "XFAIL",
            ),
        ];
        let expect: Vec<String> = ["root", "user", "landlock-fallback"]
            .map(String::from)
            .to_vec();
        let merged = merge(&paths, false, &expect).expect("merge");
        assert!(merged.certified && merged.missing.is_empty());
        let matrix = markdown(&merged);
        let row = matrix
            .lines()
            .find(|l| l.starts_with("| **protected** |"))
            .expect("a protected row");
        assert_eq!(row, "| **protected** | full | full | not-governed |");
        assert!(matrix.contains(
            "| family | root: landlock | user: landlock | landlock-fallback: landlock |"
        ));
        assert!(
            matrix.contains("- **landlock-fallback**: CERTIFIED; leg landlock-fallback, uid 1001, linux 6.18, Landlock ABI 7, bwrap not usable (bubblewrap 0.8.0)"),
            "{matrix}"
        );
        assert!(matrix.contains("- `protected::landlock::hooks::write`: root PASS, user PASS, landlock-fallback XFAIL"), "{matrix}");
    }

    #[test]
    fn an_expected_leg_without_a_report_is_named_and_fails_the_merge() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = [
            leg(dir.path(), "root", 0, "full", "PASS"),
            dir.path().join("macos"),
        ];
        let expect: Vec<String> = ["root", "user", "macos"].map(String::from).to_vec();
        let merged = merge(&paths, false, &expect).expect("merge");
        assert!(!merged.certified);
        let missing: Vec<&str> = merged.missing.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(missing, ["macos", "user"]);
        assert!(markdown(&merged).contains("## Missing legs"));
        // Without --expect a named path without a report is bad input, as before.
        assert!(matches!(
            merge(&paths, false, &[]),
            Err(MergeError::Missing { .. })
        ));
    }
}
