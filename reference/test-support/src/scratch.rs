//! Scratch directories for tests, under `/var/tmp`.
//!
//! Why `/var/tmp` and not the default temp dir (`/tmp` or `$TMPDIR`): both of those are in the
//! writable set of `workspace-write` (`writable_roots`: the workspace, `/tmp`, `$TMPDIR`), so a
//! test's "outside" directory there would be writable by the payload anyway, a workspace under
//! `/tmp` is covered by `/tmp` and not bound or fenced on its own, and a state directory there
//! is refused (`STATE_DIR_IN_WRITABLE_ROOT`). `/var/tmp` is outside that set, it is a temp area
//! (a `$TMPDIR` strictly below it is honoured), and it is sticky and root-owned, so a private
//! directory below it passes the state-directory checks.

use std::path::PathBuf;

use tempfile::TempDir;

/// Where every scratch directory is made (see the module doc for why).
pub const SCRATCH_BASE: &str = "/var/tmp";

/// A fresh directory `SCRATCH_BASE/<prefix>XXXXXX`, removed when dropped; panics if it cannot be
/// made (a test set-up failure).
pub fn scratch_dir(prefix: &str) -> TempDir {
    std::fs::create_dir_all(SCRATCH_BASE).expect("/var/tmp");
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(SCRATCH_BASE)
        .expect("tempdir")
}

/// A fresh [`scratch_dir`] and its canonical path: the base a test lays its world out under (a
/// workspace, an outside directory, a sessions directory), spelled as the sandbox compares paths.
pub fn scratch_root(prefix: &str) -> (TempDir, PathBuf) {
    let dir = scratch_dir(prefix);
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    (dir, root)
}

/// A test's world: a workspace `ws` and, beside it, a directory `outside` it, under one canonical
/// scratch root; removed when dropped.
pub struct Dirs {
    _dir: TempDir,
    /// The canonical root both directories are made under.
    pub root: PathBuf,
    /// The workspace (`root/ws`).
    pub ws: PathBuf,
    /// A directory outside the workspace (`root/outside`), where nothing may land.
    pub outside: PathBuf,
}

impl Dirs {
    /// A world under a fresh [`scratch_dir`].
    pub fn new(prefix: &str) -> Dirs {
        Dirs::in_dir(scratch_dir(prefix))
    }

    /// A world in `dir`, for a test that needs it elsewhere than [`SCRATCH_BASE`] (under `/tmp`,
    /// where the payload may write).
    pub fn in_dir(dir: TempDir) -> Dirs {
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let (ws, outside) = (root.join("ws"), root.join("outside"));
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::create_dir_all(&outside).expect("outside");
        Dirs {
            _dir: dir,
            root,
            ws,
            outside,
        }
    }
}
