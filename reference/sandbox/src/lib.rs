//! The sandbox vocabulary every part of the project speaks.
//!
//! - [`SandboxMode`] / [`ConfinedMode`]: what a command may do to files.
//! - [`ExecutionPolicy`] / [`ProviderPolicy`]: the policy carried by one call.
//! - [`ConfinedArgv`]: what a provider hands back, with its denial and runner-failure dialects.
//! - [`classify`]: the one classifier that tells a broken sandbox from a kernel denial from an
//!   ordinary result.
//! - [`writable_roots`], [`canonical_path`], [`is_within`]: the one meaning of `workspace-write`.
//! - [`denial_marker`]: the marker the model sees on a denied file effect.
//!
//! This crate performs no I/O beyond path canonicalization.

mod classify;
mod confined;
mod error;
mod marker;
mod mode;
mod paths;
mod policy;

pub use classify::{
    Classification, Evidence, PayloadStatus, ProcessOutcome, SpawnErrorKind, SpawnFailure, classify,
};
pub use confined::{
    ConfinedArgv, RuleError, RunnerFailureRule, SandboxProvider, StatusChannel, StatusFormat,
};
pub use error::{SANDBOX_UNAVAILABLE, SandboxUnavailable};
pub use marker::denial_marker;
pub use mode::{ConfinedMode, ModeParseError, SandboxEnforcement, SandboxMode};
pub use paths::{PathError, canonical_path, is_within, writable_roots};
pub use policy::{ExecutionPolicy, ProviderPolicy};
