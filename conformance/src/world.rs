//! A scratch world for one containment case: a workspace, an outside tree with a sentinel, the
//! symlinks and names the path shapes need, and scratch areas under `/tmp` and `/dev/shm`. The
//! world lives under `/var/tmp`, outside every writable root, and is removed on drop.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where worlds are made. Must not be under `/tmp` (which `workspace-write` may write).
pub const WORLD_BASE: &str = "/var/tmp/sandbox-conformance";

/// The sentinel's content; no case may ever change it.
pub const SENTINEL: &str = "sentinel";

/// One case's world.
pub struct World {
    /// The world directory (canonical).
    pub dir: PathBuf,
    /// A scratch directory under `/tmp`.
    pub tmp: PathBuf,
    /// A scratch directory under `/dev/shm`, made only when the host has `/dev/shm` (on a host
    /// without it the path still names where a write must not appear).
    pub shm: PathBuf,
}

impl World {
    /// Makes a fresh world with the fixed layout every shape relies on.
    pub fn new() -> io::Result<World> {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        std::fs::create_dir_all(WORLD_BASE)?;
        let base = std::fs::canonicalize(WORLD_BASE)?;
        if base.starts_with(std::fs::canonicalize("/tmp")?) {
            return Err(io::Error::other(format!(
                "{WORLD_BASE} resolves under /tmp ({}); containment worlds must be outside every writable root",
                base.display()
            )));
        }
        let dir = base.join(format!("w-{id}"));
        let tmp = PathBuf::from(format!("/tmp/sandbox-conformance-{id}"));
        let shm = PathBuf::from(format!("/dev/shm/sandbox-conformance-{id}"));
        let world = World { dir, tmp, shm };
        world.lay_out()?;
        Ok(world)
    }

    fn lay_out(&self) -> io::Result<()> {
        let d = &self.dir;
        for sub in ["ws/dir", "outside", "tmpdir"] {
            std::fs::create_dir_all(d.join(sub))?;
        }
        std::fs::create_dir_all(self.tmp.join("ws/dir"))?;
        if Path::new("/dev/shm").is_dir() {
            std::fs::create_dir_all(&self.shm)?;
        }
        std::fs::write(d.join("outside/sentinel"), SENTINEL)?;
        for ws in [d.join("ws"), self.tmp.join("ws")] {
            std::fs::write(ws.join("src"), "src")?;
        }
        for (dir, suffix) in [
            (d.join("ws/dir"), OsStr::new("")),
            (d.join("ws"), OsStr::new("")),
            (d.join("outside"), OsStr::new("")),
            (d.join("tmpdir"), OsStr::new("")),
            (self.tmp.clone(), OsStr::new("")),
            (self.tmp.join("ws/dir"), OsStr::new("")),
            (d.join("ws/dir"), OsStr::from_bytes(b"\xff")),
            (d.join("outside"), OsStr::from_bytes(b"\xff")),
            (d.join("ws/with space"), OsStr::new(" x")),
        ] {
            populate(&dir, suffix)?;
        }
        symlink(d.join("outside"), d.join("ws/link_out"))?;
        symlink(d.join("outside/existing"), d.join("ws/file_link"))?;
        symlink(d.join("outside/new"), d.join("ws/dangling"))?;
        symlink(d.join("ws"), d.join("ws_alias"))?;
        std::fs::write(d.join("outside/linked_target"), "old")?;
        std::fs::hard_link(d.join("outside/linked_target"), d.join("ws/prelinked"))?;
        Ok(())
    }
}

/// `existing<suffix>` (content `old`, mode 0644) and an empty `emptydir<suffix>` in `dir`.
fn populate(dir: &Path, suffix: &OsStr) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let existing = dir.join(name("existing", suffix));
    std::fs::write(&existing, "old")?;
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644))?;
    std::fs::create_dir_all(dir.join(name("emptydir", suffix)))
}

/// `base` followed by `suffix`, as a file name.
pub fn name(base: &str, suffix: &OsStr) -> OsString {
    let mut n = OsString::from(base);
    n.push(suffix);
    n
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.tmp);
        let _ = std::fs::remove_dir_all(&self.shm);
    }
}
