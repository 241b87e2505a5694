//! Certification: every scenario against every backend in the run, a status per case, a verdict
//! per backend, and the reports (JSON, JUnit XML, a Markdown matrix a person reads in a pull
//! request). The cases run exactly as the test harness runs them; only the bookkeeping differs.
//!
//! Its parts:
//! - `report`: what a run reports ([`Report`], [`CaseResult`], [`BackendReport`], [`Status`]).
//! - `schedule`: running the trials on a pool of workers ([`run`], [`Options`]).
//! - `verdict`: a backend's verdict and its guard.
//! - `host`: the host's facts a report carries.
//! - `markdown`: the Markdown report ([`markdown`], [`wrap`]).
//! - `matrix`: the matrix rows the Markdown report and the merged one both write.
//! - `junit`: the JUnit XML ([`junit`]).
//! - `write`: the reports written into place, all or nothing ([`write()`]).
//! - [`merge`]: several hosts' reports joined into one matrix (`certify merge`).

use std::path::Path;

mod host;
mod junit;
mod markdown;
mod matrix;
pub mod merge;
mod report;
mod schedule;
mod verdict;
mod write;

pub use junit::{JunitError, junit};
pub use markdown::{markdown, wrap};
pub use report::{BackendReport, CaseResult, HostFacts, Report, Status, WorldPlaces};
pub use schedule::{Options, run};
pub use write::write;

/// The scenario whose failure means a payload can pass for a broken sandbox
/// (`scenarios/runner-failure/forged_signatures_stderr_only.yaml`).
pub const FORGED_SIGNATURE_SCENARIO: &str = "RF-013";

/// The families of the scenario root `root`: its folders that hold at least one scenario file
/// (`.yaml` or `.yml`), sorted. A `--family` filter must name one of them.
pub fn families(root: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut families: Vec<String> = dir
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .filter(|entry| {
            std::fs::read_dir(entry.path()).is_ok_and(|files| {
                files.filter_map(Result::ok).any(|f| {
                    f.path()
                        .extension()
                        .is_some_and(|e| e == "yaml" || e == "yml")
                })
            })
        })
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    families.sort();
    families
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_character_and_bounds_each_line() {
        let text = format!("short words here\n{} tail", "x".repeat(250));
        let lines = wrap(&text, 100);
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{lines:?}");
        let joined: String = lines.concat();
        let kept: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        assert_eq!(joined.replace(' ', ""), kept);
    }
}
