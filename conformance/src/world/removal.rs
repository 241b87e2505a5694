//! Removing worlds: at once when one drops, or deferred until a sweep (a certify run), and never
//! through a mount a payload left behind.

use std::path::PathBuf;
use std::sync::Mutex;

use super::World;

impl Drop for World {
    fn drop(&mut self) {
        // A payload that escaped may have left a mount on the world (say, a bind of `/etc` over
        // the workspace): detach it first, and never delete through a mount that stays.
        let stuck = self.unmount_leftovers();
        if !stuck.is_empty() {
            eprintln!(
                "conformance: leaving world {} in place: mounts remain at {stuck:?}",
                self.dir.display()
            );
            return;
        }
        if !AT_ONCE.get()
            && let Ok(mut deferred) = DEFERRED.lock()
            && let Some(later) = deferred.as_mut()
        {
            // Each root is renamed out of the way now (a rename frees no inode) and removed by
            // the sweep: its name is free again at once, so the worlds of a run collide only
            // with the ones running beside them, and a seed replays the same names.
            static RENAMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            for root in self.roots() {
                if std::fs::symlink_metadata(root).is_err() {
                    continue;
                }
                let n = RENAMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let aside = root.with_file_name(format!("{ASIDE}{}-{n}", std::process::id()));
                match std::fs::rename(root, &aside) {
                    Ok(()) => later.push(aside),
                    Err(_) => later.push(root.to_path_buf()),
                }
            }
            return;
        }
        for root in self.roots() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

/// The roots of worlds dropped while removal is deferred ([`defer_removal`]), for [`sweep`].
static DEFERRED: Mutex<Option<Vec<PathBuf>>> = Mutex::new(None);

/// Keeps the worlds dropped from now on until [`sweep`] removes them all (a certify run does
/// this). On a journal-less ext4 (this project's reference machine) every inode made looks past
/// each inode freed in the last 30 s, so a run that removes each world as its case ends makes
/// every later world dearer: measured, a fifth of the run's CPU went to that scan. A world's
/// folder stays taken until the sweep, so no later world is drawn onto it.
pub fn defer_removal() {
    if let Ok(mut deferred) = DEFERRED.lock() {
        deferred.get_or_insert_with(Vec::new);
    }
}

/// The prefix of a world's root renamed aside for the sweep: `.removed-<pid>-<n>`.
const ASIDE: &str = ".removed-";

/// Removes what runs of this user that are no longer alive renamed aside and never swept (a run
/// killed before its sweep, a world a survivor was still writing in): every `.removed-<pid>-<n>`
/// of this user's in a world base or project folder whose process is gone. A live process's are
/// its own business, whatever it is. Called before a run makes its places private (a removal
/// through the run's overlay of `/var/tmp` would remove nothing, and show as a host entry the
/// run removed).
pub fn tidy_dead_runs() {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let places = super::places();
    let dirs = places
        .bases
        .iter()
        .map(|(base, _)| base)
        .chain(&places.folders);
    for dir in dirs {
        let Ok(listing) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in listing.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(ASIDE))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
            else {
                continue;
            };
            let mine = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
            let alive =
                std::path::Path::new(&format!("/proc/{pid}")).exists() || pid == std::process::id();
            if mine && !alive {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Whether worlds dropped now are kept for a sweep (a certify run is under way).
pub(super) fn deferring() -> bool {
    DEFERRED.lock().is_ok_and(|d| d.is_some())
}

thread_local! {
    /// Set while a case with private shared places runs on this thread
    /// ([`crate::leftovers`]): its worlds are removed as they drop, never renamed aside there
    /// for a sweep that runs in the host's places.
    static AT_ONCE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `body` with every world dropped on this thread removed at once.
pub(crate) fn removed_at_once<T>(body: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            AT_ONCE.set(self.0);
        }
    }
    let _restore = Restore(AT_ONCE.replace(true));
    body()
}

/// Removes every world dropped since [`defer_removal`], on `threads` threads, and removes each
/// world dropped from now on at once again.
pub fn sweep(threads: usize) {
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(sweep_so_far);
        }
    });
    if let Ok(mut deferred) = DEFERRED.lock() {
        for root in deferred.take().unwrap_or_default() {
            remove(root);
        }
    }
    super::host::drop_template();
}

/// Removes the worlds dropped so far, one at a time, and goes on deferring: for each worker with
/// no case left to start, while others finish theirs (no world is made after that, so the freed
/// inodes slow nothing down). Workers that call it together share the work.
pub fn sweep_so_far() {
    while let Some(root) = DEFERRED
        .lock()
        .ok()
        .and_then(|mut d| d.as_mut().and_then(Vec::pop))
    {
        remove(root);
    }
}

/// The worlds a sweep could not remove, for [`sweep_again`].
static STUCK: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes the world at `root`, or keeps it for [`sweep_again`] when it is still there (a
/// process the run left was still writing in it).
fn remove(root: PathBuf) {
    if std::fs::remove_dir_all(&root).is_err()
        && std::fs::symlink_metadata(&root).is_ok()
        && let Ok(mut stuck) = STUCK.lock()
    {
        stuck.push(root);
    }
}

/// Removes once more the worlds the sweep could not: called when the run's last processes are
/// gone (killed as survivors), so nothing writes in them any more.
pub fn sweep_again() {
    let stuck = STUCK
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    for root in stuck {
        if let Err(e) = std::fs::remove_dir_all(&root)
            && std::fs::symlink_metadata(&root).is_ok()
        {
            eprintln!("conformance: cannot remove world {}: {e}", root.display());
        }
    }
}
