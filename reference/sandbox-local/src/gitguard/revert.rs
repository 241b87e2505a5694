//! Putting the surface back: removing what a call added and restoring what it changed, through
//! descriptors opened beneath the root refusing every symlink.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
#[cfg(not(target_os = "linux"))]
use std::path::Component;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
#[cfg(target_os = "linux")]
use nix::fcntl::{OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

use super::Entry;

/// Opens `rel` beneath `dir` with `flags` (and `mode`, when it creates), refusing a symlink at
/// any component and any way out of `dir`: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`.
#[cfg(target_os = "linux")]
fn open_beneath(dir: &OwnedFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let how = OpenHow::new().flags(flags).mode(mode).resolve(
        ResolveFlag::RESOLVE_BENEATH
            | ResolveFlag::RESOLVE_NO_SYMLINKS
            | ResolveFlag::RESOLVE_NO_MAGICLINKS,
    );
    nix::fcntl::openat2(dir, rel, how)
}

/// Opens `rel` beneath `dir` as the Linux version does, without `openat2`: one `openat` per
/// component, each with `O_NOFOLLOW` (a directory on the way with `O_DIRECTORY` too), and `..`
/// or an absolute path refused (`EXDEV`, as `RESOLVE_BENEATH` says).
#[cfg(not(target_os = "linux"))]
fn open_beneath(dir: &OwnedFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    use std::os::fd::AsFd;
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => parts.push(n),
            Component::CurDir => {}
            _ => return Err(nix::errno::Errno::EXDEV),
        }
    }
    let Some((last, way)) = parts.split_last() else {
        return nix::fcntl::openat(dir, ".", flags | OFlag::O_NOFOLLOW, mode);
    };
    let mut at: Option<OwnedFd> = None;
    for part in way {
        let base = at.as_ref().map_or(dir.as_fd(), |d| d.as_fd());
        at = Some(nix::fcntl::openat(
            base,
            *part,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?);
    }
    let base = at.as_ref().map_or(dir.as_fd(), |d| d.as_fd());
    nix::fcntl::openat(base, *last, flags | OFlag::O_NOFOLLOW, mode)
}

/// A mode as nix takes it: the permission bits (`mode_t` is 16 bits on macOS).
#[allow(clippy::unnecessary_cast)]
fn mode_bits(mode: u32) -> Mode {
    Mode::from_bits_truncate((mode & 0o7777) as nix::libc::mode_t)
}

/// A directory descriptor listed by path (a descriptor's own directory in procfs or fdescfs).
fn fd_path(fd: &OwnedFd) -> String {
    if cfg!(target_os = "linux") {
        format!("/proc/self/fd/{}", fd.as_raw_fd())
    } else {
        format!("/dev/fd/{}", fd.as_raw_fd())
    }
}

/// How the root of a walk is opened without reading it: `O_PATH` where there is one.
#[cfg(target_os = "linux")]
const PATH_ONLY: OFlag = OFlag::O_PATH;
#[cfg(not(target_os = "linux"))]
const PATH_ONLY: OFlag = OFlag::O_RDONLY;

/// The directory descriptor of `dir` (an anchor, or beneath one), opened refusing symlinks.
fn open_dir_beneath(anchor: &Path, rel: &Path) -> Result<OwnedFd, String> {
    let root = nix::fcntl::open(
        anchor,
        PATH_ONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|e| format!("open {anchor:?}: {e}"))?;
    if rel.as_os_str().is_empty() {
        return nix::fcntl::open(
            anchor,
            OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| format!("open {anchor:?}: {e}"));
    }
    open_beneath(
        &root,
        rel,
        OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|e| format!("open {rel:?} beneath {anchor:?}: {e}"))
}

fn split(anchor: &Path, path: &Path) -> Result<(PathBuf, std::ffi::OsString), String> {
    let rel = path
        .strip_prefix(anchor)
        .map_err(|_| format!("{path:?} is not under {anchor:?}"))?;
    let name = rel
        .file_name()
        .ok_or_else(|| format!("{path:?} has no name"))?
        .to_os_string();
    Ok((rel.parent().unwrap_or(Path::new("")).to_path_buf(), name))
}

/// Removes `path` (a file, link or whole directory) beneath `anchor`, through descriptors.
pub(super) fn remove_beneath(anchor: &Path, path: &Path) -> Result<(), String> {
    let (parent, name) = split(anchor, path)?;
    let dir = match open_dir_beneath(anchor, &parent) {
        Ok(d) => d,
        // Its parent is gone or no directory: nothing of it is left to remove there.
        Err(_) if !is_directory_chain(anchor, &parent) => return Ok(()),
        // Anything else (no descriptor left, no permission) leaves it in place: say so.
        Err(e) => return Err(e),
    };
    remove_at(&dir, &name)
}

/// Whether every component of `rel` beneath `anchor` is a real directory (no symlink), looked
/// at without a descriptor: a removal whose folder could not be opened counts as done only when
/// that folder is really gone, never because the guard ran out of descriptors.
pub(super) fn is_directory_chain(anchor: &Path, rel: &Path) -> bool {
    let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let mut at = anchor.to_path_buf();
    real_dir(&at)
        && rel.components().all(|c| {
            at.push(c);
            real_dir(&at)
        })
}

fn remove_at(dir: &OwnedFd, name: &OsStr) -> Result<(), String> {
    use nix::unistd::{UnlinkatFlags, unlinkat};
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) => return Ok(()),
        Err(nix::errno::Errno::ENOENT) => return Ok(()),
        Err(nix::errno::Errno::EISDIR) | Err(nix::errno::Errno::EPERM) => {}
        Err(e) => return Err(format!("unlink {name:?}: {e}")),
    }
    let child = open_beneath(
        dir,
        Path::new(name),
        OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|e| format!("open {name:?}: {e}"))?;
    let listing = std::fs::read_dir(fd_path(&child)).map_err(|e| format!("list {name:?}: {e}"))?;
    for e in listing.flatten() {
        remove_at(&child, &e.file_name())?;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir).map_err(|e| format!("rmdir {name:?}: {e}"))
}

/// Puts `old` back at `path` beneath `anchor` (its directories made as needed), through
/// descriptors. A file too large to have been kept cannot be restored.
pub(super) fn restore(anchor: &Path, path: &Path, old: &Entry) -> Result<(), String> {
    let (parent, name) = split(anchor, path)?;
    // Make the directories on the way, each a real directory beneath the anchor.
    let mut at = PathBuf::new();
    for c in parent.components() {
        let dir = open_dir_beneath(anchor, &at)?;
        at.push(c);
        match nix::sys::stat::mkdirat(&dir, c.as_os_str(), mode_bits(0o755)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(format!("mkdir {at:?}: {e}")),
        }
    }
    let dir = open_dir_beneath(anchor, &parent)?;
    match old {
        Entry::Dir { mode } => {
            match nix::sys::stat::mkdirat(&dir, name.as_os_str(), mode_bits(*mode)) {
                Ok(()) | Err(nix::errno::Errno::EEXIST) => Ok(()),
                Err(e) => Err(format!("mkdir: {e}")),
            }
        }
        Entry::Link(target) => nix::unistd::symlinkat(target.as_path(), &dir, name.as_os_str())
            .map_err(|e| format!("symlink: {e}")),
        Entry::File {
            bytes: Some(bytes),
            mode,
            ..
        } => {
            use std::io::Write;
            let fd = open_beneath(
                &dir,
                Path::new(&name),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_CLOEXEC
                    | OFlag::O_NOFOLLOW,
                mode_bits(*mode),
            )
            .map_err(|e| format!("create: {e}"))?;
            let mut file = std::fs::File::from(fd);
            file.write_all(bytes).map_err(|e| format!("write: {e}"))?;
            file.set_permissions(std::fs::Permissions::from_mode(*mode))
                .map_err(|e| format!("chmod: {e}"))
        }
        Entry::File { bytes: None, .. } => Err("too large to have been kept".into()),
        Entry::Other(_) => Err("not a file, directory or link".into()),
    }
}
