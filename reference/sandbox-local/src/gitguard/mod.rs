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

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::fcntl::OFlag;
use sandbox::{CallGuard, ConfinedMode, GitDirShape, ProviderPolicy};

mod config;
mod revert;
#[cfg(test)]
mod tests;

pub use config::SAFE_KEYS;
pub(crate) use config::config_is_safe;
use config::{ConfigEntry, parse_config};
use revert::{remove_beneath, restore};

/// Files larger than this are compared by size and time only and cannot be restored.
const MAX_KEPT: u64 = 16 << 20;

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
        let patterns: Vec<PathBuf> = policy
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

    /// Walks every anchor (never following a symlink) and records the watched paths.
    fn scan(&self, when: Scan) -> Surface {
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

    /// The `core.hooksPath` folders and `include.path` files the configs of `surface` name,
    /// when they lie under an anchor. A relative hooks path is taken from the top of every
    /// worktree the config serves (git runs hooks relative to the one it works in).
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

    /// Whether a changed or new entry at `path` is what ordinary git leaves (it stays).
    /// `watched` holds the git directories whose whole surface this settle judges.
    fn benign(&self, path: &Path, entry: &Entry, judged: &Judged) -> bool {
        let in_named = self
            .named
            .iter()
            .chain(self.protected.iter())
            .any(|n| path.starts_with(n))
            || self.protected_at(judged.tops).any(|p| path.starts_with(p));
        if in_named {
            return false;
        }
        let name = path.file_name().and_then(OsStr::to_str).unwrap_or("");
        let parent = path.parent().unwrap_or(path);
        match entry {
            // A new directory stays (`git init`, `git worktree add`); what it holds is judged
            // entry by entry.
            Entry::Dir { .. } => true,
            // A file of git's surface with a second name (a hard link from or into `/tmp`) is
            // never benign: a later call could change it through that name.
            Entry::File {
                bytes: Some(bytes),
                links: 1,
                ..
            } => match name {
                "config" | "config.worktree" => {
                    let old = match self.before.entries.get(path) {
                        Some(Entry::File {
                            bytes: Some(old), ..
                        }) => parse_config(old).unwrap_or_default(),
                        _ => Vec::new(),
                    };
                    config_is_safe(bytes)
                        && parse_config(bytes)
                            .is_some_and(|entries| self.judged_values_hold(parent, &entries, &old))
                }
                "commondir" => {
                    // `git worktree add`: `.git/worktrees/<name>/commondir` holding `../..`.
                    parent.parent().and_then(Path::file_name) == Some(OsStr::new("worktrees"))
                        && named_git_dir(parent, bytes, Lead::CommonDir)
                            .and_then(|d| resolve_without_links(&d))
                            .is_some_and(|d| {
                                judged.git_dirs.contains(&d) && self.before.git_dirs.contains(&d)
                            })
                }
                // A gitfile (`git worktree add`, `git submodule add`): it must lead to a git
                // directory whose whole surface this settle judges, and one that was there
                // before the call or is where git makes a worktree's or a submodule's.
                ".git" => named_git_dir(parent, bytes, Lead::GitFile)
                    .and_then(|d| resolve_without_links(&d))
                    .is_some_and(|d| {
                        judged.git_dirs.contains(&d)
                            && (self.before.git_dirs.contains(&d)
                                || made_by_git(&d, judged.git_dirs))
                    }),
                _ => name.ends_with(".sample") && parent.file_name() == Some(OsStr::new("hooks")),
            },
            _ => false,
        }
    }

    /// Whether the values of the config in `git_dir` that the guard judges apart hold: every
    /// `core.worktree` names the folder whose `.git` leads back to `git_dir` (so the person's
    /// checkout writes into that worktree and nowhere else: not outside, not into a `.git`, not
    /// over the workspace's protected files), and every remote's or submodule's URL that is a
    /// local path leads into a root or where the payload cannot write (not `/tmp`: a push runs
    /// the hooks of the repository it goes to).
    /// Values the config held before the call (`old`) are taken as the person's.
    fn judged_values_hold(
        &self,
        git_dir: &Path,
        entries: &[ConfigEntry],
        old: &[ConfigEntry],
    ) -> bool {
        entries
            .iter()
            .filter(|e| !old.contains(e))
            .all(|e| match e.key.as_str() {
                "core.worktree" => e.value.as_deref().is_some_and(|v| {
                    lexical_without_links(&git_dir.join(v))
                        .is_some_and(|w| self.anchor_of(&w).is_some() && leads_back(&w, git_dir))
                }),
                "remote.url" | "remote.pushurl" | "submodule.url" => e
                    .value
                    .as_deref()
                    .is_none_or(|url| self.url_is_safe(git_dir, entries, url)),
                // A branch's remote is a remote's name, or a URL or path git pushes to directly.
                "branch.remote" | "branch.pushremote" => e.value.as_deref().is_none_or(|v| {
                    v == "."
                        || !v.contains(['/', ':', '\\', '.', '~'])
                        || self.url_is_safe(git_dir, entries, v)
                }),
                _ => true,
            })
    }

    /// Whether a remote URL, when it names a local repository, names one in a root (its hooks
    /// are judged there) or outside every writable place. A relative one is read from the git
    /// directory and from each of its worktrees, where the person runs git.
    fn url_is_safe(&self, git_dir: &Path, entries: &[ConfigEntry], url: &str) -> bool {
        let path = match url.get(..7).filter(|p| p.eq_ignore_ascii_case("file://")) {
            // git drops a host (`file://localhost/tmp/x` is `/tmp/x`) and decodes `%XX`: a
            // `%` is refused rather than decoded here.
            Some(_) => match url[7..].find('/') {
                Some(at) if !url.contains('%') => &url[7 + at..],
                _ => return false,
            },
            None if is_local_url(url) => url,
            None => return true,
        };
        if path.starts_with('~') {
            return false;
        }
        let mut bases = worktree_tops(git_dir, entries);
        bases.push(git_dir.to_path_buf());
        bases.iter().all(|base| {
            resolve_target(&base.join(path)).is_some_and(|r| {
                self.anchor_of(&r).is_some() || !self.unwatched.iter().any(|u| r.starts_with(u))
            })
        })
    }

    /// Whether the entry `now` at `path` is a change the settle reverts: new and not what
    /// ordinary git leaves, or changed from what it was (a config or gitfile may change to
    /// another benign one; a directory's mode may change).
    fn must_revert(&self, path: &Path, now: &Entry, judged: &Judged) -> bool {
        match self.before.entries.get(path) {
            Some(was) if was == now => false,
            None => !self.benign(path, now, judged),
            Some(Entry::File { .. }) if matches!(now, Entry::File { .. }) => {
                !self.benign(path, now, judged)
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
        match resolve_target(&full) {
            Some(resolved) => {
                // Into a `.git` (its data folders, where the guard does not look, may hold a
                // repository git then finds through the link) or a writable place outside.
                resolved.components().any(|c| c.as_os_str() == ".git")
                    || (self.anchor_of(&resolved).is_none()
                        && self.unwatched.iter().any(|u| resolved.starts_with(u)))
            }
            // A target the kernel would resolve otherwise later is refused: a place to fill.
            None => true,
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
            let all = Judged {
                git_dirs: &after.git_dirs,
                tops: &after.tops,
            };
            let planted = after
                .entries
                .iter()
                .any(|(path, now)| own_surface(dir, path) && self.must_revert(path, now, &all));
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
        let judged = Judged {
            git_dirs: &watched,
            tops: &after.tops,
        };
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
            if removed_dirs.iter().any(|d| path.starts_with(d))
                || unmade.iter().any(|d| own_surface(d, path))
                || !self.must_revert(path, now, &judged)
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
        // A repository the call made at the top of a writable place outside the roots: the
        // person's tools that run git below it (in a build directory in /tmp, say) would run
        // its config and hooks. The guard does not walk those places, but their top is cheap
        // to look at.
        for repo in &after.temp_repos {
            if self.before.temp_repos.contains(repo) {
                continue;
            }
            let Some(place) = repo.parent() else {
                continue;
            };
            let why = "a repository at the top of a writable place outside the roots, which git below it would take for its own";
            lines.push(line(remove_beneath(place, repo), "reverted", why, repo));
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

/// What one settle judges against: the git directories whose whole surface it judges (a
/// gitfile or `commondir` may lead to one of these only) and the worktree tops where the
/// protected paths apply.
struct Judged<'a> {
    git_dirs: &'a [PathBuf],
    tops: &'a [PathBuf],
}

/// The tops of the worktrees the config of `git_dir` (its `entries`) serves: the folder holding
/// a `.git` directory, the `core.worktree` it names, each linked worktree (`worktrees/*/gitdir`
/// names its `.git` file) and, for a linked worktree's own git directory, that worktree.
fn worktree_tops(git_dir: &Path, entries: &[ConfigEntry]) -> Vec<PathBuf> {
    let mut tops = Vec::new();
    if git_dir.file_name() == Some(OsStr::new(".git")) {
        tops.extend(git_dir.parent().map(Path::to_path_buf));
    }
    for e in entries.iter().filter(|e| e.key == "core.worktree") {
        if let Some(v) = &e.value {
            tops.push(lexical(&git_dir.join(v)));
        }
    }
    let gitdir_file = |dir: &Path| {
        let bytes = std::fs::read(dir.join("gitdir")).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let dot_git = PathBuf::from(text.trim_end_matches(['\n', '\r']));
        dot_git.parent().map(|top| lexical(&dir.join(top)))
    };
    tops.extend(gitdir_file(git_dir));
    if let Ok(linked) = std::fs::read_dir(git_dir.join("worktrees")) {
        tops.extend(linked.flatten().filter_map(|w| gitdir_file(&w.path())));
    }
    tops.sort();
    tops.dedup();
    tops
}

/// Whether the `.git` in `worktree` (a directory, or a gitfile read as git reads it) is
/// `git_dir`, without following a symlink.
fn leads_back(worktree: &Path, git_dir: &Path) -> bool {
    let dot_git = worktree.join(".git");
    match std::fs::symlink_metadata(&dot_git) {
        Ok(m) if m.is_dir() => dot_git == git_dir,
        Ok(m) if m.is_file() => read_no_follow(&dot_git)
            .and_then(|bytes| named_git_dir(worktree, &bytes, Lead::GitFile))
            .and_then(|d| resolve_without_links(&d))
            .is_some_and(|d| d == git_dir),
        _ => false,
    }
}

/// Whether git takes `url` for a local path (no `scheme://`, and no `host:` before the first
/// `/`): connect.c's rule.
fn is_local_url(url: &str) -> bool {
    if url.contains("://") {
        return false;
    }
    match (url.find(':'), url.find('/')) {
        (None, _) => true,
        (Some(colon), Some(slash)) => slash < colon,
        (Some(_), None) => false,
    }
}

/// Where the kernel takes `path` (absolute): symlinks followed, what does not exist yet
/// appended as written. `None` when a `..` follows a part that does not exist: the kernel
/// refuses that now and may resolve it through a symlink made later.
fn resolve_target(path: &Path) -> Option<PathBuf> {
    let parts: Vec<Component> = path.components().collect();
    for (i, c) in parts.iter().enumerate() {
        if *c == Component::ParentDir {
            let prefix: PathBuf = parts[..i].iter().collect();
            let real = sandbox::canonical_path(&prefix).ok()?;
            std::fs::symlink_metadata(&real).ok()?;
        }
    }
    sandbox::canonical_path(path).ok()
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

/// Whether `path` is config or code of the git directory `dir` itself (not of a repository
/// nested in its folders).
fn own_surface(dir: &Path, path: &Path) -> bool {
    path.strip_prefix(dir)
        .is_ok_and(|rel| !rel.as_os_str().is_empty() && sandbox::is_git_dir_surface(rel))
}

/// Whether `dir` lies where git itself makes a git directory inside another one: a linked
/// worktree's (`<git dir>/worktrees/<name>`) or a submodule's (`<git dir>/modules/<path>`).
fn made_by_git(dir: &Path, watched: &[PathBuf]) -> bool {
    let worktree = dir
        .parent()
        .filter(|p| p.file_name() == Some(OsStr::new("worktrees")))
        .and_then(Path::parent)
        .is_some_and(|g| watched.iter().any(|w| w == g));
    // A submodule's name may hold `/`, never a repository's data folder on its way.
    worktree
        || dir.ancestors().skip(1).any(|a| {
            a.file_name() == Some(OsStr::new("modules"))
                && a.parent().is_some_and(|g| watched.iter().any(|w| w == g))
                && dir
                    .strip_prefix(a)
                    .is_ok_and(|rel| !rel.components().any(|c| is_data_dir(c.as_os_str())))
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
    walk_without_links(path, false)
}

/// `path` (absolute) resolved like [`resolve_without_links`] on the part that exists and
/// lexically beyond it: `None` when an existing component is a symlink.
fn lexical_without_links(path: &Path) -> Option<PathBuf> {
    walk_without_links(path, true)
}

fn walk_without_links(path: &Path, missing_ok: bool) -> Option<PathBuf> {
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
                        Err(_) if missing_ok => exists = false,
                        Err(_) => return None,
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
            links: meta.nlink(),
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
