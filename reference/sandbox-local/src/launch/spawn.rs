//! Starting the runner: its command, the descriptors it gets (and only those), a session of its
//! own where it needs one, and what a failed spawn tells.

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use command_fds::{CommandFdExt, FdMapping};
use sandbox::{ConfinedArgv, SpawnErrorKind, SpawnFailure};

use super::LaunchOptions;

/// A started runner: through `posix_spawn` where the platform has it ([`super::vfork`]), else
/// a `std::process::Child`.
#[derive(Debug)]
pub(super) enum Runner {
    /// Started by `Command::spawn` (a fork).
    Forked(std::process::Child),
    /// Started by `posix_spawn` (no copy of this process).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    Spawned(super::vfork::Spawned),
}

impl Runner {
    /// The runner's pid.
    pub(super) fn id(&self) -> u32 {
        match self {
            Runner::Forked(child) => child.id(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Runner::Spawned(spawned) => spawned.id(),
        }
    }

    /// The read ends of its stdout and stderr (once).
    pub(super) fn take_output(&mut self) -> [Option<OwnedFd>; 2] {
        match self {
            Runner::Forked(child) => [
                child.stdout.take().map(OwnedFd::from),
                child.stderr.take().map(OwnedFd::from),
            ],
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Runner::Spawned(spawned) => [spawned.stdout.take(), spawned.stderr.take()],
        }
    }

    /// Waits for the runner and reaps it (later calls answer the same).
    pub(super) fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Runner::Forked(child) => child.wait(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Runner::Spawned(spawned) => spawned.wait(),
        }
    }

    /// Reaps the runner when it has ended, without waiting.
    pub(super) fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self {
            Runner::Forked(child) => child.try_wait(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Runner::Spawned(spawned) => spawned.try_wait(),
        }
    }
}

/// Starts the runner for `launch`, with its status pipe's read end: without copying this
/// process where the platform allows it ([`super::vfork`]; not for Seatbelt, whose child must
/// call `setsid`), else through [`prepare`]'s command.
pub(super) fn start(
    launch: &ConfinedArgv,
    options: &LaunchOptions,
) -> std::io::Result<(Runner, Option<(OwnedFd, sandbox::StatusFormat)>)> {
    // The status pipe (close-on-exec on both ends): this process keeps the read end, the runner
    // gets the write end at the channel's number, and only the runner holds it once started.
    let (kept, handed) = match launch.status_channel {
        None => (None, None),
        Some(channel) => {
            let (read, write) = std::io::pipe()?;
            (
                Some((OwnedFd::from(read), channel.format)),
                Some((channel.fd, OwnedFd::from(write))),
            )
        }
    };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if launch.backend != "seatbelt" {
        use std::os::fd::AsFd;
        let mut mappings: Vec<(i32, std::os::fd::BorrowedFd<'_>)> = launch.fds.iter().collect();
        mappings.extend(
            handed
                .iter()
                .map(|(number, write)| (*number, write.as_fd())),
        );
        if let Some(spawned) = super::vfork::start(launch, options, &mappings) {
            return spawned.map(|s| (Runner::Spawned(s), kept));
        }
    }
    let mut cmd = prepare(launch, options, handed)?;
    let child = cmd.spawn();
    // The status pipe's write end lives in `cmd`; drop it so only the child holds it.
    drop(cmd);
    child.map(|c| (Runner::Forked(c), kept))
}

/// The command for `launch`, with `status` (the status pipe's write end at its number) and its
/// descriptors ([`sandbox::LaunchFds`]) mapped onto the numbers the runner expects.
fn prepare(
    launch: &ConfinedArgv,
    options: &LaunchOptions,
    status: Option<(i32, OwnedFd)>,
) -> std::io::Result<Command> {
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
    if let Some((child_fd, parent_fd)) = status {
        mappings.push(FdMapping {
            parent_fd,
            child_fd,
        });
    }
    let mut keep: Vec<i32> = mappings.iter().map(|m| m.child_fd).collect();
    if !mappings.is_empty() {
        cmd.fd_mappings(mappings)
            .map_err(|e| std::io::Error::other(format!("launch descriptors: {e:?}")))?;
    }
    keep.sort_unstable();
    close_other_descriptors(&mut cmd, keep);
    unblock_signals(&mut cmd);
    Ok(cmd)
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

/// No signal the calling thread blocks stays blocked in the runner (`Command` passes the mask
/// on): a caller that blocks SIGTERM in its threads would otherwise leave the runner deaf to the
/// SIGTERM that asks it to end its tree, until the SIGKILL after its grace.
fn unblock_signals(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only calls `sigprocmask`,
    // which is async-signal-safe, on a set built on its stack; it allocates nothing.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
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

/// True when this process could make `dir` its working directory: a directory it may search.
/// `EACCES` from a spawn is the runner's only when this holds (an unsearchable workdir fails the
/// `chdir` before the runner is ever exec'd).
pub fn workdir_usable(dir: &std::path::Path) -> bool {
    dir.is_dir() && nix::unistd::access(dir, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// What the consumer knows about a failed spawn: the error class, that it is attributable to the
/// runner program, and whether the workdir was independently verified usable.
pub(super) fn spawn_failure(
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
