//! What each step kind does and how its expectation is checked.

mod classify;
mod effect;
mod select;
mod tool;
mod wire;

use crate::backends::Backend;
use crate::load::ExpandedCase;
use crate::model::Step;

/// Runs every step of `case` against `backend`; the first unmet expectation is the error. `tool`
/// steps of one case share one world, one session and one composition.
pub fn run_case(backend: &Backend, case: &ExpandedCase) -> Result<(), String> {
    let mut rig: Option<tool::Rig> = None;
    let mut bridge: Option<wire::Rig> = None;
    for (index, step) in case.case.steps.iter().enumerate() {
        let result = match step {
            Step::Classify(s) => classify::run(backend, s),
            Step::Effect(s) => effect::run(backend, s),
            Step::Select(s) => select::run(s),
            Step::Tool(s) => tool::run(backend, case.case.setup.as_ref(), s, &mut rig),
            Step::Wire(s) => wire::run(backend, s, &mut bridge),
        };
        result.map_err(|e| format!("step {} ({}): {e}", index + 1, step_kind(step)))?;
    }
    Ok(())
}

fn step_kind(step: &Step) -> &'static str {
    match step {
        Step::Classify(_) => "classify",
        Step::Effect(_) => "effect",
        Step::Select(_) => "select",
        Step::Tool(_) => "tool",
        Step::Wire(_) => "wire",
    }
}
