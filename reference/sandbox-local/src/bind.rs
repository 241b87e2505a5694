//! The descriptors bwrap binds. Every writable root and every protected path of a call is opened
//! here without following a symlink at any component (a walk from `/`, or from the root it lies
//! in, one `O_PATH | O_NOFOLLOW` step at a time), checked against its pin (device and inode), and
//! handed to bwrap by number (`--bind-fd`, `--ro-bind-fd`).
//!
//! What bwrap does with the descriptor (read in its source, 0.8.0's Debian backport through
//! 0.11.1, and measured here): it resolves `/proc/self/fd/N` to a path when it starts
//! (`realpath`), binds that path, then compares what is mounted at the destination with the
//! descriptor (`lstat` against `fstat`) and fails (`Race condition binding dirfd`, so the call is
//! a runner failure) when they differ. A swap between the pin and the launch is therefore refused
//! or binds the pinned directory: the destination may land elsewhere in the sandbox's own view
//! (bwrap resolves it in the new root), but what is mounted there is the pinned directory. Not
//! closed by bwrap: a payload that exchanges the parent continuously can flip it twice between
//! bwrap's mount and its check, so the check passes on the pinned directory's read-only view while
//! the look-alike was mounted; measured with `ci/repro/bind-race.py` against a tight exchange
//! loop, 5 calls in 1000 (about 10 in 100 bound it before), as root and as a user. Closing it
//! needs a check of the mount table from inside the sandbox before the payload runs.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat};
use sandbox::{DirIdentity, LaunchFds, ProviderPolicy};

use crate::profile::{BindKind, BindTarget, FdBind};

/// The stable code of a protected path that changed between the plan and the launch (it
/// vanished, or a symlink now stands on the way to it).
pub const PROTECTED_PATH_MOVED: &str = "PROTECTED_PATH_MOVED";

/// Why a bind could not be opened as it was checked. Nothing runs when this is returned.
#[derive(Debug, thiserror::Error)]
#[error("{code}: {what} {path:?} {why}; refusing to run")]
pub struct BindError {
    /// The stable code: `WORKSPACE_MOVED`, `TEMP_DIR_MOVED`, `WRITABLE_ROOT_MOVED` or
    /// [`PROTECTED_PATH_MOVED`].
    pub code: &'static str,
    /// What the path is (`the workspace`, `the temp dir`, ...).
    pub what: &'static str,
    /// The canonical path that was checked.
    pub path: PathBuf,
    /// What stands there now.
    pub why: String,
}

/// How the walk opens each component without reading it: `O_PATH` on Linux (bwrap's only host).
/// Elsewhere (no bwrap; only an operator runner binds) a plain read-only open.
#[cfg(target_os = "linux")]
const PATH_ONLY: OFlag = OFlag::O_PATH;
#[cfg(not(target_os = "linux"))]
const PATH_ONLY: OFlag = OFlag::O_RDONLY;

/// What one step of the walk found instead of what it needed.
enum Walk {
    /// Nothing at `path`.
    Missing(PathBuf),
    /// A symlink at `path`.
    Symlink(PathBuf),
    /// Something that is not a directory at `path`, where one was needed.
    NotADirectory(PathBuf),
    /// Another error at `path`.
    Io(PathBuf, nix::errno::Errno),
}

impl std::fmt::Display for Walk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Walk::Missing(p) => write!(f, "has nothing at {p:?}"),
            Walk::Symlink(p) => write!(f, "now has a symlink on the way, at {p:?}"),
            Walk::NotADirectory(p) => write!(f, "now has a non-directory at {p:?}"),
            Walk::Io(p, e) => write!(f, "cannot be opened at {p:?}: {e}"),
        }
    }
}

/// Opens `rel` beneath `start` (named `base`) one component at a time, never following a
/// symlink; the last component must be a directory when `dir`.
fn walk(start: &OwnedFd, base: &Path, rel: &Path, dir: bool) -> Result<OwnedFd, Walk> {
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    if rel
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err(Walk::Io(base.join(rel), nix::errno::Errno::EINVAL));
    }
    let mut at = base.to_path_buf();
    let mut fd = start.try_clone().map_err(|e| {
        Walk::Io(
            at.clone(),
            nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)),
        )
    })?;
    let flags = PATH_ONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let next = openat(fd.as_fd(), *part, flags, Mode::empty()).map_err(|e| match e {
            nix::errno::Errno::ENOENT => Walk::Missing(at.clone()),
            nix::errno::Errno::ENOTDIR => Walk::NotADirectory(at.clone()),
            e => Walk::Io(at.clone(), e),
        })?;
        let kind = fstat(next.as_fd())
            .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)
            .map_err(|e| Walk::Io(at.clone(), e))?;
        let last = i + 1 == parts.len();
        if kind == SFlag::S_IFLNK {
            return Err(Walk::Symlink(at));
        }
        if kind != SFlag::S_IFDIR && (!last || dir) {
            return Err(Walk::NotADirectory(at));
        }
        fd = next;
    }
    Ok(fd)
}

fn identity(fd: &OwnedFd) -> Option<DirIdentity> {
    // `st_dev` is a signed 32-bit number on macOS (an unnecessary cast on Linux).
    #[allow(clippy::unnecessary_cast)]
    fstat(fd.as_fd()).ok().map(|st| DirIdentity {
        dev: st.st_dev as u64,
        ino: st.st_ino,
    })
}

/// The pin a root must still match: the workspace's, the temp dir's (for the temp root it names),
/// an extra root's (for the root it resolves to). `None`: any directory reached at that path
/// without a symlink (the policy pinned nothing; its checks were on the path).
fn pin_of(target: &BindTarget, policy: &ProviderPolicy) -> Option<DirIdentity> {
    match target.kind {
        BindKind::Workspace => policy.roots.workspace_pin.as_ref().map(|p| p.id),
        BindKind::Temp => policy
            .roots
            .temp_dir_pin
            .as_ref()
            .filter(|p| p.path == target.path)
            .map(|p| p.id),
        BindKind::Extra => policy.roots.extra_roots.iter().find_map(|r| {
            r.pin
                .filter(|_| sandbox::canonical_path(&r.path).is_ok_and(|c| c == target.path))
        }),
        BindKind::Pinned | BindKind::ReadOnly => None,
    }
}

fn refusal(kind: BindKind, path: &Path, why: String) -> BindError {
    let (code, what) = match kind {
        BindKind::Workspace => (sandbox::WORKSPACE_MOVED, "the workspace"),
        BindKind::Temp => (sandbox::TEMP_DIR_MOVED, "the temp root"),
        BindKind::Extra => (sandbox::WRITABLE_ROOT_MOVED, "the writable root"),
        BindKind::Pinned | BindKind::ReadOnly => (PROTECTED_PATH_MOVED, "the protected path"),
    };
    BindError {
        code,
        what,
        path: path.to_path_buf(),
        why,
    }
}

/// Opens every target of [`crate::profile::bwrap_binds`] as the descriptor bwrap binds, adds each
/// to `fds` and returns the binds in order. A root is walked from `/`; a protected path from the
/// root it lies in (so it can only ever be inside that root's pinned directory). A root that is
/// not its pinned directory any more, or has a symlink on the way, or a protected path that
/// vanished or has a symlink on the way, refuses the call; a temp root that does not exist is
/// left out (as `--bind-try` did).
pub fn open_binds(
    targets: &[BindTarget],
    policy: &ProviderPolicy,
    fds: &mut LaunchFds,
) -> Result<Vec<FdBind>, BindError> {
    let slash = nix::fcntl::open(
        "/",
        PATH_ONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        refusal(
            BindKind::Workspace,
            Path::new("/"),
            format!("cannot open /: {e}"),
        )
    })?;
    let mut roots: Vec<(PathBuf, OwnedFd)> = Vec::new();
    let mut binds = Vec::with_capacity(targets.len());
    for target in targets {
        let is_root = matches!(
            target.kind,
            BindKind::Workspace | BindKind::Temp | BindKind::Extra
        );
        let opened = if is_root {
            let rel = target.path.strip_prefix("/").unwrap_or(&target.path);
            walk(&slash, Path::new("/"), rel, true)
        } else {
            // The deepest opened root the path lies in.
            let Some((root, root_fd)) = roots
                .iter()
                .filter(|(r, _)| target.path.starts_with(r))
                .max_by_key(|(r, _)| r.components().count())
            else {
                return Err(refusal(
                    target.kind,
                    &target.path,
                    "lies in no writable root of this call".into(),
                ));
            };
            let rel = target.path.strip_prefix(root).unwrap_or(&target.path);
            walk(root_fd, root, rel, target.kind == BindKind::Pinned)
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(Walk::Missing(_)) if target.kind == BindKind::Temp => continue,
            Err(why) => return Err(refusal(target.kind, &target.path, why.to_string())),
        };
        if let Some(pin) = pin_of(target, policy) {
            let now = identity(&fd);
            if now != Some(pin) {
                return Err(refusal(
                    target.kind,
                    &target.path,
                    format!(
                        "was pinned ({pin}) but is now {}",
                        now.map_or_else(|| "unknown".to_owned(), |n| n.to_string())
                    ),
                ));
            }
        }
        if is_root {
            roots.push((
                target.path.clone(),
                fd.try_clone().map_err(|e| {
                    refusal(
                        target.kind,
                        &target.path,
                        format!("cannot keep it open: {e}"),
                    )
                })?,
            ));
        }
        let found = identity(&fd);
        binds.push(FdBind {
            identity: found,
            fd: fds.add(fd),
            dest: target.path.clone(),
            writable: target.writable(),
        });
    }
    Ok(binds)
}

/// The launch's staging directory (see [`crate::stage`]), bound read-write at its own path for
/// the launcher inside bwrap, which stages new git directories there. Not a writable root: the
/// payload's Landlock rules do not grant it, it reaches a staged directory only through the
/// mount the launcher puts over the new `.git`.
pub fn open_stage(stage: &Path, fds: &mut LaunchFds) -> Result<FdBind, BindError> {
    launcher_dir(stage, "STAGING_UNAVAILABLE", "the staging directory", fds)
}

/// The session's private temp area (see [`sandbox::TempArea`]), bound read-write at its own path
/// for the launcher inside bwrap, which mounts it at `/tmp`. Not a writable root either: the
/// payload writes it only through `/tmp`.
pub fn open_temp_area(area: &Path, fds: &mut LaunchFds) -> Result<FdBind, BindError> {
    launcher_dir(
        area,
        sandbox::TEMP_AREA_UNUSABLE,
        "the private temp area",
        fds,
    )
}

/// A directory of the trusted side's, bound read-write at its own path for the launcher.
fn launcher_dir(
    dir: &Path,
    code: &'static str,
    what: &'static str,
    fds: &mut LaunchFds,
) -> Result<FdBind, BindError> {
    let fd = nix::fcntl::open(
        dir,
        PATH_ONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| BindError {
        code,
        what,
        path: dir.to_path_buf(),
        why: e.to_string(),
    })?;
    Ok(FdBind {
        fd: fds.add(fd),
        dest: dir.to_path_buf(),
        writable: true,
        identity: None,
    })
}
