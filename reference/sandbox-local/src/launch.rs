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
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use sandbox::{
    Classification, ConfinedArgv, PayloadStatus, ProcessOutcome, SpawnErrorKind, SpawnFailure,
    classify,
};

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
    let spawned = prepare(launch, options).and_then(|(mut cmd, status)| {
        let child = cmd.spawn();
        // The status pipe's write end lives in `cmd`; drop it so only the child holds it.
        drop(cmd);
        child.map(|c| (c, status))
    });
    let (mut child, status_reader) = match spawned {
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

/// `outcome` with `line` appended to its stderr as a line of its own (what the classifier reads
/// when the denial line lies in the dropped part).
fn with_evidence(outcome: &ProcessOutcome, line: &[u8]) -> ProcessOutcome {
    let joined = |stderr: &Vec<u8>| {
        let mut all = Vec::with_capacity(stderr.len() + line.len() + 1);
        all.extend_from_slice(stderr);
        all.push(b'\n');
        all.extend_from_slice(line);
        all
    };
    match outcome {
        ProcessOutcome::Exited { code, stderr } => ProcessOutcome::Exited {
            code: *code,
            stderr: joined(stderr),
        },
        ProcessOutcome::Signaled { signal, stderr } => ProcessOutcome::Signaled {
            signal: *signal,
            stderr: joined(stderr),
        },
        ProcessOutcome::SpawnFailed(f) => ProcessOutcome::SpawnFailed(f.clone()),
    }
}

/// What is kept of one stream: its head up to the cap, and how many bytes were dropped after it.
struct Capture {
    kept: Vec<u8>,
    cap: usize,
    dropped: u64,
    scan: Option<DenialScan>,
}

impl Capture {
    fn new(cap: usize, scan: Option<DenialScan>) -> Capture {
        Capture {
            kept: Vec::new(),
            cap,
            dropped: 0,
            scan,
        }
    }

    /// Keeps what fits under the cap; counts (and scans) the rest.
    fn push(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len()).min(bytes.len());
        let (keep, rest) = bytes.split_at(room);
        self.kept.extend_from_slice(keep);
        if rest.is_empty() {
            return;
        }
        if let Some(scan) = &mut self.scan {
            if self.dropped == 0 {
                // The first dropped bytes continue the last kept line.
                let start = self
                    .kept
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                scan.seed(&self.kept[start..]);
            }
            scan.feed(rest);
        }
        self.dropped += rest.len() as u64;
    }

    /// The denial line found in the dropped part, if any.
    fn evidence(&self) -> Option<Vec<u8>> {
        self.scan.as_ref().and_then(|s| s.found.clone())
    }
}

/// Looks for the first line of the dropped part of stderr that carries a denial signature
/// (ASCII case-insensitive, as the classifier folds the ASCII signatures it is given), keeping
/// only the current line's last bytes: bounded memory, whatever the payload prints. Signatures
/// hold no newline, so a match in the stream always lies within one line.
struct DenialScan {
    /// The signatures, ASCII-lowercased; empty ones never match.
    signatures: Vec<Vec<u8>>,
    /// The longest signature.
    reach: usize,
    /// The current line's last bytes before the next chunk (at most `EVIDENCE_MAX`).
    tail: Vec<u8>,
    /// Scratch: `tail` followed by the chunk being scanned.
    window: Vec<u8>,
    /// The evidence line once a signature was seen.
    found: Option<Vec<u8>>,
    /// The evidence line is complete (its newline came, or it is `EVIDENCE_MAX` long).
    complete: bool,
}

impl DenialScan {
    fn new(signatures: &[String]) -> DenialScan {
        let signatures: Vec<Vec<u8>> = signatures
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.as_bytes().to_ascii_lowercase())
            .collect();
        DenialScan {
            reach: signatures.iter().map(Vec::len).max().unwrap_or(0),
            signatures,
            tail: Vec::new(),
            window: Vec::new(),
            found: None,
            complete: false,
        }
    }

    /// The start of the current line (kept bytes the dropped ones continue).
    fn seed(&mut self, line: &[u8]) {
        let from = line.len().saturating_sub(EVIDENCE_MAX);
        self.tail = line[from..].to_vec();
    }

    fn feed(&mut self, bytes: &[u8]) {
        if self.signatures.is_empty() || self.complete {
            return;
        }
        if let Some(found) = &mut self.found {
            // The rest of the evidence line, up to its newline or the bound.
            let end = bytes.iter().position(|b| *b == b'\n');
            let piece = &bytes[..end.unwrap_or(bytes.len())];
            let room = EVIDENCE_MAX.saturating_sub(found.len()).min(piece.len());
            found.extend_from_slice(&piece[..room]);
            self.complete = end.is_some() || found.len() >= EVIDENCE_MAX;
            return;
        }
        let mut window = std::mem::take(&mut self.window);
        window.clear();
        window.extend_from_slice(&self.tail);
        window.extend_from_slice(bytes);
        // Only a match that ends in the new bytes is new.
        let from = self.tail.len().saturating_sub(self.reach.saturating_sub(1));
        let hit = self
            .signatures
            .iter()
            .filter_map(|sig| find_ignoring_ascii_case(&window[from..], sig))
            .min()
            .map(|at| at + from);
        if let Some(at) = hit {
            let line_start = window[..at]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            let start = line_start.max(at.saturating_sub(EVIDENCE_MAX / 2));
            let newline = window[at..]
                .iter()
                .position(|b| *b == b'\n')
                .map(|i| at + i);
            let end = newline.unwrap_or(window.len()).min(start + EVIDENCE_MAX);
            let evidence = window[start..end].to_vec();
            self.complete = newline.is_some() || evidence.len() >= EVIDENCE_MAX;
            self.found = Some(evidence);
            self.tail = Vec::new();
        } else {
            // Keep the current line's last bytes for a match that straddles the next chunk.
            let line_start = window
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            let keep_from = line_start.max(window.len().saturating_sub(EVIDENCE_MAX));
            self.tail.clear();
            self.tail.extend_from_slice(&window[keep_from..]);
        }
        self.window = window;
    }
}

/// The first position of `needle` (ASCII-lowercased) in `hay`, ignoring ASCII case; no
/// allocation (it runs once per line of a flood).
fn find_ignoring_ascii_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    let mut at = 0;
    while at <= last_start {
        let offset = hay[at..=last_start]
            .iter()
            .position(|b| b.to_ascii_lowercase() == first)?;
        at += offset;
        if hay[at + 1..at + needle.len()].eq_ignore_ascii_case(rest) {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// The command for `launch`, with its status pipe and its descriptors ([`sandbox::LaunchFds`])
/// mapped onto the numbers the runner expects.
fn prepare(
    launch: &ConfinedArgv,
    options: &LaunchOptions,
) -> std::io::Result<(Command, Option<(OwnedFd, sandbox::StatusFormat)>)> {
    let program = launch
        .argv
        .first()
        .ok_or_else(|| std::io::Error::other("empty argv"))?;
    let mut cmd = Command::new(program);
    for key in &options.env_remove {
        cmd.env_remove(key);
    }
    cmd.args(&launch.argv[1..])
        .current_dir(&options.cwd)
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if launch.backend == "seatbelt" {
        new_session(&mut cmd);
    } else {
        cmd.process_group(0);
    }
    // Each descriptor is duplicated for this spawn (close-on-exec here; the mapping clears it on
    // the child's number only), so the launch keeps its own for the next one.
    let mut mappings = Vec::new();
    for (child_fd, fd) in launch.fds.iter() {
        mappings.push(FdMapping {
            parent_fd: fd.try_clone_to_owned()?,
            child_fd,
        });
    }
    let status = match launch.status_channel {
        None => None,
        Some(channel) => {
            // Close-on-exec on every target (pipe2(O_CLOEXEC) where the platform has it).
            let (read, write) = std::io::pipe()?;
            let read = OwnedFd::from(read);
            mappings.push(FdMapping {
                parent_fd: OwnedFd::from(write),
                child_fd: channel.fd,
            });
            Some((read, channel.format))
        }
    };
    let mut keep: Vec<i32> = mappings.iter().map(|m| m.child_fd).collect();
    if !mappings.is_empty() {
        cmd.fd_mappings(mappings)
            .map_err(|e| std::io::Error::other(format!("launch descriptors: {e:?}")))?;
    }
    keep.sort_unstable();
    close_other_descriptors(&mut cmd, keep);
    Ok((cmd, status))
}

/// Seatbelt has no namespace to detach the payload from the caller's terminal (bwrap's
/// `--new-session`), so the child calls `setsid` before it execs `sandbox-exec`: no controlling
/// terminal (`/dev/tty` and `TIOCSTI` reach nothing of the person's), and a process group of its
/// own whose id is its pid, which the spawn path kills as it kills every other launch's group.
fn new_session(cmd: &mut Command) {
    // SAFETY: `setsid` is async-signal-safe and touches no memory; it runs in the forked child
    // before exec (not a group leader there, so it cannot fail with EPERM).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
}

/// Only stdin, stdout, stderr, the status channel and the launch's own descriptors reach the
/// launch: every other descriptor this process holds without close-on-exec (one a caller opened
/// with `exec 7>>file`, or one another thread is about to hand to its own child) is marked
/// close-on-exec in the child, after the mapped descriptors were moved onto their numbers.
/// `keep` is sorted.
fn close_other_descriptors(cmd: &mut Command, keep: Vec<i32>) {
    let keep: Vec<u32> = keep
        .into_iter()
        .filter_map(|fd| u32::try_from(fd).ok())
        .filter(|fd| *fd > 2)
        .collect();
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: it makes raw `close_range`/`fcntl`/`getrlimit` system calls on integers
    // and reads the vector built before the fork; it allocates nothing and takes no lock.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            let mut first = 3;
            for &fd in &keep {
                if fd > first {
                    cloexec_range(first, fd - 1);
                }
                first = fd.saturating_add(1).max(first);
            }
            cloexec_range(first, u32::MAX);
            Ok(())
        });
    }
}

/// Marks descriptors `first..=last` close-on-exec: `close_range(CLOSE_RANGE_CLOEXEC)` where the
/// kernel has it (Linux 5.11+), else one `fcntl` per possible descriptor up to the open-files
/// limit. Async-signal-safe (called between fork and exec).
fn cloexec_range(first: u32, last: u32) {
    use nix::libc;
    if first > last {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls on integer arguments; no memory is passed.
        #[allow(unsafe_code)]
        let done = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first,
                last,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        } == 0;
        if done {
            return;
        }
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes into the local struct we pass; async-signal-safe.
    #[allow(unsafe_code)]
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let max = if ok {
        u32::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20)
    } else {
        1 << 16
    };
    for fd in first..=last.min(max) {
        // SAFETY: `fcntl` on an integer; a descriptor that is not open just fails with EBADF.
        #[allow(unsafe_code)]
        unsafe {
            libc::fcntl(fd as i32, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
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

/// How long a runner may take to kill its payload's tree after SIGTERM before the whole process
/// group gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(200);

/// The longest wait between checks on the payload while its output is still open.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// Collects stdout and stderr on this thread (one `poll` loop, no reader threads) until the
/// payload exited and its output closed. When the payload exits, or the deadline passes, its whole
/// process group is killed while the leader is still unreaped, so the group id cannot have been
/// reused by then.
fn supervise(
    child: &mut Child,
    timeout: Option<Duration>,
    cancel: Option<&AtomicBool>,
    captures: [Capture; 2],
    tree: &mut Tree,
) -> (Option<ExitStatus>, Capture, Capture, Stop) {
    let group = Pid::from_raw(child.id() as i32);
    let [out, err] = captures;
    let mut pipes: [(Option<OwnedFd>, Capture); 2] = [
        (child.stdout.take().map(OwnedFd::from), out),
        (child.stderr.take().map(OwnedFd::from), err),
    ];
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

/// How long the Landlock launcher's monitor may take, after SIGTERM, to kill and reap its
/// payload's whole tree before SIGKILL ends it (and with it any hope of reaping the rest). The
/// payload cannot stop or kill the monitor (its seccomp guard, Landlock's signal scoping), so
/// this bounds only a runner that is itself broken; a 5,000-process fork bomb takes the monitor
/// a few hundred milliseconds on a quiet host, and was seen to take over 10 s at a load of 50 to
/// 70 (the call's result then hedged its claim that the whole tree was killed).
const REAPER_GRACE: Duration = Duration::from_secs(30);

/// How long after the stop began (or the runner exited) the spawn path waits for bwrap's PID
/// namespace to empty: the kernel kills every process in it once its init is gone, and the init
/// is gone only once they are (the same few hundred milliseconds for 5,000 processes).
const TREE_BOUND: Duration = Duration::from_secs(10);

/// Who, besides the process group the spawn path kills, ends the launch's other processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reaper {
    /// The runner's own monitor (the Landlock launcher): it reaps the whole tree before it
    /// exits, once it is asked to stop with SIGTERM.
    Monitor,
    /// bwrap: its PID namespace's init; when the init dies the kernel kills the namespace.
    Namespace,
    /// Nobody: an operator runner, Seatbelt or an unconfined launch. Only the process group is
    /// killed, so the tree is never claimed reaped (a `setsid` daemon leaves the group).
    Group,
}

/// What the spawn path knows about the launch's processes beyond its process group, and how it
/// confirms they are gone.
struct Tree<'a> {
    reaper: Reaper,
    /// The status channel, read early (bwrap writes `{"child-pid": N}` right after it cloned
    /// the namespace's init).
    status: Option<&'a OwnedFd>,
    /// What was read of the status channel so far; the classifier gets it with the rest.
    early: Vec<u8>,
    /// A pidfd on the namespace's init: readable once the init is gone, which the kernel allows
    /// only once every other process of the namespace is gone (reaped) too.
    init: Option<OwnedFd>,
    /// The child-pid record was read, or the leader's children were searched for the init.
    looked: bool,
    /// The runner had to be killed before it ended by itself.
    forced: bool,
    /// Until when the spawn path waits for the namespace to empty.
    until: Option<Instant>,
}

impl<'a> Tree<'a> {
    fn new(
        launch: &ConfinedArgv,
        status: Option<(&'a OwnedFd, sandbox::StatusFormat)>,
    ) -> Tree<'a> {
        // bwrap's PID namespace is what ends its tree, whichever status channel it speaks (with
        // the launcher inside it the channel is the launcher's, and bwrap writes no child-pid
        // record: the init is then found among the leader's children).
        let reaper = match status.map(|(_, format)| format) {
            _ if launch.backend == "bwrap" => Reaper::Namespace,
            // The Seatbelt trampoline execs the payload: nothing reaps beyond its group.
            _ if launch.backend == "seatbelt" => Reaper::Group,
            Some(sandbox::StatusFormat::BwrapJson) => Reaper::Namespace,
            Some(sandbox::StatusFormat::LaunchReport) => Reaper::Monitor,
            None => Reaper::Group,
        };
        let status = status.map(|(fd, _)| fd);
        if let Some(fd) = status {
            let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
        }
        Tree {
            reaper,
            status,
            early: Vec::new(),
            init: None,
            looked: false,
            forced: false,
            until: None,
        }
    }

    /// How long the runner gets after SIGTERM.
    fn grace(&self) -> Duration {
        match self.reaper {
            Reaper::Monitor => REAPER_GRACE,
            Reaper::Namespace | Reaper::Group => STOP_GRACE,
        }
    }

    /// Reads what bwrap wrote so far, without waiting, until its child-pid record is seen; then
    /// holds a pidfd on that init (checked to be a PID namespace's init: a pid already freed
    /// and reused names some other process, which is not).
    fn watch(&mut self) {
        if self.reaper != Reaper::Namespace || self.looked {
            return;
        }
        let Some(fd) = self.status else { return };
        let mut chunk = [0u8; 1024];
        loop {
            match nix::unistd::read(fd, &mut chunk) {
                Ok(0) => break,
                Ok(n) => self.early.extend_from_slice(&chunk[..n]),
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        let init = String::from_utf8_lossy(&self.early)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
            .find_map(|r| r.get("child-pid").and_then(serde_json::Value::as_i64))
            .and_then(|pid| i32::try_from(pid).ok());
        if let Some(pid) = init {
            self.looked = true;
            // Gone already (ESRCH, or not an init any more): the namespace went with it.
            self.init = pidfd_open(pid).filter(|_| is_namespace_init(pid));
        }
    }

    /// Called when the leader exited or is about to be stopped: starts the bound, and, for
    /// bwrap, finds the namespace's init (among the leader's children while the leader still
    /// holds it, should its record not have arrived), for [`Tree::kill_init`].
    /// `--die-with-parent` alone is not enough: the init does not always get its parent-death
    /// signal (processes were seen alive 10 s after the outer bwrap was killed), and anything
    /// left in the namespace once the leader is done is a survivor anyway.
    fn ending(&mut self, leader: Pid) {
        self.until
            .get_or_insert_with(|| Instant::now() + TREE_BOUND);
        self.watch();
        if self.reaper != Reaper::Namespace {
            return;
        }
        if !self.looked {
            self.looked = true;
            let children =
                std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", leader.as_raw()))
                    .unwrap_or_default();
            self.init = children
                .split_ascii_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .find_map(|pid| {
                    pidfd_open(pid).filter(|_| {
                        is_namespace_init(pid) && parent_of(pid) == Some(leader.as_raw())
                    })
                });
        }
    }

    /// Kills bwrap's namespace init (the kernel then kills the whole namespace). Called once
    /// the leader exited, or right after the SIGTERM that stops it: the outer bwrap, with the
    /// SIGTERM already pending, still dies by it rather than reporting its child's SIGKILL.
    fn kill_init(&self) {
        if let Some(init) = &self.init {
            pidfd_kill(init);
        }
    }

    /// Waits (bounded) until the whole tree is known gone; true when it is.
    fn settle(&mut self) -> bool {
        match self.reaper {
            Reaper::Group => false,
            Reaper::Monitor => !self.forced,
            Reaper::Namespace => {
                let Some(init) = &self.init else {
                    // No init was ever made, or it was gone (and so its namespace) before the
                    // spawn path could hold it.
                    return true;
                };
                let until = *self
                    .until
                    .get_or_insert_with(|| Instant::now() + TREE_BOUND);
                loop {
                    let left = until.saturating_duration_since(Instant::now());
                    let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::ZERO);
                    let mut fds = [PollFd::new(init.as_fd(), PollFlags::POLLIN)];
                    match poll(&mut fds, timeout) {
                        Ok(n) if n > 0 => return true,
                        Err(nix::errno::Errno::EINTR) => {}
                        _ if Instant::now() < until => {}
                        _ => return false,
                    }
                }
            }
        }
    }
}

/// `pidfd_open(2)`; nix and std (stable) have no wrapper. `None` when `pid` is gone.
#[cfg(target_os = "linux")]
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open(2) takes a pid and flags (0) by value and touches no memory of ours.
    #[allow(unsafe_code)]
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0 as nix::libc::c_uint) };
    let fd = nix::libc::c_int::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    #[allow(unsafe_code)]
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// No pidfd outside Linux (nor a PID namespace for one to watch): `None`.
#[cfg(not(target_os = "linux"))]
fn pidfd_open(_pid: i32) -> Option<OwnedFd> {
    None
}

/// `pidfd_send_signal(pidfd, SIGKILL)`: the process the pidfd holds, never a reused pid.
#[cfg(target_os = "linux")]
fn pidfd_kill(fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: the call takes a descriptor we own, a signal number, a null siginfo (read by the
    // kernel as "no info") and flags 0; it touches no memory of ours.
    #[allow(unsafe_code)]
    let _ = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            nix::libc::SIGKILL,
            std::ptr::null::<nix::libc::siginfo_t>(),
            0 as nix::libc::c_uint,
        )
    };
}

/// Never called outside Linux ([`pidfd_open`] returns no descriptor there).
#[cfg(not(target_os = "linux"))]
fn pidfd_kill(_fd: &OwnedFd) {}

/// Whether `pid` is the init (pid 1) of a PID namespace nested below ours: the last `NSpid`
/// entry of its status is 1.
fn is_namespace_init(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let ids: Vec<String> = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))?
                .split_ascii_whitespace()
                .map(str::to_owned)
                .collect();
            Some(ids.len() >= 2 && ids.last().map(String::as_str) == Some("1"))
        })
        .unwrap_or(false)
}

/// The parent of `pid`, from `/proc/<pid>/stat`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold anything but the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The most bytes read from one pipe per [`read_ready`], so a payload that writes without pause
/// cannot keep the supervisor from its deadline and cancel checks.
const READ_BUDGET: usize = 1024 * 1024;

/// Waits up to `slice` for output, then reads what is ready (at most [`READ_BUDGET`] a pipe); a
/// pipe at EOF is closed.
fn read_ready(pipes: &mut [(Option<OwnedFd>, Capture); 2], slice: Duration) {
    let timeout = PollTimeout::try_from(slice).unwrap_or(PollTimeout::MAX);
    let ready: Vec<bool> = {
        let mut fds: Vec<PollFd> = pipes
            .iter()
            .filter_map(|(fd, _)| fd.as_ref())
            .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        let _ = poll(&mut fds, timeout);
        fds.iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect()
    };
    let mut ready = ready.into_iter();
    for (fd, buf) in pipes.iter_mut() {
        let Some(open) = fd.as_ref() else { continue };
        if !ready.next().unwrap_or(false) {
            continue;
        }
        let mut chunk = [0u8; 65536];
        let mut budget = READ_BUDGET;
        while budget > 0 {
            match nix::unistd::read(open, &mut chunk) {
                Ok(0) => {
                    *fd = None;
                    break;
                }
                Ok(n) => {
                    buf.push(&chunk[..n]);
                    budget = budget.saturating_sub(n);
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(_) => {
                    *fd = None;
                    break;
                }
            }
        }
    }
}

/// True once the payload has exited. On Linux the leader is left unreaped (`WNOWAIT`) so its
/// process group id stays reserved until the group is killed; elsewhere it is reaped here.
fn leader_exited(child: &mut Child) -> bool {
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

/// Reads what is in the status pipe without waiting for writers that may still hold it.
fn drain(fd: OwnedFd) -> Vec<u8> {
    let _ = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
    let mut file = std::fs::File::from(fd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

/// True when this process could make `dir` its working directory: a directory it may search.
/// `EACCES` from a spawn is the runner's only when this holds (an unsearchable workdir fails the
/// `chdir` before the runner is ever exec'd).
pub fn workdir_usable(dir: &std::path::Path) -> bool {
    dir.is_dir() && nix::unistd::access(dir, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// What the consumer knows about a failed spawn: the error class, that it is attributable to the
/// runner program, and whether the workdir was independently verified usable.
fn spawn_failure(
    launch: &ConfinedArgv,
    options: &LaunchOptions,
    e: &std::io::Error,
) -> SpawnFailure {
    let kind = match e.raw_os_error() {
        Some(code) if code == nix::libc::ENOENT => SpawnErrorKind::NotFound,
        Some(code) if code == nix::libc::EACCES => SpawnErrorKind::PermissionDenied,
        _ => SpawnErrorKind::Other,
    };
    let program = launch.argv.first().map(PathBuf::from);
    SpawnFailure {
        kind,
        workdir_usable: workdir_usable(&options.cwd),
        message: format!(
            "cannot start {}: {e}",
            program
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "nothing".into())
        ),
        path: program,
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
