//! What users other than an entry's owner may do with it: its mode as they meet it (its group's
//! bits when the group is not the owner's own, and what a POSIX access ACL grants them), and
//! what an entry of a watched place is when they could use it (for [`super::watched`]).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The file type bits of `st_mode`, and the types this module tells apart (the same numbers on
/// every Unix; `libc`'s are another integer type off Linux).
pub(super) const S_IFMT: u32 = 0o170_000;
pub(super) const S_IFDIR: u32 = 0o040_000;
pub(super) const S_IFREG: u32 = 0o100_000;
pub(super) const S_IFLNK: u32 = 0o120_000;
pub(super) const S_IFSOCK: u32 = 0o140_000;
pub(super) const S_IFIFO: u32 = 0o010_000;
pub(super) const S_IFBLK: u32 = 0o060_000;
pub(super) const S_IFCHR: u32 = 0o020_000;

/// The kernel's overflow user (`nobody`, 65534 unless the host says otherwise): the owner of
/// whatever an unprivileged sandbox's user namespace does not map, and the user many sandboxes
/// run their payloads as, so what it owns is shared by all of them.
pub(super) fn overflow_uid() -> u32 {
    static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/overflowuid")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(65534)
    })
}

/// The `st_mode` of the entry at `path` (`meta`, its `lstat`) as users other than its owner meet
/// it: without the group bits when the group is the owner's own ([`own_group`]: a person whose
/// umask is `002` makes `0775` directories only they can write), and with what a POSIX access
/// ACL grants others in the others' place ([`acl_grants`]: a `0700` staging root with an ACL
/// entry letting `nobody` write is one others can write).
pub(super) fn as_others_meet(path: &Path, meta: &std::fs::Metadata) -> u32 {
    let mode = meta.mode();
    let mode = if own_group(meta.uid(), meta.gid()) {
        mode & !0o070
    } else {
        mode
    };
    if mode & S_IFMT == S_IFLNK {
        return mode;
    }
    mode | acl_grants(path, meta.uid(), "system.posix_acl_access")
}

/// What the default ACL of the directory at `path` (owner `uid`) grants users other than its
/// owner in what is made in it, as `rwx` bits: whatever their umask, each file made there
/// carries it.
pub(super) fn inherited_grants(path: &Path, uid: u32) -> u32 {
    acl_grants(path, uid, "system.posix_acl_default")
}

/// Whether the regular file at `path` (`meta`; `shared`, its mode as others meet it:
/// [`as_others_meet`]) runs with file capabilities for users other than its owner: they may
/// execute it and it carries `security.capability` (a staged `unshare` with `cap_sys_admin` is
/// as good as set-uid root).
pub(super) fn runs_with_capabilities(path: &Path, meta: &std::fs::Metadata, shared: u32) -> bool {
    meta.file_type().is_file()
        && shared & 0o011 != 0
        && super::above::acl(path, "security.capability").is_some_and(|c| !c.is_empty())
}

/// Whether `uid` is another person's: a login user's (from 1000, the first uid `useradd` gives
/// on Debian, Ubuntu and Fedora) that is neither this process's owner nor the overflow user. A
/// run cannot make what they own (as a user) and does not (as root): what they make in the
/// temporary places meanwhile (an X server's socket directory, a shared compiler cache) is
/// theirs.
pub(super) fn another_persons(uid: u32) -> bool {
    uid >= 1000 && uid != overflow_uid() && uid != nix::unistd::geteuid().as_raw()
}

/// What the ACL `name` of `path` grants users other than its owner `uid`, as `rwx` bits (`0o7`
/// at most): each named user's entry but the owner's, each named group's but the owner's own,
/// through the ACL's mask; for a default ACL, the others' entry too. Nothing without an ACL.
fn acl_grants(path: &Path, uid: u32, name: &str) -> u32 {
    /// The tags of a named user's, a named group's, the mask's and the others' entry
    /// (`acl_ea_entry`).
    const USER: u16 = 0x02;
    const GROUP: u16 = 0x08;
    const MASK: u16 = 0x10;
    const OTHER: u16 = 0x20;
    let default = name == "system.posix_acl_default";
    let Some(acl) = super::above::acl(path, name) else {
        return 0;
    };
    // A 4-byte version, then entries of a 16-bit tag, 16-bit permissions and a 32-bit id.
    let entries: Vec<(u16, u32, u32)> = acl
        .get(4..)
        .unwrap_or_default()
        .chunks_exact(8)
        .map(|e| {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u32::from(u16::from_le_bytes([e[2], e[3]]));
            let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            (tag, perm, id)
        })
        .collect();
    let mask = entries
        .iter()
        .find(|(tag, _, _)| *tag == MASK)
        .map_or(0o7, |(_, perm, _)| *perm);
    entries
        .iter()
        .filter(|&&(tag, _, id)| {
            (tag == USER && id != uid) || (tag == GROUP && !own_group(uid, id))
        })
        .fold(0, |bits, (_, perm, _)| bits | (perm & mask & 0o7))
        | entries
            .iter()
            .filter(|(tag, _, _)| default && *tag == OTHER)
            .fold(0, |bits, (_, perm, _)| bits | (perm & 0o7))
}

/// Whether the group `gid` is the user `uid`'s own: the user's primary group, named as the user
/// is, with no other member listed (a user-private group, as `useradd` makes on Debian and
/// Ubuntu, and root's; the user listed as its own member too). Its group bits let nobody else
/// in. Asked once per pair.
pub(super) fn own_group(uid: u32, gid: u32) -> bool {
    use nix::unistd::{Gid, Group, Uid, User};
    static KNOWN: std::sync::OnceLock<std::sync::Mutex<HashMap<(u32, u32), bool>>> =
        std::sync::OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    if let Some(own) = known.lock().ok().and_then(|k| k.get(&(uid, gid)).copied()) {
        return own;
    }
    let user = User::from_uid(Uid::from_raw(uid)).ok().flatten();
    let group = Group::from_gid(Gid::from_raw(gid)).ok().flatten();
    let own = match (user, group) {
        (Some(user), Some(group)) => {
            user.gid.as_raw() == gid
                && group.name == user.name
                && group.mem.iter().all(|m| *m == user.name)
        }
        _ => false,
    };
    if let Ok(mut known) = known.lock() {
        known.insert((uid, gid), own);
    }
    own
}

/// What an entry of `/run` with this `st_mode` is, when users other than its owner could use
/// it; `None` when they cannot (a symlink's own bits mean nothing).
pub(super) fn usable_by_others(mode: u32) -> Option<&'static str> {
    let writable = mode & 0o022 != 0;
    match mode & S_IFMT {
        S_IFDIR if writable => Some("directory others can write"),
        S_IFREG if mode & 0o6000 != 0 => Some("set-id file"),
        S_IFREG if writable => Some("file others can write"),
        S_IFSOCK if writable => Some("socket others can connect to"),
        S_IFIFO if writable => Some("fifo others can write"),
        S_IFIFO if mode & 0o044 != 0 => Some("fifo others can read"),
        S_IFBLK | S_IFCHR => Some("device node"),
        _ => None,
    }
}
