//! The monitor: the launcher's parent half. It forks the payload's process, outlives it as a child
//! subreaper, kills and reaps every process left below it, and mirrors how the payload ended.

use std::process::ExitCode;
use std::time::Duration;

use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::prctl;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{ForkResult, Pid, getpgrp, getpid, getppid};

/// The side of the fork this process is on.
pub enum Side {
    /// The monitor: supervise the payload's process, then exit as it did.
    Monitor(Monitor),
    /// The payload's process: settle, restrict, harden, exec.
    Payload(Payload),
}

/// The monitor's half of the fork.
pub struct Monitor {
    payload: Pid,
    watched: SigSet,
    /// Where the launch's init reports how the launch ended, when it is PID 1 of a namespace of
    /// its own (PID 1 cannot die by a signal of its own to mirror one).
    ending: Option<OwnedFd>,
}

/// The payload's half of the fork.
pub struct Payload {
    monitor: Pid,
    monitor_group: Pid,
    sigchld_ignored: bool,
    inherited_mask: SigSet,
}

/// How the payload (or the monitor's own wait) ended.
enum Ending {
    Code(i32),
    Signal(i32),
}

/// Becomes a subreaper, blocks the signals the monitor waits for and forks once. Nothing here
/// runs in the payload's process except what [`Payload::settle`] undoes.
pub fn fork() -> Result<Side, String> {
    let parent = getppid();
    prctl::set_child_subreaper(true).map_err(|e| format!("cannot become a subreaper: {e}"))?;
    prctl::set_pdeathsig(Signal::SIGTERM)
        .map_err(|e| format!("cannot ask for a signal when the caller dies: {e}"))?;
    if getppid() != parent {
        return Err("the caller exited before the launcher started".into());
    }
    let mut watched = SigSet::empty();
    watched.add(Signal::SIGCHLD);
    // SIGTERM is always watched: it is also what the monitor gets when its caller dies.
    watched.add(Signal::SIGTERM);
    for sig in [Signal::SIGINT, Signal::SIGHUP, Signal::SIGQUIT] {
        // A caller that ignores one (a background job ignores SIGINT and SIGQUIT, nohup
        // SIGHUP) keeps it ignored for the monitor and the payload alike.
        if !is_ignored(sig).map_err(|e| format!("cannot read the disposition of {sig}: {e}"))? {
            watched.add(sig);
        }
    }
    // An ignored SIGCHLD would make the kernel reap the payload before the monitor can.
    let sigchld_ignored = matches!(
        set_disposition(Signal::SIGCHLD, SigHandler::SigDfl)
            .map_err(|e| format!("cannot reset the SIGCHLD disposition: {e}"))?,
        SigHandler::SigIgn
    );
    let inherited_mask = watched
        .thread_swap_mask(SigmaskHow::SIG_BLOCK)
        .map_err(|e| format!("cannot block the monitor's signals: {e}"))?;
    let monitor = getpid();
    let monitor_group = getpgrp();
    // SAFETY: the launcher is single-threaded (no thread is ever spawned), so the child may run
    // any code, allocation included, exactly as the parent would.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() };
    match forked.map_err(|e| format!("cannot fork: {e}"))? {
        ForkResult::Child => Ok(Side::Payload(Payload {
            monitor,
            monitor_group,
            sigchld_ignored,
            inherited_mask,
        })),
        ForkResult::Parent { child } => Ok(Side::Monitor(Monitor {
            payload: child,
            watched,
            ending: None,
        })),
    }
}

impl Payload {
    /// Dies with the monitor, checks the monitor did not die already, puts the monitor out of
    /// the payload's reach ([`guard_the_monitor`]), and gives back what the monitor changed for
    /// itself: the SIGCHLD disposition and the blocked-signal mask, which `execve` keeps (a
    /// payload with SIGTERM still blocked would shrug it off).
    pub fn settle(&self) -> Result<(), String> {
        prctl::set_pdeathsig(Signal::SIGKILL)
            .map_err(|e| format!("cannot ask for a signal when the monitor dies: {e}"))?;
        // PID 1 of a namespace of its own sees its parent, the monitor, as 0: out of reach.
        let in_own_namespace = getpid().as_raw() == 1;
        let parent = getppid();
        if parent != self.monitor && !(in_own_namespace && parent.as_raw() == 0) {
            return Err("the monitor exited before the payload started".into());
        }
        if !in_own_namespace {
            guard_the_monitor(self.monitor, self.monitor_group)?;
        }
        if self.sigchld_ignored {
            set_disposition(Signal::SIGCHLD, SigHandler::SigIgn)
                .map_err(|e| format!("cannot restore the SIGCHLD disposition: {e}"))?;
        }
        self.inherited_mask
            .thread_set_mask()
            .map_err(|e| format!("cannot restore the signal mask: {e}"))
    }
}

impl Monitor {
    /// The monitor of a launch whose init reports its ending on `pipe` ([`crate::init`]).
    pub fn with_ending(mut self, pipe: OwnedFd) -> Monitor {
        self.ending = Some(pipe);
        self
    }

    /// Waits for the payload or a terminating signal, kills and reaps every process left below
    /// the monitor, then ends as the payload did (or by the signal the monitor received).
    ///
    /// The payload's end is learnt from a pidfd as well as from `SIGCHLD`: a process of the
    /// payload's Landlock domain may `PTRACE_SEIZE` the payload, and then the payload's exit
    /// status goes to that tracer first, so no `SIGCHLD` and no `waitpid` ever tells the monitor
    /// the payload ended while the tracer lives. The pidfd becomes readable when the payload is a
    /// zombie, traced or not; the clean-up then kills the tracer, which releases the zombie.
    pub fn supervise(mut self) -> ExitCode {
        let signals = match SignalFd::with_flags(
            &self.watched,
            SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                // Fail closed: a monitor that cannot wait must not leave the payload running.
                eprintln!("{}cannot wait for signals: {e}", crate::DIAGNOSTIC_PREFIX);
                let _ = kill(self.payload, Signal::SIGKILL);
                kill_descendants(self.payload, None);
                return ExitCode::from(crate::FAILURE_EXIT_CODE as u8);
            }
        };
        // Landlock (Linux 5.13) implies pidfd_open (5.3); should it fail all the same (no
        // descriptor left), SIGCHLD alone still sees every untraced end.
        let pidfd = pidfd_open(self.payload).ok();
        let (ending, own_signal) = self.wait(&signals, pidfd.as_ref());
        let reaped = kill_descendants(self.payload, Some(&signals));
        // The init's own report wins over its exit status, unless the monitor was told to stop.
        let reported = match self.ending.take() {
            Some(pipe) if !own_signal => crate::init::read_ending(pipe).map(|e| match e {
                crate::init::Ending::Code(c) => Ending::Code(c),
                crate::init::Ending::Signal(s) => Ending::Signal(s),
            }),
            _ => None,
        };
        match reported.or(ending).or(reaped) {
            Some(Ending::Code(code)) => {
                ExitCode::from(u8::try_from(code & 0xff).unwrap_or(u8::MAX))
            }
            Some(Ending::Signal(sig)) => die_by(sig),
            None => {
                eprintln!("{}lost the payload's exit status", crate::DIAGNOSTIC_PREFIX);
                ExitCode::from(crate::FAILURE_EXIT_CODE as u8)
            }
        }
    }

    /// Blocks until the payload ended or a watched signal other than `SIGCHLD` arrived. Returns
    /// how it ended, or `None` when the payload ended but its status is held by a tracer (the
    /// clean-up reaps it once the tracer is dead), and whether it was the monitor that got a
    /// signal.
    fn wait(&self, signals: &SignalFd, pidfd: Option<&OwnedFd>) -> (Option<Ending>, bool) {
        match self.wait_inner(signals, pidfd) {
            Waited::Payload(e) => (e, false),
            Waited::Signalled(sig) => (Some(Ending::Signal(sig)), true),
        }
    }

    fn wait_inner(&self, signals: &SignalFd, pidfd: Option<&OwnedFd>) -> Waited {
        loop {
            let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            if let Some(fd) = pidfd {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => {
                    eprintln!(
                        "{}cannot wait for the payload: {e}",
                        crate::DIAGNOSTIC_PREFIX
                    );
                    return Waited::Payload(Some(Ending::Code(crate::FAILURE_EXIT_CODE)));
                }
            }
            let payload_ended = fds
                .get(1)
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty());
            loop {
                match signals.read_signal() {
                    Ok(Some(info)) if info.ssi_signo == Signal::SIGCHLD as u32 => {}
                    Ok(Some(info)) => {
                        return Waited::Signalled(
                            i32::try_from(info.ssi_signo).unwrap_or(libc::SIGTERM),
                        );
                    }
                    Ok(None) => break,
                    Err(Errno::EINTR) => {}
                    Err(e) => {
                        eprintln!("{}cannot read a signal: {e}", crate::DIAGNOSTIC_PREFIX);
                        return Waited::Payload(Some(Ending::Code(crate::FAILURE_EXIT_CODE)));
                    }
                }
            }
            match reap_ready(self.payload) {
                Reaped::Payload(ending) => return Waited::Payload(Some(ending)),
                Reaped::Failed => {
                    return Waited::Payload(Some(Ending::Code(crate::FAILURE_EXIT_CODE)));
                }
                Reaped::NoChild => return Waited::Payload(None),
                Reaped::Others if payload_ended => return Waited::Payload(None),
                Reaped::Others => {}
            }
        }
    }
}

/// What [`Monitor::wait`] saw first.
enum Waited {
    /// The payload's process ended (how, when not held by a tracer).
    Payload(Option<Ending>),
    /// The monitor got this terminating signal.
    Signalled(i32),
}

/// What one non-blocking reaping round found.
enum Reaped {
    /// The payload, which ended this way.
    Payload(Ending),
    /// Only other processes (or none), and some child is still there.
    Others,
    /// No child is left at all.
    NoChild,
    /// `waitpid` failed; already reported.
    Failed,
}

/// How a raw wait status ended, if it is an end (not a stop).
fn ending_of(status: i32) -> Option<Ending> {
    if libc::WIFEXITED(status) {
        Some(Ending::Code(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(Ending::Signal(libc::WTERMSIG(status)))
    } else {
        None
    }
}

/// Reaps every child that has ended, without blocking; stops early at the payload.
fn reap_ready(payload: Pid) -> Reaped {
    loop {
        match wait_any(libc::WNOHANG) {
            Ok(Some((pid, status))) if pid == payload.as_raw() => {
                if let Some(ending) = ending_of(status) {
                    return Reaped::Payload(ending);
                }
            }
            // An orphan that ended on its own.
            Ok(Some(_)) | Err(Errno::EINTR) => {}
            Ok(None) => return Reaped::Others,
            Err(Errno::ECHILD) => return Reaped::NoChild,
            Err(e) => {
                reap_failed(e);
                return Reaped::Failed;
            }
        }
    }
}

/// A pidfd for the payload (`pidfd_open(2)`): readable once it has ended, even while a tracer
/// holds its exit status. nix and std (stable) have no wrapper.
#[allow(unsafe_code)]
pub(crate) fn pidfd_open(pid: Pid) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open(2) takes a pid and flags (0) by value and touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0 as libc::c_uint) };
    let fd = Errno::result(fd)?;
    let fd = libc::c_int::try_from(fd).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `waitpid(-1, flags)`: `Some((pid, status))` for a reaped child, `None` when `WNOHANG` found
/// none ready. The raw status keeps deaths by real-time signals, which nix cannot name.
#[allow(unsafe_code)]
fn wait_any(flags: libc::c_int) -> Result<Option<(i32, i32)>, Errno> {
    let mut status: libc::c_int = 0;
    // SAFETY: waitpid(2) writes one int through the pointer, which points at a live local.
    let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
    match Errno::result(pid)? {
        0 => Ok(None),
        pid => Ok(Some((pid, status))),
    }
}

/// How long the clean-up waits for a `SIGCHLD` before listing and killing again.
const CLEANUP_NAP: Duration = Duration::from_millis(5);

/// Kills (`SIGKILL`) every child of the monitor and everything below it ([`kill_tree`]) and
/// reaps the children, until the monitor has no child left; returns how the payload ended when
/// it is reaped here. Orphans below a killed process are reparented to the monitor (the
/// subreaper), and any born after a round listed its parent are killed on the next round, so
/// the whole tree goes, whatever sessions or process groups it made. Never blocks in `waitpid`: a traced zombie
/// is not waitable until its tracer dies, so each round reaps what is ready, lists and kills the
/// children again (the tracer among them), and naps until a `SIGCHLD` or [`CLEANUP_NAP`]. Gives
/// up after [`ZOMBIE_PATIENCE`] naps in which only unreapable zombies are left.
fn kill_descendants(payload: Pid, signals: Option<&SignalFd>) -> Option<Ending> {
    let children = format!("/proc/self/task/{}/children", std::process::id());
    let mut ending = None;
    let mut zombie_rounds = 0;
    loop {
        loop {
            match wait_any(libc::WNOHANG) {
                Ok(Some((pid, status))) => {
                    if pid == payload.as_raw() {
                        ending = ending_of(status).or(ending);
                    }
                }
                Err(Errno::EINTR) => {}
                Err(Errno::ECHILD) => return ending,
                Err(e) => {
                    reap_failed(e);
                    return ending;
                }
                // Some child is still alive.
                Ok(None) => break,
            }
        }
        let kids = list_children(&children);
        kill_tree(&kids);
        if !kids.is_empty() && kids.iter().all(|&pid| is_zombie(pid)) {
            zombie_rounds += 1;
            if zombie_rounds >= ZOMBIE_PATIENCE {
                // Nothing below runs any more; what is left is held by a tracer outside the
                // tree (only possible when the launcher itself runs inside another Landlock
                // domain, whose processes may trace ours). Waiting on would never end.
                return ending;
            }
        } else {
            zombie_rounds = 0;
        }
        nap(signals);
    }
}

/// The most processes one round walks (a little above the default `pid_max`); whatever a
/// round leaves, the next one finds.
const ROUND_LIMIT: usize = 40_000;

/// One process of the tree below the monitor, as a round found it.
struct Node {
    pid: i32,
    /// A pidfd for a process below a child (whose pid another process could reap and free);
    /// `None` for the monitor's own children, whose pids stay theirs until the monitor reaps
    /// them.
    pidfd: Option<OwnedFd>,
}

impl Node {
    fn signal(&self, sig: Signal) {
        // A zombie or an already-dying process refuses nothing that matters here.
        match &self.pidfd {
            None => {
                let _ = kill(Pid::from_raw(self.pid), sig);
            }
            Some(fd) => pidfd_send_signal(fd, sig),
        }
    }
}

/// One round over the whole tree below the monitor's `children`, top down: each process is
/// stopped (`SIGSTOP`: it can neither fork nor reap while the round reads below it) before its
/// own children are listed, then every process found gets `SIGKILL`. A deep chain goes in one
/// round instead of one round per level, and a fork bomb cannot outrun it: a process forks only
/// until its stop lands, and a child born in that window is reparented to the monitor and found
/// by the next round. A process below a child is signalled through a pidfd opened while its
/// parent was listed and checked to be that parent's child, so a pid freed and reused meanwhile
/// (the payload may reap its own children, or ignore `SIGCHLD`) is never signalled.
fn kill_tree(children: &[i32]) {
    let mut nodes: Vec<Node> = children
        .iter()
        .map(|&pid| Node { pid, pidfd: None })
        .collect();
    let mut next = 0;
    while next < nodes.len() && nodes.len() < ROUND_LIMIT {
        nodes[next].signal(Signal::SIGSTOP);
        let parent = nodes[next].pid;
        for pid in children_of(parent) {
            let Ok(fd) = pidfd_open(Pid::from_raw(pid)) else {
                continue;
            };
            // The pidfd is held: should `pid` now name another process, its parent differs.
            if parent_of(pid) == Some(parent) {
                nodes.push(Node {
                    pid,
                    pidfd: Some(fd),
                });
            }
        }
        next += 1;
    }
    for node in &nodes {
        node.signal(Signal::SIGKILL);
    }
}

/// The children of every thread of `pid` (a thread's children are listed under that thread).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for task in tasks.filter_map(Result::ok) {
        let mut path = task.path();
        path.push("children");
        if let Ok(text) = std::fs::read_to_string(&path) {
            found.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    found
}

/// The parent (its thread group) of `pid`, from `/proc/<pid>/stat`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    sandbox::liveness::stat_field(&stat, 1)?.parse().ok()
}

/// `pidfd_send_signal(2)` with no siginfo; nix and std (stable) have no wrapper.
#[allow(unsafe_code)]
fn pidfd_send_signal(fd: &OwnedFd, sig: Signal) {
    use std::os::fd::AsRawFd;
    // SAFETY: the call takes a descriptor we own, a signal number, a null siginfo pointer (which
    // the kernel reads as "no info") and flags 0; it touches no memory of ours.
    let _ = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
}

/// How many naps the clean-up waits while only unreapable zombies are left (about a second):
/// long enough for a tracer it killed to release the zombie it held.
const ZOMBIE_PATIENCE: u32 = 200;

/// Whether `pid` is a zombie (or already gone): every one of its threads has exited. A process
/// whose leader thread ended while another runs on looks like a zombie at `/proc/<pid>`; it is
/// not one.
fn is_zombie(pid: i32) -> bool {
    sandbox::liveness::every_thread_exited(pid.unsigned_abs())
}

/// Waits for a `SIGCHLD` (or any watched signal, all of them moot during the clean-up) for at
/// most [`CLEANUP_NAP`], then drains the pending ones.
fn nap(signals: Option<&SignalFd>) {
    let Some(signals) = signals else {
        return std::thread::sleep(CLEANUP_NAP);
    };
    let timeout = PollTimeout::try_from(CLEANUP_NAP).unwrap_or(PollTimeout::ZERO);
    let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
    if poll(&mut fds, timeout).is_err() {
        std::thread::sleep(CLEANUP_NAP);
    }
    while let Ok(Some(_)) = signals.read_signal() {}
}

fn reap_failed(e: Errno) {
    eprintln!(
        "{}cannot reap the payload's processes: {e}",
        crate::DIAGNOSTIC_PREFIX
    );
}

/// The monitor's children, from the kernel's own list, or, on a kernel built without
/// `CONFIG_PROC_CHILDREN`, from the parent field of every process.
fn list_children(children: &str) -> Vec<i32> {
    match std::fs::read_to_string(children) {
        Ok(text) => text
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => children_by_parent(std::process::id()),
    }
}

fn children_by_parent(me: u32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| sandbox::liveness::stat_field(&stat, 1)?.parse::<u32>().ok())
                == Some(me)
        })
        .collect()
}

/// Ends the monitor by `sig`, as the payload ended, without leaving a core file of the monitor.
/// Falls back to the shell convention `128 + sig` should the signal not end it.
#[allow(unsafe_code)]
pub(crate) fn die_by(sig: i32) -> ExitCode {
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    // SAFETY: SIG_DFL installs no handler of ours; the sigset is a live local initialised by
    // sigemptyset before use; raise(3) only sends a signal to this single-threaded process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    ExitCode::from(u8::try_from(128 + sig).unwrap_or(u8::MAX))
}

/// Whether `sig` is ignored, without changing its disposition.
#[allow(unsafe_code)]
fn is_ignored(sig: Signal) -> Result<bool, Errno> {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::uninit();
    // SAFETY: with a null new action sigaction(2) only writes the current one into `old`.
    let rc = unsafe { libc::sigaction(sig as libc::c_int, std::ptr::null(), old.as_mut_ptr()) };
    Errno::result(rc)?;
    // SAFETY: the successful call above initialised `old`.
    let old = unsafe { old.assume_init() };
    Ok(old.sa_sigaction == libc::SIG_IGN)
}

/// Sets `sig` to the default or ignored disposition; returns the previous one.
#[allow(unsafe_code)]
fn set_disposition(sig: Signal, handler: SigHandler) -> Result<SigHandler, Errno> {
    if !matches!(handler, SigHandler::SigDfl | SigHandler::SigIgn) {
        return Err(Errno::EINVAL);
    }
    // SAFETY: only SIG_DFL or SIG_IGN is installed (checked above): no code of ours ever runs
    // in signal context.
    unsafe { nix::sys::signal::signal(sig, handler) }
}

/// `F_SETOWN` and `F_SETOWN_EX` (fcntl.h): whom a descriptor's `SIGIO` (or `F_SETSIG` signal)
/// goes to.
const F_SETOWN: u64 = 8;
const F_SETOWN_EX: u64 = 15;
/// `FIOSETOWN` and `SIOCSPGRP` (ioctls.h, sockios.h): the same through `ioctl`, by pointer.
const FIOSETOWN: u64 = 0x8901;
const SIOCSPGRP: u64 = 0x8902;

/// Puts the monitor out of the payload's reach, in the payload's process before anything of it
/// runs: every process of the payload shares the monitor's uid, and without Landlock's signal
/// scoping (ABI 6; a launcher told `--abi-cap 5` or less, or an older kernel) it could stop or
/// kill the monitor, whose death would leave the rest of the tree running, reparented to the
/// host's init. A seccomp filter (kept across `execve` and by every child) fails with `EPERM`:
///
/// - `kill` aimed at the monitor, at its process group, or at every process (`-1`);
/// - `tkill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo` aimed at the monitor;
/// - `pidfd_open` of the monitor, and `pidfd_send_signal` altogether (a `/proc/<pid>` directory
///   descriptor is a pidfd there too, so its target cannot be told from the arguments);
/// - `fcntl(F_SETOWN)` naming the monitor or its group, `fcntl(F_SETOWN_EX)` and the
///   `FIOSETOWN`/`SIOCSPGRP` ioctls (whose target sits behind a pointer): `SIGIO` would otherwise
///   deliver any signal the payload picks.
///
/// `ptrace` and `/proc/<monitor>/mem` need no rule: Landlock refuses them across its domain at
/// every ABI. Sets `no_new_privs` first (the Landlock restriction sets it again later).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn guard_the_monitor(monitor: Pid, group: Pid) -> Result<(), String> {
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    let fail = |e: &dyn std::fmt::Display| format!("cannot build the monitor's guard: {e}");
    // A pid as the kernel reads an `int` argument: the low 32 bits.
    let word = |pid: i32| u64::from(pid as u32);
    let eq = |arg: u8, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
    };
    let any_of = |arg: u8, values: &[u64]| -> Result<Vec<SeccompRule>, String> {
        values
            .iter()
            .map(|&v| eq(arg, v).and_then(|c| SeccompRule::new(vec![c])))
            .collect::<Result<_, _>>()
            .map_err(|e| fail(&e))
    };
    let (me, pg) = (monitor.as_raw(), group.as_raw());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_kill,
        any_of(0, &[word(me), word(-me), word(-pg), word(-1)])?,
    );
    rules.insert(libc::SYS_tkill, any_of(0, &[word(me)])?);
    for nr in [libc::SYS_tgkill, libc::SYS_rt_tgsigqueueinfo] {
        let mut either = any_of(0, &[word(me)])?;
        either.extend(any_of(1, &[word(me)])?);
        rules.insert(nr, either);
    }
    rules.insert(libc::SYS_rt_sigqueueinfo, any_of(0, &[word(me)])?);
    rules.insert(libc::SYS_pidfd_open, any_of(0, &[word(me)])?);
    // An empty rule list matches every call of that number.
    rules.insert(libc::SYS_pidfd_send_signal, Vec::new());
    let mut owners = Vec::new();
    for target in [word(me), word(-me), word(-pg)] {
        owners.push(
            eq(1, F_SETOWN)
                .and_then(|cmd| SeccompRule::new(vec![cmd, eq(2, target)?]))
                .map_err(|e| fail(&e))?,
        );
    }
    owners.extend(any_of(1, &[F_SETOWN_EX])?);
    rules.insert(libc::SYS_fcntl, owners);
    rules.insert(libc::SYS_ioctl, any_of(1, &[FIOSETOWN, SIOCSPGRP])?);
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| fail(&e))?;
    let program = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .and_then(seccompiler::BpfProgram::try_from)
    .map_err(|e| fail(&e))?;
    prctl::set_no_new_privs().map_err(|e| format!("cannot set no_new_privs: {e}"))?;
    seccompiler::apply_filter(&program)
        .map_err(|e| format!("cannot install the monitor's guard: {e}"))
}

/// Without a seccomp build for this architecture only Landlock's own scoping protects the
/// monitor.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn guard_the_monitor(_monitor: Pid, _group: Pid) -> Result<(), String> {
    Ok(())
}
