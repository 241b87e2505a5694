//! The `classify` step: how a launch ended and what the classifier must conclude of it.

use sandbox::{Evidence, SpawnErrorKind, StatusFormat};
use serde::Deserialize;

/// A `classify` step: how the launch ended and what the classifier must conclude.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifyStep {
    /// Replaces the backend's dialect (required for the `operator` backend).
    #[serde(default)]
    pub dialect: Option<DialectSpec>,
    /// How the process ended.
    pub outcome: OutcomeSpec,
    /// What the out-of-band status channel carried; omitted means the launch has no channel.
    #[serde(default)]
    pub status: Option<StatusSpec>,
    /// The verdict the classifier must reach.
    pub expect: ClassifyExpect,
}

/// An inline dialect.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DialectSpec {
    /// Denial substrings.
    #[serde(default)]
    pub denial_signatures: Vec<String>,
    /// Runner-failure rules.
    #[serde(default)]
    pub runner_failure_rules: Vec<sandbox::RunnerFailureRule>,
}

/// How the process ended: exactly one of `exit`, `signal`, `spawn-error`.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OutcomeSpec {
    /// Exit code.
    #[serde(default)]
    pub exit: Option<i32>,
    /// Killing signal.
    #[serde(default)]
    pub signal: Option<i32>,
    /// The spawn itself failed.
    #[serde(default)]
    pub spawn_error: Option<SpawnErrorSpec>,
    /// Stderr text (use YAML escapes such as `\r\n` for exact bytes).
    #[serde(default)]
    pub stderr: String,
}

/// A spawn failure.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnErrorSpec {
    /// `not-found`, `permission-denied` or `other`.
    pub kind: SpawnErrorKind,
    /// What the error is attributed to.
    pub program: Attribution,
    /// Whether the workdir was verified usable.
    pub workdir: Workdir,
}

/// Which program a spawn error is attributed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Attribution {
    /// The runner, `argv[0]` of the confined launch.
    Runner,
    /// Some other program.
    Other,
    /// No path was attributed.
    Unknown,
}

/// The state of the working directory at spawn time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Workdir {
    /// Independently verified to exist and be a directory.
    Usable,
    /// Missing (so `ENOENT` may be about it, not the runner).
    Missing,
}

/// The raw records the status channel carried, in the given format.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusSpec {
    /// The channel's record format.
    pub format: StatusFormat,
    /// Exactly what was written to the channel.
    #[serde(default)]
    pub records: String,
}

/// The classifier's expected verdict.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifyExpect {
    /// `runner-failure`, `denied`, `start-failed` or `ordinary`.
    pub class: ExpectedClass,
    /// For a runner failure: which evidence proved it.
    #[serde(default)]
    pub evidence: Option<Evidence>,
    /// The exact detail (runner failure), line (denial) or spawn message (start failure).
    #[serde(default)]
    pub detail: Option<String>,
}

/// The classification codes a scenario can expect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ExpectedClass {
    /// The sandbox failed; the payload never ran.
    RunnerFailure,
    /// A kernel denial.
    Denied,
    /// An ordinary start failure not attributable to the runner.
    StartFailed,
    /// An ordinary result.
    Ordinary,
}

impl ExpectedClass {
    /// The code [`sandbox::Classification::code`] returns for this class.
    pub const fn code(self) -> &'static str {
        match self {
            ExpectedClass::RunnerFailure => "runner-failure",
            ExpectedClass::Denied => "denied",
            ExpectedClass::StartFailed => "start-failed",
            ExpectedClass::Ordinary => "ordinary",
        }
    }
}
