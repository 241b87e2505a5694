//! The git surface guard: the check after every call that finds and reverts what a confined
//! command changed of git's code-execution surface that the profile could not prevent.
//!
//! bwrap and the Landlock launcher protect paths by mounts, and a path that does not exist when
//! the call starts has nothing to mount on; every dialect protects fixed paths, while git also
//! reads config and runs code from places found only per repository (nested repositories,
//! linked worktrees under `.git/worktrees`, submodules under `.git/modules`, folders made into
//! bare repositories, the folder `core.hooksPath` names, files a config includes). The guard
//! snapshots that surface just before the call ([`GitGuard::before`]) and, after the call has ended and every process of it is gone,
//! compares and reverts ([`sandbox::CallGuard::settle`]); each reverted path is a denial carrying
//! the marker.
//!
//! What it watches, under the workspace and every extra writable root (never following a
//! symlink): every path of [`sandbox::is_git_surface`]'s shape; the surface of every folder
//! holding a `HEAD` inside a `.git` and of every folder git's discovery takes for a bare
//! repository ([`sandbox::GitDirShape`]); the policy's protected paths at every root and every
//! worktree top (a folder holding a `.git`); the `core.hooksPath` folders (at every worktree
//! the config serves) and `include.path` files the configs name; and new symlinks. Configs are
//! read by git's own rules (the `config` module). What may change and stays (ordinary git): a config
//! holding only keys that name no program ([`SAFE_KEYS`]) and judged values that hold (a
//! `core.worktree` naming the repository's own worktree, local remote URLs into a root or out of
//! every writable place), a gitfile or `commondir` that leads to a git directory the guard
//! judges (one that was there, or where `git worktree add` and `git submodule add` make one),
//! `hooks/*.sample`, bare repositories of `git init --bare` and `git clone --bare`. A folder the
//! call made into a bare repository with config or code of its own loses what made it one (a
//! new `HEAD` or `commondir`, or `objects` or `refs` added beside an old `HEAD`); a new link into
//! `/tmp` or `$TMPDIR` goes; a folder made unlistable is made listable to be judged.
//!
//! The revert works through descriptors opened beneath the root refusing every symlink
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `unlinkat`), so a path swapped for a
//! symlink can never lead it outside; it relies on no process of the call surviving it (one
//! that did could plant again after the revert).
//!
//! The walk that takes a snapshot is the `snapshot` module; what the settle keeps, reverts and
//! restores is the `judge` module; where git's files and paths lead is the `paths` module.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use sandbox::{ConfinedMode, GitDirShape, ProviderPolicy};

mod config;
mod judge;
mod paths;
mod revert;
mod snapshot;
#[cfg(test)]
mod tests;

pub use config::SAFE_KEYS;
pub(crate) use config::config_is_safe;
use snapshot::{Scan, beneath_is_real, record_tree, shape_of};

/// What one watched path was.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    File {
        bytes: Option<Vec<u8>>,
        mode: u32,
        size: u64,
        mtime: (i64, i64),
        /// Its hard links: a file of git's surface with another name can be changed through
        /// that name by a later call elsewhere (one in `/tmp`, say), where no guard of this
        /// workspace looks.
        links: u64,
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
    /// Folders holding a `.git` (a directory or a gitfile): the tops of worktrees, where the
    /// policy's protected paths apply as at a root (a nested repository's or a linked
    /// worktree's `.pre-commit-config.yaml` is that worktree's hook).
    tops: Vec<PathBuf>,
    /// Symlinks outside git directories, with what they hold: a new one into a writable place
    /// the guard does not watch (`/tmp`) would lead the person's git to a repository there.
    links: BTreeMap<PathBuf, PathBuf>,
    /// Folders that could not be listed (the after-call scan first tries to make them listable):
    /// what they hold is unknown, so the call is a denial.
    blind: Vec<PathBuf>,
    /// The `.git` entries at the top of the writable places outside the roots (`/tmp/.git`,
    /// `$TMPDIR/.git`) that exist: git in any folder below one that is no repository of its
    /// own (a build directory, a tool's checkout) takes it for its repository.
    temp_repos: Vec<PathBuf>,
}

/// The guard of one call (see the module docs).
#[derive(Debug)]
pub struct GitGuard {
    mode: ConfinedMode,
    /// The canonical roots the surface lies under (workspace, extra roots).
    anchors: Vec<PathBuf>,
    /// The protected paths of the policy, absolute.
    protected: Vec<PathBuf>,
    /// The protected paths of the policy, relative: they apply at every worktree top too.
    patterns: Vec<PathBuf>,
    /// Folders named by `core.hooksPath` and files named by `include.path` before the call.
    named: Vec<PathBuf>,
    /// The writable roots outside every anchor (`/tmp`, `$TMPDIR`): the payload fills them, the
    /// guard does not watch them.
    unwatched: Vec<PathBuf>,
    /// The protected names that apply in every folder, not only at a top
    /// ([`sandbox::PROTECTED_IN_EVERY_FOLDER`], where the policy protects them).
    everywhere: Vec<OsString>,
    /// The surface before the call, shared with every guard of a call in flight over the same
    /// roots ([`IN_FLIGHT`]).
    before: Arc<Surface>,
}

/// What the guards of calls in flight over one set of roots (and protected paths) judge against:
/// the surface as it was when the first of them started, when no call of the set was running,
/// so what one call plants cannot become part of a concurrent call's "before" (whose settle
/// would then put back what the first call's settle removed), and how many guards hold it.
struct InFlight {
    guards: usize,
    before: Arc<Surface>,
    named: Vec<PathBuf>,
}

/// A set of roots and the protected paths relative to them: what one snapshot covers.
type FlightKey = (Vec<PathBuf>, Vec<PathBuf>);

/// The [`InFlight`] state of each set of roots and protected paths with a guard alive.
static IN_FLIGHT: Mutex<BTreeMap<FlightKey, InFlight>> = Mutex::new(BTreeMap::new());

impl Drop for GitGuard {
    /// The guard's call is over (settled, or its launch never happened): the shared snapshot
    /// goes with the last guard that holds it.
    fn drop(&mut self) {
        let mut flights = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        let key = (self.anchors.clone(), self.patterns.clone());
        if let Some(flight) = flights.get_mut(&key) {
            flight.guards = flight.guards.saturating_sub(1);
            if flight.guards == 0 {
                flights.remove(&key);
            }
        }
    }
}

impl GitGuard {
    /// Snapshots the surface of `policy` now. `None` under `read-only` (nothing in a root is
    /// writable) and for a deployment that protects nothing.
    pub fn before(policy: &ProviderPolicy) -> Option<GitGuard> {
        if policy.mode == ConfinedMode::ReadOnly || policy.roots.protected_paths.is_empty() {
            return None;
        }
        let mut anchors = Vec::new();
        for root in std::iter::once(&policy.roots.workspace_root)
            .chain(policy.roots.extra_roots.iter().map(|r| &r.path))
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
                    .roots
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
        let patterns: Vec<PathBuf> = policy
            .roots
            .protected_paths
            .iter()
            .map(|p| p.as_path().to_path_buf())
            .collect();
        let everywhere = sandbox::PROTECTED_IN_EVERY_FOLDER
            .iter()
            .filter(|name| patterns.iter().any(|p| p.as_os_str() == **name))
            .map(OsString::from)
            .collect();
        let mut guard = GitGuard {
            everywhere,
            mode: policy.mode,
            anchors,
            protected,
            patterns,
            named: Vec::new(),
            unwatched,
            before: Arc::new(Surface::default()),
        };
        let key = (guard.anchors.clone(), guard.patterns.clone());
        // A call already in flight over these roots: its snapshot is the one to judge against
        // (the scan is skipped). Otherwise scan, outside the lock; a guard that registered
        // meanwhile wins and its snapshot is taken instead.
        let shared = |flights: &mut BTreeMap<_, InFlight>, guard: &mut GitGuard| {
            flights.get_mut(&key).map(|flight| {
                flight.guards += 1;
                guard.before = Arc::clone(&flight.before);
                guard.named = flight.named.clone();
            })
        };
        if shared(
            &mut IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner()),
            &mut guard,
        )
        .is_some()
        {
            return Some(guard);
        }
        let mut before = guard.scan(Scan::Before);
        let named = guard.named_by_configs(&before);
        for n in &named {
            if beneath_is_real(guard.anchor_of(n), n) {
                record_tree(n, &mut before);
            }
        }
        let mut flights = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        if shared(&mut flights, &mut guard).is_none() {
            guard.before = Arc::new(before);
            guard.named = named.clone();
            flights.insert(
                key,
                InFlight {
                    guards: 1,
                    before: Arc::clone(&guard.before),
                    named,
                },
            );
        }
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
            || self
                .protected_at(&self.before.tops)
                .any(|p| path.starts_with(p))
        {
            return true;
        }
        // A file tools read from every folder up the tree, in any folder of a root.
        if self.anchor_of(path).is_some()
            && path
                .file_name()
                .is_some_and(|n| self.everywhere.iter().any(|e| e == n))
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

    /// The policy's protected paths at each of `tops` that is not a root itself, but those in
    /// `.git` (a nested repository's git directory is judged as git's surface: its config may
    /// change to another safe one, `git init` makes its hooks folder).
    fn protected_at<'a>(&'a self, tops: &'a [PathBuf]) -> impl Iterator<Item = PathBuf> + 'a {
        let worktree_side = self
            .patterns
            .iter()
            .filter(|p| p.components().next() != Some(Component::Normal(OsStr::new(".git"))));
        tops.iter()
            .filter(|t| !self.anchors.contains(t))
            .flat_map(move |t| worktree_side.clone().map(move |p| t.join(p)))
    }

    fn marker(&self) -> String {
        sandbox::denial_marker(self.mode.into())
    }
}
