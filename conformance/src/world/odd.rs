//! Odd names: in a fixed share of cases, every name of the case's worlds is dressed with the
//! characters real folder and file names have (shell and glob characters, quotes, spaces at the
//! ends), the same way in every world of the case.

use std::cell::RefCell;
use std::path::PathBuf;

use super::names::LOGICAL_FILES;
use super::seed::SEED_VAR;
use super::snapshot::shown;

/// How a failure names a world's decoy: what a glob of the workspace's name matches, or what an
/// expansion or a split of it gives.
pub const DECOY_LINE: &str =
    "decoy (what a glob, an expansion or a split of the workspace's name gives): ";

/// Puts `odd` in place for the case running on this thread until the guard drops.
pub(super) fn enter(odd: Option<Odd>) -> impl Drop {
    RestoreOdd(ODD.replace(odd))
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

/// The environment variable that draws odd names in every case instead of one in
/// [`ODD_SHARE`]: `every` (a backend author chasing a name its runner mangles; the suite's own
/// tests of the fixtures that mangle names, which must see such a name in every run). Any other
/// value keeps the share.
pub const ODD_NAMES_VAR: &str = "CONFORMANCE_ODD_NAMES";

/// True when [`ODD_NAMES_VAR`] asks for odd names in every case.
fn every_case() -> bool {
    static EVERY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| std::env::var(ODD_NAMES_VAR).is_ok_and(|v| v.trim() == "every"))
}

thread_local! {
    /// The odd names of the case running on this thread (`None`: ordinary names).
    static ODD: RefCell<Option<Odd>> = const { RefCell::new(None) };
}

/// How one name is dressed: text before and after it, and for a glob pattern the decoy's
/// (what the pattern matches instead of the name: `[draft]` matches `d`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Dress {
    before: &'static str,
    after: &'static str,
    /// The decoy's `before` and `after`, for a dress holding a glob pattern.
    decoy: Option<(&'static str, &'static str)>,
}

/// A plain dress's text before and after the name (a pool of them is a table of these pairs).
type Plain = (&'static str, &'static str);

impl Dress {
    /// One dress drawn from `pool`: a plain pool's pair, or a glob pool's dress as it is.
    fn drawn(rng: &mut fastrand::Rng, pool: Pool) -> Dress {
        match pool {
            Pool::Plain(pairs) => {
                let (before, after) = pairs[rng.usize(..pairs.len())];
                Dress {
                    before,
                    after,
                    decoy: None,
                }
            }
            Pool::Glob(dresses) => dresses[rng.usize(..dresses.len())],
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

    pub(super) fn on(&self, name: &str) -> String {
        format!("{}{name}{}", self.before, self.after)
    }

    /// The decoy's name (`{HOME}` in a dress stands for this host's home directory: what a
    /// runner expanding `${HOME}` makes of it, a path holding `/`).
    pub(super) fn decoy_of(&self, name: &str) -> Option<String> {
        let home = std::env::var("HOME").unwrap_or_default();
        self.decoy
            .map(|(b, a)| format!("{b}{name}{a}").replace("{HOME}", &home))
    }
}

/// A pool of dresses one is drawn from.
#[derive(Clone, Copy)]
enum Pool {
    /// Text before and after the name.
    Plain(&'static [Plain]),
    /// Glob patterns, each with its decoy.
    Glob(&'static [Dress]),
}

/// Workspace names as glob patterns, each with the sibling the pattern matches instead (a
/// runner that expands its workspace option as a glob, as firejail's `--read-write` does, picks
/// the sibling): every glob sorts the decoy before the name itself. Then names a runner expands
/// or splits (`$(...)`, backticks, `${HOME}`, `:`, `=`, a newline), each with the decoy that
/// expansion or split makes of it.
const ODD_WORKSPACES: &[Dress] = &[
    Dress::glob("", " [draft]", ("", " d")),
    Dress::glob("[wip] ", "", ("w ", "")),
    Dress::glob("", " (copy)*", ("", " (copy)")),
    Dress::glob("", "?", ("", "1")),
    Dress::glob("-", " [old] ", ("-", " o ")),
    Dress::glob(" ", " v[12]", (" ", " v1")),
    // Names a runner that expands or splits its arguments changes (a bind written into a shell
    // command, `${HOME}` expanded as configs do, a list split on `:`, `=` or lines): the decoy
    // is what the expansion or the split makes of the name.
    Dress::glob("", "$(echo d)", ("", "d")),
    Dress::glob("", "`echo d`", ("", "d")),
    Dress::glob("", "${HOME}", ("", "{HOME}")),
    Dress::glob("", ":d", ("", "")),
    Dress::glob("", "=d", ("", "")),
    Dress::glob("", "\nd", ("", "")),
];

/// Project folder names as people spell them: shell characters, quotes, spaces at the ends.
const ODD_PROJECTS: &[Plain] = &[
    ("~", ""),
    ("", " $5"),
    ("", " R&D"),
    ("", " 50%"),
    ("", "'s notes"),
    ("", " \"final\""),
    ("", ", v2; old"),
    ("", "!"),
    ("", " back\\slash"),
    (" ", " "),
    ("-", " (1)"),
    ("", " {a,b}"),
];

/// Sibling names (the outside tree, the alias, the extra root).
const ODD_SIBLINGS: &[Plain] = &[
    ("", " {old,new}"),
    ("", " (1)"),
    ("", " 100%"),
    ("", " & co"),
    ("", "'s"),
    ("\"", "\""),
    ("", "\\x"),
    ("", ";!"),
    ("-", ""),
    ("", " "),
    (" ", ""),
    ("", " [x]"),
    ("", " a,b"),
];

/// File names (before the extension).
const ODD_FILES: &[Plain] = &[
    ("", " (1)"),
    ("", " [draft]"),
    ("-", ""),
    ("", " *"),
    ("", "?"),
    ("R&D ", ""),
    ("", " 50%"),
    ("", "'s"),
    ("", " \"x\""),
    ("", "\\y"),
    ("", " {1,2}"),
    ("", ",;!"),
    (" ", " "),
];

/// A case's odd names: how each of its names is dressed, drawn once per case so every world of
/// the case (and each twin) carries the same characters in the same places.
#[derive(Clone, Debug)]
pub(super) struct Odd {
    pub(super) workspace: Dress,
    pub(super) project: Dress,
    /// The outside tree, the alias, the extra root.
    pub(super) siblings: [Dress; 3],
    pub(super) files: Vec<Dress>,
    /// The run's seed, which replays them.
    seed: u64,
    /// The workspace and decoy of each world the case made (not the twins).
    worlds: Vec<(PathBuf, Option<PathBuf>)>,
}

impl Odd {
    /// `Some` in [`ODD_SHARE`]'s share of cases (in every case with [`ODD_NAMES_VAR`]).
    pub(super) fn draw(rng: &mut fastrand::Rng, seed: u64) -> Option<Odd> {
        if rng.u8(..ODD_SHARE) != 0 && !every_case() {
            return None;
        }
        let siblings = Pool::Plain(ODD_SIBLINGS);
        Some(Odd {
            workspace: Dress::drawn(rng, Pool::Glob(ODD_WORKSPACES)),
            project: Dress::drawn(rng, Pool::Plain(ODD_PROJECTS)),
            siblings: [
                Dress::drawn(rng, siblings),
                Dress::drawn(rng, siblings),
                Dress::drawn(rng, siblings),
            ],
            files: LOGICAL_FILES
                .iter()
                .map(|_| Dress::drawn(rng, Pool::Plain(ODD_FILES)))
                .collect(),
            seed,
            worlds: Vec::new(),
        })
    }
}

/// The odd names of the case running on this thread, if it has them.
pub(super) fn odd() -> Option<Odd> {
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
                    out.push_str(&format!("\n  {DECOY_LINE}{}", shown(d)));
                }
            }
            out
        }
    })
}

/// `name` (`notes.txt`) dressed before its extension (`notes (1).txt`, `-notes.txt`).
pub(super) fn dress_file(dress: &Dress, name: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{}.{ext}", dress.on(stem)),
        _ => dress.on(name),
    }
}

/// Notes a world the case made (not a twin) with its workspace and decoy, for [`noted`].
pub(super) fn record_world(ws: PathBuf, decoy: Option<PathBuf>) {
    ODD.with_borrow_mut(|odd| {
        if let Some(o) = odd {
            o.worlds.push((ws, decoy));
        }
    });
}
