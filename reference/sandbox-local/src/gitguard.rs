//! The git surface guard: the check after every call that finds and reverts what a confined
//! command changed of git's code-execution surface that the profile could not prevent.
//!
//! bwrap and the Landlock launcher protect paths by mounts, and a path that does not exist when
//! the call starts has nothing to mount on; every dialect protects fixed paths, while git also
//! reads config and runs code from places found only per repository (nested repositories,
//! linked worktrees under `.git/worktrees`, submodules under `.git/modules`, the folder
//! `core.hooksPath` names, files a config includes). The guard snapshots that surface just before
//! the call ([`GitGuard::before`]) and, after the call has ended and every process of it is gone,
//! compares and reverts ([`sandbox::CallGuard::settle`]); each reverted path is a denial carrying
//! the marker.
//!
//! What it watches, under the workspace and every extra writable root (never following a
//! symlink): every path of [`sandbox::is_git_surface`]'s shape; the policy's protected paths;
//! the `core.hooksPath` folder and the `include.path` files of every config it found before the
//! call. What may change and stays (ordinary git): a config (new or changed) holding only keys
//! that name no program ([`SAFE_KEYS`]), a `commondir` or a gitfile that leads back into a
//! repository that was there before the call (`git worktree add`), `hooks/*.sample`.
//!
//! The revert works through descriptors opened beneath the root refusing every symlink
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `unlinkat`), so a path swapped for a
//! symlink can never lead it outside; it relies on no process of the call surviving it (one
//! that did could plant again after the revert).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::OFlag;
#[cfg(target_os = "linux")]
use nix::fcntl::{OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use sandbox::{CallGuard, ConfinedMode, ProviderPolicy};

/// Files larger than this are compared by size and time only and cannot be restored.
const MAX_KEPT: u64 = 16 << 20;

/// Config keys (`section.key`, the subsection left out, lowercase) that name no program and no
/// other file: a config holding only these may be created or changed by a call (`git init`,
/// `git clone`, `git worktree add`, `git submodule`).
pub const SAFE_KEYS: [&str; 20] = [
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.worktree",
    "core.autocrlf",
    "core.eol",
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "remote.url",
    "remote.fetch",
    "remote.pushurl",
    "branch.remote",
    "branch.merge",
    "branch.rebase",
    "submodule.url",
    "submodule.active",
];

/// What one watched path was.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    File {
        bytes: Option<Vec<u8>>,
        mode: u32,
        size: u64,
        mtime: (i64, i64),
    },
    Dir {
        mode: u32,
    },
    Link(PathBuf),
    Other(u32),
}

/// The watched surface at one moment: absolute path -> what it was (absent: not there).
#[derive(Clone, Debug, Default)]
struct Surface {
    entries: BTreeMap<PathBuf, Entry>,
    /// Git directories found (`.git` directories and the linked worktrees' and submodules' git
    /// directories beneath them).
    git_dirs: Vec<PathBuf>,
}

/// The guard of one call (see the module docs).
#[derive(Debug)]
pub struct GitGuard {
    mode: ConfinedMode,
    /// The canonical roots the surface lies under (workspace, extra roots).
    anchors: Vec<PathBuf>,
    /// The protected paths of the policy, absolute.
    protected: Vec<PathBuf>,
    /// Folders named by `core.hooksPath` and files named by `include.path` before the call.
    named: Vec<PathBuf>,
    before: Surface,
}

impl GitGuard {
    /// Snapshots the surface of `policy` now. `None` under `read-only` (nothing in a root is
    /// writable) and for a deployment that protects nothing.
    pub fn before(policy: &ProviderPolicy) -> Option<GitGuard> {
        if policy.mode == ConfinedMode::ReadOnly || policy.protected_paths.is_empty() {
            return None;
        }
        let mut anchors = Vec::new();
        for root in std::iter::once(&policy.workspace_root)
            .chain(policy.extra_roots.iter().map(|r| &r.path))
        {
            if let Ok(c) = sandbox::canonical_path(root)
                && !anchors.contains(&c)
            {
                anchors.push(c);
            }
        }
        let protected = anchors
            .iter()
            .flat_map(|a| {
                policy
                    .protected_paths
                    .iter()
                    .map(move |p| a.join(p.as_path()))
            })
            .collect();
        let mut guard = GitGuard {
            mode: policy.mode,
            anchors,
            protected,
            named: Vec::new(),
            before: Surface::default(),
        };
        let mut before = guard.scan();
        guard.named = guard.named_by_configs(&before);
        for named in &guard.named {
            if beneath_is_real(guard.anchor_of(named), named) {
                record_tree(named, &mut before);
            }
        }
        guard.before = before;
        Some(guard)
    }

    /// True when `path` (canonical) is on the surface this guard watches: a path of git's
    /// surface shape under a root, a protected path, or beneath a folder or file a config named.
    /// What the write tool's fence denies, so it and the shell agree.
    pub fn watches(&self, path: &Path) -> bool {
        if self
            .protected
            .iter()
            .chain(self.named.iter())
            .any(|p| path.starts_with(p))
        {
            return true;
        }
        self.anchors.iter().any(|a| {
            path.strip_prefix(a)
                .is_ok_and(|rel| !rel.as_os_str().is_empty() && sandbox::is_git_surface(rel))
        })
    }

    /// The anchor `path` lies under.
    fn anchor_of(&self, path: &Path) -> Option<&PathBuf> {
        self.anchors.iter().find(|a| path.starts_with(a))
    }

    /// Walks every anchor (never following a symlink) and records the watched paths.
    fn scan(&self) -> Surface {
        let mut surface = Surface::default();
        for anchor in &self.anchors {
            walk(anchor, anchor, false, &mut surface);
        }
        for extra in self.protected.iter().chain(self.named.iter()) {
            if self.anchor_of(extra).is_some() && beneath_is_real(self.anchor_of(extra), extra) {
                record_tree(extra, &mut surface);
            }
        }
        surface
    }

    /// The `core.hooksPath` folders and `include.path` files the configs of `surface` name,
    /// when they lie under an anchor.
    fn named_by_configs(&self, surface: &Surface) -> Vec<PathBuf> {
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
            // A relative hooks path is taken from the worktree's top: the folder holding `.git`.
            let top = dir
                .ancestors()
                .find(|a| a.file_name() == Some(OsStr::new(".git")))
                .and_then(Path::parent)
                .unwrap_or(dir);
            for (key, value) in config_entries(bytes) {
                let base = match key.as_str() {
                    "core.hookspath" => top,
                    "include.path" | "includeif.path" => dir,
                    _ => continue,
                };
                let value = PathBuf::from(value.trim().trim_matches('"'));
                let full = lexical(&base.join(value));
                if self.anchor_of(&full).is_some() && !named.contains(&full) {
                    named.push(full);
                }
            }
        }
        named
    }

    /// Whether a changed or new entry at `path` is what ordinary git leaves (it stays).
    fn benign(&self, path: &Path, entry: &Entry) -> bool {
        let in_named = self
            .named
            .iter()
            .chain(self.protected.iter())
            .any(|n| path.starts_with(n));
        if in_named {
            return false;
        }
        let name = path.file_name().and_then(OsStr::to_str).unwrap_or("");
        let parent = path.parent().unwrap_or(path);
        match entry {
            // A new directory stays (`git init`, `git worktree add`); what it holds is judged
            // entry by entry.
            Entry::Dir { .. } => true,
            Entry::File {
                bytes: Some(bytes), ..
            } => match name {
                "config" | "config.worktree" => config_is_safe(bytes),
                "commondir" => {
                    // `git worktree add`: `.git/worktrees/<name>/commondir` holding `../..`.
                    parent.parent().and_then(Path::file_name) == Some(OsStr::new("worktrees"))
                        && self.leads_to_known(parent, bytes)
                }
                ".git" => {
                    // A gitfile: `gitdir: <path>` into a repository known before the call.
                    let text = String::from_utf8_lossy(bytes);
                    text.trim()
                        .strip_prefix("gitdir:")
                        .is_some_and(|t| self.leads_to_known(parent, t.trim().as_bytes()))
                }
                _ => name.ends_with(".sample") && parent.file_name() == Some(OsStr::new("hooks")),
            },
            _ => false,
        }
    }

    /// Whether `target` (relative to `base`) resolves into a git directory that was there before
    /// the call.
    fn leads_to_known(&self, base: &Path, target: &[u8]) -> bool {
        let text = String::from_utf8_lossy(target);
        let full = base.join(text.trim());
        match std::fs::canonicalize(&full) {
            Ok(c) => self.before.git_dirs.iter().any(|g| c.starts_with(g)),
            Err(_) => false,
        }
    }

    fn marker(&self) -> String {
        sandbox::denial_marker(self.mode.into())
    }
}

impl CallGuard for GitGuard {
    fn settle(self: Box<Self>) -> Vec<String> {
        let after = self.scan();
        let mut lines = Vec::new();
        let marker = self.marker();
        // New and changed entries, shallowest first (removing a new directory removes its
        // content).
        let mut removed_dirs: Vec<PathBuf> = Vec::new();
        for (path, now) in &after.entries {
            if removed_dirs.iter().any(|d| path.starts_with(d)) {
                continue;
            }
            let was = self.before.entries.get(path);
            if was == Some(now) || (was.is_none() && self.benign(path, now)) {
                continue;
            }
            if let (Some(Entry::File { .. }), Entry::File { .. }) = (was, now)
                && self.benign(path, now)
            {
                continue;
            }
            if let (Some(Entry::Dir { .. }), Entry::Dir { .. }) = (was, now) {
                continue; // a directory's mode only
            }
            let Some(anchor) = self.anchor_of(path) else {
                continue;
            };
            if matches!(now, Entry::Dir { .. }) {
                removed_dirs.push(path.clone());
            }
            let result = match was {
                None => remove_beneath(anchor, path),
                Some(old) => remove_beneath(anchor, path).and_then(|()| restore(anchor, path, old)),
            };
            lines.push(match result {
                Ok(()) => format!(
                    "{marker} reverted after the call (git's code surface): {}",
                    path.display()
                ),
                Err(e) => format!(
                    "{marker} could not revert (git's code surface): {}: {e}",
                    path.display()
                ),
            });
        }
        // Removed entries, shallowest first (a directory before its content).
        for (path, old) in &self.before.entries {
            if after.entries.contains_key(path) {
                continue;
            }
            let Some(anchor) = self.anchor_of(path) else {
                continue;
            };
            let result = restore(anchor, path, old);
            lines.push(match result {
                Ok(()) => format!(
                    "{marker} restored after the call (git's code surface): {}",
                    path.display()
                ),
                Err(e) => format!(
                    "{marker} could not restore (git's code surface): {}: {e}",
                    path.display()
                ),
            });
        }
        lines
    }
}

/// Walks `dir`, recording the watched paths. `in_git` is true inside a git directory, where only
/// the surface is descended into (never objects, refs or logs). Outside one, only an entry named
/// `.git` can be on the surface (every surface path holds a `.git` component), so the walk
/// there costs one `readdir` per directory and no `stat`.
fn walk(anchor: &Path, dir: &Path, in_git: bool, surface: &mut Surface) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !in_git {
            if name == ".git" {
                let path = entry.path();
                if kind.is_dir() {
                    if let Ok(meta) = std::fs::symlink_metadata(&path) {
                        surface.entries.insert(path.clone(), entry_of(&path, &meta));
                    }
                    surface.git_dirs.push(path.clone());
                    walk(anchor, &path, true, surface);
                } else {
                    record_tree(&path, surface);
                }
            } else if kind.is_dir() {
                walk(anchor, &entry.path(), false, surface);
            }
            continue;
        }
        let path = entry.path();
        let rel = path.strip_prefix(anchor).unwrap_or(&path);
        if sandbox::is_git_surface(rel) {
            record_tree(&path, surface);
            continue;
        }
        if !kind.is_dir()
            || matches!(
                name.to_str(),
                Some("objects" | "refs" | "logs" | "lfs" | "rr-cache")
            )
        {
            continue;
        }
        // A linked worktree's or a submodule's git directory.
        if path.join("HEAD").exists() {
            surface.git_dirs.push(path.clone());
        }
        walk(anchor, &path, true, surface);
    }
}

/// Records `path` and, when it is a directory, everything beneath it (never following a link).
fn record_tree(path: &Path, surface: &mut Surface) {
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
fn beneath_is_real(anchor: Option<&PathBuf>, path: &Path) -> bool {
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
        }
    } else {
        Entry::Other(meta.mode())
    }
}

/// Reads a regular file refusing a symlink in its last component and never blocking.
fn read_no_follow(path: &Path) -> Option<Vec<u8>> {
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

/// `path` with `.` and `..` resolved lexically.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The `(section.key, value)` pairs of a git config, the subsection left out, names lowercase.
/// Lenient: what it cannot read it keeps as an unknown key (so the config is not safe).
fn config_entries(bytes: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut section = String::new();
    let mut out = Vec::new();
    for raw in text.lines() {
        let mut line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                out.push(("?".into(), line.into()));
                continue;
            };
            let head = &rest[..end];
            let name = head
                .split(|c: char| c.is_whitespace() || c == '.')
                .next()
                .unwrap_or("");
            section = name.to_ascii_lowercase();
            line = rest[end + 1..].trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (line, "true"),
        };
        out.push((
            format!("{section}.{}", key.to_ascii_lowercase()),
            value.to_owned(),
        ));
    }
    out
}

/// True when every key of the config names no program and no other file.
fn config_is_safe(bytes: &[u8]) -> bool {
    // A continued line (`\` at the end) could hide a key in what looks like a value.
    if bytes.windows(2).any(|w| w == b"\\\n") {
        return false;
    }
    config_entries(bytes)
        .iter()
        .all(|(k, _)| SAFE_KEYS.contains(&k.as_str()))
}

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
fn remove_beneath(anchor: &Path, path: &Path) -> Result<(), String> {
    let (parent, name) = split(anchor, path)?;
    let dir = match open_dir_beneath(anchor, &parent) {
        Ok(d) => d,
        // Its parent is gone or no directory: nothing of it is left to remove there.
        Err(_) => return Ok(()),
    };
    remove_at(&dir, &name)
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
fn restore(anchor: &Path, path: &Path, old: &Entry) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    //! The guard against the disk: each test plays the payload's writes between the snapshot and
    //! the settle, then checks what is on disk (inside and outside the workspace).
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "user.name=a",
                "-c",
                "user.email=a@x.invalid",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A repository with a commit, a linked worktree `wt` and a submodule `sub`, and a place
    /// outside the workspace.
    fn world() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().expect("tempdir");
        let base = sandbox::canonical_path(d.path()).expect("canonical");
        let (ws, outside, src) = (base.join("ws"), base.join("outside"), base.join("subsrc"));
        for dir in [&ws, &outside, &src] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        git(&src, &["init", "-q"]);
        git(&src, &["commit", "-q", "--allow-empty", "-m", "s"]);
        git(&ws, &["init", "-q"]);
        std::fs::write(ws.join("a"), "a").expect("a");
        git(&ws, &["add", "a"]);
        git(&ws, &["commit", "-qm", "init"]);
        git(
            &ws,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "-q",
                "add",
                src.to_str().expect("utf-8"),
                "sub",
            ],
        );
        git(&ws, &["worktree", "add", "-q", "wt", "-b", "wtb"]);
        (d, ws, outside)
    }

    fn guard(ws: &Path) -> Box<dyn CallGuard> {
        let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws);
        Box::new(GitGuard::before(&policy).expect("a guard under workspace-write"))
    }

    #[test]
    fn every_git_route_is_reverted_and_each_is_a_denial_with_the_marker() {
        let (_d, ws, _) = world();
        let config = std::fs::read(ws.join(".git/modules/sub/config")).expect("config");
        let g = guard(&ws);
        std::fs::write(ws.join(".git/commondir"), "../.cache/g\n").expect("w");
        std::fs::write(
            ws.join(".git/worktrees/wt/commondir"),
            "../../../.cache/g\n",
        )
        .expect("w");
        std::fs::write(ws.join(".git/config.worktree"), "[core]\n\tfsmonitor = x\n").expect("w");
        std::fs::write(
            ws.join(".git/modules/sub/config"),
            "[core]\n\tfsmonitor = x\n",
        )
        .expect("w");
        std::fs::write(ws.join(".git/modules/sub/hooks/pre-commit"), "x").expect("w");
        std::fs::create_dir_all(ws.join("src")).expect("mkdir");
        std::fs::write(ws.join("src/.git"), "gitdir: ../.cache/g\n").expect("w");
        std::fs::create_dir_all(ws.join("n/.git/hooks")).expect("mkdir");
        std::fs::write(ws.join("n/.git/hooks/post-checkout"), "x").expect("w");
        std::fs::write(ws.join(".git/info/attributes"), "* filter=x\n").expect("w");
        let lines = g.settle();
        assert_eq!(lines.len(), 8, "{lines:#?}");
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("[sandbox: file access denied under workspace-write mode]")),
            "{lines:#?}"
        );
        for gone in [
            ".git/commondir",
            ".git/config.worktree",
            ".git/modules/sub/hooks/pre-commit",
            "src/.git",
            "n/.git/hooks/post-checkout",
            ".git/info/attributes",
        ] {
            assert!(
                std::fs::symlink_metadata(ws.join(gone)).is_err(),
                "{gone} left"
            );
        }
        assert_eq!(
            std::fs::read(ws.join(".git/modules/sub/config")).expect("config"),
            config
        );
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/worktrees/wt/commondir")).expect("c"),
            "../..\n"
        );
        // What the guard does not watch stays as the call left it.
        assert!(ws.join("n/.git/hooks").is_dir() && ws.join("src").is_dir());
    }

    #[test]
    fn ordinary_git_stays_worktree_add_init_clone_and_samples() {
        let (_d, ws, _) = world();
        let g = guard(&ws);
        git(&ws, &["worktree", "add", "-q", "wt2", "-b", "b2"]);
        git(&ws, &["init", "-q", "nested"]);
        git(&ws, &["clone", "-q", ".", "cloned"]);
        std::fs::write(ws.join("b"), "b").expect("b");
        git(&ws, &["add", "b"]);
        git(&ws, &["commit", "-qm", "b"]);
        git(&ws, &["checkout", "-qb", "feat"]);
        let lines = g.settle();
        assert!(lines.is_empty(), "{lines:#?}");
        assert!(ws.join("wt2/.git").is_file() && ws.join(".git/worktrees/wt2/commondir").is_file());
        assert!(ws.join("nested/.git/config").is_file() && ws.join("cloned/.git/config").is_file());
    }

    #[test]
    fn the_hooks_path_folder_and_an_included_config_are_watched() {
        let (_d, ws, _) = world();
        git(&ws, &["config", "core.hooksPath", ".husky"]);
        git(&ws, &["config", "include.path", "../project.gitconfig"]);
        std::fs::write(ws.join("project.gitconfig"), "[user]\n\tname = a\n").expect("w");
        let g = guard(&ws);
        std::fs::create_dir_all(ws.join(".husky")).expect("mkdir");
        std::fs::write(ws.join(".husky/pre-commit"), "x").expect("w");
        std::fs::write(ws.join("project.gitconfig"), "[core]\n\tfsmonitor = x\n").expect("w");
        let lines = g.settle();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(!ws.join(".husky").exists());
        assert_eq!(
            std::fs::read_to_string(ws.join("project.gitconfig")).expect("r"),
            "[user]\n\tname = a\n"
        );
    }

    #[test]
    fn a_symlink_swapped_in_never_leads_the_revert_outside() {
        let (_d, ws, outside) = world();
        std::fs::write(outside.join("keep"), "keep").expect("w");
        let g = guard(&ws);
        // The submodule's hooks become a link to a folder outside holding a file: the revert
        // removes the link, never the file it leads to.
        let hooks = ws.join(".git/modules/sub/hooks");
        std::fs::rename(&hooks, ws.join("old-hooks")).expect("mv");
        std::os::unix::fs::symlink(&outside, &hooks).expect("ln");
        let lines = g.settle();
        assert!(!lines.is_empty());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).expect("kept"),
            "keep"
        );
        assert!(
            hooks.is_dir()
                && !std::fs::symlink_metadata(&hooks)
                    .expect("m")
                    .file_type()
                    .is_symlink()
        );
        assert!(
            hooks.join("pre-commit.sample").is_file(),
            "the samples are restored"
        );
    }

    #[test]
    fn nothing_is_guarded_read_only_or_when_nothing_is_protected() {
        let (_d, ws, _) = world();
        assert!(GitGuard::before(&ProviderPolicy::new(ConfinedMode::ReadOnly, &ws)).is_none());
        let none =
            ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws).with_protected_paths(Vec::new());
        assert!(GitGuard::before(&none).is_none());
    }

    #[test]
    fn a_config_is_safe_only_with_keys_that_name_no_program() {
        assert!(config_is_safe(b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = /x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"));
        for bad in [
            &b"[core]\n\tfsmonitor = x\n"[..],
            b"[core]\n\thooksPath = x\n",
            b"[core]\n\tpager = x\n",
            b"[alias]\n\tst = !x\n",
            b"[filter \"x\"]\n\tclean = x\n",
            b"[include]\n\tpath = x\n",
            b"[core] fsmonitor = x\n",
            b"[core]\n\tbare = false \\\n\n",
            b"[core.x]\n\teditor = x\n",
        ] {
            assert!(!config_is_safe(bad), "{}", String::from_utf8_lossy(bad));
        }
    }
}
