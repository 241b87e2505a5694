//! Compiles the suite into the crate (see `src/suite.rs`): every file under the workspace's
//! `scenarios/`, `fixtures/expectations/` and `fixtures/fake-runners/` (the last with each
//! file's mode: a fake may be deliberately not executable), listed in `$OUT_DIR/suite_files.rs`
//! as `include_bytes!` of its absolute path. A build script rather than a crate (`include_dir`):
//! twenty lines, no dependency, and cargo reruns it when either directory changes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
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

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let workspace = manifest.join("..");
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
