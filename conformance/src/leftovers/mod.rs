//! What a backend leaves in the host's shared places. A case marked `leftovers` runs with `/tmp`
//! and `/dev/shm` private to it: its thread enters a mount namespace of its own in which each is
//! an overlay of the host's place whose writes go to a tmpfs of the namespace's, so
//! every process the case starts (runner, payload, an agent and its calls) sees them, and what is
//! in them once the case is over is what the case made and left, whatever else runs on the host
//! meanwhile. A case's worlds are removed as they drop (not renamed aside for the run's sweep),
//! and its processes are killed (a process still in the case's namespace when it is over fails
//! it: a helper the runner detached without the case's tag), so anything there is the
//! backend's: a staging directory, a lock, a socket, a host directory whose mode or owner it
//! changed (`/tmp`'s sticky bit), a host entry it removed. Making a mount namespace needs root
//! (`CAP_SYS_ADMIN`), so these cases are planned as root only (`when_host: root`).
//!
//! The same namespace holds a whole run as root ([`crate::certify::places`]): every process of
//! it, the backends' adapters included, sees the places through overlays of the run's own.
//!
//! `$TMPDIR` is covered by the world diff (a case's `$TMPDIR` area is part of its world), and
//! `/var/tmp` and `/run` are not made private to a case: external backends' adapters write their
//! per-call files there (the peers' under `/var/tmp`) from outside the case's namespace while it
//! runs, and the directory under an overlay must not change while it is mounted. The run's own
//! namespace, which the adapters share, makes `/var/tmp` private too ([`RUN_PLACES`]). `/run` is
//! never made private (a host daemon's socket there refuses every connection through an
//! overlay): the run watches it instead ([`watched`]), with the host's own `/tmp`, `/dev/shm`
//! and `/var/tmp` (whoever runs it), and fails on what it left there that others could use.

use std::path::{Path, PathBuf};

pub mod above;
mod others;
mod private;
pub mod settings;
pub mod watched;

pub use private::{Private, Scope, in_private_places, with_private_places};

/// The shared places a `leftovers` case sees privately, each an overlay of the host's own.
pub const PLACES: [&str; 2] = ["/tmp", "/dev/shm"];

/// The shared places a whole run sees privately as root ([`Scope::Run`]): a case's, and
/// `/var/tmp`, where external backends' adapters write their per-call files (every process of
/// the run sees the run's overlays, the adapters included, so nothing there changes under them
/// from outside). `/var/tmp` is last: the overlays' own directories may lie below it. Not `/run`,
/// which is watched ([`WATCHED`]): every socket the host's daemons bound there before
/// an overlay was mounted would refuse connections through it.
pub const RUN_PLACES: [&str; 3] = ["/tmp", "/dev/shm", "/var/tmp"];

/// The host's shared place every run watches rather than makes private ([`watched`], which
/// watches the host's own [`RUN_PLACES`] as well).
pub const WATCHED: [&str; 1] = ["/run"];

/// Locks the host's `/tmp` itself (an `flock` of the directory). A case that makes entries at
/// its top that others could use (HD-030's FIFO, the plants the person's tools read) holds it
/// exclusively while they exist; a look at the shared places ([`watched`]) holds it shared, so
/// it never sees a case of the harness's other runs beside it as what its own run left.
pub fn lock_tmp(exclusive: bool) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    let dir = std::fs::File::open("/tmp")?;
    let how = if exclusive {
        nix::fcntl::FlockArg::LockExclusive
    } else {
        nix::fcntl::FlockArg::LockShared
    };
    nix::fcntl::Flock::lock(dir, how).map_err(|(_, e)| std::io::Error::from(e))
}

/// One entry a case left in a shared place: where (as the host names the place), what, and whose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    /// The entry as it would be on the host (`/tmp/stage-1234`).
    pub path: PathBuf,
    /// In a private place: `directory`, `file`, `symlink`, `socket`, `fifo` or `other`;
    /// `host file it changed`, `host directory it changed` (its mode or owner), `host entry it
    /// removed`. In a watched place ([`watched`]): what others could use (`directory others can
    /// write`, `set-id file`, `file others can write`, `socket others can connect to`, `fifo
    /// others can write`, `device node`, or a `directory` holding one), a changed host entry
    /// as above, `host entry it replaced with a symlink`, or the place itself when it held more
    /// than the watch reads. Beside a declared state directory: that it is not one only its
    /// owner can write ([`excuse_state`]).
    pub kind: &'static str,
    /// Its owner (for a removed entry, the host's).
    pub uid: u32,
    /// Its permission bits, with set-id and sticky bits (for a removed entry, the host's).
    pub mode: u32,
    /// What the host has there, when the case changed it: owner and permission bits.
    pub was: Option<(u32, u32)>,
    /// For a directory it made, the first thing in it others could use: a directory group or
    /// others can write, a set-id file, a device node.
    pub hazard: Option<String>,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (a {}, owner uid {}, mode {:04o}",
            self.path.display(),
            self.kind,
            self.uid,
            self.mode
        )?;
        if let Some((uid, mode)) = self.was {
            write!(f, "; the host's: owner uid {uid}, mode {mode:04o}")?;
        }
        if let Some(hazard) = &self.hazard {
            write!(f, "; it holds {hazard}")?;
        }
        write!(f, ")")
    }
}

/// What of `left` is a leftover once the backend's declared state directories (`state`, its
/// handshake's `differences.state`) are passed over. A declared directory is sound when it is a
/// directory of this process's owner (the backend's adapter runs as the harness does) that
/// nobody else can write, holding nothing others could use (see [`Leftover::hazard`]), below
/// no directory others can write without the sticky bit: as the case made it, or as the host
/// has it when the case only used it. Below a sound one, each entry the case made is excused
/// unless it is itself a directory others can write or a set-id file; a host entry it changed or
/// removed never is. An unsound one excuses nothing, and is named as such (a later payload could
/// plant files there).
pub fn excuse_state(left: Vec<Leftover>, state: &[PathBuf]) -> Vec<Leftover> {
    use std::os::unix::fs::MetadataExt;
    let owner = nix::unistd::geteuid().as_raw();
    let sound_mode = |uid: u32, mode: u32| uid == owner && mode & 0o022 == 0;
    let mut kept: Vec<Leftover> = left;
    for dir in state {
        let made = kept.iter().position(|e| e.path == *dir);
        let own = match made {
            Some(at) => {
                let entry = &kept[at];
                entry.kind == "directory"
                    && sound_mode(entry.uid, entry.mode)
                    && entry.hazard.is_none()
            }
            None => std::fs::symlink_metadata(dir)
                .is_ok_and(|m| m.is_dir() && sound_mode(m.uid(), m.mode() & 0o7777)),
        };
        // Nobody else may rename it away or put another in its place.
        let sheltered = dir.ancestors().skip(1).all(|up| {
            kept.iter().find(|e| e.path == up).map_or_else(
                || {
                    std::fs::symlink_metadata(up).map_or(true, |m| {
                        m.is_dir() && (m.mode() & 0o022 == 0 || m.mode() & 0o1000 != 0)
                    })
                },
                |e| e.mode & 0o022 == 0 || e.mode & 0o1000 != 0,
            )
        });
        if own && sheltered {
            kept.retain(|e| {
                let excused = e.path.starts_with(dir)
                    && matches!(e.kind, "directory" | "file" | "symlink" | "socket" | "fifo")
                    && e.hazard.is_none()
                    && !(e.kind == "directory" && e.mode & 0o022 != 0)
                    && !(e.kind == "file" && e.mode & 0o6000 != 0);
                !excused
            });
        } else if let Some(at) = made {
            kept[at].kind =
                "declared state directory that is not a directory only its owner can write";
        }
    }
    kept
}

/// The first thing below the directory `dir` (one the case made) that others could use: a
/// directory group or others can write, a set-id file or a device node ([`first_below`]; past
/// its bound, nothing is named).
#[cfg(target_os = "linux")]
fn hazard_below(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let hazard = |mode: u32| {
        let writable = mode & 0o022 != 0;
        match mode & libc::S_IFMT {
            libc::S_IFDIR if writable => Some("directory others can write"),
            libc::S_IFREG if mode & 0o6000 != 0 => Some("set-id file"),
            libc::S_IFBLK | libc::S_IFCHR => Some("device node"),
            _ => None,
        }
    };
    match first_below(dir, 4096, |_, meta| hazard(meta.mode()), |_, _| true) {
        Below::Found(what) => Some(what),
        Below::Nothing | Below::TooMany => None,
    }
}

/// What [`first_below`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Below {
    /// The first entry named: its path relative to the directory, what it is and its mode.
    Found(String),
    /// Nothing named, every entry looked at.
    Nothing,
    /// More entries than the bound: not all were looked at.
    TooMany,
}

/// The first entry below the directory `dir` that `what` names (given its path and `lstat`),
/// going into the directories `enter` allows (given theirs), never through a symlink, looking at
/// `most` entries at most.
pub(crate) fn first_below(
    dir: &Path,
    most: usize,
    what: impl Fn(&Path, &std::fs::Metadata) -> Option<&'static str>,
    enter: impl Fn(&Path, &std::fs::Metadata) -> bool,
) -> Below {
    use std::os::unix::fs::MetadataExt;
    let mut queue = vec![PathBuf::new()];
    let mut seen = 0;
    while let Some(relative) = queue.pop() {
        let Ok(listing) = std::fs::read_dir(dir.join(&relative)) else {
            continue;
        };
        for entry in listing.flatten() {
            seen += 1;
            if seen > most {
                return Below::TooMany;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let path = relative.join(entry.file_name());
            if let Some(what) = what(&entry.path(), &meta) {
                let mode = meta.mode() & 0o7777;
                return Below::Found(format!("{} (a {what}, mode {mode:04o})", path.display()));
            }
            if meta.is_dir() && enter(&entry.path(), &meta) {
                queue.push(path);
            }
        }
    }
    Below::Nothing
}
