//! How each local runner speaks on stderr: what its kernel prints on a denied file effect, and how
//! the runner itself failing identifies itself.
//!
//! Errno dialects differ by backend: bwrap's read-only bind yields `EROFS`, Landlock `EACCES`
//! (and `EXDEV` for a cross-directory rename or link without REFER), Seatbelt `EPERM`. A line
//! carrying another backend's errno is an ordinary failure, not a denial.

use sandbox::RunnerFailureRule;
use serde::{Deserialize, Serialize};

/// A backend's stderr dialect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dialect {
    /// Stderr substrings of a denied file effect.
    pub denial_signatures: Vec<String>,
    /// How the runner failing before the payload ran identifies itself.
    pub runner_failure_rules: Vec<RunnerFailureRule>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// bwrap: `EROFS` denials (and `EBUSY`: a rename of or over a protected path's mount point);
/// failures exit 1 with a `bwrap: ` line, or the AppArmor-restricted
/// user-namespace wordings that lack the prefix.
pub fn bwrap() -> Dialect {
    Dialect {
        denial_signatures: strings(&["Read-only file system", "Device or resource busy"]),
        runner_failure_rules: vec![RunnerFailureRule {
            allowed_exit_codes: Some(vec![1]),
            fatal_signatures: strings(&[
                "bwrap: ",
                "setting up uid map: Permission denied",
                "loopback: Failed RTM_NEWADDR",
            ]),
            informational_lines: Vec::new(),
        }],
    }
}

/// bwrap running the launcher ([`crate::profile::bwrap_guard_args`]): bwrap's denials (a write
/// outside the writable set meets the read-only bind first, `EROFS`, before the launcher's
/// Landlock ruleset is asked; what only Landlock refuses, a host FIFO opened for writing, reads
/// `Permission denied` and stays an ordinary failure, as a payload's own `EACCES` does under
/// bwrap), and either runner failing: bwrap's rule or the launcher's (exit 125, `landlock-run: `).
pub fn bwrap_guarded() -> Dialect {
    let mut d = bwrap();
    d.runner_failure_rules
        .extend(landlock().runner_failure_rules);
    d
}

/// The Landlock launcher: `EACCES` and `EXDEV` denials, and the protected paths' `EROFS` and
/// `EBUSY` (read-only binds in its private mount namespace); failures exit 125 with a
/// `landlock-run: ` line; the partial-enforcement notice is informational.
pub fn landlock() -> Dialect {
    Dialect {
        denial_signatures: strings(&[
            "Permission denied",
            "Invalid cross-device link",
            "Read-only file system",
            "Device or resource busy",
        ]),
        runner_failure_rules: vec![RunnerFailureRule {
            allowed_exit_codes: Some(vec![landlock_run::FAILURE_EXIT_CODE]),
            fatal_signatures: vec![landlock_run::DIAGNOSTIC_PREFIX.to_owned()],
            informational_lines: vec![landlock_run::PARTIAL_NOTICE.to_owned()],
        }],
    }
}

/// Seatbelt (`/usr/bin/sandbox-exec`): `EPERM` denials; any `sandbox-exec: ` line on a non-zero
/// exit is the runner failing (nested Seatbelt: `sandbox_apply: Operation not permitted`, exit 71).
pub fn seatbelt() -> Dialect {
    Dialect {
        denial_signatures: strings(&["Operation not permitted"]),
        runner_failure_rules: vec![RunnerFailureRule {
            allowed_exit_codes: None,
            fatal_signatures: strings(&["sandbox-exec: "]),
            informational_lines: Vec::new(),
        }],
    }
}

/// An operator `runner_command`: a bwrap-shaped runner asserted by the operator, with its own
/// validated signatures and bwrap's denial dialect.
pub fn operator(rule: RunnerFailureRule) -> Dialect {
    Dialect {
        denial_signatures: bwrap().denial_signatures,
        runner_failure_rules: vec![rule],
    }
}
