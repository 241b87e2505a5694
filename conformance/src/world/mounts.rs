//! Mounts a payload left on a world (a successful attack in this mount namespace): found in
//! `/proc/self/mountinfo` and detached.

use std::path::{Path, PathBuf};

use super::World;

impl World {
    /// Mount points at or beneath the world's roots in this process's mount namespace.
    pub fn mounts(&self) -> Vec<PathBuf> {
        // Bytes, not text: a mount point whose name is not UTF-8 is a mount all the same.
        let Some(info) = mount_table() else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = sandbox::mountinfo::entries(&info)
            .into_iter()
            .map(|m| m.point)
            .filter(|p| self.roots().iter().any(|root| p.starts_with(root)))
            .collect();
        // Deepest first, so nested mounts come off before their parents.
        found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        found
    }

    /// Detaches every mount a payload left on the world (a successful attack in this mount
    /// namespace). Returns the mount points that are still there.
    pub fn unmount_leftovers(&self) -> Vec<PathBuf> {
        for _ in 0..8 {
            let mounts = self.mounts();
            if mounts.is_empty() {
                return mounts;
            }
            for m in &mounts {
                detach(m);
            }
        }
        self.mounts()
    }
}

/// This process's `/proc/self/mountinfo`, read again only when the kernel says the table
/// changed since the last read: an open mount table polls `POLLPRI` once the mount namespace's
/// event count moves (any mount or unmount in it), so a payload's mount is never missed, while
/// the worlds of a run, each looked at three times or more, cost one read while nothing
/// changes. Linux only; `None` where it cannot be read.
#[cfg(target_os = "linux")]
fn mount_table() -> Option<Vec<u8>> {
    use std::io::{Read, Seek};
    use std::sync::Mutex;

    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

    static TABLE: Mutex<Option<(std::fs::File, Vec<u8>)>> = Mutex::new(None);
    let mut table = TABLE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((file, bytes)) = table.as_mut() {
        let mut fds = [PollFd::new(
            std::os::fd::AsFd::as_fd(file),
            PollFlags::POLLPRI,
        )];
        let changed = poll(&mut fds, PollTimeout::ZERO).map_or(true, |_| {
            fds[0]
                .revents()
                .is_none_or(|r| r.intersects(PollFlags::POLLPRI | PollFlags::POLLERR))
        });
        if !changed {
            return Some(bytes.clone());
        }
        bytes.clear();
        let read = file
            .rewind()
            .and_then(|()| file.read_to_end(bytes).map(|_| ()));
        if read.is_ok() {
            return Some(bytes.clone());
        }
        *table = None;
        return std::fs::read("/proc/self/mountinfo").ok();
    }
    // Opened first, read after: a change between the two is polled next time.
    let mut file = std::fs::File::open("/proc/self/mountinfo").ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    *table = Some((file, bytes.clone()));
    Some(bytes)
}

/// Off Linux there is no mount table to read.
#[cfg(not(target_os = "linux"))]
fn mount_table() -> Option<Vec<u8>> {
    None
}

/// A mount point as `/proc/self/mountinfo` writes it (space, tab, newline and backslash are
/// octal escapes): [`sandbox::mountinfo::unescape`] on its bytes.
pub(crate) fn unescape_mount_path(field: &str) -> PathBuf {
    sandbox::mountinfo::unescape(field.as_bytes())
}

/// Detaches the mount at `point` (lazily: what still uses it keeps it until done).
#[cfg(target_os = "linux")]
fn detach(point: &Path) {
    let _ = nix::mount::umount2(point, nix::mount::MntFlags::MNT_DETACH);
}

/// Off Linux there is no `/proc/self/mountinfo`, so [`World::mounts`] finds none to detach.
#[cfg(not(target_os = "linux"))]
fn detach(_point: &Path) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::mount_table;

    /// Set in the child that [`a_mount_made_after_the_last_read_is_seen`] starts.
    const CHILD: &str = "CONFORMANCE_MOUNT_TABLE_CHILD";

    /// The mount table is cached between looks: a mount made after the last read is in the
    /// next one, and gone from the one after its unmount. Mounting needs a mount namespace of
    /// the test's own (root or not), so the test runs itself again under `unshare`.
    #[test]
    fn a_mount_made_after_the_last_read_is_seen() {
        if std::env::var_os(CHILD).is_none() {
            let exe = std::env::current_exe().expect("the test binary");
            let out = std::process::Command::new("unshare")
                .args([
                    "--user",
                    "--map-root-user",
                    "--mount",
                    "--propagation",
                    "private",
                ])
                .arg(exe)
                .args([
                    "--exact",
                    "world::mounts::tests::a_mount_made_after_the_last_read_is_seen",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, "1")
                .output()
                .expect("unshare (util-linux) runs");
            assert!(
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
                "the child failed: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let dir = tempfile::tempdir().expect("a scratch dir");
        let point = dir.path().to_string_lossy().into_owned();
        let has = |table: &[u8]| String::from_utf8_lossy(table).contains(&format!(" {point} "));
        assert!(!has(&mount_table().expect("the table")), "not mounted yet");
        assert!(!has(&mount_table().expect("the table")), "the cached table");
        nix::mount::mount(
            Some("tmpfs"),
            dir.path(),
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .expect("a tmpfs in the test's own mount namespace");
        assert!(
            has(&mount_table().expect("the table")),
            "the new mount is seen"
        );
        assert!(has(&mount_table().expect("the table")), "and kept");
        nix::mount::umount2(dir.path(), nix::mount::MntFlags::MNT_DETACH).expect("umount");
        assert!(
            !has(&mount_table().expect("the table")),
            "the unmount is seen"
        );
    }
}
