//! Mounts a payload left on a world (a successful attack in this mount namespace): found in
//! `/proc/self/mountinfo` and detached.

use std::path::{Path, PathBuf};

use super::World;

impl World {
    /// Mount points at or beneath the world's roots in this process's mount namespace.
    pub fn mounts(&self) -> Vec<PathBuf> {
        // Bytes, not text: a mount point whose name is not UTF-8 is a mount all the same.
        let Ok(info) = std::fs::read("/proc/self/mountinfo") else {
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
