//! Test set-up shared by the workspace's test suites, so each suite states what it tests and not
//! how a scratch directory or an agent process is made. A dev-dependency only (`publish = false`):
//! one crate rather than a `tests/support/mod.rs` per crate, because the same helpers serve six
//! crates and the conformance suite, and a library's public items are never dead code in a test
//! binary that uses some of them.
//!
//! Crate map:
//! - [`scratch`]: scratch directories under `/var/tmp` ([`scratch_dir`], [`scratch_root`]), a
//!   workspace and an outside directory in one ([`Dirs`]), and why there.
//! - [`user`]: who the tests run as ([`euid`], [`is_root`]).
//! - [`agent`]: a JSON-RPC client of the `sandbox-agent` binary over its stdio ([`AgentProcess`]),
//!   the command line that starts it ([`agent::serving`]) and its world ([`AgentDirs`]).
//! - [`sandboxctl`]: the JSON facts `sandboxctl` prints ([`facts`], [`facts_or_null`]).

pub mod agent;
pub mod sandboxctl;
pub mod scratch;
pub mod user;

pub use agent::{AgentDirs, AgentProcess};
pub use sandboxctl::{facts, facts_or_null};
pub use scratch::{Dirs, SCRATCH_BASE, scratch_dir, scratch_root};
pub use user::{euid, is_root};
