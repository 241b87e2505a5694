//! The kernel's mount table (`/proc/self/mountinfo`) read as bytes, never as text: a mount point
//! whose name is not UTF-8 is a mount like any other. Pure: the caller reads the table and
//! hands it in. The launcher mounts the private temp area over what is mounted below `/tmp`, and
//! the conformance harness maps what a payload can write back to the host, both through this one
//! reading.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One line of the table: the directory of its filesystem the mount shows (`root`, field 4) and
/// where it is mounted (`point`, field 5), each decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    /// The directory of the mounted filesystem that this mount shows (`/` for a whole one).
    pub root: PathBuf,
    /// Where it is mounted.
    pub point: PathBuf,
}

/// Decodes one field: the kernel writes space, tab, newline and backslash as a backslash and
/// three octal digits (`\040`); every other byte is itself.
///
/// ```
/// use sandbox::mountinfo::unescape;
/// assert_eq!(unescape(b"/var/tmp/a\\040b\\011"), std::path::PathBuf::from("/var/tmp/a b\t"));
/// assert_eq!(unescape(b"/a\\\\b"), std::path::PathBuf::from("/a\\\\b"));
/// ```
pub fn unescape(field: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .map(|d| (d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
        match octal {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Every mount of `table`, in the table's order (parents before what is mounted on them).
pub fn entries(table: &[u8]) -> Vec<MountEntry> {
    table
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut fields = line.split(|&b| b == b' ');
            let root = fields.nth(3)?;
            let point = fields.next()?;
            Some(MountEntry {
                root: unescape(root),
                point: unescape(point),
            })
        })
        .collect()
}

/// The mount points strictly below `place`, only the topmost of each nest (what is mounted below
/// one of them comes with it in a recursive bind), sorted.
///
/// ```
/// let table = b"1 0 8:1 / / rw - ext4 /dev/vda rw\n\
///               2 1 0:5 / /tmp rw - tmpfs t rw\n\
///               3 2 8:1 /src /tmp/a\\040b rw - ext4 /dev/vda rw\n\
///               4 3 0:6 / /tmp/a\\040b/c rw - tmpfs t rw\n";
/// assert_eq!(
///     sandbox::mountinfo::top_mounts_below(table, std::path::Path::new("/tmp")),
///     vec![std::path::PathBuf::from("/tmp/a b")]
/// );
/// ```
pub fn top_mounts_below(table: &[u8], place: &Path) -> Vec<PathBuf> {
    topmost(
        entries(table)
            .into_iter()
            .map(|e| e.point)
            .filter(|p| p.starts_with(place) && p != place)
            .collect(),
    )
}

/// `paths` sorted, each once, keeping only the topmost of each nest (what lies below one of
/// them comes along with it: a recursive clone or bind carries it).
pub fn topmost(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut top: Vec<PathBuf> = Vec::new();
    for path in paths {
        if !top.iter().any(|t| path.starts_with(t)) {
            top.push(path);
        }
    }
    top
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[test]
    fn only_the_topmost_of_each_nest_is_kept_each_once() {
        let paths = ["/tmp/a/b", "/tmp/a", "/tmp/c", "/tmp/a", "/tmp/ab"].map(PathBuf::from);
        assert_eq!(
            topmost(paths.to_vec()),
            ["/tmp/a", "/tmp/ab", "/tmp/c"].map(PathBuf::from).to_vec()
        );
        let table = b"1 0 0:1 / /tmp rw - tmpfs t rw\n\
                      2 1 0:2 / /tmp/x rw - tmpfs t rw\n\
                      3 2 0:3 / /tmp/x/y rw - tmpfs t rw\n\
                      4 1 0:4 / /tmp/z rw - tmpfs t rw\n";
        assert_eq!(
            top_mounts_below(table, Path::new("/tmp")),
            ["/tmp/x", "/tmp/z"].map(PathBuf::from).to_vec()
        );
    }

    #[test]
    fn every_digit_of_an_escape_counts() {
        // `\134` is a backslash (1 * 64 + 3 * 8 + 4), the one escape whose first digit is not 0.
        assert_eq!(unescape(b"/a\\134b"), PathBuf::from("/a\\b"));
    }

    #[test]
    fn an_escape_at_the_very_end_and_bytes_that_are_not_utf8_are_decoded() {
        assert_eq!(unescape(b"/tmp/x\\040"), PathBuf::from("/tmp/x "));
        assert_eq!(
            unescape(b"/tmp/caf\xe9\\012"),
            PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/caf\xe9\n"))
        );
        // Not an escape: too short, or not octal.
        assert_eq!(unescape(b"/a\\04"), PathBuf::from("/a\\04"));
        assert_eq!(unescape(b"/a\\089"), PathBuf::from("/a\\089"));
    }

    #[test]
    fn a_table_with_a_mount_point_that_is_not_utf8_loses_no_mount() {
        let table = b"1 0 8:1 / / rw - ext4 r rw\n2 1 0:5 / /tmp/\xff rw - tmpfs t rw\n";
        let all = entries(table);
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].point.as_os_str().as_bytes(), b"/tmp/\xff");
        assert_eq!(top_mounts_below(table, Path::new("/tmp")).len(), 1);
        assert!(top_mounts_below(table, Path::new("/tm")).is_empty());
    }
}
