//! The fenced filesystem: the in-process twin of the shell's sandbox.
//!
//! Reads pass in every mode. `read-only` denies every write and edit. `workspace-write`
//! re-canonicalizes the target immediately before writing and fences it against
//! [`sandbox::writable_roots`], the set every shell backend enforces, so a file the write tool may
//! create is exactly a file the shell may create; the protected paths inside those roots
//! ([`sandbox::protected_plan`]: `.git/hooks`, `.git/config` by default, see
//! [`sandbox::DEFAULT_PROTECTED_PATHS`]) are denied, existing or not, as every shell backend
//! denies them, and so is the rest of git's code surface the shell's guard watches
//! ([`sandbox_local::gitguard`]: nested repositories, linked worktrees, submodules, the folder
//! `core.hooksPath` names). On Linux the write itself then walks from the
//! writable root with `openat2(RESOLVE_BENEATH)`, so a symlink swapped into the path after the
//! check cannot carry the write outside or into a protected path (`ELOOP`); what remains is a rename racing the final
//! component between our `renameat` and a reader, which is not an escape. Writes are atomic: a
//! temporary file in the target's directory, then `renameat` over the target.
//!
//! This is a policy fence in trusted code over model-chosen paths, not a kernel boundary; kernel
//! isolation of untrusted code is the shell's job.

use std::path::{Path, PathBuf};

use sandbox::{DirIdentity, ExecutionPolicy, RootError, SandboxMode, canonical_path};
use sandbox_policy::{PolicyService, Stamp};

/// Gives the private temp area what an overlay would show at `rest` before a write there (the
/// shell's writes to `/tmp/<rest>` land in `area/<rest>`): each folder on the way that the host's
/// `/tmp` has as a real folder, and the host's file itself when it is a regular file (so an edit
/// starts from its text). Every step is taken beneath `area` refusing every symlink: the payload
/// fills the area, and a symlink it left there must never carry this trusted copy out. Best
/// effort: what cannot be copied is left to the fence and the write, which then fail as they
/// would on a missing folder.
#[cfg(target_os = "linux")]
pub fn copy_up(area: &Path, rest: &Path) {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    use nix::sys::stat::Mode;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let beneath = |flags: OFlag| {
        let how = OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        // openat2 takes a mode only with O_CREAT.
        match flags.contains(OFlag::O_CREAT) {
            true => how.mode(Mode::from_bits_truncate(0o600)),
            false => how,
        }
    };
    // The area itself is the trusted side's (its path holds no name of the payload's).
    let Ok(mut dir) = nix::fcntl::open(
        area,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let lower_root = Path::new("/tmp");
    let parts: Vec<_> = rest.components().collect();
    let Some((last, folders)) = parts.split_last() else {
        return;
    };
    let mut lower = lower_root.to_path_buf();
    for part in folders {
        lower.push(part);
        let next = openat2(
            &dir,
            part.as_os_str(),
            beneath(OFlag::O_PATH | OFlag::O_DIRECTORY),
        );
        let next = match next {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => {
                let Ok(meta) = std::fs::symlink_metadata(&lower) else {
                    return;
                };
                let mode = Mode::from_bits_truncate(meta.permissions().mode() & 0o7777);
                if !meta.is_dir() || nix::sys::stat::mkdirat(&dir, part.as_os_str(), mode).is_err()
                {
                    return;
                }
                match openat2(
                    &dir,
                    part.as_os_str(),
                    beneath(OFlag::O_PATH | OFlag::O_DIRECTORY),
                ) {
                    Ok(fd) => fd,
                    Err(_) => return,
                }
            }
            Err(_) => return,
        };
        dir = next;
    }
    lower.push(last);
    if !std::fs::symlink_metadata(&lower).is_ok_and(|m| m.is_file()) {
        return;
    }
    let Ok(mut from) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&lower)
    else {
        return;
    };
    // O_EXCL: a file (or anything) already there is the area's own, never replaced.
    if let Ok(to) = openat2(
        &dir,
        last.as_os_str(),
        beneath(OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL),
    ) {
        let mut to = std::fs::File::from(to);
        let _ = std::io::copy(&mut from, &mut to);
    }
}

/// No private temp area is mounted off Linux: nothing to copy up.
#[cfg(not(target_os = "linux"))]
pub fn copy_up(_area: &Path, _rest: &Path) {}

/// The stable code of a write the sandbox policy refused.
pub const FS_SANDBOX_DENIED: &str = "FS_SANDBOX_DENIED";
/// The stable code of a write the host refused (permissions, read-only mount): the world, not the
/// policy.
pub const FS_PERMISSION_DENIED: &str = "FS_PERMISSION_DENIED";

/// Why a filesystem operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The sandbox policy refused the write.
    #[error("{FS_SANDBOX_DENIED}: writing {path:?} is denied under {mode} mode")]
    SandboxDenied {
        /// The effective mode.
        mode: SandboxMode,
        /// The path as asked.
        path: PathBuf,
    },
    /// The host refused it.
    #[error("{FS_PERMISSION_DENIED}: {path:?}: {source}")]
    PermissionDenied {
        /// The path.
        path: PathBuf,
        /// The host's error.
        source: std::io::Error,
    },
    /// The file does not exist.
    #[error("FS_NOT_FOUND: {0:?} does not exist")]
    NotFound(PathBuf),
    /// An edit's old text is not in the file (exactly once).
    #[error("FS_EDIT_NO_MATCH: the text to replace occurs {count} times in {path:?}, not once")]
    EditNoMatch {
        /// The file.
        path: PathBuf,
        /// How often it occurs.
        count: usize,
    },
    /// The policy's roots were refused (a missing or moved workspace, a temp dir that would widen
    /// the writable set): nothing was written.
    #[error(transparent)]
    Root(#[from] RootError),
    /// The path is unusable (NUL byte, symlink loop, ...).
    #[error("FS_BAD_PATH: {0}")]
    BadPath(String),
    /// The path names no regular file (a FIFO, a device, a socket, a directory): reading it
    /// could block the turn forever or never end.
    #[error(
        "FS_NOT_A_FILE: {path:?} is {kind}, not a regular file; the file tools read regular files only"
    )]
    NotAFile {
        /// The path as asked.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// The file is larger than [`READ_LIMIT`].
    #[error(
        "FS_TOO_LARGE: {path:?} holds {size} bytes, more than the {limit} the file tools read; read a part of it with the shell (head, sed -n)"
    )]
    TooLarge {
        /// The path as asked.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// [`READ_LIMIT`].
        limit: u64,
    },
    /// A path inside the workspace or a writable root that a link carries out of them: what the
    /// payload plants there (`notes.md -> ~/.ssh/id_ed25519`) is not read for the model.
    #[error(
        "FS_LINK_OUT: {path:?} is a link out of the workspace and the writable roots (to {target:?}); name the target itself to read it"
    )]
    LinkOut {
        /// The path as asked.
        path: PathBuf,
        /// Where it leads.
        target: PathBuf,
    },
    /// Anything else the host said.
    #[error("FS_IO: {path:?}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The host's error.
        source: std::io::Error,
    },
}

impl FsError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            FsError::SandboxDenied { .. } => FS_SANDBOX_DENIED,
            FsError::PermissionDenied { .. } => FS_PERMISSION_DENIED,
            FsError::NotFound(_) => "FS_NOT_FOUND",
            FsError::EditNoMatch { .. } => "FS_EDIT_NO_MATCH",
            FsError::Root(e) => e.code(),
            FsError::BadPath(_) => "FS_BAD_PATH",
            FsError::NotAFile { .. } => "FS_NOT_A_FILE",
            FsError::TooLarge { .. } => "FS_TOO_LARGE",
            FsError::LinkOut { .. } => "FS_LINK_OUT",
            FsError::Io { .. } => "FS_IO",
        }
    }
}

fn io_error(path: &Path, e: std::io::Error) -> FsError {
    match e.kind() {
        std::io::ErrorKind::NotFound => FsError::NotFound(path.to_path_buf()),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            FsError::PermissionDenied {
                path: path.to_path_buf(),
                source: e,
            }
        }
        _ => FsError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// The most the file tools read of one file, in bytes (16 MiB): a model's context holds far
/// less, and a file that never ends (`/dev/zero` behind a link) must not grow the agent.
pub const READ_LIMIT: u64 = 16 * 1024 * 1024;

/// Reads the regular file at `path` as text, at most [`READ_LIMIT`] bytes: opened without
/// blocking (a FIFO with no writer would hold the open forever) and checked on the open
/// descriptor, so a FIFO, a device, a socket or a directory is refused at once
/// ([`FsError::NotAFile`]) and a larger file with its size ([`FsError::TooLarge`]). What the
/// agent shows of a file (its diffs) reads through here too.
pub fn read_regular(path: &Path) -> Result<String, FsError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY).bits())
        .open(path)
        .map_err(|e| io_error(path, e))?;
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    let kind = meta.file_type();
    let not_a_file = |kind| FsError::NotAFile {
        path: path.to_path_buf(),
        kind,
    };
    if !kind.is_file() {
        return Err(not_a_file(if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "not a file"
        }));
    }
    if meta.len() > READ_LIMIT {
        return Err(FsError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit: READ_LIMIT,
        });
    }
    // A file that grows while it is read stops at the limit too.
    let mut bytes = Vec::new();
    file.take(READ_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    if bytes.len() as u64 > READ_LIMIT {
        return Err(FsError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit: READ_LIMIT,
        });
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Refuses `path` when it lies, as written, in the workspace or a writable root of `policy` and
/// resolves outside all of them ([`FsError::LinkOut`]). A path written outside them is read as
/// asked: reads pass in every mode.
fn check_no_link_out(path: &Path, policy: &ExecutionPolicy) -> Result<(), FsError> {
    let workspace = &policy.roots.workspace_root;
    let mut inside: Vec<PathBuf> = vec![workspace.clone()];
    inside.extend(canonical_path(workspace).ok());
    inside.extend(policy.check().unwrap_or_default());
    let written = lexical(path);
    if !inside.iter().any(|root| written.starts_with(root)) {
        return Ok(());
    }
    let Ok(target) = canonical_path(path) else {
        // Missing or unusable: the read itself says so.
        return Ok(());
    };
    if inside.iter().any(|root| target.starts_with(root)) {
        return Ok(());
    }
    Err(FsError::LinkOut {
        path: path.to_path_buf(),
        target,
    })
}

/// `path` with `.` and `..` folded away by their names alone, resolving no link.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A filesystem: fenced by the call's policy, or not at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileSystem {
    /// Enforces the call's policy on every mutation.
    Fenced,
    /// Ignores the policy (a non-confining composition: honestly unconfined).
    Local,
}

impl FileSystem {
    /// True when this filesystem enforces a sandbox mode (the escalation fields are advertised).
    pub fn confines(self) -> bool {
        self == FileSystem::Fenced
    }

    /// Reads a regular file as text; reads pass in every mode. Under a confining filesystem a
    /// path inside the workspace or a writable root that a link carries out of them is refused
    /// ([`FsError::LinkOut`]); the target named itself is read.
    pub fn read(self, path: &Path, policy: &ExecutionPolicy) -> Result<String, FsError> {
        if self == FileSystem::Fenced {
            check_no_link_out(path, policy)?;
        }
        read_regular(path)
    }

    /// Writes `content` to `path` (creating missing parent directories) under the call's
    /// stamp. Only the policy service makes a stamp, so no caller can bring a policy of its own.
    pub fn write(self, path: &Path, content: &str, policy: &Stamp) -> Result<(), FsError> {
        let target = self.fence(path, policy)?;
        write_beneath(&target, content.as_bytes()).map_err(|e| match e {
            WriteError::Escaped => FsError::SandboxDenied {
                mode: policy.mode,
                path: path.to_path_buf(),
            },
            WriteError::Io(e) => io_error(path, e),
        })
    }

    /// Replaces the one occurrence of `old` in `path` with `new` under the call's stamp.
    pub fn edit(self, path: &Path, old: &str, new: &str, policy: &Stamp) -> Result<(), FsError> {
        // Fence first: a denied edit must not even reveal whether the text matches.
        self.fence(path, policy)?;
        let current = read_regular(path)?;
        let count = if old.is_empty() {
            0
        } else {
            current.matches(old).count()
        };
        if count != 1 {
            return Err(FsError::EditNoMatch {
                path: path.to_path_buf(),
                count,
            });
        }
        self.write(path, &current.replacen(old, new, 1), policy)
    }

    /// A direct write, by a caller with no per-call stamp (no tool call, no session, no grant):
    /// confined at the deployment default, as the fs note requires.
    pub fn write_direct(
        self,
        path: &Path,
        content: &str,
        service: &PolicyService,
    ) -> Result<(), FsError> {
        let stamp = service
            .default_stamp()
            .map_err(|e| FsError::BadPath(e.to_string()))?;
        self.write(path, content, &stamp)
    }

    /// A direct edit at the deployment default (see [`FileSystem::write_direct`]).
    pub fn edit_direct(
        self,
        path: &Path,
        old: &str,
        new: &str,
        service: &PolicyService,
    ) -> Result<(), FsError> {
        let stamp = service
            .default_stamp()
            .map_err(|e| FsError::BadPath(e.to_string()))?;
        self.edit(path, old, new, &stamp)
    }

    /// The canonical target when `policy` permits writing `path`; re-canonicalized now, just
    /// before the write, with the roots checked (a moved workspace fails closed here).
    fn fence(self, path: &Path, policy: &ExecutionPolicy) -> Result<Fenced, FsError> {
        let canonical = canonical_path(path).map_err(|e| FsError::BadPath(e.to_string()))?;
        if self == FileSystem::Local {
            return Ok(Fenced {
                beneath: None,
                target: canonical,
            });
        }
        let roots = policy.check()?;
        // `/dev/null` is writable in every confined mode, as every shell profile grants it: the
        // fence and the shell must not disagree on it.
        if policy.mode == SandboxMode::DangerFullAccess || canonical == Path::new(DEV_NULL) {
            return Ok(Fenced {
                beneath: None,
                target: canonical,
            });
        }
        if let Some(provider) = policy.for_provider() {
            let plan = sandbox::protected_plan(&provider, &roots)?;
            // Git's surface found per repository (nested repositories, linked worktrees,
            // submodules, the folder core.hooksPath names): what the shell's guard reverts.
            let git_surface = sandbox_local::gitguard::GitGuard::before(&provider)
                .is_some_and(|guard| guard.watches(&canonical));
            if plan.protects(&canonical) || git_surface {
                return Err(FsError::SandboxDenied {
                    mode: policy.mode,
                    path: path.to_path_buf(),
                });
            }
        }
        roots
            .into_iter()
            .find_map(|root| beneath(&root, &canonical))
            .map(|beneath| Fenced {
                beneath: Some(beneath),
                target: canonical.clone(),
            })
            .ok_or_else(|| FsError::SandboxDenied {
                mode: policy.mode,
                path: path.to_path_buf(),
            })
    }
}

/// Where a fenced write goes: a writable root (by path and by identity) and the path beneath it.
struct Beneath {
    root: PathBuf,
    id: DirIdentity,
    relative: PathBuf,
}

/// The walk from `root` to canonical `target`, when the target lies beneath it: lexically, or
/// through an ancestor that is the root's very directory (an alias spelling such as a bind mount).
/// The target must be strictly beneath: a root itself is never written as a file.
fn beneath(root: &Path, target: &Path) -> Option<Beneath> {
    let id = DirIdentity::of(root).ok()?;
    let relative = match target.strip_prefix(root) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => target
            .ancestors()
            .find(|a| DirIdentity::of(a).is_ok_and(|aid| aid == id))
            .and_then(|a| target.strip_prefix(a).ok())?
            .to_path_buf(),
    };
    (!relative.as_os_str().is_empty()).then(|| Beneath {
        root: root.to_path_buf(),
        id,
        relative,
    })
}

/// A target that passed the fence: the walk beneath its writable root, or `None` when this
/// filesystem does not confine.
struct Fenced {
    beneath: Option<Beneath>,
    target: PathBuf,
}

enum WriteError {
    /// The walk from the root left it (a symlink swapped in after the check), or the root is no
    /// longer the directory the fence checked.
    Escaped,
    Io(std::io::Error),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// Writes beneath the fenced root and nowhere else: the root is opened without following any
/// symlink (its canonical path has none, so one found now is a swap) and must still be the
/// directory the fence checked; every further component is opened with
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` from there, missing directories are made
/// with `mkdirat` in the directory already opened, the temporary file is created with
/// `O_EXCL|O_NOFOLLOW` in the final directory and renamed over the target with `renameat` in that
/// same directory. There is no plain-path fallback.
/// The one device every confined mode may write (as every shell profile grants it).
const DEV_NULL: &str = "/dev/null";

#[cfg(target_os = "linux")]
fn write_beneath(fenced: &Fenced, content: &[u8]) -> Result<(), WriteError> {
    use nix::errno::Errno;
    use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat2};
    use nix::sys::stat::{Mode, fstat, fstatat, mkdirat};
    use std::io::Write;

    let Some(beneath) = &fenced.beneath else {
        return write_plain(&fenced.target, content).map_err(WriteError::Io);
    };
    let (dir_rel, name) = match (beneath.relative.parent(), beneath.relative.file_name()) {
        (Some(parent), Some(name)) => (parent.to_path_buf(), name.to_os_string()),
        _ => {
            return Err(WriteError::Io(std::io::Error::other(
                "cannot write a writable root itself",
            )));
        }
    };
    let errno = |e: Errno| match e {
        Errno::EXDEV | Errno::ELOOP => WriteError::Escaped,
        other => WriteError::Io(std::io::Error::from(other)),
    };
    let how = |flags: OFlag, resolve: ResolveFlag| {
        OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC)
            .resolve(resolve)
    };
    // The relative path comes from the canonical target, which has no symlink in it: one found
    // now was swapped in after the check (it could lead outside, or into a protected path).
    let walk = ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS;
    let mut dir = openat2(
        nix::fcntl::AT_FDCWD,
        beneath.root.as_path(),
        how(
            OFlag::O_DIRECTORY,
            ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        ),
    )
    .map_err(errno)?;
    let opened = fstat(&dir).map_err(errno)?;
    if (opened.st_dev, opened.st_ino) != (beneath.id.dev, beneath.id.ino) {
        return Err(WriteError::Escaped);
    }
    for component in dir_rel.components() {
        let part = component.as_os_str();
        let next = match openat2(&dir, part, how(OFlag::O_DIRECTORY, walk)) {
            Err(Errno::ENOENT) => {
                mkdirat(&dir, part, Mode::from_bits_truncate(0o755)).map_err(errno)?;
                openat2(&dir, part, how(OFlag::O_DIRECTORY, walk)).map_err(errno)?
            }
            other => other.map_err(errno)?,
        };
        dir = next;
    }
    let mode = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
        .ok()
        .filter(|st| st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG)
        .map(|st| Mode::from_bits_truncate(st.st_mode & 0o7777))
        .unwrap_or_else(|| Mode::from_bits_truncate(0o644));
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(&name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = openat2(
        &dir,
        temp_name.as_os_str(),
        how(
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW,
            walk,
        )
        .mode(mode),
    )
    .map_err(errno)?;
    let mut file = std::fs::File::from(temp);
    let written = file.write_all(content).and_then(|()| file.sync_all());
    drop(file);
    let renamed = written.map_err(WriteError::Io).and_then(|()| {
        nix::fcntl::renameat(&dir, temp_name.as_os_str(), &dir, name.as_os_str()).map_err(errno)
    });
    if renamed.is_err() {
        let _ = nix::unistd::unlinkat(
            &dir,
            temp_name.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    renamed
}

#[cfg(not(target_os = "linux"))]
fn write_beneath(fenced: &Fenced, content: &[u8]) -> Result<(), WriteError> {
    write_plain(&fenced.target, content).map_err(WriteError::Io)
}

/// An atomic write by path: a temporary file beside the target, then a rename over it
/// (`/dev/null` is written in place).
fn write_plain(target: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if target == Path::new(DEV_NULL) {
        return std::fs::OpenOptions::new()
            .write(true)
            .open(target)?
            .write_all(content);
    }
    let dir = target
        .parent()
        .ok_or_else(|| std::io::Error::other("the target has no parent directory"))?;
    std::fs::create_dir_all(dir)?;
    let name = target
        .file_name()
        .ok_or_else(|| std::io::Error::other("the target has no file name"))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = dir.join(temp_name);
    let result = std::fs::File::create(&temp)
        .and_then(|mut f| f.write_all(content).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&temp, target));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod direct_callers;

#[cfg(test)]
mod protected_and_extra_roots;

#[cfg(all(test, target_os = "linux"))]
mod copy_up_tests {
    use super::copy_up;

    /// A folder of the host's /tmp with a file in it, and an area whose `tmp` the payload filled.
    fn setup() -> (tempfile::TempDir, tempfile::TempDir, tempfile::TempDir) {
        let host = tempfile::Builder::new()
            .prefix("copy-up-host-")
            .tempdir_in("/tmp")
            .expect("host folder");
        std::fs::write(host.path().join("notes.txt"), "the host's\n").expect("host file");
        let area = tempfile::tempdir_in("/var/tmp").expect("area");
        let outside = tempfile::tempdir_in("/var/tmp").expect("outside");
        (host, area, outside)
    }

    #[test]
    fn a_host_folder_and_file_are_copied_into_the_area_as_an_overlay_shows_them() {
        let (host, area, _outside) = setup();
        let name = host.path().file_name().expect("name");
        let rest = std::path::Path::new(name).join("notes.txt");
        copy_up(area.path(), &rest);
        assert_eq!(
            std::fs::read_to_string(area.path().join(&rest))
                .ok()
                .as_deref(),
            Some("the host's\n")
        );
        // What the area already holds is its own: never replaced by the host's.
        std::fs::write(area.path().join(&rest), "the call's\n").expect("write");
        copy_up(area.path(), &rest);
        assert_eq!(
            std::fs::read_to_string(area.path().join(&rest)).expect("read"),
            "the call's\n"
        );
    }

    #[test]
    fn a_symlink_the_payload_left_in_the_area_carries_nothing_out() {
        let (host, area, outside) = setup();
        let name = host.path().file_name().expect("name");
        // The payload replaced the host's folder, in its /tmp, by a link to a folder outside.
        std::os::unix::fs::symlink(outside.path(), area.path().join(name)).expect("symlink");
        copy_up(area.path(), &std::path::Path::new(name).join("notes.txt"));
        assert!(
            !outside.path().join("notes.txt").exists(),
            "the trusted copy followed the payload's symlink out of the area"
        );
        // And a deeper one: a folder the payload made, holding a link.
        let deeper = std::path::Path::new(name).join("sub").join("f");
        std::fs::remove_file(area.path().join(name)).expect("rm link");
        std::fs::create_dir(area.path().join(name)).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), area.path().join(name).join("sub"))
            .expect("symlink");
        std::fs::create_dir(host.path().join("sub")).expect("host sub");
        std::fs::write(host.path().join("sub/f"), "x").expect("host f");
        copy_up(area.path(), &deeper);
        assert!(!outside.path().join("f").exists(), "followed a deeper link");
    }
}
