//! A scratch world for one case: a workspace, an outside tree with a sentinel, the symlinks and
//! names the path shapes need, a `$TMPDIR` area, and scratch areas under `/tmp` and `/dev/shm`.
//! The world lives outside every writable root and is removed on drop (also when the case
//! panics), with every directory it had to create on the way.
//!
//! Where a world lies and what its parts are called is drawn at random from the shapes real
//! projects have (under `/var/tmp`, the home directory or `/srv`, with spaces and non-ASCII
//! characters), so no request carries a fixed marker a backend could key on. The draws come from
//! the run's seed and the trial's name ([`with_case`]), so a seed replays a run exactly.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::model::{Shape, TempDirSpelling, WorkspaceSpelling};

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

/// The environment variable that fixes the run's seed (`certify --seed N` sets it too).
pub const SEED_VAR: &str = "CONFORMANCE_SEED";

/// The run's seed: [`SEED_VAR`] when set (a bad value is an error), else drawn once per process.
pub fn run_seed() -> Result<u64, String> {
    static SEED: OnceLock<Result<u64, String>> = OnceLock::new();
    SEED.get_or_init(|| match std::env::var(SEED_VAR) {
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|e| format!("{SEED_VAR}={text:?} is not a seed (a number): {e}")),
        Err(_) => Ok(fastrand::u64(..)),
    })
    .clone()
}

thread_local! {
    /// The draws of the case running on this thread.
    static CASE_RNG: RefCell<Option<fastrand::Rng>> = const { RefCell::new(None) };
}

/// Runs `f` (one case) with the draws of trial `trial` in the run seeded `seed`: the same seed and
/// trial draw the same places and names, whatever else runs at the same time.
pub fn with_case<R>(seed: u64, trial: &str, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<fastrand::Rng>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CASE_RNG.set(self.0.take());
        }
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in trial.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = fastrand::Rng::with_seed(h);
    let odd = Odd::draw(&mut rng, seed);
    let _restore = Restore(CASE_RNG.replace(Some(rng)));
    let _odd = RestoreOdd(ODD.replace(odd));
    f()
}

struct RestoreOdd(Option<Odd>);
impl Drop for RestoreOdd {
    fn drop(&mut self) {
        ODD.set(self.0.take());
    }
}

/// One case in this many draws its worlds' names with the characters real folder and file names
/// have (brackets, parentheses, `*`, `?`, `&`, `%`, `,`, `;`, `!`, `{}`, quotes, backslashes, a
/// leading dash, leading and trailing spaces): a fixed share, drawn from the case's seed.
pub const ODD_SHARE: u8 = 4;

thread_local! {
    /// The odd names of the case running on this thread (`None`: ordinary names).
    static ODD: RefCell<Option<Odd>> = const { RefCell::new(None) };
}

/// How one name is dressed: text before and after it, and for a glob pattern the decoy's
/// (what the pattern matches instead of the name: `[draft]` matches `d`).
#[derive(Clone, Copy, Debug)]
struct Dress {
    before: &'static str,
    after: &'static str,
    /// The decoy's `before` and `after`, for a dress holding a glob pattern.
    decoy: Option<(&'static str, &'static str)>,
}

impl Dress {
    const fn plain(before: &'static str, after: &'static str) -> Dress {
        Dress {
            before,
            after,
            decoy: None,
        }
    }

    const fn glob(
        before: &'static str,
        after: &'static str,
        decoy: (&'static str, &'static str),
    ) -> Dress {
        Dress {
            before,
            after,
            decoy: Some(decoy),
        }
    }

    fn on(&self, name: &str) -> String {
        format!("{}{name}{}", self.before, self.after)
    }

    fn decoy_of(&self, name: &str) -> Option<String> {
        self.decoy.map(|(b, a)| format!("{b}{name}{a}"))
    }
}

/// Workspace names as glob patterns, each with the sibling the pattern matches instead (a
/// runner that expands its workspace option as a glob, as firejail's `--read-write` does, picks
/// the sibling): every one sorts the decoy before the name itself.
const ODD_WORKSPACES: &[Dress] = &[
    Dress::glob("", " [draft]", ("", " d")),
    Dress::glob("[wip] ", "", ("w ", "")),
    Dress::glob("", " (copy)*", ("", " (copy)")),
    Dress::glob("", "?", ("", "1")),
    Dress::glob("-", " [old] ", ("-", " o ")),
    Dress::glob(" ", " v[12]", (" ", " v1")),
];

/// Project folder names as people spell them: shell characters, quotes, spaces at the ends.
const ODD_PROJECTS: &[Dress] = &[
    Dress::plain("", " R&D"),
    Dress::plain("", " 50%"),
    Dress::plain("", "'s notes"),
    Dress::plain("", " \"final\""),
    Dress::plain("", ", v2; old"),
    Dress::plain("", "!"),
    Dress::plain("", " back\\slash"),
    Dress::plain(" ", " "),
    Dress::plain("-", " (1)"),
    Dress::plain("", " {a,b}"),
];

/// Sibling names (the outside tree, the alias, the extra root).
const ODD_SIBLINGS: &[Dress] = &[
    Dress::plain("", " {old,new}"),
    Dress::plain("", " (1)"),
    Dress::plain("", " 100%"),
    Dress::plain("", " & co"),
    Dress::plain("", "'s"),
    Dress::plain("\"", "\""),
    Dress::plain("", "\\x"),
    Dress::plain("", ";!"),
    Dress::plain("-", ""),
    Dress::plain("", " "),
    Dress::plain(" ", ""),
    Dress::plain("", " [x]"),
    Dress::plain("", " a,b"),
];

/// File names (before the extension).
const ODD_FILES: &[Dress] = &[
    Dress::plain("", " (1)"),
    Dress::plain("", " [draft]"),
    Dress::plain("-", ""),
    Dress::plain("", " *"),
    Dress::plain("", "?"),
    Dress::plain("R&D ", ""),
    Dress::plain("", " 50%"),
    Dress::plain("", "'s"),
    Dress::plain("", " \"x\""),
    Dress::plain("", "\\y"),
    Dress::plain("", " {1,2}"),
    Dress::plain("", ",;!"),
    Dress::plain(" ", " "),
];

/// A case's odd names: how each of its names is dressed, drawn once per case so every world of
/// the case (and each twin) carries the same characters in the same places.
#[derive(Clone, Debug)]
struct Odd {
    workspace: Dress,
    project: Dress,
    /// The outside tree, the alias, the extra root.
    siblings: [Dress; 3],
    files: Vec<Dress>,
    /// The run's seed, which replays them.
    seed: u64,
    /// The workspace and decoy of each world the case made (not the twins).
    worlds: Vec<(PathBuf, Option<PathBuf>)>,
}

impl Odd {
    /// `Some` in [`ODD_SHARE`]'s share of cases.
    fn draw(rng: &mut fastrand::Rng, seed: u64) -> Option<Odd> {
        if rng.u8(..ODD_SHARE) != 0 {
            return None;
        }
        let one = |rng: &mut fastrand::Rng, from: &[Dress]| from[rng.usize(..from.len())];
        Some(Odd {
            workspace: one(rng, ODD_WORKSPACES),
            project: one(rng, ODD_PROJECTS),
            siblings: [
                one(rng, ODD_SIBLINGS),
                one(rng, ODD_SIBLINGS),
                one(rng, ODD_SIBLINGS),
            ],
            files: LOGICAL_FILES.iter().map(|_| one(rng, ODD_FILES)).collect(),
            seed,
            worlds: Vec::new(),
        })
    }
}

/// The odd names of the case running on this thread, if it has them.
fn odd() -> Option<Odd> {
    ODD.with_borrow(Clone::clone)
}

/// True when the case running on this thread draws its names with shell and glob characters.
pub fn odd_names() -> bool {
    ODD.with_borrow(Option::is_some)
}

/// The words a failure of a case with odd names ends with: that its names hold shell and glob
/// characters, the seed that replays them, and each world's workspace (and decoy), one line
/// each. A backend that cannot carry such a name answers `unavailable`, and its failure says so
/// here; one that confines the decoy shows it in the world diff above.
pub fn noted(message: String) -> String {
    ODD.with_borrow(|odd| match odd {
        None => message,
        Some(o) => {
            let mut out = format!(
                "{message}\n  (this case's names hold the shell and glob characters real names have, \
                 as one case in {ODD_SHARE} does; `certify --seed {seed}` or {SEED_VAR}={seed} replays them)",
                seed = o.seed
            );
            for (ws, decoy) in &o.worlds {
                out.push_str(&format!("\n  workspace: {}", shown(ws)));
                if let Some(d) = decoy {
                    out.push_str(&format!(
                        "\n  decoy (a glob of the workspace's name matches it): {}",
                        shown(d)
                    ));
                }
            }
            out
        }
    })
}

/// `name` (`notes.txt`) dressed before its extension (`notes (1).txt`, `-notes.txt`).
fn dress_file(dress: &Dress, name: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{}.{ext}", dress.on(stem)),
        _ => dress.on(name),
    }
}

thread_local! {
    /// The drawn names of the files an effect works on, while one runs on this thread.
    static FILE_NAMES: RefCell<Option<BTreeMap<&'static str, String>>> = const { RefCell::new(None) };
}

/// Names files and folders have in real projects: what an effect's `existing`, `new`,
/// `newdir`, ... are called in one case.
const FILE_NAMES_POOL: &[&str] = &[
    "notes.txt",
    "config.yaml",
    "main.rs",
    "README.md",
    "index.html",
    "data.csv",
    "app.py",
    "Makefile",
    "report.pdf",
    "todo.md",
    "build.log",
    "package.json",
    "lib",
    "assets",
    "docs",
    "scripts",
    "vendor",
    "out",
    "photos",
    "old",
    "settings.json",
    "Cargo.toml",
    "test_main.py",
    "styles.css",
    "LICENSE",
    "schema.sql",
    "deploy.sh",
    "src-gen",
    "fixtures",
    "tmp-out",
];

/// The logical names effects work on, each given a name of [`FILE_NAMES_POOL`] per case.
const LOGICAL_FILES: &[&str] = &[
    "existing",
    "new",
    "newdir",
    "emptydir",
    "newlink",
    "src",
    "moved",
    "dir",
    "link_out",
    "file_link",
    "dangling",
];

/// Runs `f` (one effect) with the files it works on named by draws of the case (distinct names
/// from the pool of ordinary file names): no fixed file name marks a harness request. [`file_name`] and
/// [`name`] answer with them while `f` runs on this thread.
pub fn with_file_names<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<BTreeMap<&'static str, String>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FILE_NAMES.set(self.0.take());
        }
    }
    let mut pool: Vec<&str> = FILE_NAMES_POOL.to_vec();
    let odd = odd();
    let table: BTreeMap<&'static str, String> = LOGICAL_FILES
        .iter()
        .enumerate()
        .map(|(n, logical)| {
            let i = draw(|rng| rng.usize(..pool.len()));
            let plain = pool.swap_remove(i);
            let named = match odd.as_ref().and_then(|o| o.files.get(n)) {
                Some(dress) => dress_file(dress, plain),
                None => plain.to_owned(),
            };
            (*logical, named)
        })
        .collect();
    let _restore = Restore(FILE_NAMES.replace(Some(table)));
    f()
}

/// The name `logical` (`existing`, `dir`, `src`, ...) has in the effect running on this thread,
/// or `logical` itself outside one.
pub fn file_name(logical: &str) -> String {
    FILE_NAMES.with_borrow(|table| {
        table
            .as_ref()
            .and_then(|t| t.get(logical).cloned())
            .unwrap_or_else(|| logical.to_owned())
    })
}

/// One draw from the case's generator (outside a case, from a fresh random one).
fn draw<R>(f: impl FnOnce(&mut fastrand::Rng) -> R) -> R {
    CASE_RNG.with_borrow_mut(|slot| match slot {
        Some(rng) => f(rng),
        None => f(&mut fastrand::Rng::new()),
    })
}

fn pick<'a>(rng: &mut fastrand::Rng, from: &[&'a str]) -> &'a str {
    from[rng.usize(..from.len())]
}

/// Where worlds may lie on this host, and why the other candidates were left out.
#[derive(Clone, Debug)]
pub struct Places {
    /// The usable bases (canonical), each with the kind of place it is.
    pub bases: Vec<(PathBuf, &'static str)>,
    /// Candidates left out, with the reason.
    pub left_out: Vec<(PathBuf, String)>,
    /// The project folders each base already had when the run began (`~/src`): a world lies in
    /// one of them when drawn, else right in the base. Fixed for the run, so a seed replays it.
    folders: Vec<PathBuf>,
    /// Names this host's own software goes by (`/usr/share/doc`), sorted: a third of project and
    /// neighbour names come from here, so a backend keyed on the harness's word lists would key
    /// on ordinary names of this very host as well.
    names: Vec<String>,
}

/// This host's [`Places`], decided once per process: `/var/tmp`, the home directory and `/srv`,
/// each kept only when it is a directory this user can write that does not resolve into a
/// writable root (`/tmp`, `/dev/shm`) and is not `/`.
pub fn places() -> &'static Places {
    static PLACES: OnceLock<Places> = OnceLock::new();
    PLACES.get_or_init(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut candidates: Vec<(PathBuf, &'static str)> =
            vec![(PathBuf::from("/var/tmp"), "var-tmp")];
        match home {
            Some(h) if h.is_absolute() => candidates.push((h, "home")),
            _ => {}
        }
        candidates.push((PathBuf::from("/srv"), "srv"));
        let mut places = Places {
            bases: Vec::new(),
            left_out: Vec::new(),
            folders: Vec::new(),
            names: host_names(Path::new("/usr/share/doc")),
        };
        for (path, kind) in candidates {
            match usable_base(&path) {
                Ok(canonical) => {
                    places.folders.extend(
                        folders(kind)
                            .iter()
                            .map(|f| canonical.join(f))
                            .filter(|f| f.is_dir()),
                    );
                    places.bases.push((canonical, kind));
                }
                Err(why) => places.left_out.push((path, why)),
            }
        }
        places
    })
}

/// The entries of `dir` that make plausible folder names (UTF-8, not hidden, 2 to 40 bytes,
/// without the harness's own words), sorted so a seed replays the same draws on this host.
fn host_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| (2..=40).contains(&n.len()) && !n.starts_with('.'))
                .filter(|n| {
                    let lower = n.to_lowercase();
                    !lower.contains("sandbox") && !lower.contains("conformance")
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A made-up, pronounceable name (`velorin`, `Tasku-web`): names no list holds.
fn coined(rng: &mut fastrand::Rng) -> String {
    const ONSETS: &[&str] = &[
        "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "kl", "st",
        "tr", "sh",
    ];
    const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou", "é"];
    const TAILS: &[&str] = &[
        "app", "web", "cli", "lib", "tools", "site", "api", "data", "docs",
    ];
    let mut name = String::new();
    for _ in 0..rng.usize(2..4) {
        name.push_str(pick(rng, ONSETS));
        name.push_str(pick(rng, VOWELS));
    }
    if rng.bool() {
        name.push_str(pick(rng, &["n", "r", "s", "x", "l"]));
    }
    if rng.u8(..4) == 0 {
        let mut chars = name.chars();
        if let Some(first) = chars.next() {
            name = first.to_uppercase().chain(chars).collect();
        }
    }
    match rng.u8(..4) {
        0 => format!("{name}-{}", pick(rng, TAILS)),
        1 => format!("{name} {}", pick(rng, TAILS)),
        _ => name,
    }
}

/// A project name: from [`PROJECTS`], from this host's own names, or coined, a third each; true
/// when it came from a pool (a list or the host).
fn draw_project(rng: &mut fastrand::Rng, host: &[String]) -> (String, bool) {
    match rng.u8(..3) {
        0 if !host.is_empty() => (host[rng.usize(..host.len())].clone(), true),
        1 => (coined(rng), false),
        _ => (pick(rng, PROJECTS).to_owned(), true),
    }
}

/// A name from `list`, from this host's own names, or coined, a third each (the list's share
/// is larger on a host without names of its own).
fn draw_name(rng: &mut fastrand::Rng, list: &[&str], host: &[String]) -> String {
    match rng.u8(..3) {
        0 if !host.is_empty() => host[rng.usize(..host.len())].clone(),
        1 => coined(rng),
        _ => pick(rng, list).to_owned(),
    }
}

fn usable_base(path: &Path) -> Result<PathBuf, String> {
    let canonical = std::fs::canonicalize(path).map_err(|e| format!("{e}"))?;
    if !canonical.is_dir() {
        return Err("not a directory".into());
    }
    if canonical == Path::new("/") {
        return Err("it is /".into());
    }
    for root in ["/tmp", "/dev/shm"] {
        if std::fs::canonicalize(root).is_ok_and(|r| canonical.starts_with(r)) {
            return Err(format!("it resolves under {root}, a writable root"));
        }
    }
    nix::unistd::access(&canonical, nix::unistd::AccessFlags::W_OK)
        .map_err(|e| format!("this user cannot write it ({e})"))?;
    Ok(canonical)
}

/// Project names as people spell them.
const PROJECTS: &[&str] = &[
    "api-server",
    "my project",
    "données",
    "café-app",
    "Übersicht",
    "résumé site",
    "naïve-bayes",
    "日本語メモ",
    "webshop",
    "infra",
    "thesis",
    "Ærø tools",
    "Projekt Alpha",
    "client portal",
    "scripts",
    "dotfiles-neu",
    "été 2024",
    "notebook",
    "backend",
    "ποίημα",
];

/// Folders projects are kept in, per kind of base.
fn folders(kind: &str) -> &'static [&'static str] {
    match kind {
        "home" => &[
            "src",
            "code",
            "work",
            "Projets",
            "dev/repos",
            "Documents/Code",
            "git",
        ],
        "srv" => &["git", "www", "data", "builds", "repos"],
        _ => &["build", "ci-runs", "checkouts", "jobs", "cache/work"],
    }
}

/// Other things that live next to a project.
const NEIGHBOURS: &[&str] = &[
    "notes",
    "Documents",
    "backup",
    "other project",
    "Fotos 2023",
    "archive",
    "résumés",
    "shared",
];

/// Names of scratch directories under `/tmp` and `/dev/shm`, as tools make them.
const SCRATCH: &[&str] = &[
    "tmp.",
    "npm-",
    "go-build",
    "pip-req-build-",
    "cargo-install",
    "pytest-of-",
    "vscode-",
    "sess_",
];

/// A run of `n` lowercase hex digits drawn from the case's generator.
pub fn draw_hex(n: usize) -> String {
    draw(|rng| {
        (0..n)
            .map(|_| char::from_digit(rng.u32(..16), 16).unwrap_or('0'))
            .collect()
    })
}

/// One of `from`, drawn from the case's generator.
pub fn draw_one<'a>(from: &[&'a str]) -> &'a str {
    draw(|rng| pick(rng, from))
}

/// A run of `n` lowercase letters and digits.
fn token(rng: &mut fastrand::Rng, n: usize) -> String {
    (0..n)
        .map(|_| {
            let c = rng.usize(..36);
            char::from_digit(c as u32, 36).unwrap_or('x')
        })
        .collect()
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
    pub fn twin_of(world: &World) -> io::Result<World> {
        World::drawn(Layout::Twin, Some(&world.base))
    }

    /// Pairs of (this world's root, `twin`'s root): what [`mirror`] makes the twin from.
    pub fn root_pairs(&self, twin: &World) -> Vec<(PathBuf, PathBuf)> {
        self.roots()
            .into_iter()
            .zip(twin.roots())
            .map(|(a, b)| (a.to_path_buf(), b.to_path_buf()))
            .collect()
    }

    fn drawn(layout: Layout, near: Option<&Path>) -> io::Result<World> {
        let places = places();
        let near_bases: Vec<&(PathBuf, &'static str)> = places
            .bases
            .iter()
            .filter(|(base, _)| near.is_some_and(|dir| dir.starts_with(base)))
            .collect();
        // A world whose base no longer matches (a base spelled through a symlink) gets a twin
        // anywhere, as every world does.
        let bases: Vec<&(PathBuf, &'static str)> = if near_bases.is_empty() {
            places.bases.iter().collect()
        } else {
            near_bases
        };
        if bases.is_empty() {
            return Err(io::Error::other(format!(
                "no place for a world on this host: {:?}",
                places.left_out
            )));
        }
        let odd = odd();
        for _ in 0..16 {
            let (base, kind) = draw(|rng| bases[rng.usize(..bases.len())].clone());
            let (folder, plain_project, neighbour, alias, tmpdir, tmp, shm, extra) = draw(|rng| {
                let (project, pooled) = draw_project(rng, &places.names);
                let folder = pick(rng, folders(kind));
                // A name from a pool carries a suffix, as copies and clones do: without one, two
                // worlds of a run would often draw the same folder and the later one would have
                // to draw again, differently from one run to the next. A coined name is one of
                // millions and mostly carries none.
                let suffix = match (pooled, rng.u8(..6)) {
                    (_, 0) | (true, 3) => format!(" ({})", rng.u16(2..999)),
                    (_, 1) | (true, 4) => format!("-{}", token(rng, 6)),
                    (_, 2) | (true, 5) => format!("_{}", rng.u32(1000..99999)),
                    _ => String::new(),
                };
                let scratch =
                    |rng: &mut fastrand::Rng| format!("{}{}", pick(rng, SCRATCH), token(rng, 10));
                (
                    folder.to_owned(),
                    format!("{project}{suffix}"),
                    draw_name(rng, NEIGHBOURS, &places.names),
                    format!("{} link", draw_name(rng, PROJECTS, &places.names)),
                    format!(
                        "{}{}",
                        pick(rng, &["tmp-", "build-tmp.", "scratch ", "tmp."]),
                        token(rng, 8)
                    ),
                    scratch(rng),
                    scratch(rng),
                    format!(
                        "{}{}",
                        pick(rng, &["shared-", "vendor ", "cache.", "deps_"]),
                        token(rng, 6)
                    ),
                )
            });
            let project = match &odd {
                Some(o) => o.project.on(&plain_project),
                None => plain_project.clone(),
            };
            // A world removes its four roots when dropped, so it must own each: a root that is
            // there already (another world's, drawn alike) means drawing again.
            let taken = |p: &Path| std::fs::symlink_metadata(p).is_ok();
            let scratch_roots = [
                Path::new("/var/tmp").join(&tmpdir),
                Path::new("/tmp").join(&tmp),
                Path::new("/dev/shm").join(&shm),
            ];
            if scratch_roots.iter().any(|p| taken(p)) {
                continue;
            }
            // A project lies in the drawn folder when this host has it (`~/src`), else right in
            // the base: the harness makes no folder on the way, so it leaves none behind (another
            // process may be using one when this one is done).
            let parent = base.join(&folder);
            let dir = if places.folders.contains(&parent) {
                parent.join(&project)
            } else {
                base.join(&project)
            };
            let ws_name = pick_ws_name(&plain_project);
            // A case with odd names dresses each (the same way in every world of the case, so a
            // twin carries the same characters), and a workspace named like a glob pattern gets
            // the sibling the pattern matches instead (a decoy).
            let (ws_name, decoy, neighbour, alias, extra) = match &odd {
                Some(o) => (
                    o.workspace.on(&ws_name),
                    o.workspace.decoy_of(&ws_name),
                    o.siblings[0].on(&neighbour),
                    o.siblings[1].on(&alias),
                    o.siblings[2].on(&extra),
                ),
                None => (ws_name, None, neighbour, alias, extra),
            };
            // The workspace, the outside tree, the alias, the extra root and the decoy are
            // siblings: drawn from shared pools (this host's names, coined ones), two could
            // coincide.
            let siblings = [
                ws_name.as_str(),
                neighbour.as_str(),
                alias.as_str(),
                extra.as_str(),
                decoy.as_deref().unwrap_or("."),
            ];
            if (1..siblings.len()).any(|i| siblings[..i].contains(&siblings[i])) {
                continue;
            }
            // A world named like a project folder (`git`, `data`) would pass for one in a run
            // that starts while it exists, and take that run's worlds with it when removed.
            if ["home", "srv", "var-tmp"].iter().any(|kind| {
                folders(kind)
                    .iter()
                    .any(|f| f.split('/').any(|part| part == project))
            }) {
                continue;
            }
            let ws = dir.join(&ws_name);
            // The world exists (and is dropped, removing its roots) only once its folder is
            // made here: a folder that was there is another world's, never removed by this one.
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let [tmpdir, tmp, shm] = scratch_roots;
            let decoy = decoy.map(|d| dir.join(d));
            let world = World {
                ws,
                decoy,
                outside: dir.join(&neighbour),
                alias: dir.join(&alias),
                tmpdir,
                tmp,
                shm,
                extra: dir.join(&extra),
                base: base.clone(),
                dir,
            };
            // The decoy is in every world of the case, a twin's too: a runner that globs its
            // workspace finds it in both and answers both alike (and confines the wrong one).
            if let Some(decoy) = &world.decoy {
                std::fs::create_dir(decoy)?;
            }
            if !matches!(layout, Layout::Twin) {
                ODD.with_borrow_mut(|odd| {
                    if let Some(o) = odd {
                        o.worlds.push((world.ws.clone(), world.decoy.clone()));
                    }
                });
            }
            match layout {
                Layout::Full => world.lay_out()?,
                Layout::Twin => {}
                Layout::Effect(shape) => world.lay_out_for(shape)?,
            }
            // The decoy is a copy of the workspace as laid out (a copy of a project beside it),
            // so what a payload does in a workspace confined as the decoy lands there, and the
            // world diff names it.
            if let (Some(decoy), false) = (&world.decoy, matches!(layout, Layout::Twin)) {
                copy_tree(&world.ws, decoy)?;
            }
            return Ok(world);
        }
        Err(io::Error::other("16 drawn world places were all taken"))
    }

    fn lay_out_for(&self, shape: Shape) -> io::Result<()> {
        // Only what the shape works on is made (each inode made and removed on a real disk
        // makes the next ones dearer); a tree it does not make is still in the world diff,
        // which names anything that appears there.
        std::fs::create_dir(&self.ws)?;
        std::fs::create_dir(&self.outside)?;
        match shape {
            Shape::RootViaSymlink => symlink(&self.ws, &self.alias)?,
            // `ws/dir/../..`: the path passes through `dir`.
            Shape::Dotdot => std::fs::create_dir(self.ws.join(file_name("dir")))?,
            Shape::DevShm if Path::new("/dev/shm").is_dir() => std::fs::create_dir(&self.shm)?,
            _ => {}
        }
        std::fs::write(self.outside.join("sentinel"), SENTINEL)?;
        std::fs::write(self.ws.join(file_name("src")), "src")?;
        let plain = OsStr::new("");
        match shape {
            Shape::Inside | Shape::RootViaSymlink | Shape::RootTrailingSlash => {
                populate(&self.ws.join(file_name("dir")), plain)?;
            }
            Shape::Root => populate(&self.ws, plain)?,
            Shape::Dotdot | Shape::AbsoluteOutside | Shape::FsRootWorkspace => {
                populate(&self.outside, plain)?;
            }
            Shape::SymlinkDir => {
                populate(&self.outside, plain)?;
                symlink(&self.outside, self.ws.join(file_name("link_out")))?;
            }
            Shape::SymlinkFile => {
                populate(&self.outside, plain)?;
                symlink(
                    self.outside.join(file_name("existing")),
                    self.ws.join(file_name("file_link")),
                )?;
                symlink(
                    self.outside.join(file_name("new")),
                    self.ws.join(file_name("dangling")),
                )?;
            }
            Shape::Tmp => populate(&self.tmp, plain)?,
            Shape::Tmpdir => populate(&self.tmpdir, plain)?,
            Shape::DevNull | Shape::DevShm => {}
            Shape::WsUnderTmp => {
                populate(&self.tmp.join("ws").join(file_name("dir")), plain)?;
                std::fs::write(self.tmp.join("ws").join(file_name("src")), "src")?;
            }
            Shape::NonUtf8 => {
                populate(&self.ws.join(file_name("dir")), OsStr::from_bytes(b"\xff"))?
            }
            Shape::NonUtf8Outside => populate(&self.outside, OsStr::from_bytes(b"\xff"))?,
            Shape::Space => populate(&self.ws.join("with space"), OsStr::new(" x"))?,
            Shape::Prelinked => {
                std::fs::write(self.outside.join("linked_target"), "old")?;
                std::fs::hard_link(
                    self.outside.join("linked_target"),
                    self.ws.join("prelinked"),
                )?;
            }
        }
        Ok(())
    }

    fn lay_out(&self) -> io::Result<()> {
        let d = &self.dir;
        for dir in [self.ws.join("dir"), self.outside.clone()] {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::create_dir(&self.tmpdir)?;
        std::fs::create_dir_all(self.tmp.join("ws/dir"))?;
        if Path::new("/dev/shm").is_dir() {
            std::fs::create_dir_all(&self.shm)?;
        }
        std::fs::write(self.outside.join("sentinel"), SENTINEL)?;
        for ws in [self.ws.clone(), self.tmp.join("ws")] {
            std::fs::write(ws.join("src"), "src")?;
        }
        for (dir, suffix) in [
            (self.ws.join("dir"), OsStr::new("")),
            (self.ws.clone(), OsStr::new("")),
            (self.outside.clone(), OsStr::new("")),
            (self.tmpdir.clone(), OsStr::new("")),
            (self.tmp.clone(), OsStr::new("")),
            (self.tmp.join("ws/dir"), OsStr::new("")),
            (self.ws.join("dir"), OsStr::from_bytes(b"\xff")),
            (self.outside.clone(), OsStr::from_bytes(b"\xff")),
            (self.ws.join("with space"), OsStr::new(" x")),
        ] {
            populate(&dir, suffix)?;
        }
        symlink(&self.outside, self.ws.join("link_out"))?;
        symlink(self.outside.join("existing"), self.ws.join("file_link"))?;
        symlink(self.outside.join("new"), self.ws.join("dangling"))?;
        symlink(&self.ws, &self.alias)?;
        std::fs::write(self.outside.join("linked_target"), "old")?;
        std::fs::hard_link(
            self.outside.join("linked_target"),
            self.ws.join("prelinked"),
        )?;
        std::fs::write(d.join("afile"), "afile")?;
        Ok(())
    }

    /// `%WS%` (the workspace as `spelled`), `%WSDIR%` (the real workspace), `%ALIAS%`,
    /// `%OUTSIDE%` (and `%OUTSIDE_NAME%`, its name), `%TMPDIR%`, `%TMP%`, `%EXTRA%` and `%WORLD%` replaced
    /// by this world's paths, raw (for an argument, a path, an expected text), and `%sh(...)` by
    /// what is inside it so expanded, as one shell word ([`shell_quote`]): the form a shell
    /// command spells a world path in (`printf x > %sh(%OUTSIDE%/f)`).
    pub fn expand(&self, text: &str, spelled: &Path) -> String {
        self.expand_with(text, spelled, &[])
    }

    /// [`World::expand`] with more placeholders (`("ETC_PROBE", path)` for `%ETC_PROBE%`).
    pub fn expand_with(&self, text: &str, spelled: &Path, more: &[(&str, String)]) -> String {
        let shown = |p: &Path| p.display().to_string();
        let outside_name = self
            .outside
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut values: Vec<(String, String)> = vec![
            ("WSDIR".into(), shown(&self.ws)),
            ("OUTSIDE_NAME".into(), outside_name),
            ("WS".into(), shown(spelled)),
            ("ALIAS".into(), shown(&self.alias)),
            ("OUTSIDE".into(), shown(&self.outside)),
            ("TMPDIR".into(), shown(&self.tmpdir)),
            ("TMP".into(), shown(&self.tmp)),
            ("EXTRA".into(), shown(&self.extra)),
            ("WORLD".into(), shown(&self.dir)),
        ];
        values.extend(more.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        expand_placeholders(text, &values)
    }

    /// Pairs of (this world's path, the twin's path) for every tree a request may name, longest
    /// first: what renames a request about this world into the same request about `twin`.
    pub fn renaming(&self, twin: &World) -> Vec<(PathBuf, PathBuf)> {
        let mut pairs = vec![
            (self.ws.clone(), twin.ws.clone()),
            (self.outside.clone(), twin.outside.clone()),
            (self.alias.clone(), twin.alias.clone()),
            (self.dir.clone(), twin.dir.clone()),
            (self.tmpdir.clone(), twin.tmpdir.clone()),
            (self.tmp.clone(), twin.tmp.clone()),
            (self.shm.clone(), twin.shm.clone()),
            (self.extra.clone(), twin.extra.clone()),
        ];
        if let (Some(a), Some(b)) = (&self.decoy, &twin.decoy) {
            pairs.push((a.clone(), b.clone()));
        }
        // A path spelled in a shell command inside single quotes has each `'` as `'\''`: the
        // same renaming applies to that spelling.
        let quoted = |p: &Path| PathBuf::from(p.to_string_lossy().replace('\'', r"'\''"));
        let spelled: Vec<(PathBuf, PathBuf)> = pairs
            .iter()
            .filter(|(a, _)| a.to_str().is_some_and(|t| t.contains('\'')))
            .map(|(a, b)| (quoted(a), quoted(b)))
            .collect();
        pairs.extend(spelled);
        pairs.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
        pairs
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

    /// Runs `script` with bash in `dir` on the host (never confined), git's global and system
    /// config left out and an author set, so the world's repositories behave the same on every
    /// host. Fails with the script's own words when it exits non-zero.
    pub fn host_bash(&self, dir: &Path, script: &str) -> Result<String, String> {
        let out = std::process::Command::new("bash")
            .args(["-c", script])
            .current_dir(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "person")
            .env("GIT_AUTHOR_EMAIL", "person@example.invalid")
            .env("GIT_COMMITTER_NAME", "person")
            .env("GIT_COMMITTER_EMAIL", "person@example.invalid")
            .env("OUTSIDE", &self.outside)
            .output()
            .map_err(|e| format!("cannot run bash on the host: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{script:?} in {dir:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Gives the repository at `dir` (made by [`World::init_repo`]) a commit, a submodule `sub`
    /// (from a repository beside the workspace) and a linked worktree `wt`.
    pub fn link_repo(&self, dir: &Path) -> Result<(), String> {
        let upstream = self.dir.join("upstream");
        self.init_repo(&upstream)?;
        self.host_bash(&upstream, "git commit -q --allow-empty -m upstream")?;
        let quoted = format!("'{}'", upstream.to_string_lossy().replace('\'', "'\\''"));
        self.host_bash(
            dir,
            &format!(
                "printf 'a\\n' > a && git add a && git commit -qm init && git -c protocol.file.allow=always submodule -q add {quoted} sub && git commit -qm sub && git worktree add -q wt -b wt"
            ),
        )?;
        Ok(())
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

/// A mount point as `/proc/self/mountinfo` writes it (space, tab, newline and backslash are
/// octal escapes).
pub(crate) fn unescape_mount_path(field: &str) -> PathBuf {
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

/// Copies what is in the directory `from` into the directory `to` (made already): directories,
/// files with their modes, symlinks as they point.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let ft = entry.file_type()?;
        if ft.is_dir() {
            std::fs::create_dir(&dst)?;
            copy_tree(&src, &dst)?;
        } else if ft.is_symlink() {
            symlink(std::fs::read_link(&src)?, &dst)?;
        } else if ft.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// `existing<suffix>` (content `old`, mode 0644) and an empty `emptydir<suffix>` in `dir`.
fn populate(dir: &Path, suffix: &OsStr) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let existing = dir.join(name("existing", suffix));
    std::fs::write(&existing, "old")?;
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644))?;
    std::fs::create_dir_all(dir.join(name("emptydir", suffix)))
}

/// The workspace's name: the project's own name, or a conventional checkout folder.
fn pick_ws_name(project: &str) -> String {
    draw(|rng| match rng.u8(..3) {
        0 => "repo".to_owned(),
        1 => "trunk".to_owned(),
        _ => project.to_owned(),
    })
}

/// `text` as one bash word, whatever bytes it holds, in UTF-8: single-quoted when it is UTF-8,
/// else a `$'...'` word in which only the bytes that are not UTF-8 are octal escapes (so the
/// payload builds a name that is not UTF-8 from an argv that is).
pub fn shell_quote(text: &OsStr) -> String {
    if let Some(s) = text.to_str() {
        return format!("'{}'", s.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for chunk in text.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if matches!(c, '\'' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\{b:03o}"));
        }
    }
    out.push('\'');
    out
}

/// `text` with each `%NAME%` of `values` replaced by its value and each `%sh(...)` by what is
/// inside it so expanded, as one shell word, in one pass: a value is never expanded again (a
/// name may hold `%`), and a `%` that starts no placeholder stays as it is (`printf '%s'`).
pub fn expand_placeholders(text: &str, values: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(inner) = rest.strip_prefix("%sh(")
            && let Some(close) = inner.find(')')
        {
            let word = expand_placeholders(&inner[..close], values);
            out.push_str(&shell_quote(OsStr::new(&word)));
            rest = &inner[close + 1..];
            continue;
        }
        let found = values.iter().find(|(name, _)| {
            rest[1..]
                .strip_prefix(name.as_str())
                .is_some_and(|r| r.starts_with('%'))
        });
        match found {
            Some((name, value)) => {
                out.push_str(value);
                rest = &rest[name.len() + 2..];
            }
            None => {
                out.push('%');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The world placeholders (`%WS%`, `%OUTSIDE%`, ...) `text` spells raw, outside `%sh(...)`: in
/// a shell command each is a defect (a name with a quote or a `$` breaks the command), found by
/// the test over the scenario files.
pub fn raw_placeholders(text: &str) -> Vec<String> {
    const NAMES: &[&str] = &[
        "WSDIR",
        "OUTSIDE_NAME",
        "WS",
        "ALIAS",
        "OUTSIDE",
        "TMPDIR",
        "TMP",
        "EXTRA",
        "WORLD",
        "ETC_PROBE",
    ];
    // What is left once every quoted form is gone.
    let mut outside_quotes = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("%sh(") {
        outside_quotes.push_str(&rest[..at]);
        rest = &rest[at + 4..];
        match rest.find(')') {
            Some(close) => rest = &rest[close + 1..],
            None => rest = "",
        }
    }
    outside_quotes.push_str(rest);
    NAMES
        .iter()
        .filter(|n| outside_quotes.contains(&format!("%{n}%")))
        .map(|n| format!("%{n}%"))
        .collect()
}

/// `base` followed by `suffix`, as a file name.
pub fn name(base: &str, suffix: &OsStr) -> OsString {
    let mut n = OsString::from(file_name(base));
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
        if let Ok(mut deferred) = DEFERRED.lock()
            && let Some(later) = deferred.as_mut()
        {
            // Each root is renamed out of the way now (a rename frees no inode) and removed by
            // the sweep: its name is free again at once, so the worlds of a run collide only
            // with the ones running beside them, and a seed replays the same names.
            static RENAMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            for root in self.roots() {
                if std::fs::symlink_metadata(root).is_err() {
                    continue;
                }
                let n = RENAMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let aside = root.with_file_name(format!(".removed-{}-{n}", std::process::id()));
                match std::fs::rename(root, &aside) {
                    Ok(()) => later.push(aside),
                    Err(_) => later.push(root.to_path_buf()),
                }
            }
            return;
        }
        for root in self.roots() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

/// The roots of worlds dropped while removal is deferred ([`defer_removal`]), for [`sweep`].
static DEFERRED: Mutex<Option<Vec<PathBuf>>> = Mutex::new(None);

/// Keeps the worlds dropped from now on until [`sweep`] removes them all (a certify run does
/// this). On a journal-less ext4 (this project's reference machine) every inode made looks past
/// each inode freed in the last 30 s, so a run that removes each world as its case ends makes
/// every later world dearer: measured, a fifth of the run's CPU went to that scan. A world's
/// folder stays taken until the sweep, so no later world is drawn onto it.
pub fn defer_removal() {
    if let Ok(mut deferred) = DEFERRED.lock() {
        deferred.get_or_insert_with(Vec::new);
    }
}

/// Removes every world dropped since [`defer_removal`], on `threads` threads, and removes each
/// world dropped from now on at once again.
pub fn sweep(threads: usize) {
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(sweep_so_far);
        }
    });
    if let Ok(mut deferred) = DEFERRED.lock() {
        for root in deferred.take().unwrap_or_default() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

/// Removes the worlds dropped so far, one at a time, and goes on deferring: for each worker with
/// no case left to start, while others finish theirs (no world is made after that, so the freed
/// inodes slow nothing down). Workers that call it together share the work.
pub fn sweep_so_far() {
    while let Some(root) = DEFERRED
        .lock()
        .ok()
        .and_then(|mut d| d.as_mut().and_then(Vec::pop))
    {
        let _ = std::fs::remove_dir_all(root);
    }
}

/// Makes in a twin what `path` (a path in a world) passes through in the world: each directory,
/// symlink (its target renamed by `renaming`, and mirrored too) and file on the way, as far as
/// it exists there. `roots` pairs each world root with the twin's ([`World::root_pairs`]); the
/// twin's path of each is `renaming` of the world's. What a
/// backend may resolve of a request's path is then in the twin too, and nothing else is made (a
/// request only names the rest).
pub fn mirror(
    roots: &[(PathBuf, PathBuf)],
    path: &Path,
    renaming: &dyn Fn(&OsStr) -> OsString,
) -> io::Result<()> {
    mirror_hops(roots, path, renaming, 8)
}

fn mirror_hops(
    roots: &[(PathBuf, PathBuf)],
    path: &Path,
    renaming: &dyn Fn(&OsStr) -> OsString,
    hops: u8,
) -> io::Result<()> {
    let Some((root, _)) = roots.iter().find(|(root, _)| path.starts_with(root)) else {
        return Ok(());
    };
    let mut here = root.clone();
    let rest = path.strip_prefix(root).unwrap_or(Path::new(""));
    let mut parts = vec![std::path::Component::CurDir];
    parts.extend(rest.components());
    for part in parts {
        match part {
            std::path::Component::Normal(name) => here.push(name),
            std::path::Component::CurDir => {}
            // `..` and the like: what lies beyond is not the twin's to make.
            _ => return Ok(()),
        }
        let Ok(meta) = std::fs::symlink_metadata(&here) else {
            return Ok(());
        };
        // The twin's own names differ (a drawn workspace name): the renaming knows them.
        let there = PathBuf::from(renaming(here.as_os_str()));
        if std::fs::symlink_metadata(&there).is_ok() {
            continue;
        }
        let ft = meta.file_type();
        if ft.is_dir() {
            std::fs::create_dir(&there)?;
            std::fs::set_permissions(&there, meta.permissions())?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&here)?;
            symlink(PathBuf::from(renaming(target.as_os_str())), &there)?;
            if hops > 0 {
                let resolved = here.parent().unwrap_or(Path::new("/")).join(&target);
                mirror_hops(roots, &resolved, renaming, hops - 1)?;
            }
            // A path through a symlink goes on in its target, mirrored above.
            return Ok(());
        } else if ft.is_file() {
            std::fs::copy(&here, &there)?;
            return Ok(());
        } else {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_names_every_change_outside_what_may_change() {
        let world = World::new().expect("world");
        let before = world.snapshot();
        let outside = world.outside.clone();
        std::fs::write(outside.join("sentinel"), "changed").expect("write");
        std::fs::write(outside.join("new"), "x").expect("write");
        std::fs::remove_file(outside.join("existing")).expect("rm");
        std::fs::write(world.ws.join("allowed"), "x").expect("write");
        symlink("/etc", world.tmp.join("link")).expect("symlink");
        let may = [world.ws.clone()];
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
    fn a_seed_and_a_trial_replay_the_same_places_and_others_differ() {
        let dirs = |seed: u64, trial: &str| {
            with_case(seed, trial, || {
                let world = World::new().expect("world");
                (world.dir.clone(), world.ws.clone(), world.tmp.clone())
            })
        };
        let first = dirs(7, "containment::bwrap::effects::a");
        assert_eq!(first, dirs(7, "containment::bwrap::effects::a"));
        let others: std::collections::BTreeSet<_> = (0..8u64).map(|n| dirs(n, "x").0).collect();
        assert!(others.len() > 1, "{others:?}");
    }

    #[test]
    fn a_world_drawn_onto_another_never_removes_the_other() {
        // The same seed and trial draw the same places first: the second world must draw again
        // and leave the first one's folder and scratch roots alone.
        // A world for one effect makes no `/tmp` root, so only its folder shows it is taken.
        let first = with_case(11, "x::y", || {
            World::for_effect(Shape::Inside).expect("world")
        });
        let second = with_case(11, "x::y", || {
            World::for_effect(Shape::Inside).expect("world")
        });
        assert_ne!(first.dir, second.dir);
        assert!(first.outside.join("sentinel").is_file());
        drop(second);
        assert!(first.outside.join("sentinel").is_file());
    }

    #[test]
    fn project_names_come_from_the_list_the_host_and_coined_ones() {
        let names: Vec<String> = (0..90u64)
            .map(|n| {
                with_case(n, "names", || {
                    let world = World::for_effect(Shape::Inside).expect("world");
                    world
                        .dir
                        .file_name()
                        .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
                })
            })
            .collect();
        let listed = |n: &String| PROJECTS.iter().any(|p| n.starts_with(p));
        let hosts = |n: &String| places().names.iter().any(|h| n.starts_with(h.as_str()));
        let from_list = names.iter().filter(|n| listed(n)).count();
        assert!((10..80).contains(&from_list), "{from_list}: {names:?}");
        if !places().names.is_empty() {
            assert!(names.iter().any(hosts), "{names:?}");
        }
        assert!(
            names.iter().any(|n| !listed(n) && !hosts(n)),
            "no coined name: {names:?}"
        );
        // Only coined names go without a suffix: one of millions, they do not collide.
        assert!(
            names.iter().all(|n| !PROJECTS.contains(&n.as_str())),
            "a listed name without a suffix: {names:?}"
        );
        let unsuffixed =
            |n: &&String| !n.contains(['(', '_']) && !n.contains(|c: char| c.is_ascii_digit());
        assert!(
            names
                .iter()
                .any(|n| !listed(n) && !hosts(n) && unsuffixed(&n)),
            "{names:?}"
        );
    }

    #[test]
    fn worlds_carry_no_marker_and_leave_nothing_behind() {
        let world = World::new().expect("world");
        // Only what the harness names is checked: the base is the host's (a CI user's home may
        // well be `/home/sandbox-ci`).
        let drawn = [
            (&world.dir, world.base.as_path()),
            (&world.ws, world.base.as_path()),
            (&world.tmp, Path::new("/tmp")),
            (&world.shm, Path::new("/dev/shm")),
            (&world.tmpdir, Path::new("/var/tmp")),
        ];
        for (p, base) in drawn {
            let named = p
                .strip_prefix(base)
                .unwrap_or_else(|_| panic!("{p:?} in {base:?}"));
            let shown = named.display().to_string().to_lowercase();
            assert!(!shown.is_empty(), "{p:?}");
            assert!(
                !shown.contains("conformance") && !shown.contains("sandbox"),
                "{shown}"
            );
        }
        let roots: Vec<PathBuf> = world.roots().iter().map(|r| r.to_path_buf()).collect();
        let parent = world.dir.parent().map(Path::to_path_buf);
        let parent_existed = parent.as_ref().is_some_and(|p| p.is_dir());
        drop(world);
        for root in roots {
            assert!(!root.exists(), "{root:?}");
        }
        // Nothing made on the way: the world's parent is a folder that was there before.
        assert!(parent_existed);
    }

    #[test]
    fn a_quoted_name_that_is_not_utf8_reaches_bash_byte_for_byte() {
        let name = OsStr::from_bytes(b"caf\xc3\xa9 it's \\ new\xff");
        let quoted = shell_quote(name);
        assert!(quoted.is_ascii() || std::str::from_utf8(quoted.as_bytes()).is_ok());
        let out = std::process::Command::new("bash")
            .args(["-c", &format!("printf '%s' {quoted}")])
            .output()
            .expect("bash");
        assert_eq!(out.stdout, name.as_bytes(), "{quoted}");
    }

    #[test]
    fn a_placeholder_expands_once_and_its_shell_form_reaches_bash_byte_for_byte() {
        let values = vec![
            (
                "WS".to_owned(),
                "/v/it's 50% [draft] \"q\" \\ {a,b};!&".to_owned(),
            ),
            ("TMP".to_owned(), "/t/%WS%".to_owned()),
        ];
        // A value is never expanded again, and a `%` that starts no placeholder stays.
        assert_eq!(
            expand_placeholders("%TMP%|%WS%|%s %X%", &values),
            format!("/t/%WS%|{}|%s %X%", values[0].1)
        );
        let command = expand_placeholders("printf '%s' %sh(%WS%/f) %sh(%TMP%)", &values);
        let out = std::process::Command::new("bash")
            .args(["-c", &command])
            .output()
            .expect("bash");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}/f/t/%WS%", values[0].1),
            "{command}"
        );
        assert_eq!(
            raw_placeholders("cat %sh(%WS%/a) '%TMP%/b' %WSDIR%"),
            ["%WSDIR%", "%TMP%"]
        );
        assert!(raw_placeholders("printf '%s' %sh(%OUTSIDE%)").is_empty());
    }

    #[test]
    fn a_fixed_share_of_cases_draws_odd_names_the_same_in_every_world_of_the_case() {
        let odd_chars = [
            '[', ']', '(', ')', '*', '?', '&', '%', ',', ';', '!', '{', '}', '\'', '"', '\\', '-',
            ' ',
        ];
        let mut odd = 0;
        let mut seen: std::collections::BTreeSet<char> = Default::default();
        // Which cases draw odd names, and how, comes first from the case's generator: the same
        // on every host (only the plain names come from the host).
        for n in 0..120u64 {
            with_case(n, "odd::names", || {
                let world = World::for_effect(Shape::Inside).expect("world");
                let twin = World::twin_of(&world).expect("twin");
                let names = with_file_names(|| file_name("existing"));
                let parts = [
                    &world.dir,
                    &world.ws,
                    &world.outside,
                    &world.alias,
                    &world.extra,
                ];
                let text: String = parts
                    .iter()
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .chain([names])
                    .collect::<Vec<_>>()
                    .join("/");
                if !odd_names() {
                    assert!(world.decoy.is_none() && twin.decoy.is_none());
                    return;
                }
                odd += 1;
                seen.extend(text.chars().filter(|c| odd_chars.contains(c)));
                // The same glob characters in the twin's workspace, decoy and all (the plain
                // names differ, and hold spaces and parentheses of their own).
                let shape = |p: &Path| {
                    p.file_name().map(|n| {
                        n.to_string_lossy()
                            .chars()
                            .filter(|c| "[]*?".contains(*c))
                            .count()
                    })
                };
                assert_eq!(
                    shape(&world.ws),
                    shape(&twin.ws),
                    "{:?} {:?}",
                    world.ws,
                    twin.ws
                );
                let decoy = world
                    .decoy
                    .clone()
                    .expect("an odd workspace is a glob with a decoy");
                assert!(decoy.is_dir() && twin.decoy.as_ref().is_some_and(|d| d.is_dir()));
                // The decoy is what a glob of the workspace's path finds first.
                let out = std::process::Command::new("python3")
                    .args([
                        "-c",
                        "import glob,sys; print(sorted(glob.glob(sys.argv[1]))[0], end='')",
                    ])
                    .arg(&world.ws)
                    .output()
                    .expect("python3");
                assert_eq!(
                    std::ffi::OsStr::from_bytes(&out.stdout),
                    decoy.as_os_str(),
                    "{:?}: {}",
                    world.ws,
                    String::from_utf8_lossy(&out.stderr)
                );
                let note = noted("failed".into());
                assert!(
                    note.contains(&format!("--seed {n}")) && note.contains(&shown(&decoy)),
                    "{note}"
                );
            });
        }
        assert!((12..50).contains(&odd), "{odd} of 120 cases drew odd names");
        assert!(seen.len() >= odd_chars.len() - 2, "only {seen:?} drawn");
        // Outside an odd case, a failure is left as it is.
        assert_eq!(noted("failed".into()), "failed");
    }

    #[test]
    fn a_twin_renames_a_path_spelled_in_single_quotes_too() {
        let found = (0..400u64).find_map(|n| {
            with_case(n, "quotes", || {
                let world = World::for_effect(Shape::Inside).expect("world");
                let twin = World::twin_of(&world).expect("twin");
                world.outside.to_string_lossy().contains('\'').then(|| {
                    (
                        world.renaming(&twin),
                        world.outside.clone(),
                        twin.outside.clone(),
                    )
                })
            })
        });
        let (pairs, outside, twin_outside) = found.expect("a world with a quote in 400 cases");
        let quoted = shell_quote(outside.join("f").as_os_str());
        assert_eq!(
            rename_for_test(&quoted, &pairs),
            shell_quote(twin_outside.join("f").as_os_str())
        );
    }

    /// The one-pass renaming the twin applies (longest first).
    pub(crate) fn rename_for_test(text: &str, pairs: &[(PathBuf, PathBuf)]) -> String {
        let mut pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.display().to_string(), b.display().to_string()))
            .collect();
        pairs.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
        let mut out = String::new();
        let mut i = 0;
        'scan: while i < text.len() {
            for (a, b) in &pairs {
                if text[i..].starts_with(a.as_str()) {
                    out.push_str(b);
                    i += a.len();
                    continue 'scan;
                }
            }
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
        out
    }

    #[test]
    fn a_mode_change_is_a_change() {
        let world = World::new().expect("world");
        let before = world.snapshot();
        let f = world.outside.join("existing");
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
#[cfg(test)]
mod mirror_tests {
    use super::*;

    #[test]
    fn a_twin_gets_what_a_request_names() {
        let world = World::new().expect("world");
        let twin = World::twin_of(&world).expect("twin");
        let pairs = world.renaming(&twin);
        let roots = world.root_pairs(&twin);
        let rename = |t: &OsStr| {
            let mut s = t.as_bytes().to_vec();
            for (a, b) in &pairs {
                let a = a.as_os_str().as_bytes();
                if s.starts_with(a) {
                    let mut n = b.as_os_str().as_bytes().to_vec();
                    n.extend_from_slice(&s[a.len()..]);
                    s = n;
                    break;
                }
            }
            OsString::from_vec(s)
        };
        mirror(&roots, &world.alias, &rename).expect("mirror");
        assert!(twin.ws.is_dir(), "{:?} {:?}", twin.ws, roots);
        assert!(twin.alias.is_symlink());
        assert!(!twin.outside.exists());
    }
}
