//! The monitor: the launcher's parent half. It forks the payload's process, outlives it as a child
//! subreaper, kills and reaps every process left below it, and mirrors how the payload ended.

use std::process::ExitCode;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::prctl;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill};
use nix::unistd::{ForkResult, Pid, getpid, getppid};

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
}

/// The payload's half of the fork.
pub struct Payload {
    monitor: Pid,
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
    // SAFETY: the launcher is single-threaded (no thread is ever spawned), so the child may run
    // any code, allocation included, exactly as the parent would.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() };
    match forked.map_err(|e| format!("cannot fork: {e}"))? {
        ForkResult::Child => Ok(Side::Payload(Payload {
            monitor,
            sigchld_ignored,
            inherited_mask,
        })),
        ForkResult::Parent { child } => Ok(Side::Monitor(Monitor {
            payload: child,
            watched,
        })),
    }
}

impl Payload {
    /// Dies with the monitor, checks the monitor did not die already, and gives back what the
    /// monitor changed for itself: the SIGCHLD disposition and the blocked-signal mask, which
    /// `execve` keeps (a payload with SIGTERM still blocked would shrug it off).
    pub fn settle(&self) -> Result<(), String> {
        prctl::set_pdeathsig(Signal::SIGKILL)
            .map_err(|e| format!("cannot ask for a signal when the monitor dies: {e}"))?;
        if getppid() != self.monitor {
            return Err("the monitor exited before the payload started".into());
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
    /// Waits for the payload or a terminating signal, kills and reaps every process left below
    /// the monitor, then ends as the payload did (or by the signal the monitor received).
    pub fn supervise(self) -> ExitCode {
        let ending = loop {
            match self.watched.wait() {
                Ok(Signal::SIGCHLD) => {
                    if let Some(ending) = self.reap_ready() {
                        break ending;
                    }
                }
                Ok(sig) => break Ending::Signal(sig as i32),
                Err(e) => {
                    eprintln!(
                        "{}cannot wait for signals: {e}",
                        landlock_run::DIAGNOSTIC_PREFIX
                    );
                    break Ending::Code(landlock_run::FAILURE_EXIT_CODE);
                }
            }
        };
        kill_descendants();
        match ending {
            Ending::Code(code) => ExitCode::from(u8::try_from(code & 0xff).unwrap_or(u8::MAX)),
            Ending::Signal(sig) => die_by(sig),
        }
    }

    /// Reaps every child that has ended; returns how the payload ended once it has.
    fn reap_ready(&self) -> Option<Ending> {
        loop {
            match wait_any(libc::WNOHANG) {
                Ok(Some((pid, status))) if pid == self.payload.as_raw() => {
                    if libc::WIFEXITED(status) {
                        return Some(Ending::Code(libc::WEXITSTATUS(status)));
                    }
                    if libc::WIFSIGNALED(status) {
                        return Some(Ending::Signal(libc::WTERMSIG(status)));
                    }
                }
                // An orphan that ended on its own.
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(Errno::EINTR) => {}
                Err(e) => {
                    eprintln!(
                        "{}lost the payload's exit status: {e}",
                        landlock_run::DIAGNOSTIC_PREFIX
                    );
                    return Some(Ending::Code(landlock_run::FAILURE_EXIT_CODE));
                }
            }
        }
    }
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

/// Kills (`SIGKILL`) every child of the monitor and reaps it, until the monitor has no child
/// left. Orphans below a killed child are reparented to the monitor (the subreaper) and killed on
/// the next round, so the whole tree goes, whatever sessions or process groups it made.
fn kill_descendants() {
    let mut children = None;
    loop {
        match wait_any(libc::WNOHANG) {
            Ok(Some(_)) | Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => return,
            Err(e) => return reap_failed(e),
            // Some child is still alive.
            Ok(None) => {}
        }
        let path = children
            .get_or_insert_with(|| format!("/proc/self/task/{}/children", std::process::id()));
        let kids = list_children(path);
        for &pid in &kids {
            // A zombie or an already-dying child refuses nothing that matters here.
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        if kids.is_empty() {
            // A child the listing did not show yet: list again shortly.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        match wait_any(0) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(Errno::ECHILD) => return,
            Err(e) => return reap_failed(e),
        }
    }
}

fn reap_failed(e: Errno) {
    eprintln!(
        "{}cannot reap the payload's processes: {e}",
        landlock_run::DIAGNOSTIC_PREFIX
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
                .and_then(|stat| {
                    // "pid (comm) state ppid ...": comm may hold anything but the last ')'.
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_ascii_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(me)
        })
        .collect()
}

/// Ends the monitor by `sig`, as the payload ended, without leaving a core file of the monitor.
/// Falls back to the shell convention `128 + sig` should the signal not end it.
#[allow(unsafe_code)]
fn die_by(sig: i32) -> ExitCode {
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
