//! The host's directories above the run's worlds: each place worlds are drawn in (`/var/tmp`,
//! the home directory, `/srv`, the project folders in them) and every directory above it. A
//! backend that widens one of them (a mode bit, its owner or group, a POSIX ACL) opens what lies
//! below to other users, though nothing of a case's world changed: found red-teaming, a root
//! runner that granted a user search permission on every parent of the workspace through an ACL
//! (the mode bits of `/srv` and `/var` stayed 0755; `/root` went from 0700 to 0710), and the run
//! was CERTIFIED. The run reads them when it starts and when it is over, from the harness's own
//! mount namespace, and each one that changed fails it (named under `left_in_shared_places`).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::Leftover;

/// The two ACLs a directory may carry, as `xattr` names.
const ACLS: [&str; 2] = ["system.posix_acl_access", "system.posix_acl_default"];

/// What is compared of one directory.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Dir {
    uid: u32,
    gid: u32,
    mode: u32,
    /// Each ACL's bytes (`None`: it has none, or the filesystem keeps none).
    acls: [Option<Vec<u8>>; 2],
}

impl Dir {
    fn of(path: &Path) -> Option<Dir> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(Dir {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
            acls: ACLS.map(|name| acl(path, name)),
        })
    }
}

/// The ACL `name` of `path`, when it has one.
pub(super) fn acl(path: &Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    let len = rustix::fs::lgetxattr(path, name, &mut buf[..]).ok()?;
    buf.truncate(len);
    Some(buf)
}

/// A POSIX ACL as the kernel keeps it in `system.posix_acl_access`: version 2, then each entry's
/// tag, permissions and id (`u32::MAX` where the tag names none), for the tests to set.
#[cfg(test)]
pub(super) fn acl_bytes(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut bytes = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        bytes.extend(tag.to_le_bytes());
        bytes.extend(perm.to_le_bytes());
        bytes.extend(id.to_le_bytes());
    }
    bytes
}

/// The directories above the run's worlds at one moment.
#[derive(Debug, Default)]
pub struct Above(BTreeMap<PathBuf, Option<Dir>>);

impl Above {
    /// Reads each place worlds are drawn in, its project folders, and every directory above them.
    pub fn now() -> Self {
        let places = crate::world::places();
        let mut dirs: Vec<&Path> = places
            .bases
            .iter()
            .map(|(base, _)| base.as_path())
            .chain(places.folders.iter().map(PathBuf::as_path))
            .flat_map(Path::ancestors)
            .collect();
        dirs.sort();
        dirs.dedup();
        Self::of(&dirs)
    }

    fn of(dirs: &[&Path]) -> Self {
        Self(dirs.iter().map(|d| (d.to_path_buf(), Dir::of(d))).collect())
    }

    /// Each directory that is not as it was in `before`, named with what changed.
    pub fn changed_since(&self, before: &Above) -> Vec<Leftover> {
        before
            .0
            .iter()
            .filter_map(|(path, was)| {
                let was = was.as_ref()?;
                let now = self.0.get(path).cloned().flatten();
                let kind = match &now {
                    None => "host directory above the run's worlds it removed",
                    Some(now) if now == was => return None,
                    Some(now) if (now.uid, now.gid) != (was.uid, was.gid) => {
                        "host directory above the run's worlds whose owner or group it changed"
                    }
                    Some(now) if now.mode != was.mode => {
                        "host directory above the run's worlds whose mode it changed"
                    }
                    Some(_) => "host directory above the run's worlds whose ACL it changed",
                };
                let now = now.as_ref();
                Some(Leftover {
                    path: path.clone(),
                    kind,
                    uid: now.map_or(was.uid, |n| n.uid),
                    mode: now.map_or(was.mode, |n| n.mode),
                    was: Some((was.uid, was.mode)),
                    hazard: None,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_mode_or_acl_above_the_worlds_is_named_and_nothing_else() {
        use std::os::unix::fs::PermissionsExt;
        let top = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        let (kept, chmodded, acled) = (
            top.path().join("kept"),
            top.path().join("chmodded"),
            top.path().join("acled"),
        );
        for d in [&kept, &chmodded, &acled] {
            std::fs::create_dir(d).expect("mkdir");
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o775)).expect("chmod");
        }
        let dirs = [kept.as_path(), chmodded.as_path(), acled.as_path()];
        let before = Above::of(&dirs);
        std::fs::set_permissions(&chmodded, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        // A user granted search through an ACL whose mask leaves the mode bits as they were (this
        // very user: an id this user namespace does not map is refused with EINVAL).
        let me = nix::unistd::geteuid().as_raw();
        let acl = acl_bytes(&[
            (0x01, 7, u32::MAX),
            (0x02, 1, me),
            (0x04, 7, u32::MAX),
            (0x10, 7, u32::MAX),
            (0x20, 5, u32::MAX),
        ]);
        rustix::fs::setxattr(
            &acled,
            "system.posix_acl_access",
            &acl,
            rustix::fs::XattrFlags::empty(),
        )
        .expect("an ACL (this host's /var/tmp takes them)");
        let named: Vec<String> = Above::of(&dirs)
            .changed_since(&before)
            .iter()
            .map(ToString::to_string)
            .collect();
        let uid = nix::unistd::geteuid().as_raw();
        let kind = "a host directory above the run's worlds whose";
        assert_eq!(
            named,
            [
                format!(
                    "{} ({kind} ACL it changed, owner uid {uid}, mode 0775; the host's: owner uid {uid}, mode 0775)",
                    acled.display()
                ),
                format!(
                    "{} ({kind} mode it changed, owner uid {uid}, mode 0777; the host's: owner uid {uid}, mode 0775)",
                    chmodded.display()
                ),
            ]
        );
    }
}
