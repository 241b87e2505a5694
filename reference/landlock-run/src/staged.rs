//! The staging part of the launcher's contract: the `N.target` record beside each entry `N` the
//! emulator staged (`--stage-fd`), saying where the entry belongs.
//!
//! The launcher writes it and the caller reads it to merge the entry after the call. A path may
//! hold any byte but NUL (a newline, bytes that are not UTF-8), so the record puts the path
//! last, raw: `DEV:INO\n` then the path's bytes to the end of the file. The device and inode
//! are the target directory's when it was staged, for the caller to check that the folder it
//! opens by that path is still the same one.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where one staged entry belongs: the target directory's path (as the launcher's namespace
/// spells it, which for the workspace and the extra roots is the host's) and its identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedTarget {
    /// The directory the staged entry is to be merged into.
    pub path: PathBuf,
    /// The directory's device number (`st_dev`) when it was staged.
    pub dev: u64,
    /// The directory's inode number (`st_ino`) when it was staged.
    pub ino: u64,
}

/// The suffix of the record's file name: entry `N` has its record in `N.target`.
pub const RECORD_SUFFIX: &str = ".target";

impl StagedTarget {
    /// The record's bytes, as `N.target` holds them.
    pub fn encode(&self) -> Vec<u8> {
        let mut record = format!("{}:{}\n", self.dev, self.ino).into_bytes();
        record.extend_from_slice(self.path.as_os_str().as_bytes());
        record
    }

    /// Reads a record back; `None` when it is not one (a torn or foreign file).
    pub fn decode(record: &[u8]) -> Option<Self> {
        let newline = record.iter().position(|&b| b == b'\n')?;
        let (id, path) = (&record[..newline], &record[newline + 1..]);
        let (dev, ino) = std::str::from_utf8(id).ok()?.split_once(':')?;
        let path = Path::new(OsStr::from_bytes(path));
        if !path.is_absolute() || path.as_os_str().as_bytes().contains(&0) {
            return None;
        }
        Some(Self {
            path: path.to_path_buf(),
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_a_newline_or_bytes_that_are_not_utf8_comes_back_whole() {
        for raw in [
            &b"/var/tmp/site\nd/wt2"[..],
            b"/home/x/caf\xe9/ trunk \n",
            b"/plain",
        ] {
            let target = StagedTarget {
                path: PathBuf::from(OsStr::from_bytes(raw)),
                dev: 2049,
                ino: 7,
            };
            assert_eq!(StagedTarget::decode(&target.encode()), Some(target));
        }
    }

    #[test]
    fn what_is_not_a_record_is_refused() {
        for bad in [
            &b""[..],
            b"/only/a/path",
            b"1:2\nrelative/path",
            b"x:2\n/p",
            b"1:2\n/p\0q",
        ] {
            assert_eq!(StagedTarget::decode(bad), None, "{bad:?}");
        }
    }
}
