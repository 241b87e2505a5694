//! Compiles the suite into the crate (see `src/suite.rs`): every file under the workspace's
//! `scenarios/` and `fixtures/expectations/`, listed in `$OUT_DIR/suite_files.rs` as
//! `include_bytes!` of its absolute path. A build script rather than a crate (`include_dir`):
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

fn table(name: &str, root: &Path, code: &mut String) {
    println!("cargo:rerun-if-changed={}", root.display());
    let mut found = Vec::new();
    files(root, &mut found);
    found.sort();
    let _ = writeln!(
        code,
        "/// Every file of `{}`, by path relative to it.",
        root.display()
    );
    let _ = writeln!(code, "pub static {name}: &[(&str, &[u8])] = &[");
    for path in &found {
        let rel = path.strip_prefix(root).unwrap_or(path);
        let _ = writeln!(
            code,
            "    ({:?}, include_bytes!({:?})),",
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
    table("SCENARIOS", &workspace.join("scenarios"), &mut code);
    table(
        "EXPECTATIONS",
        &workspace.join("fixtures").join("expectations"),
        &mut code,
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out.join("suite_files.rs"), code) {
        panic!("cannot write the suite's file list: {e}");
    }
}
