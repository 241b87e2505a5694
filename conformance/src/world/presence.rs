//! Whether another run of the harness by this user holds worlds now. Each process holds a shared
//! `flock` on `harness.lock` in this user's cache (`sandbox-conformance`) from its first world
//! on; a certification, once its own worlds are gone, lets go of its own and asks for the lock
//! exclusively: granted, no other process of this user's harness (a certification, the suite's
//! tests) has worlds, fixtures or cases in the host's temporary places now, so what this user
//! made there is the run's to answer for ([`crate::leftovers::watched`]).

use std::sync::Mutex;

/// This process's hold, from its first world on.
static HELD: Mutex<Option<nix::fcntl::Flock<std::fs::File>>> = Mutex::new(None);

/// The lock file, in this user's cache (made when missing).
fn lock_file() -> Option<std::fs::File> {
    let dir = crate::suite::cache_home()?.join("sandbox-conformance");
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("harness.lock"))
        .ok()
}

/// Says this process holds worlds (once; a failure to say so only makes another run's look
/// less sure, never this run's wrong).
pub(super) fn announce() {
    let Ok(mut held) = HELD.lock() else {
        return;
    };
    if held.is_none() {
        *held = lock_file().and_then(|f| {
            nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockSharedNonblock).ok()
        });
    }
}

/// Whether no other process of this user's harness holds worlds now: this process's own hold is
/// let go first (its worlds are gone), then the lock is asked for exclusively, without waiting.
/// False when the lock cannot be had at all.
pub fn alone() -> bool {
    if let Ok(mut held) = HELD.lock() {
        held.take();
    }
    lock_file().is_some_and(|f| {
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    /// While another process of this user holds the lock shared (as a run with worlds does),
    /// this one is not alone.
    #[test]
    fn another_process_with_worlds_means_a_run_is_not_alone() {
        drop(lock_file().expect("the lock file in this user's cache"));
        let path = crate::suite::cache_home()
            .expect("a cache")
            .join("sandbox-conformance/harness.lock");
        // util-linux's flock(1) holds it shared, says so, and keeps it until its stdin closes.
        let mut holder = std::process::Command::new("flock")
            .arg("-s")
            .arg(&path)
            .args(["-c", "echo held; read _"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("flock(1)");
        let mut said = String::new();
        std::io::BufReader::new(holder.stdout.take().expect("stdout"))
            .read_line(&mut said)
            .expect("read");
        assert_eq!(said, "held\n");
        assert!(!alone(), "another process holds worlds");
        drop(holder.stdin.take());
        holder.wait().expect("wait");
    }
}
