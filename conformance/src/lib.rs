//! The conformance suite: YAML scenarios that any sandbox backend must pass.
//!
//! - [`model`]: the scenario schema (documented for backend authors in `scenarios/README.md`).
//! - [`load`]: discovery, parsing with `file:line:col` errors, and matrix expansion.
//! - [`plan`]: one trial per (backend, scenario case), with skips decided at listing time.
//! - [`steps`]: what each step kind does and how its expectation is checked.
//! - [`harness`]: the `libtest-mimic` entry point used by `cargo test` and `cargo nextest`.

pub mod backends;
pub mod certify;
pub mod expectations;
pub mod external;
pub mod harness;
pub mod load;
pub mod merge;
pub mod metamorphic;
pub mod model;
pub mod observed;
pub mod plan;
pub mod protocol;
pub mod request;
pub mod steps;
pub mod world;
