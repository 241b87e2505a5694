//! The git surface guard: the check after every call that finds and reverts what a confined
//! command changed of git's code-execution surface that the profile could not prevent.
//!
//! bwrap and the Landlock launcher protect paths by mounts, and a path that does not exist when
//! the call starts has nothing to mount on; every dialect protects fixed paths, while git also
//! reads config and runs code from places found only per repository (nested repositories,
//! linked worktrees under `.git/worktrees`, submodules under `.git/modules`, folders made into
//! bare repositories, the folder `core.hooksPath` names, files a config includes). The guard snapshots that surface just before
//! the call ([`GitGuard::before`]) and, after the call has ended and every process of it is gone,
//! compares and reverts ([`sandbox::CallGuard::settle`]); each reverted path is a denial carrying
//! the marker.
//!
//! What it watches, under the workspace and every extra writable root (never following a
//! symlink): every path of [`sandbox::is_git_surface`]'s shape; the policy's protected paths;
//! the `core.hooksPath` folder and the `include.path` files of every config it found before the
//! call, and the same surface of every folder git's discovery takes for a bare repository
//! ([`sandbox::GitDirShape`]). What may change and stays (ordinary git): a config (new or
//! changed) holding only keys that name no program ([`SAFE_KEYS`]), a `commondir` or a gitfile
//! that leads back to a git directory that was there before the call (or, for a gitfile, to a
//! worktree's or submodule's git directory beneath one: `git worktree add`), `hooks/*.sample`.
//! A folder the call made into a bare repository with config or code of its own loses what made
//! it one (a new `HEAD` or `commondir`, or `objects` or `refs` added beside an old `HEAD`).
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
use sandbox::{CallGuard, ConfinedMode, GitDirShape, ProviderPolicy};

/// Files larger than this are compared by size and time only and cannot be restored.
const MAX_KEPT: u64 = 16 << 20;

/// Config keys (`section.key`, the subsection left out, lowercase) that name no program and no
/// other file: a config holding only these may be created or changed by a call (`git init`,
/// `git clone`, `git worktree add`, `git submodule`). `core.worktree` (which `git submodule`
/// writes) names the folder the person's checkout writes into: it may stay only when it leads
/// into a root ([`GitGuard`] judges it apart).
pub const SAFE_KEYS: [&str; 20] = [
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "remote.url",
    "remote.fetch",
    "remote.pushurl",
    "remote.mirror",
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
    /// Git directories found (`.git` directories, the linked worktrees' and submodules' git
    /// directories beneath them, and folders git's discovery takes for a bare repository).
    git_dirs: Vec<PathBuf>,
    /// Folders outside any `.git` that hold a `HEAD` or a `commondir`, with their shape: what
    /// tells a folder this call made into a git directory.
    shapes: BTreeMap<PathBuf, GitDirShape>,
    /// Symlinks outside git directories, with what they hold: a new one into a writable place
    /// the guard does not watch (`/tmp`) would lead the person's git to a repository there.
    links: BTreeMap<PathBuf, PathBuf>,
    /// Folders that could not be listed (the after-call scan first tries to make them listable):
    /// what they hold is unknown, so the call is a denial.
    blind: Vec<PathBuf>,
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
    /// The writable roots outside every anchor (`/tmp`, `$TMPDIR`): the payload fills them, the
    /// guard does not watch them.
    unwatched: Vec<PathBuf>,
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
        let unwatched = sandbox::writable_roots(policy)
            .unwrap_or_default()
            .into_iter()
            .filter(|root| !anchors.iter().any(|a| root.starts_with(a)))
            .collect();
        let mut guard = GitGuard {
            mode: policy.mode,
            anchors,
            protected,
            named: Vec::new(),
            unwatched,
            before: Surface::default(),
        };
        let mut before = guard.scan(Scan::Before);
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
        if self.anchors.iter().any(|a| {
            path.strip_prefix(a)
                .is_ok_and(|rel| !rel.as_os_str().is_empty() && sandbox::is_git_surface(rel))
        }) {
            return true;
        }
        // The config and code of a folder git takes for a bare repository.
        if self.before.git_dirs.iter().any(|g| {
            path.strip_prefix(g)
                .is_ok_and(|rel| !rel.as_os_str().is_empty() && sandbox::is_git_dir_surface(rel))
        }) {
            return true;
        }
        self.would_make_a_git_dir(path)
    }

    /// True when writing `path` would make one of the folders on its way, under an anchor, into
    /// a git directory (its `HEAD`, `objects`, `refs` or `commondir`, the last one missing).
    fn would_make_a_git_dir(&self, path: &Path) -> bool {
        let Some(anchor) = self.anchor_of(path) else {
            return false;
        };
        path.ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(anchor))
            .any(|dir| {
                let Some(Component::Normal(first)) = path
                    .strip_prefix(dir)
                    .ok()
                    .and_then(|rel| rel.components().next())
                else {
                    return false;
                };
                if !GitDirShape::is_marker(first) {
                    return false;
                }
                let mut shape = shape_of(dir);
                if shape.is_git_dir() {
                    return false;
                }
                shape.add(first);
                shape.is_git_dir()
            })
    }

    /// The anchor `path` lies under.
    fn anchor_of(&self, path: &Path) -> Option<&PathBuf> {
        self.anchors.iter().find(|a| path.starts_with(a))
    }

    /// Walks every anchor (never following a symlink) and records the watched paths.
    fn scan(&self, when: Scan) -> Surface {
        let mut surface = Surface::default();
        for anchor in &self.anchors {
            walk(anchor, &mut surface, when);
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
    /// `watched` holds the git directories whose whole surface this settle judges.
    fn benign(&self, path: &Path, entry: &Entry, watched: &[PathBuf]) -> bool {
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
                "config" | "config.worktree" => {
                    config_is_safe(bytes) && self.worktrees_stay_inside(parent, bytes)
                }
                "commondir" => {
                    // `git worktree add`: `.git/worktrees/<name>/commondir` holding `../..`.
                    parent.parent().and_then(Path::file_name) == Some(OsStr::new("worktrees"))
                        && named_git_dir(parent, bytes, Lead::CommonDir)
                            .and_then(|d| resolve_without_links(&d))
                            .is_some_and(|d| {
                                watched.contains(&d) && self.before.git_dirs.contains(&d)
                            })
                }
                // A gitfile (`git worktree add`, `git submodule add`): it must lead to a git
                // directory whose whole surface this settle judges, and one that was there
                // before the call or is where git makes a worktree's or a submodule's.
                ".git" => named_git_dir(parent, bytes, Lead::GitFile)
                    .and_then(|d| resolve_without_links(&d))
                    .is_some_and(|d| {
                        watched.contains(&d)
                            && (self.before.git_dirs.contains(&d) || made_by_git(&d, watched))
                    }),
                _ => name.ends_with(".sample") && parent.file_name() == Some(OsStr::new("hooks")),
            },
            _ => false,
        }
    }

    /// Whether every `core.worktree` of the config in `git_dir` leads into a root (the person's
    /// checkout writes there), read relative to the git directory as git does, with no symlink
    /// on the part that exists.
    fn worktrees_stay_inside(&self, git_dir: &Path, bytes: &[u8]) -> bool {
        config_entries(bytes)
            .iter()
            .filter(|(k, _)| k == "core.worktree")
            .all(|(_, value)| {
                let value = value.trim();
                let value = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(value);
                !value.is_empty()
                    && !value.contains(['"', '\\'])
                    && lexical_without_links(&git_dir.join(value))
                        .is_some_and(|w| self.anchor_of(&w).is_some())
            })
    }

    /// Whether the entry `now` at `path` is a change the settle reverts: new and not what
    /// ordinary git leaves, or changed from what it was (a config or gitfile may change to
    /// another benign one; a directory's mode may change).
    fn must_revert(&self, path: &Path, now: &Entry, watched: &[PathBuf]) -> bool {
        match self.before.entries.get(path) {
            Some(was) if was == now => false,
            None => !self.benign(path, now, watched),
            Some(Entry::File { .. }) if matches!(now, Entry::File { .. }) => {
                !self.benign(path, now, watched)
            }
            Some(Entry::Dir { .. }) if matches!(now, Entry::Dir { .. }) => false,
            Some(_) => true,
        }
    }

    /// Whether a symlink's target lies in a writable place this guard does not watch (and in
    /// no root it watches): a repository the payload made there would be the person's git's
    /// once they enter the link.
    fn leads_to_unwatched(&self, link: &Path, target: &Path) -> bool {
        let full = link.parent().unwrap_or(link).join(target);
        match sandbox::canonical_path(&full) {
            Ok(resolved) => {
                self.anchor_of(&resolved).is_none()
                    && self.unwatched.iter().any(|u| resolved.starts_with(u))
            }
            // A target that cannot be resolved is refused: a place to fill later.
            Err(_) => true,
        }
    }

    fn marker(&self) -> String {
        sandbox::denial_marker(self.mode.into())
    }
}

impl CallGuard for GitGuard {
    fn settle(self: Box<Self>) -> Vec<String> {
        let after = self.scan(Scan::After);
        let mut lines = Vec::new();
        let marker = self.marker();
        let line = |result: Result<(), String>, done: &str, why: &str, path: &Path| match result {
            Ok(()) => format!("{marker} {done} after the call ({why}): {}", path.display()),
            Err(e) => format!("{marker} could not revert ({why}): {}: {e}", path.display()),
        };
        // What could not be listed even after the guard made it listable hides what it holds.
        for dir in &after.blind {
            lines.push(format!(
                "{marker} could not inspect after the call (git's code surface): {}",
                dir.display()
            ));
        }
        // Folders this call made into git directories (a bare repository's shape) with config or
        // code of their own: what made them one goes (their `HEAD` or `commondir`, or the
        // `objects` or `refs` added beside a `HEAD` that was there), so git no longer takes them
        // for a repository, and nothing else of them is touched (a `config` there may be a file
        // of the project's that the folder held before).
        let mut unmade: Vec<PathBuf> = Vec::new();
        for (dir, shape) in &after.shapes {
            let was = self.before.shapes.get(dir).copied();
            if !shape.is_git_dir() || was.is_some_and(GitDirShape::is_git_dir) {
                continue;
            }
            let planted = after.entries.iter().any(|(path, now)| {
                path.starts_with(dir) && self.must_revert(path, now, &after.git_dirs)
            });
            let Some(anchor) = self.anchor_of(dir).filter(|_| planted) else {
                continue;
            };
            // Without a remembered shape the folder held neither a `HEAD` nor a `commondir`.
            let was = was.unwrap_or(GitDirShape {
                objects: shape.objects,
                refs: shape.refs,
                ..GitDirShape::default()
            });
            for name in shape.added_since(was) {
                let path = dir.join(name);
                let why = "a folder made a git repository with config or code of its own";
                lines.push(line(remove_beneath(anchor, &path), "reverted", why, &path));
            }
            unmade.push(dir.clone());
        }
        // The git directories whose whole surface this settle judges: a gitfile or `commondir`
        // may lead to one of these only.
        let watched: Vec<PathBuf> = after
            .git_dirs
            .iter()
            .filter(|g| !unmade.contains(g))
            .cloned()
            .collect();
        // Folders that were bare repositories and are no longer: what they hold is inert now.
        let gone: Vec<&PathBuf> = self
            .before
            .shapes
            .iter()
            .filter(|(dir, was)| {
                was.is_git_dir() && !after.shapes.get(*dir).is_some_and(|s| s.is_git_dir())
            })
            .map(|(dir, _)| dir)
            .collect();
        // New and changed entries, shallowest first (removing a new directory removes its
        // content).
        let mut removed_dirs: Vec<PathBuf> = Vec::new();
        for (path, now) in &after.entries {
            if removed_dirs
                .iter()
                .chain(unmade.iter())
                .any(|d| path.starts_with(d))
                || !self.must_revert(path, now, &watched)
            {
                continue;
            }
            let was = self.before.entries.get(path);
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
            lines.push(line(result, "reverted", "git's code surface", path));
        }
        // Removed entries, shallowest first (a directory before its content).
        for (path, old) in &self.before.entries {
            if after.entries.contains_key(path) || gone.iter().any(|d| path.starts_with(d)) {
                continue;
            }
            let Some(anchor) = self.anchor_of(path) else {
                continue;
            };
            lines.push(line(
                restore(anchor, path, old),
                "restored",
                "git's code surface",
                path,
            ));
        }
        // New or changed symlinks into a writable place nobody watches.
        for (path, target) in &after.links {
            if self.before.links.get(path) == Some(target)
                || removed_dirs.iter().any(|d| path.starts_with(d))
                || !self.leads_to_unwatched(path, target)
            {
                continue;
            }
            let Some(anchor) = self.anchor_of(path) else {
                continue;
            };
            let result =
                remove_beneath(anchor, path).and_then(|()| match self.before.links.get(path) {
                    Some(old) => restore(anchor, path, &Entry::Link(old.clone())),
                    None => Ok(()),
                });
            let why = "a link into a writable place outside the roots, where git would find a repository nobody watches";
            lines.push(line(result, "reverted", why, path));
        }
        lines
    }
}

/// Which scan: before the call (the host's state is taken as it is) or after it (what the
/// call made unlistable is made listable again to be inspected).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scan {
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

/// Which entry a gitfile or a `commondir` is (what it may lead to differs).
#[derive(Clone, Copy)]
enum Lead {
    GitFile,
    CommonDir,
}

/// Directories inside a git directory that hold no config and no code, never descended into.
fn is_data_dir(name: &OsStr) -> bool {
    matches!(
        name.to_str(),
        Some("objects" | "refs" | "logs" | "lfs" | "rr-cache")
    )
}

/// The shape of `dir` now, from its listing.
fn shape_of(dir: &Path) -> GitDirShape {
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
fn walk(dir: &Path, surface: &mut Surface, when: Scan) {
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
        if name == ".git" {
            let path = entry.path();
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
        } else if kind.is_dir() && !(bare && is_data_dir(&name)) {
            walk(&entry.path(), surface, when);
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
        if !kind.is_dir() || is_data_dir(&name) {
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

/// Whether `dir` lies where git itself makes a git directory inside another one: a linked
/// worktree's (`<git dir>/worktrees/<name>`) or a submodule's (`<git dir>/modules/<path>`).
fn made_by_git(dir: &Path, watched: &[PathBuf]) -> bool {
    let worktree = dir
        .parent()
        .filter(|p| p.file_name() == Some(OsStr::new("worktrees")))
        .and_then(Path::parent)
        .is_some_and(|g| watched.iter().any(|w| w == g));
    worktree
        || dir.ancestors().skip(1).any(|a| {
            a.file_name() == Some(OsStr::new("modules"))
                && a.parent().is_some_and(|g| watched.iter().any(|w| w == g))
        })
}

/// The git directory a gitfile (`gitdir: <path>`) or a `commondir` names, read as git reads
/// it: trailing `\n` and `\r` taken off the whole file, the text then ending at the first NUL,
/// a gitfile's prefix exactly `gitdir: ` (one space, nothing trimmed); relative to `base`.
fn named_git_dir(base: &Path, bytes: &[u8], lead: Lead) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut end = bytes.len();
    while end > 0 && matches!(bytes[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let text = bytes[..end].split(|b| *b == 0).next().unwrap_or_default();
    let text = match lead {
        Lead::GitFile => text.strip_prefix(b"gitdir: ")?,
        Lead::CommonDir => text,
    };
    if text.is_empty() {
        return None;
    }
    Some(base.join(OsStr::from_bytes(text)))
}

/// `path` (absolute) resolved one component at a time, `..` stepping out of the real directory
/// before it: `None` when a component is a symlink (it could be swapped after the check) or
/// missing.
fn resolve_without_links(path: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(n) => {
                at.push(n);
                if std::fs::symlink_metadata(&at)
                    .ok()?
                    .file_type()
                    .is_symlink()
                {
                    return None;
                }
            }
            Component::Prefix(_) => return None,
        }
    }
    Some(at)
}

/// `path` (absolute) resolved like [`resolve_without_links`] on the part that exists and
/// lexically beyond it: `None` when an existing component is a symlink.
fn lexical_without_links(path: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::from("/");
    let mut exists = true;
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(n) => {
                at.push(n);
                if exists {
                    match std::fs::symlink_metadata(&at) {
                        Ok(m) if m.file_type().is_symlink() => return None,
                        Ok(_) => {}
                        Err(_) => exists = false,
                    }
                }
            }
            Component::Prefix(_) => return None,
        }
    }
    Some(at)
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
/// `core.worktree` passes here and is judged apart (it must lead into a root).
fn config_is_safe(bytes: &[u8]) -> bool {
    // A continued line (`\` at the end, before LF or CRLF, which git reads as LF) could hide a
    // key in what looks like a value.
    if bytes.windows(2).any(|w| w == b"\\\n" || w == b"\\\r") {
        return false;
    }
    config_entries(bytes)
        .iter()
        .all(|(k, _)| k == "core.worktree" || SAFE_KEYS.contains(&k.as_str()))
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

    /// Where git's discovery finds the repository when run in `dir` (outside any sandbox).
    fn git_dir_seen_from(dir: &Path) -> PathBuf {
        let out = Command::new("git")
            .args(["rev-parse", "--absolute-git-dir"])
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .output()
            .expect("git");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }

    /// Makes `dir` the shape git takes for a bare repository, with `config` as its config.
    fn make_bare_shaped(ws: &Path, dir: &Path, config: &str) {
        std::fs::create_dir_all(dir.join("objects")).expect("mkdir");
        std::fs::create_dir_all(dir.join("refs/heads")).expect("mkdir");
        std::fs::copy(ws.join(".git/HEAD"), dir.join("HEAD")).expect("HEAD");
        std::fs::write(dir.join("config"), config).expect("config");
    }

    const PAGER: &str =
        "[core]\n\tpager = touch /nonexistent/pwned\n[alias]\n\tst = !touch /nonexistent/pwned\n";

    #[test]
    fn a_folder_made_a_bare_repository_with_a_config_of_its_own_is_unmade() {
        let (_d, ws, _) = world();
        let src = ws.join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        std::fs::write(src.join("main.rs"), "fn main() {}").expect("w");
        let g = guard(&ws);
        make_bare_shaped(&ws, &src, PAGER);
        assert_eq!(
            git_dir_seen_from(&src),
            src,
            "the attack is real: git takes src for a repository"
        );
        let lines = g.settle();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].starts_with("[sandbox: file access denied under workspace-write mode]")
                && lines[0].ends_with("src/HEAD"),
            "{lines:#?}"
        );
        assert!(!src.join("HEAD").exists());
        assert_eq!(git_dir_seen_from(&src), ws.join(".git"));
        // Nothing else of the folder is touched.
        assert!(src.join("config").is_file() && src.join("main.rs").is_file());
        assert!(src.join("objects").is_dir() && src.join("refs").is_dir());
    }

    #[test]
    fn a_project_file_named_config_stays_when_its_folder_is_made_a_repository() {
        let (_d, ws, _) = world();
        let deploy = ws.join("deploy");
        std::fs::create_dir_all(deploy.join("refs")).expect("mkdir");
        std::fs::write(deploy.join("HEAD"), "not git\n").expect("w");
        std::fs::write(deploy.join("config"), "[core]\n\tpager = less\n").expect("w");
        let g = guard(&ws);
        // The payload adds what the folder lacked to be a repository, and a commondir.
        std::fs::create_dir_all(deploy.join("objects")).expect("mkdir");
        std::fs::write(deploy.join("HEAD"), "ref: refs/heads/main\n").expect("w");
        let lines = g.settle();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].ends_with("deploy/objects"), "{lines:#?}");
        assert!(!deploy.join("objects").exists());
        assert_eq!(
            std::fs::read_to_string(deploy.join("config")).expect("r"),
            "[core]\n\tpager = less\n"
        );
        assert!(deploy.join("HEAD").is_file() && deploy.join("refs").is_dir());
    }

    #[test]
    fn a_known_bare_repository_has_its_config_and_hooks_watched() {
        let (_d, ws, _) = world();
        git(&ws, &["init", "-q", "--bare", "remote.git"]);
        let bare = ws.join("remote.git");
        let config = std::fs::read(bare.join("config")).expect("config");
        let g = guard(&ws);
        std::fs::write(bare.join("config"), PAGER).expect("w");
        std::fs::write(bare.join("hooks/post-receive"), "x").expect("w");
        let lines = g.settle();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert_eq!(std::fs::read(bare.join("config")).expect("config"), config);
        assert!(!bare.join("hooks/post-receive").exists());
    }

    #[test]
    fn bare_clones_and_mirrors_made_by_the_call_stay() {
        let (_d, ws, _) = world();
        let g = guard(&ws);
        git(&ws, &["init", "-q", "--bare", "init.git"]);
        git(&ws, &["clone", "-q", "--bare", ".", "bare.git"]);
        git(&ws, &["clone", "-q", "--mirror", ".", "mirror.git"]);
        git(&ws, &["push", "-q", "init.git", "HEAD:refs/heads/main"]);
        let lines = g.settle();
        assert!(lines.is_empty(), "{lines:#?}");
        for dir in ["init.git", "bare.git", "mirror.git"] {
            assert_eq!(git_dir_seen_from(&ws.join(dir)), ws.join(dir));
        }
    }

    #[test]
    fn a_gitfile_or_commondir_into_a_folder_of_the_payloads_inside_dot_git_is_reverted() {
        let (_d, ws, _) = world();
        let g = guard(&ws);
        let evil = ws.join(".git/evil");
        make_bare_shaped(&ws, &evil, PAGER);
        std::fs::create_dir_all(ws.join("inner")).expect("mkdir");
        std::fs::write(ws.join("inner/.git"), "gitdir: ../.git/evil\n").expect("w");
        std::fs::write(ws.join(".git/worktrees/wt/commondir"), "../../evil\n").expect("w");
        let lines = g.settle();
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(!ws.join("inner/.git").exists());
        // A folder holding a HEAD inside .git is a git directory whose surface is watched.
        assert!(!evil.join("config").exists());
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/worktrees/wt/commondir")).expect("c"),
            "../..\n"
        );
    }

    /// The person's `git status` in `dir`, outside any sandbox; true when `marker` was written.
    fn host_status_runs_code(dir: &Path, marker: &Path) -> bool {
        let _ = Command::new("git")
            .args(["status", "--short"])
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .output();
        marker.exists()
    }

    #[test]
    fn a_repository_hidden_under_objects_is_no_gitfiles_target() {
        let (_d, ws, outside) = world();
        let marker = outside.join("pwned");
        let g = guard(&ws);
        // One call: a bare clone hidden where the guard never looks (objects), made the worktree
        // of a gitfile beside the project (helper's finding A).
        let evil = ws.join(".git/modules/x/objects/evil");
        git(
            &ws,
            &["clone", "-q", "--bare", ".", evil.to_str().expect("utf-8")],
        );
        std::fs::write(
            evil.join("config"),
            format!(
                "[core]\n\tbare = false\n\tworktree = ../../../../../vendor\n\tfsmonitor = \"touch {}; false #\"\n",
                marker.display()
            ),
        )
        .expect("w");
        std::fs::create_dir_all(ws.join("vendor")).expect("mkdir");
        std::fs::write(
            ws.join("vendor/.git"),
            "gitdir: ../.git/modules/x/objects/evil\n",
        )
        .expect("w");
        let lines = g.settle();
        assert!(!ws.join("vendor/.git").exists(), "{lines:#?}");
        assert!(!host_status_runs_code(&ws.join("vendor"), &marker));
    }

    #[test]
    fn a_gitfile_is_read_byte_for_byte_as_git_reads_it_and_never_through_a_link() {
        let (_d, ws, outside) = world();
        let g = guard(&ws);
        // Helper's finding B: `.git/modules/sub<TAB>` is a link to a copy of the submodule's
        // git directory; trimming the tab would make the gitfile look like the real one's.
        let copy = ws.join(".git/evil-copy");
        std::fs::create_dir_all(&copy).expect("mkdir");
        std::os::unix::fs::symlink("evil-copy", ws.join(".git/modules/sub\t")).expect("ln");
        std::fs::write(ws.join("sub/.git"), "gitdir: ../.git/modules/sub\t\n").expect("w");
        // Finding D: a gitfile through a link in /tmp, swappable after the check.
        let tmp_link = outside.join("g");
        std::os::unix::fs::symlink(ws.join(".git/modules/sub"), &tmp_link).expect("ln");
        std::fs::create_dir_all(ws.join("wt2")).expect("mkdir");
        std::fs::write(
            ws.join("wt2/.git"),
            format!("gitdir: {}\n", tmp_link.display()),
        )
        .expect("w");
        let lines = g.settle();
        assert_eq!(
            std::fs::read_to_string(ws.join("sub/.git")).expect("gitfile"),
            "gitdir: ../.git/modules/sub\n",
            "{lines:#?}"
        );
        assert!(std::fs::symlink_metadata(ws.join(".git/modules/sub\t")).is_err());
        assert!(!ws.join("wt2/.git").exists(), "{lines:#?}");
        assert_eq!(
            named_git_dir(Path::new("/b"), b"gitdir: x\t\r\n", Lead::GitFile),
            Some(PathBuf::from("/b/x\t"))
        );
        assert_eq!(
            named_git_dir(Path::new("/b"), b"gitdir: x\n\0", Lead::GitFile),
            Some(PathBuf::from("/b/x\n"))
        );
        assert_eq!(
            named_git_dir(Path::new("/b"), b"gitdir:x", Lead::GitFile),
            None
        );
        assert_eq!(
            named_git_dir(Path::new("/b"), b"../..\0junk\n", Lead::CommonDir),
            Some(PathBuf::from("/b/../.."))
        );
    }

    #[test]
    fn a_git_directory_swapped_for_a_link_is_put_back() {
        let (_d, ws, _) = world();
        let config = std::fs::read(ws.join(".git/modules/sub/config")).expect("config");
        let g = guard(&ws);
        let sub = ws.join(".git/modules/sub");
        std::fs::rename(&sub, ws.join(".git/evil")).expect("mv");
        std::os::unix::fs::symlink("../evil", &sub).expect("ln");
        let lines = g.settle();
        assert!(!lines.is_empty());
        let meta = std::fs::symlink_metadata(&sub).expect("sub");
        assert!(meta.is_dir(), "{lines:#?}");
        assert_eq!(std::fs::read(sub.join("config")).expect("config"), config);
    }

    #[test]
    fn a_new_link_into_a_writable_place_outside_the_roots_is_reverted() {
        let (_d, ws, outside) = world();
        std::os::unix::fs::symlink("/usr/share", ws.join("docs-link")).expect("ln");
        let g = guard(&ws);
        // Helper's finding D, the other way: a repository in /tmp the person's git would find
        // when they enter the link (filled now or in a later call).
        std::os::unix::fs::symlink(&outside, ws.join("vendored")).expect("ln");
        std::os::unix::fs::symlink(outside.join("not-yet"), ws.join("later")).expect("ln");
        std::os::unix::fs::symlink("a", ws.join("inside")).expect("ln");
        let lines = g.settle();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(std::fs::symlink_metadata(ws.join("vendored")).is_err());
        assert!(std::fs::symlink_metadata(ws.join("later")).is_err());
        assert!(std::fs::symlink_metadata(ws.join("inside")).is_ok());
        assert!(std::fs::symlink_metadata(ws.join("docs-link")).is_ok());
    }

    #[test]
    fn a_folder_made_unlistable_still_has_its_repositories_judged() {
        let (_d, ws, _) = world();
        let g = guard(&ws);
        // Helper's finding E: git passes through a folder it cannot list; the guard must look.
        git(&ws, &["clone", "-q", ".", "p/lib"]);
        git(&ws.join("p/lib"), &["config", "core.fsmonitor", "touch x"]);
        std::fs::set_permissions(ws.join("p"), std::fs::Permissions::from_mode(0o111))
            .expect("chmod");
        let lines = g.settle();
        assert!(
            lines.iter().any(|l| l.ends_with("p/lib/.git/config")),
            "{lines:#?}"
        );
        let config = std::fs::read_to_string(ws.join("p/lib/.git/config")).unwrap_or_default();
        assert!(!config.contains("fsmonitor"), "{config}");
    }

    #[test]
    fn a_worktree_setting_may_only_lead_into_a_root() {
        let (_d, ws, outside) = world();
        let set = |value: &str| {
            git(
                &ws,
                &[
                    "config",
                    "--file",
                    ".git/modules/sub/config",
                    "core.worktree",
                    value,
                ],
            )
        };
        // Into the workspace (what `git submodule` writes): it stays.
        let g = guard(&ws);
        set("../../../wt");
        let lines = g.settle();
        assert!(lines.is_empty(), "{lines:#?}");
        set("../../../sub");
        let g = guard(&ws);
        // Helper's finding 5: the person's `git restore .` in `sub` would write outside.
        set(outside.to_str().expect("utf-8"));
        let lines = g.settle();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        let config = std::fs::read_to_string(ws.join(".git/modules/sub/config")).expect("c");
        assert!(config.contains("worktree = ../../../sub"), "{config}");
    }

    #[test]
    fn the_fence_denies_what_would_make_a_folder_a_repository_and_a_bare_repositorys_config() {
        let (_d, ws, _) = world();
        let src = ws.join("src");
        std::fs::create_dir_all(src.join("objects")).expect("mkdir");
        std::fs::create_dir_all(src.join("refs")).expect("mkdir");
        git(&ws, &["init", "-q", "--bare", "remote.git"]);
        let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws);
        let g = GitGuard::before(&policy).expect("guard");
        assert!(g.watches(&src.join("HEAD")));
        assert!(g.watches(&ws.join("remote.git/config")));
        assert!(g.watches(&ws.join("remote.git/hooks/pre-receive")));
        for free in [
            "src/config",
            "src/main.rs",
            "src/objects/x",
            "remote.git/description",
            "lib/HEAD",
        ] {
            assert!(!g.watches(&ws.join(free)), "{free}");
        }
        std::fs::write(src.join("HEAD"), "ref: refs/heads/main\n").expect("w");
        std::fs::remove_dir(src.join("objects")).expect("rmdir");
        let g = GitGuard::before(&policy).expect("guard");
        assert!(
            g.watches(&src.join("objects/ab/cd")),
            "the objects folder would complete it"
        );
        assert!(g.watches(&src.join("commondir")));
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
            b"[core]\n\tbare = false \\\r\n\tfsmonitor = x\r\n",
            b"[core.x]\n\teditor = x\n",
        ] {
            assert!(!config_is_safe(bad), "{}", String::from_utf8_lossy(bad));
        }
    }
}
