//! [`RunFacts`]: what `sandboxctl run` prints, one typed value that `sandboxctl` serialises and
//! the conformance suite's selection steps deserialise, so the two cannot drift apart.
//!
//! The JSON is one object in one of three shapes, told apart by their keys (`serde(untagged)`,
//! each shape refusing keys it does not know):
//!
//! - [`RanFacts`]: the command went to its runner (exit 125 when the runner failed, else the
//!   payload's own exit status);
//! - [`UnavailableFacts`]: no runner could confine it, nothing ran (exit 125);
//! - [`RefusedFacts`]: the policy or the probe cache was refused before any runner started
//!   (exit 2).
//!
//! Keys appear in the order of the fields below, optional keys only when present, exactly as
//! the `json!` objects they replace printed them.
//!
//! The type lives here, beside the code that prints it: `sandbox` is the vocabulary every crate
//! shares and carries no program's output format, and `sandbox-local` is the provider, which
//! never prints. `conformance` already depends on everything this crate does, so reading it from
//! here adds no dependency cycle (and the multi-call `certify` that acts as `sandboxctl` links
//! this library anyway).

use serde::{Deserialize, Serialize};

use sandbox::{ClassEnforcements, Classification, NetworkMode, SandboxEnforcement, SandboxMode};
use sandbox_local::launch::Dropped;

/// What `sandboxctl run` prints on stdout: one of three shapes (module docs).
///
/// Read back as the conformance suite's selection steps do:
///
/// ```
/// use sandbox_cli::RunFacts;
///
/// let stdout = r#"{"mode": "workspace-write", "error": "SANDBOX_UNAVAILABLE",
///     "backend": "bwrap", "detail": "bwrap: setting up uid map: Permission denied",
///     "runner_failed": true}"#;
/// let facts: RunFacts = serde_json::from_str(stdout)?;
/// assert!(matches!(facts, RunFacts::Unavailable(_)));
/// assert_eq!(facts.error(), Some(sandbox::SANDBOX_UNAVAILABLE));
/// assert_eq!((facts.backend(), facts.runner_failed()), (Some("bwrap"), Some(true)));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RunFacts {
    /// The command went to its runner: it ran, or the runner failed before it did.
    Ran(Box<RanFacts>),
    /// No runner could confine the command (`SANDBOX_UNAVAILABLE` from `confine`): it never ran.
    Unavailable(UnavailableFacts),
    /// The policy or the probe cache was refused before any runner started, with its own code.
    Refused(RefusedFacts),
}

/// The facts of a command handed to its runner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RanFacts {
    /// The mode asked for.
    pub mode: SandboxMode,
    /// The network mode asked for.
    pub network: NetworkMode,
    /// The backend that confined it (`none` under `danger-full-access`).
    pub backend: String,
    /// The overall enforcement the backend reported.
    pub enforcement: SandboxEnforcement,
    /// The enforcement of each class of effect.
    pub classes: ClassEnforcements,
    /// The payload's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// Whether it was killed at `--timeout`.
    pub timed_out: bool,
    /// Whether the kernel refused a file effect (the classification is `denied`).
    pub denied: bool,
    /// Whether the runner failed and the payload never ran (exit 125).
    pub runner_failed: bool,
    /// The classifier's verdict.
    pub classification: Classification,
    /// What the command printed on stdout (at most the output cap; lossy UTF-8).
    pub stdout: String,
    /// What it printed on stderr (at most the output cap; lossy UTF-8).
    pub stderr: String,
    /// How many bytes of each stream were read and not kept: present only when output was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Dropped>,
    /// The denial marker of the mode: present only when the command was denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
    /// `SANDBOX_UNAVAILABLE`: present only when the runner failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The runner's own words: present only when the runner failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The facts of a command no runner could confine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnavailableFacts {
    /// The mode asked for.
    pub mode: SandboxMode,
    /// `SANDBOX_UNAVAILABLE`.
    pub error: String,
    /// The backend involved, when one was selected (`null` otherwise).
    pub backend: Option<String>,
    /// The runner's own words, or the probe verdict.
    pub detail: String,
    /// Always `true`: the command never ran.
    pub runner_failed: bool,
}

/// The facts of a call refused before any runner started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusedFacts {
    /// The mode asked for.
    pub mode: SandboxMode,
    /// The refusal's stable code (a bad root, a bad socket allowance, a bad cache directory).
    pub error: String,
    /// The refusal in words.
    pub detail: String,
}

impl RunFacts {
    /// The mode asked for.
    pub fn mode(&self) -> SandboxMode {
        match self {
            RunFacts::Ran(r) => r.mode,
            RunFacts::Unavailable(u) => u.mode,
            RunFacts::Refused(r) => r.mode,
        }
    }

    /// The error code, when there is one (`SANDBOX_UNAVAILABLE`, or a refusal's code).
    pub fn error(&self) -> Option<&str> {
        match self {
            RunFacts::Ran(r) => r.error.as_deref(),
            RunFacts::Unavailable(u) => Some(&u.error),
            RunFacts::Refused(r) => Some(&r.error),
        }
    }

    /// The runner's words or the refusal's, when there are any.
    pub fn detail(&self) -> Option<&str> {
        match self {
            RunFacts::Ran(r) => r.detail.as_deref(),
            RunFacts::Unavailable(u) => Some(&u.detail),
            RunFacts::Refused(r) => Some(&r.detail),
        }
    }

    /// The backend that confined the command (or that failed to), when one was involved.
    pub fn backend(&self) -> Option<&str> {
        match self {
            RunFacts::Ran(r) => Some(&r.backend),
            RunFacts::Unavailable(u) => u.backend.as_deref(),
            RunFacts::Refused(_) => None,
        }
    }

    /// Whether the runner failed (the command never ran); `None` when no runner was reached.
    pub fn runner_failed(&self) -> Option<bool> {
        match self {
            RunFacts::Ran(r) => Some(r.runner_failed),
            RunFacts::Unavailable(u) => Some(u.runner_failed),
            RunFacts::Refused(_) => None,
        }
    }

    /// The overall enforcement, when the command went to a runner.
    pub fn enforcement(&self) -> Option<SandboxEnforcement> {
        match self {
            RunFacts::Ran(r) => Some(r.enforcement),
            RunFacts::Unavailable(_) | RunFacts::Refused(_) => None,
        }
    }
}

impl From<RanFacts> for RunFacts {
    fn from(facts: RanFacts) -> Self {
        RunFacts::Ran(Box::new(facts))
    }
}

impl From<UnavailableFacts> for RunFacts {
    fn from(facts: UnavailableFacts) -> Self {
        RunFacts::Unavailable(facts)
    }
}

impl From<RefusedFacts> for RunFacts {
    fn from(facts: RefusedFacts) -> Self {
        RunFacts::Refused(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran() -> RanFacts {
        RanFacts {
            mode: SandboxMode::WorkspaceWrite,
            network: NetworkMode::Enabled,
            backend: "landlock".into(),
            enforcement: SandboxEnforcement::Full,
            classes: ClassEnforcements::from_overall(SandboxEnforcement::Full),
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            denied: false,
            runner_failed: false,
            classification: Classification::Ordinary,
            stdout: "hi\n".into(),
            stderr: String::new(),
            dropped: None,
            marker: None,
            error: None,
            detail: None,
        }
    }

    fn round_trip(facts: RunFacts) -> RunFacts {
        let json = serde_json::to_string(&facts).expect("serialise");
        serde_json::from_str(&json).expect("deserialise")
    }

    #[test]
    fn each_shape_reads_back_as_itself() {
        let shapes: [RunFacts; 3] = [
            ran().into(),
            UnavailableFacts {
                mode: SandboxMode::ReadOnly,
                error: sandbox::SANDBOX_UNAVAILABLE.into(),
                backend: None,
                detail: "no usable backend".into(),
                runner_failed: true,
            }
            .into(),
            RefusedFacts {
                mode: SandboxMode::WorkspaceWrite,
                error: "WORKSPACE_ROOT_MISSING".into(),
                detail: "no such directory".into(),
            }
            .into(),
        ];
        for facts in shapes {
            assert_eq!(round_trip(facts.clone()), facts);
        }
    }

    #[test]
    fn optional_keys_are_absent_until_present_and_keep_their_order() {
        let json = serde_json::to_string(&RunFacts::from(ran())).expect("serialise");
        assert!(
            !json.contains("dropped") && !json.contains("marker"),
            "{json}"
        );
        assert!(
            !json.contains("\"error\"") && !json.contains("\"detail\""),
            "{json}"
        );
        let mut failed = ran();
        failed.runner_failed = true;
        failed.error = Some(sandbox::SANDBOX_UNAVAILABLE.into());
        failed.detail = Some("bwrap: setting up uid map: Permission denied".into());
        let json = serde_json::to_string(&RunFacts::from(failed)).expect("serialise");
        let at = |key: &str| json.find(&format!("\"{key}\":")).expect(key);
        let order = [
            "mode",
            "network",
            "backend",
            "enforcement",
            "classes",
            "exit_code",
        ];
        let order = order
            .iter()
            .chain(&["signal", "timed_out", "denied", "runner_failed"]);
        let order: Vec<usize> = order
            .chain(&["classification", "stdout", "stderr", "error", "detail"])
            .map(|k| at(k))
            .collect();
        assert!(order.is_sorted(), "{json}");
    }

    #[test]
    fn the_accessors_read_every_shape() {
        let unavailable = RunFacts::from(UnavailableFacts {
            mode: SandboxMode::ReadOnly,
            error: sandbox::SANDBOX_UNAVAILABLE.into(),
            backend: Some("bwrap".into()),
            detail: "bwrap: No permissions to create new namespace".into(),
            runner_failed: true,
        });
        assert_eq!(unavailable.backend(), Some("bwrap"));
        assert_eq!(unavailable.runner_failed(), Some(true));
        assert_eq!(unavailable.error(), Some(sandbox::SANDBOX_UNAVAILABLE));
        assert_eq!(unavailable.enforcement(), None);
        let ran = RunFacts::from(ran());
        assert_eq!(ran.backend(), Some("landlock"));
        assert_eq!(ran.runner_failed(), Some(false));
        assert_eq!(ran.enforcement(), Some(SandboxEnforcement::Full));
        assert_eq!((ran.error(), ran.detail()), (None, None));
    }

    #[test]
    fn a_key_no_shape_knows_is_refused() {
        let json = r#"{"mode":"read-only","error":"X","detail":"d","extra":1}"#;
        assert!(serde_json::from_str::<RunFacts>(json).is_err());
    }
}
