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
//! - `html`: the self-contained `report.html` ([`html()`]).
//! - `write`: the reports written into place, all or nothing ([`write()`]).
//! - [`merge`]: several hosts' reports joined into one matrix (`certify merge`).
//! - [`diff`]: what changed between two runs (`certify diff`).
//! - [`exit`]: certify's exit codes.

use std::path::Path;

pub mod diff;
mod host;
mod html;
mod junit;
mod markdown;
mod matrix;
pub mod merge;
pub mod places;
mod report;
mod schedule;
mod verdict;
mod write;

pub use html::{escape, html, replay};
pub use junit::{JunitError, junit};
pub use markdown::{markdown, wrap};
pub use report::{BackendReport, CaseResult, HostFacts, Report, Status, Verdict, WorldPlaces};
pub use schedule::{Options, run};
pub use write::{REPORT_FILES, write};

/// certify's exit codes (`certify --help` lists them).
pub mod exit {
    /// Every backend certified on the whole suite (`certify`), on every host (`merge`); no new
    /// failure (`diff`).
    pub const CERTIFIED: u8 = 0;
    /// Not certified (`certify`, `merge`: a case failed, a backend is not certified, a leg is
    /// missing); a new failure or XPASS (`diff`).
    pub const NOT_CERTIFIED: u8 = 1;
    /// Bad usage or bad input: nothing was run and nothing written.
    pub const USAGE: u8 = 2;
    /// `PARTIAL`: everything run passed, but `--family` left families out (no certificate).
    pub const PARTIAL: u8 = 3;
    /// Stopped by a signal (Ctrl-C): the run's worlds removed, no report written.
    pub const STOPPED: u8 = 130;
    /// The exit codes as `--help` states them.
    pub const HELP: &str = "Exit codes: 0 certified (merge: on every host; diff: nothing newly \
        failing); 1 not certified (merge: or a leg missing; diff: a new FAIL or XPASS); 2 bad \
        usage or input, nothing written; 3 PARTIAL (--family left families out); 130 stopped by \
        a signal, no report written.";
}

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
