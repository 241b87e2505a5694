//! The sandbox vocabulary every part of the project speaks.
//!
//! - [`SandboxMode`] / [`ConfinedMode`]: what a command may do to files.
//! - [`ExecutionPolicy`] / [`ProviderPolicy`]: the policy carried by one call.
//! - [`Roots`], [`ExtraRoot`]: the writable set of a call and its pins, one type every policy
//!   embeds and hands on whole.
//! - [`NetworkMode`]: what network a command may reach (its own knob).
//! - [`ClassEnforcements`]: enforcement reported per class (files, network) next to the overall
//!   [`SandboxEnforcement`].
//! - [`ConfinedArgv`]: what a provider hands back, with its denial and runner-failure dialects.
//! - [`status`]: the records of a `launch-report` status channel, their keys defined once.
//! - [`classify`]: the one classifier that tells a broken sandbox from a kernel denial from an
//!   ordinary result.
//! - [`writable_roots`], [`canonical_path`], [`is_within`]: the one meaning of `workspace-write`.
//! - [`ProtectedPath`], [`protected_plan`]: what `workspace-write` never writes inside a root.
//! - [`RootError`], [`PinnedDir`]: what may never become writable, checked before any runner
//!   starts, and a workspace pinned by identity.
//! - [`denial_marker`]: the marker the model sees on a denied file effect.
//! - [`check_state_dir`]: where state a payload must never reach (session logs, probe verdicts)
//!   may live: outside every writable root, not writable by others.
//! - [`liveness`]: whether a process can still run code, judged by every one of its threads
//!   (a process whose leader thread ended looks like a zombie).
//!
//! This crate performs no I/O beyond path canonicalization, `stat` of the roots it checks and
//! [`liveness`]'s reads of `/proc`. It reads `$TMPDIR` in one place, [`Roots::from_env`] (which
//! `ExecutionPolicy::new` and `ProviderPolicy::new` call); [`Roots::new`] and the policies'
//! `from_roots` read nothing.
//!
//! ```
//! use sandbox::{SandboxMode, denial_marker};
//!
//! // The closed vocabulary: anything else is a clear error, never a guess.
//! let mode: SandboxMode = "read-only".parse()?;
//! assert!("root".parse::<SandboxMode>().is_err());
//! // Only a confined mode ever reaches a provider.
//! assert!(mode.confined().is_some());
//! assert!(SandboxMode::DangerFullAccess.confined().is_none());
//! // What the model sees when the kernel refused a file effect.
//! assert_eq!(
//!     denial_marker(mode),
//!     "[sandbox: file access denied under read-only mode]"
//! );
//! # Ok::<(), sandbox::ModeParseError>(())
//! ```

mod classify;
mod confined;
mod enforcement;
mod error;
pub mod liveness;
mod marker;
mod mode;
pub mod mountinfo;
mod paths;
mod policy;
mod protected;
mod roots;
mod state;
pub mod status;
mod workspace;

pub use classify::{
    Classification, Evidence, PayloadStatus, ProcessOutcome, SpawnErrorKind, SpawnFailure, classify,
};
pub use confined::{
    CallGuard, ConfinedArgv, LaunchFds, RuleError, RunnerFailureRule, SandboxProvider, Staging,
    StatusChannel, StatusFormat,
};
pub use enforcement::{ClassEnforcement, ClassEnforcements, ClassReport, EnforcementClass, gaps};
pub use error::{SANDBOX_UNAVAILABLE, SandboxUnavailable};
pub use marker::denial_marker;
pub use mode::{ConfinedMode, ModeParseError, NetworkMode, SandboxEnforcement, SandboxMode};
pub use paths::{PathError, canonical_path, check_unix_sockets, is_within, writable_roots};
pub use policy::{ExecutionPolicy, ProviderPolicy};
pub use protected::{
    BAD_PROTECTED_PATH, DEFAULT_PROTECTED_PATHS, GitDirShape, PROTECTED_IN_EVERY_FOLDER,
    ProtectedPath, ProtectedPathError, ProtectedPlan, is_git_dir_surface, is_git_surface,
    protected_plan,
};
pub use roots::{ExtraRoot, Roots, TempArea};
pub use state::{
    STATE_DIR_IN_WRITABLE_ROOT, STATE_DIR_UNRESOLVABLE, STATE_DIR_WRITABLE_BY_OTHERS,
    StateDirError, check_state_dir, check_state_file, reachable_roots,
};
pub use workspace::{
    BAD_PATH, DirIdentity, PinnedDir, RootError, TEMP_AREA_UNUSABLE, TEMP_DIR_MOVED,
    TEMP_DIR_NOT_A_DIRECTORY, TEMP_DIR_TOO_BROAD, UNIX_SOCKET_MISSING, UNIX_SOCKET_NOT_A_SOCKET,
    UNIX_SOCKET_NOT_GRANTABLE, UNIX_SOCKET_RELATIVE, WORKSPACE_MISSING, WORKSPACE_MOVED,
    WORKSPACE_NOT_A_DIRECTORY, WORKSPACE_TOO_BROAD, WRITABLE_ROOT_MISSING, WRITABLE_ROOT_MOVED,
    WRITABLE_ROOT_NOT_A_DIRECTORY, WRITABLE_ROOT_RELATIVE, WRITABLE_ROOT_TOO_BROAD, system_reason,
};
