//! Functional probes: a backend is usable only if it actually confines a real command with the
//! real profile (never `--version`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sandbox::{
    ClassEnforcements, ClassReport, Classification, EnforcementClass, PayloadStatus,
    SandboxEnforcement,
};
use serde::Serialize;

use crate::launch::{self, LaunchOptions};
use crate::profile::WritableSet;
use crate::provider::{Backend, LocalConfig, wrap};

/// What a passing probe found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ProbeFacts {
    /// The enforcement the backend achieves here.
    pub enforcement: SandboxEnforcement,
    /// The runner's version, when it tells one (bwrap).
    pub version: Option<String>,
    /// The Landlock ABI in force (launcher only).
    pub abi: Option<u32>,
    /// The kernel's Landlock ABI (launcher only).
    pub kernel_abi: Option<u32>,
    /// The file effects the backend does not govern here (why it reports `partial`): for the
    /// launcher, `metadata` at every Landlock ABI, plus `truncate` below ABI 3 and cross-directory
    /// rename and link below ABI 2.
    #[serde(default)]
    pub ungoverned: Vec<String>,
    /// What the backend can govern here, per class (files, network), with what each leaves
    /// ungoverned; a launch reports the classes its policy restricts from these.
    #[serde(default)]
    pub classes: ClassEnforcements,
}

impl ProbeFacts {
    /// The per-class capabilities, or for facts that predate them, files as `enforcement` and
    /// `ungoverned` say and nothing else governed.
    pub fn capabilities(&self) -> ClassEnforcements {
        if self.classes.is_empty() {
            ClassEnforcements::default().with(
                EnforcementClass::Files,
                ClassReport {
                    enforcement: self.enforcement.into(),
                    ungoverned: self.ungoverned.clone(),
                    allowed: Vec::new(),
                },
            )
        } else {
            self.classes.clone()
        }
    }
}

/// What `backend` governs of the network when the policy restricts it, by construction of its
/// profile (the launcher's share depends on the kernel: see `landlock_network`).
///
/// - bwrap (and an operator runner, which gets bwrap's arguments): `--unshare-net` leaves the
///   payload a network namespace with only its own loopback, so TCP, UDP and abstract unix
///   sockets of the host are out of reach; a unix socket bound to a path on the host stays
///   reachable through the read-only bind of `/` (connecting to a socket is not a write), so the
///   class is `partial`: `named-unix-sockets`.
/// - Seatbelt: under `(deny default)` a restricted profile names no network operation at all:
///   TCP, UDP and unix sockets are refused (only the policy's allowed unix sockets are named).
/// - The launcher: see `landlock_network`.
pub fn network_capability(backend: Backend, landlock_governed: &[String]) -> ClassReport {
    match backend {
        Backend::Bwrap => ClassReport::with_gaps([sandbox::gaps::NAMED_UNIX_SOCKETS]),
        Backend::Seatbelt => ClassReport::full(),
        Backend::Landlock => landlock_network(landlock_governed),
    }
}

/// The launcher's network class from what its probe says a restricted launch governs: nothing
/// (`not-governed`, below ABI 4 without the abstract scope), or `partial` naming the rest (UDP and
/// named unix sockets are never Landlock rights).
fn landlock_network(governed: &[String]) -> ClassReport {
    if governed.is_empty() {
        return ClassReport::not_governed();
    }
    let governed: Vec<&str> = governed.iter().map(String::as_str).collect();
    ClassReport::with_gaps(landlock_run::net::ungoverned(&governed))
}

/// Host IPC no rule of the backend closes: unix sockets to host daemons (named and abstract).
pub const HOST_IPC_UNIX_SOCKETS: &str = "unix-sockets";
/// Host IPC no rule of the backend closes: FIFOs outside the writable set opened for writing.
pub const HOST_IPC_FIFOS: &str = "fifos";
/// Host IPC of a launch whose writable set holds a temp folder the host shares (`/tmp`, the
/// caller's `$TMPDIR`): host tools read what the payload writes there (cargo's, rustup's and
/// pytest's config from every parent folder of a `mktemp -d` folder) and host processes read
/// FIFOs there. Reported until the temp area is private per session.
pub const HOST_IPC_SHARED_TEMP: &str = "shared temp area: the person's tools read what the payload writes in /tmp and $TMPDIR (config from parent folders, FIFOs host processes read)";
/// Host IPC no rule of the backend closes: the host's SysV shared memory, queues and semaphores.
pub const HOST_IPC_SYSV: &str = "sysv-ipc";
/// Host IPC no rule of the backend closes: the host's POSIX message queues.
pub const HOST_IPC_POSIX_MQUEUES: &str = "posix-mqueues";
/// Host IPC no rule of the backend closes: the user's keyrings (`add_key`, `keyctl`).
pub const HOST_IPC_KEYRINGS: &str = "keyrings";

/// What `backend` closes of the host's IPC (every confined mode), by construction of its profile
/// and whether the launcher's seccomp guard runs here (`guard`: the probe saw it refuse):
///
/// - the launcher: Landlock refuses opening a FIFO outside the writable set for writing; the
///   guard refuses unix and vsock sockets (`socketpair` stays), keyrings, SysV IPC and POSIX
///   message queues (the launcher shares the host's IPC namespace);
/// - bwrap runs the launcher inside its namespaces (`--ipc private`): SysV IPC and POSIX message
///   queues are its own (`--unshare-ipc`), the rest as the launcher;
/// - Seatbelt: its profile starts from `(deny default)` and names no unix socket but those the
///   policy allows (`network-outbound` by path), no IPC (`ipc-posix*`, `ipc-sysv*` denied), no
///   write outside the writable set (a FIFO included), and no Mach service that writes for the
///   payload ([`crate::seatbelt`]); macOS has no keyrings (the keychain's service is not named).
pub fn host_ipc_capability(backend: Backend, guard: bool) -> ClassReport {
    let unguarded = [HOST_IPC_UNIX_SOCKETS, HOST_IPC_KEYRINGS];
    match (backend, guard) {
        (Backend::Bwrap | Backend::Landlock, true) => ClassReport::full(),
        (Backend::Bwrap, false) => ClassReport::with_gaps(unguarded),
        (Backend::Landlock, false) => ClassReport::with_gaps(
            unguarded
                .into_iter()
                .chain([HOST_IPC_SYSV, HOST_IPC_POSIX_MQUEUES]),
        ),
        (Backend::Seatbelt, _) => ClassReport::full(),
    }
}

/// An operator runner gets bwrap's arguments without the launcher: `--unshare-ipc` keeps the
/// host's SysV IPC and POSIX message queues out of reach, nothing closes the rest.
pub fn operator_host_ipc() -> ClassReport {
    ClassReport::with_gaps([HOST_IPC_UNIX_SOCKETS, HOST_IPC_FIFOS, HOST_IPC_KEYRINGS])
}

/// What the launcher leaves of the protected class on a host where it cannot make a private
/// mount namespace (not root, and unprivileged user namespaces refused).
pub const PROTECTED_NEEDS_MOUNT_NAMESPACE: &str =
    "protected paths: no private mount namespace on this host (not root, user namespaces refused)";

/// What the launcher leaves of the host-IPC class on a host where it cannot make a PID namespace
/// (the same hosts where it cannot make a mount namespace: both need root or a user namespace):
/// the host's processes of the payload's uid are in sight in `/proc`, and within reach of calls
/// Landlock does not govern (signals below ABI 6; its seccomp guard refuses rescheduling,
/// re-prioritising, pinning and limiting another process, and signalling its monitor).
pub const HOST_PROCESSES_IN_REACH: &str = "host processes: no PID namespace on this host (the payload sees the host's processes in /proc, and below Landlock ABI 6 can signal those of its uid)";

/// The per-class capabilities of a backend: files as its probe found them, the network as
/// [`network_capability`] says, the protected paths as `protected` says (bwrap and Seatbelt
/// always; the launcher when it may mount).
pub(crate) fn capabilities(
    files: ClassReport,
    network: ClassReport,
    protected: ClassReport,
    host_ipc: ClassReport,
) -> ClassEnforcements {
    ClassEnforcements::default()
        .with(EnforcementClass::Files, files)
        .with(EnforcementClass::Network, network)
        .with(EnforcementClass::Protected, protected)
        .with(EnforcementClass::HostIpc, host_ipc)
}

/// Why a backend is not usable on this host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "detail")]
pub enum ProbeError {
    /// The runner program is not there.
    #[error("{0}")]
    NotFound(String),
    /// The runner refused or failed before the probe ran: its own words.
    #[error("{0}")]
    RunnerFailed(String),
    /// The probe ran and its write under the read-only profile landed: the backend confines
    /// nothing here. Unlike an unusable backend, this is a broken one.
    #[error("a write under the read-only profile was not denied: this backend confines nothing")]
    DoesNotConfine,
    /// The probe did not finish in time.
    #[error("probe timed out after {0:?}")]
    TimedOut(std::time::Duration),
    /// Anything else the probe saw that proves neither confinement nor a runner failure.
    #[error("{0}")]
    Unexpected(String),
}

impl ProbeError {
    /// True when the backend ran the probe and did not confine it (a broken backend, never a
    /// skip).
    pub fn confines_nothing(&self) -> bool {
        matches!(self, ProbeError::DoesNotConfine)
    }
}

/// One backend's probe result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeVerdict {
    /// The backend probed.
    pub backend: Backend,
    /// The runner program found, if any.
    pub program: Option<PathBuf>,
    /// Facts when usable; why not otherwise.
    pub result: Result<ProbeFacts, ProbeError>,
}

/// Probes `backend` as `config` would run it.
pub fn probe(backend: Backend, config: &LocalConfig) -> ProbeVerdict {
    let program = locate(backend, config);
    let result = match &program {
        Err(e) => Err(ProbeError::NotFound(e.clone())),
        Ok(p) => match backend {
            Backend::Bwrap => {
                // bwrap remounts every mount below `/` read-only; one that another process
                // removes meanwhile fails that remount (`Unable to apply mount flags: remount
                // ... No such file or directory`), which says nothing about bwrap: try again.
                let mut tries = 0;
                loop {
                    let result = probe_bwrap(p, config);
                    tries += 1;
                    match &result {
                        Err(ProbeError::RunnerFailed(words))
                            if tries < 3 && is_vanished_mount(words) => {}
                        _ => break result,
                    }
                }
            }
            Backend::Landlock => probe_landlock(p, config),
            Backend::Seatbelt => probe_seatbelt(p, config),
        },
    };
    ProbeVerdict {
        backend,
        program: program.ok(),
        result,
    }
}

/// bwrap's words when a mount below `/` vanished while it remounted the tree read-only.
pub(crate) fn is_vanished_mount(words: &str) -> bool {
    words.contains("Unable to apply mount flags") && words.contains("No such file or directory")
}

/// Probes every backend this platform knows, in chain order, for reports (`probe` command,
/// certification host facts).
pub fn probe_all(config: &LocalConfig) -> Vec<ProbeVerdict> {
    Backend::ALL.iter().map(|b| probe(*b, config)).collect()
}

pub(crate) fn locate(backend: Backend, config: &LocalConfig) -> Result<PathBuf, String> {
    match backend {
        Backend::Bwrap => match &config.bwrap {
            Some(p) => Ok(p.clone()),
            None => {
                which::which("bwrap").map_err(|_| "bwrap is not installed (not on PATH)".into())
            }
        },
        Backend::Landlock => match &config.launcher {
            Some(p) => Ok(p.clone()),
            None => locate_launcher(),
        },
        Backend::Seatbelt => Ok(config.sandbox_exec.clone()),
    }
}

/// Finds `landlock-run`: next to this executable, one level up (test binaries live in `deps/`),
/// then on `PATH`.
pub fn locate_launcher() -> Result<PathBuf, String> {
    locate_sibling("landlock-run", "landlock-run")
}

/// The directory [`locate_sibling`] looks in after this executable's own (set once).
static SIBLING_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes [`locate_sibling`] look in `dir` after this executable's directory and before `PATH`:
/// a program that provides its siblings itself (an installed `certify` links itself there as
/// `landlock-run`) points the lookup at them. Set once per process; false when already set.
pub fn set_sibling_dir(dir: PathBuf) -> bool {
    SIBLING_DIR.set(dir).is_ok()
}

/// Finds a program built with this workspace: next to this executable, one level up, in the
/// directory [`set_sibling_dir`] named, then on `PATH`. `package` names the package to build
/// when it is missing.
pub fn locate_sibling(program: &str, package: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let near = exe
        .parent()
        .into_iter()
        .flat_map(|dir| [dir.join(program), dir.join("..").join(program)])
        .chain(SIBLING_DIR.get().map(|dir| dir.join(program)));
    near.into_iter()
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
        .or_else(|| which::which(program).ok())
        .ok_or_else(|| {
            format!(
                "{program} not found next to {} or on PATH (build it: cargo build -p {package})",
                exe.display()
            )
        })
}

/// A scratch directory for one probe under `/tmp`, with a random private name (another local
/// user who creates a predictable name first cannot make a backend look unusable), removed on
/// drop.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new(tag: &str) -> Result<Scratch, String> {
        tempfile::Builder::new()
            .prefix(&format!("sandbox-probe-{tag}-"))
            .tempdir_in("/tmp")
            .map(Scratch)
            .map_err(|e| format!("cannot create a probe directory under /tmp: {e}"))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Runs the real read-only profile over a scratch workspace with a payload that tries to write
/// into it: usable only when the payload ran, the write was refused, and nothing landed.
fn functional(
    backend: Backend,
    program: &Path,
    enforcement: SandboxEnforcement,
    config: &LocalConfig,
) -> Result<(), ProbeError> {
    let scratch = Scratch::new(backend.name()).map_err(ProbeError::Unexpected)?;
    let target = scratch.path().join("must-not-exist");
    let set = WritableSet::default();
    let payload: Vec<OsString> = vec![
        "/bin/sh".into(),
        "-c".into(),
        "echo probe > \"$1\"".into(),
        "sh".into(),
        target.clone().into(),
    ];
    let guard = match backend {
        Backend::Bwrap => Some(locate(Backend::Landlock, config).map_err(ProbeError::NotFound)?),
        _ => None,
    };
    let policy = sandbox::ProviderPolicy::new(sandbox::ConfinedMode::ReadOnly, scratch.path());
    let launch_argv = wrap(
        config.prevent_while_running,
        backend,
        program,
        guard.as_deref(),
        &ClassEnforcements::from_overall(enforcement),
        config.landlock_abi_cap,
        &set,
        &policy,
        &payload,
    )
    .map_err(|e| ProbeError::Unexpected(e.to_string()))?;
    let mut options = LaunchOptions::in_dir(scratch.path());
    options.timeout = Some(config.probe_timeout);
    let done = launch::run(&launch_argv, &options);
    if target.exists() {
        return Err(ProbeError::DoesNotConfine);
    }
    if done.timed_out {
        return Err(ProbeError::TimedOut(config.probe_timeout));
    }
    match (&done.classification, &done.status) {
        (Classification::RunnerFailure { detail, .. }, _) => {
            Err(ProbeError::RunnerFailed(detail.clone()))
        }
        (_, Some(PayloadStatus::NeverRan { .. })) => Err(ProbeError::RunnerFailed(
            "the runner did not report that the probe ran".into(),
        )),
        (Classification::Denied { .. }, _) => Ok(()),
        (other, _) => Err(ProbeError::Unexpected(format!(
            "the probe write was neither denied nor reported as a runner failure ({})",
            other.code()
        ))),
    }
}

fn probe_bwrap(program: &Path, config: &LocalConfig) -> Result<ProbeFacts, ProbeError> {
    functional(Backend::Bwrap, program, SandboxEnforcement::Full, config)?;
    // The functional probe ran through the launcher, whose guard this build has or lacks.
    let guard = landlock_run::SETUID_GUARD_SUPPORTED;
    let version = std::process::Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|v| !v.is_empty());
    Ok(ProbeFacts {
        enforcement: SandboxEnforcement::Full,
        version,
        abi: None,
        kernel_abi: None,
        ungoverned: Vec::new(),
        classes: capabilities(
            ClassReport::full(),
            network_capability(Backend::Bwrap, &[]),
            ClassReport::full(),
            host_ipc_capability(Backend::Bwrap, guard),
        ),
    })
}

fn probe_landlock(program: &Path, config: &LocalConfig) -> Result<ProbeFacts, ProbeError> {
    let mut argv: Vec<OsString> = vec![program.into()];
    argv.extend(
        landlock_run::cli::Invocation::Probe {
            abi_cap: config.landlock_abi_cap,
        }
        .to_args(),
    );
    let probe = sandbox::ConfinedArgv {
        backend: "landlock".into(),
        ..sandbox::ConfinedArgv::unconfined(argv)
    };
    let mut options = LaunchOptions::in_dir("/");
    options.timeout = Some(config.probe_timeout);
    let done = launch::run(&probe, &options);
    if done.timed_out {
        return Err(ProbeError::TimedOut(config.probe_timeout));
    }
    if let sandbox::ProcessOutcome::SpawnFailed(f) = &done.outcome {
        return Err(ProbeError::RunnerFailed(f.message.clone()));
    }
    let stdout = String::from_utf8_lossy(&done.stdout);
    let report = landlock_run::ProbeReport::parse(&stdout).ok_or_else(|| {
        let stderr = String::from_utf8_lossy(&done.stderr).trim().to_owned();
        ProbeError::Unexpected(format!(
            "unreadable probe report {:?} {stderr}",
            stdout.trim()
        ))
    })?;
    if !report.usable || done.exit_code() != Some(0) {
        return Err(ProbeError::RunnerFailed(report.reason.unwrap_or_else(
            || "the kernel did not enforce a Landlock ruleset".into(),
        )));
    }
    let enforcement = report.enforcement;
    functional(Backend::Landlock, program, enforcement, config)?;
    let files = ClassReport {
        enforcement: enforcement.into(),
        ungoverned: report.ungoverned.clone(),
        allowed: Vec::new(),
    };
    let signals_scoped = report
        .scoped
        .iter()
        .any(|s| s == landlock_run::SCOPE_SIGNAL);
    // Where the launcher may mount it also makes a PID namespace (both need root or a user
    // namespace): the caller, whose check after the call judges what was staged, is then out of
    // the payload's reach at any ABI, and git's surface is prevented while the call runs.
    let _ = signals_scoped;
    let (protected, host_ipc) = match report.protect {
        true => (
            ClassReport::full(),
            host_ipc_capability(Backend::Landlock, report.setuid_guard),
        ),
        false => (
            ClassReport {
                enforcement: sandbox::ClassEnforcement::NotGoverned,
                ungoverned: vec![PROTECTED_NEEDS_MOUNT_NAMESPACE.into()],
                allowed: Vec::new(),
            },
            with_gap(
                host_ipc_capability(Backend::Landlock, report.setuid_guard),
                HOST_PROCESSES_IN_REACH,
            ),
        ),
    };
    Ok(ProbeFacts {
        enforcement,
        version: None,
        abi: Some(report.abi),
        kernel_abi: Some(report.kernel_abi),
        ungoverned: report.ungoverned,
        classes: capabilities(
            files,
            network_capability(Backend::Landlock, &report.network),
            protected,
            host_ipc,
        ),
    })
}

/// `report` with one more thing it leaves ungoverned (a full class becomes partial).
fn with_gap(report: ClassReport, gap: &str) -> ClassReport {
    let mut gaps = report.ungoverned;
    gaps.push(gap.to_owned());
    match report.enforcement {
        sandbox::ClassEnforcement::NotGoverned => ClassReport {
            enforcement: sandbox::ClassEnforcement::NotGoverned,
            ungoverned: gaps,
            allowed: report.allowed,
        },
        _ => ClassReport::with_gaps(gaps),
    }
}

fn probe_seatbelt(program: &Path, config: &LocalConfig) -> Result<ProbeFacts, ProbeError> {
    if !program.is_file() {
        return Err(ProbeError::NotFound(format!(
            "{} does not exist on this host",
            program.display()
        )));
    }
    functional(Backend::Seatbelt, program, SandboxEnforcement::Full, config)?;
    Ok(ProbeFacts {
        enforcement: SandboxEnforcement::Full,
        version: None,
        abi: None,
        kernel_abi: None,
        ungoverned: Vec::new(),
        classes: capabilities(
            ClassReport::full(),
            network_capability(Backend::Seatbelt, &[]),
            ClassReport::full(),
            host_ipc_capability(Backend::Seatbelt, false),
        ),
    })
}
