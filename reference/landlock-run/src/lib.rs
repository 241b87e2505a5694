//! The launcher's command-line contract, shared by the launcher binary and the provider that maps
//! sandbox modes onto its flags. The strings here are what the provider's runner-failure dialect
//! matches, so they live once, next to the program that prints them.
//!
//! ```text
//! landlock-run [--abi-cap N] [--status-fd FD] (--ro PATH | --rw PATH)... -- PROGRAM [ARGS...]
//! landlock-run --probe [--abi-cap N]
//! ```
//!
//! - `--ro PATH` grants reading beneath PATH (reads are not restricted at all today; the flag keeps
//!   profiles explicit), `--rw PATH` grants every governed write beneath PATH (or to the file).
//! - `--abi-cap N` uses at most Landlock ABI N. It can only weaken the launcher, which then reports
//!   `partial` when the capped ABI cannot govern every promised file effect, and does not scope
//!   signals or abstract unix sockets below ABI 6.
//! - `--status-fd FD` writes JSON-lines launch records to FD (close-on-exec): `{"exec": ...}` just
//!   before `execve`, then `{"exec-failed": ...}` if it fails; `{"error": ...}` for any launcher
//!   failure before that. The payload ran exactly when `exec` is present with no failure after it.
//!   Only the payload's process writes records; the monitor closes its copy right after the fork.
//! - `--probe` enforces a maximal ruleset (with the scopes a launch would apply) in a short-lived
//!   child working in a fresh private directory, prints one JSON object ([`ProbeReport`]) and exits
//!   0 only when the kernel actually enforced it (and denied a signal to its parent when it reports
//!   signal scoping).
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
//! child left, then mirrors the payload: the same exit code, or death by the same signal. On
//! `SIGTERM` (and on `SIGINT`, `SIGHUP` and `SIGQUIT` unless the caller left them ignored) the
//! monitor does the same clean-up and dies by that signal. Killing the monitor with `SIGKILL` kills
//! the payload's own process but can leave its descendants alive: stop a launcher with `SIGTERM`.
//!
//! # What reaches the payload
//!
//! - **Capabilities:** none. The bounding set is emptied (every capability up to
//!   `/proc/sys/kernel/cap_last_cap`) when the process can (it holds `CAP_SETPCAP`), and the
//!   ambient, inheritable, permitted and effective sets are cleared. A process that holds no
//!   capability (an unprivileged user) has nothing to drop and cannot shrink its bounding set;
//!   `no_new_privs` keeps setuid and file capabilities from granting any. A process holding
//!   capabilities that cannot drop them is a launcher failure.
//! - **Scopes:** with Landlock ABI 6 or newer (and no `--abi-cap` below 6), the payload cannot
//!   signal a process outside its Landlock domain nor connect to an abstract unix socket created
//!   outside it ([`SCOPE_SIGNAL`], [`SCOPE_ABSTRACT_UNIX_SOCKET`]).
//! - **Descriptors:** only stdin, stdout and stderr; every descriptor above 2 is close-on-exec.
//!
//! Every launcher failure exits [`FAILURE_EXIT_CODE`] without exec'ing, with a stderr line starting
//! [`DIAGNOSTIC_PREFIX`]. No environment variable changes what the launcher does.

use serde_json::json;

/// Exit code of every launcher failure; the payload was never exec'd.
pub const FAILURE_EXIT_CODE: i32 = 125;

/// Prefix of every line the launcher itself prints on stderr.
pub const DIAGNOSTIC_PREFIX: &str = "landlock-run: ";

/// The one informational line the launcher prints when the kernel's Landlock ABI cannot govern
/// every promised file effect. Benign: it never proves a launcher failure by itself.
pub const PARTIAL_NOTICE: &str = "landlock-run: notice: partial enforcement: this kernel's Landlock ABI cannot govern every file effect";

/// The lowest Landlock ABI that governs every file effect the sandbox modes promise (ABI 3 adds
/// truncate; ABI 2 adds cross-directory rename and link).
pub const FULL_ENFORCEMENT_ABI: u32 = 3;

/// The lowest Landlock ABI that scopes signals and abstract unix sockets.
pub const SCOPING_ABI: u32 = 6;

/// The scope name for "the payload cannot signal a process outside its domain".
pub const SCOPE_SIGNAL: &str = "signal";

/// The scope name for "the payload cannot connect to an abstract unix socket created outside".
pub const SCOPE_ABSTRACT_UNIX_SOCKET: &str = "abstract-unix-socket";

/// What `--probe` prints on stdout, as one JSON object:
/// `{"usable":true,"enforcement":"full","abi":3,"kernel_abi":7,"reason":null,"scoped":["signal","abstract-unix-socket"]}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// The kernel enforced a maximal ruleset in a child.
    pub usable: bool,
    /// `full` or `partial` (meaningful when usable).
    pub enforcement: &'static str,
    /// The ABI the launcher enforces with (the kernel's, lowered by `--abi-cap` and by what the
    /// modes need).
    pub abi: u32,
    /// The running kernel's Landlock ABI (0 when Landlock is unavailable).
    pub kernel_abi: u32,
    /// Why it is not usable, when it is not.
    pub reason: Option<String>,
    /// The Landlock scopes a launch applies ([`SCOPE_SIGNAL`], [`SCOPE_ABSTRACT_UNIX_SOCKET`]);
    /// empty below ABI 6, when capped below 6, and in reports that predate the field.
    pub scoped: Vec<String>,
}

impl ProbeReport {
    /// The JSON line.
    pub fn to_json(&self) -> String {
        json!({
            "usable": self.usable,
            "enforcement": self.enforcement,
            "abi": self.abi,
            "kernel_abi": self.kernel_abi,
            "reason": self.reason,
            "scoped": self.scoped,
        })
        .to_string()
    }

    /// Parses the JSON line printed by `--probe`.
    pub fn parse(line: &str) -> Option<ProbeReport> {
        let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
        let scoped = match v.get("scoped") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(list) => list
                .as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()?,
        };
        Some(ProbeReport {
            usable: v.get("usable")?.as_bool()?,
            enforcement: match v.get("enforcement")?.as_str()? {
                "full" => "full",
                _ => "partial",
            },
            abi: u32::try_from(v.get("abi")?.as_u64()?).ok()?,
            kernel_abi: u32::try_from(v.get("kernel_abi")?.as_u64()?).ok()?,
            reason: v.get("reason").and_then(|r| r.as_str()).map(str::to_owned),
            scoped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_round_trips_and_an_older_report_parses_without_scopes() {
        let report = ProbeReport {
            usable: true,
            enforcement: "full",
            abi: 3,
            kernel_abi: 7,
            reason: None,
            scoped: vec![SCOPE_SIGNAL.into(), SCOPE_ABSTRACT_UNIX_SOCKET.into()],
        };
        assert_eq!(ProbeReport::parse(&report.to_json()), Some(report));
        let old = r#"{"usable":true,"enforcement":"partial","abi":1,"kernel_abi":7,"reason":null}"#;
        let parsed = ProbeReport::parse(old).expect("old report");
        assert!(parsed.scoped.is_empty());
        assert_eq!((parsed.enforcement, parsed.abi), ("partial", 1));
        assert_eq!(
            ProbeReport::parse(
                r#"{"usable":true,"enforcement":"full","abi":3,"kernel_abi":7,"scoped":[1]}"#
            ),
            None
        );
    }
}
