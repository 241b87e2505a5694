//! Where state a payload must never reach may live: the agent's session logs and the provider's
//! probe verdicts decide how the next call is confined, so a confined payload that could write
//! them could widen its own sandbox later (a forged `sandbox/mode danger-full-access` event, a
//! verdict that drops the protected binds).
//!
//! [`check_state_dir`] refuses a directory that lies inside a writable root of a policy it is
//! checked against (the one writable set, [`crate::writable_roots`], taken in `workspace-write`:
//! a preset switch or one approved escalation can bring any session there) or that is writable by
//! others. Paths are compared canonically (symlinks followed, a tail that does not exist yet
//! appended as written), so the directory to use afterwards is the canonical one it returns:
//! a symlink on the spelled path (in a workspace, say) could be swapped later, its target cannot.
//!
//! "Writable by others" means someone but this user (and root) could change what the directory
//! holds: the directory itself must be owned by this user or root and have no group or other
//! write bit; every existing ancestor must be owned by this user or root and have no group or
//! other write bit unless it is sticky and owned by root (`/var/tmp`: others may add entries there
//! but cannot rename or remove ours). So a normal `~/.cache/x` passes; `/tmp/x` fails however it
//! is made, because `/tmp` is in the writable set of every `workspace-write` policy on the host
//! (every backend's, every process's), so it always counts as a writable root here. Access
//! control lists are not read.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::mode::ConfinedMode;
use crate::paths::{PathError, canonical_path, is_within, writable_roots};
use crate::policy::ProviderPolicy;

/// The code of a state directory inside a writable root.
pub const STATE_DIR_IN_WRITABLE_ROOT: &str = "STATE_DIR_IN_WRITABLE_ROOT";
/// The code of a state directory (or an ancestor of it, or a file in it) others may write.
pub const STATE_DIR_WRITABLE_BY_OTHERS: &str = "STATE_DIR_WRITABLE_BY_OTHERS";
/// The code of a state directory whose path cannot be resolved.
pub const STATE_DIR_UNRESOLVABLE: &str = "STATE_DIR_UNRESOLVABLE";

/// Why a directory cannot hold state a payload must not reach.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateDirError {
    /// It lies inside (or is) a writable root of a policy it serves.
    #[error(
        "{STATE_DIR_IN_WRITABLE_ROOT}: {what} {dir:?} (resolving to {resolved:?}) lies inside the writable root {root:?}: a confined command could rewrite it; keep it outside every workspace, extra writable root, /tmp and $TMPDIR"
    )]
    InWritableRoot {
        /// What the directory is for ("the sessions directory").
        what: &'static str,
        /// The directory as given.
        dir: PathBuf,
        /// Its canonical path.
        resolved: PathBuf,
        /// The writable root it lies in.
        root: PathBuf,
    },
    /// It, an ancestor, or a file in it may be changed by someone else.
    #[error(
        "{STATE_DIR_WRITABLE_BY_OTHERS}: {what} {dir:?} (resolving to {resolved:?}) is not private: {culprit:?} {why}"
    )]
    WritableByOthers {
        /// What the directory is for.
        what: &'static str,
        /// The directory as given.
        dir: PathBuf,
        /// Its canonical path.
        resolved: PathBuf,
        /// The path that others may write (the directory, an ancestor, or an entry).
        culprit: PathBuf,
        /// Why (its owner or mode).
        why: String,
    },
    /// The path cannot be resolved or inspected.
    #[error("{STATE_DIR_UNRESOLVABLE}: {what} {dir:?}: {detail}")]
    Unresolvable {
        /// What the directory is for.
        what: &'static str,
        /// The directory as given.
        dir: PathBuf,
        /// Why.
        detail: String,
    },
}

impl StateDirError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            StateDirError::InWritableRoot { .. } => STATE_DIR_IN_WRITABLE_ROOT,
            StateDirError::WritableByOthers { .. } => STATE_DIR_WRITABLE_BY_OTHERS,
            StateDirError::Unresolvable { .. } => STATE_DIR_UNRESOLVABLE,
        }
    }
}

/// Every root a payload confined under `policy` could ever write, in any confined mode: the
/// writable set of `policy` taken in `workspace-write` ([`writable_roots`]), with its temp area
/// and with the host's temp places shared, plus what every
/// session of the same service gets whatever its workspace (`/tmp`, the policy's temp dir, its
/// extra roots: the same policy in `/tmp`), plus `/tmp` always. A set that is refused (a
/// workspace too broad for `workspace-write`) adds nothing: nothing runs writable under it.
pub fn reachable_roots(policy: &ProviderPolicy) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    // With the policy's temp area, and with the host's temp places shared (the caller's
    // $TMPDIR): another session of the same host may have asked for them.
    for area in [policy.roots.temp_area.clone(), crate::TempArea::Shared] {
        let mut widest = policy.clone();
        widest.mode = ConfinedMode::WorkspaceWrite;
        widest.roots.temp_area = area;
        roots.extend(writable_roots(&widest).unwrap_or_default());
        let mut anywhere = widest;
        anywhere.roots.workspace_root = PathBuf::from("/tmp");
        anywhere.roots.workspace_pin = None;
        anywhere.cwd = None;
        roots.extend(writable_roots(&anywhere).unwrap_or_default());
    }
    roots.extend(canonical_path(Path::new("/tmp")).ok());
    roots.sort();
    roots.dedup();
    roots
}

/// Checks that `dir` (which need not exist yet) may hold state no payload of `policies` must
/// reach: outside every root of [`reachable_roots`] and not writable by others (see the module
/// docs). Returns its canonical path, the one to use from now on. `what` names it in errors.
pub fn check_state_dir(
    what: &'static str,
    dir: &Path,
    policies: &[ProviderPolicy],
) -> Result<PathBuf, StateDirError> {
    let unresolvable = |detail: String| StateDirError::Unresolvable {
        what,
        dir: dir.to_path_buf(),
        detail,
    };
    if !dir.is_absolute() {
        return Err(unresolvable("is not an absolute path".into()));
    }
    let resolved = canonical_path(dir).map_err(|e: PathError| unresolvable(e.to_string()))?;
    // `/tmp` counts even with no policy: every workspace-write payload on the host may write it.
    let always = canonical_path(Path::new("/tmp")).ok();
    let roots = policies.iter().flat_map(reachable_roots).chain(always);
    if let Some(root) = roots.into_iter().find(|root| is_within(&resolved, root)) {
        return Err(StateDirError::InWritableRoot {
            what,
            dir: dir.to_path_buf(),
            resolved,
            root,
        });
    }
    let others = |culprit: &Path, why: String| StateDirError::WritableByOthers {
        what,
        dir: dir.to_path_buf(),
        resolved: resolved.clone(),
        culprit: culprit.to_path_buf(),
        why,
    };
    for (depth, path) in resolved.ancestors().enumerate() {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            // A tail that does not exist yet: its first existing ancestor decides.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unresolvable(format!("cannot inspect {path:?}: {e}"))),
        };
        if let Some(why) = others_may_write(&meta, depth == 0) {
            return Err(others(path, why));
        }
    }
    Ok(resolved)
}

/// Checks one entry of a state directory (a session log before it is trusted): a regular file,
/// not a symlink, owned by this user or root, with no group or other write bit.
pub fn check_state_file(what: &'static str, file: &Path) -> Result<(), StateDirError> {
    let dir = file.parent().unwrap_or(file).to_path_buf();
    let meta = std::fs::symlink_metadata(file).map_err(|e| StateDirError::Unresolvable {
        what,
        dir: dir.clone(),
        detail: format!("cannot inspect {file:?}: {e}"),
    })?;
    let why = if !meta.is_file() {
        Some("is not a regular file (a symlink or something else was put there)".to_owned())
    } else {
        others_may_write(&meta, true)
    };
    match why {
        Some(why) => Err(StateDirError::WritableByOthers {
            what,
            resolved: dir.clone(),
            dir,
            culprit: file.to_path_buf(),
            why,
        }),
        None => Ok(()),
    }
}

/// Why someone but this user and root could change `meta`'s entries, if they could. `own` is
/// the state directory itself (or an entry), where a sticky bit is no excuse.
fn others_may_write(meta: &std::fs::Metadata, own: bool) -> Option<String> {
    let me = nix::unistd::geteuid().as_raw();
    let (uid, mode) = (meta.uid(), meta.mode());
    if uid != me && uid != 0 {
        return Some(format!(
            "is owned by uid {uid}, neither this user ({me}) nor root"
        ));
    }
    if mode & 0o022 != 0 {
        let sticky_root = mode & 0o1000 != 0 && uid == 0;
        if own || !sticky_root {
            return Some(format!(
                "may be written by its group or by anyone (mode {:04o})",
                mode & 0o7777
            ));
        }
    }
    None
}
