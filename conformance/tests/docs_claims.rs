//! What the docs cite is checked here, so moving a file or a section fails a test instead of a
//! reader: every repository path a doc names exists, every README section a file points to is
//! there, no doc states a file's length, and the pinned versions the workflow and the set-up
//! scripts name agree.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The docs a reader follows.
fn docs() -> Vec<PathBuf> {
    let root = repo();
    let mut docs: Vec<PathBuf> = [
        "README.md",
        "ci/README.md",
        "conformance/protocol/README.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The top-level folders whose paths a doc may cite.
const TOPS: [&str; 9] = [
    "reference/",
    "conformance/",
    "ci/",
    "docs/",
    "fixtures/",
    "scenarios/",
    ".ci/",
    ".github/",
    ".cargo/",
];

/// The repository paths a text cites in backticks: a known top-level folder, no placeholder.
fn cited_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|quoted| quoted.split_whitespace().next())
        .map(|p| p.trim_end_matches([',', '.', ':', ')']))
        .filter(|p| TOPS.iter().any(|top| p.starts_with(top)))
        .filter(|p| !p.contains(['<', '*', '{', '$']) && !p.contains("..."))
        .map(|p| p.split(':').next().unwrap_or(p).to_owned())
        .collect()
}

#[test]
fn every_repository_path_a_doc_cites_exists() {
    let root = repo();
    let mut missing = Vec::new();
    for doc in docs() {
        for path in cited_paths(&read(&doc)) {
            if !root.join(&path).exists() {
                missing.push(format!("{}: {path}", doc.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited but not there:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_readme_section_a_file_points_to_is_there() {
    let root = repo();
    let headings: Vec<String> = read(&root.join("README.md"))
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::to_owned)
        .collect();
    let mut files = docs();
    files.extend(
        [
            ".cargo/config.toml",
            ".cargo/mutants.toml",
            ".ci/run",
            "ci/leg.sh",
        ]
        .iter()
        .map(|p| root.join(p)),
    );
    let mut broken = Vec::new();
    for file in files {
        let text = read(&file).replace('\n', " ");
        // `the README's "Set up" section`, `(README, "Set up": ...)`; a quotation is no pointer.
        for marker in ["README's \"", "README, \""] {
            for (at, _) in text.match_indices(marker) {
                let rest = &text[at + marker.len()..];
                let name = rest.split('"').next().unwrap_or("");
                let after = rest[name.len()..].trim_start_matches('"').trim_start();
                let points = marker.starts_with("README,") || after.starts_with("section");
                if points && !headings.iter().any(|h| h == name) {
                    broken.push(format!("{}: README section {name:?}", file.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "no such README section (its sections: {headings:?}):\n{}",
        broken.join("\n")
    );
}

#[test]
fn no_doc_states_a_files_length() {
    let mut claims = Vec::new();
    for doc in docs() {
        let text = read(&doc).replace('\n', " ");
        let words: Vec<&str> = text.split_whitespace().collect();
        for w in words.windows(3) {
            if (w[0] == "about" || w[0] == "(about")
                && w[1].chars().all(|c| c.is_ascii_digit() || c == ',')
                && w[2].trim_end_matches([',', ')', '.']) == "lines"
            {
                claims.push(format!("{}: {}", doc.display(), w.join(" ")));
            }
        }
    }
    assert!(
        claims.is_empty(),
        "a file's length goes stale the day it changes; say what it does instead:\n{}",
        claims.join("\n")
    );
}

/// The value of `NAME=VALUE` or `NAME: "VALUE"` in `text`.
fn pinned<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix(&format!("{name}="))
            .or_else(|| l.strip_prefix(&format!("{name}: ")))
            .map(|v| v.trim_matches('"'))
    })
}

#[test]
fn the_workflow_pins_what_the_set_up_scripts_install() {
    let root = repo();
    let workflow = read(&root.join(".github/workflows/conformance.yml"));
    let host = read(&root.join("ci/install-host.sh"));
    let tests = read(&root.join("ci/install-tests.sh"));
    let toolchain = pinned(&workflow, "RUST_TOOLCHAIN").expect("the workflow pins RUST_TOOLCHAIN");
    assert_eq!(Some(toolchain), pinned(&host, "rust_toolchain"));
    let nextest = pinned(&workflow, "NEXTEST_VERSION").expect("the workflow pins NEXTEST_VERSION");
    assert_eq!(Some(nextest), pinned(&tests, "nextest_version"));
    assert!(
        !workflow.contains("rust-toolchain@stable"),
        "an unpinned toolchain"
    );
    // The merge job expects every leg the matrix runs (and macOS), by name.
    assert!(workflow.contains("leg: [root, user, landlock-fallback]"));
    assert!(
        workflow.contains("legs=(root user landlock-fallback macos)")
            && workflow.contains("--expect"),
        "the merge job names every leg"
    );
}

#[test]
fn every_install_command_is_locked() {
    let mut unlocked = Vec::new();
    let root = repo();
    let mut files = docs();
    files.extend(
        [
            "action.yml",
            ".ci/run",
            ".github/workflows/conformance.yml",
            "ci/install-tests.sh",
        ]
        .iter()
        .map(|p| root.join(p)),
    );
    for file in files {
        let text = read(&file).replace("\\\n", " ");
        for line in text.lines().filter(|l| l.contains("cargo install ")) {
            if !line.contains("--locked") {
                unlocked.push(format!("{}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(
        unlocked.is_empty(),
        "cargo install without --locked re-resolves away from the tested lock file:\n{}",
        unlocked.join("\n")
    );
}
