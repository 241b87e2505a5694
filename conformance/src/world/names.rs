//! The names a world's parts and an effect's files are given: drawn from word lists, from this
//! host's own names, or coined, so no request carries a fixed marker a backend could key on.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use super::odd::{dress_file, odd};
use super::seed::{draw, pick};

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
pub(super) const LOGICAL_FILES: &[&str] = &[
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
pub(super) fn draw_project(rng: &mut fastrand::Rng, host: &[String]) -> (String, bool) {
    match rng.u8(..3) {
        0 if !host.is_empty() => (host[rng.usize(..host.len())].clone(), true),
        1 => (coined(rng), false),
        _ => (pick(rng, PROJECTS).to_owned(), true),
    }
}

/// A name from `list`, from this host's own names, or coined, a third each (the list's share
/// is larger on a host without names of its own).
pub(super) fn draw_name(rng: &mut fastrand::Rng, list: &[&str], host: &[String]) -> String {
    match rng.u8(..3) {
        0 if !host.is_empty() => host[rng.usize(..host.len())].clone(),
        1 => coined(rng),
        _ => pick(rng, list).to_owned(),
    }
}

/// Project names as people spell them.
pub(super) const PROJECTS: &[&str] = &[
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

/// Other things that live next to a project.
pub(super) const NEIGHBOURS: &[&str] = &[
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
pub(super) const SCRATCH: &[&str] = &[
    "tmp.",
    "npm-",
    "go-build",
    "pip-req-build-",
    "cargo-install",
    "pytest-of-",
    "vscode-",
    "sess_",
];

/// The workspace's name: the project's own name, or a conventional checkout folder.
pub(super) fn pick_ws_name(project: &str) -> String {
    draw(|rng| match rng.u8(..3) {
        0 => "repo".to_owned(),
        1 => "trunk".to_owned(),
        _ => project.to_owned(),
    })
}

/// `base` followed by `suffix`, as a file name.
pub fn name(base: &str, suffix: &OsStr) -> OsString {
    let mut n = OsString::from(file_name(base));
    n.push(suffix);
    n
}
