//! Nothing a certification started outlives it: `certify` runs as the child of a small
//! supervisor of its own that is a child subreaper (`PR_SET_CHILD_SUBREAPER`). Every process of
//! the run whose parent dies (a backend's payload that detached, a runner that left its tree
//! behind, a fixture that confines nothing) is reparented to the supervisor, which reaps it; when
//! certify exits, the supervisor kills every process still below it (round after round, so what
//! they fork meanwhile goes too), says how many there were, and exits with certify's status.
//!
//! Survivors of a case are found (by their tag) and failed at the end of that case
//! (`steps::run_case`); what left no tag (a payload that dropped it from its environment) is
//! found once the last case has ended, by a scan of every process below the supervisor
//! (`survivors::left_by_run`), and fails the run; the supervisor kills whatever is still
//! below it when certify exits (a case still running when certify stopped, or a process started
//! after that scan).
//!
//! A child subreaper is Linux's (`prctl`); elsewhere certify runs unsupervised and says so.

use std::process::ExitCode;
#[cfg(target_os = "linux")]
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use nix::sys::signal::{SigSet, Signal, kill};
#[cfg(target_os = "linux")]
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
#[cfg(target_os = "linux")]
use nix::unistd::Pid;

/// Set in the supervised certify's environment.
const SUPERVISED: &str = "CONFORMANCE_CERTIFY_SUPERVISED";

/// How long killing what the run left may take.
#[cfg(target_os = "linux")]
const KILL_BOUND: Duration = Duration::from_secs(10);

/// The process every process of this run descends from: the supervisor when certify runs below
/// one (its pid as it named itself in `CONFORMANCE_CERTIFY_SUPERVISED`, never whatever is this
/// process's parent now), else this process. The run-end scan (`survivors::left_by_run`) looks
/// below it.
pub fn run_root() -> u32 {
    #[cfg(target_os = "linux")]
    if let Some(supervisor) = supervisor() {
        return supervisor;
    }
    std::process::id()
}

/// The supervisor's pid, when certify runs below one.
#[cfg(target_os = "linux")]
fn supervisor() -> Option<u32> {
    let named = std::env::var(SUPERVISED).ok()?;
    Some(
        named
            .parse()
            .unwrap_or_else(|_| std::os::unix::process::parent_id()),
    )
}

/// The supervisor's pid when it is gone (killed during the run: this process was reparented),
/// so its descendants can no longer be told from the host's processes.
pub fn supervisor_gone() -> Option<u32> {
    #[cfg(target_os = "linux")]
    if let Some(supervisor) = supervisor() {
        return (std::os::unix::process::parent_id() != supervisor).then_some(supervisor);
    }
    None
}

/// Makes this process certify's supervisor: `None` in the supervised certify itself (go on and
/// certify), or when this host cannot supervise (said on stderr, certify then runs unsupervised);
/// `Some(status)` in the supervisor, once certify and everything below it are gone.
#[cfg(not(target_os = "linux"))]
pub fn supervise(name: &str) -> Option<ExitCode> {
    if std::env::var_os(SUPERVISED).is_none() {
        eprintln!(
            "{name}: no child subreaper on {} (it is Linux's): processes the run leaves may outlive it",
            std::env::consts::OS
        );
    }
    None
}

/// Makes this process certify's supervisor: `None` in the supervised certify itself (go on and
/// certify), or when this host cannot supervise (said on stderr, certify then runs unsupervised);
/// `Some(status)` in the supervisor, once certify and everything below it are gone.
#[cfg(target_os = "linux")]
pub fn supervise(name: &str) -> Option<ExitCode> {
    if std::env::var_os(SUPERVISED).is_some() {
        return None;
    }
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!(
            "{name}: cannot become a subreaper ({e}): processes the run leaves may outlive it"
        );
        return None;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("{name}: cannot find its own executable ({e}): running unsupervised");
            return None;
        }
    };
    // Signals meant for certify: the terminal sends Ctrl-C (and a hang-up) to the whole process
    // group, certify included, so one from the kernel is dropped here; one a process sent to this
    // process alone (`kill`) is passed on. Blocked before the child starts (a spawned child
    // starts with none blocked).
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    if let Err(e) = set.thread_block() {
        eprintln!("{name}: cannot block signals ({e}): running unsupervised");
        return None;
    }
    let child = match std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(SUPERVISED, std::process::id().to_string())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("{name}: cannot start the supervised run ({e})");
            return Some(ExitCode::from(2));
        }
    };
    let certify = Pid::from_raw(child.id() as i32);
    std::thread::spawn(move || {
        while let Some((signal, sent)) = wait_signal(&set) {
            if sent {
                let _ = kill(certify, signal);
            }
        }
    });
    // Reap everything until certify itself ends (`child` is never waited through std: this loop
    // reaps it).
    let status = loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == certify => break code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == certify => {
                break 128 + signal as i32;
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break 1,
        }
    };
    drop(child);
    let left = kill_descendants();
    if left > 0 {
        eprintln!("{name}: killed {left} process(es) the run left behind");
    }
    Some(ExitCode::from(u8::try_from(status).unwrap_or(1)))
}

/// Waits for one of `set`: the signal, and whether a process sent it (`kill`, `sigqueue`) rather
/// than the kernel (the terminal's Ctrl-C). `None` when waiting failed.
#[cfg(target_os = "linux")]
fn wait_signal(set: &SigSet) -> Option<(Signal, bool)> {
    loop {
        let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
        // SAFETY: sigwaitinfo(2) reads the signal set (a valid sigset_t borrowed for the call)
        // and writes one siginfo_t into `info`, which is zeroed, sized for it and alive for the
        // call; nix has no wrapper that returns the siginfo.
        #[allow(unsafe_code)]
        let n = unsafe { libc::sigwaitinfo(set.as_ref(), info.as_mut_ptr()) };
        if n < 0 {
            if nix::errno::Errno::last() == nix::errno::Errno::EINTR {
                continue;
            }
            return None;
        }
        // SAFETY: sigwaitinfo returned a signal, so it filled `info` in.
        #[allow(unsafe_code)]
        let info = unsafe { info.assume_init() };
        let signal = Signal::try_from(n).ok()?;
        return Some((
            signal,
            info.si_code == libc::SI_USER || info.si_code == libc::SI_QUEUE,
        ));
    }
}

/// Kills every process below this one (its children; theirs are reparented here as they die),
/// round after round, reaping them, until none is left or [`KILL_BOUND`]. Returns how many were
/// killed.
#[cfg(target_os = "linux")]
fn kill_descendants() -> usize {
    let me = std::process::id() as i32;
    let deadline = Instant::now() + KILL_BOUND;
    let mut killed = std::collections::BTreeSet::new();
    loop {
        let children = children_of(me);
        for pid in &children {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGSTOP);
        }
        for pid in &children {
            if kill(Pid::from_raw(*pid), Signal::SIGKILL).is_ok() {
                killed.insert(*pid);
            }
        }
        // Reap whatever ended.
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        if matches!(
            waitpid(None, Some(WaitPidFlag::WNOHANG)),
            Err(nix::errno::Errno::ECHILD)
        ) || Instant::now() >= deadline
        {
            return killed.len();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The live (not yet reaped) children of `parent` (this process): from the kernel's own lists
/// (`/proc/self/task/*/children`), which a mount over `/proc/<pid>` cannot hide, else (a kernel
/// without `CONFIG_PROC_CHILDREN`) from the parent field of every process. A zombie whose every
/// thread has exited is left out; one whose leader ended while a thread runs on is kept.
#[cfg(target_os = "linux")]
fn children_of(parent: i32) -> Vec<i32> {
    let alive = |pid: &i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            let state = sandbox::liveness::stat_field(&stat, 0);
            !matches!(state, Some("Z" | "X")) || sandbox::liveness::can_run(pid.unsigned_abs())
        })
    };
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        let mut listed = false;
        let mut found = Vec::new();
        for task in tasks.filter_map(Result::ok) {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                listed = true;
                found.extend(
                    text.split_ascii_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
        }
        if listed {
            found.sort_unstable();
            found.dedup();
            return found.into_iter().filter(|p| alive(p)).collect();
        }
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let ppid: i32 = sandbox::liveness::stat_field(&stat, 1)?.parse().ok()?;
                    Some(ppid == parent)
                })
                .unwrap_or(false)
        })
        .filter(|p| alive(p))
        .collect()
}
