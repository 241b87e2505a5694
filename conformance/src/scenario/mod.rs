//! The scenario schema and its loader. One YAML file is one scenario; its folder under
//! `scenarios/` is its family. Every struct rejects unknown keys. See `scenarios/README.md` for
//! the author-facing description.
//!
//! The schema (every type re-exported here):
//! - `file`: the scenario file: header, level, capabilities, matrix values, `governs`, cases.
//! - `step`: the steps a case is made of, one kind each.
//! - `classify`: the `classify` step (a launch's end and the classifier's verdict).
//! - `effect`: the `effect` step (one file effect on one path shape).
//! - `tool`: the `select` and `tool` steps and a policy's workspace and temp dir spellings.
//! - `wire`: the `wire` step (one action on the reference bridge).
//! - `attack`: the `attack` step, the fence and bind races, and the `world` step.
//! - `probe`: the `net`, `host_ipc`, `forge`, `declared`, `writable` and `walk` steps.
//!
//! Loading it:
//! - [`load`]: discovery and parsing.
//! - `error`: [`LoadError`], a file's `file:line:col` error with its caret.
//! - `matrix`: matrix expansion and `${name}` substitution in the text.

mod attack;
mod classify;
mod effect;
mod error;
mod file;
pub mod load;
mod matrix;
mod probe;
mod step;
mod tool;
mod wire;

pub use attack::*;
pub use classify::*;
pub use effect::*;
pub use error::LoadError;
pub use file::*;
pub use probe::*;
pub use step::*;
pub use tool::*;
pub use wire::*;

/// The JSON Schema of a scenario file, as published in `scenarios/scenario.schema.json` (every
/// object's keys sorted): generated from the types the loader reads, so the two cannot disagree.
/// Editors read it through the hint at the top of each scenario file.
pub fn schema() -> serde_json::Value {
    crate::protocol::sorted(schemars::schema_for!(ScenarioFile).to_value())
}
