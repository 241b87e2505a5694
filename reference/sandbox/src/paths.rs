//! The one meaning of `workspace-write`: the writable set, canonical paths, and containment.
//!
//! Every backend profile (bwrap, Landlock, Seatbelt) and the in-process fs fence take their
//! writable set from [`writable_roots`], so "the write tool cannot write /tmp but the shell can"
//! cannot arise.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::mode::ConfinedMode;
use crate::policy::ProviderPolicy;
use crate::roots::ExtraRoot;
use crate::workspace::{
    DirIdentity, RootError, UNIX_SOCKET_MISSING, UNIX_SOCKET_NOT_A_SOCKET,
    UNIX_SOCKET_NOT_GRANTABLE, UNIX_SOCKET_RELATIVE, WRITABLE_ROOT_MISSING, WRITABLE_ROOT_MOVED,
    WRITABLE_ROOT_NOT_A_DIRECTORY, WRITABLE_ROOT_RELATIVE, WRITABLE_ROOT_TOO_BROAD,
    check_temp_breadth, check_workspace_breadth, identify_dir,
};

/// Symlink hops followed before giving up, as the kernel's `ELOOP` limit.
const MAX_SYMLINK_HOPS: usize = 40;

/// A path that could not be canonicalized.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The process working directory is unknown (needed for a relative path).
    #[error("cannot resolve relative path {path:?}: current directory unavailable: {source}")]
    NoCurrentDir {
        /// The relative path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Too many symlinks.
    #[error("too many levels of symbolic links resolving {0:?}")]
    SymlinkLoop(PathBuf),
    /// A component could not be inspected (for example a directory without search permission).
    #[error("cannot inspect {path:?}: {source}")]
    Inspect {
        /// The component path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A NUL byte can never name a file.
    #[error("path {0:?} contains a NUL byte")]
    Nul(PathBuf),
}

/// The path a process would actually reach, canonicalized with filesystem semantics before any
/// lexical normalization: symlinks are followed (including dangling ones, whose target is what a
/// write would create), `..` steps out of the directory a symlink resolved to, and the components
/// that do not exist yet are appended as written. The result is absolute and has no symlinks in
/// its existing prefix.
pub fn canonical_path(path: &Path) -> Result<PathBuf, PathError> {
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(PathError::Nul(path.to_path_buf()));
    }
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| PathError::NoCurrentDir {
                path: path.to_path_buf(),
                source,
            })?
            .join(path)
    };
    // Components still to walk, last first.
    let mut pending: Vec<OsString> = components_of(&absolute);
    pending.reverse();
    let mut resolved = PathBuf::from("/");
    let mut hops = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(PathError::SymlinkLoop(absolute));
                }
                let target =
                    std::fs::read_link(&candidate).map_err(|source| PathError::Inspect {
                        path: candidate.clone(),
                        source,
                    })?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                pending.extend(components_of(&target).into_iter().rev());
            }
            Ok(_) => resolved = candidate,
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::NotADirectory =>
            {
                resolved = candidate
            }
            Err(source) => {
                return Err(PathError::Inspect {
                    path: candidate,
                    source,
                });
            }
        }
    }
    Ok(resolved)
}

/// The normal and `..` components of a path (root and `.` dropped).
fn components_of(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// True when canonical `path` lies at or beneath canonical `root`: a lexical prefix check first,
/// then a filesystem identity walk (device and inode of each existing ancestor against the root's)
/// so an alias spelling of the same directory is recognised without weakening to text guesses.
pub fn is_within(path: &Path, root: &Path) -> bool {
    if path.starts_with(root) {
        return true;
    }
    let Ok(root_meta) = std::fs::metadata(root) else {
        return false;
    };
    path.ancestors().any(|ancestor| {
        std::fs::metadata(ancestor)
            .is_ok_and(|m| m.dev() == root_meta.dev() && m.ino() == root_meta.ino())
    })
}

/// Checks an extra writable root exactly like the workspace: absolute, an existing directory,
/// still the pinned one; with `home` (under `workspace-write`) also not `/`, a system directory,
/// or the home directory or an ancestor of it. Returns its canonical path and identity.
pub(crate) fn check_extra_root(
    root: &ExtraRoot,
    home: Option<Option<&Path>>,
) -> Result<(PathBuf, DirIdentity), RootError> {
    let refuse = |code, why: String| {
        Err(RootError::ExtraRoot {
            code,
            path: root.path.clone(),
            why,
        })
    };
    if !root.path.is_absolute() {
        return refuse(WRITABLE_ROOT_RELATIVE, "is not an absolute path".into());
    }
    let canonical = canonical_path(&root.path)?;
    let id = match identify_dir(&root.path, &canonical) {
        Ok(id) => id,
        Err(RootError::WorkspaceMissing { .. }) => {
            return refuse(WRITABLE_ROOT_MISSING, "does not exist".into());
        }
        Err(RootError::WorkspaceNotADirectory { .. }) => {
            return refuse(WRITABLE_ROOT_NOT_A_DIRECTORY, "is not a directory".into());
        }
        Err(e) => return Err(e),
    };
    if let Some(pin) = root.pin.filter(|pin| *pin != id) {
        return refuse(
            WRITABLE_ROOT_MOVED,
            format!("was pinned ({pin}) but now resolves to {canonical:?} ({id}); refusing to run"),
        );
    }
    if let Some(Err(RootError::WorkspaceTooBroad { resolved, why, .. })) =
        home.map(|home| check_workspace_breadth(&root.path, &canonical, home))
    {
        return refuse(
            WRITABLE_ROOT_TOO_BROAD,
            format!("resolves to {resolved:?}, {why}; refusing to make it writable"),
        );
    }
    Ok((canonical, id))
}

/// The canonical writable set of a confined policy: nothing for `read-only`; for
/// `workspace-write` the workspace root, `/tmp`, the policy's temp dir (when absolute and
/// existing) and its extra roots. Duplicates and roots nested inside another root are removed;
/// order is workspace root, `/tmp`, temp dir, extra roots. `/dev/null` is writable in every confined mode and each profile grants
/// it separately.
///
/// The roots are checked first, in every mode, so nothing runs on a bad policy: the workspace
/// must be an existing directory and still the pinned one; under `workspace-write` it must not be
/// `/` or a system directory, and a temp dir that would add to the set must be a directory, still
/// the pinned one, and neither a system directory nor an ancestor of the workspace or the home
/// directory (see [`RootError`] for the codes).
pub fn writable_roots(policy: &ProviderPolicy) -> Result<Vec<PathBuf>, RootError> {
    let workspace = canonical_path(&policy.roots.workspace_root)?;
    let id = identify_dir(&policy.roots.workspace_root, &workspace)?;
    if let Some(pin) = policy
        .roots
        .workspace_pin
        .as_ref()
        .filter(|pin| pin.id != id)
    {
        return Err(RootError::WorkspaceMoved {
            path: policy.roots.workspace_root.clone(),
            pinned_path: pin.path.clone(),
            pinned: pin.id,
            now_path: workspace,
            now: Some(id),
        });
    }
    check_unix_sockets(policy)?;
    if policy.mode == ConfinedMode::ReadOnly {
        for root in &policy.roots.extra_roots {
            check_extra_root(root, None)?;
        }
        return Ok(Vec::new());
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .and_then(|h| canonical_path(&h).ok());
    check_workspace_breadth(&policy.roots.workspace_root, &workspace, home.as_deref())?;
    let mut extras = Vec::with_capacity(policy.roots.extra_roots.len());
    for root in &policy.roots.extra_roots {
        extras.push(check_extra_root(root, Some(home.as_deref()))?.0);
    }
    let tmp = canonical_path(Path::new("/tmp"))?;
    let area = private_area(policy, &tmp, &workspace)?;
    let mut canonical = vec![workspace.clone(), tmp.clone()];
    if let Some(t) = policy.roots.temp_dir.as_ref().filter(|t| t.is_absolute()) {
        let resolved = canonical_path(t)?;
        match std::fs::metadata(&resolved) {
            Ok(meta) if !meta.is_dir() => {
                return Err(RootError::TempDirNotADirectory { path: t.clone() });
            }
            Ok(meta) => {
                let now = DirIdentity {
                    dev: meta.dev(),
                    ino: meta.ino(),
                };
                if let Some(pin) = policy
                    .roots
                    .temp_dir_pin
                    .as_ref()
                    .filter(|pin| pin.id != now)
                {
                    return Err(RootError::TempDirMoved {
                        path: t.clone(),
                        pinned: pin.id,
                        now_path: resolved,
                        now: Some(now),
                    });
                }
                check_temp_breadth(t, &resolved, [&workspace, &tmp], home.as_deref())?;
                canonical.push(resolved);
            }
            // A temp dir that does not exist is not granted (and a pinned one that vanished
            // grants nothing either).
            Err(_) => {}
        }
    }
    if let Some(area) = area {
        // Neither the host's /tmp nor the caller's $TMPDIR (checked all the same: a deployment
        // that names a bad one hears of it): the session's own area instead.
        canonical = vec![workspace, area];
    }
    canonical.extend(extras);
    Ok(outermost(canonical))
}

/// The canonical `tmp` directory of `policy`'s private temp area, checked: absolute, an
/// existing directory (not a symlink to one), outside `/tmp` and outside the workspace, with the
/// overlay's `work` beside it. `None` for a shared temp area.
fn private_area(
    policy: &ProviderPolicy,
    tmp: &Path,
    workspace: &Path,
) -> Result<Option<PathBuf>, RootError> {
    let crate::TempArea::Private(area) = &policy.roots.temp_area else {
        return Ok(None);
    };
    let refuse = |why: &str| RootError::TempAreaUnusable {
        path: area.clone(),
        why: why.to_owned(),
    };
    if !area.is_absolute() {
        return Err(refuse("is not absolute"));
    }
    let canonical = canonical_path(area).map_err(|_| refuse("cannot be resolved"))?;
    if canonical.starts_with(tmp) || tmp.starts_with(&canonical) {
        return Err(refuse(
            "lies in /tmp (or holds it): it would show the host's own /tmp",
        ));
    }
    if canonical.starts_with(workspace) || workspace.starts_with(&canonical) {
        return Err(refuse("lies in the workspace (or holds it)"));
    }
    for part in ["tmp", "work"] {
        let meta = std::fs::symlink_metadata(canonical.join(part))
            .map_err(|_| refuse(&format!("has no {part} directory")))?;
        if !meta.is_dir() {
            return Err(refuse(&format!("has a {part} that is not a directory")));
        }
    }
    Ok(Some(canonical.join("tmp")))
}

/// The roots not inside another (the first of two equal ones).
fn outermost(canonical: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for (i, root) in canonical.iter().enumerate() {
        let covered_by_other = canonical
            .iter()
            .enumerate()
            .any(|(j, other)| j != i && root.starts_with(other) && (root != other || j < i));
        if !covered_by_other {
            roots.push(root.clone());
        }
    }
    roots
}

/// Checks the unix sockets `policy` allows the payload to connect to and returns them as they
/// resolve (every path that checks the roots checks these, so nothing runs on a bad one). Each
/// must be absolute (`UNIX_SOCKET_RELATIVE`), exist (`UNIX_SOCKET_MISSING`), be a socket once
/// symlinks are followed (`UNIX_SOCKET_NOT_A_SOCKET`), and lie where a deployment may grant one
/// (`UNIX_SOCKET_NOT_GRANTABLE`): not under `/proc` (a path through another process's root or
/// descriptor table names no socket of this host's tree), and not inside the workspace or an
/// extra root, whose payload may replace the socket with a listener of its own under that name,
/// so the grant would not name the host service the deployment meant.
pub fn check_unix_sockets(policy: &ProviderPolicy) -> Result<Vec<PathBuf>, RootError> {
    use std::os::unix::fs::FileTypeExt;

    if policy.roots.allow_unix_sockets.is_empty() {
        return Ok(Vec::new());
    }
    let refuse = |code, path: &Path, why: String| RootError::UnixSocket {
        code,
        path: path.to_path_buf(),
        why,
    };
    let trees: Vec<PathBuf> = std::iter::once(&policy.roots.workspace_root)
        .chain(policy.roots.extra_roots.iter().map(|r| &r.path))
        .filter_map(|p| canonical_path(p).ok())
        .collect();
    let mut resolved = Vec::with_capacity(policy.roots.allow_unix_sockets.len());
    for path in &policy.roots.allow_unix_sockets {
        if !path.is_absolute() {
            return Err(refuse(UNIX_SOCKET_RELATIVE, path, "is not absolute".into()));
        }
        let canonical = canonical_path(path).map_err(|e| {
            refuse(
                UNIX_SOCKET_MISSING,
                path,
                format!("cannot be resolved: {e}"),
            )
        })?;
        let meta = std::fs::metadata(&canonical).map_err(|e| {
            refuse(
                UNIX_SOCKET_MISSING,
                path,
                format!("does not exist ({canonical:?}: {e})"),
            )
        })?;
        if !meta.file_type().is_socket() {
            return Err(refuse(
                UNIX_SOCKET_NOT_A_SOCKET,
                path,
                format!("resolves to {canonical:?}, which is not a socket"),
            ));
        }
        if path.starts_with("/proc") || canonical.starts_with("/proc") {
            return Err(refuse(
                UNIX_SOCKET_NOT_GRANTABLE,
                path,
                format!(
                    "resolves through /proc ({canonical:?}): another process's view of the tree"
                ),
            ));
        }
        if let Some(tree) = trees.iter().find(|t| canonical.starts_with(t)) {
            return Err(refuse(
                UNIX_SOCKET_NOT_GRANTABLE,
                path,
                format!(
                    "resolves to {canonical:?}, inside the writable tree {tree:?} (the payload could put its own listener there)"
                ),
            ));
        }
        resolved.push(canonical);
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        (dir, root)
    }

    #[test]
    fn symlink_then_dotdot_resolves_on_the_filesystem_not_lexically() {
        let (_d, root) = tmp();
        std::fs::create_dir_all(root.join("real/inner")).expect("mkdir");
        std::fs::create_dir(root.join("ws")).expect("mkdir");
        symlink(root.join("real/inner"), root.join("ws/link")).expect("symlink");
        // Lexically ws/link/.. is ws; on the filesystem it is real.
        assert_eq!(
            canonical_path(&root.join("ws/link/..")).expect("canon"),
            root.join("real")
        );
    }

    #[test]
    fn dangling_symlink_resolves_to_what_a_write_would_create() {
        let (_d, root) = tmp();
        symlink(root.join("outside/new.txt"), root.join("dangling")).expect("symlink");
        assert_eq!(
            canonical_path(&root.join("dangling")).expect("canon"),
            root.join("outside/new.txt")
        );
    }

    #[test]
    fn missing_tail_is_appended_and_nul_is_refused() {
        let (_d, root) = tmp();
        assert_eq!(
            canonical_path(&root.join("a/b/../c")).expect("canon"),
            root.join("a/c")
        );
        assert!(matches!(
            canonical_path(Path::new("/tmp/a\0b")),
            Err(PathError::Nul(_))
        ));
    }

    #[test]
    fn symlink_loop_is_an_error() {
        let (_d, root) = tmp();
        symlink(root.join("b"), root.join("a")).expect("symlink");
        symlink(root.join("a"), root.join("b")).expect("symlink");
        assert!(matches!(
            canonical_path(&root.join("a/x")),
            Err(PathError::SymlinkLoop(_))
        ));
    }

    #[test]
    fn containment_is_component_wise_and_recognises_aliases() {
        let (_d, root) = tmp();
        std::fs::create_dir_all(root.join("ws/sub")).expect("mkdir");
        std::fs::create_dir(root.join("ws-evil")).expect("mkdir");
        assert!(is_within(&root.join("ws/sub/f"), &root.join("ws")));
        assert!(is_within(&root.join("ws"), &root.join("ws")));
        assert!(!is_within(&root.join("ws-evil/f"), &root.join("ws")));
        // A non-canonical spelling of the root is still the same directory by identity.
        symlink(root.join("ws"), root.join("alias")).expect("symlink");
        assert!(is_within(&root.join("ws/sub"), &root.join("alias")));
    }

    fn policy(mode: ConfinedMode, root: &Path, temp: Option<&str>) -> ProviderPolicy {
        ProviderPolicy::new(mode, root).with_roots(|r| r.with_temp_dir(temp.map(PathBuf::from)))
    }

    #[test]
    fn writable_set_is_empty_for_read_only_and_deduplicated_for_workspace_write() {
        let tmp_canon = canonical_path(Path::new("/tmp")).expect("canon");
        // A workspace outside /tmp keeps its own root beside /tmp.
        let outside = sandbox_test_support::scratch_dir("unit-");
        let root = std::fs::canonicalize(outside.path()).expect("canonical");
        std::fs::create_dir(root.join("ws")).expect("mkdir");
        let ro = policy(ConfinedMode::ReadOnly, &root, root.to_str());
        assert!(writable_roots(&ro).expect("roots").is_empty());
        let ww = policy(
            ConfinedMode::WorkspaceWrite,
            &root.join("ws/."),
            Some("/tmp/"),
        );
        assert_eq!(
            writable_roots(&ww).expect("roots"),
            vec![root.join("ws"), tmp_canon.clone()]
        );
        // A workspace under /tmp collapses into /tmp.
        let under = tempfile::tempdir_in("/tmp").expect("tempdir");
        let ww = policy(ConfinedMode::WorkspaceWrite, under.path(), Some("/tmp"));
        assert_eq!(writable_roots(&ww).expect("roots"), vec![tmp_canon]);
        // A relative temp dir is never granted.
        let ww = policy(
            ConfinedMode::WorkspaceWrite,
            &root.join("ws"),
            Some("rel/tmp"),
        );
        assert_eq!(writable_roots(&ww).expect("roots").len(), 2);
    }

    #[test]
    fn a_missing_or_file_workspace_is_refused_in_every_mode_with_its_own_code() {
        let (_d, root) = tmp();
        std::fs::write(root.join("file"), "x").expect("file");
        for mode in [ConfinedMode::ReadOnly, ConfinedMode::WorkspaceWrite] {
            let missing = writable_roots(&policy(mode, &root.join("gone"), None));
            assert_eq!(missing.expect_err("missing").code(), "WORKSPACE_MISSING");
            let file = writable_roots(&policy(mode, &root.join("file"), None));
            assert_eq!(file.expect_err("file").code(), "WORKSPACE_NOT_A_DIRECTORY");
            let under_file = writable_roots(&policy(mode, &root.join("file/sub"), None));
            assert_eq!(under_file.expect_err("sub").code(), "WORKSPACE_MISSING");
        }
    }

    #[test]
    fn the_root_or_a_system_directory_is_never_a_writable_workspace() {
        for root in ["/", "/etc", "/usr/lib", "/home"] {
            let ww = policy(ConfinedMode::WorkspaceWrite, Path::new(root), None);
            let err = writable_roots(&ww).expect_err(root);
            assert_eq!(err.code(), "WORKSPACE_TOO_BROAD", "{root}");
            assert!(err.to_string().contains(root), "{err}");
            // Read-only makes nothing writable, so any directory is a fine place to read from.
            let ro = policy(ConfinedMode::ReadOnly, Path::new(root), None);
            assert!(writable_roots(&ro).expect(root).is_empty());
        }
        // Through a symlink too: what counts is where it resolves.
        let (_d, base) = tmp();
        symlink("/etc", base.join("etc_link")).expect("symlink");
        let ww = policy(ConfinedMode::WorkspaceWrite, &base.join("etc_link"), None);
        assert_eq!(
            writable_roots(&ww).expect_err("link").code(),
            "WORKSPACE_TOO_BROAD"
        );
    }

    #[test]
    fn a_temp_dir_that_would_widen_the_set_is_refused() {
        let outside = sandbox_test_support::scratch_dir("unit-");
        let root = std::fs::canonicalize(outside.path()).expect("canonical");
        std::fs::create_dir(root.join("ws")).expect("mkdir");
        std::fs::write(root.join("file"), "x").expect("file");
        let ws = root.join("ws");
        let code = |temp: &Path| {
            writable_roots(&policy(ConfinedMode::WorkspaceWrite, &ws, temp.to_str()))
                .map(|_| "OK")
                .unwrap_or_else(|e| e.code())
        };
        assert_eq!(code(Path::new("/")), "TEMP_DIR_TOO_BROAD");
        assert_eq!(code(Path::new("/etc")), "TEMP_DIR_TOO_BROAD");
        assert_eq!(code(&root), "TEMP_DIR_TOO_BROAD");
        assert_eq!(code(&root.join("file")), "TEMP_DIR_NOT_A_DIRECTORY");
        assert_eq!(code(&root.join("missing")), "OK");
        assert_eq!(code(&ws.join("tmp-under-ws")), "OK");
        std::fs::create_dir(root.join("private")).expect("mkdir");
        assert_eq!(code(&root.join("private")), "OK");
    }

    #[test]
    fn a_pinned_workspace_swapped_for_a_symlink_or_another_directory_fails_closed() {
        let (_d, base) = tmp();
        let ws = base.join("ws");
        std::fs::create_dir(&ws).expect("mkdir");
        std::fs::create_dir(base.join("outside")).expect("mkdir");
        let pinned = crate::ExecutionPolicy::new(crate::SandboxMode::WorkspaceWrite, &ws)
            .pinned()
            .expect("pin")
            .for_provider()
            .expect("confined");
        assert!(writable_roots(&pinned).is_ok());
        std::fs::rename(&ws, base.join("ws.real")).expect("mv");
        symlink(base.join("outside"), &ws).expect("ln");
        let err = writable_roots(&pinned).expect_err("moved");
        assert_eq!(err.code(), "WORKSPACE_MOVED");
        let text = err.to_string();
        assert!(
            text.contains(&format!("{:?}", base.join("outside"))) && text.contains("pinned"),
            "{text}"
        );
        // Another directory under the same name is another directory.
        std::fs::remove_file(&ws).expect("rm");
        std::fs::create_dir(&ws).expect("mkdir");
        assert_eq!(
            writable_roots(&pinned).expect_err("moved").code(),
            "WORKSPACE_MOVED"
        );
        let mut ro = pinned.clone();
        ro.mode = ConfinedMode::ReadOnly;
        assert_eq!(
            writable_roots(&ro).expect_err("ro").code(),
            "WORKSPACE_MOVED"
        );
    }
}
