//! Mounts a payload left on a world (a successful attack in this mount namespace): found in
//! `/proc/self/mountinfo` and detached.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use super::World;

impl World {
    /// Mount points at or beneath the world's roots in this process's mount namespace.
    pub fn mounts(&self) -> Vec<PathBuf> {
        let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = info
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .map(unescape_mount_path)
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
/// octal escapes).
pub(crate) fn unescape_mount_path(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let n = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(n);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Detaches the mount at `point` (lazily: what still uses it keeps it until done).
#[cfg(target_os = "linux")]
fn detach(point: &Path) {
    let _ = nix::mount::umount2(point, nix::mount::MntFlags::MNT_DETACH);
}

/// Off Linux there is no `/proc/self/mountinfo`, so [`World::mounts`] finds none to detach.
#[cfg(not(target_os = "linux"))]
fn detach(_point: &Path) {}
