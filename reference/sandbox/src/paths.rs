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

/// The canonical writable set of a confined policy: nothing for `read-only`; for
/// `workspace-write` the workspace root, `/tmp` and the policy's temp dir (when absolute).
/// Duplicates and roots nested inside another root are removed; order is workspace root, `/tmp`,
/// temp dir. `/dev/null` is writable in every confined mode and each profile grants it separately.
pub fn writable_roots(policy: &ProviderPolicy) -> Result<Vec<PathBuf>, PathError> {
    if policy.mode == ConfinedMode::ReadOnly {
        return Ok(Vec::new());
    }
    let mut candidates = vec![policy.workspace_root.clone(), PathBuf::from("/tmp")];
    if let Some(t) = policy.temp_dir.as_ref().filter(|t| t.is_absolute()) {
        candidates.push(t.clone());
    }
    let canonical: Vec<PathBuf> = candidates
        .iter()
        .map(|p| canonical_path(p))
        .collect::<Result<_, _>>()?;
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
    Ok(roots)
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

    #[test]
    fn writable_set_is_empty_for_read_only_and_deduplicated_for_workspace_write() {
        let (_d, root) = tmp();
        let ro = ProviderPolicy {
            mode: ConfinedMode::ReadOnly,
            workspace_root: root.clone(),
            temp_dir: Some(root.clone()),
        };
        assert!(writable_roots(&ro).expect("roots").is_empty());
        let mut ww = ProviderPolicy {
            mode: ConfinedMode::WorkspaceWrite,
            workspace_root: root.join("ws/."),
            temp_dir: Some(PathBuf::from("/tmp/")),
        };
        let tmp_canon = canonical_path(Path::new("/tmp")).expect("canon");
        let roots = writable_roots(&ww).expect("roots");
        // The workspace (under /tmp in this test) and $TMPDIR=/tmp collapse into /tmp.
        if root.starts_with(&tmp_canon) {
            assert_eq!(roots, vec![tmp_canon]);
        } else {
            assert_eq!(roots, vec![root.join("ws"), tmp_canon]);
        }
        ww.temp_dir = Some(PathBuf::from("relative/tmp"));
        let relative = writable_roots(&ww).expect("roots");
        assert!(relative.iter().all(|r| r.is_absolute()));
    }
}
