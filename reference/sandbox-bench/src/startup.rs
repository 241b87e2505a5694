//! What one process start costs this host, in CPU: a static C no-op with the C library's
//! start-up and one without any (`start_libc.c`, `start_bare.c`), built with the system C
//! compiler for this run. Every process a certification starts pays the first; on a virtual
//! machine most of the difference is glibc probing the CPU's caches with `cpuid`, which traps to
//! the hypervisor (docs/speed.md), so a host's figure here explains much of its certify row.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::runner::{cpu_seconds, tail};

/// The C sources of the two no-ops.
const START_LIBC_C: &str = include_str!("start_libc.c");
const START_BARE_C: &str = include_str!("start_bare.c");

/// How many starts of each are timed.
const STARTS: usize = 300;

/// What a process start costs, in milliseconds of CPU.
pub(crate) struct StartCost {
    /// A static no-op with the C library's start-up.
    pub(crate) libc: f64,
    /// One without any C library (the kernel's part alone).
    pub(crate) bare: f64,
}

/// Builds both no-ops in `dir` and times [`STARTS`] starts of each, interleaved.
pub(crate) fn start_cost(dir: &Path) -> Result<StartCost, String> {
    // Static as the launcher is; dynamic (the loader's work counted too) where the host has no
    // static C library.
    let libc = build(dir, "start_libc", START_LIBC_C, &["-O2", "-static"])
        .or_else(|_| build(dir, "start_libc", START_LIBC_C, &["-O2"]))?;
    let bare = build(
        dir,
        "start_bare",
        START_BARE_C,
        &["-O2", "-static", "-nostdlib"],
    )?;
    let (mut libc_cpu, mut bare_cpu) = (0.0, 0.0);
    for _ in 0..STARTS {
        libc_cpu += one(&libc)?;
        bare_cpu += one(&bare)?;
    }
    let ms = |cpu: f64| cpu * 1e3 / STARTS as f64;
    Ok(StartCost {
        libc: ms(libc_cpu),
        bare: ms(bare_cpu),
    })
}

/// Compiles `source` as `name` in `dir` with the system C compiler and `flags`.
fn build(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Result<PathBuf, String> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).map_err(|e| format!("cannot write {name}.c: {e}"))?;
    let exe = dir.join(name);
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = Command::new(&cc)
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cc.to_string_lossy()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot build {name}: {}",
            cc.to_string_lossy(),
            tail(&String::from_utf8_lossy(&out.stderr))
        ));
    }
    Ok(exe)
}

/// One start of `exe`, waited for: the CPU it cost (its own and the spawn's).
fn one(exe: &Path) -> Result<f64, String> {
    let before = cpu_seconds();
    let status = Command::new(exe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    if !status.success() {
        return Err(format!("{} ended with {status}", exe.display()));
    }
    Ok(cpu_seconds() - before)
}
