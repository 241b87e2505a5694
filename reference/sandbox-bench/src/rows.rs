//! Every row of the table and what it runs: the floors (unconfined, the trampoline, bare bwrap),
//! the launcher with and without its guard, the library, `sandboxctl` cold and warm, the peers.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use landlock_run::cli::{Invocation, LaunchArgs, WritableRoot};

use sandbox::{ConfinedMode, ProviderPolicy};
use sandbox_local::launch::LaunchOptions;
use sandbox_local::profile::{self, WritableSet};
use sandbox_local::{Backend, LocalConfig, LocalProvider};

use crate::Args;
use crate::host::{Scratch, is_dynamic, sibling};
use crate::runner::{Runner, Spawn, os, payload};
use crate::table::Row;
use crate::trampoline::build_trampoline;

/// Targets: the library path within this factor of its floor.
const LIBRARY_TARGET: f64 = 1.15;
/// Targets: `sandboxctl run` with a warm cache within this factor of the same floor.
const CLI_TARGET: f64 = 1.25;

/// Our hardened bwrap argv without its isolation flags.
fn plain_bwrap(hardened: &[OsString]) -> Vec<OsString> {
    let mut plain = Vec::with_capacity(hardened.len());
    let mut it = hardened.iter();
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some(
                "--unshare-user" | "--disable-userns" | "--unshare-pid" | "--new-session"
                | "--die-with-parent",
            ) => {}
            Some("--cap-drop") => {
                it.next();
            }
            _ => plain.push(arg.clone()),
        }
    }
    plain
}

/// The binds the bare bwrap rows pass, each an open descriptor left inheritable under its own
/// number and kept open until the process exits (the rows outlive the table's construction).
fn bare_binds(set: &WritableSet, ws: &Path) -> Result<Vec<profile::FdBind>, String> {
    use std::os::fd::AsRawFd;
    let policy = ProviderPolicy::new(sandbox::ConfinedMode::WorkspaceWrite, ws);
    let mut fds = sandbox::LaunchFds::default();
    let mut binds = sandbox_local::bind::open_binds(&profile::bwrap_binds(set), &policy, &mut fds)
        .map_err(|e| e.to_string())?;
    let raw: Vec<(i32, i32)> = fds.iter().map(|(n, fd)| (n, fd.as_raw_fd())).collect();
    for (number, fd) in fds.iter() {
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .map_err(|e| format!("descriptor {number}: {e}"))?;
    }
    for bind in &mut binds {
        if let Some((_, fd)) = raw.iter().find(|(n, _)| *n == bind.fd) {
            bind.fd = *fd;
        }
    }
    // Held for the whole run: the rows spawn bwrap long after this returns.
    std::mem::forget(fds);
    Ok(binds)
}

/// The unconfined payload through the library's spawn path.
pub(crate) fn unconfined_launch(ws: &Path) -> Runner {
    Runner::Launch(Box::new((
        sandbox::ConfinedArgv::unconfined(payload()),
        LaunchOptions::in_dir(ws),
    )))
}

/// The provider's whole path on `backend` (selection probed once, here).
pub(crate) fn library(backend: Backend, launcher: &Path, ws: &Path) -> Result<Runner, String> {
    library_with(backend, launcher, ws, sandbox::TempArea::Shared)
}

/// [`library`] with a session's private temp area (made once, kept for the whole run): what the
/// area costs a call, beside the same path sharing the host's /tmp.
fn library_private_tmp(backend: Backend, launcher: &Path, ws: &Path) -> Result<Runner, String> {
    let area = sandbox_local::temp_area::TempAreaDir::create().map_err(|e| e.to_string())?;
    let temp_area = area.temp_area();
    // Held for the whole run (the rows spawn long after this returns); the next area made on
    // this host once the bench is gone removes it.
    std::mem::forget(area);
    library_with(backend, launcher, ws, temp_area)
}

fn library_with(
    backend: Backend,
    launcher: &Path,
    ws: &Path,
    area: sandbox::TempArea,
) -> Result<Runner, String> {
    let mut config = LocalConfig::only(backend);
    config.launcher = Some(launcher.to_path_buf());
    let provider = LocalProvider::new(config);
    provider.selection().map_err(|e| e.to_string())?;
    Ok(Runner::Library(Box::new((
        provider,
        ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws)
            .with_roots(|r| r.with_temp_area(area)),
        LaunchOptions::in_dir(ws),
    ))))
}

/// `sandboxctl run` on `backend`, a new process per command, with a filled or an emptied cache.
fn cli(
    sandboxctl: &Path,
    backend: &str,
    launcher: &Path,
    s: &Scratch,
    warm: bool,
) -> Result<Runner, String> {
    let cache = s.base.join(format!(
        "cache-{backend}-{}",
        if warm { "warm" } else { "cold" }
    ));
    let mut argv = vec![
        os(sandboxctl),
        os("run"),
        os("--mode"),
        os("workspace-write"),
        os("--backend"),
        os(backend),
        os("--launcher"),
        os(launcher),
        os("--workspace"),
        os(&s.ws),
        os("--"),
    ];
    argv.extend(payload());
    let mut spawn = Spawn::new(argv, &s.ws);
    spawn.env.push((os("SANDBOX_PROBE_CACHE"), os(&cache)));
    if !warm {
        spawn.before = Some(Box::new(move || {
            let _ = std::fs::remove_dir_all(&cache);
        }));
    }
    Ok(Runner::Process(spawn))
}

/// A peer's sandbox on the same payload, when installed under `peers`.
fn peer(peers: &Path, name: &str, s: &Scratch) -> Result<Runner, String> {
    let exe = peers.join(name);
    if !exe.exists() {
        return Err(format!(
            "not installed: {} does not exist (install the peers, or pass --peers DIR)",
            exe.display()
        ));
    }
    let mut argv = vec![os(&exe)];
    let mut env = Vec::new();
    match name {
        "codex" => {
            // codex refuses a CODEX_HOME under /tmp; one of its own, like every worker of ours.
            let home = s.base.join("codex-home");
            std::fs::create_dir_all(&home).map_err(|e| format!("codex home: {e}"))?;
            env.push((os("CODEX_HOME"), os(&home)));
            argv.extend([
                os("sandbox"),
                os("-P"),
                os(":workspace"),
                os("-C"),
                os(&s.ws),
            ]);
        }
        _ => {
            let settings = s.base.join("srt-settings.json");
            let json = serde_json::json!({
                "filesystem": { "denyRead": [], "allowWrite": [s.ws], "denyWrite": [] },
                "network": { "allowedDomains": [], "deniedDomains": [] },
            });
            std::fs::write(&settings, json.to_string()).map_err(|e| format!("settings: {e}"))?;
            argv.extend([os("--settings"), os(&settings)]);
        }
    }
    argv.push(os("--"));
    argv.extend(payload());
    let mut spawn = Spawn::new(argv, &s.ws);
    spawn.env = env;
    Ok(Runner::Process(spawn))
}

/// Every row of the table, in print order.
#[expect(
    clippy::too_many_lines,
    reason = "the table in print order, each row next to how it is run: split, a row would be read across functions"
)]
pub(crate) fn rows(args: &Args, s: &Scratch, notes: &mut Vec<String>) -> Vec<Row> {
    let ws = &s.ws;
    let launcher = args
        .launcher
        .clone()
        .map_or_else(|| sibling("landlock-run", "landlock-run"), Ok);
    let sandboxctl = args
        .sandboxctl
        .clone()
        .map_or_else(|| sibling("sandboxctl", "sandbox-cli"), Ok);
    let bwrap = which::which("bwrap").map_err(|e| format!("bwrap not found: {e}"));
    let roots = sandbox::writable_roots(&ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws))
        .map_err(|e| e.to_string());
    let set = roots.map(|r| WritableSet::from_roots(r, ws));

    if let Ok(l) = &launcher {
        notes.push(match is_dynamic(l) {
            Some(false) => format!("launcher: {} (statically linked)", l.display()),
            Some(true) => format!(
                "launcher: {} (DYNAMICALLY linked: build it with `cargo build-launcher`)",
                l.display()
            ),
            None => format!("launcher: {} (not an ELF file?)", l.display()),
        });
    }
    if let Ok(c) = &sandboxctl {
        notes.push(match is_dynamic(c) {
            Some(false) => format!("sandboxctl: {} (statically linked)", c.display()),
            Some(true) => format!(
                "sandboxctl: {} (dynamically linked: `cargo build-sandboxctl` links it statically)",
                c.display()
            ),
            None => format!("sandboxctl: {} (not an ELF file?)", c.display()),
        });
    }
    let trampoline = build_trampoline(&s.base).map(|(exe, kind)| {
        notes.push(format!("trampoline: built {kind} with the system cc"));
        exe
    });
    let grants = |set: &WritableSet| {
        let mut args = Vec::new();
        for root in set.workspace.iter().chain(&set.temp) {
            args.extend([os("--rw"), os(root)]);
        }
        args.extend([os("--rw"), os(profile::DEV_NULL), os("--")]);
        args.extend(payload());
        args
    };

    let unconfined = Runner::Process(Spawn::new(payload(), ws));
    let trampoline_row = match (&trampoline, &set) {
        (Ok(t), Ok(set)) => {
            let mut argv = vec![os(t)];
            argv.extend(grants(set));
            Ok(Runner::Process(Spawn::new(argv, ws)))
        }
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    // The launcher with its seccomp guard (as every launch runs it) and without it (a flag only
    // this benchmark passes): what the guard costs the Landlock backend.
    let layered = |guard: bool, layers: fn(&mut LaunchArgs, &Path)| match (&launcher, &set) {
        (Ok(l), Ok(set)) => {
            let mut launch = LaunchArgs {
                unguarded: !guard,
                read_only: vec!["/".into()],
                read_write: set
                    .workspace
                    .iter()
                    .chain(&set.temp)
                    .chain(std::iter::once(&PathBuf::from(profile::DEV_NULL)))
                    .map(|root| WritableRoot::new(root.clone()))
                    .collect(),
                payload: payload(),
                ..LaunchArgs::default()
            };
            layers(&mut launch, ws);
            let mut argv = vec![os(l)];
            argv.extend(Invocation::Launch(Box::new(launch)).to_args());
            Ok(Runner::Process(Spawn::new(argv, ws)))
        }
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    let launcher_row = |guard: bool| layered(guard, |_, _| {});
    // The layers a provider launch adds (issue 30), each on top of the one before: a PID
    // namespace of its own, then the emulator that prevents git's code surface while the call
    // runs (the default protected paths at the workspace; no staging directory, so it refuses
    // new git directories rather than staging them).
    let pid_ns = |launch: &mut LaunchArgs, _: &Path| launch.pid_namespace = true;
    let prevent = |launch: &mut LaunchArgs, ws: &Path| {
        launch.pid_namespace = true;
        launch.prevent = true;
        launch.anchors = vec![ws.to_path_buf()];
        launch.protected_rel = sandbox::DEFAULT_PROTECTED_PATHS
            .iter()
            .map(PathBuf::from)
            .collect();
    };
    // bwrap binds by descriptor, as the provider does: the bare rows open the same binds and
    // leave them inheritable under their own numbers (kept open for the whole run).
    let held = match &set {
        Ok(set) => bare_binds(set, ws),
        Err(e) => Err(e.clone()),
    };
    let bare = |hardened: bool| match (&bwrap, &set, &held) {
        (Ok(b), Ok(set), Ok(binds)) => {
            let args = profile::bwrap_args(set, binds, sandbox::NetworkMode::Enabled, None, None);
            let args = if hardened { args } else { plain_bwrap(&args) };
            let mut argv = vec![os(b)];
            argv.extend(args);
            argv.extend(payload());
            Ok(Runner::Process(Spawn::new(argv, ws)))
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e.clone()),
    };
    // Bare bwrap on our profile running the payload through the launcher (its seccomp guard and
    // Landlock ruleset), as the bwrap backend does: what the guard costs on top of `bwrap hardened`.
    // Without the guard: the same launcher inside bwrap told to skip its seccomp program (its
    // Landlock ruleset and monitor stay), so the two rows differ by the guard alone.
    let guarded = |guard: bool| match (&bwrap, &launcher, &set, &held) {
        (Ok(b), Ok(l), Ok(set), Ok(binds)) => {
            let mut args = profile::bwrap_args(
                set,
                binds,
                sandbox::NetworkMode::Enabled,
                None,
                Some(Path::new(l)),
            );
            if !guard {
                let at = args
                    .iter()
                    .position(|a| a == l.as_os_str())
                    .map_or(args.len(), |i| i + 1);
                args.insert(at, os(landlock_run::BENCH_UNGUARDED_FLAG));
            }
            let mut argv = vec![os(b)];
            argv.extend(args);
            argv.extend(payload());
            Ok(Runner::Process(Spawn::new(argv, ws)))
        }
        (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => {
            Err(e.clone())
        }
    };
    let lib = |backend| {
        launcher
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|l| library(backend, l, ws))
    };
    let lib_private = |backend| {
        launcher
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|l| library_private_tmp(backend, l, ws))
    };
    let ctl = |backend, warm| match (&sandboxctl, &launcher) {
        (Ok(c), Ok(l)) => cli(c, backend, l, s, warm),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    let peers = args.peers.clone().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/backends/peers/node_modules/.bin")
    });
    vec![
        Row::new("unconfined", "unconfined", Ok(unconfined)),
        Row::new("trampoline", "unconfined", trampoline_row),
        Row::new("landlock-run", "trampoline", launcher_row(true)),
        Row::new("landlock-run unguarded", "trampoline", launcher_row(false)),
        Row::new("landlock-run pid-ns", "landlock-run", layered(true, pid_ns)),
        Row::new(
            "landlock-run prevent",
            "landlock-run pid-ns",
            layered(true, prevent),
        ),
        Row::new("bwrap plain", "unconfined", bare(false)),
        Row::new("bwrap hardened", "unconfined", bare(true)),
        Row::new("bwrap guarded", "bwrap hardened", guarded(true)),
        Row::new("bwrap unguarded", "bwrap hardened", guarded(false)),
        Row::new("library landlock", "trampoline", lib(Backend::Landlock)).target(LIBRARY_TARGET),
        Row::new("library bwrap", "bwrap hardened", lib(Backend::Bwrap)).target(LIBRARY_TARGET),
        Row::new(
            "library landlock private tmp",
            "library landlock",
            lib_private(Backend::Landlock),
        ),
        Row::new(
            "library bwrap private tmp",
            "library bwrap",
            lib_private(Backend::Bwrap),
        ),
        Row::new(
            "sandboxctl landlock cold",
            "trampoline",
            ctl("landlock", false),
        ),
        Row::new(
            "sandboxctl landlock warm",
            "trampoline",
            ctl("landlock", true),
        )
        .target(CLI_TARGET),
        Row::new(
            "sandboxctl bwrap cold",
            "bwrap hardened",
            ctl("bwrap", false),
        ),
        Row::new(
            "sandboxctl bwrap warm",
            "bwrap hardened",
            ctl("bwrap", true),
        )
        .target(CLI_TARGET),
        Row::new("codex sandbox", "bwrap hardened", peer(&peers, "codex", s)).slow(),
        Row::new("srt", "bwrap hardened", peer(&peers, "srt", s)).slow(),
    ]
}
