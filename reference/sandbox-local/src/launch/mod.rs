//! Spawns a confined launch directly (no outer shell), wires its status channel to the fd the
//! runner expects, collects its output, and classifies the result with the one classifier.
//!
//! Output is capped: at most [`LaunchOptions::output_cap`] bytes of each stream are kept (its
//! head), the rest is read and counted ([`Finished::dropped`]) so memory never grows with what
//! the payload prints. The head is what is kept because a runner's own words come first (a
//! runner that failed never ran the payload, so they are all there is) and because the start of
//! an output is a fact no later flood can push out of view. A denial is never hidden by the cap:
//! the dropped part of stderr is scanned as it streams by for the launch's denial signatures,
//! and the first line carrying one (cut to [`EVIDENCE_MAX`] bytes around the signature) is
//! handed to the classifier after the kept head.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use sandbox::{Classification, ConfinedArgv, PayloadStatus, ProcessOutcome, classify};

mod capture;
mod spawn;
mod tree;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod vfork;

use capture::{Capture, DenialScan, drain, read_ready, with_evidence};
pub use spawn::workdir_usable;
use spawn::{Runner, spawn_failure, start};
use tree::Tree;

/// How to run a confined launch.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    /// Working directory of the payload.
    pub cwd: PathBuf,
    /// Extra environment variables (the rest is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Inherited environment variables to remove.
    pub env_remove: Vec<OsString>,
    /// Kill the whole process group after this long.
    pub timeout: Option<Duration>,
    /// Kill the whole process group as soon as this is set (cancellation).
    pub cancel: Option<Arc<AtomicBool>>,
    /// The most bytes kept of each stream (stdout, stderr); the rest is counted in
    /// [`Finished::dropped`]. Default [`DEFAULT_OUTPUT_CAP`].
    pub output_cap: usize,
}

/// The default [`LaunchOptions::output_cap`]: 4 MiB of each stream.
pub const DEFAULT_OUTPUT_CAP: usize = 4 * 1024 * 1024;

/// The longest denial line handed to the classifier from the dropped part of stderr.
pub const EVIDENCE_MAX: usize = 4096;

/// How many bytes of each stream were read and not kept (beyond the output cap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Dropped {
    /// Bytes of stdout not kept.
    pub stdout: u64,
    /// Bytes of stderr not kept.
    pub stderr: u64,
}

/// The code of an output cap that is not a size.
pub const OUTPUT_CAP_NOT_A_SIZE: &str = "OUTPUT_CAP_NOT_A_SIZE";

/// An output cap that is not a size.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{OUTPUT_CAP_NOT_A_SIZE}: {0:?} is not a size (a number of bytes, optionally followed by KiB, MiB or GiB: 4096, 512KiB, 5MiB)"
)]
pub struct SizeError(pub String);

/// Parses an output cap: a whole number of bytes, optionally followed by `B`, `K`/`KiB`,
/// `M`/`MiB` or `G`/`GiB` (powers of 1024; case-insensitive, spaces between allowed).
/// Anything else (`lots`, `-1`, `1.5MiB`, a size beyond this machine's address space) is an
/// error.
pub fn parse_size(text: &str) -> Result<usize, SizeError> {
    let bad = || SizeError(text.to_owned());
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    if digits.is_empty() {
        return Err(bad());
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err(bad()),
    };
    let number: usize = digits.parse().map_err(|_| bad())?;
    number.checked_mul(1usize << shift).ok_or_else(bad)
}

impl Dropped {
    /// True when anything was dropped.
    pub fn any(&self) -> bool {
        self.stdout > 0 || self.stderr > 0
    }
}

impl LaunchOptions {
    /// Run in `cwd` with the inherited environment and no timeout.
    pub fn in_dir(cwd: impl Into<PathBuf>) -> Self {
        LaunchOptions {
            cwd: cwd.into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            timeout: None,
            cancel: None,
            output_cap: DEFAULT_OUTPUT_CAP,
        }
    }
}

/// A finished launch and its verdict.
#[derive(Clone, Debug)]
pub struct Finished {
    /// How the process ended.
    pub outcome: ProcessOutcome,
    /// What the status channel said, when the launch has one.
    pub status: Option<PayloadStatus>,
    /// The classifier's verdict.
    pub classification: Classification,
    /// What was kept of stdout: its first [`LaunchOptions::output_cap`] bytes.
    pub stdout: Vec<u8>,
    /// What was kept of stderr: its first [`LaunchOptions::output_cap`] bytes.
    pub stderr: Vec<u8>,
    /// How much of each stream was read beyond the cap and not kept.
    pub dropped: Dropped,
    /// The timeout killed it.
    pub timed_out: bool,
    /// Cancellation killed it.
    pub cancelled: bool,
    /// Every process the launch started is known to be gone: the runner reaped its whole tree
    /// (the Landlock launcher's monitor exited by itself), or bwrap's PID namespace is empty
    /// (its init's pidfd became readable). False when that could not be confirmed within the
    /// bounds (an operator runner, Seatbelt or an unconfined launch, whose process group alone was killed,
    /// or a runner that had to be killed before it finished).
    pub tree_reaped: bool,
}

impl Finished {
    /// The exit code, when the process exited normally.
    pub fn exit_code(&self) -> Option<i32> {
        match self.outcome {
            ProcessOutcome::Exited { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// [`run`], then settles `guard` (the provider's check around the call, taken before it started)
/// before the result is returned: each change it reverted is a denial, its line (which carries the
/// marker) appended to stderr. The one home every caller of a provider's launch goes through.
pub fn run_guarded(
    launch: &ConfinedArgv,
    options: &LaunchOptions,
    guard: Option<Box<dyn sandbox::CallGuard>>,
) -> Finished {
    let mut done = run(launch, options);
    if let Some(guard) = guard {
        deny_with(&mut done, &guard.settle());
    }
    done
}

/// Appends each line (each carries the marker) to `done`'s stderr and makes the call a denial,
/// unless the payload never ran.
fn deny_with(done: &mut Finished, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    for line in lines {
        if !done.stderr.is_empty() && !done.stderr.ends_with(b"\n") {
            done.stderr.push(b'\n');
        }
        done.stderr.extend_from_slice(line.as_bytes());
        done.stderr.push(b'\n');
    }
    // A runner failure stays one (the payload never ran); anything else is a denial.
    if !matches!(
        done.classification,
        Classification::RunnerFailure { .. } | Classification::StartFailed { .. }
    ) {
        done.classification = Classification::Denied {
            line: lines[0].clone(),
        };
    }
}

/// How many times a launch is started when its runner failed only because a mount below `/`
/// vanished while bwrap remounted the tree read-only (another process unmounting meanwhile).
const VANISHED_MOUNT_TRIES: usize = 3;

/// Runs `launch` to completion and classifies it. A launch whose runner failed before the
/// payload ran (its status channel says so) only because a mount below `/` vanished meanwhile is
/// started again, at most three times in all: that failure says nothing about
/// the sandbox, and nothing of the payload has run.
pub fn run(launch: &ConfinedArgv, options: &LaunchOptions) -> Finished {
    let mut tries = 0;
    let mut done = loop {
        let done = run_once(launch, options);
        tries += 1;
        if tries >= VANISHED_MOUNT_TRIES || !never_ran_for_a_vanished_mount(&done) {
            break done;
        }
    };
    // The git directories the launcher staged go into place, judged, once every process of the
    // call is gone (before a caller's guard judges the whole).
    if let Some(s) = launch.fds.staging() {
        let lines = crate::stage::merge(&s.dir, &s.roots, sandbox::SandboxMode::WorkspaceWrite);
        deny_with(&mut done, &lines);
    }
    done
}

/// True when `done` is a runner failure before the payload ran (proved by the status channel),
/// neither timed out nor cancelled, in bwrap's words for a mount that vanished under it.
fn never_ran_for_a_vanished_mount(done: &Finished) -> bool {
    matches!(done.status, Some(PayloadStatus::NeverRan { .. }))
        && matches!(done.classification, Classification::RunnerFailure { .. })
        && !done.timed_out
        && !done.cancelled
        && crate::probe::is_vanished_mount(&String::from_utf8_lossy(&done.stderr))
}

/// One launch of `launch`, run to completion and classified.
fn run_once(launch: &ConfinedArgv, options: &LaunchOptions) -> Finished {
    let finished = |outcome: ProcessOutcome,
                    status: Option<PayloadStatus>,
                    stdout: Vec<u8>,
                    (dropped, evidence): (Dropped, Option<Vec<u8>>),
                    (timed_out, cancelled): (bool, bool),
                    tree_reaped: bool| {
        let classification = match evidence {
            // The classifier sees the kept head, then the denial line found in what was dropped.
            Some(line) => classify(launch, &with_evidence(&outcome, &line), status.as_ref()),
            None => classify(launch, &outcome, status.as_ref()),
        };
        let stderr = match &outcome {
            ProcessOutcome::Exited { stderr, .. } | ProcessOutcome::Signaled { stderr, .. } => {
                stderr.clone()
            }
            ProcessOutcome::SpawnFailed(_) => Vec::new(),
        };
        Finished {
            outcome,
            status,
            classification,
            stdout,
            stderr,
            dropped,
            timed_out,
            cancelled,
            tree_reaped,
        }
    };
    let (mut child, status_reader) = match start(launch, options) {
        Ok(spawned) => spawned,
        Err(e) => {
            let failure = spawn_failure(launch, options, &e);
            return finished(
                ProcessOutcome::SpawnFailed(failure),
                None,
                Vec::new(),
                (Dropped::default(), None),
                (false, false),
                true,
            );
        }
    };
    let captures = [
        Capture::new(options.output_cap, None),
        Capture::new(
            options.output_cap,
            Some(DenialScan::new(&launch.denial_signatures)),
        ),
    ];
    let mut tree = Tree::new(
        launch,
        status_reader.as_ref().map(|(fd, format)| (fd, *format)),
    );
    let (exit, stdout, stderr, stop) = supervise(
        &mut child,
        options.timeout,
        options.cancel.as_deref(),
        captures,
        &mut tree,
    );
    let dropped = Dropped {
        stdout: stdout.dropped,
        stderr: stderr.dropped,
    };
    let evidence = stderr.evidence();
    let (stdout, stderr) = (stdout.kept, stderr.kept);
    let tree_reaped = tree.settle();
    let early = std::mem::take(&mut tree.early);
    drop(tree);
    let status = status_reader.map(|(fd, format)| {
        let mut bytes = early;
        bytes.extend(drain(fd));
        format.parse(&bytes)
    });
    let outcome = match exit {
        Some(s) => outcome_of(s, stderr),
        None => ProcessOutcome::Signaled {
            signal: Signal::SIGKILL as i32,
            stderr,
        },
    };
    finished(
        outcome,
        status,
        stdout,
        (dropped, evidence),
        (stop == Stop::Deadline, stop == Stop::Cancelled),
        tree_reaped,
    )
}

/// Why the supervisor killed the payload, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// It ended by itself.
    No,
    /// The deadline passed.
    Deadline,
    /// It was cancelled.
    Cancelled,
}

fn outcome_of(status: ExitStatus, stderr: Vec<u8>) -> ProcessOutcome {
    match (status.code(), status.signal()) {
        (Some(code), _) => ProcessOutcome::Exited { code, stderr },
        (None, Some(signal)) => ProcessOutcome::Signaled { signal, stderr },
        (None, None) => ProcessOutcome::Signaled { signal: 0, stderr },
    }
}

/// How long to keep reading after the payload exited, when something it left behind outside its
/// process group (a `setsid` daemon) still holds its output open.
const LEFTOVER_GRACE: Duration = Duration::from_millis(500);

/// The longest wait between checks on the payload while its output is still open.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// Collects stdout and stderr on this thread (one `poll` loop, no reader threads) until the
/// payload exited and its output closed. When the payload exits, or the deadline passes, its whole
/// process group is killed while the leader is still unreaped, so the group id cannot have been
/// reused by then.
fn supervise(
    child: &mut Runner,
    timeout: Option<Duration>,
    cancel: Option<&AtomicBool>,
    captures: [Capture; 2],
    tree: &mut Tree,
) -> (Option<ExitStatus>, Capture, Capture, Stop) {
    let group = Pid::from_raw(child.id() as i32);
    let [out, err] = captures;
    let [stdout, stderr] = child.take_output();
    let mut pipes: [(Option<OwnedFd>, Capture); 2] = [(stdout, out), (stderr, err)];
    for (fd, _) in &pipes {
        if let Some(fd) = fd {
            let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
        }
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut stop = Stop::No;
    let mut exited_at: Option<Instant> = None;
    let mut stopped_at: Option<Instant> = None;
    loop {
        tree.watch();
        if exited_at.is_none() && leader_exited(child) {
            let _ = killpg(group, Signal::SIGKILL);
            exited_at = Some(Instant::now());
            tree.ending(group);
            tree.kill_init();
        }
        if exited_at.is_none() && stop == Stop::No {
            if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
                stop = Stop::Cancelled;
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                stop = Stop::Deadline;
            }
            if stop != Stop::No {
                // SIGTERM first: a runner that reaps what its payload started (the Landlock
                // launcher's monitor) kills the whole tree, `setsid` daemons included, before it
                // exits; SIGKILL follows after its grace, or at once when it exits. bwrap's
                // namespace is found first, so its end can be waited for.
                tree.ending(group);
                let _ = killpg(group, Signal::SIGTERM);
                tree.kill_init();
                stopped_at = Some(Instant::now());
            }
        }
        if exited_at.is_none() && stopped_at.is_some_and(|at| at.elapsed() >= tree.grace()) {
            let _ = killpg(group, Signal::SIGKILL);
            tree.forced = true;
            stopped_at = None;
        }
        let timed_out = stop != Stop::No;
        let open = pipes.iter().any(|(fd, _)| fd.is_some());
        match exited_at {
            Some(_) if !open => break,
            Some(at) if at.elapsed() >= LEFTOVER_GRACE => break,
            _ => {}
        }
        if !open {
            // Output closed, payload still running: wait for it (bounded by the deadline).
            match deadline {
                None if !timed_out => {
                    let _ = child.wait();
                }
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
            continue;
        }
        let slice = deadline
            .filter(|_| !timed_out)
            .map(|d| d.saturating_duration_since(Instant::now()).min(POLL_SLICE))
            .unwrap_or(POLL_SLICE);
        read_ready(&mut pipes, slice);
    }
    let [(_, stdout), (_, stderr)] = pipes;
    (child.wait().ok(), stdout, stderr, stop)
}

/// True once the payload has exited. On Linux the leader is left unreaped (`WNOWAIT`) so its
/// process group id stays reserved until the group is killed; elsewhere it is reaped here.
fn leader_exited(child: &mut Runner) -> bool {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(Pid::from_raw(child.id() as i32)), flags) {
            Ok(WaitStatus::StillAlive) => false,
            Ok(_) => true,
            Err(_) => child.try_wait().map(|s| s.is_some()).unwrap_or(true),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        child.try_wait().map(|s| s.is_some()).unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox::Evidence;

    const VANISHED: &str = "bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount \"/newroot/var/tmp/w/dir\": No such file or directory";

    fn failed(status: Option<PayloadStatus>, stderr: &str) -> Finished {
        Finished {
            outcome: ProcessOutcome::Exited {
                code: 1,
                stderr: stderr.into(),
            },
            status,
            classification: Classification::RunnerFailure {
                evidence: Evidence::StatusChannel,
                detail: stderr.into(),
            },
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
            dropped: Dropped::default(),
            timed_out: false,
            cancelled: false,
            tree_reaped: true,
        }
    }

    #[test]
    fn only_a_launch_that_never_ran_for_a_vanished_mount_is_started_again() {
        let never = || Some(PayloadStatus::NeverRan { detail: None });
        assert!(never_ran_for_a_vanished_mount(&failed(never(), VANISHED)));
        // The payload ran (or nothing proves it did not): never started twice.
        let ran = Some(PayloadStatus::Ran { exit_code: Some(1) });
        assert!(!never_ran_for_a_vanished_mount(&failed(ran, VANISHED)));
        assert!(!never_ran_for_a_vanished_mount(&failed(None, VANISHED)));
        // Another runner failure, or a call stopped by its caller.
        assert!(!never_ran_for_a_vanished_mount(&failed(
            never(),
            "bwrap: No permissions to create new namespace"
        )));
        let mut timed_out = failed(never(), VANISHED);
        timed_out.timed_out = true;
        assert!(!never_ran_for_a_vanished_mount(&timed_out));
        let mut denied = failed(never(), VANISHED);
        denied.classification = Classification::Denied {
            line: VANISHED.into(),
        };
        assert!(!never_ran_for_a_vanished_mount(&denied));
    }
}
