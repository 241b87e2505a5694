//! What the emulator lets a call create or write: git's code surface and the protected paths are
//! refused while the call runs, so a person's `git status` during the call never runs what the
//! payload planted; a new git directory is made private to the sandbox (staged) and judged after
//! the call.
//!
//! The rules are judged on the directory a name is created or written in (a descriptor) and the
//! name, after the emulator resolved the path as the kernel would for the payload:
//!
//! Refused calls fail with `EROFS`.
//!
//! - Inside a staged git directory (a mount the launcher made private to the sandbox) anything
//!   goes: the host sees an empty directory until the caller judges and merges it after the call.
//! - A new `.git` (a directory, or a file: a gitfile) is staged; anything else named `.git` (a
//!   write to an existing gitfile, a symlink, a hard link or a rename onto that name) is refused.
//! - `HEAD` may be created or written only in a git directory (a `.git`, or a folder that holds a
//!   `HEAD` already, never its `logs`) or its `logs`: no folder becomes a git
//!   directory the person's git would take for a repository (a bare one, a gitfile's target).
//!   A git directory's `logs` is kept to reflogs: nothing of the surface below is made there.
//! - No git directory is moved (a folder holding a `HEAD` or a `commondir`: one the payload made
//!   where no rule looked, config first), and no folder is moved into a git directory or its
//!   `worktrees` or `modules` (where a gitfile of the workspace already points).
//! - In a git directory: `config`, `config.worktree`, `commondir`, `hooks`, `remotes` and
//!   `branches` are never created or written, nor is anything in its `hooks`, `remotes` and
//!   `branches`, nor `info/attributes`; a new folder in its `worktrees` or `modules` (what `git
//!   worktree add` and `git submodule update` make) is staged like a new `.git`; nothing else (a
//!   symlink, a file, a rename) is made there.
//! - The policy's protected paths (relative to each anchor root, and to every folder holding a
//!   `.git` under it) and the names protected in every folder are never created or written, and
//!   no folder is renamed into a place where it would put one there.
//! - A hard link to any of the above is refused (the file could then be written by its new name).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::AccessFlags;

use super::resolve::{fd_path, mnt_id};

/// What a call does with a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `mkdir`.
    CreateDir,
    /// `open` with `O_CREAT` of a name that does not exist.
    CreateFile,
    /// `symlink`, `mknod`, or the new name of a `link`.
    CreateOther,
    /// `open` for writing or truncating, or `truncate`, of a name that exists.
    WriteExisting,
    /// The new name of a `rename` (or either name of an exchange); `dir` when what moves there
    /// is a directory.
    RenameTarget {
        /// What moves there is a directory.
        dir: bool,
    },
}

/// The answer for one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Carry the call out.
    Allow,
    /// Refuse it (`EROFS`, as a protected path bound read-only refuses a write).
    Deny,
    /// Create the directory, then make it private to the sandbox (a staged git directory).
    StageDir,
    /// Create the file, then make it private to the sandbox (a staged gitfile).
    StageFile,
}

/// Names of a git directory's own surface: never created or written in one.
const GIT_DIR_SURFACE: [&str; 6] = [
    "config",
    "config.worktree",
    "commondir",
    "hooks",
    "remotes",
    "branches",
];

/// Folders of a git directory whose every entry is surface.
const GIT_DIR_SURFACE_FOLDERS: [&str; 3] = ["hooks", "remotes", "branches"];

/// The rules of one launch.
#[derive(Debug, Default)]
pub struct Rules {
    /// The writable roots the protected paths are relative to (the workspace and extra roots).
    pub anchors: Vec<PathBuf>,
    /// The protected paths, relative to an anchor or a worktree top.
    pub patterns: Vec<PathBuf>,
    /// Names protected in every folder under an anchor.
    pub everywhere: Vec<OsString>,
    /// Whether a new git directory can be staged (the launcher can mount); when not, it is
    /// refused.
    pub can_stage: bool,
    /// Truncating by path is not governed for the payload (its Landlock ABI is capped below 3):
    /// the emulator then truncates as the payload would, so it governs no more than the launch
    /// reports.
    pub truncate_ungoverned: bool,
    /// The last component of every pattern and every name of `everywhere`: a name outside it
    /// needs no path lookup.
    last_names: HashSet<OsString>,
    /// Every component of every pattern: a directory renamed to one of these may carry a
    /// protected path into place.
    any_names: HashSet<OsString>,
}

impl Rules {
    /// The rules for these anchors, protected paths and names.
    pub fn new(
        anchors: Vec<PathBuf>,
        patterns: Vec<PathBuf>,
        everywhere: Vec<OsString>,
        can_stage: bool,
    ) -> Rules {
        let mut last_names: HashSet<OsString> = everywhere.iter().cloned().collect();
        let mut any_names = HashSet::new();
        for p in &patterns {
            if let Some(last) = p.file_name() {
                last_names.insert(last.to_os_string());
            }
            for c in p.iter() {
                any_names.insert(c.to_os_string());
            }
        }
        Rules {
            anchors,
            patterns,
            everywhere,
            can_stage,
            truncate_ungoverned: false,
            last_names,
            any_names,
        }
    }

    /// The verdict for `op` on `name` in `parent`; `staged` holds the mount ids of the staged
    /// git directories; `moved` is the directory a rename moves there, when it is one.
    pub fn judge(
        &self,
        staged: &HashSet<u64>,
        parent: &OwnedFd,
        name: &OsStr,
        op: Op,
        moved: Option<(&OwnedFd, &OsStr)>,
    ) -> Verdict {
        if mnt_id(parent).is_some_and(|id| staged.contains(&id)) {
            return Verdict::Allow;
        }
        if name == ".git" {
            let stage = |v| if self.can_stage { v } else { Verdict::Deny };
            return match op {
                Op::CreateDir => stage(Verdict::StageDir),
                Op::CreateFile => stage(Verdict::StageFile),
                // A gitfile staged in this call is the sandbox's own until the merge judges it:
                // `git submodule add` writes it twice.
                Op::WriteExisting if is_staged_entry(staged, parent, name) => Verdict::Allow,
                _ => Verdict::Deny,
            };
        }
        if let Op::RenameTarget { dir: true } = op
            && (moved.is_some_and(|(from, n)| is_git_dir_named(from, n))
                || is_git_dir(parent)
                || in_modules_or_worktrees(parent))
        {
            // A git directory moved anywhere, or any folder moved into a git directory or its
            // `worktrees` or `modules`, is a git directory the payload made where no rule looked
            // (its config written before it held a HEAD): refused.
            return Verdict::Deny;
        }
        if let Some(v) = git_verdict(parent, name, op) {
            return match v {
                Verdict::StageDir if !self.can_stage => Verdict::Deny,
                v => v,
            };
        }
        if self.protected(parent, name, op, moved) {
            return Verdict::Deny;
        }
        Verdict::Allow
    }

    /// Whether `name` in `parent` is a protected path, or a rename of a directory there would
    /// bring one into place.
    fn protected(
        &self,
        parent: &OwnedFd,
        name: &OsStr,
        op: Op,
        moved: Option<(&OwnedFd, &OsStr)>,
    ) -> bool {
        let dir_rename = matches!(op, Op::RenameTarget { dir: true });
        if !(self.last_names.contains(name) || dir_rename && self.any_names.contains(name)) {
            return false;
        }
        let Some(dir) = fd_path(parent) else {
            // Where a protected name is made cannot be told (a path past PATH_MAX): refused.
            return true;
        };
        let Some(anchor) = self.anchors.iter().find(|a| dir.starts_with(a)) else {
            return false;
        };
        if self.everywhere.iter().any(|n| n == name) {
            return true;
        }
        // Every place a relative protected path applies: the anchor, and every folder between
        // it and the parent that holds a `.git` (a worktree top).
        let mut tops = vec![anchor.clone()];
        let mut at = dir.as_path();
        while at.starts_with(anchor) && at != anchor.as_path() {
            if at.join(".git").symlink_metadata().is_ok() {
                tops.push(at.to_path_buf());
            }
            match at.parent() {
                Some(p) => at = p,
                None => break,
            }
        }
        if parent_has_git(parent) {
            tops.push(dir.clone());
        }
        for top in tops {
            let Ok(rel) = dir.strip_prefix(&top) else {
                continue;
            };
            let rel = rel.join(name);
            for pattern in &self.patterns {
                if *pattern == rel {
                    return true;
                }
                if dir_rename
                    && let (Ok(rest), Some((from, moved_name))) =
                        (pattern.strip_prefix(&rel), moved)
                    && !rest.as_os_str().is_empty()
                    && carries(from, moved_name, rest)
                {
                    return true;
                }
            }
        }
        false
    }
}

/// Whether `name` in `parent` is itself a staged entry (a gitfile bound private to the sandbox).
fn is_staged_entry(staged: &HashSet<u64>, parent: &OwnedFd, name: &OsStr) -> bool {
    nix::fcntl::openat(
        parent,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()
    .and_then(|fd| mnt_id(&fd))
    .is_some_and(|id| staged.contains(&id))
}

/// Whether the directory `name` in `from` holds `rest` (the remainder of a protected path).
fn carries(from: &OwnedFd, name: &OsStr, rest: &Path) -> bool {
    let Ok(dir) = nix::fcntl::openat(
        from,
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    nix::sys::stat::fstatat(&dir, rest, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
}

fn parent_has_git(parent: &OwnedFd) -> bool {
    nix::unistd::faccessat(
        parent,
        ".git",
        AccessFlags::F_OK,
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .is_ok()
}

/// The directory above `dir`, if it can be opened.
fn up(dir: &OwnedFd) -> Option<OwnedFd> {
    nix::fcntl::openat(
        dir,
        "..",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// The last component of `dir`'s path.
fn base_name(dir: &OwnedFd) -> Option<OsString> {
    fd_path(dir).and_then(|p| p.file_name().map(OsStr::to_os_string))
}

/// Whether `dir` is a git directory: a `.git`, or a folder holding a `HEAD` (which nothing but a
/// git directory may gain while the emulator runs) that is not a git directory's reflogs
/// ([`is_reflogs`]: `logs/HEAD` is the reflog of `HEAD`).
pub fn is_git_dir(dir: &OwnedFd) -> bool {
    git_dir_within(dir, MAX_LOGS_DEPTH)
}

/// How many `logs` folders deep [`is_git_dir`] looks for the git directory they are the reflogs
/// of (`.git/logs/logs/...`): past that, a folder named `logs` is taken for reflogs.
const MAX_LOGS_DEPTH: usize = 8;

fn git_dir_within(dir: &OwnedFd, depth: usize) -> bool {
    match base_name(dir) {
        Some(n) if n == ".git" => true,
        Some(n) if n == "logs" && holds(dir, &["HEAD"]) => !reflogs_within(dir, depth),
        _ => holds(dir, &["HEAD"]),
    }
}

/// Whether `dir` is a git directory's `logs` (its reflogs), where `HEAD` is written but none of a
/// git directory's own surface may be: made one with a `config` and symlinked onto a linked
/// worktree's git directory, it ran the payload's `core.fsmonitor` in the person's `git status`.
fn is_reflogs(dir: &OwnedFd) -> bool {
    reflogs_within(dir, MAX_LOGS_DEPTH)
}

fn reflogs_within(dir: &OwnedFd, depth: usize) -> bool {
    if base_name(dir).is_none_or(|n| n != "logs") {
        return false;
    }
    depth == 0 || up(dir).is_some_and(|g| git_dir_within(&g, depth - 1))
}

/// Whether the folder `name` in `from` is, or is being made into, a git directory: a `.git`, or
/// a folder holding a `HEAD` or a `commondir` (a linked worktree's).
fn is_git_dir_named(from: &OwnedFd, name: &OsStr) -> bool {
    if name == ".git" {
        return true;
    }
    nix::fcntl::openat(
        from,
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .is_ok_and(|dir| holds(&dir, &["HEAD", "commondir"]))
}

/// Whether `dir` holds an entry of one of these names.
fn holds(dir: &OwnedFd, names: &[&str]) -> bool {
    names.iter().any(|f| {
        nix::unistd::faccessat(dir, *f, AccessFlags::F_OK, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
    })
}

/// The git rules for `name` in `parent`, when one applies.
fn git_verdict(parent: &OwnedFd, name: &OsStr, op: Op) -> Option<Verdict> {
    // A git directory or its reflogs: where HEAD is written, and where none of a git
    // directory's own surface may be (a folder holding a HEAD counts whatever its name).
    let git_like = |d: &OwnedFd| is_git_dir(d) || is_reflogs(d) || holds(d, &["HEAD"]);
    let parent_is_git = is_git_dir(parent) || is_reflogs(parent);
    let grand_is_git = || up(parent).is_some_and(|g| git_like(&g));
    if name == "HEAD" {
        return Some(if parent_is_git {
            Verdict::Allow
        } else {
            Verdict::Deny
        });
    }
    if GIT_DIR_SURFACE.iter().any(|s| name == *s) && git_like(parent) {
        return Some(Verdict::Deny);
    }
    let in_gits_folders = in_modules_or_worktrees(parent);
    if in_gits_folders && matches!(op, Op::CreateOther | Op::RenameTarget { .. }) {
        // Git makes folders there, never links or files: a symlink in `worktrees` or
        // `modules` (`wt -> ../logs`, `sub -> /elsewhere`) would be a git directory the
        // person's git enters where no rule looked.
        return Some(Verdict::Deny);
    }
    let Some(parent_name) = base_name(parent) else {
        // A folder whose name cannot be told, in a git directory: it may be its `hooks`.
        return grand_is_git().then_some(Verdict::Deny);
    };
    if GIT_DIR_SURFACE_FOLDERS.iter().any(|s| parent_name == *s) && grand_is_git() {
        return Some(Verdict::Deny);
    }
    if parent_name == "info" && name == "attributes" && grand_is_git() {
        return Some(Verdict::Deny);
    }
    if op == Op::CreateDir && in_gits_folders {
        return Some(Verdict::StageDir);
    }
    None
}

/// Whether `dir` is a git directory's `worktrees` or `modules`, or a folder below its `modules`
/// (a submodule's name may have slashes: `modules/a/b`), without passing another git directory.
fn in_modules_or_worktrees(dir: &OwnedFd) -> bool {
    let mut at = match dir.try_clone() {
        Ok(fd) => fd,
        Err(_) => return false,
    };
    for depth in 0..8 {
        let Some(name) = base_name(&at) else {
            return false;
        };
        let Some(above) = up(&at) else {
            return false;
        };
        let above_git = is_git_dir(&above);
        if (name == "modules" || (depth == 0 && name == "worktrees")) && above_git {
            return true;
        }
        if above_git || is_git_dir(&at) {
            return false;
        }
        at = above;
    }
    false
}
