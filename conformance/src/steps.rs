//! What each step kind does and how its expectation is checked.

mod attack;
mod classify;
mod declared;
mod effect;
mod forge;
mod ipc;
mod net;
mod race;
mod select;
mod tool;
mod walk;
mod wire;
mod writable;

use crate::backends::Backend;
use crate::load::ExpandedCase;
use crate::model::Step;

/// The first step of a case whose expectation was not met: which step, of what kind, and what
/// the world showed instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("step {step} ({kind}): {message}")]
pub struct CaseFailure {
    /// The step's position in the case, from 1.
    pub step: usize,
    /// The step's kind (`effect`, `attack`, `tool`, ...).
    pub kind: &'static str,
    /// What was expected and what was observed.
    pub message: String,
}

/// Runs every step of `case` against `backend`; the first unmet expectation is the error. `tool`
/// steps of one case share one world, one session and one composition. Every confined launch of
/// the case is tagged: a process of it still alive when the case ends is killed, so it leaks into
/// no later case, and fails a case that passed (no process of a call outlives it).
pub fn run_case(backend: &Backend, case: &ExpandedCase) -> Result<(), CaseFailure> {
    let (result, left) = crate::survivors::in_case(|| run_steps(backend, case));
    result?;
    if left.is_empty() {
        Ok(())
    } else {
        Err(CaseFailure {
            step: case.case.steps.len(),
            kind: "survivors",
            message: format!(
                "{} process(es) of the case's calls outlived them (killed now): {}",
                left.len(),
                crate::survivors::shown(&left)
            ),
        })
    }
}

fn run_steps(backend: &Backend, case: &ExpandedCase) -> Result<(), CaseFailure> {
    let mut rig: Option<tool::Rig> = None;
    let mut bridge: Option<wire::Rig> = None;
    for (index, step) in case.case.steps.iter().enumerate() {
        let result = match step {
            Step::Classify(s) => classify::run(backend, s),
            Step::Effect(s) => effect::run(backend, s),
            Step::Select(s) => select::run(s),
            Step::Tool(s) => tool::run(backend, case.case.setup.as_ref(), s, &mut rig),
            Step::Wire(s) => wire::run(backend, s, &mut bridge),
            Step::Attack(s) => attack::run(backend, s),
            Step::FenceRace(s) => race::fence_race(backend, case.case.setup.as_ref(), s, &mut rig),
            Step::BindRace(s) => race::bind_race(backend, s),
            Step::World(s) => race::world(backend, case.case.setup.as_ref(), s, &mut rig),
            Step::Net(s) => net::run(backend, s),
            Step::HostIpc(s) => ipc::run(backend, s),
            Step::Forge(s) => forge::run(backend, s),
            Step::Declared(s) => declared::run(backend, s),
            Step::Writable(s) => writable::run(backend, s),
            Step::Walk(s) => walk::run(backend, s),
        };
        result.map_err(|message| CaseFailure {
            step: index + 1,
            kind: step_kind(step),
            message,
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
                message: format!(
                    "the world changed where the case's expectations name nothing:\n  {}",
                    diff.join("\n  ")
                ),
            });
        }
    }
    Ok(())
}

/// The value of a `files:` expectation that means "no such entry".
pub const ABSENT: &str = "<absent>";

/// Checks one `files:` expectation: the file holds exactly `want`, or (for [`ABSENT`]) no entry
/// exists at all (not even a dangling symlink). The error says what is there instead.
fn check_file(path: &std::path::Path, want: &str) -> Result<(), String> {
    let got = std::fs::read_to_string(path).ok();
    let ok = match want {
        ABSENT => std::fs::symlink_metadata(path).is_err(),
        content => got.as_deref() == Some(content),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} should be {want:?} but holds {got:?}",
            path.display()
        ))
    }
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
    }
}
