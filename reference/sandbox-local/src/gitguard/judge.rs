//! The judgement after the call: which change of the surface ordinary git leaves and which
//! goes, and the settle that reverts (or restores) each one that goes and says so.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use sandbox::{CallGuard, GitDirShape};

use super::config::{ConfigEntry, config_is_safe, parse_config};
use super::paths::{
    Lead, is_local_url, leads_back, lexical_without_links, named_git_dir, resolve_target,
    resolve_without_links, worktree_tops,
};
use super::revert::{remove_beneath, restore};
use super::snapshot::{Scan, is_data_dir};
use super::{Entry, GitGuard, Surface};

impl GitGuard {
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

    /// Folders this call made into git directories (a bare repository's shape) with config or
    /// code of their own: what made them one goes (their `HEAD` or `commondir`, or the
    /// `objects` or `refs` added beside a `HEAD` that was there), so git no longer takes them
    /// for a repository, and nothing else of them is touched (a `config` there may be a file
    /// of the project's that the folder held before).
    ///
    /// The folders unmade are returned; the line of each removal is pushed onto `lines`.
    fn unmake(
        &self,
        after: &Surface,
        line: &impl Fn(Result<(), String>, &str, &str, &Path) -> String,
        lines: &mut Vec<String>,
    ) -> Vec<PathBuf> {
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
        unmade
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
        // Folders this call made into git directories with config or code of their own lose
        // what made them one.
        let unmade = self.unmake(&after, &line, &mut lines);
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

/// Whether `path` is config or code of the git directory `dir` itself (not of a repository
/// nested in its folders).
pub(super) fn own_surface(dir: &Path, path: &Path) -> bool {
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
