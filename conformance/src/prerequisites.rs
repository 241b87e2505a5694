//! The host tools the harness itself needs to set cases up and to act as the person, checked
//! before the first case: one that is missing makes the cases that need it the harness's `ERROR`
//! (never a backend's `FAIL`), and `certify` names each before the run starts.

use std::path::PathBuf;

/// One tool of the harness's and the cases that need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prerequisite {
    /// The program, as looked up on `PATH` (or where the person's shell finds it).
    pub program: &'static str,
    /// The cases that need it, in words.
    pub needed_by: &'static str,
}

/// What the harness needs beyond the backends' own runners.
pub const PREREQUISITES: &[Prerequisite] = &[
    Prerequisite {
        program: "bash",
        needed_by: "every case that runs a payload",
    },
    Prerequisite {
        program: "git",
        needed_by: "the protected family and every case with a repository (PR-*, PR-010)",
    },
    Prerequisite {
        program: "tmux",
        needed_by: "the host-ipc tmux cases (HI-001)",
    },
    Prerequisite {
        program: "cargo",
        needed_by: "the person's cargo while the call runs (HD-030)",
    },
    Prerequisite {
        program: "pytest",
        needed_by: "the person's pytest while the call runs (HD-030)",
    },
];

/// Where the person's shell finds `program`: `cargo` is rustup's proxy in `$CARGO_HOME/bin` (or
/// `~/.cargo/bin`) when there is one, so a toolchain file is honoured; everything else is looked
/// up on `PATH`.
pub fn locate(program: &str) -> Option<PathBuf> {
    if program == "cargo" {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
        if let Some(proxy) = home.map(|h| h.join("bin/cargo")).filter(|p| p.is_file()) {
            return Some(proxy);
        }
    }
    which::which(program).ok()
}

/// The prerequisites this host lacks.
pub fn missing() -> Vec<&'static Prerequisite> {
    PREREQUISITES
        .iter()
        .filter(|p| locate(p.program).is_none())
        .collect()
}
