//! Where git's own files lead (gitfiles, `commondir`s, the worktrees a config serves, local
//! URLs), and paths resolved lexically or without following a symlink.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use super::config::ConfigEntry;
use super::snapshot::read_no_follow;

/// Which entry a gitfile or a `commondir` is (what it may lead to differs).
#[derive(Clone, Copy)]
pub(super) enum Lead {
    GitFile,
    CommonDir,
}

/// The git directory a gitfile (`gitdir: <path>`) or a `commondir` names, read as git reads
/// it: trailing `\n` and `\r` taken off the whole file, the text then ending at the first NUL,
/// a gitfile's prefix exactly `gitdir: ` (one space, nothing trimmed); relative to `base`.
pub(super) fn named_git_dir(base: &Path, bytes: &[u8], lead: Lead) -> Option<PathBuf> {
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

/// The tops of the worktrees the config of `git_dir` (its `entries`) serves: the folder holding
/// a `.git` directory, the `core.worktree` it names, each linked worktree (`worktrees/*/gitdir`
/// names its `.git` file) and, for a linked worktree's own git directory, that worktree.
pub(super) fn worktree_tops(git_dir: &Path, entries: &[ConfigEntry]) -> Vec<PathBuf> {
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
pub(super) fn leads_back(worktree: &Path, git_dir: &Path) -> bool {
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
pub(super) fn is_local_url(url: &str) -> bool {
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
pub(super) fn resolve_target(path: &Path) -> Option<PathBuf> {
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

/// `path` (absolute) resolved one component at a time, `..` stepping out of the real directory
/// before it: `None` when a component is a symlink (it could be swapped after the check) or
/// missing.
pub(super) fn resolve_without_links(path: &Path) -> Option<PathBuf> {
    walk_without_links(path, false)
}

/// `path` (absolute) resolved like [`resolve_without_links`] on the part that exists and
/// lexically beyond it: `None` when an existing component is a symlink.
pub(super) fn lexical_without_links(path: &Path) -> Option<PathBuf> {
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

/// `path` with `.` and `..` resolved lexically.
pub(super) fn lexical(path: &Path) -> PathBuf {
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
