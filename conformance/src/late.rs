//! What a case found absent on the host stays absent until the whole run is over. A case checks
//! the host when its call has ended (a marker a planted hook would write, a file the outside-in
//! probe tried to create in `~/.cargo/bin` or `/usr/local/bin`), but a backend can do its harm
//! later: a helper it detached beyond the case's reach copies what a call wrote in a private
//! place into the host's a second afterwards (found red-teaming: a private home synced into the
//! real one, 22 files in `/root` after a CERTIFIED run). So each host path a case checked and
//! found absent is kept, and once the run's last case has ended, its backends are gone and its
//! worlds are removed, each is looked at again: one that exists then is named in the report
//! (`appeared_after_their_case`) and fails the run. This look needs no privilege: it holds for
//! a run as a user too.
//!
//! The names are the cases' own (drawn per case and per world), so nothing else on the host
//! makes them; a world's own paths are gone with the world, so one that exists again was made
//! after its case.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The host paths the run's cases found absent, in the order they were checked; `None` while no
/// run records them (the suite's own test binaries run cases one by one, and look at nothing
/// later).
static ABSENT: Mutex<Option<Vec<PathBuf>>> = Mutex::new(None);

/// Starts recording what the cases find absent, for [`appeared`] once the run is over.
pub fn record() {
    if let Ok(mut absent) = ABSENT.lock() {
        *absent = Some(Vec::new());
    }
}

/// Records that a case checked `path` on the host and found it absent (while a run records).
pub fn found_absent(path: &Path) {
    if let Ok(mut absent) = ABSENT.lock()
        && let Some(absent) = absent.as_mut()
    {
        absent.push(path.to_path_buf());
    }
}

/// The recorded paths that exist now, each named with what it is, sorted; the recording stops
/// (a process may run several certifications, each calling [`record`] first).
pub fn appeared() -> Vec<String> {
    let absent = ABSENT
        .lock()
        .ok()
        .and_then(|mut a| a.take())
        .unwrap_or_default();
    let mut found: Vec<String> = absent
        .into_iter()
        .filter_map(|path| {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::symlink_metadata(&path).ok()?;
            let kind = match meta.file_type() {
                t if t.is_dir() => "a directory",
                t if t.is_symlink() => "a symlink",
                t if t.is_file() => "a file",
                _ => "an entry",
            };
            Some(format!(
                "{} ({kind}, owner uid {}, mode {:04o}: absent when its case was checked, there \
                 once the run was over)",
                path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_found_absent_that_exists_later_is_named_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let late = dir.path().join("cache-late");
        let never = dir.path().join("never");
        // Outside a run nothing is recorded: the suite's own test binaries check cases one by
        // one and look at nothing later.
        std::fs::write(&late, "x").expect("write");
        found_absent(&late);
        assert!(appeared().is_empty(), "recorded outside a run");
        std::fs::remove_file(&late).expect("remove");
        record();
        found_absent(&late);
        found_absent(&late);
        found_absent(&never);
        std::fs::write(&late, "x").expect("write");
        let named: Vec<String> = appeared()
            .into_iter()
            .filter(|n| n.starts_with(&dir.path().display().to_string()))
            .collect();
        assert_eq!(named.len(), 1, "{named:?}");
        assert!(
            named[0].starts_with(&format!("{} (a file, owner uid ", late.display())),
            "{named:?}"
        );
    }
}
