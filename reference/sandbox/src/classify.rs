//! The one classifier: a broken sandbox, a kernel denial, or an ordinary result.
//!
//! Priority, highest first:
//! 1. spawn-channel evidence: the runner program itself could not be started (`ENOENT`/`EACCES`
//!    attributed to `argv[0]`, with the workdir independently verified usable);
//! 2. runner failure: decided by the out-of-band status channel when the launch has one, otherwise
//!    by the stderr [`RunnerFailureRule`]s;
//! 3. denial: a stderr line carrying one of the backend's denial signatures, whatever the exit
//!    status (the RFC: a kernel denial is a result fact independent of, orthogonal to, the exit
//!    code; `printf x > f; echo after` exits 0 and was still denied);
//! 4. an ordinary result.
//!
//! Signal deaths and exit 0 are never runner failures (a runner that failed never exits 0, and a
//! signal says nothing about who died). Exits 126/127 after a successful launch are ordinary
//! unless a rule of the selected runner matches.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::confined::{ConfinedArgv, RunnerFailureRule};

/// How a confined launch ended, as the consumer observed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessOutcome {
    /// The process could not be spawned at all.
    SpawnFailed(SpawnFailure),
    /// The process exited with a code.
    Exited {
        /// Exit code.
        code: i32,
        /// Everything it wrote to stderr.
        stderr: Vec<u8>,
    },
    /// The process was killed by a signal.
    Signaled {
        /// Signal number.
        signal: i32,
        /// Everything it wrote to stderr before dying.
        stderr: Vec<u8>,
    },
}

/// A failed spawn, with what the consumer knows about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnFailure {
    /// The error class.
    pub kind: SpawnErrorKind,
    /// The program the error is attributable to, when the consumer knows it.
    pub path: Option<PathBuf>,
    /// Whether the consumer independently verified the working directory exists and is usable
    /// (a missing workdir also surfaces as `ENOENT` from spawn).
    pub workdir_usable: bool,
    /// The original error text.
    pub message: String,
}

/// The spawn error classes that matter to classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SpawnErrorKind {
    /// `ENOENT`.
    NotFound,
    /// `EACCES`.
    PermissionDenied,
    /// Anything else (resource limits, `E2BIG`, ...): ordinary command-start semantics.
    Other,
}

/// What the out-of-band status channel says about the payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "payload")]
pub enum PayloadStatus {
    /// The payload was executed.
    Ran {
        /// Its exit code, when the channel reports one.
        exit_code: Option<i32>,
    },
    /// The runner failed before executing the payload.
    NeverRan {
        /// The runner's own words from the channel, when it wrote any.
        detail: Option<String>,
    },
}

/// Which evidence proved a runner failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// The runner program could not be spawned.
    SpawnChannel,
    /// The out-of-band status channel reported that the payload never ran.
    StatusChannel,
    /// A stderr runner-failure rule matched.
    StderrRule,
}

/// The verdict on one confined launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "class")]
pub enum Classification {
    /// The sandbox itself failed; the payload never ran. Foreground: `SANDBOX_UNAVAILABLE`.
    RunnerFailure {
        /// What proved it.
        evidence: Evidence,
        /// The runner's own words (the matched original stderr line, or the spawn error).
        detail: String,
    },
    /// The payload ran and the kernel refused a file effect.
    Denied {
        /// The stderr line that carried the denial signature.
        line: String,
    },
    /// The command could not start for a reason that is not the runner's (a missing workdir, a
    /// resource limit): the consumer's ordinary command-start error.
    StartFailed {
        /// The original spawn error.
        detail: String,
    },
    /// An ordinary result: success, failure, or a signal death.
    Ordinary,
}

impl Classification {
    /// The stable machine-readable code of this verdict.
    pub const fn code(&self) -> &'static str {
        match self {
            Classification::RunnerFailure { .. } => "runner-failure",
            Classification::Denied { .. } => "denied",
            Classification::StartFailed { .. } => "start-failed",
            Classification::Ordinary => "ordinary",
        }
    }
}

/// Classifies the outcome of spawning `launch.argv`. `status` is what the launch's status channel
/// said, when it has one; it is ignored when the launch declares no channel.
pub fn classify(
    launch: &ConfinedArgv,
    outcome: &ProcessOutcome,
    status: Option<&PayloadStatus>,
) -> Classification {
    let (code, stderr) = match outcome {
        ProcessOutcome::SpawnFailed(failure) => return classify_spawn(launch, failure),
        ProcessOutcome::Signaled { stderr, .. } | ProcessOutcome::Exited { code: 0, stderr } => {
            let stderr = String::from_utf8_lossy(stderr);
            return denial_or_ordinary(launch, Lines(&stderr));
        }
        ProcessOutcome::Exited { code, stderr } => (*code, String::from_utf8_lossy(stderr)),
    };
    let lines = Lines(&stderr);

    if launch.status_channel.is_some() {
        match status {
            Some(PayloadStatus::Ran { .. }) => {}
            Some(PayloadStatus::NeverRan { .. }) | None => {
                return Classification::RunnerFailure {
                    evidence: Evidence::StatusChannel,
                    detail: never_ran_detail(launch, code, lines, detail_of(status)),
                };
            }
        }
    } else if let Some(line) = launch
        .runner_failure_rules
        .iter()
        .find_map(|rule| rule_match(rule, code, lines))
    {
        return Classification::RunnerFailure {
            evidence: Evidence::StderrRule,
            detail: line.to_owned(),
        };
    }

    denial_or_ordinary(launch, lines)
}

/// A denial when a stderr line carries one of the launch's denial signatures, else ordinary.
fn denial_or_ordinary(launch: &ConfinedArgv, lines: Lines<'_>) -> Classification {
    match lines
        .iter()
        .find(|line| contains_any(line, &launch.denial_signatures))
    {
        Some(line) => Classification::Denied {
            line: line.to_owned(),
        },
        None => Classification::Ordinary,
    }
}

fn detail_of(status: Option<&PayloadStatus>) -> Option<&str> {
    match status {
        Some(PayloadStatus::NeverRan { detail }) => detail.as_deref(),
        _ => None,
    }
}

/// The runner's own words when the status channel proved the payload never ran: the channel's
/// detail, else the line a runner rule would have matched, else the last stderr line.
fn never_ran_detail(
    launch: &ConfinedArgv,
    code: i32,
    lines: Lines<'_>,
    channel_detail: Option<&str>,
) -> String {
    if let Some(d) = channel_detail.filter(|d| !d.trim().is_empty()) {
        return d.to_owned();
    }
    let any_code_rule = |rule: &RunnerFailureRule| RunnerFailureRule {
        allowed_exit_codes: None,
        ..rule.clone()
    };
    launch
        .runner_failure_rules
        .iter()
        .find_map(|rule| rule_match(&any_code_rule(rule), code, lines).map(str::to_owned))
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            format!(
                "{} exited {code} before the payload ran and printed nothing",
                launch.backend
            )
        })
}

fn classify_spawn(launch: &ConfinedArgv, failure: &SpawnFailure) -> Classification {
    let runner = launch.argv.first().map(OsStr::new);
    let attributable = failure.workdir_usable
        && matches!(
            failure.kind,
            SpawnErrorKind::NotFound | SpawnErrorKind::PermissionDenied
        )
        && failure.path.as_deref().map(|p| p.as_os_str()) == runner;
    if attributable {
        Classification::RunnerFailure {
            evidence: Evidence::SpawnChannel,
            detail: failure.message.clone(),
        }
    } else {
        Classification::StartFailed {
            detail: failure.message.clone(),
        }
    }
}

/// Stderr as lines, walked as often as needed without collecting them (a capped stderr of short
/// lines would otherwise cost a pointer pair per line, many times its own size).
#[derive(Clone, Copy)]
struct Lines<'a>(&'a str);

impl<'a> Lines<'a> {
    fn iter(self) -> impl DoubleEndedIterator<Item = &'a str> {
        stderr_lines(self.0)
    }
}

/// Stderr split into lines, each without its `\n` or `\r\n` terminator.
fn stderr_lines(stderr: &str) -> impl DoubleEndedIterator<Item = &str> {
    stderr
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// The original line a rule matches, if it matches this exit code and stderr.
fn rule_match<'a>(rule: &RunnerFailureRule, code: i32, lines: Lines<'a>) -> Option<&'a str> {
    if code == 0 {
        return None;
    }
    if let Some(codes) = &rule.allowed_exit_codes
        && !codes.contains(&code)
    {
        return None;
    }
    let informational: Vec<Cow<'_, str>> = rule
        .informational_lines
        .iter()
        .map(|l| fold_case(l))
        .collect();
    lines
        .iter()
        .filter(|line| {
            let folded = fold_case(line);
            !informational.contains(&folded)
        })
        .find(|line| contains_any(line, &rule.fatal_signatures))
}

/// Case-insensitive substring match against non-empty signatures (an empty one never matches).
fn contains_any(line: &str, signatures: &[String]) -> bool {
    let folded = fold_case(line);
    signatures
        .iter()
        .filter(|s| !s.is_empty())
        .any(|s| folded.contains(fold_case(s).as_ref()))
}

fn fold_case(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_uppercase) {
        Cow::Owned(s.to_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}
