//! The launch's whole process tree: who reaps it beyond the process group (the launcher's
//! monitor, bwrap's PID namespace, or nobody), and how the spawn path kills it and confirms it gone.

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::unistd::Pid;
use sandbox::ConfinedArgv;

/// How long a runner may take to kill its payload's tree after SIGTERM before the whole process
/// group gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(200);

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
pub(super) struct Tree<'a> {
    reaper: Reaper,
    /// The status channel, read early (bwrap writes `{"child-pid": N}` right after it cloned
    /// the namespace's init).
    status: Option<&'a OwnedFd>,
    /// What was read of the status channel so far; the classifier gets it with the rest.
    pub(super) early: Vec<u8>,
    /// A pidfd on the namespace's init: readable once the init is gone, which the kernel allows
    /// only once every other process of the namespace is gone (reaped) too.
    init: Option<OwnedFd>,
    /// The child-pid record was read, or the leader's children were searched for the init.
    looked: bool,
    /// The runner had to be killed before it ended by itself.
    pub(super) forced: bool,
    /// Until when the spawn path waits for the namespace to empty.
    until: Option<Instant>,
}

impl<'a> Tree<'a> {
    pub(super) fn new(
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
    pub(super) fn grace(&self) -> Duration {
        match self.reaper {
            Reaper::Monitor => REAPER_GRACE,
            Reaper::Namespace | Reaper::Group => STOP_GRACE,
        }
    }

    /// Reads what bwrap wrote so far, without waiting, until its child-pid record is seen; then
    /// holds a pidfd on that init (checked to be a PID namespace's init: a pid already freed
    /// and reused names some other process, which is not).
    pub(super) fn watch(&mut self) {
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
    pub(super) fn ending(&mut self, leader: Pid) {
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
    pub(super) fn kill_init(&self) {
        if let Some(init) = &self.init {
            pidfd_kill(init);
        }
    }

    /// Waits (bounded) until the whole tree is known gone; true when it is.
    pub(super) fn settle(&mut self) -> bool {
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
    sandbox::liveness::stat_field(&stat, 1)?.parse().ok()
}
