//! The host a run measures: its scratch places, where the project's binaries are (and whether
//! they are statically linked), and the facts printed above the table.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::runner::PAYLOAD;

/// The scratch places of one run.
pub(crate) struct Scratch {
    _root: tempfile::TempDir,
    pub(crate) base: PathBuf,
    pub(crate) ws: PathBuf,
}

/// Makes the run's scratch tree (a workspace `ws` inside it), under `/var/tmp`.
pub(crate) fn scratch() -> Result<Scratch, String> {
    // Outside /tmp: workspace-write then has two distinct roots, as a real project has.
    let root = tempfile::Builder::new()
        .prefix("sandbox-bench-")
        .tempdir_in("/var/tmp")
        .map_err(|e| format!("cannot create a scratch directory under /var/tmp: {e}"))?;
    let base = root
        .path()
        .canonicalize()
        .map_err(|e| format!("cannot canonicalize the scratch directory: {e}"))?;
    let ws = base.join("ws");
    std::fs::create_dir(&ws).map_err(|e| format!("cannot create the workspace: {e}"))?;
    Ok(Scratch {
        _root: root,
        base,
        ws,
    })
}

/// A project binary next to this one (or on `PATH`); `package` builds it.
pub(crate) fn sibling(name: &str, package: &str) -> Result<PathBuf, String> {
    sandbox_local::probe::locate_sibling(name, package)
}

/// Whether the ELF file at `path` asks for a dynamic loader (has a `PT_INTERP` header).
pub(crate) fn is_dynamic(path: &Path) -> Option<bool> {
    let bytes = std::fs::read(path).ok()?;
    let u16_at = |o: usize| Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?));
    if bytes.get(..5)? != b"\x7fELF\x02" {
        return None;
    }
    let (phoff, size, count) = (
        usize::try_from(u64_at(0x20)?).ok()?,
        usize::from(u16_at(0x36)?),
        usize::from(u16_at(0x38)?),
    );
    Some((0..count).any(|i| {
        let at = phoff + i * size;
        bytes.get(at..at + 4) == Some(&3u32.to_le_bytes()[..])
    }))
}

/// The 1-minute load average: how much else wanted the CPUs while this ran.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// Prints the host's facts and the notes on the binaries measured.
pub(crate) fn host_facts(notes: &[String]) {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let bwrap = Command::new("bwrap")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "absent".into());
    let uid = std::fs::metadata("/proc/self")
        .map_or(u32::MAX, |m| std::os::unix::fs::MetadataExt::uid(&m));
    println!(
        "host: kernel {}, {cores} cores, {bwrap}, uid {uid}, load average {}; payload `{}`, mode workspace-write",
        kernel.trim(),
        load_average(),
        PAYLOAD.join(" ")
    );
    for note in notes {
        println!("{note}");
    }
}
