//! The conformance suite: YAML scenarios that any sandbox backend must pass.
//!
//! Reading a scenario:
//! - [`scenario`]: the scenario schema (documented for backend authors in `scenarios/README.md`)
//!   and its loader, [`scenario::load`]: discovery, parsing with `file:line:col` errors, and
//!   matrix expansion.
//! - [`plan`]: one trial per (backend, scenario case), with skips decided at listing time.
//! - [`expectations`]: a backend's known failures, each pinned to what its failure must show.
//! - [`prerequisites`]: the host tools the harness needs, checked before the first case.
//!
//! Running it against a backend:
//! - [`backends`]: the backends a run certifies and what each can do on this host.
//! - [`external`] and [`protocol`]: an external backend over the JSON-lines protocol (the wire
//!   types are the `sandbox-protocol` crate, re-exported here).
//! - [`world`]: the scratch world of one case (seeded draws, realistic places and names, layout,
//!   quoting, snapshots and diffs, deferred removal, twins).
//! - [`request`]: requests dressed as ordinary clients make them.
//! - [`steps`]: what each step kind does and how its expectation is checked.
//! - `survivors`: the processes of a call or a case found in the host's process table, and killed.
//! - [`metamorphic`]: every confine request asked again about a renamed twin world.
//! - [`observed`]: what a backend's answers reported per enforcement class over a run.
//! - [`seatbelt_model`]: a model of SBPL (a named fake) that judges the reference Seatbelt
//!   profile on Linux, and the `sandbox-exec` stand-in built on it.
//!
//! Reporting:
//! - [`harness`]: the `libtest-mimic` entry point used by `cargo test` and `cargo nextest`.
//! - [`reaper`]: certify's supervisor, which kills whatever the run left behind.
//! - [`certify`]: the certify run, its verdicts and its report (JSON, JUnit, Markdown).
//! - [`certify::merge`]: several hosts' reports joined into one matrix (`certify merge`).
//! - [`suite`]: the scenario set compiled into `certify` and its hash, for a `certify` that runs
//!   outside a clone.

pub mod backends;
pub mod certify;
pub mod expectations;
pub mod external;
pub mod harness;
pub mod late;
pub mod leftovers;
pub mod metamorphic;
pub mod observed;
pub mod plan;
pub mod prerequisites;
/// The external-backend protocol's wire types: the `sandbox-protocol` crate.
pub use sandbox_protocol as protocol;
pub mod reaper;
pub mod request;
pub mod scenario;
pub mod seatbelt_model;
pub mod steps;
pub mod suite;
pub(crate) mod survivors;
pub mod world;
