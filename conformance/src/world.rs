//! A scratch world for one containment case: a workspace, an outside tree with a sentinel, the
//! symlinks and names the path shapes need, and scratch areas under `/tmp` and `/dev/shm`. The
//! world lives under `/var/tmp`, outside every writable root, and is removed on drop.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::model::{TempDirSpelling, WorkspaceSpelling};

/// Where worlds are made. Must not be under `/tmp` (which `workspace-write` may write). A user
/// other than root gets `<WORLD_BASE>-<uid>`, so root's and a user's runs never share a folder.
pub const WORLD_BASE: &str = "/var/tmp/sandbox-conformance";

/// The world base for this process's user.
fn world_base() -> PathBuf {
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        PathBuf::from(WORLD_BASE)
    } else {
        PathBuf::from(format!("{WORLD_BASE}-{uid}"))
    }
}

/// The sentinel's content; no case may ever change it.
pub const SENTINEL: &str = "sentinel";

/// One case's world.
pub struct World {
    /// The world directory (canonical).
    pub dir: PathBuf,
    /// A scratch directory under `/tmp`.
    pub tmp: PathBuf,
    /// A scratch directory under `/dev/shm`, made only when the host has `/dev/shm` (on a host
    /// without it the path still names where a write must not appear).
    pub shm: PathBuf,
}

impl World {
    /// Makes a fresh world with the fixed layout every shape relies on.
    pub fn new() -> io::Result<World> {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let spelled = world_base();
        std::fs::create_dir_all(&spelled)?;
        let base = std::fs::canonicalize(&spelled)?;
        if base.starts_with(std::fs::canonicalize("/tmp")?) {
            return Err(io::Error::other(format!(
                "{} resolves under /tmp ({}); containment worlds must be outside every writable root",
                spelled.display(),
                base.display()
            )));
        }
        let dir = base.join(format!("w-{id}"));
        let tmp = PathBuf::from(format!("/tmp/sandbox-conformance-{id}"));
        let shm = PathBuf::from(format!("/dev/shm/sandbox-conformance-{id}"));
        let world = World { dir, tmp, shm };
        world.lay_out()?;
        Ok(world)
    }

    fn lay_out(&self) -> io::Result<()> {
        let d = &self.dir;
        for sub in ["ws/dir", "outside", "tmpdir"] {
            std::fs::create_dir_all(d.join(sub))?;
        }
        std::fs::create_dir_all(self.tmp.join("ws/dir"))?;
        if Path::new("/dev/shm").is_dir() {
            std::fs::create_dir_all(&self.shm)?;
        }
        std::fs::write(d.join("outside/sentinel"), SENTINEL)?;
        for ws in [d.join("ws"), self.tmp.join("ws")] {
            std::fs::write(ws.join("src"), "src")?;
        }
        for (dir, suffix) in [
            (d.join("ws/dir"), OsStr::new("")),
            (d.join("ws"), OsStr::new("")),
            (d.join("outside"), OsStr::new("")),
            (d.join("tmpdir"), OsStr::new("")),
            (self.tmp.clone(), OsStr::new("")),
            (self.tmp.join("ws/dir"), OsStr::new("")),
            (d.join("ws/dir"), OsStr::from_bytes(b"\xff")),
            (d.join("outside"), OsStr::from_bytes(b"\xff")),
            (d.join("ws/with space"), OsStr::new(" x")),
        ] {
            populate(&dir, suffix)?;
        }
        symlink(d.join("outside"), d.join("ws/link_out"))?;
        symlink(d.join("outside/existing"), d.join("ws/file_link"))?;
        symlink(d.join("outside/new"), d.join("ws/dangling"))?;
        symlink(d.join("ws"), d.join("ws_alias"))?;
        std::fs::write(d.join("outside/linked_target"), "old")?;
        std::fs::hard_link(d.join("outside/linked_target"), d.join("ws/prelinked"))?;
        std::fs::write(d.join("afile"), "afile")?;
        Ok(())
    }

    /// Makes `dir` a git repository as `git init` leaves it (sample hooks, a config), before the
    /// call, the way a person's checkout is. Needs `git` on `PATH`.
    pub fn init_repo(&self, dir: &Path) -> Result<(), String> {
        let out = std::process::Command::new("git")
            .args(["-c", "init.defaultBranch=main", "init", "-q"])
            .arg(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .map_err(|e| format!("cannot run git (the protected family needs it): {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "git init {dir:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// The case's extra writable root (`%EXTRA%`): `extra/` in the world, made now.
    pub fn extra_root(&self) -> io::Result<PathBuf> {
        let extra = self.dir.join("extra");
        std::fs::create_dir_all(&extra)?;
        Ok(extra)
    }

    /// The workspace as a policy spells it.
    pub fn workspace(&self, spelling: WorkspaceSpelling) -> PathBuf {
        let d = &self.dir;
        match spelling {
            WorkspaceSpelling::Ws => d.join("ws"),
            WorkspaceSpelling::Alias => d.join("ws_alias"),
            WorkspaceSpelling::TrailingSlash => {
                let mut spelled = d.join("ws").into_os_string();
                spelled.push("/");
                PathBuf::from(spelled)
            }
            WorkspaceSpelling::UnderTmp => self.tmp.join("ws"),
            WorkspaceSpelling::FsRoot => PathBuf::from("/"),
            WorkspaceSpelling::Etc => PathBuf::from("/etc"),
            WorkspaceSpelling::World => d.clone(),
            WorkspaceSpelling::Missing => d.join("missing"),
            WorkspaceSpelling::File => d.join("afile"),
        }
    }

    /// A temp dir as a policy spells it.
    pub fn temp_dir(&self, spelling: TempDirSpelling) -> PathBuf {
        match spelling {
            TempDirSpelling::Outside => self.dir.join("tmpdir"),
            TempDirSpelling::FsRoot => PathBuf::from("/"),
            TempDirSpelling::Etc => PathBuf::from("/etc"),
            TempDirSpelling::World => self.dir.clone(),
            TempDirSpelling::File => self.dir.join("afile"),
            TempDirSpelling::Missing => self.dir.join("missing-tmpdir"),
        }
    }

    /// The roots a world diff covers: the world directory, its `/tmp` and `/dev/shm` scratch.
    fn roots(&self) -> [&Path; 3] {
        [&self.dir, &self.tmp, &self.shm]
    }

    /// Everything in the world now: paths, types, sizes, modes, content hashes, link targets.
    pub fn snapshot(&self) -> Snapshot {
        let mut entries = BTreeMap::new();
        let mut budget = SNAPSHOT_LIMIT;
        for root in self.roots() {
            walk(root, &mut entries, &mut budget);
        }
        Snapshot {
            entries,
            truncated: budget == 0,
        }
    }

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
                let _ = nix::mount::umount2(m.as_path(), nix::mount::MntFlags::MNT_DETACH);
            }
        }
        self.mounts()
    }
}

/// The most entries a snapshot records (a payload could create many files; the diff stays
/// bounded and says it was cut).
const SNAPSHOT_LIMIT: usize = 20_000;

/// The largest file a snapshot hashes in full; larger files are compared by size and the hash
/// of their first and last bytes.
const HASH_LIMIT: u64 = 1 << 20;

/// One entry of a world snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `file`, `dir`, `symlink`, `char-device`, `block-device`, `fifo` or `socket`.
    pub kind: &'static str,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// A hash of a regular file's content.
    pub hash: Option<u64>,
    /// A symlink's target.
    pub target: Option<PathBuf>,
}

impl Entry {
    /// True for a device node, which no case may ever leave in a world.
    pub fn is_device(&self) -> bool {
        matches!(self.kind, "char-device" | "block-device")
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:o} {} bytes", self.kind, self.mode, self.size)?;
        if let Some(t) = &self.target {
            write!(f, " -> {}", t.display())?;
        }
        if let Some(h) = self.hash {
            write!(f, " #{h:016x}")?;
        }
        Ok(())
    }
}

/// Everything under a world's roots at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    entries: BTreeMap<PathBuf, Entry>,
    truncated: bool,
}

impl Snapshot {
    /// The changes from `self` to `after` outside `may_change` (each path with everything beneath
    /// it), one readable line each; device nodes are reported wherever they are.
    pub fn diff(&self, after: &Snapshot, may_change: &[PathBuf]) -> Vec<String> {
        let allowed = |p: &Path| may_change.iter().any(|m| p.starts_with(m));
        let mut lines = Vec::new();
        for (path, old) in &self.entries {
            match after.entries.get(path) {
                None if !allowed(path) => {
                    lines.push(format!("- {} (was {old})", path.display()));
                }
                Some(new) if new != old && (!allowed(path) || new.is_device()) => {
                    lines.push(format!("~ {}: {old} => {new}", path.display()));
                }
                _ => {}
            }
        }
        for (path, new) in &after.entries {
            if !self.entries.contains_key(path) && (!allowed(path) || new.is_device()) {
                lines.push(format!("+ {} ({new})", path.display()));
            }
        }
        if after.truncated {
            lines.push(format!(
                "! the world holds more than {SNAPSHOT_LIMIT} entries afterwards"
            ));
        }
        lines
    }
}

fn walk(path: &Path, out: &mut BTreeMap<PathBuf, Entry>, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    *budget -= 1;
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        "dir"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_file() {
        "file"
    } else if ft.is_char_device() {
        "char-device"
    } else if ft.is_block_device() {
        "block-device"
    } else if ft.is_fifo() {
        "fifo"
    } else {
        "socket"
    };
    let entry = Entry {
        kind,
        size: if ft.is_dir() { 0 } else { meta.len() },
        mode: meta.permissions().mode() & 0o7777,
        hash: ft.is_file().then(|| hash_file(path, meta.len())),
        target: ft
            .is_symlink()
            .then(|| std::fs::read_link(path).ok())
            .flatten(),
    };
    out.insert(path.to_path_buf(), entry);
    if ft.is_dir() {
        let Ok(read) = std::fs::read_dir(path) else {
            return;
        };
        let mut children: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
        children.sort();
        for child in children {
            walk(&child, out, budget);
        }
    }
}

/// A hash of the content (of its first and last MiB when larger). Never blocks on a FIFO: only
/// regular files are hashed.
fn hash_file(path: &Path, len: u64) -> u64 {
    use std::hash::Hasher;
    use std::io::{Read, Seek, SeekFrom};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write_u64(len);
    let Ok(mut file) = std::fs::File::open(path) else {
        return 0;
    };
    let mut buf = Vec::new();
    let _ = (&mut file).take(HASH_LIMIT).read_to_end(&mut buf);
    if len > HASH_LIMIT && file.seek(SeekFrom::End(-(HASH_LIMIT as i64))).is_ok() {
        let _ = file.take(HASH_LIMIT).read_to_end(&mut buf);
    }
    hasher.write(&buf);
    hasher.finish()
}

/// A mount point as `/proc/self/mountinfo` writes it (space, tab, newline and backslash are
/// octal escapes).
fn unescape_mount_path(field: &str) -> PathBuf {
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

/// `existing<suffix>` (content `old`, mode 0644) and an empty `emptydir<suffix>` in `dir`.
fn populate(dir: &Path, suffix: &OsStr) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let existing = dir.join(name("existing", suffix));
    std::fs::write(&existing, "old")?;
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644))?;
    std::fs::create_dir_all(dir.join(name("emptydir", suffix)))
}

/// `base` followed by `suffix`, as a file name.
pub fn name(base: &str, suffix: &OsStr) -> OsString {
    let mut n = OsString::from(base);
    n.push(suffix);
    n
}

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
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.tmp);
        let _ = std::fs::remove_dir_all(&self.shm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_names_every_change_outside_what_may_change() {
        let world = World::new().expect("world");
        let before = world.snapshot();
        let outside = world.dir.join("outside");
        std::fs::write(outside.join("sentinel"), "changed").expect("write");
        std::fs::write(outside.join("new"), "x").expect("write");
        std::fs::remove_file(outside.join("existing")).expect("rm");
        std::fs::write(world.dir.join("ws/allowed"), "x").expect("write");
        symlink("/etc", world.tmp.join("link")).expect("symlink");
        let may = [world.dir.join("ws")];
        let diff = before.diff(&world.snapshot(), &may);
        let text = diff.join("\n");
        assert_eq!(diff.len(), 4, "{text}");
        assert!(text.contains(&format!("~ {}", outside.join("sentinel").display())));
        assert!(text.contains(&format!("+ {} (file", outside.join("new").display())));
        assert!(text.contains(&format!(
            "- {} (was file",
            outside.join("existing").display()
        )));
        assert!(text.contains("-> /etc"), "{text}");
        assert!(!text.contains("allowed"), "{text}");
    }

    #[test]
    fn a_mode_change_is_a_change() {
        let world = World::new().expect("world");
        let before = world.snapshot();
        let f = world.dir.join("outside/existing");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let diff = before.diff(&world.snapshot(), &[]);
        assert_eq!(diff.len(), 1, "{diff:?}");
        assert!(
            diff[0].contains("644") && diff[0].contains("600"),
            "{diff:?}"
        );
    }

    #[test]
    fn mount_points_are_unescaped_as_the_kernel_writes_them() {
        assert_eq!(
            unescape_mount_path("/var/tmp/with\\040space\\011tab"),
            PathBuf::from("/var/tmp/with space\ttab")
        );
        assert_eq!(unescape_mount_path("/a\\\\b"), PathBuf::from("/a\\\\b"));
    }
}
