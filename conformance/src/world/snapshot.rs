//! Snapshots of a world and their diffs: every path under its roots with type, size, mode,
//! content hash and link target, and the changes between two snapshots, one readable line each.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::World;

impl World {
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
                    lines.push(format!("- {} (was {old})", shown(path)));
                }
                Some(new) if new != old && (!allowed(path) || new.is_device()) => {
                    lines.push(format!("~ {}: {old} => {new}", shown(path)));
                }
                _ => {}
            }
        }
        for (path, new) in &after.entries {
            if !self.entries.contains_key(path) && (!allowed(path) || new.is_device()) {
                lines.push(format!("+ {} ({new})", shown(path)));
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

/// A path for a person: UTF-8 as it is, every byte that is not UTF-8 as `\xHH`, so a name that
/// differs only in such bytes (`new\xFF` and `new\u{FFFD}`) shows differently.
pub fn shown(path: &Path) -> String {
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
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
