//! Protected paths: places inside a writable root that `workspace-write` never writes, because a
//! write there runs code later, outside the sandbox (a repository's hooks and its config, which
//! can name a hooks directory, a pager, an editor or a filter).
//!
//! A protected path is a relative path without `..` (validated when it is made), anchored at the
//! workspace and at every extra writable root. [`protected_plan`] turns the policy into what each
//! dialect needs: the paths the fs fence and Seatbelt deny (existing or not), and for the
//! mount-based backends (bwrap, the Landlock launcher) the existing directories to pin as mount
//! points (so they cannot be renamed or removed) and the existing paths to bind read-only.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::mode::ConfinedMode;
use crate::paths::{canonical_path, is_within};
use crate::policy::ProviderPolicy;
use crate::workspace::RootError;

/// The stable code of a protected-path pattern that is not a plain relative path.
pub const BAD_PROTECTED_PATH: &str = "BAD_PROTECTED_PATH";

/// The default protected paths of a deployment: every file of the workspace's repository that git
/// reads as config or runs as code and ordinary git (`add`, `commit`, `checkout -b`, `stash`,
/// `rebase`) never writes (the hooks; the config, which can name hooks, a pager, an editor, an
/// fsmonitor, aliases and filters; `commondir`, which moves config and hooks to another directory;
/// the per-worktree config; the repository's own attributes), husky's hooks folder (named by
/// `core.hooksPath`), the configs of the hook managers whose installed hooks read them at every
/// `git commit` (pre-commit, lefthook: a hook there is a command the person's commit runs), and
/// the folders and files that make an editor, an agent or the person's shell run code when the
/// project is opened, the agent started or the shell enters the folder (mise runs the hooks and
/// sources the files of a config it trusted once by path; a toolchain file may name a folder
/// whose `cargo` or `node` then runs for every command, the editor's own included). A deployment
/// replaces the list (`protected_paths`); the rest of git's surface (nested repositories, linked
/// worktrees, submodules, folders made into bare repositories, the folder `core.hooksPath`
/// names) is found per call ([`is_git_surface`], [`GitDirShape`]), and the names of
/// [`PROTECTED_IN_EVERY_FOLDER`] in every folder.
pub const DEFAULT_PROTECTED_PATHS: [&str; 42] = [
    ".git/hooks",
    ".git/config",
    ".git/commondir",
    ".git/config.worktree",
    ".git/info/attributes",
    ".husky",
    ".pre-commit-config.yaml",
    ".pre-commit-config.yml",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook",
    ".lefthook-local",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".mcp.json",
    ".claude",
    ".codex",
    ".cursor",
    ".gemini",
    ".agents",
    ".zed",
    ".aider.conf.yml",
    ".continue",
    ".windsurf",
    ".roo",
    ".kiro",
    ".opencode",
    "mise.toml",
    ".mise.toml",
    "mise.local.toml",
    ".mise.local.toml",
    ".mise",
    ".config/mise.toml",
    ".config/mise",
    "rust-toolchain.toml",
    "rust-toolchain",
    ".tool-versions",
];

/// The default protected paths that a tool reads from the folder it runs in and from every
/// folder above it, not only from a project's top: `cargo` in `member/` takes
/// `member/rust-toolchain.toml` (whose `path` names the folder its `cargo` then runs from), mise
/// and asdf take `member/.tool-versions` or `member/mise.toml`. Where a deployment protects one
/// of these, it is protected in every folder of a root (the check after the call finds and
/// reverts it there).
pub const PROTECTED_IN_EVERY_FOLDER: [&str; 7] = [
    "rust-toolchain.toml",
    "rust-toolchain",
    ".tool-versions",
    "mise.toml",
    ".mise.toml",
    "mise.local.toml",
    ".mise.local.toml",
];

/// True when `relative` (a path relative to a writable root) has the shape of a file git reads as
/// config or runs as code in some repository inside the root: a `.git` entry itself anywhere (a
/// nested repository's git directory, or a gitfile naming one), and, beneath any `.git`, the
/// config, `config.worktree`, `commondir`, `info/attributes`, hooks, `remotes` and `branches` of
/// the repository, of
/// each linked worktree (`worktrees/<name>/...`) and of each submodule (`modules/<path>/...`,
/// nested to any depth). What git writes in ordinary use (objects, refs, the index, logs,
/// `HEAD`) has no such shape.
pub fn is_git_surface(relative: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    parts
        .iter()
        .enumerate()
        .any(|(i, p)| *p == ".git" && git_dir_surface(&parts[i + 1..]))
}

/// True when `relative` (a path relative to a git directory: a `.git`, or a directory git's
/// discovery takes for a bare repository, see [`GitDirShape`]) is config or code of that
/// repository, of one of its linked worktrees or of one of its submodules; empty is the git
/// directory itself.
pub fn is_git_dir_surface(relative: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    git_dir_surface(&parts)
}

/// Which of the entries that make a directory a git directory to git's discovery a directory
/// holds. Git takes any directory as a (bare) repository when it holds `HEAD` and either both
/// `objects` and `refs` or a `commondir`, whatever the directory is called: a person running
/// `git log` in such a folder of the workspace runs the pager, aliases and hooks its `config`
/// names, so a folder made into one is as much git's surface as a `.git`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GitDirShape {
    /// An entry named `HEAD`.
    pub head: bool,
    /// An entry named `objects`.
    pub objects: bool,
    /// An entry named `refs`.
    pub refs: bool,
    /// An entry named `commondir`.
    pub commondir: bool,
}

impl GitDirShape {
    /// The names that make the shape, in the order of the fields.
    pub const NAMES: [&'static str; 4] = ["HEAD", "objects", "refs", "commondir"];

    /// The shape of a directory holding entries with these names.
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a std::ffi::OsStr>) -> GitDirShape {
        let mut shape = GitDirShape::default();
        for name in names {
            shape.add(name);
        }
        shape
    }

    /// Adds one entry name (names that make no part of the shape change nothing).
    pub fn add(&mut self, name: &std::ffi::OsStr) {
        match name.to_str() {
            Some("HEAD") => self.head = true,
            Some("objects") => self.objects = true,
            Some("refs") => self.refs = true,
            Some("commondir") => self.commondir = true,
            _ => {}
        }
    }

    /// Whether the name is one of [`GitDirShape::NAMES`].
    pub fn is_marker(name: &std::ffi::OsStr) -> bool {
        GitDirShape::NAMES.iter().any(|n| name == *n)
    }

    /// Whether git's discovery takes the directory for a git directory.
    pub fn is_git_dir(self) -> bool {
        self.head && ((self.objects && self.refs) || self.commondir)
    }

    /// Whether the directory holds a name only a git directory usually has (`HEAD` or
    /// `commondir`): the directories whose shape is worth remembering.
    pub fn is_notable(self) -> bool {
        self.head || self.commondir
    }

    /// The marker names present here and absent in `before`.
    pub fn added_since(self, before: GitDirShape) -> Vec<&'static str> {
        let now = [self.head, self.objects, self.refs, self.commondir];
        let was = [before.head, before.objects, before.refs, before.commondir];
        GitDirShape::NAMES
            .iter()
            .zip(now.iter().zip(was.iter()))
            .filter(|(_, (n, w))| **n && !**w)
            .map(|(name, _)| *name)
            .collect()
    }
}

/// Whether `rest`, a path inside a git directory, is config or code there (empty: the git
/// directory or gitfile itself).
fn git_dir_surface(rest: &[&std::ffi::OsStr]) -> bool {
    let Some(first) = rest.first().and_then(|f| f.to_str()) else {
        return rest.is_empty();
    };
    match first {
        // `remotes` and `branches`: the old ways to name a remote, whose repository's hooks
        // run at the person's push when it is a local one.
        "config" | "config.worktree" | "commondir" | "hooks" | "remotes" | "branches" => true,
        "info" => rest.get(1).is_some_and(|n| *n == "attributes"),
        // worktrees/<name>/... is a git directory of its own for these files.
        "worktrees" => rest.len() >= 3 && git_dir_surface(&rest[2..]),
        // modules/<path...>/...: any level may be a submodule's git directory.
        "modules" => (2..rest.len()).any(|i| git_dir_surface(&rest[i..])),
        _ => false,
    }
}

/// Why a protected-path pattern was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{BAD_PROTECTED_PATH}: the protected path {pattern:?} {why}")]
pub struct ProtectedPathError {
    /// The pattern as given.
    pub pattern: String,
    /// Why it is refused.
    pub why: &'static str,
}

/// A path inside every writable root that `workspace-write` never writes: relative, non-empty,
/// no `..`, no NUL (so it can never name anything outside its root).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "String", into = "String")]
pub struct ProtectedPath(PathBuf);

impl ProtectedPath {
    /// Validates `pattern`: refused when empty, absolute, holding `..` or a NUL byte.
    pub fn new(pattern: &str) -> Result<ProtectedPath, ProtectedPathError> {
        let refuse = |why| {
            Err(ProtectedPathError {
                pattern: pattern.to_owned(),
                why,
            })
        };
        if pattern.contains('\0') {
            return refuse("holds a NUL byte");
        }
        let path = Path::new(pattern);
        if path.is_absolute() {
            return refuse("is absolute (it must be relative to each writable root)");
        }
        let mut clean = PathBuf::new();
        for c in path.components() {
            match c {
                Component::Normal(n) => clean.push(n),
                Component::CurDir => {}
                Component::ParentDir => return refuse("escapes its root with `..`"),
                Component::RootDir | Component::Prefix(_) => return refuse("is absolute"),
            }
        }
        if clean.as_os_str().is_empty() {
            return refuse("names the root itself (it must name something inside it)");
        }
        Ok(ProtectedPath(clean))
    }

    /// The default set ([`DEFAULT_PROTECTED_PATHS`]).
    pub fn defaults() -> Vec<ProtectedPath> {
        DEFAULT_PROTECTED_PATHS
            .iter()
            .map(|p| ProtectedPath(PathBuf::from(p)))
            .collect()
    }

    /// The relative path.
    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

impl TryFrom<String> for ProtectedPath {
    type Error = ProtectedPathError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ProtectedPath::new(&s)
    }
}

impl From<ProtectedPath> for String {
    fn from(p: ProtectedPath) -> String {
        p.0.to_string_lossy().into_owned()
    }
}

impl std::fmt::Display for ProtectedPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.display())
    }
}

/// What every dialect needs to keep the protected paths of one call unwritten.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProtectedPlan {
    /// Every protected path under a writable root, absolute (lexically under its canonical root,
    /// plus its canonical spelling when a symlink leads elsewhere inside the writable set),
    /// existing or not: what the fs fence and the Seatbelt profile deny.
    pub paths: Vec<PathBuf>,
    /// Every path strictly between a root and a protected path (`.git`), existing or not: what a
    /// path-based dialect (Seatbelt) keeps from being created, removed or renamed, so a payload
    /// cannot rename the repository away, edit its config there and rename it back.
    pub ancestors: Vec<PathBuf>,
    /// Existing directories strictly between a root and a protected path (`.git`), shallowest
    /// first: a mount-based backend makes each a mount point (a writable bind onto itself), so
    /// the payload cannot rename or remove it and plant a fresh one (`EBUSY`).
    pub pinned: Vec<PathBuf>,
    /// Existing protected paths, and files standing where a directory on the way to one should
    /// be (a `.git` file naming the real git directory): bound read-only onto themselves.
    pub read_only: Vec<PathBuf>,
    /// Protected paths no mount can cover (they do not exist yet, or a symlink is on the way): a
    /// mount-based backend reports the protected class `partial` and names them.
    pub uncovered: Vec<PathBuf>,
}

impl ProtectedPlan {
    /// True when `canonical` (a canonicalized target) is a protected path or lies beneath one.
    pub fn protects(&self, canonical: &Path) -> bool {
        self.paths.iter().any(|p| canonical.starts_with(p))
    }
}

/// The protected paths of `policy` anchored at its workspace and extra writable roots (`roots`
/// is [`crate::writable_roots`]'s answer for the same policy). Empty under `read-only`, where
/// nothing is writable anyway. Inspects the disk (`lstat`) but changes nothing.
pub fn protected_plan(
    policy: &ProviderPolicy,
    roots: &[PathBuf],
) -> Result<ProtectedPlan, RootError> {
    let mut plan = ProtectedPlan::default();
    if policy.mode == ConfinedMode::ReadOnly || policy.roots.protected_paths.is_empty() {
        return Ok(plan);
    }
    let mut anchors = vec![canonical_path(&policy.roots.workspace_root)?];
    for root in &policy.roots.extra_roots {
        let canonical = canonical_path(&root.path)?;
        if !anchors.contains(&canonical) {
            anchors.push(canonical);
        }
    }
    // Each list keeps its first-seen order; membership is looked up in a set (a plan has a
    // hundred paths or more, and one is made for every call and every write the tools fence).
    let mut seen: [HashSet<PathBuf>; 5] = Default::default();
    let push = |list: &mut Vec<PathBuf>, seen: &mut HashSet<PathBuf>, p: PathBuf| {
        if seen.insert(p.clone()) {
            list.push(p);
        }
    };
    let [
        paths_seen,
        ancestors_seen,
        pinned_seen,
        read_only_seen,
        uncovered_seen,
    ] = &mut seen;
    for anchor in &anchors {
        for pattern in &policy.roots.protected_paths {
            let lexical = anchor.join(pattern.as_path());
            push(&mut plan.paths, paths_seen, lexical.clone());
            let parts: Vec<_> = pattern.as_path().components().collect();
            let mut ancestor = anchor.clone();
            for part in &parts[..parts.len().saturating_sub(1)] {
                ancestor.push(part);
                push(&mut plan.ancestors, ancestors_seen, ancestor.clone());
            }
            // The pattern's components, from the (canonical) anchor down. Only a symlink met on
            // the way, or an error other than "not there", can make the canonical spelling
            // differ from the lexical one: everything below a missing entry or a file is
            // missing too, and a pattern holds no `..`.
            let mut at = anchor.clone();
            let mut covered = true;
            let mut resolve = false;
            for (i, part) in parts.iter().enumerate() {
                at.push(part);
                let last = i + 1 == parts.len();
                match std::fs::symlink_metadata(&at) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        covered = false;
                        resolve = true;
                        break;
                    }
                    Ok(_) if last => push(&mut plan.read_only, read_only_seen, at.clone()),
                    Ok(meta) if meta.is_dir() => push(&mut plan.pinned, pinned_seen, at.clone()),
                    Ok(_) => {
                        // A file where a directory should be (a `.git` file naming the git
                        // directory): nothing lies beneath it here; keep the pointer itself.
                        push(&mut plan.read_only, read_only_seen, at.clone());
                        break;
                    }
                    Err(e) => {
                        covered = false;
                        resolve = !matches!(
                            e.kind(),
                            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                        );
                        break;
                    }
                }
            }
            if resolve {
                let canonical = canonical_path(&lexical)?;
                if canonical != lexical && roots.iter().any(|r| is_within(&canonical, r)) {
                    push(&mut plan.paths, paths_seen, canonical);
                }
            }
            if !covered {
                push(&mut plan.uncovered, uncovered_seen, lexical);
            }
        }
    }
    plan.pinned.sort_by_key(|p| p.components().count());
    plan.pinned.retain(|p| !read_only_seen.contains(p));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_must_be_plain_relative_paths() {
        for bad in ["", ".", "/etc/passwd", "../x", ".git/../../x", "a\0b", "./"] {
            let err = ProtectedPath::new(bad).expect_err(bad);
            assert!(err.to_string().starts_with(BAD_PROTECTED_PATH), "{err}");
        }
        assert_eq!(
            ProtectedPath::new("./.git//hooks/")
                .expect("ok")
                .as_path()
                .to_str(),
            Some(".git/hooks")
        );
        let parsed: Result<ProtectedPath, _> = serde_json::from_str("\"../x\"");
        assert!(parsed.is_err());
    }

    #[test]
    fn git_surface_has_the_shape_of_config_and_code_in_any_repository() {
        for yes in [
            ".git",
            "src/.git",
            ".git/config",
            ".git/commondir",
            ".git/config.worktree",
            ".git/info/attributes",
            ".git/hooks",
            ".git/hooks/pre-commit",
            ".git/worktrees/wt/commondir",
            ".git/worktrees/wt/config.worktree",
            ".git/worktrees/wt/hooks/x",
            ".git/modules/sub/config",
            ".git/modules/lib/deep/hooks/pre-commit",
            ".git/modules/a/modules/b/config",
            "vendor/x/.git/config",
            ".git/remotes/origin",
            ".git/branches/x",
        ] {
            assert!(is_git_surface(Path::new(yes)), "{yes}");
        }
        for no in [
            ".git/index",
            ".git/HEAD",
            ".git/objects/ab/cdef",
            ".git/refs/heads/main",
            ".git/info/exclude",
            ".git/worktrees/wt/HEAD",
            ".git/worktrees/wt/gitdir",
            ".git/worktrees/commondir",
            ".git/modules/sub/index",
            ".git/modules/config",
            "src/config",
            ".gitattributes",
            "hooks/pre-commit",
        ] {
            assert!(!is_git_surface(Path::new(no)), "{no}");
        }
    }

    #[test]
    fn a_git_directorys_own_surface_is_the_same_shape_without_the_dot_git() {
        for yes in [
            "",
            "config",
            "hooks/pre-commit",
            "commondir",
            "info/attributes",
            "worktrees/wt/config.worktree",
            "modules/sub/hooks/x",
        ] {
            assert!(is_git_dir_surface(Path::new(yes)), "{yes:?}");
        }
        for no in [
            "HEAD",
            "objects/ab/cd",
            "refs/heads/main",
            "description",
            "info/exclude",
            "worktrees/commondir",
        ] {
            assert!(!is_git_dir_surface(Path::new(no)), "{no}");
        }
    }

    #[test]
    fn a_folder_is_a_git_directory_with_head_and_objects_and_refs_or_a_commondir() {
        let shape =
            |names: &[&str]| GitDirShape::of_names(names.iter().map(|n| std::ffi::OsStr::new(*n)));
        assert!(shape(&["HEAD", "objects", "refs", "config"]).is_git_dir());
        assert!(shape(&["HEAD", "commondir"]).is_git_dir());
        for not in [
            &["objects", "refs", "config"][..],
            &["HEAD", "objects"],
            &["HEAD", "refs"],
            &["commondir", "objects", "refs"],
            &["head", "objects", "refs"],
        ] {
            assert!(!shape(not).is_git_dir(), "{not:?}");
        }
        assert!(shape(&["HEAD"]).is_notable() && shape(&["commondir"]).is_notable());
        assert!(!shape(&["objects", "refs"]).is_notable());
        assert_eq!(
            shape(&["HEAD", "objects", "refs"]).added_since(shape(&["objects"])),
            vec!["HEAD", "refs"]
        );
        assert!(GitDirShape::is_marker(std::ffi::OsStr::new("commondir")));
        assert!(!GitDirShape::is_marker(std::ffi::OsStr::new("config")));
    }
}
