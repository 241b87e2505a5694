//! The local sandbox provider: per-platform runners (bwrap then the Landlock launcher on Linux,
//! Seatbelt on macOS), their profiles, functional probes, the dialects each one speaks on stderr,
//! and the spawner that runs a confined launch with its out-of-band status channel.
//!
//! Every profile takes its writable set from [`sandbox::writable_roots`], so `workspace-write`
//! means the same thing on every backend.

pub mod bind;
pub mod cache;
pub mod dialect;
pub mod gitguard;
pub mod launch;
pub mod probe;
pub mod profile;
mod provider;
pub mod seatbelt;

pub use provider::{
    Backend, DEFAULT_PROBE_TIMEOUT, GIT_SURFACE_GAP, LocalConfig, LocalProvider, OperatorError,
    OperatorRunner, Selection, SelectionError,
};
