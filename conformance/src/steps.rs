//! What each step kind does and how its expectation is checked.

mod attack;
mod classify;
#[cfg(target_os = "linux")]
mod control;
mod declared;
mod during;
mod effect;
mod forge;
#[cfg(target_os = "linux")]
mod ipc;
#[cfg(target_os = "linux")]
mod listen;
mod metadata;
mod mounts;
#[cfg(target_os = "linux")]
mod net;
mod person;
mod private;
mod race;
mod select;
mod tool;
#[cfg(target_os = "linux")]
mod unix_client;
mod walk;
mod wire;
mod writable;

use crate::backends::Backend;
use crate::metamorphic::INCONSISTENT;
use crate::scenario::Step;
use crate::scenario::load::ExpandedCase;

/// How a step failed: the outcomes the report tells apart. Each shows the text the case's
/// failure message has always carried (the report and expectation files' `observed` pins read
/// it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The step ran and its expectation was not met: what was expected and what the world or the
    /// backend showed instead.
    #[error("{0}")]
    Unmet(String),
    /// The backend answered a request and its renamed twin differently (the metamorphic check):
    /// the report's status `INCONSISTENT`, never excused by an expectation file.
    #[error("{INCONSISTENT}: {}", .0.join("; "))]
    Inconsistent(Vec<String>),
    /// The harness could not set the step up or observe it (a world, a listener, a helper
    /// process): nothing was asked of the backend yet, or its answer could not be read.
    #[error("{0}")]
    Harness(String),
    /// The step needs a facility this platform lacks (a Linux-only kernel API); the backends of
    /// that platform do not plan it.
    #[error("the {step} step needs Linux ({needs}); this host runs {os}", os = std::env::consts::OS)]
    Unavailable {
        /// The step's kind.
        step: &'static str,
        /// What it uses that only Linux has.
        needs: &'static str,
    },
}

/// A host command the world ran for a step failed: the harness's trouble, not the backend's.
impl From<crate::world::HostError> for StepError {
    fn from(e: crate::world::HostError) -> Self {
        StepError::Harness(e.to_string())
    }
}

/// The seeded draw of a run's worlds could not be made: the harness's trouble.
impl From<crate::world::SeedError> for StepError {
    fn from(e: crate::world::SeedError) -> Self {
        StepError::Harness(e.to_string())
    }
}

impl StepError {
    /// An unmet expectation.
    pub fn unmet(message: impl Into<String>) -> Self {
        StepError::Unmet(message.into())
    }

    /// The harness's own trouble, from any error of the world, the loader or the host (whether
    /// it is a `String` or a typed error).
    pub fn harness(error: impl std::fmt::Display) -> Self {
        StepError::Harness(error.to_string())
    }

    /// Whether this is the metamorphic check's [`StepError::Inconsistent`].
    pub fn is_inconsistent(&self) -> bool {
        matches!(self, StepError::Inconsistent(_))
    }
}

/// The first step of a case whose expectation was not met: which step, of what kind, and what
/// the world showed instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("step {step} ({kind}): {error}")]
pub struct CaseFailure {
    /// The step's position in the case, from 1.
    pub step: usize,
    /// The step's kind (`effect`, `attack`, `tool`, ...).
    pub kind: &'static str,
    /// How it failed.
    pub error: StepError,
}

impl CaseFailure {
    /// Whether the case failed the metamorphic check (the report's `INCONSISTENT`).
    pub fn is_inconsistent(&self) -> bool {
        self.error.is_inconsistent()
    }

    /// Whose failure it is: the backend's, the metamorphic check's, or the harness's own.
    pub fn blame(&self) -> Blame {
        match self.error {
            StepError::Inconsistent(_) => Blame::Inconsistent,
            StepError::Harness(_) | StepError::Unavailable { .. } => Blame::Harness,
            StepError::Unmet(_) => Blame::Backend,
        }
    }
}

/// Whose failure a case's is: the report's `FAIL` (the backend's), `INCONSISTENT`, or `ERROR`
/// (the harness could not set the case up or observe it: a missing tool, a world it could not
/// build; never charged to the backend and never excused by an expectation file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blame {
    /// The backend did not keep its promise.
    Backend,
    /// The backend answered a request and its renamed twin differently.
    Inconsistent,
    /// The harness's own trouble.
    Harness,
}

/// How a harness error starts its message in the report and the test output.
pub const HARNESS_ERROR: &str = "ERROR (the harness's own, not the backend's)";

/// Runs every step of `case` against `backend`; the first unmet expectation is the error. `tool`
/// steps of one case share one world, one session and one composition. Every confined launch of
/// the case is tagged: a process of it still alive when the case ends is killed, so it leaks into
/// no later case, and fails a case that passed (no process of a call outlives it). A case marked
/// `leftovers` runs with private shared places ([`crate::leftovers`]) and fails when anything is
/// left in them.
pub fn run_case(backend: &Backend, case: &ExpandedCase) -> Result<(), CaseFailure> {
    let in_case = || crate::survivors::in_case(|| run_steps(backend, case));
    let ((result, left), leftovers) = if case.case.leftovers {
        crate::leftovers::in_private_places(&backend.declared_state(), in_case).map_err(
            |error| CaseFailure {
                step: 0,
                kind: "leftovers",
                error,
            },
        )?
    } else {
        (in_case(), Vec::new())
    };
    result?;
    let end = case.case.steps.len();
    if !left.is_empty() {
        return Err(CaseFailure {
            step: end,
            kind: "survivors",
            error: StepError::Unmet(format!(
                "{} process(es) of the case's calls outlived them (killed now): {}",
                left.len(),
                crate::survivors::shown(&left)
            )),
        });
    }
    if !leftovers.is_empty() {
        let shown: Vec<String> = leftovers.iter().map(ToString::to_string).collect();
        return Err(CaseFailure {
            step: end,
            kind: "leftovers",
            error: StepError::Unmet(format!(
                "the case left {} entr{} in the host's shared places (on the host: {})",
                leftovers.len(),
                if leftovers.len() == 1 { "y" } else { "ies" },
                shown.join("; ")
            )),
        });
    }
    Ok(())
}

fn run_steps(backend: &Backend, case: &ExpandedCase) -> Result<(), CaseFailure> {
    let mut rig: Option<tool::Rig> = None;
    let mut bridge: Option<wire::Rig> = None;
    for (index, step) in case.case.steps.iter().enumerate() {
        let result = match step {
            Step::Classify(s) => classify::run(backend, s),
            Step::Effect(s) => effect::run(backend, s),
            Step::Select(s) => select::run(s),
            // After a call the case allowed to be refused was refused, its tool steps are moot.
            Step::Tool(_) if rig.as_ref().is_some_and(|r| r.refused) => Ok(()),
            Step::Tool(s) => tool::run(backend, case.case.setup.as_ref(), s, &mut rig),
            Step::Wire(s) => wire::run(backend, s, &mut bridge),
            Step::Attack(s) => attack::run(backend, s),
            Step::FenceRace(_) | Step::BindRace(_) if !cfg!(target_os = "linux") => {
                Err(linux_needs(step).unwrap_or(StepError::Unavailable {
                    step: step_kind(step),
                    needs: "Linux",
                }))
            }
            Step::FenceRace(s) => race::fence_race(backend, case.case.setup.as_ref(), s, &mut rig),
            Step::BindRace(s) => race::bind_race(backend, s),
            Step::World(s) => race::world(backend, case.case.setup.as_ref(), s, &mut rig),
            #[cfg(target_os = "linux")]
            Step::Net(s) => net::run(backend, s),
            #[cfg(target_os = "linux")]
            Step::HostIpc(s) => ipc::run(backend, s),
            // Not planned off Linux (see [`unavailable_here`]); refused if run anyway.
            #[cfg(not(target_os = "linux"))]
            Step::Net(_) | Step::HostIpc(_) => {
                Err(linux_needs(step).unwrap_or(StepError::Unavailable {
                    step: step_kind(step),
                    needs: "Linux",
                }))
            }
            Step::Forge(s) => forge::run(backend, s),
            Step::Declared(s) => declared::run(backend, s),
            Step::Writable(s) => writable::run(backend, s),
            Step::Walk(s) => walk::run(backend, s),
            Step::Mounts(s) => mounts::run(backend, s),
            Step::Metadata(s) => metadata::run(backend, s),
            Step::Private(s) => private::run(backend, s),
        };
        result.map_err(|error| CaseFailure {
            step: index + 1,
            kind: step_kind(step),
            error,
        })?;
    }
    // A tool case without a `world` step of its own still diffs its world at the end: only the
    // files its expectations name may have changed.
    if let Some(rig) = &rig
        && !case.case.steps.iter().any(|s| matches!(s, Step::World(_)))
    {
        let named: Vec<std::path::PathBuf> = case
            .case
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Tool(t) => Some(t.expect.files.keys()),
                _ => None,
            })
            .flatten()
            .map(|p| std::path::PathBuf::from(rig.expanded(p)))
            .collect();
        let diff = rig.diff(&named);
        if !diff.is_empty() {
            return Err(CaseFailure {
                step: case.case.steps.len(),
                kind: "world",
                error: StepError::Unmet(format!(
                    "the world changed where the case's expectations name nothing:\n  {}",
                    diff.join("\n  ")
                )),
            });
        }
    }
    Ok(())
}

/// The value of a `files:` expectation that means "no such entry".
pub const ABSENT: &str = "<absent>";

/// Checks one `files:` expectation: the file holds exactly `want`, or (for [`ABSENT`]) no entry
/// exists at all (not even a dangling symlink). The error says what is there instead.
fn check_file(path: &std::path::Path, want: &str) -> Result<(), StepError> {
    let got = std::fs::read_to_string(path).ok();
    let ok = match want {
        ABSENT => {
            let absent = std::fs::symlink_metadata(path).is_err();
            if absent {
                crate::late::found_absent(path);
            }
            absent
        }
        content => got.as_deref() == Some(content),
    };
    if ok {
        Ok(())
    } else {
        Err(StepError::Unmet(format!(
            "{} should be {want:?} but holds {got:?}",
            path.display()
        )))
    }
}

/// What a Linux-only step uses that only Linux has, as the error it fails with elsewhere; `None`
/// for a step that runs on every platform.
fn linux_needs(step: &Step) -> Option<StepError> {
    let needs = match step {
        Step::HostIpc(_) => "abstract unix sockets, SysV and POSIX message queues, keyrings",
        Step::Net(_) => "an abstract unix socket among its listeners",
        Step::FenceRace(_) | Step::BindRace(_) => "renameat2(RENAME_EXCHANGE)",
        _ => return None,
    };
    Some(StepError::Unavailable {
        step: step_kind(step),
        needs,
    })
}

/// Why a case with these steps cannot run on this platform (its first Linux-only step, off
/// Linux), or `None`: such a case is not planned here, with this reason.
pub fn unavailable_here(steps: &[Step]) -> Option<StepError> {
    if cfg!(target_os = "linux") {
        return None;
    }
    steps.iter().find_map(linux_needs)
}

fn step_kind(step: &Step) -> &'static str {
    match step {
        Step::Classify(_) => "classify",
        Step::Effect(_) => "effect",
        Step::Select(_) => "select",
        Step::Tool(_) => "tool",
        Step::Wire(_) => "wire",
        Step::Attack(_) => "attack",
        Step::FenceRace(_) => "fence-race",
        Step::BindRace(_) => "bind-race",
        Step::World(_) => "world",
        Step::Net(_) => "net",
        Step::HostIpc(_) => "host-ipc",
        Step::Forge(_) => "forge",
        Step::Declared(_) => "declared",
        Step::Writable(_) => "writable",
        Step::Walk(_) => "walk",
        Step::Mounts(_) => "mounts",
        Step::Metadata(_) => "metadata",
        Step::Private(_) => "private",
    }
}

/// The provider that confines for `backend`, or the harness's error when it cannot confine on
/// this host (such a backend's confining cases are not planned, so this is the harness's trouble).
fn confining(
    backend: &Backend,
) -> Result<&std::sync::Arc<dyn sandbox::SandboxProvider>, StepError> {
    backend.provider.as_ref().ok_or_else(|| {
        StepError::Harness(format!(
            "backend {} cannot confine on this host",
            backend.name
        ))
    })
}

/// A step's world could not be built: the harness's trouble.
fn world_error(e: std::io::Error) -> StepError {
    StepError::Harness(format!("cannot build the world: {e}"))
}

/// What a confined launch reported for one class, as a failure message shows it (`reports
/// <label> full`), with the ungoverned parts named when there are any.
#[cfg(target_os = "linux")]
fn reported(report: &sandbox::ClassReport, label: &str) -> String {
    if report.ungoverned.is_empty() {
        format!("reports {label} {}", report.enforcement)
    } else {
        format!(
            "reports {label} {} (ungoverned: {})",
            report.enforcement,
            report.ungoverned.join(", ")
        )
    }
}

/// What a probe step (network, host IPC) requires of its call before judging the host: the call
/// did not time out, its payload printed `started` first (it ran), and the world is unchanged.
/// A runner failure is judged by the step itself, before this (its message differs). Returns the
/// call's stdout and stderr.
#[cfg(target_os = "linux")]
fn probe_ran(
    done: &sandbox_local::launch::Finished,
    started: &str,
    world: &crate::world::World,
    before: &crate::world::Snapshot,
) -> Result<(String, String), StepError> {
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    if done.timed_out {
        return Err(StepError::Unmet(format!(
            "the call timed out; stdout {stdout:?}"
        )));
    }
    if !stdout.starts_with(started) {
        return Err(StepError::Unmet(format!(
            "the payload never ran (stdout {stdout:?}, stderr {stderr:?})"
        )));
    }
    let changed = before.diff(&world.snapshot(), &[]);
    if !changed.is_empty() {
        return Err(StepError::Unmet(format!(
            "the payload changed the world: {}",
            changed.join("; ")
        )));
    }
    Ok((stdout, stderr))
}

/// A walking step's payload printed its `mark` last, so it ran to its end and its findings are
/// complete; otherwise the unmet expectation says how the call ended.
fn ran_to_mark(
    done: &sandbox_local::launch::Finished,
    stdout: &str,
    mark: &str,
) -> Result<(), StepError> {
    if stdout.lines().any(|l| l == mark) {
        return Ok(());
    }
    Err(StepError::Unmet(format!(
        "the payload did not run to its end (no mark): exit {:?}, {}, stderr {:?}",
        done.exit_code(),
        serde_json::to_string(&done.classification).unwrap_or_default(),
        String::from_utf8_lossy(&done.stderr).trim()
    )))
}
