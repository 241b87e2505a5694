//! The `writable` step: the writable set is checked from the outside in. One confined payload
//! tries to create a file and a directory in every system and home directory this host has
//! (`/usr/local/bin`, `/opt`, `/var/lib`, `~`, `~/.local/bin`, `~/.ssh`, ...) and to open every
//! dotfile of the home directory for appending; then the host is checked. The containment cases
//! prove the workspace's edges; this proves that nothing else was left writable (a backend that
//! binds `/usr` or `~/.bashrc` writable passes every case about the workspace).
//!
//! Nothing of the host is changed by a backend that keeps its promise: the files are new names
//! drawn per case, and a dotfile is only opened, never written. What a broken backend lets
//! through is removed again and named.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::{ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
use crate::scenario::WritableStep;
use crate::steps::StepError;
use crate::world::{World, draw_hex, draw_one, shell_quote};

/// System directories an agent's command never writes, wherever it runs.
const SYSTEM: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/etc",
    "/home",
    "/lib",
    "/media",
    "/mnt",
    "/opt",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/lib",
    "/usr/local/sbin",
    "/usr/share",
    "/var",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/mail",
    "/var/spool",
    "/var/tmp",
];

/// Directories in the home directory that run code, hold credentials or configure tools.
const HOME: &[&str] = &[
    "",
    "bin",
    ".bashrc.d",
    ".cache",
    ".cargo",
    ".cargo/bin",
    ".config",
    ".config/autostart",
    ".config/git",
    ".config/systemd/user",
    ".docker",
    ".gnupg",
    ".kube",
    ".local",
    ".local/bin",
    ".local/share",
    ".npm",
    ".pyenv",
    ".rustup",
    ".ssh",
    ".vscode",
];

/// The most dotfiles of the home directory a payload opens.
const DOTFILES: usize = 60;

/// A directory or dotfile the payload tries, and how.
struct Probe {
    path: PathBuf,
    dotfile: bool,
}

/// Everything to try: each existing directory of [`SYSTEM`] and [`HOME`] (symlinks resolved,
/// each once) and the home directory's dotfiles, leaving out what the policy or the backend's
/// declarations make writable.
fn probes(home: Option<&Path>, writable: &[PathBuf]) -> Vec<Probe> {
    let inside_writable = |p: &Path| writable.iter().any(|w| p.starts_with(w));
    let mut dirs: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    if let Some(home) = home {
        dirs.extend(HOME.iter().map(|rel| home.join(rel)));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out: Vec<Probe> = dirs
        .into_iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .filter(|d| d.is_dir() && !inside_writable(d) && seen.insert(d.clone()))
        .map(|path| Probe {
            path,
            dotfile: false,
        })
        .collect();
    if let Some(home) = home {
        let mut dotfiles: Vec<PathBuf> = std::fs::read_dir(home)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"."))
                    // Regular files only (opening a FIFO for appending would wait for a reader).
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                    .map(|e| e.path())
                    .filter(|p| !inside_writable(p))
                    .collect()
            })
            .unwrap_or_default();
        dotfiles.sort();
        dotfiles.truncate(DOTFILES);
        out.extend(dotfiles.into_iter().map(|path| Probe {
            path,
            dotfile: true,
        }));
    }
    out
}

/// The payload: for each probe, one attempt per line, each allowed to fail; what succeeded is
/// printed (`WROTE`, `MADE`, `OPENED`) for the report, and the disk is checked regardless.
fn payload(probes: &[Probe], name: &str, mark: &str) -> String {
    let mut script = String::new();
    let q = |p: &Path| shell_quote(p.as_os_str());
    for probe in probes {
        let p = q(&probe.path);
        if probe.dotfile {
            script.push_str(&format!(
                "{{ : >> {p}; }} 2>/dev/null && echo \"OPENED {}\"\n",
                probe.path.display()
            ));
        } else {
            let file = q(&probe.path.join(name));
            let dir = q(&probe.path.join(format!("{name}.d")));
            script.push_str(&format!(
                "{{ : > {file}; }} 2>/dev/null && echo \"WROTE {}\"\n\
                 mkdir {dir} 2>/dev/null && echo \"MADE {}\"\n",
                probe.path.display(),
                probe.path.display()
            ));
        }
    }
    // The mark proves the payload ran to its end: the attempts above really happened.
    script.push_str(&format!("echo {mark}\n"));
    script
}

pub(super) fn run(backend: &Backend, step: &WritableStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let world = World::for_effect(crate::scenario::Shape::Inside).map_err(super::world_error)?;
    let ws = world.ws.clone();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    // What this call may write: the workspace and /tmp under workspace-write (no $TMPDIR is
    // given), nothing under read-only; and whatever the backend declared as a widening for
    // this mode (listed in the report as such).
    let mut writable: Vec<PathBuf> = Vec::new();
    if step.mode == sandbox::ConfinedMode::WorkspaceWrite {
        writable.push(ws.clone());
        writable.extend(std::fs::canonicalize("/tmp").ok());
        writable.extend(std::fs::canonicalize("/dev/shm").ok());
    }
    writable.extend(backend.declared_writable(step.mode));
    let probes = probes(home.as_deref(), &writable);
    let name = format!(
        "{}-{}",
        draw_one(&["notes", "build", "output", "index", "cache", "report"]),
        draw_hex(8)
    );
    let mark = format!("{}-{}", draw_one(&["done", "ok", "finished"]), draw_hex(6));
    let argv = crate::request::dress(&payload(&probes, &name, &mark), Vec::new()).argv;
    let done = super::writable::run_in_world(provider, &world, step.mode, &argv)?;
    // A write under read-only is its own failure: the mark then lands too, so look first.
    let mut wrong: Vec<String> = Vec::new();
    for probe in probes.iter().filter(|p| !p.dotfile) {
        let file = probe.path.join(&name);
        if std::fs::symlink_metadata(&file).is_ok() {
            wrong.push(format!("created {}", file.display()));
            let _ = std::fs::remove_file(&file);
        } else {
            crate::late::found_absent(&file);
        }
        let dir = probe.path.join(format!("{name}.d"));
        if std::fs::symlink_metadata(&dir).is_ok() {
            wrong.push(format!("created {}", dir.display()));
            let _ = std::fs::remove_dir(&dir);
        } else {
            crate::late::found_absent(&dir);
        }
    }
    let stdout = String::from_utf8_lossy(&done.stdout);
    // An open in a place the backend declared private reaches its own copy, not the host's
    // (DCL-002 verifies the declaration): judged by what the host shows above, not by the open.
    wrong.extend(
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix("OPENED "))
            .filter(|p| !backend.in_private_place(step.mode, Path::new(p)))
            .map(|p| format!("opened {p} for writing")),
    );
    super::ran_to_mark(&done, &stdout, &mark)?;
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(StepError::Unmet(format!(
            "writable under {} beyond the writable set ({} places tried): {}",
            step.mode,
            probes.len(),
            wrong.join("; ")
        )))
    }
}

/// Runs `argv` confined under `mode` in `world`'s workspace (no `$TMPDIR`), asked about the
/// world and its twin alike: the one way the outside-in and the inside-out checks launch.
pub(super) fn run_in_world(
    provider: &std::sync::Arc<dyn SandboxProvider>,
    world: &World,
    mode: sandbox::ConfinedMode,
    argv: &[std::ffi::OsString],
) -> Result<launch::Finished, StepError> {
    let ws = world.ws.clone();
    let policy = ProviderPolicy::new(mode, ws.clone())
        .with_roots(|r| r.with_temp_dir(None))
        .with_cwd(&ws);
    let twin = crate::metamorphic::Twin::new(provider.clone(), world, true)?;
    let answer = twin.confine(argv, &policy);
    twin.verdict()?;
    let confined = answer.map_err(|e| StepError::Unmet(format!("confine refused: {e}")))?;
    let mut options = LaunchOptions::in_dir(&ws);
    options.env_remove.push("TMPDIR".into());
    options.timeout = Some(Duration::from_secs(30));
    crate::survivors::tag_launch(&mut options);
    Ok(launch::run(&confined, &options))
}
