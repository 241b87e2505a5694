//! What a backend leaves in the host's shared places. A case marked `leftovers` runs with `/tmp`
//! and `/dev/shm` fresh and empty: its thread enters a mount namespace of its own in which both
//! are a new tmpfs, so
//! every process the case starts (runner, payload, an agent and its calls) sees them, and what is
//! in them once the case is over is what the case made and left, whatever else runs on the host
//! meanwhile. A case's worlds are removed as they drop (not renamed aside for the run's sweep),
//! and its processes are killed, so anything there is
//! the backend's: a staging directory, a lock, a socket. Making a mount namespace needs root
//! (`CAP_SYS_ADMIN`), so these cases are planned as root only (`when_host: root`).
//!
//! `$TMPDIR` is covered by the world diff (a case's `$TMPDIR` area is part of its world), and
//! `/var/tmp` and `/run` are not made private: external backends keep their own state there
//! (the peers' adapters keep theirs under `/var/tmp`), which a private view would hide from the
//! runner they start.

use std::path::{Path, PathBuf};

use crate::steps::StepError;

/// The shared places a `leftovers` case sees privately, each a fresh tmpfs of its own.
pub const PLACES: [&str; 2] = ["/tmp", "/dev/shm"];

/// One entry a case left in a shared place: where (as the host names the place), what, and whose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    /// The entry as it would be on the host (`/tmp/stage-1234`).
    pub path: PathBuf,
    /// `directory`, `file`, `symlink`, `socket`, `fifo` or `other`.
    pub kind: &'static str,
    /// Its owner.
    pub uid: u32,
    /// Its permission bits (with set-id and sticky bits).
    pub mode: u32,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (a {}, owner uid {}, mode {:04o})",
            self.path.display(),
            self.kind,
            self.uid,
            self.mode
        )
    }
}

/// What is in one private place: every entry.
fn entries(place: &str) -> Result<Vec<Leftover>, StepError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = Path::new(place);
    let listing = std::fs::read_dir(dir)
        .map_err(|e| StepError::harness(format!("cannot list {}: {e}", dir.display())))?;
    let mut found = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| StepError::harness(format!("{}: {e}", dir.display())))?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| StepError::harness(format!("{}: {e}", path.display())))?;
        let kind = match meta.file_type() {
            t if t.is_dir() => "directory",
            t if t.is_file() => "file",
            t if t.is_symlink() => "symlink",
            t if t.is_socket() => "socket",
            t if t.is_fifo() => "fifo",
            _ => "other",
        };
        found.push(Leftover {
            path,
            kind,
            uid: meta.uid(),
            mode: meta.mode() & 0o7777,
        });
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// Runs `body` (one case) with [`PLACES`] private to it, and returns what it left there.
///
/// Each place is a fresh tmpfs (mode 1777, as the host's are), read before the thread leaves the
/// namespace and gone with it: no name or source path of the harness's shows in the mount table
/// for a runner to recognise. The thread that calls this gets a filesystem context of its own for
/// good (`CLONE_FS`: its working directory is restored afterwards, and no other thread of the
/// harness changes it), and is back in the harness's mount namespace when this returns.
#[cfg(target_os = "linux")]
pub fn in_private_places<T>(body: impl FnOnce() -> T) -> Result<(T, Vec<Leftover>), StepError> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, setns, unshare};

    let cwd = std::env::current_dir().map_err(StepError::harness)?;
    let harness_ns = std::fs::File::open("/proc/thread-self/ns/mnt").map_err(|e| {
        StepError::harness(format!("cannot hold the harness's mount namespace: {e}"))
    })?;
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_FS).map_err(|e| {
        StepError::harness(format!(
            "cannot make a mount namespace for the case (it needs root): {e}"
        ))
    })?;
    let private = (|| -> Result<(), StepError> {
        // Nothing mounted here reaches the host; the host's mounts still reach here.
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_SLAVE,
            None::<&str>,
        )
        .map_err(|e| StepError::harness(format!("cannot make / a slave mount: {e}")))?;
        for place in PLACES {
            mount(
                Some("tmpfs"),
                place,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some("mode=1777"),
            )
            .map_err(|e| StepError::harness(format!("cannot mount a private {place}: {e}")))?;
        }
        Ok(())
    })();
    let result = private
        .as_ref()
        .ok()
        .map(|()| crate::world::removed_at_once(body));
    let mut left = Vec::new();
    let listed = match private {
        Ok(()) => PLACES
            .iter()
            .try_for_each(|place| entries(place).map(|e| left.extend(e))),
        Err(e) => Err(e),
    };
    // Back in the harness's namespace (which also sets this thread's directory to its root).
    let back = setns(&harness_ns, CloneFlags::CLONE_NEWNS)
        .map_err(|e| {
            StepError::harness(format!(
                "cannot return to the harness's mount namespace: {e}"
            ))
        })
        .and_then(|()| {
            nix::unistd::chdir(&cwd)
                .map_err(|e| StepError::harness(format!("cannot return to {}: {e}", cwd.display())))
        });
    back?;
    listed?;
    match result {
        Some(result) => Ok((result, left)),
        None => Err(StepError::harness("the case did not run")),
    }
}

/// Off Linux there is no mount namespace to make: a `leftovers` case cannot run.
#[cfg(not(target_os = "linux"))]
pub fn in_private_places<T>(_body: impl FnOnce() -> T) -> Result<(T, Vec<Leftover>), StepError> {
    Err(StepError::Unavailable {
        step: "leftovers",
        needs: "Linux",
    })
}
