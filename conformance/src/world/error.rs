//! Why a world, its seed or its set-up could not be had: typed, each with the words a failure
//! shows.

use std::path::PathBuf;
use std::process::ExitStatus;

use super::SEED_VAR;

/// The run's seed could not be read from [`SEED_VAR`].
#[derive(Clone, Debug, thiserror::Error)]
#[error("{SEED_VAR}={text:?} is not a seed (a number): {source}")]
pub struct SeedError {
    /// What the variable held.
    pub text: String,
    /// Why it is not a number.
    pub source: std::num::ParseIntError,
}

/// The harness's own command on the host (git, bash) could not set up a case's world.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `git` could not be started.
    #[error("cannot run git (the protected family needs it): {0}")]
    NoGit(#[source] std::io::Error),
    /// `git init` failed.
    #[error("git init {dir:?} failed: {stderr}")]
    GitInit {
        /// The directory it was to make a repository.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// `bash` could not be started.
    #[error("cannot run bash on the host: {0}")]
    NoBash(#[source] std::io::Error),
    /// The run's linked repository could not be made or copied into a world.
    #[error("cannot copy the run's linked repository into {dir:?}: {source}")]
    Template {
        /// Where it was to go.
        dir: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// The private directory for the run's linked repository could not be made.
    #[error("cannot make a directory for the run's linked repository: {0}")]
    NoTemplateDir(#[source] crate::suite::SuiteError),
    /// A set-up script exited non-zero.
    #[error("{script:?} in {dir:?} failed ({status}): {stderr}")]
    Script {
        /// The script.
        script: String,
        /// Where it ran.
        dir: PathBuf,
        /// How it ended.
        status: ExitStatus,
        /// What it said on stderr.
        stderr: String,
    },
}

/// Why a candidate base for worlds (`/var/tmp`, the home directory, `/srv`) was left out.
#[derive(Debug, thiserror::Error)]
pub enum BaseRefused {
    /// It could not be resolved.
    #[error("{0}")]
    Unresolved(std::io::Error),
    /// It is not a directory.
    #[error("not a directory")]
    NotADirectory,
    /// It is `/`.
    #[error("it is /")]
    Root,
    /// It resolves under a writable root.
    #[error("it resolves under {0}, a writable root")]
    UnderWritableRoot(&'static str),
    /// This user cannot write it.
    #[error("this user cannot write it ({0})")]
    NotWritable(nix::errno::Errno),
}
