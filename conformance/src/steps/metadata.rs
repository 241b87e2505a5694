//! The `metadata` step: a change to an inode that is not its content (mode, owner, times,
//! extended attributes, set-id bits, size by path) is a file effect too. The harness makes a file,
//! a directory and a symlink outside the writable set (and, under `read-only`, a file and a
//! directory in the workspace), sets a `user.*` xattr on each it can, and records every inode's
//! mode, owner, size, mtime and ctime; one confined payload tries the step's effect on each; then
//! the host's inodes decide. Any change, ctime included (every successful metadata call moves it,
//! even a `chown` to the owner it already has), fails the case with the path and what changed, and
//! the launch's `files` class as it reported it (an honest `partial` naming `metadata` is judged by
//! the one levels rule; a backend that reported `full` is held to it).

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::{EnforcementClass, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
#[cfg(test)]
use crate::scenario::MetadataEffect;
use crate::scenario::MetadataStep;
use crate::steps::StepError;
use crate::world::{World, draw_hex, draw_one, shell_quote};

/// The payload: one Python process tries the effect on each target (`f:`, `d:`, `l:` for a file,
/// a directory, a symlink), every attempt allowed to fail; the host decides, not its output.
const PAYLOAD: &str = r#"
import os, struct, sys
effect, uid, gid, mark = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# A POSIX ACL as the kernel takes it (version 2; tag, permissions, id each): its owner, user `uid`
# and the mask with every permission, its group and others read-only.
def acl(user):
    entries = [(0x01, 7, 0xFFFFFFFF), (0x02, 7, user), (0x04, 5, 0xFFFFFFFF), (0x10, 7, 0xFFFFFFFF), (0x20, 5, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
# A file capability (vfs_cap_data revision 2): cap_net_bind_service permitted.
cap = bytes.fromhex("0000000200040000000000000000000000000000")
def go(f):
    try:
        f()
    except OSError:
        pass
for item in sys.argv[5:]:
    kind, path = item[0], item[2:]
    # A chown to the owner an inode already has needs no privilege at all (as root without
    # CAP_CHOWN, or as the owner), and still changes it (its ctime): tried first, then the real one.
    if effect == "lchown":
        if kind == "l":
            go(lambda: os.lchown(path, os.lstat(path).st_uid, os.lstat(path).st_gid))
            go(lambda: os.lchown(path, uid, gid))
        continue
    if kind == "l":
        continue
    if effect == "chmod":
        go(lambda: os.chmod(path, 0o777 if kind == "d" else 0o666))
    elif effect == "chown":
        go(lambda: os.chown(path, os.stat(path).st_uid, os.stat(path).st_gid))
        go(lambda: os.chown(path, uid, gid))
    elif effect == "utimes":
        go(lambda: os.utime(path, (86400, 86400)))
    elif effect == "xattr-user":
        go(lambda: os.setxattr(path, "user.note", b"x"))
        go(lambda: os.removexattr(path, "user.keep"))
    elif effect == "xattr-trusted":
        go(lambda: os.setxattr(path, "trusted.note", b"x"))
    elif effect == "xattr-security":
        go(lambda: os.setxattr(path, "security.note", b"x"))
        if kind == "f":
            go(lambda: os.setxattr(path, "security.capability", cap))
    elif effect == "acl":
        go(lambda: os.setxattr(path, "system.posix_acl_access", acl(uid)))
        if kind == "d":
            go(lambda: os.setxattr(path, "system.posix_acl_default", acl(uid)))
    elif effect == "setid":
        go(lambda: os.chmod(path, 0o4755 if kind == "f" else 0o2755))
    elif effect == "truncate" and kind == "f":
        go(lambda: os.truncate(path, 0))
print(mark)
"#;

/// What the harness compares of one inode.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Inode {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Inode {
    fn of(path: &Path) -> Option<Inode> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Inode {
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// What changed from `self` to `after`, in words.
    fn changes(&self, after: Option<&Inode>) -> Vec<String> {
        let Some(a) = after else {
            return vec!["gone".into()];
        };
        let mut out = Vec::new();
        if a.mode != self.mode {
            out.push(format!("mode {:o} -> {:o}", self.mode, a.mode));
        }
        if (a.uid, a.gid) != (self.uid, self.gid) {
            out.push(format!(
                "owner {}:{} -> {}:{}",
                self.uid, self.gid, a.uid, a.gid
            ));
        }
        if a.size != self.size {
            out.push(format!("size {} -> {}", self.size, a.size));
        }
        // Not the times themselves: a message replays byte for byte under the same seed.
        if a.mtime != self.mtime {
            out.push("mtime changed".into());
        }
        if a.ctime != self.ctime && out.is_empty() {
            out.push("ctime (an xattr or an owner set)".into());
        }
        out
    }
}

/// One target: its kind letter for the payload and its path.
struct Target {
    kind: char,
    path: PathBuf,
}

/// Makes the targets: a file, a directory and a symlink to the file outside; under `read-only`
/// also a file and a directory in the workspace. Each file and directory gets `user.keep` where
/// the filesystem takes user xattrs.
fn targets(world: &World, mode: sandbox::ConfinedMode) -> Result<Vec<Target>, StepError> {
    let name = |stem: &str| format!("{stem}-{}", draw_hex(6));
    let file = name(draw_one(&[
        "notes.txt",
        "config.json",
        "build.log",
        "data.csv",
    ]));
    let dir = name(draw_one(&["assets", "docs", "lib", "cache"]));
    let link = name(draw_one(&["latest", "current", "link"]));
    let mut out = vec![
        Target {
            kind: 'f',
            path: world.outside.join(&file),
        },
        Target {
            kind: 'd',
            path: world.outside.join(&dir),
        },
        Target {
            kind: 'l',
            path: world.outside.join(&link),
        },
    ];
    if mode == sandbox::ConfinedMode::ReadOnly {
        out.push(Target {
            kind: 'f',
            path: world.ws.join(&file),
        });
        out.push(Target {
            kind: 'd',
            path: world.ws.join(&dir),
        });
    }
    let made =
        |e: std::io::Error| StepError::Harness(format!("cannot make a metadata target: {e}"));
    for t in &out {
        match t.kind {
            'f' => std::fs::write(&t.path, "keep\n").map_err(made)?,
            'd' => std::fs::create_dir(&t.path).map_err(made)?,
            _ => std::os::unix::fs::symlink(&file, &t.path).map_err(made)?,
        }
        if t.kind != 'l' {
            set_user_xattr(&t.path);
        }
    }
    Ok(out)
}

/// Sets `user.keep` on `path` where the filesystem takes it (the payload then tries to remove
/// it); a filesystem without user xattrs leaves only the setting to try.
fn set_user_xattr(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(c_path), Ok(name)) = (
        std::ffi::CString::new(path.as_os_str().as_bytes()),
        std::ffi::CString::new("user.keep"),
    ) else {
        return;
    };
    // SAFETY: both pointers are valid NUL-terminated strings alive for the call, the value
    // points at 4 readable bytes whose length is passed; setxattr(2) only reads them. Neither
    // std nor nix wraps setxattr.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    let _ = unsafe {
        libc::setxattr(
            c_path.as_ptr(),
            name.as_ptr(),
            b"keep".as_ptr().cast(),
            4,
            0,
        )
    };
    // macOS's setxattr takes a position (0 for a whole value) before its options.
    // SAFETY: as above.
    #[cfg(target_os = "macos")]
    #[allow(unsafe_code)]
    let _ = unsafe {
        libc::setxattr(
            c_path.as_ptr(),
            name.as_ptr(),
            b"keep".as_ptr().cast(),
            4,
            0,
            0,
        )
    };
}

pub(super) fn run(backend: &Backend, step: &MetadataStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let world = World::for_effect(crate::scenario::Shape::Inside).map_err(super::world_error)?;
    let targets = targets(&world, step.mode)?;
    let before: Vec<Option<Inode>> = targets.iter().map(|t| Inode::of(&t.path)).collect();
    let effect = step.effect.as_str();
    let (uid, gid) = if nix::unistd::geteuid().is_root() {
        (1, 1)
    } else {
        (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        )
    };
    let mark = format!("{}-{}", draw_one(&["done", "ok", "finished"]), draw_hex(6));
    // `-I -S`: the standard library alone (no site-packages, no `PYTHON*` variables), so
    // nothing of the host's Python set-up changes what the payload does; it also starts in
    // two thirds of the time.
    let mut script = format!(
        "p=/usr/bin/python3; [ -x \"$p\" ] || p=python3\n\"$p\" -I -S -c {} {effect} {uid} {gid} {mark}",
        shell_quote(std::ffi::OsStr::new(PAYLOAD))
    );
    for t in &targets {
        let mut item = OsString::from(format!("{}:", t.kind));
        item.push(t.path.as_os_str());
        script.push(' ');
        script.push_str(&shell_quote(&item));
    }
    script.push('\n');
    let argv = crate::request::dress(&script, Vec::new()).argv;
    let (done, files) = launch_in_world(provider, &world, step.mode, &argv)?;
    let mut changed: Vec<String> = Vec::new();
    for (t, was) in targets.iter().zip(&before) {
        let Some(was) = was else { continue };
        let what = was.changes(Inode::of(&t.path).as_ref());
        if !what.is_empty() {
            changed.push(format!("{} ({})", t.path.display(), what.join(", ")));
        }
    }
    let stdout = String::from_utf8_lossy(&done.stdout);
    super::ran_to_mark(&done, &stdout, &mark)?;
    if changed.is_empty() {
        return Ok(());
    }
    // The gap this effect goes through, as a backend that leaves it open names it.
    let route = match step.effect {
        crate::scenario::MetadataEffect::Truncate => sandbox::gaps::TRUNCATE,
        _ => sandbox::gaps::METADATA,
    };
    Err(StepError::Unmet(format!(
        "{effect} under {} changed the host outside the writable set: {}; the launch reports \
         {files} {}{route})",
        step.mode,
        changed.join("; "),
        crate::expectations::THROUGH_GAP
    )))
}

/// Runs `argv` confined under `mode` in `world`'s workspace, asked about the world and its twin
/// alike; returns the call and its `files` class as the answer reported it.
fn launch_in_world(
    provider: &std::sync::Arc<dyn sandbox::SandboxProvider>,
    world: &World,
    mode: sandbox::ConfinedMode,
    argv: &[OsString],
) -> Result<(launch::Finished, String), StepError> {
    let ws = world.ws.clone();
    let policy = ProviderPolicy::new(mode, ws.clone())
        .with_roots(|r| r.with_temp_dir(None))
        .with_cwd(&ws);
    let twin = crate::metamorphic::Twin::new(provider.clone(), world, true)?;
    let answer = twin.confine(argv, &policy);
    twin.verdict()?;
    let confined = answer.map_err(|e| StepError::Unmet(format!("confine refused: {e}")))?;
    let report = confined.class_report(EnforcementClass::Files);
    let files = if report.ungoverned.is_empty() {
        format!("files {}", report.enforcement)
    } else {
        format!(
            "files {} (ungoverned: {})",
            report.enforcement,
            report.ungoverned.join(", ")
        )
    };
    let mut options = LaunchOptions::in_dir(&ws);
    options.env_remove.push("TMPDIR".into());
    options.timeout = Some(Duration::from_secs(30));
    crate::survivors::tag_launch(&mut options);
    Ok((launch::run(&confined, &options), files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_ctime_alone_is_named() {
        let was = Inode {
            mode: 0o100644,
            uid: 0,
            gid: 0,
            size: 5,
            mtime: (1, 0),
            ctime: (1, 0),
        };
        let xattr = Inode {
            ctime: (2, 0),
            ..was.clone()
        };
        assert_eq!(
            was.changes(Some(&xattr)),
            vec!["ctime (an xattr or an owner set)"]
        );
        let chmod = Inode {
            mode: 0o100666,
            ctime: (2, 0),
            ..was.clone()
        };
        assert_eq!(was.changes(Some(&chmod)), vec!["mode 100644 -> 100666"]);
        assert!(was.changes(Some(&was)).is_empty());
        let effect: MetadataEffect = serde_json::from_str("\"xattr-user\"").expect("an effect");
        assert_eq!(effect.as_str(), "xattr-user");
    }

    /// The `acl` effect, run unconfined, lands a POSIX ACL; on a file whose mode already shows
    /// what the ACL's mask allows, the mode stays as it was and the change is named by its ctime.
    #[test]
    fn an_acl_that_leaves_the_mode_bits_as_they_were_is_still_a_change() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        let file = dir.path().join("config.json");
        std::fs::write(&file, "{}").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o775)).expect("chmod");
        let was = Inode::of(&file).expect("stat");
        let target = format!("f:{}", file.display());
        // The named user is this one: an id this user namespace does not map is refused (EINVAL).
        let me = nix::unistd::geteuid().as_raw().to_string();
        let ran = std::process::Command::new("python3")
            .args(["-c", PAYLOAD, "acl", &me, &me, "mark", &target])
            .output()
            .expect("python3");
        assert_eq!(String::from_utf8_lossy(&ran.stdout), "mark\n", "{ran:?}");
        let acl = std::process::Command::new("python3")
            .args([
                "-c",
                "import os,sys; print(len(os.getxattr(sys.argv[1], 'system.posix_acl_access')))",
            ])
            .arg(&file)
            .output()
            .expect("python3");
        // Five entries of 8 bytes after a 4-byte header.
        assert_eq!(String::from_utf8_lossy(&acl.stdout), "44\n", "{acl:?}");
        let now = Inode::of(&file).expect("stat");
        assert_eq!(
            now.mode, was.mode,
            "the mask hides the grant from the mode bits"
        );
        assert_eq!(
            was.changes(Some(&now)),
            vec!["ctime (an xattr or an owner set)"]
        );
    }
}
