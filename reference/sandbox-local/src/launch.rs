//! Spawns a confined launch directly (no outer shell), wires its status channel to the fd the
//! runner expects, collects its output, and classifies the result with the one classifier.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use nix::fcntl::OFlag;
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
}

impl LaunchOptions {
    /// Run in `cwd` with the inherited environment and no timeout.
    pub fn in_dir(cwd: impl Into<PathBuf>) -> Self {
        LaunchOptions {
            cwd: cwd.into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            timeout: None,
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
                    timed_out: bool| {
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
        }
    };
    let Some(program) = launch.argv.first() else {
        let failure = spawn_failure(launch, options, &std::io::Error::other("empty argv"));
        return finished(
            ProcessOutcome::SpawnFailed(failure),
            None,
            Vec::new(),
            false,
        );
    };
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
    let status_reader = match launch.status_channel {
        None => None,
        Some(channel) => match nix::unistd::pipe2(OFlag::O_CLOEXEC) {
            Ok((read, write)) => {
                if let Err(e) = cmd.fd_mappings(vec![FdMapping {
                    parent_fd: write,
                    child_fd: channel.fd,
                }]) {
                    let err = std::io::Error::other(format!("status channel: {e:?}"));
                    let failure = spawn_failure(launch, options, &err);
                    return finished(
                        ProcessOutcome::SpawnFailed(failure),
                        None,
                        Vec::new(),
                        false,
                    );
                }
                Some((read, channel.format))
            }
            Err(e) => {
                let err = std::io::Error::from(e);
                let failure = spawn_failure(launch, options, &err);
                return finished(
                    ProcessOutcome::SpawnFailed(failure),
                    None,
                    Vec::new(),
                    false,
                );
            }
        },
    };
    let child = cmd.spawn();
    // The write end lives in `cmd`; drop it so only the child holds it.
    drop(cmd);
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            let failure = spawn_failure(launch, options, &e);
            return finished(
                ProcessOutcome::SpawnFailed(failure),
                None,
                Vec::new(),
                false,
            );
        }
    };
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let (exit, timed_out) = wait(&mut child, options.timeout);
    // Leftovers in the group (backgrounded by the payload) would hold the pipes open.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let stdout = join(stdout);
    let stderr = join(stderr);
    let status = status_reader.map(|(fd, format)| format.parse(&drain(fd)));
    let outcome = match exit {
        Some(s) => outcome_of(s, stderr),
        None => ProcessOutcome::Signaled {
            signal: nix::sys::signal::Signal::SIGKILL as i32,
            stderr,
        },
    };
    finished(outcome, status, stdout, timed_out)
}

fn outcome_of(status: ExitStatus, stderr: Vec<u8>) -> ProcessOutcome {
    match (status.code(), status.signal()) {
        (Some(code), _) => ProcessOutcome::Exited { code, stderr },
        (None, Some(signal)) => ProcessOutcome::Signaled { signal, stderr },
        (None, None) => ProcessOutcome::Signaled { signal: 0, stderr },
    }
}

/// Waits for the child, killing its process group at the deadline.
fn wait(child: &mut Child, timeout: Option<Duration>) -> (Option<ExitStatus>, bool) {
    let Some(timeout) = timeout else {
        return (child.wait().ok(), false);
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (Some(status), false),
            Ok(None) if Instant::now() >= deadline => {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                return (child.wait().ok(), true);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => return (None, false),
        }
    }
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> Option<JoinHandle<Vec<u8>>> {
    pipe.map(|mut p| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = p.read_to_end(&mut buf);
            buf
        })
    })
}

fn join(handle: Option<JoinHandle<Vec<u8>>>) -> Vec<u8> {
    handle.and_then(|h| h.join().ok()).unwrap_or_default()
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
        workdir_usable: options.cwd.is_dir(),
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
