//! The local sandbox provider: per-platform runners (bwrap then the Landlock launcher on Linux,
//! Seatbelt on macOS), their profiles, functional probes, the dialects each one speaks on stderr,
//! and the spawner that runs a confined launch with its out-of-band status channel.
//!
//! Every profile takes its writable set from [`sandbox::writable_roots`], so `workspace-write`
//! means the same thing on every backend.

pub mod bind;
pub mod cache;
mod classes;
pub mod dialect;
pub mod gitguard;
pub mod launch;
pub mod probe;
pub mod profile;
#[cfg(target_os = "linux")]
pub mod stage;
/// Staging needs the Linux launcher; elsewhere there is none.
#[cfg(not(target_os = "linux"))]
pub mod stage {
    /// No staging directory off Linux: the launcher that would fill it does not run there.
    pub fn create(
        _policy: &sandbox::ProviderPolicy,
    ) -> Option<(std::path::PathBuf, StageDir, std::os::fd::OwnedFd)> {
        None
    }

    /// A launch's staging directory: off Linux [`create`] makes none, so none is ever held.
    #[derive(Debug)]
    pub struct StageDir(std::path::PathBuf);

    impl StageDir {
        /// Where it would be.
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    /// Nothing to merge off Linux.
    pub fn merge(
        _dir: &std::path::Path,
        _roots: &[std::path::PathBuf],
        _mode: sandbox::SandboxMode,
    ) -> Vec<String> {
        Vec::new()
    }
}
mod provider;
pub mod seatbelt;
pub mod temp_area;

pub use classes::{GIT_NAMED_SURFACE_GAP, GIT_SURFACE_GAP};
pub use provider::{
    Backend, DEFAULT_MEMORY_LIMIT, DEFAULT_PROBE_TIMEOUT, LocalConfig, LocalProvider,
    OperatorError, OperatorRunner, Selection, SelectionError,
};
