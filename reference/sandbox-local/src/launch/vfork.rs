//! Starting a runner without copying this process: `posix_spawn`, which glibc carries out with
//! `clone(CLONE_VM | CLONE_VFORK)`. The fork that `std::process::Command` falls back to as soon
//! as a command has a `pre_exec` step copies every page table of the caller and makes each page
//! its threads write next a copy-on-write fault: in a certification (dozens of threads, a
//! confined call every few milliseconds) that was a tenth of the harness's own CPU. Everything
//! the fork path does between fork and exec is a spawn action here: stdin from `/dev/null`,
//! stdout and stderr onto pipes, the launch's descriptors onto their numbers, every other
//! descriptor closed, a process group of its own, the working directory, no blocked signal and
//! `SIGPIPE` back to its default.
//!
//! glibc only (`posix_spawn_file_actions_addclosefrom_np` is 2.34's, `addchdir_np` 2.29's); the
//! other targets, and a program named without a `/`, take the `Command` path.

use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use sandbox::ConfinedArgv;

use super::LaunchOptions;

/// A runner started by [`start`]: its pid, the read ends of its output, and its status once
/// reaped (so a second wait answers the same, as `std::process::Child` does).
#[derive(Debug)]
pub(super) struct Spawned {
    pid: Pid,
    /// The read end of the runner's stdout, until taken.
    pub(super) stdout: Option<OwnedFd>,
    /// The read end of the runner's stderr, until taken.
    pub(super) stderr: Option<OwnedFd>,
    status: Option<ExitStatus>,
}

impl Spawned {
    /// The runner's pid.
    pub(super) fn id(&self) -> u32 {
        self.pid.as_raw().unsigned_abs()
    }

    /// Waits for the runner and reaps it (once; later calls answer the same status).
    pub(super) fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.status {
                return Ok(status);
            }
            match waitpid(self.pid, None) {
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
                Ok(status) => self.status = exit_status(status),
            }
        }
    }

    /// Reaps the runner when it has ended, without waiting.
    pub(super) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = exit_status(waitpid(self.pid, Some(WaitPidFlag::WNOHANG))?);
        }
        Ok(self.status)
    }
}

/// The status a wait reports, as `std` spells it: the raw `wait` status of an exit or a signal
/// (a stop or a continue is no end).
fn exit_status(status: WaitStatus) -> Option<ExitStatus> {
    match status {
        WaitStatus::Exited(_, code) => Some(ExitStatus::from_raw((code & 0xff) << 8)),
        WaitStatus::Signaled(_, signal, core) => Some(ExitStatus::from_raw(
            signal as i32 | if core { 0x80 } else { 0 },
        )),
        _ => None,
    }
}

/// Starts `launch` with `options` when it names its program by a path (`None` when it does not:
/// `posix_spawn` would search this process's `PATH`, not the one the launch sets), with
/// `mappings` (the child's number and the descriptor it gets) on their numbers.
pub(super) fn start(
    launch: &ConfinedArgv,
    options: &LaunchOptions,
    mappings: &[(i32, BorrowedFd<'_>)],
) -> Option<std::io::Result<Spawned>> {
    let program = launch.argv.first()?;
    if !program.as_encoded_bytes().contains(&b'/') {
        return None;
    }
    Some(spawn(program.clone(), launch, options, mappings))
}

fn spawn(
    program: OsString,
    launch: &ConfinedArgv,
    options: &LaunchOptions,
    mappings: &[(i32, BorrowedFd<'_>)],
) -> std::io::Result<Spawned> {
    let argv = c_strings(launch.argv.iter().cloned())?;
    let envp = c_strings(environment(options).into_iter())?;
    let program = c_string(program)?;
    let cwd = c_string(options.cwd.clone().into_os_string())?;
    let (out_read, out_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (err_read, err_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;

    // Every descriptor the child gets is first copied above every number it gets them on
    // (close-on-exec here), so no `dup2` onto one number clobbers the source of another.
    let highest = mappings.iter().map(|(n, _)| *n).max().unwrap_or(2).max(2);
    let above = |fd: BorrowedFd<'_>| -> std::io::Result<OwnedFd> {
        let copy = fcntl(fd, FcntlArg::F_DUPFD_CLOEXEC(highest + 1))?;
        // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` just returned this new descriptor; nothing else in
        // this process refers to it, so it is owned here once.
        #[allow(unsafe_code)]
        Ok(unsafe { OwnedFd::from_raw_fd(copy) })
    };
    let null = OwnedFd::from(std::fs::File::open("/dev/null")?);
    let null = above(null.as_fd())?;
    let out = above(out_write.as_fd())?;
    let err = above(err_write.as_fd())?;
    let mut sources = Vec::with_capacity(mappings.len());
    for (number, fd) in mappings {
        sources.push((*number, above(*fd)?));
    }

    let mut actions = PosixSpawnFileActions::init()?;
    actions.add_dup2(null.as_raw_fd(), 0)?;
    actions.add_dup2(out.as_raw_fd(), 1)?;
    actions.add_dup2(err.as_raw_fd(), 2)?;
    for (number, source) in &sources {
        actions.add_dup2(source.as_raw_fd(), *number)?;
    }
    // Only stdin, stdout, stderr and the mapped numbers reach the runner: a descriptor this
    // process holds without close-on-exec (one a caller opened with `exec 7>>file`) does not.
    for gap in 3..highest {
        if !sources.iter().any(|(number, _)| *number == gap) {
            actions.add_close(gap)?;
        }
    }
    close_from(&mut actions, highest + 1)?;
    change_dir(&mut actions, &cwd)?;

    let mut attr = PosixSpawnAttr::init()?;
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut pipe = SigSet::empty();
    pipe.add(Signal::SIGPIPE);
    attr.set_sigdefault(&pipe)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;

    let pid = posix_spawn(program.as_c_str(), &actions, &attr, &argv, &envp)?;
    Ok(Spawned {
        pid,
        stdout: Some(out_read),
        stderr: Some(err_read),
        status: None,
    })
}

/// The runner's environment as `Command` builds it: this process's, less `env_remove`, with
/// `env` set (a later setting of a name wins).
fn environment(options: &LaunchOptions) -> Vec<OsString> {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(key, _)| !options.env_remove.contains(key))
        .collect();
    for (key, value) in &options.env {
        vars.retain(|(k, _)| k != key);
        vars.push((key.clone(), value.clone()));
    }
    vars.into_iter()
        .map(|(key, value)| {
            let mut pair = key;
            pair.push("=");
            pair.push(value);
            pair
        })
        .collect()
}

fn c_string(s: OsString) -> std::io::Result<CString> {
    CString::new(s.into_vec()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a NUL byte in the runner's command, environment or working directory",
        )
    })
}

fn c_strings(items: impl Iterator<Item = OsString>) -> std::io::Result<Vec<CString>> {
    items.map(c_string).collect()
}

/// The raw file-actions object `nix` wraps (`#[repr(transparent)]` over it), for the two glibc
/// actions it has no method for.
fn raw_actions(actions: &mut PosixSpawnFileActions) -> *mut nix::libc::posix_spawn_file_actions_t {
    std::ptr::from_mut(actions).cast()
}

/// Closes every descriptor from `first` up in the child (`close_range`, in glibc's spawn).
fn close_from(actions: &mut PosixSpawnFileActions, first: i32) -> std::io::Result<()> {
    // SAFETY: `raw_actions` points at the initialised object `actions` owns (nix's type is
    // `repr(transparent)` over it); glibc only appends an action to it.
    #[allow(unsafe_code)]
    let res =
        unsafe { nix::libc::posix_spawn_file_actions_addclosefrom_np(raw_actions(actions), first) };
    spawn_result(res)
}

/// Changes to `dir` in the child before it execs (a `chdir` that fails fails the spawn with
/// its errno, as `Command` does).
fn change_dir(actions: &mut PosixSpawnFileActions, dir: &CString) -> std::io::Result<()> {
    // SAFETY: as in `close_from`; glibc copies the NUL-terminated path it is given.
    #[allow(unsafe_code)]
    let res = unsafe {
        nix::libc::posix_spawn_file_actions_addchdir_np(raw_actions(actions), dir.as_ptr())
    };
    spawn_result(res)
}

fn spawn_result(res: i32) -> std::io::Result<()> {
    if res == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(res))
    }
}
