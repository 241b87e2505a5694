//! The host's shared places as the host has them, watched from outside the run: `/run` always, and
//! `/tmp`, `/dev/shm`, `/var/tmp` and the run's own `$TMPDIR` (when it lies elsewhere) too.
//!
//! `/run` is watched instead of made private. An overlay cannot stand in for it: a socket a host
//! daemon bound there before the overlay was mounted refuses every `connect` through it (the
//! overlay's inode is not the one the socket was bound to; measured on this kernel), so a backend
//! whose adapter talks to a daemon there (a container engine's socket, the system bus) would fail a
//! whole run honestly configured. The temporary places a run as root sees through overlays of its
//! own; the look at the host's own adds what a runner wrote past them (through another process's
//! root, or a daemon living in the host's namespace). A run as a user has no overlays: the look is
//! all it has there.
//!
//! So a run looks at them when it starts and when it is over, from the harness's own mount
//! namespace (what the run mounts in its namespace hides nothing from it), and what appeared or
//! changed there meanwhile that users other than its owner could use fails the run: a directory
//! they can write (a staging root another user could plant files in), a file they can write, a
//! set-id file or one they can run with file capabilities, a socket they can connect to, a FIFO
//! they can write or read, a device node, a directory whose default ACL lets them write what is
//! made in it, a directory they may search that the watch cannot list, each where they can reach it
//! (every directory on the way searchable by them); a new entry the overflow user (`nobody`) owns
//! and may write (shared by every payload that runs as nobody, in any sandbox); a new symlink whose
//! missing target they could make; a host entry whose owner changed, which gained a set-id or write
//! bit or lost its sticky bit, whose group changed while its group may use it, or which a symlink
//! took the place of; one they can use and could not reach before (a directory above it opened).
//! Group bits count only when the group is not its owner's own (a user-private group: a person
//! whose umask is `002` makes `0775` directories only they can write); what a POSIX access ACL
//! grants named users and groups through its mask counts as theirs. What another person owns (a
//! login user's, from uid 1000: an X server's socket directory, a shared compiler cache) is theirs,
//! not the run's.
//!
//! What others cannot use (a root-only staging directory, a lock or pid file only its owner may
//! write, a user's own runtime directory and its sockets) is not judged: `/run` is where the host's
//! own daemons keep their state, and on a host with systemd they make and remove entries there all
//! the time (a unit's `invocation:` link, a login's runtime directory), so an entry that only
//! appeared cannot be told from the host's own; in the temporary places, every program of every
//! user does the same. No confined call may write `/run` (it is in no mode's writable set), so an
//! entry there that only its owner can use is no way into another sandbox. Not seen: SysV IPC
//! objects and POSIX message queues (outside these places); in `/run`, what lies deeper than four
//! levels under a directory the host already had that others cannot search (nothing there is theirs
//! to use unless that directory changes, which is seen) or that is another filesystem; in the
//! temporary places, below two levels, what did not change during the run (by its ctime; a write
//! alone, after a chmod, hides the chmod) and, past 200,000 entries, anything (the place is named
//! instead); and, as a user while another run of the harness by the same user is under way, what is
//! in a new directory of this process's owner (that run makes its worlds and fixtures there, and
//! those cannot be told from this run's; [`crate::world::alone`]). What a case of theirs makes at
//! the top of `/tmp` that others could use (HD-030's FIFO) it makes holding `/tmp`'s lock
//! ([`super::lock_tmp`]), which each look holds shared.

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::others::{
    S_IFDIR, S_IFLNK, S_IFMT, another_persons, as_others_meet, inherited_grants, overflow_uid,
    runs_with_capabilities, usable_by_others,
};
use super::{Below, Leftover};

/// The places a look reads, each with how far below it the look reads every directory, and
/// whether it goes deeper through what others may search. `/run/user/0/<tool>/<stage>` is four
/// levels down; deeper, the look goes on only through directories users other than their owner
/// may search, on the place's own filesystem: nothing below one they cannot search is theirs to
/// use, and a container's root filesystem mounted under `/run` is not the host's `/run`. The
/// temporary places are read two levels down and no deeper: a person's `/tmp` holds clones and
/// build trees anyone may search (hundreds of thousands of entries on a developer's machine),
/// where the host's software keeps no chains of its own to stage in, and what a new directory
/// holds is looked into when it is judged.
///
/// In the temporary places, as a user, a new entry this process's owner owns is judged by its own
/// mode alone when it lies right in the place, and nothing below it is, nor one deeper, unless
/// the run was alone ([`Look::judging_this_users_entries`]): the harness's other runs as the
/// same user (a certification beside the suite's tests, two certifications at once) make their
/// worlds and fixtures there, sockets and FIFOs others may open among them, and those cannot be
/// told from a staging directory of this run's. As root,
/// this run's own entries there are in its overlays (judged whole), and so are every other
/// certification's: what appears in the host's places is a runner writing past them, judged
/// whole too (the suite's tests run beside it as root would be named: a certification runs
/// alone).
const PLACES: [Reach<'static>; 4] = [
    Reach::new("/run", 4, true, false),
    Reach::new("/tmp", 2, false, true),
    Reach::new("/dev/shm", 2, false, true),
    Reach::new("/var/tmp", 2, false, true),
];

/// How a look reads one place (see [`PLACES`]).
#[derive(Clone, Copy)]
struct Reach<'a> {
    /// The place.
    place: &'a str,
    /// How many levels below it every directory is read.
    every: usize,
    /// Whether the look goes deeper through directories others may search on its filesystem.
    deeper: bool,
    /// Whether the harness's other runs as the same user make entries there.
    shared_with_harness: bool,
}

impl<'a> Reach<'a> {
    /// A place read as said.
    const fn new(place: &'a str, every: usize, deeper: bool, shared: bool) -> Self {
        Self {
            place,
            every,
            deeper,
            shared_with_harness: shared,
        }
    }
}

/// The most entries a look reads in a new directory for what others could use in it: a
/// backend's honest cache (an image's root filesystem, a package tree) holds tens of thousands.
const BELOW_MOST: usize = 200_000;

/// The most entries a look reads below the depth of a temporary place ([`Look::deep`]).
const DEEP_MOST: usize = 200_000;

/// The time as the kernel stamps files with it now: the ctime of a file made for the purpose in
/// this user's cache, else in the temporary directory (the kernel's clock for files moves a
/// tick at a time, and may run ahead of the coarse clock or behind the fine one), else the
/// system's clock. What is made or changed later has a ctime no earlier; what was before, none
/// later.
fn stamp_now() -> std::time::SystemTime {
    let cache = crate::suite::cache_home()
        .map(|home| home.join("sandbox-conformance"))
        .filter(|dir| std::fs::create_dir_all(dir).is_ok());
    cache
        .into_iter()
        .chain([std::env::temp_dir()])
        .find_map(|dir| {
            let probe = tempfile::NamedTempFile::new_in(dir).ok()?;
            probe.as_file().metadata().ok().map(|meta| ctime(&meta))
        })
        .unwrap_or_else(std::time::SystemTime::now)
}

/// The ctime `meta` says.
fn ctime(meta: &std::fs::Metadata) -> std::time::SystemTime {
    std::time::UNIX_EPOCH
        + std::time::Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        )
}

/// The most entries one look reads in one place (a host's `/run` holds a few hundred to a few
/// thousand).
const MOST: usize = 50_000;

/// One entry as a look saw it (`lstat`, never followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    /// Its filesystem and inode: another pair at the same path is another entry.
    dev: u64,
    ino: u64,
    uid: u32,
    gid: u32,
    /// Its type and permission bits (`st_mode`).
    mode: u32,
    /// Its type and the permission bits users other than its owner meet ([`as_others_meet`]).
    shared: u32,
    /// For a directory, what its default ACL grants others in what is made in it (`rwx` bits).
    inherits: u32,
    /// For a regular file others may run, whether it carries file capabilities.
    capable: bool,
}

impl Seen {
    /// What `meta` (an `lstat` of `path`) says.
    fn of(path: &Path, meta: &std::fs::Metadata) -> Self {
        let shared = as_others_meet(path, meta);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode(),
            shared,
            inherits: if meta.is_dir() {
                inherited_grants(path, meta.uid())
            } else {
                0
            },
            capable: runs_with_capabilities(path, meta, shared),
        }
    }

    /// Its `st_mode` as users other than its owner meet it ([`as_others_meet`]).
    fn shared_mode(&self) -> u32 {
        self.shared
    }

    /// Whether it is a directory users other than its owner may search.
    fn searchable_by_others(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR && self.shared_mode() & 0o011 != 0
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
    /// The places the look stopped in at its bound.
    unfinished: Vec<PathBuf>,
    /// The places the harness's other runs as the same user make entries in.
    shared_with_harness: Vec<PathBuf>,
    /// The places read only to their depth (the temporary ones): below it, [`Look::deep`]
    /// judges what changed after the first look by its ctime.
    shallow: Vec<PathBuf>,
    /// When the look began.
    taken: Option<std::time::SystemTime>,
}

impl Look {
    /// Looks at every watched place now (`/run` four levels down and deeper through what others
    /// may search; the host's `/tmp`, `/dev/shm` and `/var/tmp` two levels down, and this
    /// process's `$TMPDIR` when others may reach it elsewhere), at most 50,000 entries in each.
    pub fn now() -> Self {
        let _lock = tmp_shared();
        let tmpdir = tmpdir();
        let mut places = PLACES.to_vec();
        if let Some(dir) = tmpdir.as_deref() {
            places.push(Reach::new(dir, 2, false, true));
        }
        Self::of(&places)
    }

    /// This look, with what this user made in the temporary places judged whole, as for any
    /// other owner: for a run that is alone ([`crate::world::alone`]), none of it is another
    /// run's of the harness.
    pub fn judging_this_users_entries(mut self) -> Self {
        self.shared_with_harness.clear();
        self
    }

    /// Looks at `places` now: each place itself, and what is below it, level by level, as its
    /// [`Reach`] says.
    fn of(places: &[Reach<'_>]) -> Self {
        let mut look = Self {
            taken: Some(stamp_now()),
            ..Self::default()
        };
        for reach in places {
            if !reach.deeper {
                look.shallow.push(PathBuf::from(reach.place));
            }
            let place = Path::new(reach.place);
            if let Ok(meta) = std::fs::symlink_metadata(place) {
                look.seen
                    .insert(place.to_path_buf(), Seen::of(place, &meta));
            }
            // As root the run's own entries there are in its overlays, and so are those of
            // every other certification: what appears in the host's is judged whole.
            if reach.shared_with_harness && !nix::unistd::geteuid().is_root() {
                look.shared_with_harness.push(place.to_path_buf());
            }
            if !look.walk(place, reach.every, reach.deeper) {
                look.unfinished.push(place.to_path_buf());
            }
        }
        look
    }

    /// Records what is below `place`, breadth first (never through a symlink): every directory
    /// to `depth_read` levels, and below that (when `further`) those others may search on the
    /// place's filesystem; a directory is listed when every entry of it was recorded. False when
    /// it stopped at [`MOST`] entries.
    fn walk(&mut self, place: &Path, depth_read: usize, further: bool) -> bool {
        let device = self.seen.get(place).map(|s| s.dev);
        let bound = self.seen.len() + MOST;
        let mut queue = VecDeque::from([(place.to_path_buf(), 0)]);
        while let Some((dir, depth)) = queue.pop_front() {
            let Ok(listing) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut whole = true;
            for entry in listing {
                if self.seen.len() >= bound {
                    return false;
                }
                let Ok(meta) = entry.and_then(|e| e.metadata().map(|m| (e.path(), m))) else {
                    whole = false;
                    continue;
                };
                let (path, meta) = meta;
                let seen = Seen::of(&path, &meta);
                let deeper = further && seen.searchable_by_others() && Some(seen.dev) == device;
                if meta.is_dir() && (depth + 1 < depth_read || deeper) {
                    queue.push_back((path.clone(), depth + 1));
                }
                self.seen.insert(path, seen);
            }
            if whole {
                self.listed.insert(dir);
            }
        }
        true
    }

    /// Whether `path`, which this look did not see, was not there: the nearest of its
    /// ancestors the look saw had every entry seen.
    fn was_absent(&self, path: &Path) -> bool {
        path.ancestors()
            .skip(1)
            .find(|up| self.seen.contains_key(*up))
            .is_some_and(|up| self.listed.contains(up))
    }

    /// Whether users other than its owner can reach `path`: every directory above it this look
    /// saw may be searched by them.
    fn reachable(&self, path: &Path) -> bool {
        path.ancestors()
            .skip(1)
            .map_while(|up| self.seen.get(up))
            .all(Seen::searchable_by_others)
    }

    /// What appeared or changed since `before` that others could use, by path: what lies below
    /// a new entry named is that entry's, and not named again. A place this look could not
    /// finish is named too (what it did not read cannot pass).
    pub fn left_since(&self, before: &Look) -> Vec<Leftover> {
        let mut paths: Vec<&PathBuf> = self.seen.keys().collect();
        paths.sort();
        let mut found: Vec<Leftover> = self
            .unfinished
            .iter()
            .map(|place| Leftover {
                path: place.clone(),
                kind: "place holding more entries than the watch reads (50,000), not all looked at",
                uid: self.seen.get(place).map_or(0, |s| s.uid),
                mode: self.seen.get(place).map_or(0, |s| s.mode & 0o7777),
                was: None,
                hazard: None,
            })
            .collect();
        let owner = nix::unistd::geteuid().as_raw();
        // New entries of this process's owner in a place the harness shares: judged by their
        // own mode, what is below them not at all.
        let mut owners: Vec<&PathBuf> = Vec::new();
        for path in paths {
            if found
                .iter()
                .any(|named| named.was.is_none() && path.starts_with(&named.path))
                || owners.iter().any(|new| path.starts_with(new))
                || !self.reachable(path)
                || self.seen.get(path).is_some_and(|s| another_persons(s.uid))
            {
                continue;
            }
            let now = self.seen[path];
            let mut new = || {
                let harness = self
                    .shared_with_harness
                    .iter()
                    .find(|p| path.starts_with(p));
                if let Some(place) = harness.filter(|_| now.uid == owner) {
                    // Directly in the place it is judged by its own mode; in a directory there
                    // (the harness's own, made 0755 for a socket it serves), not at all.
                    let own = if path.parent() == Some(place.as_path()) {
                        made_by_owner(path, &now)
                    } else {
                        None
                    };
                    if own.is_none() {
                        owners.push(path);
                    }
                    own
                } else {
                    made(path, &now)
                }
            };
            let leftover = match before.seen.get(path) {
                Some(was) if (was.dev, was.ino) == (now.dev, now.ino) => {
                    changed(path, was, &now).or_else(|| opened(path, &now, before))
                }
                // Another entry under the same name, or one the first look saw was not there.
                Some(was) => new().or_else(|| replaced(path, was, &now)),
                None if before.was_absent(path) => new(),
                // Beyond what the first look could see: neither new nor changed.
                None => None,
            };
            found.extend(leftover);
        }
        self.deep(before, &mut found);
        found
    }

    /// Below the depth the temporary places are read to: each entry others could reach that was
    /// made during the run, or whose mode, owner or ACL changed during it (its ctime is past the
    /// first look's start, and past its mtime when it was there before: a write alone moves
    /// both), through the directories others may search on the place's filesystem, at most
    /// [`DEEP_MOST`] entries a place (past the bound the place is named, not passed). A directory
    /// that changed so is judged with all it holds (one opened over a drop box the host had). As
    /// for the entries above, a new one of this process's owner where the harness's other runs
    /// make theirs is not judged, nor what is below it, nor another person's.
    fn deep(&self, before: &Look, found: &mut Vec<Leftover>) {
        let Some(since) = before.taken else {
            return;
        };
        let after = |meta: &std::fs::Metadata| {
            let changed = ctime(meta);
            let older = meta.created().is_ok_and(|born| born < since);
            changed >= since && !(older && meta.modified().is_ok_and(|m| m == changed))
        };
        let owner = nix::unistd::geteuid().as_raw();
        for place in &self.shallow {
            let Some(device) = self.seen.get(place).map(|s| s.dev) else {
                continue;
            };
            let exempt = self.shared_with_harness.contains(place);
            // The directories the look saw but did not read, that others may reach and search.
            let mut queue: VecDeque<PathBuf> = self
                .seen
                .iter()
                .filter(|(path, seen)| {
                    path.starts_with(place)
                        && !self.listed.contains(*path)
                        && seen.searchable_by_others()
                        && seen.dev == device
                        && self.reachable(path)
                        && !found.iter().any(|f| path.starts_with(&f.path))
                })
                .map(|(path, _)| path.clone())
                .collect();
            let mut read = 0;
            'place: while let Some(dir) = queue.pop_front() {
                let Ok(listing) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in listing.flatten() {
                    read += 1;
                    if read > DEEP_MOST {
                        found.push(Leftover {
                            path: place.clone(),
                            kind: "place holding more entries than the watch reads (200,000 below \
                                   its second level), not all looked at",
                            uid: self.seen.get(place).map_or(0, |s| s.uid),
                            mode: self.seen.get(place).map_or(0, |s| s.mode & 0o7777),
                            was: None,
                            hazard: None,
                        });
                        break 'place;
                    }
                    let (path, Ok(meta)) = (entry.path(), entry.metadata()) else {
                        continue;
                    };
                    let seen = Seen::of(&path, &meta);
                    if another_persons(seen.uid) {
                        continue;
                    }
                    // Made or changed during the run, it is judged with what it holds.
                    if after(&meta) && !(exempt && seen.uid == owner) {
                        if let Some(leftover) = made(&path, &seen) {
                            found.push(leftover);
                            continue;
                        }
                    } else if after(&meta) {
                        continue;
                    }
                    if seen.searchable_by_others() && seen.dev == device {
                        queue.push_back(path);
                    }
                }
            }
        }
    }
}

/// This process's `$TMPDIR` (canonical), when it is a directory outside the watched places that
/// others may reach (every directory above it searchable by them) and holds no place worlds are
/// drawn in: the backends' adapters inherit it, and a runner that stages there leaves what it
/// leaves in a place every user's programs share, as `/tmp` is.
fn tmpdir() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::canonicalize(std::env::var_os("TMPDIR")?).ok()?;
    let watched = PLACES.iter().any(|r| dir.starts_with(r.place));
    let holds_worlds = crate::world::places()
        .bases
        .iter()
        .any(|(base, _)| base.starts_with(&dir));
    let reachable = dir
        .ancestors()
        .skip(1)
        .all(|up| std::fs::metadata(up).is_ok_and(|m| m.mode() & 0o001 != 0));
    (dir.is_dir() && !watched && !holds_worlds && reachable)
        .then(|| dir.to_str().map(str::to_owned))
        .flatten()
}

/// The longest a look waits for the shared lock on the host's `/tmp`: longer than a case of the
/// harness's other runs holds it (a case's own bound is a minute).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The shared lock on the host's `/tmp` ([`super::lock_tmp`]), so no case of the harness's
/// other runs is mid-way through what it makes at the top of `/tmp` while a look reads it;
/// waited for on a thread of its own, at most [`LOCK_WAIT`]. A case of this run given up past
/// its timeout may hold it for ever: then the look goes on without it (and says so).
fn tmp_shared() -> Option<nix::fcntl::Flock<std::fs::File>> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Taken after the look gave up waiting, it is dropped (released) here.
        let _ = sender.send(super::lock_tmp(false));
    });
    match receiver.recv_timeout(LOCK_WAIT) {
        Ok(Ok(lock)) => Some(lock),
        Ok(Err(e)) => {
            eprintln!("conformance: looking at the host's /tmp without its lock: {e}");
            None
        }
        Err(_) => {
            eprintln!(
                "conformance: looking at the host's /tmp without its lock: a case held it for \
                 {} s",
                LOCK_WAIT.as_secs()
            );
            None
        }
    }
}

/// A new entry at `path` of this process's owner in a place the harness shares (`now`), when
/// others could use it itself ([`itself`]; what it holds is not judged).
fn made_by_owner(path: &Path, now: &Seen) -> Option<Leftover> {
    itself(path, now).map(|kind| named(path, kind, now))
}

/// The entry at `path` (`now`), named as `kind`.
fn named(path: &Path, kind: &'static str, now: &Seen) -> Leftover {
    Leftover {
        path: path.to_path_buf(),
        kind,
        uid: now.uid,
        mode: now.mode & 0o7777,
        was: None,
        hazard: None,
    }
}

/// What an entry at `path` (`now`) is when others could use it itself: by its mode, a symlink
/// whose missing target they could make, or one the overflow user owns and may write (every
/// payload's that runs as `nobody`, in any sandbox).
fn itself(path: &Path, now: &Seen) -> Option<&'static str> {
    if let Some(kind) = usable_by_others(now.shared_mode()).or_else(|| dangling(path, now)) {
        return Some(kind);
    }
    if now.capable {
        return Some("file others can run with file capabilities");
    }
    if now.inherits & 0o2 != 0 {
        return Some("directory whose default ACL lets others write what is made in it");
    }
    let nobodys = now.uid == overflow_uid() && now.mode & 0o200 != 0;
    if !nobodys || now.mode & S_IFMT == S_IFLNK {
        None
    } else if now.mode & S_IFMT == S_IFDIR {
        Some(
            "directory the overflow user (nobody) owns and may write, as may every payload run as nobody",
        )
    } else {
        Some(
            "file the overflow user (nobody) owns and may write, as may every payload run as nobody",
        )
    }
}

/// A new entry at `path` as the second look saw it (`now`), when others could use it or what
/// is below it.
fn made(path: &Path, now: &Seen) -> Option<Leftover> {
    let leftover = |kind, hazard| Leftover {
        path: path.to_path_buf(),
        kind,
        uid: now.uid,
        mode: now.mode & 0o7777,
        was: None,
        hazard,
    };
    if let Some(kind) = itself(path, now) {
        return Some(leftover(kind, None));
    }
    if !now.searchable_by_others() {
        return None;
    }
    // One others may search that this look cannot list is passed only once it is read.
    if std::fs::read_dir(path).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied) {
        return Some(leftover(
            "directory others may search that the watch cannot list",
            None,
        ));
    }
    // A new directory others may search but not write is named for what others could use in
    // it, below the look's depth too.
    let below = super::first_below(
        path,
        BELOW_MOST,
        |path, meta| usable_by_others(as_others_meet(path, meta)),
        |path, meta| as_others_meet(path, meta) & 0o011 != 0,
    );
    match below {
        Below::Found(what) => Some(leftover("directory", Some(what))),
        Below::TooMany => Some(leftover(
            "directory",
            Some("more than 200,000 entries, not all looked at".to_owned()),
        )),
        Below::Nothing => None,
    }
}

/// What a new symlink at `path` (`now`) is when its target is missing where others may make
/// it (the nearest directory of the target that exists is one they can write, as `/tmp`):
/// whoever follows it later (a root tool reading its state through it) reads or writes what
/// they put there.
fn dangling(path: &Path, now: &Seen) -> Option<&'static str> {
    if now.mode & S_IFMT != S_IFLNK || std::fs::metadata(path).is_ok() {
        return None;
    }
    let target = path.parent()?.join(std::fs::read_link(path).ok()?);
    let (nearest, meta) = target
        .ancestors()
        .skip(1)
        .find_map(|up| std::fs::metadata(up).ok().map(|m| (up, m)))?;
    (meta.is_dir() && as_others_meet(nearest, &meta) & 0o022 != 0)
        .then_some("symlink to a missing path others can make")
}

/// A host entry at `path` (`now`, the same one as before) others can use, that they could not
/// reach before and can now: a directory above it gained their search (a staging root's
/// `0700` state directory opened `0711` so a payload reaches its socket, with a directory
/// others can write already inside).
fn opened(path: &Path, now: &Seen, before: &Look) -> Option<Leftover> {
    usable_by_others(now.shared_mode())
        .filter(|_| !before.reachable(path))
        .map(|_| {
            named(
                path,
                "host entry others can use that it let them reach (a directory above it opened)",
                now,
            )
        })
}

/// A host entry at `path` (`was`) whose place a new symlink (`now`) took.
fn replaced(path: &Path, was: &Seen, now: &Seen) -> Option<Leftover> {
    (now.mode & S_IFMT == S_IFLNK && was.mode & S_IFMT != S_IFLNK).then(|| Leftover {
        path: path.to_path_buf(),
        kind: "host entry it replaced with a symlink",
        uid: now.uid,
        mode: now.mode & 0o7777,
        was: Some((was.uid, was.mode & 0o7777)),
        hazard: None,
    })
}

/// A host entry at `path` that is still the same one (`was`, `now`), when it changed in a way
/// that lets others use it: its owner, a set-id or write bit gained, its sticky bit lost or its
/// group changed while others may use it.
fn changed(path: &Path, was: &Seen, now: &Seen) -> Option<Leftover> {
    let usable = itself(path, now).is_some();
    let gained = now.shared_mode() & !was.shared_mode() & 0o6022 != 0
        || now.inherits & !was.inherits & 0o2 != 0
        || (now.capable && !was.capable);
    let unstuck = was.mode & 0o1000 != 0 && now.mode & 0o1000 == 0;
    let regrouped = was.gid != now.gid;
    (was.uid != now.uid || (usable && (gained || unstuck || regrouped))).then(|| Leftover {
        path: path.to_path_buf(),
        kind: if now.mode & S_IFMT == S_IFDIR {
            "host directory it changed"
        } else {
            "host file it changed"
        },
        uid: now.uid,
        mode: now.mode & 0o7777,
        was: Some((was.uid, was.mode & 0o7777)),
        hazard: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::others::{S_IFIFO, S_IFREG, S_IFSOCK, own_group};
    use super::*;

    fn seen(ino: u64, uid: u32, mode: u32) -> Seen {
        Seen {
            dev: 1,
            ino,
            uid,
            gid: 0,
            mode,
            shared: mode,
            inherits: 0,
            capable: false,
        }
    }

    /// A look of `/run` holding `entries`, every directory in it listed whole.
    fn look(entries: &[(&str, Seen)]) -> Look {
        let mut seen: HashMap<PathBuf, Seen> = entries
            .iter()
            .map(|(path, seen)| (PathBuf::from(path), *seen))
            .collect();
        seen.insert(PathBuf::from("/run"), self::seen(0, 0, S_IFDIR | 0o755));
        let listed = seen
            .iter()
            .filter(|(_, s)| s.mode & S_IFMT == S_IFDIR)
            .map(|(p, _)| p.clone())
            .collect();
        Look {
            seen,
            listed,
            unfinished: Vec::new(),
            shared_with_harness: vec![PathBuf::from("/tmp")],
            shallow: Vec::new(),
            taken: None,
        }
    }

    /// Returns once the clock files are stamped with has moved past `path`'s ctime.
    fn past(path: &Path) {
        let then = ctime(&std::fs::symlink_metadata(path).expect("stat"));
        while stamp_now() <= then {
            std::hint::spin_loop();
        }
    }

    /// What a look at `place` now names since `before`, as the report says it.
    fn named_since(place: &Path, before: &Look) -> Vec<String> {
        names(&Look::of(&[reach(place)]), before)
    }

    /// What `after` names since `before`, as the report says it.
    fn names(after: &Look, before: &Look) -> Vec<String> {
        after
            .left_since(before)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// How the tests read a place of their own: as `/run` is read.
    fn reach(place: &Path) -> Reach<'_> {
        Reach::new(
            place.to_str().expect("a UTF-8 temporary path"),
            4,
            true,
            false,
        )
    }

    /// A staging root only its owner may write by its mode bits, whose ACL lets another user
    /// write it, is one others can write.
    #[test]
    fn a_new_directory_an_acl_lets_another_user_write_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let place = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let before = Look::of(&[reach(place.path())]);
        let (stage, quiet) = (place.path().join("stage"), place.path().join("quiet"));
        // Another user this user namespace maps (root, for a user on a host whose namespace
        // maps only root and the user).
        let me = nix::unistd::geteuid().as_raw();
        let other = if me == 0 { 4242 } else { 0 };
        for (dir, user) in [(&stage, other), (&quiet, me)] {
            std::fs::create_dir(dir)
                .and_then(|()| {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                })
                .expect("mkdir");
            let acl = super::super::above::acl_bytes(&[
                (0x01, 7, u32::MAX),
                (0x02, 7, user),
                (0x04, 0, u32::MAX),
                (0x10, 7, u32::MAX),
                (0x20, 0, u32::MAX),
            ]);
            rustix::fs::setxattr(
                dir.as_path(),
                "system.posix_acl_access",
                &acl,
                rustix::fs::XattrFlags::empty(),
            )
            .expect("an ACL (this host's /var/tmp takes them)");
        }
        let named: Vec<String> = named_since(place.path(), &before);
        // The mode shows the mask in the group's place; an entry naming the owner grants nobody
        // else anything (its group's bits do, unless the group is the owner's own).
        let mut expected = vec![stage];
        if !own_group(me, nix::unistd::getegid().as_raw()) {
            expected.insert(0, quiet);
        }
        let expected: Vec<String> = expected
            .iter()
            .map(|dir| {
                format!(
                    "{} (a directory others can write, owner uid {me}, mode 0770)",
                    dir.display()
                )
            })
            .collect();
        assert_eq!(named, expected);
    }

    /// A new symlink whose missing target others may make is named; one whose target exists,
    /// or is missing where only its owner may make it, is not.
    #[test]
    fn a_dangling_symlink_others_can_fill_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let place = tempfile::tempdir().expect("tempdir");
        let open = place.path().join("open");
        let closed = place.path().join("closed");
        for (dir, mode) in [(&open, 0o777), (&closed, 0o755)] {
            std::fs::create_dir(dir)
                .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)))
                .expect("mkdir");
        }
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let before = Look::of(&[reach(place.path())]);
        let link = |name: &str, to: &Path| {
            std::os::unix::fs::symlink(to, place.path().join(name)).expect("symlink");
        };
        link("current", &open.join("world-1234/cfg"));
        link("present", &open);
        link("private", &closed.join("world-1234"));
        let named: Vec<String> = Look::of(&[reach(place.path())])
            .left_since(&before)
            .iter()
            .map(|l| format!("{} {}", l.path.display(), l.kind))
            .collect();
        assert_eq!(
            named,
            [format!(
                "{} symlink to a missing path others can make",
                place.path().join("current").display()
            )]
        );
    }

    /// In a place read two levels down, what was made deeper during the run (its ctime past the
    /// first look) that others could use is named, and only that: not the directory it was made
    /// in (its ctime moved too). (What was there before differs only by its ctime, which a test
    /// cannot set.)
    #[test]
    fn below_a_temporary_places_depth_what_changed_during_the_run_is_named() {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let place = tempfile::tempdir().expect("tempdir");
        let path = place.path().to_str().expect("a UTF-8 temporary path");
        let mkdir = |dir: &Path, mode| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)))
                .expect("mkdir");
        };
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let cache = place.path().join("cache/v1/c");
        mkdir(&cache, 0o755);
        // The kernel stamps files with a clock that moves a tick at a time: what is made in the
        // same tick as the look begins could be either side of it.
        past(&cache);
        let shallow = [Reach::new(path, 2, false, false)];
        let before = Look::of(&shallow);
        let locks = cache.join("locks");
        mkdir(&locks, 0o777);
        let named: Vec<PathBuf> = Look::of(&shallow)
            .left_since(&before)
            .into_iter()
            .map(|l| l.path)
            .collect();
        assert_eq!(named, [locks]);
    }

    #[test]
    fn in_a_place_the_harness_shares_a_new_entry_of_its_own_user_is_judged_by_its_own_mode() {
        let (dir, file) = (S_IFDIR, S_IFREG);
        let owner = nix::unistd::geteuid().as_raw();
        // A system user's (a set-id helper's): another person's would be theirs.
        let other = if owner == 0 { 998 } else { 0 };
        let capable = |mut seen: Seen| {
            seen.capable = true;
            seen
        };
        let inheriting = |mut seen: Seen| {
            seen.inherits = 0o7;
            seen
        };
        let person = owner.max(1000) + 4242;
        let before = look(&[
            ("/tmp", seen(1, 0, dir | 0o1777)),
            ("/tmp/served", seen(8, owner, dir | 0o755)),
            ("/tmp/state", seen(10, other, dir | 0o700)),
            ("/tmp/state/drop", seen(11, other, dir | 0o777)),
            ("/tmp/spool", seen(13, other, dir | 0o1777)),
        ]);
        let after = look(&[
            ("/tmp", seen(1, 0, dir | 0o1777)),
            // Another run's world of this user, a socket others may open in it: not named.
            ("/tmp/world", seen(2, owner, dir | 0o755)),
            ("/tmp/world/agent.sock", seen(3, owner, S_IFSOCK | 0o777)),
            // This user's staging root others may write: named by its own mode.
            ("/tmp/stage", seen(4, owner, dir | 0o777)),
            // A socket of this user's in a directory the host had (a fixture of the harness's
            // that started before this run): not named.
            ("/tmp/served", seen(8, owner, dir | 0o755)),
            ("/tmp/served/agent.sock", seen(9, owner, S_IFSOCK | 0o777)),
            // A host directory opened to others' search, a directory they can write in it.
            ("/tmp/state", seen(10, other, dir | 0o711)),
            ("/tmp/state/drop", seen(11, other, dir | 0o777)),
            // A FIFO others may read what the runner writes from.
            ("/tmp/progress.fifo", seen(12, other, S_IFIFO | 0o644)),
            // Another user's (a set-id helper's): what is in it is judged too.
            ("/tmp/helper", seen(5, other, dir | 0o755)),
            ("/tmp/helper/root", seen(6, other, dir | 0o1777)),
            ("/tmp/helper/key", seen(7, other, file | 0o600)),
            // A staged tool anyone may run with the capabilities it carries.
            (
                "/tmp/helper/unshare",
                capable(seen(14, other, file | 0o755)),
            ),
            // A spool whose default ACL now lets others into every file made in it.
            ("/tmp/spool", inheriting(seen(13, other, dir | 0o1777))),
            // Another person's X server, started meanwhile: theirs.
            ("/tmp/.X11-unix", seen(15, person, dir | 0o1777)),
            ("/tmp/.X11-unix/X93", seen(16, person, S_IFSOCK | 0o777)),
        ]);
        let named = names(&after, &before);
        assert_eq!(
            named,
            [
                format!(
                    "/tmp/helper/root (a directory others can write, owner uid {other}, mode 1777)"
                ),
                format!(
                    "/tmp/helper/unshare (a file others can run with file capabilities, owner uid {other}, mode 0755)"
                ),
                format!(
                    "/tmp/progress.fifo (a fifo others can read, owner uid {other}, mode 0644)"
                ),
                format!(
                    "/tmp/spool (a host directory it changed, owner uid {other}, mode 1777; the host's: owner uid {other}, mode 1777)"
                ),
                format!("/tmp/stage (a directory others can write, owner uid {owner}, mode 0777)"),
                format!(
                    "/tmp/state/drop (a host entry others can use that it let them reach (a directory above it opened), owner uid {other}, mode 0777)"
                ),
            ]
        );
    }

    #[test]
    fn only_what_others_could_use_where_they_can_reach_it_is_named_and_nothing_below_it_again() {
        let (dir, file) = (S_IFDIR, S_IFREG);
        let group = |mut seen: Seen, gid| {
            seen.gid = gid;
            seen
        };
        let own = |mut seen: Seen| {
            seen.shared = seen.mode & !0o070;
            seen
        };
        let mut before = look(&[
            ("/run/lock", seen(1, 0, dir | 0o1777)),
            ("/run/user", seen(2, 0, dir | 0o755)),
            ("/run/daemon.pid", seen(3, 0, file | 0o644)),
            ("/run/user/1000", seen(4, 1000, dir | 0o700)),
            ("/run/deep", seen(5, 0, dir | 0o755)),
            ("/run/shared", seen(6, 0, dir | 0o775)),
            ("/run/state", seen(7, 0, dir | 0o755)),
        ]);
        // The first look did not finish /run/deep: what the second sees there is not known new.
        before.listed.remove(Path::new("/run/deep"));
        let after = look(&[
            ("/run/deep", seen(5, 0, dir | 0o755)),
            ("/run/deep/open", seen(16, 0, dir | 0o777)),
            // Its sticky bit gone: others may now remove what others put there.
            ("/run/lock", seen(1, 0, dir | 0o777)),
            // Made again by the host (another inode), still only root's: not named.
            ("/run/daemon.pid", seen(9, 0, file | 0o644)),
            ("/run/stage", seen(10, 0, dir | 0o755)),
            ("/run/stage/suid", seen(13, 0, file | 0o4755)),
            ("/run/stage-open", seen(11, 0, dir | 0o777)),
            ("/run/stage-open/inner", seen(12, 0, dir | 0o777)),
            // Group-writable: by a group of others, named; by its owner's own group (a umask
            // of 002), only its owner can write it.
            ("/run/stage-group", seen(22, 999, dir | 0o775)),
            ("/run/stage-umask", own(seen(23, 1000, dir | 0o775))),
            // A login's runtime directory and its bus: only that user reaches them.
            ("/run/user/4242", seen(17, 4242, dir | 0o700)),
            ("/run/user/4242/bus", seen(18, 4242, S_IFSOCK | 0o666)),
            ("/run/user", seen(2, 0, dir | 0o757)),
            ("/run/user/1000", seen(4, 0, dir | 0o700)),
            ("/run/agent.sock", seen(14, 0, S_IFSOCK | 0o666)),
            ("/run/link", seen(15, 0, S_IFLNK | 0o777)),
            ("/run/shared", group(seen(6, 0, dir | 0o775), 100)),
            ("/run/state", seen(19, 0, S_IFLNK | 0o777)),
            // A staging root only nobody may write: every payload that runs as nobody may.
            ("/run/stage-nobody", seen(20, overflow_uid(), dir | 0o700)),
            ("/run/nobody.pid", seen(21, overflow_uid(), file | 0o444)),
        ]);
        let named = names(&after, &before);
        assert_eq!(
            named,
            [
                "/run/agent.sock (a socket others can connect to, owner uid 0, mode 0666)",
                "/run/lock (a host directory it changed, owner uid 0, mode 0777; the host's: owner uid 0, mode 1777)",
                "/run/shared (a host directory it changed, owner uid 0, mode 0775; the host's: owner uid 0, mode 0775)",
                "/run/stage/suid (a set-id file, owner uid 0, mode 4755)",
                "/run/stage-group (a directory others can write, owner uid 999, mode 0775)",
                &format!(
                    "/run/stage-nobody (a directory the overflow user (nobody) owns and may write, as may every payload run as nobody, owner uid {}, mode 0700)",
                    overflow_uid()
                ),
                "/run/stage-open (a directory others can write, owner uid 0, mode 0777)",
                "/run/state (a host entry it replaced with a symlink, owner uid 0, mode 0777; the host's: owner uid 0, mode 0755)",
                "/run/user (a host directory it changed, owner uid 0, mode 0757; the host's: owner uid 0, mode 0755)",
                "/run/user/1000 (a host directory it changed, owner uid 0, mode 0700; the host's: owner uid 1000, mode 0700)",
            ]
        );
    }

    #[test]
    fn a_look_that_stops_at_its_bound_names_the_place() {
        let mut after = look(&[]);
        after.unfinished.push(PathBuf::from("/run"));
        let named: Vec<String> = after
            .left_since(&look(&[]))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            named,
            [
                "/run (a place holding more entries than the watch reads (50,000), not all looked at, owner uid 0, mode 0755)"
            ]
        );
    }

    #[test]
    fn a_look_reads_four_levels_then_only_what_others_may_search_and_never_through_a_symlink() {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let place = tempfile::tempdir().expect("tempdir");
        // 0755 whatever the umask; below the fourth level, `p/q/r/s` only its owner may search.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(place.path().join("a/b/c/d/e/f"))
            .and_then(|()| {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(place.path().join("p/q/r/s/t"))
            })
            .expect("mkdir");
        std::fs::set_permissions(
            place.path().join("p/q/r/s"),
            std::fs::Permissions::from_mode(0o700),
        )
        .expect("chmod");
        std::os::unix::fs::symlink(place.path().join("a"), place.path().join("link"))
            .expect("symlink");
        let found = Look::of(&[reach(place.path())]);
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
        assert_eq!(
            names,
            [
                "",
                "a",
                "a/b",
                "a/b/c",
                "a/b/c/d",
                "a/b/c/d/e",
                "a/b/c/d/e/f",
                "link",
                "p",
                "p/q",
                "p/q/r",
                "p/q/r/s"
            ]
        );
        // A directory others could write made deep below, where they can reach it, is named.
        let before = found;
        let open = place.path().join("a/b/c/d/e/f/stage");
        std::fs::create_dir(&open)
            .and_then(|()| std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)))
            .expect("mkdir");
        let named = Look::of(&[reach(place.path())]).left_since(&before);
        assert_eq!(
            named.iter().map(|l| l.path.clone()).collect::<Vec<_>>(),
            [open],
            "{named:?}"
        );
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
        let before = Look::of(&[reach(place.path())]);
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
        // Others may write it now (group bits alone may be the owner's own group's).
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o757))
            .expect("chmod");
        let named: Vec<String> = named_since(place.path(), &before);
        let uid = nix::unistd::geteuid().as_raw();
        assert_eq!(
            named,
            [
                format!(
                    "{} (a host directory it changed, owner uid {uid}, mode 0757; the host's: owner uid {uid}, mode 0755)",
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
