//! `/run`, watched instead of made private. An overlay cannot stand in for it: a socket a host
//! daemon bound there before the overlay was mounted refuses every `connect` through it (the
//! overlay's inode is not the one the socket was bound to; measured on this kernel), so a
//! backend whose adapter talks to a daemon there (a container engine's socket, the system bus)
//! would fail a whole run honestly configured. So a run as root looks at `/run` when it starts
//! and when it is over, and what appeared or changed there meanwhile that others could use
//! fails the run: a directory group or others can write (a staging root another user could
//! plant files in), a file others can write, a set-id file, a socket or FIFO others can open, a
//! device node, or a host entry whose owner changed or which others can now use.
//!
//! What others cannot use (a root-only staging directory, a lock or pid file only its owner may
//! write) is not judged: `/run` is where the host's own daemons keep their state, and on a host
//! with systemd they make and remove entries there all the time (a unit's `invocation:`
//! link, a login's runtime directory), so an entry that only appeared cannot be told from the
//! host's own. No confined call may write `/run` (it is in no mode's writable set), so an entry
//! there that only root can use is no way into another sandbox.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::{Leftover, WATCHED};

/// How far below a watched place a look goes: `/run/user/0/<tool>/<stage>` is four levels down.
const DEPTH: usize = 4;

/// The most entries one look reads (a host's `/run` holds a few hundred to a few thousand).
const MOST: usize = 50_000;

/// One entry as a look saw it (`lstat`, never followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    /// Its filesystem and inode: another pair at the same path is another entry.
    dev: u64,
    ino: u64,
    uid: u32,
    /// Its type and permission bits (`st_mode`).
    mode: u32,
}

impl Seen {
    /// What `meta` (an `lstat`) says.
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            mode: meta.mode(),
        }
    }
}

/// What the watched places held at one moment.
#[derive(Debug, Default)]
pub struct Look {
    /// Each entry seen, the places themselves included.
    seen: HashMap<PathBuf, Seen>,
    /// The directories whose every entry was seen (not those at the look's depth, nor any
    /// left unfinished at its bound): only there is an entry the look has not seen a new one.
    listed: HashSet<PathBuf>,
}

impl Look {
    /// Looks at every watched place now, four levels down, at most 50,000 entries.
    pub fn now() -> Self {
        Self::of(&WATCHED.map(Path::new))
    }

    /// Looks at `places` now: each place itself, and what is below it.
    fn of(places: &[&Path]) -> Self {
        let mut look = Self::default();
        for place in places {
            if let Ok(meta) = std::fs::symlink_metadata(place) {
                look.seen.insert(place.to_path_buf(), Seen::of(&meta));
            }
            look.walk(place, 0);
        }
        look
    }

    /// Whether `path`, which this look did not see, was not there: the nearest of its
    /// ancestors the look saw had every entry seen.
    fn was_absent(&self, path: &Path) -> bool {
        path.ancestors()
            .skip(1)
            .find(|up| self.seen.contains_key(*up))
            .is_some_and(|up| self.listed.contains(up))
    }

    /// Records `dir`'s entries and goes down into its directories (never through a symlink), to
    /// [`DEPTH`] levels and [`MOST`] entries; `dir` is listed when every entry was recorded.
    fn walk(&mut self, dir: &Path, depth: usize) {
        if depth >= DEPTH {
            return;
        }
        let Ok(listing) = std::fs::read_dir(dir) else {
            return;
        };
        let mut whole = true;
        for entry in listing {
            let Ok(entry) = entry else {
                whole = false;
                continue;
            };
            if self.seen.len() >= MOST {
                return;
            }
            let Ok(meta) = entry.metadata() else {
                whole = false;
                continue;
            };
            let path = entry.path();
            self.seen.insert(path.clone(), Seen::of(&meta));
            if meta.is_dir() {
                self.walk(&path, depth + 1);
            }
        }
        if whole {
            self.listed.insert(dir.to_path_buf());
        }
    }

    /// What appeared or changed since `before` that others could use, by path: what lies below
    /// a new entry named is that entry's, and not named again.
    pub fn left_since(&self, before: &Look) -> Vec<Leftover> {
        let mut paths: Vec<&PathBuf> = self.seen.keys().collect();
        paths.sort();
        let mut found: Vec<Leftover> = Vec::new();
        for path in paths {
            if found
                .iter()
                .any(|named| named.was.is_none() && path.starts_with(&named.path))
            {
                continue;
            }
            let now = self.seen[path];
            let was = match before.seen.get(path) {
                Some(was) if (was.dev, was.ino) == (now.dev, now.ino) => Some(was),
                // Another entry under the same name: a new one.
                Some(_) => None,
                None if before.was_absent(path) => None,
                // Beyond what the first look could see: neither new nor changed.
                None => continue,
            };
            let usable = usable_by_others(now.mode);
            // A new directory only its owner can write is named for what others could use in
            // it (below the look's depth too).
            let hazard =
                (was.is_none() && usable.is_none() && now.mode & libc::S_IFMT == libc::S_IFDIR)
                    .then(|| usable_below(path))
                    .flatten();
            let leftover = match (was, usable) {
                (None, Some(kind)) => Leftover {
                    path: path.clone(),
                    kind,
                    uid: now.uid,
                    mode: now.mode & 0o7777,
                    was: None,
                    hazard: None,
                },
                (None, None) if hazard.is_some() => Leftover {
                    path: path.clone(),
                    kind: "directory",
                    uid: now.uid,
                    mode: now.mode & 0o7777,
                    was: None,
                    hazard,
                },
                (Some(was), usable)
                    if was.uid != now.uid
                        || (usable.is_some() && usable_by_others(was.mode).is_none()) =>
                {
                    Leftover {
                        path: path.clone(),
                        kind: if now.mode & libc::S_IFMT == libc::S_IFDIR {
                            "host directory it changed"
                        } else {
                            "host file it changed"
                        },
                        uid: now.uid,
                        mode: now.mode & 0o7777,
                        was: Some((was.uid, was.mode & 0o7777)),
                        hazard: None,
                    }
                }
                _ => continue,
            };
            found.push(leftover);
        }
        found
    }
}

/// The first thing below the directory `dir` that others could use ([`usable_by_others`]).
fn usable_below(dir: &Path) -> Option<String> {
    super::first_below(dir, usable_by_others)
}

/// What an entry of `/run` with this `st_mode` is, when users other than its owner could use
/// it; `None` when they cannot (a symlink's own bits mean nothing).
fn usable_by_others(mode: u32) -> Option<&'static str> {
    let writable = mode & 0o022 != 0;
    match mode & libc::S_IFMT {
        libc::S_IFDIR if writable => Some("directory others can write"),
        libc::S_IFREG if mode & 0o6000 != 0 => Some("set-id file"),
        libc::S_IFREG if writable => Some("file others can write"),
        libc::S_IFSOCK if writable => Some("socket others can connect to"),
        libc::S_IFIFO if writable => Some("fifo others can write"),
        libc::S_IFBLK | libc::S_IFCHR => Some("device node"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(ino: u64, uid: u32, mode: u32) -> Seen {
        Seen {
            dev: 1,
            ino,
            uid,
            mode,
        }
    }

    /// A look of `/run` holding `entries`, every directory in it listed whole.
    fn look(entries: &[(&str, Seen)]) -> Look {
        let mut seen: HashMap<PathBuf, Seen> = entries
            .iter()
            .map(|(path, seen)| (PathBuf::from(path), *seen))
            .collect();
        seen.insert(
            PathBuf::from("/run"),
            self::seen(0, 0, libc::S_IFDIR | 0o755),
        );
        let listed = seen
            .iter()
            .filter(|(_, s)| s.mode & libc::S_IFMT == libc::S_IFDIR)
            .map(|(p, _)| p.clone())
            .collect();
        Look { seen, listed }
    }

    #[test]
    fn only_what_others_could_use_is_named_and_nothing_below_it_again() {
        let dir = libc::S_IFDIR;
        let before = look(&[
            ("/run/lock", seen(1, 0, dir | 0o1777)),
            ("/run/user", seen(2, 0, dir | 0o755)),
            ("/run/daemon.pid", seen(3, 0, libc::S_IFREG | 0o644)),
            ("/run/user/1000", seen(4, 1000, dir | 0o700)),
            ("/run/deep", seen(5, 0, dir | 0o755)),
        ]);
        let mut before = before;
        // The first look did not finish /run/deep: what the second sees there is not known new.
        before.listed.remove(Path::new("/run/deep"));
        let after = look(&[
            ("/run/deep", seen(5, 0, dir | 0o755)),
            ("/run/deep/open", seen(16, 0, dir | 0o777)),
            ("/run/lock", seen(1, 0, dir | 0o1777)),
            // Made again by the host (another inode), still only root's: not named.
            ("/run/daemon.pid", seen(9, 0, libc::S_IFREG | 0o644)),
            ("/run/stage-root", seen(10, 0, dir | 0o700)),
            ("/run/stage-open", seen(11, 0, dir | 0o777)),
            ("/run/stage-open/inner", seen(12, 0, dir | 0o777)),
            ("/run/stage-root/suid", seen(13, 0, libc::S_IFREG | 0o4755)),
            ("/run/user", seen(2, 0, dir | 0o757)),
            ("/run/user/1000", seen(4, 0, dir | 0o700)),
            ("/run/agent.sock", seen(14, 0, libc::S_IFSOCK | 0o666)),
            ("/run/link", seen(15, 0, libc::S_IFLNK | 0o777)),
        ]);
        let named: Vec<String> = after
            .left_since(&before)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            named,
            [
                "/run/agent.sock (a socket others can connect to, owner uid 0, mode 0666)",
                "/run/stage-open (a directory others can write, owner uid 0, mode 0777)",
                "/run/stage-root/suid (a set-id file, owner uid 0, mode 4755)",
                "/run/user (a host directory it changed, owner uid 0, mode 0757; the host's: owner uid 0, mode 0755)",
                "/run/user/1000 (a host directory it changed, owner uid 0, mode 0700; the host's: owner uid 1000, mode 0700)",
            ]
        );
    }

    #[test]
    fn a_look_goes_four_levels_down_and_never_through_a_symlink() {
        let place = tempfile::tempdir().expect("tempdir");
        let deep = place.path().join("a/b/c/d/e");
        std::fs::create_dir_all(&deep).expect("mkdir");
        std::os::unix::fs::symlink(place.path().join("a"), place.path().join("link"))
            .expect("symlink");
        let found = Look::of(&[place.path()]);
        let mut names: Vec<String> = found
            .seen
            .keys()
            .map(|p| {
                p.strip_prefix(place.path())
                    .expect("below")
                    .display()
                    .to_string()
            })
            .collect();
        names.sort();
        assert_eq!(names, ["", "a", "a/b", "a/b/c", "a/b/c/d", "link"]);
    }

    #[test]
    fn a_new_directory_only_its_owner_can_write_is_named_for_what_others_could_use_deep_in_it() {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        // 0755 whatever the umask (a user's may be 002).
        let mkdir = |dir: &Path| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .expect("mkdir");
        };
        let place = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let before = Look::of(&[place.path()]);
        let served = place.path().join("served");
        mkdir(&served.join("x/y/z"));
        mkdir(&place.path().join("root-only/x/y/z/w"));
        let stage = place.path().join("stage");
        let open = stage.join("a/b/c/open");
        let socket = served.join("x/y/z/agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        mkdir(&open);
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o775))
            .expect("chmod");
        let named: Vec<String> = Look::of(&[place.path()])
            .left_since(&before)
            .iter()
            .map(ToString::to_string)
            .collect();
        let uid = nix::unistd::geteuid().as_raw();
        assert_eq!(
            named,
            [
                format!(
                    "{} (a host directory it changed, owner uid {uid}, mode 0775; the host's: owner uid {uid}, mode 0755)",
                    place.path().display()
                ),
                format!(
                    "{} (a directory, owner uid {uid}, mode 0755; it holds x/y/z/agent.sock (a socket others can connect to, mode 0666))",
                    served.display()
                ),
                format!(
                    "{} (a directory, owner uid {uid}, mode 0755; it holds a/b/c/open (a directory others can write, mode 0777))",
                    stage.display()
                ),
            ]
        );
    }
}
