//! What may become writable, checked before any runner starts: the workspace root and the temp
//! dir must be real directories, neither may be so broad that it widens `workspace-write` to the
//! host (`/`, a system directory, an ancestor of the workspace or of the home directory), and a
//! root pinned when it was set must still be the same directory (device and inode) when a call
//! runs. Every refusal has its own stable code and names the value and why.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::paths::PathError;

/// A directory's identity on the host: what a path resolves to must stay this directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DirIdentity {
    /// The device it lives on.
    pub dev: u64,
    /// Its inode on that device.
    pub ino: u64,
}

impl DirIdentity {
    /// The identity of the directory `path` resolves to now (symlinks followed).
    pub fn of(path: &Path) -> std::io::Result<DirIdentity> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)?;
        Ok(DirIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

impl std::fmt::Display for DirIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {} inode {}", self.dev, self.ino)
    }
}

/// A root pinned when it was set: the canonical path it had then and the directory it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PinnedDir {
    /// The canonical path when it was pinned.
    pub path: PathBuf,
    /// The directory it was.
    pub id: DirIdentity,
}

impl PinnedDir {
    /// Pins the directory `path` resolves to now (canonicalized with filesystem semantics).
    pub fn pin(path: &Path) -> Result<PinnedDir, RootError> {
        let canonical = crate::paths::canonical_path(path)?;
        let id = identify_dir(path, &canonical)?;
        Ok(PinnedDir {
            path: canonical,
            id,
        })
    }
}

/// The identity of the existing directory `canonical` (spelled `path` by the caller).
pub(crate) fn identify_dir(path: &Path, canonical: &Path) -> Result<DirIdentity, RootError> {
    match std::fs::metadata(canonical) {
        Ok(meta) if meta.is_dir() => DirIdentity::of(canonical).map_err(|source| {
            RootError::Path(PathError::Inspect {
                path: canonical.to_path_buf(),
                source,
            })
        }),
        Ok(_) => Err(RootError::WorkspaceNotADirectory {
            path: path.to_path_buf(),
        }),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Err(RootError::WorkspaceMissing {
                path: path.to_path_buf(),
            })
        }
        Err(source) => Err(RootError::Path(PathError::Inspect {
            path: canonical.to_path_buf(),
            source,
        })),
    }
}

/// The stable code of a missing workspace root.
pub const WORKSPACE_MISSING: &str = "WORKSPACE_MISSING";
/// The stable code of a workspace root that is not a directory.
pub const WORKSPACE_NOT_A_DIRECTORY: &str = "WORKSPACE_NOT_A_DIRECTORY";
/// The stable code of a workspace root that would make the host writable.
pub const WORKSPACE_TOO_BROAD: &str = "WORKSPACE_TOO_BROAD";
/// The stable code of a workspace root that now resolves to another directory than the pinned one.
pub const WORKSPACE_MOVED: &str = "WORKSPACE_MOVED";
/// The stable code of a temp dir that exists but is not a directory.
pub const TEMP_DIR_NOT_A_DIRECTORY: &str = "TEMP_DIR_NOT_A_DIRECTORY";
/// The stable code of a temp dir that would make the host writable.
pub const TEMP_DIR_TOO_BROAD: &str = "TEMP_DIR_TOO_BROAD";
/// The stable code of a temp dir that now resolves to another directory than the pinned one.
pub const TEMP_DIR_MOVED: &str = "TEMP_DIR_MOVED";
/// The stable code of a path that cannot be resolved at all.
pub const BAD_PATH: &str = "BAD_PATH";
/// The stable code of an extra writable root that is not an absolute path.
pub const WRITABLE_ROOT_RELATIVE: &str = "WRITABLE_ROOT_RELATIVE";
/// The stable code of an extra writable root that does not exist.
pub const WRITABLE_ROOT_MISSING: &str = "WRITABLE_ROOT_MISSING";
/// The stable code of an extra writable root that is not a directory.
pub const WRITABLE_ROOT_NOT_A_DIRECTORY: &str = "WRITABLE_ROOT_NOT_A_DIRECTORY";
/// The stable code of an extra writable root that would make the host writable.
pub const WRITABLE_ROOT_TOO_BROAD: &str = "WRITABLE_ROOT_TOO_BROAD";
/// The stable code of an extra writable root that now resolves to another directory.
pub const WRITABLE_ROOT_MOVED: &str = "WRITABLE_ROOT_MOVED";
/// An allowed unix socket path is not absolute.
pub const UNIX_SOCKET_RELATIVE: &str = "UNIX_SOCKET_RELATIVE";
/// An allowed unix socket path does not exist.
pub const UNIX_SOCKET_MISSING: &str = "UNIX_SOCKET_MISSING";
/// An allowed unix socket path exists but is not a socket.
pub const UNIX_SOCKET_NOT_A_SOCKET: &str = "UNIX_SOCKET_NOT_A_SOCKET";
/// An allowed unix socket lies where no deployment may grant one (see [`crate::check_unix_sockets`]).
pub const UNIX_SOCKET_NOT_GRANTABLE: &str = "UNIX_SOCKET_NOT_GRANTABLE";

/// The session's private temp area is missing or not as the trusted side made it (see
/// [`crate::TempArea`]).
pub const TEMP_AREA_UNUSABLE: &str = "TEMP_AREA_UNUSABLE";

/// Why a policy's roots cannot be used. Nothing runs when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The workspace root does not exist.
    #[error("{WORKSPACE_MISSING}: the workspace {path:?} does not exist")]
    WorkspaceMissing {
        /// The root as the policy spells it.
        path: PathBuf,
    },
    /// The workspace root exists but is not a directory.
    #[error("{WORKSPACE_NOT_A_DIRECTORY}: the workspace {path:?} is not a directory")]
    WorkspaceNotADirectory {
        /// The root as the policy spells it.
        path: PathBuf,
    },
    /// Making the workspace writable would make the host writable.
    #[error(
        "{WORKSPACE_TOO_BROAD}: the workspace {path:?} resolves to {resolved:?}, {why}; refusing to make it writable"
    )]
    WorkspaceTooBroad {
        /// The root as the policy spells it.
        path: PathBuf,
        /// What it resolves to.
        resolved: PathBuf,
        /// Why that is too broad.
        why: &'static str,
    },
    /// The workspace path now leads to another directory than the one pinned when it was set.
    #[error(
        "{WORKSPACE_MOVED}: the workspace was pinned as {pinned_path:?} ({pinned}) but {path:?} now resolves to {now_path:?} ({}); refusing to run",
        now.map_or_else(|| "missing".to_owned(), |n| n.to_string())
    )]
    WorkspaceMoved {
        /// The root as the policy spells it.
        path: PathBuf,
        /// The directory it was pinned to, by path at the time.
        pinned_path: PathBuf,
        /// The pinned identity.
        pinned: DirIdentity,
        /// What the path resolves to now.
        now_path: PathBuf,
        /// That directory's identity, if it exists.
        now: Option<DirIdentity>,
    },
    /// The temp dir exists but is not a directory.
    #[error("{TEMP_DIR_NOT_A_DIRECTORY}: the temp dir {path:?} is not a directory")]
    TempDirNotADirectory {
        /// The temp dir as given.
        path: PathBuf,
    },
    /// Making the temp dir writable would make the host (or the workspace's surroundings)
    /// writable.
    #[error(
        "{TEMP_DIR_TOO_BROAD}: the temp dir {path:?} resolves to {resolved:?}, {why}; refusing to make it writable (set TMPDIR to a private directory)"
    )]
    TempDirTooBroad {
        /// The temp dir as given.
        path: PathBuf,
        /// What it resolves to.
        resolved: PathBuf,
        /// Why that is too broad.
        why: String,
    },
    /// The temp dir now leads to another directory than the one pinned when it was set.
    #[error(
        "{TEMP_DIR_MOVED}: the temp dir {path:?} was pinned ({pinned}) but now resolves to {now_path:?} ({}); refusing to run",
        now.map_or_else(|| "missing".to_owned(), |n| n.to_string())
    )]
    TempDirMoved {
        /// The temp dir as given.
        path: PathBuf,
        /// The pinned identity.
        pinned: DirIdentity,
        /// What it resolves to now.
        now_path: PathBuf,
        /// That directory's identity, if it exists.
        now: Option<DirIdentity>,
    },
    /// The private temp area cannot be used: the call never falls back to the host's `/tmp`.
    #[error("{TEMP_AREA_UNUSABLE}: the private temp area {path:?} {why}; refusing to run")]
    TempAreaUnusable {
        /// The area as the policy names it.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// An extra writable root was refused, by the workspace's rules; `code` is one of the
    /// `WRITABLE_ROOT_*` codes.
    #[error("{code}: the writable root {path:?} {why}")]
    ExtraRoot {
        /// The stable code.
        code: &'static str,
        /// The root as configured.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// An allowed unix socket was refused; `code` is one of the `UNIX_SOCKET_*` codes.
    #[error("{code}: the allowed unix socket {path:?} {why}")]
    UnixSocket {
        /// The stable code.
        code: &'static str,
        /// The socket path as configured.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A root could not be resolved.
    #[error("{BAD_PATH}: {0}")]
    Path(#[from] PathError),
}

impl RootError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            RootError::WorkspaceMissing { .. } => WORKSPACE_MISSING,
            RootError::WorkspaceNotADirectory { .. } => WORKSPACE_NOT_A_DIRECTORY,
            RootError::WorkspaceTooBroad { .. } => WORKSPACE_TOO_BROAD,
            RootError::WorkspaceMoved { .. } => WORKSPACE_MOVED,
            RootError::TempDirNotADirectory { .. } => TEMP_DIR_NOT_A_DIRECTORY,
            RootError::TempDirTooBroad { .. } => TEMP_DIR_TOO_BROAD,
            RootError::TempDirMoved { .. } => TEMP_DIR_MOVED,
            RootError::TempAreaUnusable { .. } => TEMP_AREA_UNUSABLE,
            RootError::ExtraRoot { code, .. } => code,
            RootError::UnixSocket { code, .. } => code,
            RootError::Path(_) => BAD_PATH,
        }
    }
}

/// Top-level directories whose whole tree belongs to the system: never a writable root.
const SYSTEM_TREES: [&str; 13] = [
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin",
    "/sys", "/usr", "/System",
];

/// Why making `resolved` (canonical) writable would widen the sandbox to the host, if it would:
/// the filesystem root, any top-level directory but `/tmp`, or anything inside a system tree.
pub fn system_reason(resolved: &Path) -> Option<&'static str> {
    let depth = resolved.components().count();
    if depth <= 1 {
        return Some("the filesystem root");
    }
    if depth == 2 && resolved != Path::new("/tmp") {
        return Some("a top-level system directory");
    }
    SYSTEM_TREES
        .iter()
        .any(|tree| resolved.starts_with(tree))
        .then_some("inside a system directory")
}

/// Checks a canonical workspace root for `workspace-write`: not `/`, not a system directory, and
/// not the home directory or an ancestor of it (that would make every dotfile writable).
pub(crate) fn check_workspace_breadth(
    path: &Path,
    resolved: &Path,
    home: Option<&Path>,
) -> Result<(), RootError> {
    let why = system_reason(resolved).or_else(|| {
        home.filter(|h| h.starts_with(resolved))
            .map(|_| "the home directory or an ancestor of it")
    });
    match why {
        Some(why) => Err(RootError::WorkspaceTooBroad {
            path: path.to_path_buf(),
            resolved: resolved.to_path_buf(),
            why,
        }),
        None => Ok(()),
    }
}

/// Where a temp dir outside `/tmp` and the workspace may live: a directory strictly below one of
/// these shared temp areas (macOS keeps per-user temp dirs under `/private/var/folders`).
const TEMP_AREAS: [&str; 2] = ["/var/tmp", "/private/var/folders"];

/// Checks a canonical temp dir that would add to the writable set (one inside `/tmp` or the
/// workspace, the roots in `writable`, adds nothing and is not checked): it must lie strictly
/// below a temp area ([`TEMP_AREAS`]), so `$TMPDIR` can never make a system directory, the home
/// directory or anything below it (`~/.ssh`), `/run/user`, `/var/lib`, the workspace's
/// surroundings or the shared temp area itself writable.
pub(crate) fn check_temp_breadth(
    path: &Path,
    resolved: &Path,
    writable: [&Path; 2],
    home: Option<&Path>,
) -> Result<(), RootError> {
    let [workspace, _] = writable;
    let too_broad = |why: String| {
        Err(RootError::TempDirTooBroad {
            path: path.to_path_buf(),
            resolved: resolved.to_path_buf(),
            why,
        })
    };
    if writable.iter().any(|root| resolved.starts_with(root)) {
        return Ok(());
    }
    if let Some(why) = system_reason(resolved) {
        return too_broad(why.to_owned());
    }
    if workspace.starts_with(resolved) {
        return too_broad(format!("an ancestor of the workspace {workspace:?}"));
    }
    if let Some(home) = home.filter(|h| h.starts_with(resolved) || resolved.starts_with(h)) {
        return too_broad(format!(
            "the home directory {home:?}, inside it or above it"
        ));
    }
    let in_temp_area = TEMP_AREAS
        .iter()
        .any(|area| resolved.starts_with(area) && resolved != Path::new(area));
    if !in_temp_area {
        return too_broad(format!(
            "not a directory below a temp area ({}) and not inside /tmp or the workspace",
            TEMP_AREAS.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_top_level_dirs_and_system_trees_are_too_broad_and_tmp_is_not() {
        for p in [
            "/",
            "/etc",
            "/home",
            "/var",
            "/usr/local/src",
            "/etc/ssh",
            "/dev/shm",
        ] {
            assert!(system_reason(Path::new(p)).is_some(), "{p}");
        }
        for p in [
            "/tmp",
            "/tmp/x",
            "/var/tmp/ws",
            "/home/u/project",
            "/srv/data/ws",
        ] {
            assert_eq!(system_reason(Path::new(p)), None, "{p}");
        }
    }

    #[test]
    fn a_temp_dir_above_the_workspace_or_the_home_is_too_broad() {
        let ws = Path::new("/home/u/project");
        let home = Some(Path::new("/home/u"));
        let tmp = Path::new("/tmp");
        let check = |t: &str| check_temp_breadth(Path::new(t), Path::new(t), [ws, tmp], home);
        assert!(matches!(
            check("/home/u"),
            Err(RootError::TempDirTooBroad { .. })
        ));
        assert!(check("/home/u/project").is_ok());
        assert!(check("/home/u/project/tmp").is_ok());
        // Below the home directory (~/.ssh), /run/user, /var/lib or the temp area itself: refused.
        for t in [
            "/home/u/.cache/tmp",
            "/home/u/.ssh",
            "/run/user/1000",
            "/var/lib/dpkg",
            "/var/tmp",
            "/srv/x",
        ] {
            assert!(
                matches!(check(t), Err(RootError::TempDirTooBroad { .. })),
                "{t}"
            );
        }
        assert!(check("/var/tmp/private-tmp").is_ok());
        // Inside /tmp adds nothing: /tmp is writable anyway, even above a workspace under it.
        let under_tmp = Path::new("/tmp/w/ws");
        assert!(check_temp_breadth(tmp, tmp, [under_tmp, tmp], home).is_ok());
        assert!(matches!(
            check_temp_breadth(Path::new("/srv"), Path::new("/srv"), [ws, tmp], None),
            Err(RootError::TempDirTooBroad { .. })
        ));
        // The home directory itself is no workspace either.
        assert!(check_workspace_breadth(Path::new("/home/u"), Path::new("/home/u"), home).is_err());
        assert!(check_workspace_breadth(ws, ws, home).is_ok());
        let err = check("/home/u").expect_err("too broad");
        assert_eq!(err.code(), TEMP_DIR_TOO_BROAD);
        assert!(err.to_string().contains("\"/home/u\""), "{err}");
    }
}

/// The reason a refused temp dir gives, one row per rule of [`check_temp_breadth`] (the home
/// directory comes from `$HOME`, so these rules are pinned here rather than through
/// [`crate::writable_roots`]).
#[cfg(test)]
mod temp_breadth_reasons {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::inside_the_workspace("/srv/data/ws/tmp", None)]
    #[case::inside_tmp("/tmp/t", None)]
    #[case::below_a_temp_area("/var/tmp/t", None)]
    #[case::below_the_macos_temp_area("/private/var/folders/xy/T", None)]
    #[case::a_system_directory("/etc/t", Some("inside a system directory"))]
    #[case::above_the_workspace("/srv", Some("a top-level system directory"))]
    #[case::an_ancestor_of_the_workspace("/srv/data", Some("an ancestor of the workspace"))]
    #[case::the_home_directory("/var/tmp/home/u", Some("the home directory"))]
    #[case::inside_the_home_directory("/var/tmp/home/u/.cache", Some("the home directory"))]
    #[case::above_the_home_directory("/var/tmp/home", Some("the home directory"))]
    #[case::a_temp_area_itself("/private/var/folders", Some("not a directory below a temp area"))]
    #[case::elsewhere("/opt/t", Some("not a directory below a temp area"))]
    fn why_a_temp_dir_is_refused(#[case] temp: &str, #[case] why: Option<&str>) {
        let ws = Path::new("/srv/data/ws");
        let home = Path::new("/var/tmp/home/u");
        let checked = check_temp_breadth(
            Path::new(temp),
            Path::new(temp),
            [ws, Path::new("/tmp")],
            Some(home),
        );
        match (checked, why) {
            (Ok(()), None) => {}
            (Err(RootError::TempDirTooBroad { why: got, .. }), Some(why)) => {
                assert!(got.starts_with(why), "{temp}: {got}")
            }
            (other, _) => panic!("{temp}: expected {why:?}, got {other:?}"),
        }
    }
}
