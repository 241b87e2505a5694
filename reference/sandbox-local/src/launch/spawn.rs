//! Starting the runner: its command, the descriptors it gets (and only those), a session of its
//! own where it needs one, and what a failed spawn tells.

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use command_fds::{CommandFdExt, FdMapping};
use sandbox::{ConfinedArgv, SpawnErrorKind, SpawnFailure};

use super::LaunchOptions;

/// The command for `launch`, with its status pipe and its descriptors ([`sandbox::LaunchFds`])
/// mapped onto the numbers the runner expects.
pub(super) fn prepare(
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
