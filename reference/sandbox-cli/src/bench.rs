//! `sandbox-bench`: what confinement costs per command, as one table from one run.
//!
//! Every row runs `bash -c true` (workspace-write, a workspace under `/var/tmp`) and is compared
//! with its named floor, measured in the same run:
//!
//! - `unconfined`: the payload spawned directly (the floor of the floors);
//! - `trampoline`: a minimal static C Landlock trampoline built by this command with the system
//!   `cc` (create a ruleset, grant the writable roots, `no_new_privs`, restrict, exec): the floor
//!   of every Landlock row;
//! - `landlock-run`: the launcher alone, on the argv the provider gives it; `landlock-run
//!   unguarded` the same without its seccomp guard (`--bench-unguarded`, a flag no profile emits);
//! - `bwrap plain` and `bwrap hardened`: bare bwrap on our profile without and with its isolation
//!   flags (`bwrap hardened` is the floor of every bwrap row); `bwrap guarded` runs the payload
//!   through the launcher as the bwrap backend does, `bwrap unguarded` the same launcher without
//!   its seccomp guard;
//! - `library bwrap` / `library landlock`: the provider's full path (confine, spawn with the
//!   status channel, wait, classify), selection probed once beforehand;
//! - `sandboxctl bwrap|landlock cold|warm`: the CLI, a new process per command, with an empty or a
//!   filled probe cache;
//! - `codex sandbox` and `srt`: the peers, when installed (else the row says why it is absent).
//!
//! Rows are interleaved (every round runs every row, in a new random order) so that machine noise
//! hits them alike; each row reports mean, standard deviation and median, and its ratio to its
//! floor as the mean and standard deviation of the per-round ratios, and the same against the
//! `unconfined` row (so the guard's cost per backend reads off one column). Then the concurrency curve:
//! throughput of 1, 4, 16 and 64 concurrent commands through the library, per backend, against
//! the same payload unconfined through the same spawn path (`library none`, how
//! `danger-full-access` runs), with a bare `std::process::Command` spawn beside it.
//!
//! `--quick` runs every row a couple of times (the test that keeps this command from rotting);
//! the numbers it prints mean nothing.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use sandbox::{ConfinedMode, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::profile::{self, WritableSet};
use sandbox_local::{Backend, LocalConfig, LocalProvider};

/// The C source of the floor trampoline.
const TRAMPOLINE_C: &str = include_str!("trampoline.c");

/// The payload every row runs.
const PAYLOAD: [&str; 3] = ["bash", "-c", "true"];

/// Concurrency levels of the curve.
const CONCURRENCY: [usize; 4] = [1, 4, 16, 64];

/// Targets: the library path within this factor of its floor.
const LIBRARY_TARGET: f64 = 1.15;
/// Targets: `sandboxctl run` with a warm cache within this factor of the same floor.
const CLI_TARGET: f64 = 1.25;
/// Targets: confined throughput at 16 concurrent commands at least this share of unconfined.
const THROUGHPUT_TARGET: f64 = 0.8;

#[derive(Parser)]
#[command(
    name = "sandbox-bench",
    about = "Measure what confinement costs per command: one interleaved table against named floors"
)]
struct Args {
    /// Rounds; every round runs every row `--inner` times (peers once), in a new random order.
    #[arg(long, default_value_t = 30)]
    rounds: usize,
    /// Runs of each fast row per round.
    #[arg(long, default_value_t = 5)]
    inner: usize,
    /// Rounds of the concurrency curve.
    #[arg(long, default_value_t = 3)]
    curve_rounds: usize,
    /// Commands per concurrency batch, per worker (at least 16 per batch).
    #[arg(long, default_value_t = 6)]
    per_worker: usize,
    /// A smoke run: two rounds, one run per row, one small batch per level.
    #[arg(long)]
    quick: bool,
    /// Where the peers' executables are (`codex`, `srt`).
    #[arg(long)]
    peers: Option<PathBuf>,
    /// The launcher (default: `landlock-run` next to this executable).
    #[arg(long)]
    launcher: Option<PathBuf>,
    /// sandboxctl (default: next to this executable).
    #[arg(long)]
    sandboxctl: Option<PathBuf>,
}

/// One command a row runs: the argv, its environment and where.
struct Spawn {
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    /// Run before every timed command, untimed (the cold cache is emptied here).
    before: Option<Box<dyn Fn() + Send + Sync>>,
}

impl Spawn {
    fn new(argv: Vec<OsString>, cwd: &Path) -> Spawn {
        Spawn {
            argv,
            env: Vec::new(),
            cwd: cwd.to_path_buf(),
            before: None,
        }
    }

    /// Runs once; the time of the spawn and the wait only.
    fn once(&self) -> Result<Duration, String> {
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let start = Instant::now();
        let out = cmd.output().map_err(|e| format!("cannot spawn: {e}"))?;
        let took = start.elapsed();
        if out.status.success() {
            Ok(took)
        } else {
            Err(format!(
                "{} ({})",
                out.status,
                tail(&String::from_utf8_lossy(&out.stderr))
            ))
        }
    }
}

/// The last line or so of a failure's stderr.
fn tail(s: &str) -> String {
    let s = s.trim();
    let start = s.char_indices().rev().nth(300).map_or(0, |(i, _)| i);
    s[start..].replace('\n', " / ")
}

/// How a row runs one command.
enum Runner {
    Process(Spawn),
    /// The library's spawn path (status channel, descriptor hygiene, classification) on an
    /// unconfined argv: how `danger-full-access` runs.
    Launch(Box<(sandbox::ConfinedArgv, LaunchOptions)>),
    Library(Box<(LocalProvider, ProviderPolicy, LaunchOptions)>),
}

impl Runner {
    /// The untimed preparation of the next command (emptying a cold cache).
    fn before(&self) {
        if let Runner::Process(Spawn {
            before: Some(before),
            ..
        }) = self
        {
            before();
        }
    }

    fn once(&self) -> Result<Duration, String> {
        match self {
            Runner::Process(spawn) => spawn.once(),
            Runner::Launch(launch) => {
                let (argv, options) = &**launch;
                let start = Instant::now();
                let done = launch::run(argv, options);
                let took = start.elapsed();
                match done.exit_code() {
                    Some(0) => Ok(took),
                    _ => Err(format!("{:?}", done.classification)),
                }
            }
            Runner::Library(lib) => {
                let (provider, policy, options) = &**lib;
                let start = Instant::now();
                let confined = provider
                    .confine(&payload(), policy)
                    .map_err(|e| e.to_string())?;
                let done = launch::run(&confined, options);
                let took = start.elapsed();
                match done.exit_code() {
                    Some(0) => Ok(took),
                    _ => Err(format!("{:?}", done.classification)),
                }
            }
        }
    }
}

/// One row of the table.
struct Row {
    name: &'static str,
    /// The row it is compared with (its own name for a floor).
    floor: &'static str,
    /// The target ratio, when the issue sets one.
    target: Option<f64>,
    /// Peers are slow: they run once per round.
    slow: bool,
    runner: Result<Runner, String>,
    /// Seconds, in run order, with the round of each.
    samples: Vec<(usize, f64)>,
    /// CPU seconds per command (this process and every waited-for descendant), same order.
    cpu: Vec<f64>,
}

impl Row {
    fn new(name: &'static str, floor: &'static str, runner: Result<Runner, String>) -> Row {
        Row {
            name,
            floor,
            target: None,
            slow: false,
            runner,
            samples: Vec::new(),
            cpu: Vec::new(),
        }
    }

    fn target(mut self, t: f64) -> Row {
        self.target = Some(t);
        self
    }

    fn slow(mut self) -> Row {
        self.slow = true;
        self
    }

    fn run(&mut self, round: usize) {
        let Ok(runner) = &self.runner else { return };
        runner.before();
        let cpu = cpu_seconds();
        let result = runner.once();
        // Orphans (bwrap's sandbox init) came to us: reap them so their CPU is counted.
        reap_orphans();
        match result {
            Ok(took) => {
                self.cpu.push(cpu_seconds() - cpu);
                self.samples.push((round, took.as_secs_f64()));
            }
            Err(e) => self.runner = Err(format!("FAILED: {e}")),
        }
    }
}

/// User and system CPU seconds of this process and of every descendant waited for so far: the
/// difference around one command is what it cost the machine, whatever the load (wall time
/// under contention also counts the waits for a CPU).
fn cpu_seconds() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    [UsageWho::RUSAGE_SELF, UsageWho::RUSAGE_CHILDREN]
        .into_iter()
        .filter_map(|who| getrusage(who).ok())
        .map(|u| secs(u.user_time()) + secs(u.system_time()))
        .sum()
}

/// Reaps every child that ended (orphans reparented to this subreaper), waiting at most a
/// little for the ones still exiting.
fn reap_orphans() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let give_up = Instant::now() + Duration::from_millis(200);
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn payload() -> Vec<OsString> {
    PAYLOAD.iter().map(OsString::from).collect()
}

fn os<S: AsRef<OsStr>>(s: S) -> OsString {
    s.as_ref().to_os_string()
}

/// A small deterministic shuffle (xorshift): a new order every round, no dependency.
fn shuffle<T>(items: &mut [T], seed: &mut u64) {
    for i in (1..items.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let j = usize::try_from(*seed % (i as u64 + 1)).unwrap_or(0);
        items.swap(i, j);
    }
}

/// Mean, standard deviation and median of `xs`.
fn stats(xs: &[f64]) -> (f64, f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    };
    (mean, var.sqrt(), median)
}

/// Whether the ELF file at `path` asks for a dynamic loader (has a `PT_INTERP` header).
fn is_dynamic(path: &Path) -> Option<bool> {
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

/// Builds the floor trampoline in `dir` with the system C compiler: static when the host has a
/// static libc, else dynamic (said in the row's note).
fn build_trampoline(dir: &Path) -> Result<(PathBuf, &'static str), String> {
    let src = dir.join("trampoline.c");
    std::fs::write(&src, TRAMPOLINE_C).map_err(|e| format!("cannot write the source: {e}"))?;
    let exe = dir.join("trampoline");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut last = String::new();
    for (flags, kind) in [
        (&["-O2", "-static"][..], "static"),
        (&["-O2"][..], "dynamic"),
    ] {
        let out = Command::new(&cc)
            .args(flags)
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
    Err(format!("{} cannot build it: {last}", cc.to_string_lossy()))
}

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

/// The scratch places of one run.
struct Scratch {
    _root: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
}

fn scratch() -> Result<Scratch, String> {
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

fn sibling(name: &str) -> Result<PathBuf, String> {
    sandbox_local::probe::locate_sibling(name, "sandbox-cli")
}

/// The unconfined payload through the library's spawn path.
fn unconfined_launch(ws: &Path) -> Runner {
    Runner::Launch(Box::new((
        sandbox::ConfinedArgv {
            argv: payload(),
            backend: "none".into(),
            enforcement: sandbox::SandboxEnforcement::Full,
            denial_signatures: Vec::new(),
            runner_failure_rules: Vec::new(),
            status_channel: None,
            fds: Default::default(),
            classes: sandbox::ClassEnforcements::from_overall(sandbox::SandboxEnforcement::Full),
        },
        LaunchOptions::in_dir(ws),
    )))
}

fn library(backend: Backend, launcher: &Path, ws: &Path) -> Result<Runner, String> {
    let mut config = LocalConfig::only(backend);
    config.launcher = Some(launcher.to_path_buf());
    let provider = LocalProvider::new(config);
    provider.selection().map_err(|e| e.to_string())?;
    Ok(Runner::Library(Box::new((
        provider,
        ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws),
        LaunchOptions::in_dir(ws),
    ))))
}

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
fn rows(args: &Args, s: &Scratch, notes: &mut Vec<String>) -> Vec<Row> {
    let ws = &s.ws;
    let launcher = args
        .launcher
        .clone()
        .map_or_else(|| sibling("landlock-run"), Ok);
    let sandboxctl = args
        .sandboxctl
        .clone()
        .map_or_else(|| sibling("sandboxctl"), Ok);
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
    let launcher_row = |guard: bool| match (&launcher, &set) {
        (Ok(l), Ok(set)) => {
            let mut argv = vec![os(l)];
            if !guard {
                argv.push(os(landlock_run::BENCH_UNGUARDED_FLAG));
            }
            argv.extend([os("--ro"), os("/")]);
            argv.extend(grants(set));
            Ok(Runner::Process(Spawn::new(argv, ws)))
        }
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
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
        Row::new("bwrap plain", "unconfined", bare(false)),
        Row::new("bwrap hardened", "unconfined", bare(true)),
        Row::new("bwrap guarded", "bwrap hardened", guarded(true)),
        Row::new("bwrap unguarded", "bwrap hardened", guarded(false)),
        Row::new("library landlock", "trampoline", lib(Backend::Landlock)).target(LIBRARY_TARGET),
        Row::new("library bwrap", "bwrap hardened", lib(Backend::Bwrap)).target(LIBRARY_TARGET),
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

/// The per-round ratios of `row` to `floor` (mean of each round's samples).
fn round_ratios(row: &Row, floor: &Row, rounds: usize) -> Vec<f64> {
    let mean_in = |r: &Row, round| {
        let xs: Vec<f64> = r
            .samples
            .iter()
            .filter(|(n, _)| *n == round)
            .map(|(_, x)| *x)
            .collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    };
    (0..rounds)
        .filter_map(|round| Some(mean_in(row, round)? / mean_in(floor, round)?))
        .collect()
}

fn verdict(ratio: f64, target: f64, at_most: bool) -> String {
    let met = if at_most {
        ratio <= target
    } else {
        ratio >= target
    };
    let sign = if at_most { "<=" } else { ">=" };
    if met {
        format!("{sign} {target:.2}: met")
    } else {
        format!(
            "{sign} {target:.2}: MISSED by {:.2}",
            (ratio - target).abs()
        )
    }
}

fn print_table(rows: &[Row], rounds: usize) -> Vec<String> {
    let mut misses = Vec::new();
    println!(
        "| row | floor | mean ms | sd ms | median ms | x floor (per-round mean ± sd) | x floor (medians) | CPU ms | CPU x floor | target (on the mean) | x unconfined (per-round mean ± sd) | CPU x unconfined |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|");
    let unconfined = rows.iter().find(|r| r.name == "unconfined");
    for row in rows {
        if let Err(why) = &row.runner
            && row.samples.is_empty()
        {
            println!(
                "| {} | {} | - | - | - | - | - | - | - | skipped: {why} | - | - |",
                row.name, row.floor
            );
            continue;
        }
        let xs: Vec<f64> = row.samples.iter().map(|(_, x)| x * 1e3).collect();
        let (mean, sd, median) = stats(&xs);
        let floor = rows.iter().find(|r| r.name == row.floor);
        let ratios = floor
            .map(|f| round_ratios(row, f, rounds))
            .unwrap_or_default();
        let (rmean, rsd, _) = stats(&ratios);
        let (cpu, _, _) = stats(&row.cpu);
        let floor_stats = floor.map(|f| {
            let xs: Vec<f64> = f.samples.iter().map(|(_, x)| x * 1e3).collect();
            (stats(&xs).2, stats(&f.cpu).0)
        });
        let (median_ratio, cpu_ratio) =
            floor_stats.map_or((f64::NAN, f64::NAN), |(m, c)| (median / m, cpu / c));
        let ratio = if ratios.is_empty() {
            "no floor".to_owned()
        } else {
            format!("{rmean:.2} ± {rsd:.2}")
        };
        let mut target = row.target.map_or(String::new(), |t| {
            let v = verdict(rmean, t, true);
            if v.contains("MISSED") {
                misses.push(format!("{}: {v}", row.name));
            }
            v
        });
        if let Err(why) = &row.runner {
            target = format!("{target} {why}");
        }
        // Every row against the unconfined spawn of the same rounds, whatever its own floor.
        let (base, base_cpu) = unconfined.map_or((String::from("-"), f64::NAN), |u| {
            let (m, sd, _) = stats(&round_ratios(row, u, rounds));
            (format!("{m:.2} ± {sd:.2}"), cpu / stats(&u.cpu).0)
        });
        println!(
            "| {} | {} | {mean:.2} | {sd:.2} | {median:.2} | {ratio} | {median_ratio:.2} | {:.2} | {cpu_ratio:.2} | {} | {base} | {base_cpu:.2} |",
            row.name,
            row.floor,
            cpu * 1e3,
            target.trim()
        );
    }
    misses
}

/// Runs `total` commands through `once` with `workers` threads; commands per second.
fn throughput(
    workers: usize,
    total: usize,
    once: &(dyn Fn() -> Result<(), String> + Sync),
) -> Result<f64, String> {
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    while next.fetch_add(1, Ordering::Relaxed) < total {
                        once()?;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("a worker panicked".to_owned()),
            })
            .collect()
    });
    match failures.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(total as f64 / start.elapsed().as_secs_f64()),
    }
}

/// The concurrency curve: commands per second through the library per backend and unconfined,
/// interleaved per round. Returns the misses of the 16-concurrent target.
fn curve(args: &Args, s: &Scratch, seed: &mut u64) -> Vec<String> {
    let launcher = args
        .launcher
        .clone()
        .map_or_else(|| sibling("landlock-run"), Ok);
    // The confined rows are compared with the same payload through the same spawn path
    // unconfined (`library none`); a bare `std::process::Command` spawn is shown beside it.
    let mut kinds: Vec<(&str, Result<Runner, String>)> = vec![
        ("spawn", Ok(Runner::Process(Spawn::new(payload(), &s.ws)))),
        ("library none", Ok(unconfined_launch(&s.ws))),
        (
            "library landlock",
            launcher
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|l| library(Backend::Landlock, l, &s.ws)),
        ),
        (
            "library bwrap",
            launcher
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|l| library(Backend::Bwrap, l, &s.ws)),
        ),
    ];
    let rounds = if args.quick { 1 } else { args.curve_rounds };
    let per_worker = if args.quick { 1 } else { args.per_worker };
    // results[kind][level] = per-round throughputs
    let mut results = vec![vec![Vec::new(); CONCURRENCY.len()]; kinds.len()];
    for _ in 0..rounds {
        let mut order: Vec<(usize, usize)> = (0..kinds.len())
            .flat_map(|k| (0..CONCURRENCY.len()).map(move |l| (k, l)))
            .collect();
        shuffle(&mut order, seed);
        for (k, l) in order {
            let Ok(runner) = &kinds[k].1 else { continue };
            let workers = CONCURRENCY[l];
            let total = if args.quick {
                workers
            } else {
                (workers * per_worker).max(16)
            };
            let once = |r: &Runner| r.once().map(|_| ());
            match throughput(workers, total, &|| once(runner)) {
                Ok(t) => results[k][l].push(t),
                Err(e) => kinds[k].1 = Err(format!("FAILED: {e}")),
            }
        }
    }
    println!();
    println!(
        "| concurrent commands | spawn cmd/s | library none cmd/s | library landlock cmd/s (x none) | library bwrap cmd/s (x none) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let mut misses = Vec::new();
    for (l, level) in CONCURRENCY.iter().enumerate() {
        let (spawn, spawn_sd, _) = stats(&results[0][l]);
        let (base, base_sd, _) = stats(&results[1][l]);
        let mut line =
            format!("| {level} | {spawn:.0} ± {spawn_sd:.0} | {base:.0} ± {base_sd:.0} |");
        for k in 2..kinds.len() {
            if let Err(why) = &kinds[k].1
                && results[k][l].is_empty()
            {
                line.push_str(&format!(" skipped: {why} |"));
                continue;
            }
            let (t, sd, _) = stats(&results[k][l]);
            let ratio = t / base;
            let mut cell = format!(" {t:.0} ± {sd:.0} ({ratio:.2})");
            if *level == 16 {
                let v = verdict(ratio, THROUGHPUT_TARGET, false);
                if v.contains("MISSED") {
                    misses.push(format!("{} at 16 concurrent: {v}", kinds[k].0));
                }
                cell.push_str(&format!(" {v}"));
            }
            line.push_str(&cell);
            line.push_str(" |");
        }
        println!("{line}");
    }
    misses
}

/// The 1-minute load average: how much else wanted the CPUs while this ran.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

fn host_facts(notes: &[String]) {
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

fn main() -> ExitCode {
    let mut args = Args::parse();
    if args.quick {
        args.rounds = 2;
        args.inner = 1;
    }
    let s = match scratch() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sandbox-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let mut notes = Vec::new();
    let mut rows = rows(&args, &s, &mut notes);
    host_facts(&notes);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    // A subreaper, so that a runner's orphans are reaped here and their CPU is counted.
    let subreaper = set_subreaper(true);
    // One untimed run of each: warms caches (the warm CLI rows fill their probe cache here) and
    // turns a broken row into a reason before anything is timed.
    for row in &mut rows {
        if let Ok(runner) = &row.runner
            && let Err(e) = runner.once()
        {
            // A peer that is installed but cannot run here (its own dependencies, this host)
            // is skipped with its words; one of ours failing fails the benchmark.
            row.runner = Err(if row.slow {
                format!("installed but does not run here: {e}")
            } else {
                format!("FAILED: {e}")
            });
        }
    }
    let started = Instant::now();
    for round in 0..args.rounds {
        for i in 0..args.inner {
            let mut order: Vec<usize> = (0..rows.len())
                .filter(|&r| i == 0 || !rows[r].slow)
                .collect();
            shuffle(&mut order, &mut seed);
            for r in order {
                rows[r].run(round);
            }
        }
    }
    println!(
        "{} rounds x {} runs per row (peers 1), interleaved, {:.1} s:\n",
        args.rounds,
        args.inner,
        started.elapsed().as_secs_f64()
    );
    let mut misses = print_table(&rows, args.rounds);
    if !subreaper {
        println!("(not a subreaper: the CPU of a runner's orphans is not counted)");
    }
    set_subreaper(false);
    misses.extend(curve(&args, &s, &mut seed));
    println!("\nload average at the end: {}", load_average());
    if misses.is_empty() {
        println!("every target met");
    } else {
        for m in &misses {
            println!("target missed: {m}");
        }
    }
    let failed = rows
        .iter()
        .filter_map(|r| r.runner.as_ref().err())
        .any(|e| e.starts_with("FAILED"));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Makes this process a child subreaper (or stops); whether it is one now. Linux only
/// (`PR_SET_CHILD_SUBREAPER`): elsewhere it never is, and the table says so.
fn set_subreaper(on: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(on).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = on;
        false
    }
}
