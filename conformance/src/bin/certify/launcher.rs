//! The programs `certify` also is (`landlock-run`, `sandboxctl`, `sandbox-agent`), provided under
//! their names when they cannot be found.

use conformance::suite;

use crate::cli::CliError;
use crate::{AGENT, LAUNCHER, SANDBOXCTL};

/// Makes `landlock-run`, `sandboxctl` and `sandbox-agent` findable when they are not (an
/// installed or copied `certify` alone): this binary, hard-linked (or copied) under each missing
/// name into one private directory (see [`suite::private_dir`]: outside every temp root a
/// confined call may write), is what the lookups then find; the programs found elsewhere are
/// symlinked there beside them, so a provided program finds its own siblings. A link keeps the
/// name, which the launcher's path needs (it is canonicalised and bound into bwrap). Failing that, it says why; the backends that need the
/// launcher are then unusable (a skip with the reason, or a failure when required).
pub(crate) fn provide_launcher() -> Option<tempfile::TempDir> {
    let mut missing: Vec<&str> = Vec::new();
    let mut found: Vec<(&str, std::path::PathBuf)> = Vec::new();
    let programs = [
        (LAUNCHER, "landlock-run"),
        (SANDBOXCTL, "sandbox-cli"),
        (AGENT, "sandbox-agent"),
    ];
    for (program, package) in programs {
        match sandbox_local::probe::locate_sibling(program, package) {
            Ok(path) => found.push((program, path)),
            Err(_) => missing.push(program),
        }
    }
    if missing.is_empty() {
        return None;
    }
    let link = || -> Result<tempfile::TempDir, CliError> {
        let exe = std::env::current_exe()
            .map_err(|e| CliError::Launcher(format!("cannot locate certify: {e}")))?;
        let dir = suite::private_dir("bin").map_err(|e| CliError::Launcher(e.to_string()))?;
        for program in &missing {
            link_as(&exe, &dir.path().join(program))?;
        }
        // The programs found elsewhere are named here too: a provided `sandbox-agent` or
        // `sandboxctl` looks for `landlock-run` next to itself, in this directory, and found
        // nothing when only the missing ones were here (every agent call was
        // SANDBOX_UNAVAILABLE and the agent's hardening cases hung to their timeout).
        for (program, path) in &found {
            std::os::unix::fs::symlink(path, dir.path().join(program)).map_err(|e| {
                CliError::Launcher(format!(
                    "cannot name {} in {}: {e}",
                    path.display(),
                    dir.path().display()
                ))
            })?;
        }
        Ok(dir)
    };
    match link() {
        Ok(dir) => {
            sandbox_local::probe::set_sibling_dir(dir.path().to_path_buf());
            Some(dir)
        }
        Err(e) => {
            eprintln!(
                "certify: no {} next to certify or on PATH, and cannot provide one: {e}",
                missing.join(", ")
            );
            None
        }
    }
}

/// This binary under another name at `target`: a hard link, or a copy made executable.
fn link_as(exe: &std::path::Path, target: &std::path::Path) -> Result<(), CliError> {
    if std::fs::hard_link(exe, target).is_ok() {
        return Ok(());
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::copy(exe, target)
        .and_then(|_| std::fs::set_permissions(target, std::fs::Permissions::from_mode(0o755)))
        .map_err(|e| {
            CliError::Launcher(format!(
                "cannot copy {} to {}: {e}",
                exe.display(),
                target.display()
            ))
        })
}
