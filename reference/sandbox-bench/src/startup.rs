//! What one process start costs this host, in CPU: a static C no-op with the C library's
//! start-up and one without any (`start_libc.c`, `start_bare.c`), built with the system C
//! compiler for this run. Every process a certification starts pays the first; on a virtual
//! machine most of the difference is glibc probing the CPU's caches with `cpuid`, which traps to
//! the hypervisor (docs/speed.md), so a host's figure here explains much of its certify row.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::runner::cpu_seconds;
use crate::trampoline::build_c;

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
    let static_or_not = [
        (&["-O2", "-static"][..], "static"),
        (&["-O2"][..], "dynamic"),
    ];
    let (libc, _) = build_c(dir, "start_libc", START_LIBC_C, &static_or_not)?;
    let bare_flags = [(&["-O2", "-static", "-nostdlib"][..], "bare")];
    let (bare, _) = build_c(dir, "start_bare", START_BARE_C, &bare_flags)?;
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
