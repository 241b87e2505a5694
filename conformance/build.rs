//! Compiles the suite into the crate (see `src/suite.rs`): every file under the workspace's
//! `scenarios/`, `fixtures/expectations/` and `fixtures/fake-runners/` (the last with each
//! file's mode: a fake may be deliberately not executable), listed in `$OUT_DIR/suite_files.rs`
//! as `include_bytes!` of its absolute path. A build script rather than a crate (`include_dir`):
//! twenty lines, no dependency, and cargo reruns it when either directory changes.
//!
//! It also embeds the commit the build's tree is at (`CERTIFY_COMMIT`), so an installed certify
//! names the commit of the suite it carries, not that of whatever clone it later runs in; cargo
//! reruns it when HEAD moves.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        // A hidden entry is never part of the suite: an editor's swap file, or a probe a
        // certification of a leaky fixture put in every directory of the host for an instant.
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let path = entry.path();
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            files(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

/// A file's permission bits (0o644 where the build host has none).
fn mode(path: &Path) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        0o644
    }
}

/// Writes `pub static <name>` listing every file under `root`: `(relative path, bytes)`, or with
/// `modes` `(relative path, mode, bytes)`.
fn table(name: &str, root: &Path, modes: bool, code: &mut String) {
    println!("cargo:rerun-if-changed={}", root.display());
    let mut found = Vec::new();
    files(root, &mut found);
    found.sort();
    let _ = writeln!(
        code,
        "/// Every file of `{}`, by path relative to it.",
        root.display()
    );
    let shape = if modes {
        "(&str, u32, &[u8])"
    } else {
        "(&str, &[u8])"
    };
    let _ = writeln!(code, "pub static {name}: &[{shape}] = &[");
    for path in &found {
        let rel = path.strip_prefix(root).unwrap_or(path);
        let mode = if modes {
            format!("0o{:o}, ", mode(path))
        } else {
            String::new()
        };
        let _ = writeln!(
            code,
            "    ({:?}, {mode}include_bytes!({:?})),",
            rel.to_string_lossy(),
            path.to_string_lossy()
        );
    }
    code.push_str("];\n");
}

/// `git` in the workspace, its output trimmed, when it succeeds.
fn git(workspace: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(workspace)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Sets `CERTIFY_COMMIT` (empty outside a git checkout) and asks cargo to rerun this script when
/// HEAD or the branch it names moves (a file that does not exist is never named: cargo would
/// rerun the script on every build).
fn commit(workspace: &Path) {
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(workspace, &["symbolic-ref", "-q", "HEAD"]));
    for name in &watched {
        if let Some(path) = git(workspace, &["rev-parse", "--git-path", name]) {
            let path = workspace.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    let commit = git(workspace, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=CERTIFY_COMMIT={commit}");
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let workspace = manifest.join("..");
    commit(&workspace);
    let mut code = String::new();
    table("SCENARIOS", &workspace.join("scenarios"), false, &mut code);
    table(
        "EXPECTATIONS",
        &workspace.join("fixtures").join("expectations"),
        false,
        &mut code,
    );
    table(
        "FAKE_RUNNERS",
        &workspace.join("fixtures").join("fake-runners"),
        true,
        &mut code,
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out.join("suite_files.rs"), code) {
        panic!("cannot write the suite's file list: {e}");
    }
}
