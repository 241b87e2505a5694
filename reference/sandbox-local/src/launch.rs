//! Spawns a confined launch directly (no outer shell), wires its status channel to the fd the
//! runner expects, collects its output, and classifies the result with the one classifier.

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
    /// Everything written to stdout.
    pub stdout: Vec<u8>,
    /// Everything written to stderr.
    pub stderr: Vec<u8>,
    /// The timeout killed it.
    pub timed_out: bool,
    /// Cancellation killed it.
    pub cancelled: bool,
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

/// Runs `launch` to completion and classifies it.
pub fn run(launch: &ConfinedArgv, options: &LaunchOptions) -> Finished {
    let finished = |outcome: ProcessOutcome,
                    status: Option<PayloadStatus>,
                    stdout: Vec<u8>,
                    (timed_out, cancelled): (bool, bool)| {
        let classification = classify(launch, &outcome, status.as_ref());
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
            timed_out,
            cancelled,
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
                (false, false),
            );
        }
    };
    let (exit, stdout, stderr, stop) =
        supervise(&mut child, options.timeout, options.cancel.as_deref());
    let status = status_reader.map(|(fd, format)| format.parse(&drain(fd)));
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
        (stop == Stop::Deadline, stop == Stop::Cancelled),
    )
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
        .stderr(Stdio::piped())
        .process_group(0);
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
            let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
            mappings.push(FdMapping {
                parent_fd: write,
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
/// kernel has it (5.11+), else one `fcntl` per possible descriptor up to the open-files limit.
/// Async-signal-safe (called between fork and exec).
fn cloexec_range(first: u32, last: u32) {
    use nix::libc;
    if first > last {
        return;
    }
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
) -> (Option<ExitStatus>, Vec<u8>, Vec<u8>, Stop) {
    let group = Pid::from_raw(child.id() as i32);
    let mut pipes: [(Option<OwnedFd>, Vec<u8>); 2] = [
        (child.stdout.take().map(OwnedFd::from), Vec::new()),
        (child.stderr.take().map(OwnedFd::from), Vec::new()),
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
        if exited_at.is_none() && leader_exited(child) {
            let _ = killpg(group, Signal::SIGKILL);
            exited_at = Some(Instant::now());
        }
        if exited_at.is_none() && stop == Stop::No {
            if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
                stop = Stop::Cancelled;
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                stop = Stop::Deadline;
            }
            if stop != Stop::No {
                // SIGTERM first: a runner that reaps what its payload started (the Landlock
                // launcher's monitor, bwrap) kills the whole tree, `setsid` daemons included,
                // before it exits; SIGKILL follows after a grace, or at once when it exits.
                let _ = killpg(group, Signal::SIGTERM);
                stopped_at = Some(Instant::now());
            }
        }
        if exited_at.is_none() && stopped_at.is_some_and(|at| at.elapsed() >= STOP_GRACE) {
            let _ = killpg(group, Signal::SIGKILL);
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

/// Waits up to `slice` for output, then reads whatever is ready; a pipe at EOF is closed.
fn read_ready(pipes: &mut [(Option<OwnedFd>, Vec<u8>); 2], slice: Duration) {
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
        let mut chunk = [0u8; 8192];
        loop {
            match nix::unistd::read(open, &mut chunk) {
                Ok(0) => {
                    *fd = None;
                    break;
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
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
