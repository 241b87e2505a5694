//! The private places themselves: a mount namespace whose `/tmp` and `/dev/shm` (a whole run's
//! `/var/tmp` too) are overlays of the host's own, their writes going to a tmpfs of the
//! namespace's, and the reading of what a case or a run made in them once it is over.

#[cfg(target_os = "linux")]
use std::path::Path;
use std::path::PathBuf;

use super::Leftover;
#[cfg(target_os = "linux")]
use super::{PLACES, RUN_PLACES, excuse_state, hazard_below};
use crate::steps::StepError;

/// What a case made in one private place: each entry of the overlay's upper directory `upper`
/// that the host's place (`lower`, a descriptor of the directory under the overlay) does not have,
/// and each host file it changed there; a directory both have is looked into, not named.
#[cfg(target_os = "linux")]
fn entries(
    place: &Path,
    upper: &Path,
    lower: &std::fs::File,
    relative: &Path,
    found: &mut Vec<Leftover>,
) -> Result<(), StepError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = upper.join(relative);
    let listing = std::fs::read_dir(&dir)
        .map_err(|e| StepError::harness(format!("cannot list {}: {e}", dir.display())))?;
    for entry in listing {
        let entry = entry.map_err(|e| StepError::harness(format!("{}: {e}", dir.display())))?;
        let meta = entry
            .metadata()
            .map_err(|e| StepError::harness(format!("{}: {e}", entry.path().display())))?;
        let kind = meta.file_type();
        let relative = relative.join(entry.file_name());
        let on_host =
            nix::sys::stat::fstatat(lower, &relative, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .ok();
        let host = on_host.map(|st| (st.st_uid, st.st_mode & 0o7777));
        // A whiteout: a host entry the case removed (it never reaches the host).
        if kind.is_char_device() && meta.rdev() == 0 {
            if let Some((uid, mode)) = host {
                found.push(Leftover {
                    path: place.join(&relative),
                    kind: "host entry it removed",
                    uid,
                    mode,
                    was: None,
                    hazard: None,
                });
            }
            continue;
        }
        let host_dir = on_host.is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        if kind.is_dir() && host_dir {
            // Copied up because something below it changed, or its own mode or owner did.
            if let Some(changed) = changed(&meta, on_host) {
                found.push(Leftover {
                    path: place.join(&relative),
                    kind: "host directory it changed",
                    uid: meta.uid(),
                    mode: meta.mode() & 0o7777,
                    was: Some(changed),
                    hazard: None,
                });
            }
            entries(place, upper, lower, &relative, found)?;
            continue;
        }
        found.push(Leftover {
            path: place.join(&relative),
            kind: match kind {
                t if t.is_dir() => "directory",
                t if t.is_file() && on_host.is_some() => "host file it changed",
                t if t.is_file() => "file",
                t if t.is_symlink() => "symlink",
                t if t.is_socket() => "socket",
                t if t.is_fifo() => "fifo",
                _ => "other",
            },
            uid: meta.uid(),
            mode: meta.mode() & 0o7777,
            was: None,
            hazard: kind.is_dir().then(|| hazard_below(&entry.path())).flatten(),
        });
    }
    Ok(())
}

/// The host's owner and permission bits, when the case's copy has other ones (or another group).
#[cfg(target_os = "linux")]
fn changed(meta: &std::fs::Metadata, host: Option<nix::sys::stat::FileStat>) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let host = host?;
    let (uid, mode) = (host.st_uid, host.st_mode & 0o7777);
    (meta.uid() != uid || meta.gid() != host.st_gid || meta.mode() & 0o7777 != mode)
        .then_some((uid, mode))
}

/// The mounts strictly below `place` that are not below another of them, each with a descriptor
/// (`O_PATH`) of what is mounted there, taken before an overlay hides them: mounted again on
/// top of it (recursively, so what is below them comes along).
#[cfg(target_os = "linux")]
fn submounts(place: &Path) -> Result<Vec<(PathBuf, std::os::fd::OwnedFd)>, StepError> {
    let table = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| StepError::harness(format!("cannot read the mount table: {e}")))?;
    let top = sandbox::mountinfo::top_mounts_below(&table, place);
    top.into_iter()
        .map(|point| {
            nix::fcntl::open(
                &point,
                nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map(|fd| (point.clone(), fd))
            .map_err(|e| StepError::harness(format!("cannot hold {}: {e}", point.display())))
        })
        .collect()
}

/// Every process in this thread's mount namespace but this process, killed (`SIGKILL`), each
/// described by its pid and command line.
#[cfg(target_os = "linux")]
fn still_here() -> Vec<String> {
    let Ok(ours) = std::fs::read_link("/proc/thread-self/ns/mnt") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(all) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in all.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid.unsigned_abs() == me {
            continue;
        }
        // Read through a thread that still runs: a process whose leader thread ended shows no
        // namespaces at /proc/<pid>, and runs on all the same; one none of whose threads can
        // run does nothing more.
        let Some(task) = sandbox::liveness::running_task(pid.unsigned_abs()) else {
            continue;
        };
        if std::fs::read_link(task.join("ns/mnt")).ok().as_ref() != Some(&ours) {
            continue;
        }
        let line = std::fs::read(task.join("cmdline")).unwrap_or_default();
        let line = String::from_utf8_lossy(&line).replace('\0', " ");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        found.push(format!("pid {pid}: {}", line.trim()));
    }
    found
}

/// Runs `body` (one case) with [`PLACES`] private to it, and returns what it left there, but
/// what lies in the backend's declared state directories `state` ([`excuse_state`]).
///
/// Each place is an overlay of the host's own: everything already there is seen (a launcher or a
/// clone under `/tmp` keeps working), while whatever the case makes or changes goes to an upper
/// directory on a tmpfs of the namespace's, read before the thread leaves the namespace and gone
/// with it; nothing reaches the host's place. The thread that calls this gets a filesystem
/// context of its own for good (`CLONE_FS`: its working directory is restored afterwards, and no
/// other thread of the harness changes it), and is back in the harness's mount namespace when
/// this returns.
#[cfg(target_os = "linux")]
pub fn in_private_places<T>(
    state: &[PathBuf],
    body: impl FnOnce() -> T,
) -> Result<(T, Vec<Leftover>), StepError> {
    let mut private = with_private_places(Scope::Case, body)?;
    private.left = excuse_state(private.left, state);
    if !private.stayed.is_empty() {
        // What the case left is named too: a helper that staged and one still running fail the
        // case the same, and the author needs both.
        let left: Vec<String> = private.left.iter().map(ToString::to_string).collect();
        let left = if left.is_empty() {
            String::new()
        } else {
            format!(
                "; it left {} entr{} in the host's shared places too (on the host: {})",
                left.len(),
                if left.len() == 1 { "y" } else { "ies" },
                left.join("; ")
            )
        };
        return Err(StepError::Unmet(format!(
            "{} process(es) of the case were still running in its mount namespace when it was over (killed now): {}{left}",
            private.stayed.len(),
            private.stayed.join("; ")
        )));
    }
    Ok((private.result, private.left))
}

/// What `body` left, run with [`PLACES`] private to it ([`with_private_places`]).
pub struct Private<T> {
    /// What `body` returned.
    pub result: T,
    /// The entries it left in the places, named as the host would name them.
    pub left: Vec<Leftover>,
    /// The processes still in its mount namespace when it was over (killed then), each
    /// `pid N: command line`.
    pub stayed: Vec<String>,
}

/// Whose the private places are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One case ([`in_private_places`]): the worlds it drops are removed at once, and the
    /// calling thread is back in the harness's mount namespace afterwards.
    Case,
    /// A whole run ([`crate::certify::places`]): worlds are removed as the run removes them (a
    /// sweep the body runs itself), and the calling thread, a thread of its own that ends
    /// afterwards, stays in the run's namespace (the threads the body started, which may
    /// outlive it, share its filesystem context, so it could not leave).
    Run,
}

/// Runs `body` with [`PLACES`] private to it (see [`Scope`]) and returns what it left there.
/// Threads the body starts share the namespace, and so do the processes they start.
#[cfg(target_os = "linux")]
pub fn with_private_places<T>(
    scope: Scope,
    body: impl FnOnce() -> T,
) -> Result<Private<T>, StepError> {
    use nix::sched::{CloneFlags, setns, unshare};

    let backing = crate::suite::private_dir("shared").map_err(StepError::harness)?;
    let base = backing.path().to_path_buf();
    if base.to_string_lossy().contains([',', ':', '\\']) {
        return Err(StepError::harness(format!(
            "{} cannot be named in overlay options (',', ':' or '\\')",
            base.display()
        )));
    }
    let cwd = std::env::current_dir().map_err(StepError::harness)?;
    let harness_ns = std::fs::File::open("/proc/thread-self/ns/mnt").map_err(|e| {
        StepError::harness(format!("cannot hold the harness's mount namespace: {e}"))
    })?;
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_FS).map_err(|e| {
        StepError::harness(format!(
            "cannot make a mount namespace for the case (it needs root): {e}"
        ))
    })?;
    let mut lowers: Vec<(PathBuf, PathBuf, std::fs::File)> = Vec::new();
    let mut held_uppers: Vec<std::fs::File> = Vec::new();
    let places: &[&str] = match scope {
        Scope::Case => &PLACES,
        Scope::Run => &RUN_PLACES,
    };
    let private = overlay_places(&base, places, &mut lowers, &mut held_uppers);
    let result = private.as_ref().ok().map(|()| {
        if scope == Scope::Case {
            crate::world::removed_at_once(body)
        } else {
            body()
        }
    });
    let mut left = Vec::new();
    // What of the case still runs in its namespace (a helper its runner detached, without the
    // case's tag): killed, and named, before anything is read.
    let stayed = private
        .as_ref()
        .ok()
        .map(|()| still_here())
        .unwrap_or_default();
    let listed = match private {
        Ok(()) => lowers.iter().try_for_each(|(place, upper, lower)| {
            let root = std::fs::metadata(upper)
                .map_err(|e| StepError::harness(format!("{}: {e}", upper.display())))?;
            if let Some(was) = changed(&root, nix::sys::stat::fstat(lower).ok()) {
                use std::os::unix::fs::MetadataExt;
                left.push(Leftover {
                    path: place.clone(),
                    kind: "host directory it changed",
                    uid: root.uid(),
                    mode: root.mode() & 0o7777,
                    was: Some(was),
                    hazard: None,
                });
            }
            entries(place, upper, lower, Path::new(""), &mut left)
        }),
        Err(e) => Err(e),
    };
    left.sort_by(|a, b| a.path.cmp(&b.path));
    // Back in the harness's namespace (which also sets this thread's directory to its root).
    if scope == Scope::Case {
        setns(&harness_ns, CloneFlags::CLONE_NEWNS)
            .map_err(|e| {
                StepError::harness(format!(
                    "cannot return to the harness's mount namespace: {e}"
                ))
            })
            .and_then(|()| {
                nix::unistd::chdir(&cwd).map_err(|e| {
                    StepError::harness(format!("cannot return to {}: {e}", cwd.display()))
                })
            })?;
    }
    listed?;
    match result {
        Some(result) => Ok(Private {
            result,
            left,
            stayed,
        }),
        None => Err(StepError::harness("the case did not run")),
    }
}

/// Makes [`PLACES`] private in this thread's new mount namespace: `/` a slave, a tmpfs on `base`
/// for the overlays' upper and work directories, each place an overlay of the host's own (what
/// was mounted below it mounted again on top), then the tmpfs detached. Each place goes into
/// `lowers` (the place, its upper directory as a descriptor's path, a descriptor of the host's
/// place under the overlay); `held_uppers` keeps the upper directories open.
#[cfg(target_os = "linux")]
fn overlay_places(
    base: &Path,
    places: &[&str],
    lowers: &mut Vec<(PathBuf, PathBuf, std::fs::File)>,
    held_uppers: &mut Vec<std::fs::File>,
) -> Result<(), StepError> {
    use nix::mount::{MsFlags, mount};

    // Nothing mounted here reaches the host; the host's mounts still reach here.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|e| StepError::harness(format!("cannot make / a slave mount: {e}")))?;
    mount(
        Some("tmpfs"),
        base,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0700"),
    )
    .map_err(|e| StepError::harness(format!("cannot mount a tmpfs on {}: {e}", base.display())))?;
    // The tmpfs is detached through a descriptor, and the directory it was mounted on removed
    // through one of its parent: an overlay of a place above `base` (a cache under /var/tmp)
    // hides its path, and a removal through the overlay would never reach the host.
    let base_fd = std::fs::File::open(base)
        .map_err(|e| StepError::harness(format!("cannot open {}: {e}", base.display())))?;
    let base_parent = base
        .parent()
        .and_then(|p| std::fs::File::open(p).ok())
        .zip(base.file_name());
    let mut pass_through: Vec<(PathBuf, std::os::fd::OwnedFd)> = Vec::new();
    for (i, place) in places.iter().enumerate() {
        let (upper, work) = (
            base.join(format!("{i}/upper")),
            base.join(format!("{i}/work")),
        );
        for dir in [&upper, &work] {
            std::fs::create_dir_all(dir)
                .map_err(|e| StepError::harness(format!("cannot make {}: {e}", dir.display())))?;
        }
        // The host's place itself, held before the overlay hides it, and what is mounted
        // below it (a clone bound back under a private /tmp, as `ci/isolate` does): an
        // overlay shows its lower directory's own filesystem only.
        let lower = std::fs::File::open(place)
            .map_err(|e| StepError::harness(format!("cannot open {place}: {e}")))?;
        let below = submounts(Path::new(place))?;
        // The harness's own cache, when it lies below the place (CI points `XDG_CACHE_HOME`
        // into /var/tmp), stays the host's: the calls' temp areas live there, and an overlay's
        // upper directory cannot lie on another overlay. Mounted again once the tmpfs below
        // it is detached, so no copy of that tmpfs comes along.
        if let Some(cache) = crate::suite::cache_home()
            .and_then(|c| std::fs::canonicalize(c).ok())
            .filter(|c| c.starts_with(place) && c.as_path() != Path::new(place))
            .filter(|c| !below.iter().any(|(at, _)| c.starts_with(at)))
        {
            let held = nix::fcntl::open(
                &cache,
                nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map_err(|e| StepError::harness(format!("cannot hold {}: {e}", cache.display())))?;
            pass_through.push((cache, held));
        }
        // The overlay's root takes the upper directory's mode and owner: the host's (1777 on
        // /tmp), so the case sees its place as it is, and a change to it shows.
        let host = nix::sys::stat::fstat(&lower)
            .map_err(|e| StepError::harness(format!("cannot stat {place}: {e}")))?;
        nix::unistd::chown(
            &upper,
            Some(nix::unistd::Uid::from_raw(host.st_uid)),
            Some(nix::unistd::Gid::from_raw(host.st_gid)),
        )
        .and_then(|()| {
            nix::sys::stat::fchmodat(
                nix::fcntl::AT_FDCWD,
                &upper,
                nix::sys::stat::Mode::from_bits_truncate(host.st_mode & 0o7777),
                nix::sys::stat::FchmodatFlags::FollowSymlink,
            )
        })
        .map_err(|e| StepError::harness(format!("cannot shape {}: {e}", upper.display())))?;
        // Read through a descriptor from now on: the tmpfs is taken out of sight below (and an
        // overlay of a place above `base` hides the path too).
        let upper_dir = std::fs::File::open(&upper)
            .map_err(|e| StepError::harness(format!("cannot open {}: {e}", upper.display())))?;
        let options = format!(
            "lowerdir={place},upperdir={},workdir={}",
            upper.display(),
            work.display()
        );
        mount(
            Some("overlay"),
            *place,
            Some("overlay"),
            MsFlags::empty(),
            Some(options.as_str()),
        )
        .map_err(|e| StepError::harness(format!("cannot overlay {place}: {e}")))?;
        for (at, held) in &below {
            mount_again(at, held)?;
        }
        held_uppers.push(upper_dir);
        lowers.push((PathBuf::from(place), upper, lower));
    }
    // The overlays hold the tmpfs; nothing else needs it where it was mounted. Detached, it
    // is in no mount table the case's (or the run's) sandboxes see (a sandbox that leaves
    // every mount writable would otherwise write there, under a name drawn per run), and
    // the directory it was mounted on is an empty one again, removed through its parent.
    let base_path = format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&base_fd)
    );
    nix::mount::umount2(base_path.as_str(), nix::mount::MntFlags::MNT_DETACH).map_err(|e| {
        StepError::harness(format!(
            "cannot detach the tmpfs on {}: {e}",
            base.display()
        ))
    })?;
    if let Some((parent, name)) = &base_parent {
        let _ = nix::unistd::unlinkat(parent, *name, nix::unistd::UnlinkatFlags::RemoveDir);
    }
    for (at, held) in &pass_through {
        mount_again(at, held)?;
    }
    for ((_, upper, _), held) in lowers.iter_mut().zip(held_uppers.iter()) {
        *upper = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(held)
        ));
    }
    Ok(())
}

/// Binds what `held` (a descriptor taken before an overlay hid it) names onto `at` again, with
/// what is mounted below it.
#[cfg(target_os = "linux")]
fn mount_again(at: &Path, held: &impl std::os::fd::AsRawFd) -> Result<(), StepError> {
    use nix::mount::{MsFlags, mount};
    let source = format!("/proc/self/fd/{}", held.as_raw_fd());
    mount(
        Some(source.as_str()),
        at,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| StepError::harness(format!("cannot mount {} again: {e}", at.display())))
}

/// Off Linux there is no mount namespace to make: nothing runs with private places.
#[cfg(not(target_os = "linux"))]
pub fn with_private_places<T>(
    _scope: Scope,
    _body: impl FnOnce() -> T,
) -> Result<Private<T>, StepError> {
    Err(StepError::harness(
        "private shared places need a Linux mount namespace",
    ))
}

/// Off Linux there is no mount namespace to make: a `leftovers` case cannot run.
#[cfg(not(target_os = "linux"))]
pub fn in_private_places<T>(
    _state: &[PathBuf],
    _body: impl FnOnce() -> T,
) -> Result<(T, Vec<Leftover>), StepError> {
    Err(StepError::Unavailable {
        step: "leftovers",
        needs: "Linux",
    })
}
