//! `certify merge`: joins the reports of several hosts (the legs of a CI matrix) into one report
//! and one Markdown matrix, so a maintainer reads one table instead of one per leg.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Status;
use super::matrix::{certified, family_rows, header, row};

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

/// What a merge reads of one report (the rest is left in the host's own report).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct HostReport {
    /// The suite's version.
    pub suite_version: String,
    /// The hash of the scenario set the run used (`sha256:...`); `None` in reports that
    /// predate it.
    #[serde(default)]
    pub suite_hash: Option<String>,
    /// The suite's commit, when known.
    pub commit: Option<String>,
    /// The host's facts, as the report states them.
    pub host: serde_json::Map<String, serde_json::Value>,
    /// The run's verdict (`CERTIFIED`, `PARTIAL`, `NOT CERTIFIED`).
    pub verdict: String,
    /// Every backend's verdict.
    pub backends: Vec<BackendVerdict>,
    /// Every case.
    pub cases: Vec<CaseLine>,
    /// The families the run left out.
    #[serde(default)]
    pub left_out_families: Vec<String>,
}

/// One backend's verdict in one host's report.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct BackendVerdict {
    /// Its name.
    pub name: String,
    /// Certified on that host.
    pub certified: bool,
    /// The enforcement reported there.
    pub enforcement: Option<String>,
    /// What denied certification there, besides bad cases.
    #[serde(default)]
    pub problems: Vec<String>,
}

/// One case of one host's report.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct CaseLine {
    /// The trial name.
    pub trial: String,
    /// The backend.
    pub backend: String,
    /// The family.
    pub family: String,
    /// What it came to.
    pub status: Status,
}

/// Several hosts' reports, each under its label (the name of the directory it was read from).
#[derive(Clone, Debug, Serialize)]
pub struct Merged {
    /// The suite version of the first report.
    pub suite_version: String,
    /// The scenario set's hash of the first report (`None`: it names none).
    pub suite_hash: Option<String>,
    /// Each host's report, by label, in the order given.
    pub hosts: Vec<(String, HostReport)>,
    /// Every host's run is `CERTIFIED` (every backend certified, no family left out).
    pub certified: bool,
}

/// Reads `path`: a report directory (its `report.json`) or a `report.json` itself.
pub fn read(path: &Path) -> Result<HostReport, MergeError> {
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

/// The label of a report read from `path`: its directory's name.
fn label(path: &Path) -> String {
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Merges the reports at `paths`; refuses reports of different suite versions unless
/// `allow_mixed_versions`. Two reports with the same label get `#2`, `#3`, ... appended.
pub fn merge(paths: &[PathBuf], allow_mixed_versions: bool) -> Result<Merged, MergeError> {
    let Some(first_path) = paths.first() else {
        return Err(MergeError::Nothing);
    };
    let mut hosts: Vec<(String, HostReport)> = Vec::new();
    let mut first: Option<(PathBuf, String)> = None;
    let mut first_hash: Option<Option<String>> = None;
    for path in paths {
        let report = read(path)?;
        match &first_hash {
            None => first_hash = Some(report.suite_hash.clone()),
            Some(hash) if *hash != report.suite_hash && !allow_mixed_versions => {
                let unknown = |h: &Option<String>| h.clone().unwrap_or_else(|| "unknown".into());
                return Err(MergeError::MixedScenarioSets {
                    path: path.clone(),
                    found: unknown(&report.suite_hash),
                    first: first_path.clone(),
                    expected: unknown(hash),
                });
            }
            Some(_) => {}
        }
        match &first {
            None => first = Some((path.clone(), report.suite_version.clone())),
            Some((first_path, version))
                if *version != report.suite_version && !allow_mixed_versions =>
            {
                return Err(MergeError::MixedVersions {
                    path: path.clone(),
                    found: report.suite_version,
                    first: first_path.clone(),
                    expected: version.clone(),
                });
            }
            Some(_) => {}
        }
        let mut name = label(path);
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
    let suite_version = first.map_or_else(|| first_path.display().to_string(), |(_, v)| v);
    // A host's PARTIAL run (families left out) is no certificate there, whatever its backends.
    let certified = hosts.iter().all(|(_, r)| {
        r.verdict == "CERTIFIED" && !r.backends.is_empty() && r.backends.iter().all(|b| b.certified)
    });
    Ok(Merged {
        suite_version,
        suite_hash: first_hash.flatten(),
        hosts,
        certified,
    })
}

/// The merged matrix: one column per (host, backend), one row per family, then each column's
/// enforcement and verdict, then every host's facts.
pub fn markdown(merged: &Merged) -> String {
    let columns: Vec<(&str, &HostReport, &BackendVerdict)> = merged
        .hosts
        .iter()
        .flat_map(|(label, r)| r.backends.iter().map(move |b| (label.as_str(), r, b)))
        .collect();
    let mut families: Vec<&str> = merged
        .hosts
        .iter()
        .flat_map(|(_, r)| r.cases.iter().map(|c| c.family.as_str()))
        .filter(|f| !f.is_empty())
        .collect();
    families.sort_unstable();
    families.dedup();
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
        families.iter().map(|f| f.as_ref()),
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
            .map(|(_, _, b)| b.enforcement.as_deref().unwrap_or("-")),
    ));
    out.push('\n');
    out.push_str(&row(
        "**certified**",
        columns.iter().map(|(_, _, b)| certified(b.certified)),
    ));
    out.push_str("\n\n## Hosts\n\n");
    for (label, r) in &merged.hosts {
        let facts: Vec<String> = r
            .host
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k} {s}"),
                other => format!("{k} {other}"),
            })
            .collect();
        out.push_str(&format!(
            "- **{label}**: {}; {}{}\n",
            r.verdict,
            facts.join(", "),
            r.commit
                .as_deref()
                .map(|c| format!("; commit {c}"))
                .unwrap_or_default()
        ));
        if !r.left_out_families.is_empty() {
            out.push_str(&format!(
                "  - left out: {}\n",
                r.left_out_families.join(", ")
            ));
        }
        for b in &r.backends {
            for p in &b.problems {
                out.push_str(&format!("  - {}: {p}\n", b.name));
            }
        }
    }
    out
}

/// Writes `merged.json` and `matrix.md` into `dir`.
pub fn write(merged: &Merged, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(merged).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("merged.json"), json)?;
    std::fs::write(dir.join("matrix.md"), markdown(merged))
}
