//! The launcher's command-line contract, shared by the launcher binary and the provider that maps
//! sandbox modes onto its flags. The strings here are what the provider's runner-failure dialect
//! matches, so they live once, next to the program that prints them.
//!
//! ```text
//! landlock-run [--abi-cap N] [--status-fd FD] [--net restricted|enabled] [--ipc private|host] [--allow-unix-sockets]
//!              [--pid-namespace] [--pids private|host] [--memory BYTES]
//!              [--prevent [--anchor ROOT]... [--protected-rel REL]... [--protected-name NAME]... [--stage-fd FD]]
//!              (--ro PATH | --rw PATH [--rw-identity DEV:INO] | --pin DIR | --protect PATH)... -- PROGRAM [ARGS...]
//! landlock-run --probe [--abi-cap N]
//! ```
//!
//! The command line is one type, [`cli::Invocation`]: the provider emits it and the launcher
//! parses it, so a flag cannot exist on one side only (its round-trip test covers every flag).
//!
//! - `--ro PATH` grants reading beneath PATH (reads are not restricted at all today; the flag keeps
//!   profiles explicit), `--rw PATH` grants every governed write beneath PATH (or to the file).
//! - Every `--ro` and `--rw` PATH must be canonical: no component may be a symbolic link. The
//!   launcher opens each with `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` and a symlink
//!   anywhere in it is a launcher failure naming the path, so a process that swaps a granted
//!   directory with a symlink to the outside while the launcher starts (`RENAME_EXCHANGE`) can
//!   only make the launch fail, never widen it. The rule is bound to the inode opened then.
//! - `--protect PATH` keeps PATH (inside a `--rw` root) unwritable and `--pin DIR` keeps DIR from
//!   being renamed or removed: the payload's process makes a private mount namespace (as root, or
//!   in an unprivileged user namespace mapping its own uid) and binds them onto themselves,
//!   read-only and writable, before it restricts itself; a host that allows neither is a launcher
//!   failure. Paths must be canonical and exist. `--probe` says whether this host allows it.
//! - `--abi-cap N` uses at most Landlock ABI N. It can only weaken the launcher, which then lists
//!   more in `ungoverned` (truncate below 3, cross-directory rename and link below 2), prints
//!   [`PARTIAL_NOTICE`] below 3, and does not scope signals or abstract unix sockets below ABI 6.
//! - `--net restricted` denies TCP bind and connect (Landlock ABI 4) on top of the abstract unix
//!   socket scope every launch applies from ABI 6; UDP and named unix sockets stay ungoverned at
//!   every ABI (see [`net`]). `--net enabled`, the default, adds no network rule.
//! - `--ipc private` says the caller gave the launcher an IPC namespace of its own (bwrap's
//!   `--unshare-ipc`): SysV IPC and POSIX message queues are then the sandbox's own and the guard
//!   leaves them open. `--ipc host`, the default, refuses them (they would be the host's).
//! - `--allow-unix-sockets` says the deployment allowed named unix sockets by path: the guard
//!   then lets the payload make stream and seqpacket unix sockets (to any path it can see: seccomp
//!   cannot read a `connect` address, so the caller reports `host-ipc` partial); datagram unix
//!   sockets and vsock stay refused.
//! - `--net restricted` also installs the network guard ([`net::install_net_guard`]): every IP
//!   socket but TCP's and UDP's (MPTCP, SCTP, raw, ICMP), every family but unix, netlink and IP,
//!   `listen` and TCP Fast Open sends fail with `EACCES`, so nothing but UDP gets past Landlock's
//!   TCP rights.
//! - `--pid-namespace` runs the launch in a PID namespace of its own wherever the launcher can
//!   make one (as root, or in a user namespace mapping its own uid): no host process is in sight
//!   in `/proc` or within reach of a signal, `sched_setscheduler`, `setpriority` or `prlimit`.
//!   Where it cannot, the host's processes stay in sight and the guard refuses acting on another
//!   process's scheduling, priority and limits. `--pids private` says the caller already gave the
//!   launch a PID namespace of its own (bwrap's `--unshare-pid`).
//! - `--memory BYTES` limits the data each payload process may map (`RLIMIT_DATA`, soft and hard;
//!   without `CAP_SYS_RESOURCE` the payload cannot raise it): an allocation past it fails with
//!   `ENOMEM`. It bounds each process, not the call's sum.
//! - `--prevent` puts an emulator between the payload and its creates and write-opens (seccomp
//!   user notification): it resolves each path once from the payload's memory and carries the
//!   call out itself, restricted as the payload is, refusing with `EROFS` git's code surface in
//!   every git directory (config, commondir, hooks, HEAD outside its git directory, attributes,
//!   remotes) and the protected paths (`--protected-rel REL` at every `--anchor ROOT` and worktree
//!   top below it, `--protected-name NAME` in every folder). A new `.git`, linked worktree or
//!   submodule git directory is made in the staging directory the caller handed over
//!   (`--stage-fd FD`, an inherited directory descriptor), private to the sandbox, for the caller
//!   to merge after the call; without one it is refused.
//! - `--status-fd FD` writes JSON-lines launch records to FD (close-on-exec): `{"exec": ...}` just
//!   before `execve`, then `{"exec-failed": ...}` if it fails; `{"error": ...}` for any launcher
//!   failure before that. The payload ran exactly when `exec` is present with no failure after it.
//!   Only the payload's process writes records; the monitor closes its copy right after the fork.
//!   The records and their keys are defined once, in [`sandbox::status`], beside the reader that
//!   decides from them whether the payload ran ([`sandbox::StatusFormat::LaunchReport`]).
//! - `--probe` enforces a maximal ruleset (with the scopes a launch would apply) in a short-lived
//!   child working in a fresh private directory, prints one JSON object ([`ProbeReport`]) and exits
//!   0 only when the kernel actually enforced it (and denied a signal to its parent when it reports
//!   signal scoping, and refused to make its directory setgid when it reports the setuid guard).
//!   Enforcement is always `partial`: no Landlock ABI governs metadata, and the report lists what
//!   is ungoverned at the ABI in force.
//!
//! # Process shape
//!
//! The launcher forks once. The parent, the *monitor*, makes itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`) and asks for `SIGTERM` when its own parent thread dies
//! (`PR_SET_PDEATHSIG`; a caller that spawns the launcher from a short-lived thread must keep that
//! thread alive while the launcher runs). The monitor is never restricted, so the payload's
//! Landlock domain can neither ptrace it nor, with scoping, signal it. The child asks for `SIGKILL`
//! when the monitor dies, checks the monitor is still its parent, then, in order: restricts itself
//! with Landlock, drops every capability, marks every descriptor above 2 close-on-exec, writes the
//! `exec` record and execs the payload.
//!
//! When the payload exits, the monitor kills (`SIGKILL`) and reaps every process still below it
//! (orphans, `setsid` and double-forked daemons are reparented to the subreaper) until it has no
//! child left, then mirrors the payload: the same exit code, or death by the same signal. The
//! monitor learns of the payload's end from a pidfd as well as from `SIGCHLD`, because a process
//! of the payload's domain may trace the payload (`PTRACE_SEIZE`), and a tracer gets the exit
//! status first; the clean-up never blocks in `waitpid` (it reaps what is ready, kills every
//! child again and naps a few milliseconds), so killing the tracer releases the traced zombie
//! and the whole clean-up takes milliseconds, well inside the 200 ms a caller waits between its
//! `SIGTERM` and its `SIGKILL`. On
//! `SIGTERM` (and on `SIGINT`, `SIGHUP` and `SIGQUIT` unless the caller left them ignored) the
//! monitor does the same clean-up and dies by that signal. Killing the monitor with `SIGKILL` kills
//! the payload's own process but can leave its descendants alive: stop a launcher with `SIGTERM`.
//!
//! # What reaches the payload
//!
//! - **Capabilities:** none. The bounding set is emptied (every capability number up to the
//!   first the kernel refuses) when the process can (it holds `CAP_SETPCAP`), and the
//!   ambient, inheritable, permitted and effective sets are cleared. A process that holds no
//!   capability (an unprivileged user) has nothing to drop and cannot shrink its bounding set;
//!   `no_new_privs` keeps setuid and file capabilities from granting any. A process holding
//!   capabilities that cannot drop them is a launcher failure.
//! - **Scopes:** with Landlock ABI 6 or newer (and no `--abi-cap` below 6), the payload cannot
//!   signal a process outside its Landlock domain nor connect to an abstract unix socket created
//!   outside it ([`SCOPE_SIGNAL`], [`SCOPE_ABSTRACT_UNIX_SOCKET`]).
//! - **Descriptors:** only stdin, stdout and stderr; every descriptor above 2 is close-on-exec.
//! - **No setuid or setgid bits** (x86_64 and aarch64): Landlock governs no metadata, so a
//!   seccomp filter installed just before exec makes `chmod`, `fchmod`, `fchmodat`, `fchmodat2`,
//!   `open`, `openat`, `creat`, `mknod`, `mknodat`, `mkdir` and `mkdirat` fail with `EPERM` when
//!   their mode has `S_ISUID` or `S_ISGID`; `openat2` and `io_uring_setup` fail with `ENOSYS`
//!   (their modes are out of a filter's sight; callers fall back to `openat`); the x32 ABI fails
//!   with `EPERM` and a foreign architecture (32-bit entry points) kills the process. Other
//!   architectures run without it and `--probe` reports `"setuid_guard":false`.
//! - **No host IPC** (the same seccomp program, x86_64 and aarch64), whatever `--net` says:
//!   `socket(AF_UNIX)` and `socket(AF_VSOCK)` fail with `EPERM` (a unix socket would reach any
//!   host daemon, and seccomp cannot read a `connect` address), so do datagram `socketpair`s
//!   (re-aimable with `sendto`), `add_key`, `request_key` and `keyctl`, and, unless `--ipc
//!   private`, every SysV IPC and POSIX message queue call. Stream and seqpacket `socketpair`s
//!   and pipes work. A FIFO outside the writable set cannot be opened for writing (a Landlock
//!   write). `--probe` checks the unix-socket refusal together with the setgid one.
//!
//! Every launcher failure exits [`FAILURE_EXIT_CODE`] without exec'ing, with a stderr line starting
//! [`DIAGNOSTIC_PREFIX`]. No environment variable changes what the launcher does.

//!
//! # Targets
//!
//! The contract above (this module's constants, [`ProbeReport`], [`net`]'s names) builds on every
//! target, because the provider and the conformance suite read it everywhere. The launcher itself
//! (the monitor, the Landlock ruleset, the seccomp guards, the private mount namespace) is Linux
//! only: on any other target [`run`] prints that and exits [`FAILURE_EXIT_CODE`] without running
//! anything.

use std::process::ExitCode;

use serde::{Deserialize, Serialize};

#[cfg(target_os = "linux")]
mod bpf;
pub mod cli;
#[cfg(target_os = "linux")]
mod emulate;
#[cfg(target_os = "linux")]
mod harden;
#[cfg(target_os = "linux")]
mod init;
#[cfg(target_os = "linux")]
mod launcher;
#[cfg(target_os = "linux")]
mod monitor;
pub mod net;
#[cfg(target_os = "linux")]
mod notify;
#[cfg(target_os = "linux")]
mod probe;
#[cfg(target_os = "linux")]
mod protect;
pub mod staged;
#[cfg(target_os = "linux")]
mod tmp_area;

/// The launcher's entry point (what the `landlock-run` binary runs): reads the process's
/// arguments (after `argv[0]`), launches or probes, and returns the exit status. On a target
/// other than Linux it runs nothing and fails.
pub fn run() -> ExitCode {
    #[cfg(target_os = "linux")]
    {
        launcher::main()
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!(
            "{DIAGNOSTIC_PREFIX}Landlock is Linux-only; this launcher runs nothing on {}",
            std::env::consts::OS
        );
        ExitCode::from(FAILURE_EXIT_CODE as u8)
    }
}

/// Whether this build has the seccomp guard (setuid and setgid bits, nested user namespaces,
/// the host's IPC): x86_64 and aarch64 only.
pub const SETUID_GUARD_SUPPORTED: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// Exit code of every launcher failure; the payload was never exec'd.
pub const FAILURE_EXIT_CODE: i32 = 125;

/// Prefix of every line the launcher itself prints on stderr.
pub const DIAGNOSTIC_PREFIX: &str = "landlock-run: ";

/// The one informational line the launcher prints when the Landlock ABI in force (the kernel's,
/// or an `--abi-cap`) leaves a write ungoverned that a newer ABI governs: truncate below ABI 3,
/// cross-directory rename and link below ABI 2. Benign: it never proves a launcher failure by
/// itself.
///
/// It is not printed for what no ABI governs (metadata: see [`UNGOVERNED_METADATA`]), although
/// `--probe` reports `partial` for that too: a notice for a gap every kernel has would add a
/// line to every payload's stderr on every launch and say nothing the caller can act on (a newer
/// kernel or a higher cap does not close it). The probe report is where enforcement is stated;
/// the notice flags only an ABI that is weaker than it needs to be.
pub const PARTIAL_NOTICE: &str = "landlock-run: notice: partial enforcement: this kernel's Landlock ABI cannot govern every file effect";

/// The lowest Landlock ABI that governs every write Landlock can govern (ABI 3 adds truncate;
/// ABI 2 adds cross-directory rename and link). Below it the launcher prints [`PARTIAL_NOTICE`].
/// Metadata stays ungoverned at every ABI, so even this ABI is `partial` enforcement.
pub const FULL_ENFORCEMENT_ABI: u32 = 3;

/// Ungoverned at every ABI: metadata changes (`chmod` without the setuid and setgid bits, `chown`
/// to the same owner, `utimes`, extended attributes) on any file the payload can reach.
pub use sandbox::gaps::METADATA as UNGOVERNED_METADATA;

/// Ungoverned below ABI 3: `truncate(2)` and `O_TRUNC` outside the writable set.
pub use sandbox::gaps::TRUNCATE as UNGOVERNED_TRUNCATE;

/// Ungoverned below ABI 2: renaming a file into another directory (`LANDLOCK_ACCESS_FS_REFER`).
pub use sandbox::gaps::RENAME_ACROSS_DIRS as UNGOVERNED_RENAME_ACROSS_DIRS;

/// Ungoverned below ABI 2: hard-linking a file into another directory.
pub use sandbox::gaps::LINK_ACROSS_DIRS as UNGOVERNED_LINK_ACROSS_DIRS;

/// What is not governed at Landlock ABI `abi`, in a fixed order: [`UNGOVERNED_METADATA`] always,
/// [`UNGOVERNED_TRUNCATE`] below 3, [`UNGOVERNED_RENAME_ACROSS_DIRS`] and
/// [`UNGOVERNED_LINK_ACROSS_DIRS`] below 2.
pub fn ungoverned_at(abi: u32) -> Vec<&'static str> {
    let mut gaps = vec![UNGOVERNED_METADATA];
    if abi < 3 {
        gaps.push(UNGOVERNED_TRUNCATE);
    }
    if abi < 2 {
        gaps.extend([UNGOVERNED_RENAME_ACROSS_DIRS, UNGOVERNED_LINK_ACROSS_DIRS]);
    }
    gaps
}

/// The launcher flag that skips its seccomp guard (setuid bits, user namespaces, host IPC): for
/// `sandbox-bench` alone, to measure what the guard costs. Never emitted by a profile.
pub const BENCH_UNGUARDED_FLAG: &str = "--bench-unguarded";

/// The lowest Landlock ABI that scopes signals and abstract unix sockets.
pub const SCOPING_ABI: u32 = 6;

/// The scope name for "the payload cannot signal a process outside its domain".
pub const SCOPE_SIGNAL: &str = "signal";

/// The scope name for "the payload cannot connect to an abstract unix socket created outside".
pub const SCOPE_ABSTRACT_UNIX_SOCKET: &str = "abstract-unix-socket";

/// How much of what the modes promise the launcher governs, as `--probe` states it: the one
/// enforcement fact every backend reports.
pub use sandbox::SandboxEnforcement as Enforcement;

/// What `--probe` prints on stdout, as one JSON object:
///
/// ```text
/// {"usable":true,"enforcement":"partial","abi":3,"kernel_abi":7,"reason":null,
///  "scoped":["signal","abstract-unix-socket"],"ungoverned":["metadata"],"setuid_guard":true}
/// ```
///
/// `enforcement` is `partial` whenever `ungoverned` is not empty, which with Landlock is always
/// (no ABI governs metadata). [`ProbeReport::parse`] accepts reports that predate `ungoverned`
/// and `setuid_guard` (empty and `false`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The kernel enforced a maximal ruleset in a child.
    pub usable: bool,
    /// `full` or `partial` (meaningful when usable): `partial` when anything promised is
    /// ungoverned (see `ungoverned`).
    pub enforcement: Enforcement,
    /// The ABI the launcher enforces with (the kernel's, lowered by `--abi-cap` and by what the
    /// modes need).
    pub abi: u32,
    /// The running kernel's Landlock ABI (0 when Landlock is unavailable).
    pub kernel_abi: u32,
    /// Why it is not usable, when it is not.
    pub reason: Option<String>,
    /// The Landlock scopes a launch applies ([`SCOPE_SIGNAL`], [`SCOPE_ABSTRACT_UNIX_SOCKET`]);
    /// empty below ABI 6, when capped below 6, and in reports that predate the field.
    #[serde(default)]
    pub scoped: Vec<String>,
    /// What is not governed at `abi` ([`ungoverned_at`]): [`UNGOVERNED_METADATA`],
    /// [`UNGOVERNED_TRUNCATE`], [`UNGOVERNED_RENAME_ACROSS_DIRS`], [`UNGOVERNED_LINK_ACROSS_DIRS`];
    /// empty in reports that predate the field.
    #[serde(default)]
    pub ungoverned: Vec<String>,
    /// The payload cannot set the setuid or setgid bit (the seccomp guard, x86_64 and aarch64),
    /// as the probe child proved; `false` in reports that predate the field.
    #[serde(default)]
    pub setuid_guard: bool,
    /// What of the network a `--net restricted` launch governs here ([`net::governed`]:
    /// [`net::TCP`], [`net::ABSTRACT_UNIX_SOCKETS`]); empty in reports that predate the field.
    #[serde(default)]
    pub network: Vec<String>,
    /// A launch can keep `--protect` paths read-only here (a private mount namespace is allowed:
    /// root, or unprivileged user namespaces); `false` in reports that predate the field.
    #[serde(default)]
    pub protect: bool,
}

impl ProbeReport {
    /// The JSON line.
    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and lists always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses the JSON line printed by `--probe`.
    pub fn parse(line: &str) -> Option<ProbeReport> {
        serde_json::from_str(line.trim()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_round_trips_and_an_older_report_parses_without_the_newer_fields() {
        let report = ProbeReport {
            usable: true,
            enforcement: Enforcement::Partial,
            abi: 3,
            kernel_abi: 7,
            reason: None,
            scoped: vec![SCOPE_SIGNAL.into(), SCOPE_ABSTRACT_UNIX_SOCKET.into()],
            ungoverned: vec![UNGOVERNED_METADATA.into()],
            setuid_guard: true,
            network: vec![net::TCP.into(), net::ABSTRACT_UNIX_SOCKETS.into()],
            protect: true,
        };
        assert_eq!(ProbeReport::parse(&report.to_json()), Some(report));
        let old = r#"{"usable":true,"enforcement":"partial","abi":1,"kernel_abi":7,"reason":null}"#;
        let parsed = ProbeReport::parse(old).expect("old report");
        assert!(parsed.scoped.is_empty() && parsed.ungoverned.is_empty());
        assert!(parsed.network.is_empty());
        assert!(!parsed.setuid_guard);
        assert_eq!((parsed.enforcement, parsed.abi), (Enforcement::Partial, 1));
        let scoped = r#"{"usable":true,"enforcement":"full","abi":3,"kernel_abi":7,"reason":null,"scoped":["signal"]}"#;
        let parsed = ProbeReport::parse(scoped).expect("report with scopes only");
        assert_eq!(
            (parsed.enforcement, parsed.scoped.len()),
            (Enforcement::Full, 1)
        );
        // An enforcement the launcher never says is not read as either.
        assert!(
            ProbeReport::parse(r#"{"usable":true,"enforcement":"fulll","abi":3,"kernel_abi":7}"#)
                .is_none()
        );
        for bad in [
            r#"{"usable":true,"enforcement":"full","abi":3,"kernel_abi":7,"scoped":[1]}"#,
            r#"{"usable":true,"enforcement":"partial","abi":3,"kernel_abi":7,"ungoverned":"metadata"}"#,
            r#"{"usable":true,"enforcement":"partial","abi":3,"kernel_abi":7,"setuid_guard":"yes"}"#,
        ] {
            assert_eq!(ProbeReport::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn metadata_is_ungoverned_at_every_abi_and_older_abis_leave_more() {
        assert_eq!(ungoverned_at(7), [UNGOVERNED_METADATA]);
        assert_eq!(ungoverned_at(3), [UNGOVERNED_METADATA]);
        assert_eq!(ungoverned_at(2), [UNGOVERNED_METADATA, UNGOVERNED_TRUNCATE]);
        assert_eq!(
            ungoverned_at(1),
            [
                UNGOVERNED_METADATA,
                UNGOVERNED_TRUNCATE,
                UNGOVERNED_RENAME_ACROSS_DIRS,
                UNGOVERNED_LINK_ACROSS_DIRS
            ]
        );
    }
}
