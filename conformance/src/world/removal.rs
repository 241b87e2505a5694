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
                let aside = root.with_file_name(format!(".removed-{}-{n}", std::process::id()));
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
            let _ = std::fs::remove_dir_all(root);
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
        let _ = std::fs::remove_dir_all(root);
    }
}
