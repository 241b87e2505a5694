//! A scratch world for one case: a workspace, an outside tree with a sentinel, the symlinks and
//! names the path shapes need, a `$TMPDIR` area, and scratch areas under `/tmp` and `/dev/shm`.
//! The world lives outside every writable root and is removed on drop (also when the case
//! panics), with every directory it had to create on the way.
//!
//! Where a world lies and what its parts are called is drawn at random from the shapes real
//! projects have (under `/var/tmp`, the home directory or `/srv`, with spaces and non-ASCII
//! characters), so no request carries a fixed marker a backend could key on. The draws come from
//! the run's seed and the trial's name ([`with_case`]), so a seed replays a run exactly.
//!
//! Its parts:
//! - `seed`: the run's seed and each case's draws ([`with_case`], [`draw_hex`], [`draw_one`]).
//! - `odd`: the share of cases whose names hold shell and glob characters ([`odd_names`], [`noted`]).
//! - `names`: what a world's parts and an effect's files are called ([`with_file_names`], [`file_name`]).
//! - `places`: where worlds may lie on this host ([`places`]).
//! - `layout`: drawing a world's place and laying out its trees.
//! - `quote`: placeholders and shell words ([`World::expand`], [`shell_quote`]).
//! - `host`: the harness's own git and bash on the host ([`World::host_bash`]).
//! - `error`: why a seed, a base or a world's set-up could not be had ([`HostError`], [`SeedError`]).
//! - `snapshot`: snapshots and their diffs ([`Snapshot`], [`shown`]).
//! - `mounts`: mounts a payload left on a world, found and detached.
//! - `removal`: removing worlds, at once or deferred to a sweep ([`defer_removal`], [`sweep`]).
//! - `mirror`: a twin of a world, renamed and made of what a request names ([`mirror`]).

use std::io;
use std::path::{Path, PathBuf};

use crate::scenario::{Shape, TempDirSpelling, WorkspaceSpelling};

mod error;
mod host;
mod layout;
mod mirror;
mod mounts;
mod names;
mod odd;
mod places;
mod presence;
mod quote;
mod removal;
mod seed;
mod snapshot;
#[cfg(test)]
mod tests;

pub use error::{BaseRefused, HostError, SeedError};
pub(crate) use host::PERSON_GIT;
pub use mirror::mirror;
pub(crate) use mounts::unescape_mount_path;
pub use names::{file_name, name, with_file_names};
pub use odd::{DECOY_LINE, ODD_NAMES_VAR, ODD_SHARE, noted, odd_names};
pub use places::{Places, places};
pub use presence::alone;
pub use quote::{expand_placeholders, raw_placeholders, shell_quote};
pub(crate) use removal::removed_at_once;
pub use removal::{defer_removal, sweep, sweep_again, sweep_so_far, tidy_dead_runs};
pub use seed::{SEED_VAR, draw_hex, draw_one, run_seed, with_case};
pub use snapshot::{Entry, Snapshot, shown};

/// How much of the layout a world gets.
#[derive(Clone, Copy)]
enum Layout {
    /// Everything every shape and step relies on.
    Full,
    /// A twin's: the world directory only ([`mirror`] makes what a request names).
    Twin,
    /// An effect's: the workspace, the outside tree with its sentinel, `src`, and what the one
    /// shape works on.
    Effect(Shape),
}

/// The sentinel's content; no case may ever change it.
pub const SENTINEL: &str = "sentinel";

/// One case's world.
pub struct World {
    /// The world directory (canonical): the workspace's parent folder.
    pub dir: PathBuf,
    /// The real workspace (canonical), in `dir`.
    pub ws: PathBuf,
    /// A tree outside the workspace holding the sentinel, in `dir`.
    pub outside: PathBuf,
    /// A symlink to the workspace, in `dir`.
    pub alias: PathBuf,
    /// A `$TMPDIR` area strictly below `/var/tmp` (a temp area, so the policy may honour it).
    pub tmpdir: PathBuf,
    /// A scratch directory under `/tmp`.
    pub tmp: PathBuf,
    /// A scratch directory under `/dev/shm`, made only when the host has `/dev/shm` (on a host
    /// without it the path still names where a write must not appear).
    pub shm: PathBuf,
    /// Where a case's extra writable root lies (`%EXTRA%`), in `dir`: made only by
    /// [`World::extra_root`] (and in a twin when a request names it, as the world has it).
    pub extra: PathBuf,
    /// In a case with odd names (its workspace is named like a glob pattern, `repo [draft]`),
    /// the sibling the pattern matches instead (`repo d`), in `dir`: a copy of the workspace as
    /// laid out (a twin's is empty). A runner that expands its workspace as a glob confines this
    /// one.
    pub decoy: Option<PathBuf>,
    /// The base this world was drawn under (`/var/tmp`, the home directory, `/srv`): its twin
    /// lies under the same one, so a rule about the kind of place (a temp dir inside the home
    /// directory is refused) answers both alike.
    base: PathBuf,
}

impl World {
    /// Makes a fresh world, drawn from this case's generator, with the fixed layout every shape
    /// relies on.
    pub fn new() -> io::Result<World> {
        World::drawn(Layout::Full, None)
    }

    /// Makes a fresh world for one effect on `shape`: the workspace, the outside tree with its
    /// sentinel, `src`, and only the directories, files and links that shape works on (a fifth
    /// of the full layout's disk work; the world diff still covers every tree).
    pub fn for_effect(shape: Shape) -> io::Result<World> {
        World::drawn(Layout::Effect(shape), None)
    }

    /// Makes a small fresh world: the workspace with a few files, the outside tree with its
    /// sentinel (for a step that names no part of the layout, only the workspace).
    pub fn small() -> io::Result<World> {
        World::drawn(Layout::Effect(Shape::Root), None)
    }

    /// Makes a fresh twin of `world`: another drawn place under the same base (`/var/tmp`, the
    /// home directory, `/srv`: a backend may rightly treat those differently, so a twin elsewhere
    /// could be refused for a reason that has nothing to do with the renaming), of which only the
    /// world directory is made; the paths a request names are made later, as they are in this
    /// world ([`mirror`]).
    ///
    /// The twin keeps the order of the names it renames: its parts inside the world directory
    /// keep the world's names (only the directory they lie in is another), and a twin whose
    /// directory and `$TMPDIR` area would sort the other way round than the world's (both under
    /// `/var/tmp`) is drawn again. A backend that sorts its mounts by target then answers both
    /// alike: the renaming changes names, never their order.
    pub fn twin_of(world: &World) -> io::Result<World> {
        // A world named `/var/tmp/api...` beside its `$TMPDIR` area `/var/tmp/build-tmp.*` needs a
        // twin whose name sorts before one too, which few draws give: many tries (a draw is a
        // directory made and removed), then, rather than failing the case, a twin in the other
        // order (a backend that sorts its mounts by target could then answer the two
        // differently; one in thousands of cases).
        const TRIES: usize = 256;
        for attempt in 1..=TRIES {
            let mut twin = World::drawn(Layout::Twin, Some(&world.base))?;
            if world.dir.cmp(&world.tmpdir) != twin.dir.cmp(&twin.tmpdir) && attempt < TRIES {
                continue;
            }
            if let Some(decoy) = &twin.decoy {
                std::fs::remove_dir(decoy)?;
            }
            let inside = |p: &Path| match p.file_name() {
                Some(name) => twin.dir.join(name),
                None => twin.dir.clone(),
            };
            let (ws, outside, alias, extra) = (
                inside(&world.ws),
                inside(&world.outside),
                inside(&world.alias),
                inside(&world.extra),
            );
            // A decoy may lie deeper (what `${HOME}` expands to holds `/`): the same path below.
            let decoy = world
                .decoy
                .as_deref()
                .and_then(|d| d.strip_prefix(&world.dir).ok())
                .map(|rel| twin.dir.join(rel));
            if let Some(d) = &decoy {
                std::fs::create_dir_all(d)?;
            }
            (twin.ws, twin.outside, twin.alias, twin.extra, twin.decoy) =
                (ws, outside, alias, extra, decoy);
            return Ok(twin);
        }
        Err(io::Error::other("no twin could be drawn"))
    }

    /// The case's extra writable root (`%EXTRA%`): [`World::extra`], made now.
    pub fn extra_root(&self) -> io::Result<PathBuf> {
        std::fs::create_dir_all(&self.extra)?;
        Ok(self.extra.clone())
    }

    /// The workspace as a policy spells it.
    pub fn workspace(&self, spelling: WorkspaceSpelling) -> PathBuf {
        let d = &self.dir;
        match spelling {
            WorkspaceSpelling::Ws => self.ws.clone(),
            WorkspaceSpelling::Alias => self.alias.clone(),
            WorkspaceSpelling::TrailingSlash => {
                let mut spelled = self.ws.clone().into_os_string();
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
            TempDirSpelling::Outside => self.tmpdir.clone(),
            TempDirSpelling::FsRoot => PathBuf::from("/"),
            TempDirSpelling::Etc => PathBuf::from("/etc"),
            TempDirSpelling::World => self.dir.clone(),
            TempDirSpelling::File => self.dir.join("afile"),
            TempDirSpelling::Missing => self.dir.join("missing-tmpdir"),
        }
    }

    /// The roots a world diff covers: the world directory, its `$TMPDIR` area, its `/tmp` and
    /// `/dev/shm` scratch.
    fn roots(&self) -> [&Path; 4] {
        [&self.dir, &self.tmpdir, &self.tmp, &self.shm]
    }
}
