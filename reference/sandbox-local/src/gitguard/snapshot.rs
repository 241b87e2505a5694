//! The snapshot of git's surface: the walk of every root (never following a symlink) that
//! records each watched path, and the folders and files its configs name.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use sandbox::GitDirShape;

use super::config::parse_config;
use super::paths::{lexical, worktree_tops};
use super::{Entry, GitGuard, Surface};

/// Files larger than this are compared by size and time only and cannot be restored.
const MAX_KEPT: u64 = 16 << 20;

impl GitGuard {
    /// Walks every anchor (never following a symlink) and records the watched paths.
    pub(super) fn scan(&self, when: Scan) -> Surface {
        let mut surface = Surface::default();
        for anchor in &self.anchors {
            walk(anchor, &mut surface, when, &self.everywhere);
        }
        let at_tops: Vec<PathBuf> = self.protected_at(&surface.tops).collect();
        for extra in self
            .protected
            .iter()
            .chain(self.named.iter())
            .chain(&at_tops)
        {
            if self.anchor_of(extra).is_some() && beneath_is_real(self.anchor_of(extra), extra) {
                record_tree(extra, &mut surface);
            }
        }
        surface.temp_repos = self
            .unwatched
            .iter()
            .map(|u| u.join(".git"))
            .filter(|g| std::fs::symlink_metadata(g).is_ok())
            .collect();
        surface
    }

    /// The `core.hooksPath` folders and `include.path` files the configs of `surface` name,
    /// when they lie under an anchor. A relative hooks path is taken from the top of every
    /// worktree the config serves (git runs hooks relative to the one it works in).
    pub(super) fn named_by_configs(&self, surface: &Surface) -> Vec<PathBuf> {
        let mut named = Vec::new();
        for (path, entry) in &surface.entries {
            let Entry::File {
                bytes: Some(bytes), ..
            } = entry
            else {
                continue;
            };
            let name = path.file_name().and_then(OsStr::to_str);
            if !matches!(name, Some("config" | "config.worktree")) {
                continue;
            }
            let Some(dir) = path.parent() else { continue };
            let Some(entries) = parse_config(bytes) else {
                continue;
            };
            for e in &entries {
                let Some(value) = e.value.as_deref().filter(|v| !v.is_empty()) else {
                    continue;
                };
                let bases = match e.key.as_str() {
                    "core.hookspath" => worktree_tops(dir, &entries),
                    "include.path" | "includeif.path" => vec![dir.to_path_buf()],
                    _ => continue,
                };
                for base in bases {
                    let full = lexical(&base.join(value));
                    if self.anchor_of(&full).is_some() && !named.contains(&full) {
                        named.push(full);
                    }
                }
            }
        }
        named
    }
}

/// Which scan: before the call (the host's state is taken as it is) or after it (what the
/// call made unlistable is made listable again to be inspected).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    Before,
    After,
}

/// Lists `dir`. After the call, a folder the payload made unlistable (`chmod 0111`, so git can
/// still pass through it while the guard cannot look) gets its owner's read and search bits
/// back first; one that stays unlistable is noted blind.
fn list(dir: &Path, surface: &mut Surface, when: Scan) -> Option<Vec<std::fs::DirEntry>> {
    match std::fs::read_dir(dir) {
        Ok(listing) => Some(listing.flatten().collect()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && when == Scan::After => {
            let listed = std::fs::symlink_metadata(dir)
                .ok()
                .filter(|m| m.is_dir())
                .and_then(|m| {
                    let mode = m.permissions().mode() | 0o700;
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).ok()
                })
                .and_then(|()| std::fs::read_dir(dir).ok());
            match listed {
                Some(listing) => Some(listing.flatten().collect()),
                None => {
                    surface.blind.push(dir.to_path_buf());
                    None
                }
            }
        }
        Err(_) => None,
    }
}

/// Directories inside a git directory that hold no config and no code, never descended into.
pub(super) fn is_data_dir(name: &OsStr) -> bool {
    matches!(
        name.to_str(),
        Some("objects" | "refs" | "logs" | "lfs" | "rr-cache")
    )
}

/// The shape of `dir` now, from its listing.
pub(super) fn shape_of(dir: &Path) -> GitDirShape {
    let mut shape = GitDirShape::default();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            shape.add(&e.file_name());
        }
    }
    shape
}

/// Walks `dir`, a folder outside any git directory, recording the watched paths. There only an
/// entry named `.git`, a folder git takes for a bare repository or a symlink can matter, so the
/// walk costs one `readdir` per directory, no `stat`, and a `readlink` per symlink.
fn walk(dir: &Path, surface: &mut Surface, when: Scan, everywhere: &[OsString]) {
    let Some(entries) = list(dir, surface, when) else {
        return;
    };
    let mut shape = GitDirShape::default();
    for e in &entries {
        shape.add(&e.file_name());
    }
    if shape.is_notable() {
        surface.shapes.insert(dir.to_path_buf(), shape);
    }
    let bare = shape.is_git_dir();
    if bare {
        surface.git_dirs.push(dir.to_path_buf());
        walk_git(dir, dir, surface, when);
    }
    for entry in entries {
        let name = entry.file_name();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if everywhere.contains(&name) {
            // A file tools read from every folder up the tree: judged wherever it is.
            record_tree(&entry.path(), surface);
        } else if name == ".git" {
            let path = entry.path();
            surface.tops.push(dir.to_path_buf());
            if kind.is_dir() {
                if let Ok(meta) = std::fs::symlink_metadata(&path) {
                    surface.entries.insert(path.clone(), entry_of(&path, &meta));
                }
                surface.git_dirs.push(path.clone());
                walk_git(&path, &path, surface, when);
            } else {
                record_tree(&path, surface);
            }
        } else if kind.is_symlink() {
            if let Ok(target) = std::fs::read_link(entry.path()) {
                surface.links.insert(entry.path(), target);
            }
        } else if kind.is_dir() {
            // A bare repository's objects too: a gitlink's worktree may hide there.
            walk(&entry.path(), surface, when, everywhere);
        }
    }
}

/// Walks `dir` inside the git directory `git_dir`, recording its surface and every symlink
/// (never descending into objects, refs or logs). A folder holding a `HEAD` there is a git
/// directory of its own (a linked worktree's, a submodule's, or one the payload made), walked
/// with its own surface and recorded itself, so a swap for a symlink shows.
fn walk_git(git_dir: &Path, dir: &Path, surface: &mut Surface, when: Scan) {
    let Some(entries) = list(dir, surface, when) else {
        return;
    };
    for entry in entries {
        let name = entry.file_name();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let rel = path.strip_prefix(git_dir).unwrap_or(&path);
        if sandbox::is_git_dir_surface(rel) {
            record_tree(&path, surface);
            continue;
        }
        if kind.is_symlink() {
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                surface.entries.insert(path.clone(), entry_of(&path, &meta));
            }
            continue;
        }
        // A repository's data folders hold no config (and `logs` holds a `HEAD`): skipped at
        // the top of a git directory only, since a worktree or submodule may be named `logs`.
        if !kind.is_dir() || (dir == git_dir && is_data_dir(&name)) {
            continue;
        }
        if path.join("HEAD").exists() {
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                surface.entries.insert(path.clone(), entry_of(&path, &meta));
            }
            surface.git_dirs.push(path.clone());
            walk_git(&path, &path, surface, when);
        } else {
            walk_git(git_dir, &path, surface, when);
        }
    }
}

/// Records `path` and, when it is a directory, everything beneath it (never following a link).
pub(super) fn record_tree(path: &Path, surface: &mut Surface) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    surface
        .entries
        .insert(path.to_path_buf(), entry_of(path, &meta));
    if meta.is_dir()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for e in entries.flatten() {
            record_tree(&e.path(), surface);
        }
    }
}

/// True when every component between `anchor` and `path` is a real directory (no symlink).
pub(super) fn beneath_is_real(anchor: Option<&PathBuf>, path: &Path) -> bool {
    let Some(anchor) = anchor else { return false };
    let Some(parent) = path.parent() else {
        return false;
    };
    let mut at = anchor.clone();
    for c in parent
        .strip_prefix(anchor)
        .unwrap_or(Path::new(""))
        .components()
    {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            _ => return false,
        }
    }
    true
}

fn entry_of(path: &Path, meta: &std::fs::Metadata) -> Entry {
    let ft = meta.file_type();
    if ft.is_symlink() {
        Entry::Link(std::fs::read_link(path).unwrap_or_default())
    } else if ft.is_dir() {
        Entry::Dir {
            mode: meta.permissions().mode() & 0o7777,
        }
    } else if ft.is_file() {
        let bytes = if meta.len() <= MAX_KEPT {
            read_no_follow(path)
        } else {
            None
        };
        // Kept bytes decide; the time only tells a change of a file too large to keep.
        let mtime = if bytes.is_some() {
            (0, 0)
        } else {
            (meta.mtime(), meta.mtime_nsec())
        };
        Entry::File {
            bytes,
            mode: meta.permissions().mode() & 0o7777,
            size: meta.len(),
            mtime,
            links: meta.nlink(),
        }
    } else {
        Entry::Other(meta.mode())
    }
}

/// Reads a regular file refusing a symlink in its last component and never blocking.
pub(super) fn read_no_follow(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
        .open(path)
        .ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}
