//! The floor of the Landlock rows: a minimal C Landlock trampoline (`trampoline.c`), built
//! with the system C compiler for this run; [`build_c`] builds the bench's other C programs too.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::runner::tail;

/// The C source of the floor trampoline.
const TRAMPOLINE_C: &str = include_str!("trampoline.c");

/// Builds the floor trampoline in `dir` with the system C compiler: static when the host has a
/// static libc, else dynamic (said in the row's note).
pub(crate) fn build_trampoline(dir: &Path) -> Result<(PathBuf, &'static str), String> {
    build_c(
        dir,
        "trampoline",
        TRAMPOLINE_C,
        &[(&["-O2", "-static"], "static"), (&["-O2"], "dynamic")],
    )
}

/// Compiles `source` as `name` in `dir` with the system C compiler (`$CC`, else `cc`), trying
/// each set of flags in turn; the executable and the label of the flags that built it.
pub(crate) fn build_c(
    dir: &Path,
    name: &str,
    source: &str,
    attempts: &[(&[&str], &'static str)],
) -> Result<(PathBuf, &'static str), String> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).map_err(|e| format!("cannot write {name}.c: {e}"))?;
    let exe = dir.join(name);
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut last = String::new();
    for (flags, kind) in attempts {
        let out = Command::new(&cc)
            .args(*flags)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", cc.to_string_lossy()))?;
        if out.status.success() {
            return Ok((exe, kind));
        }
        last = tail(&String::from_utf8_lossy(&out.stderr));
    }
    Err(format!(
        "{} cannot build {name}: {last}",
        cc.to_string_lossy()
    ))
}
