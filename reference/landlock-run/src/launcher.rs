//! The launcher itself (Linux only): fork a monitor, restrict the payload's process with a
//! Landlock ruleset, drop its capabilities and stray descriptors, then exec the payload. See the
//! crate documentation for the command-line contract; [`crate::run`] is the entry point.

use crate::cli::{Invocation, LaunchArgs as Launch, Namespace};
use crate::{emulate, harden, init, monitor, notify, protect};
use sandbox::status::Record;

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

use crate::{
    DIAGNOSTIC_PREFIX, FAILURE_EXIT_CODE, FULL_ENFORCEMENT_ABI, PARTIAL_NOTICE,
    SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL, SCOPING_ABI, net,
};
use landlock::{
    ABI, Access, AccessFs, LandlockStatus, PathBeneath, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
};
use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};

/// Set in the launch's init when the launch has a PID namespace of its own (the processes it
/// forks inherit it): the payload's guard then need not keep it from the host's processes.
static OWN_PID_NAMESPACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A launcher failure: printed with the prefix, reported on the status channel, exit 125. The
/// variant says which part of the launch failed; the text is what the caller reads.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// The command line is wrong.
    #[error("{0}")]
    Usage(String),
    /// The status descriptor the caller passed cannot be used.
    #[error("{0}")]
    StatusFd(String),
    /// A `--ro` or `--rw` path cannot be opened as given (missing, or not canonical).
    #[error("{0}")]
    Path(String),
    /// Landlock could not be set up or is not enforced here.
    #[error("{0}")]
    Landlock(String),
    /// The protected paths could not be bound read-only in a private mount namespace.
    #[error("{0}")]
    Protect(String),
    /// The monitor or the payload's process could not be set up or hardened (fork, session,
    /// capabilities, descriptors, the setuid guard).
    #[error("{0}")]
    Harden(String),
}

/// Parses the process's arguments and launches, probes or fails (exit [`FAILURE_EXIT_CODE`]).
pub(crate) fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let invocation = match Invocation::parse(args) {
        Ok(invocation) => invocation,
        Err(usage) => return fail(None, &Failure::Usage(usage.0).to_string()),
    };
    match invocation {
        Invocation::Probe { abi_cap } => crate::probe::probe(abi_cap),
        Invocation::ProbeChild { abi_cap, target } => crate::probe::probe_child(abi_cap, &target),
        Invocation::Launch(launch) => {
            // Before this process opens anything: a number that is not an inherited directory
            // now would later name a descriptor of the launcher's own.
            if let Some(fd) = launch.stage_fd.filter(|_| launch.prevent)
                && !inherited_directory(fd)
            {
                let msg = format!(
                    "--stage-fd {fd} is not an open directory handed to the launcher (an argv \
                     carried to another process leaves its descriptors behind)"
                );
                return fail(None, &msg);
            }
            let mut status = match launch.status_fd.map(open_status_fd).transpose() {
                Ok(s) => s,
                Err(failure) => return fail(None, &failure.to_string()),
            };
            if launch.pid_namespace || launch.prevent {
                return launch_with_init(&launch, status);
            }
            match monitor::fork() {
                Err(msg) => fail(status.as_mut(), &msg),
                Ok(monitor::Side::Monitor(monitor)) => {
                    // Only the payload's process writes records.
                    drop(status);
                    monitor.supervise()
                }
                Ok(monitor::Side::Payload(payload)) => match prepare(&launch, &payload) {
                    Ok(()) => exec(&launch.payload, status.as_mut()),
                    Err(failure) => fail(status.as_mut(), &failure.to_string()),
                },
            }
        }
    }
}

/// A launch with an init (a PID namespace of its own, or an emulator): the monitor, then the
/// init ([`crate::init`]), then the emulator when asked, then the payload.
fn launch_with_init(launch: &Launch, mut status: Option<File>) -> ExitCode {
    let own_namespace = match launch.pid_namespace {
        false => false,
        true => match init::new_pid_namespace_for_children() {
            Ok(made) => made,
            Err(msg) => return fail(status.as_mut(), &msg),
        },
    };
    OWN_PID_NAMESPACE.store(own_namespace, std::sync::atomic::Ordering::Relaxed);
    let pipe = if own_namespace {
        match init::ending_pipe() {
            Ok(p) => Some(p),
            Err(msg) => return fail(status.as_mut(), &msg),
        }
    } else {
        None
    };
    match monitor::fork() {
        Err(msg) => fail(status.as_mut(), &msg),
        Ok(monitor::Side::Monitor(mut monitor)) => {
            drop(status);
            if let Some((read, write)) = pipe {
                drop(write);
                monitor = monitor.with_ending(read);
            }
            monitor.supervise()
        }
        Ok(monitor::Side::Payload(payload)) => {
            let report = pipe.map(|(read, write)| {
                drop(read);
                write
            });
            let can_mount = match outer(launch, &payload, own_namespace) {
                Ok(m) => m,
                Err(failure) => return fail(status.as_mut(), &failure.to_string()),
            };
            run_init(launch, status, report, can_mount)
        }
    }
}

/// Whether `fd` is open in this process and names a directory.
fn inherited_directory(fd: i32) -> bool {
    // SAFETY: fstat on a raw number only reads into the buffer given (EBADF when not open); the
    // number is not taken over here.
    #[allow(unsafe_code)]
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR
    }
}

/// In the init: forks the rest of the launch, serves it, and ends as it ended.
fn run_init(
    launch: &Launch,
    mut status: Option<File>,
    report: Option<OwnedFd>,
    can_mount: bool,
) -> ExitCode {
    let stage_fd = launch.stage_fd.filter(|_| launch.prevent && can_mount);
    let channel = match stage_fd.map(init::stage_channel).transpose() {
        Ok(c) => c,
        Err(msg) => return fail(status.as_mut(), &msg),
    };
    let (mut server, client) = match channel {
        Some((s, c)) => (Some(s), Some(c)),
        None => (None, None),
    };
    let init_pid = nix::unistd::getpid();
    // SAFETY: the launcher is single-threaded (no thread is ever spawned before this fork), so
    // the child may run any code, allocation included, exactly as the parent would.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() };
    match forked {
        Err(e) => fail(status.as_mut(), &format!("cannot fork: {e}")),
        Ok(nix::unistd::ForkResult::Child) => {
            drop(server);
            drop(report);
            if let Err(failure) = follow_parent(init_pid) {
                return fail(status.as_mut(), &failure.to_string());
            }
            // Without a mount namespace nothing can be staged, and a refused `git init` or
            // `git worktree add` would break git's own work: the check after the call stays the
            // only one there (the protected class is reported not-governed on such a host).
            if launch.prevent && can_mount {
                emulate_and_run(launch, status, client)
            } else {
                match inner(launch) {
                    Ok(()) => exec(&launch.payload, status.as_mut()),
                    Err(failure) => fail(status.as_mut(), &failure.to_string()),
                }
            }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(status);
            drop(client);
            let ending = init::wait_serving(child, server.as_mut());
            if let Some(s) = &server {
                s.finish();
            }
            init::empty_the_namespace();
            match (report, ending) {
                (Some(pipe), e) => {
                    init::report_ending(&pipe, e);
                    ExitCode::from(exit_byte(e))
                }
                (None, init::Ending::Code(c)) => {
                    ExitCode::from(u8::try_from(c & 0xff).unwrap_or(u8::MAX))
                }
                (None, init::Ending::Signal(sig)) => monitor::die_by(sig),
            }
        }
    }
}

/// The exit status byte of an ending (a death by signal as the shell spells it).
fn exit_byte(e: init::Ending) -> u8 {
    match e {
        init::Ending::Code(c) => u8::try_from(c & 0xff).unwrap_or(u8::MAX),
        init::Ending::Signal(s) => u8::try_from(128 + s).unwrap_or(u8::MAX),
    }
}

/// Dies with `parent` (`SIGKILL`), and fails when it is already gone.
fn follow_parent(parent: nix::unistd::Pid) -> Result<(), Failure> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(|e| {
        Failure::Harden(format!("cannot ask for a signal when the parent dies: {e}"))
    })?;
    if nix::unistd::getppid() != parent {
        return Err(Failure::Harden(
            "the launcher's parent exited before the payload started".into(),
        ));
    }
    Ok(())
}

/// In the emulator's process: restrict like the payload, fork the payload (which restricts once
/// more and hands back its listener), then answer its calls until it ends, and end as it did.
fn emulate_and_run(
    launch: &Launch,
    mut status: Option<File>,
    stager: Option<init::StageClient>,
) -> ExitCode {
    let me = nix::unistd::getpid();
    let setup = restrict_quietly(launch)
        .and_then(|()| harden::drop_capabilities().map_err(Failure::Harden))
        .and_then(|()| {
            nix::sys::socket::socketpair(
                nix::sys::socket::AddressFamily::Unix,
                nix::sys::socket::SockType::SeqPacket,
                None,
                nix::sys::socket::SockFlag::SOCK_CLOEXEC,
            )
            .map_err(|e| Failure::Harden(format!("cannot make the emulator's channel: {e}")))
        });
    let (mine, theirs) = match setup {
        Ok(pair) => pair,
        Err(failure) => return fail(status.as_mut(), &failure.to_string()),
    };
    // SAFETY: the launcher is still single-threaded here (the emulator's threads start only
    // after this fork), so the child may run any code.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() };
    match forked {
        Err(e) => fail(status.as_mut(), &format!("cannot fork: {e}")),
        Ok(nix::unistd::ForkResult::Child) => {
            drop(mine);
            let ready = follow_parent(me)
                .and_then(|()| inner(launch))
                .and_then(|()| notify::install().map_err(Failure::Harden))
                .and_then(|listener| init::send_fd(&theirs, &listener).map_err(Failure::Harden));
            drop(theirs);
            match ready {
                Ok(()) => exec(&launch.payload, status.as_mut()),
                Err(failure) => fail(status.as_mut(), &failure.to_string()),
            }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(status);
            drop(theirs);
            let listener = init::recv_fd(&mine);
            drop(mine);
            let mut rules = emulate::rules::Rules::new(
                launch.anchors.clone(),
                launch.protected_rel.clone(),
                launch.protected_names.clone(),
                stager.is_some(),
            );
            rules.truncate_ungoverned = launch.abi_cap.is_some_and(|cap| cap < 3);
            let ending = match listener {
                Some(l) => {
                    let stager = stager.map(|s| Box::new(s) as Box<dyn emulate::Stager>);
                    let mut emulator =
                        emulate::Emulator::new(notify::Listener::new(l), rules, stager);
                    serve(&mut emulator, child)
                }
                // The payload's process failed before it could hand its listener over (and
                // said why on the status channel): wait for it.
                None => init::wait_serving(child, None),
            };
            match ending {
                init::Ending::Code(c) => ExitCode::from(u8::try_from(c & 0xff).unwrap_or(u8::MAX)),
                init::Ending::Signal(sig) => monitor::die_by(sig),
            }
        }
    }
}

/// Answers the payload's stopped calls until `child` (the payload's own process) ends.
fn serve(emulator: &mut emulate::Emulator, child: nix::unistd::Pid) -> init::Ending {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let pidfd = monitor::pidfd_open(child).ok();
    loop {
        match init::reap(child) {
            Ok(Some(ending)) => return ending,
            Ok(None) => {}
            Err(e) => {
                eprintln!("{DIAGNOSTIC_PREFIX}the emulator lost the payload: {e}");
                return init::Ending::Code(FAILURE_EXIT_CODE);
            }
        }
        let mut fds = vec![PollFd::new(emulator.fd(), PollFlags::POLLIN)];
        if let Some(p) = &pidfd {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
        }
        let _ = poll(&mut fds, PollTimeout::NONE);
        let call = fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLIN));
        let hangup = fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR));
        drop(fds);
        if call {
            emulator.handle_one();
        } else if hangup && pidfd.is_none() {
            // No process holds the filter any more and the pidfd is missing: wait for the end.
            return init::wait_serving(child, None);
        }
    }
}

/// In the payload's process, in order: settle under the monitor, leave the caller's session (no
/// controlling terminal, so no `TIOCSTI` keystroke injection into the caller's shell; the monitor,
/// still in the caller's process group, is what stops the tree), restrict, drop capabilities,
/// keep every descriptor above 2 from crossing the exec, refuse the setuid and setgid bits.
fn prepare(launch: &Launch, payload: &monitor::Payload) -> Result<(), Failure> {
    outer(launch, payload, false)?;
    inner(launch)
}

/// Settles under the monitor, leaves the caller's session and makes the launch's mounts (the
/// protected paths; with `own_pid_namespace`, a `/proc` of that namespace). Returns whether the
/// launch has a mount namespace of its own (where git directories can be staged).
fn outer(
    launch: &Launch,
    payload: &monitor::Payload,
    own_pid_namespace: bool,
) -> Result<bool, Failure> {
    payload.settle().map_err(Failure::Harden)?;
    nix::unistd::setsid()
        .map_err(|e| Failure::Harden(format!("cannot start a new session for the payload: {e}")))?;
    let wanted = own_pid_namespace
        || (launch.prevent && launch.stage_fd.is_some())
        || launch.tmp_area.is_some();
    let mounted =
        protect::apply(&launch.pinned, &launch.protected, wanted).map_err(Failure::Protect)?;
    if let Some(area) = &launch.tmp_area {
        if !mounted {
            return Err(Failure::Protect(
                "cannot make a mount namespace for the private temp area (--tmp-area)".into(),
            ));
        }
        let roots: Vec<std::path::PathBuf> =
            launch.read_write.iter().map(|r| r.path.clone()).collect();
        crate::tmp_area::mount_at_tmp(area, &roots).map_err(Failure::Protect)?;
    }
    if let Some(dir) = &launch.tmpdir {
        crate::tmp_area::set_tmpdir(dir);
    }
    if own_pid_namespace {
        if !mounted {
            return Err(Failure::Protect(
                "cannot make a mount namespace for the PID namespace's /proc".into(),
            ));
        }
        init::mount_proc().map_err(Failure::Protect)?;
    }
    Ok(mounted)
}

/// Restricts this process, drops its capabilities and stray descriptors and installs the guards:
/// the payload's own process, just before exec.
fn inner(launch: &Launch) -> Result<(), Failure> {
    if let Some(bytes) = launch.memory {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_DATA, bytes, bytes)
            .map_err(|e| Failure::Harden(format!("cannot limit the payload's memory: {e}")))?;
    }
    restrict(launch)?;
    harden::drop_capabilities().map_err(Failure::Harden)?;
    harden::cloexec_above_stderr().map_err(Failure::Harden)?;
    // Last: the launcher itself needs none of what it refuses.
    if launch.net_restricted && net::wants_net(launch.abi_cap) {
        net::install_net_guard().map_err(Failure::Harden)?;
    }
    if launch.unguarded {
        return Ok(());
    }
    let host_pids = launch.pids == Namespace::Host
        && !OWN_PID_NAMESPACE.load(std::sync::atomic::Ordering::Relaxed);
    let ipc = match launch.ipc {
        Namespace::Private => harden::IpcGuard::PrivateNamespace,
        Namespace::Host => harden::IpcGuard::HostNamespace,
    };
    let unix_sockets = if launch.allow_unix_sockets {
        harden::UnixSockets::StreamAllowed
    } else {
        harden::UnixSockets::Refused
    };
    harden::install_setuid_guard(ipc, unix_sockets, host_pids).map_err(Failure::Harden)
}

/// Takes ownership of the status descriptor our parent handed us and marks it close-on-exec so
/// the payload never inherits it (it could otherwise forge records).
fn open_status_fd(fd: i32) -> Result<File, Failure> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: `fcntl(F_GETFD)` on a raw descriptor number only reads its flags (EBADF when it is
    // not open); neither std nor nix can ask about a descriptor nothing owns yet. Asking the
    // kernel directly keeps `/proc` off the launch path.
    #[allow(unsafe_code)]
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(Failure::StatusFd(format!(
            "--status-fd {fd} is not an open descriptor"
        )));
    }
    // SAFETY: std has no safe way to adopt an inherited descriptor by number. The parent passed
    // `fd` to this process for exactly this use, we checked it is open, and nothing else in this
    // process refers to it, so taking sole ownership once is sound.
    #[allow(unsafe_code)]
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let flags = nix::fcntl::FdFlag::FD_CLOEXEC;
    nix::fcntl::fcntl(&owned, nix::fcntl::FcntlArg::F_SETFD(flags)).map_err(|e| {
        Failure::StatusFd(format!("cannot mark --status-fd {fd} close-on-exec: {e}"))
    })?;
    Ok(File::from(owned))
}

/// Writes one status record ([`Record::to_line`]) in a single `write(2)`.
fn record(status: Option<&mut File>, record: Record) {
    if let Some(f) = status {
        // A status write failing must not change what happens: the consumer treats a missing
        // record as "never ran", which fails closed.
        let _ = f.write_all(record.to_line().as_bytes());
    }
}

pub(crate) fn fail(status: Option<&mut File>, msg: &str) -> ExitCode {
    let line = format!("{DIAGNOSTIC_PREFIX}{msg}");
    record(status, Record::Error(line.clone()));
    eprintln!("{line}");
    ExitCode::from(FAILURE_EXIT_CODE as u8)
}

/// The ABI the launcher targets: the cap when given, otherwise the ABI that governs every promised
/// effect (newer ABIs add nothing the modes promise).
pub(crate) fn target_abi(cap: Option<u32>) -> ABI {
    match cap
        .unwrap_or(FULL_ENFORCEMENT_ABI)
        .min(FULL_ENFORCEMENT_ABI)
    {
        1 => ABI::V1,
        2 => ABI::V2,
        _ => ABI::V3,
    }
}

fn abi_number(abi: ABI) -> u32 {
    match abi {
        ABI::Unsupported => 0,
        ABI::V1 => 1,
        ABI::V2 => 2,
        ABI::V3 => 3,
        ABI::V4 => 4,
        ABI::V5 => 5,
        ABI::V6 => 6,
        ABI::V7 => 7,
        ABI::V8 => 8,
        ABI::V9 => 9,
        _ => 10,
    }
}

/// Whether a launch capped at `cap` scopes signals and abstract unix sockets (capping only
/// weakens: below ABI 6 it does not).
pub(crate) fn wants_scope(cap: Option<u32>) -> bool {
    cap.is_none_or(|c| c >= SCOPING_ABI)
}

/// A ruleset governing every write at `abi`, scoped when `scope` (best effort: a kernel below
/// ABI 6 drops the scopes, and [`scoped`] then reports none), and denying TCP when `net` (best
/// effort below ABI 4, reported by `net::governed`).
pub(crate) fn ruleset(abi: ABI, scope: bool, net: bool) -> Result<RulesetCreated, RulesetError> {
    let mut attr = Ruleset::default().handle_access(governed(abi))?;
    if net {
        attr = net::handle_tcp(attr)?;
    }
    if scope {
        attr = attr.scope(Scope::from_all(ABI::V6))?;
    }
    attr.create()
}

/// The scopes actually in force after a restriction that asked for them when `wanted`.
pub(crate) fn scoped(status: LandlockStatus, wanted: bool) -> Vec<&'static str> {
    let kernel_scopes = match status {
        LandlockStatus::Available { effective_abi, .. } => abi_number(effective_abi) >= SCOPING_ABI,
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => false,
    };
    if wanted && kernel_scopes {
        vec![SCOPE_SIGNAL, SCOPE_ABSTRACT_UNIX_SOCKET]
    } else {
        Vec::new()
    }
}

/// The write rights the launcher governs at `abi`. Reads are not governed: the modes promise
/// nothing about them.
fn governed(abi: ABI) -> landlock::BitFlags<AccessFs> {
    AccessFs::from_write(abi) & !AccessFs::IoctlDev
}

/// The kernel's own Landlock ABI number.
pub(crate) fn kernel_abi(status: LandlockStatus) -> u32 {
    match status {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => kernel_abi
            .and_then(|k| u32::try_from(k).ok())
            .unwrap_or_else(|| abi_number(effective_abi)),
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => 0,
    }
}

/// The ABI actually in force: the kernel's effective ABI lowered to what we asked for.
pub(crate) fn effective_abi(status: LandlockStatus, target: ABI) -> u32 {
    match status {
        LandlockStatus::Available { effective_abi, .. } => {
            abi_number(effective_abi).min(abi_number(target))
        }
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => 0,
    }
}

fn restrict(launch: &Launch) -> Result<(), Failure> {
    restrict_with(launch, true)
}

/// [`restrict`] without the partial-enforcement notice (the emulator's own restriction: the
/// payload's prints it).
fn restrict_quietly(launch: &Launch) -> Result<(), Failure> {
    restrict_with(launch, false)
}

fn restrict_with(launch: &Launch, notice: bool) -> Result<(), Failure> {
    let abi = target_abi(launch.abi_cap);
    let handled = governed(abi);
    let net = launch.net_restricted && net::wants_net(launch.abi_cap);
    let mut ruleset = ruleset(abi, wants_scope(launch.abi_cap), net)
        .map_err(|e| Failure::Landlock(format!("cannot create a Landlock ruleset: {e}")))?;
    for path in &launch.read_only {
        // Reads are ungoverned; opening the path still proves it exists, as a profile expects.
        open_canonical(path, "--ro")?;
    }
    for crate::cli::WritableRoot {
        path,
        identity: want,
    } in &launch.read_write
    {
        let fd = open_canonical(path, "--rw")?;
        let st = nix::sys::stat::fstat(&fd).map_err(|e| {
            Failure::Path(format!("cannot inspect {} for --rw: {e}", path.display()))
        })?;
        // What the caller pinned and handed its runner (bwrap's --bind-fd) must be what is here:
        // a swap that raced the runner's mount put another directory at this path.
        if let Some((dev, ino)) = *want
            && (st.st_dev as u64, st.st_ino as u64) != (dev, ino)
        {
            return Err(Failure::Path(format!(
                "{} is not the directory pinned for it (WORKSPACE_MOVED: device:inode {dev}:{ino} \
                 expected, {}:{} found here): a swap raced the bind",
                path.display(),
                st.st_dev,
                st.st_ino
            )));
        }
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        let access = if is_dir {
            handled
        } else {
            handled & AccessFs::from_file(abi)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| Failure::Landlock(format!("cannot grant {}: {e}", path.display())))?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(|e| Failure::Landlock(format!("cannot restrict this process: {e}")))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(Failure::Landlock(
            "the kernel does not enforce Landlock (not built in, or not enabled at boot)".into(),
        ));
    }
    if !status.no_new_privs {
        return Err(Failure::Harden("no_new_privs could not be set".into()));
    }
    if notice && effective_abi(status.landlock, abi) < FULL_ENFORCEMENT_ABI {
        eprintln!("{PARTIAL_NOTICE}");
    }
    Ok(())
}

/// Opens a `--ro` or `--rw` path (`O_PATH`) without following any symlink in any component
/// (`openat2` with `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`). The provider passes canonical
/// paths, so a symlink here is either a caller's mistake or a swap race: a process that can
/// rename inside a granted parent exchanging the granted directory with a symlink to the outside
/// while the launcher opens it. Either way the launch fails closed, naming the path; the rule is
/// then attached to the inode opened here, whatever the name points at later.
fn open_canonical(path: &Path, flag: &str) -> Result<OwnedFd, Failure> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let opened = match nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how) {
        // A launcher started inside another launch (whose setuid guard refuses openat2), or a
        // kernel before 5.6: the same refusal, one component at a time.
        Err(Errno::ENOSYS) => open_by_components(path),
        other => other,
    };
    opened.map_err(|e| {
        Failure::Path(match e {
            Errno::ELOOP => format!(
                "cannot open {} for {flag}: a component is a symbolic link (the path must be canonical)",
                path.display()
            ),
            e => format!("cannot open {} for {flag}: {}", path.display(), e.desc()),
        })
    })
}

/// [`open_canonical`] without `openat2`: each component is opened relative to the descriptor of
/// the previous one with `O_PATH | O_NOFOLLOW`, which opens a symlink (magic links included)
/// itself instead of following it, and a symlink is refused (`ELOOP`). No name is resolved twice,
/// so a concurrent swap cannot slip a symlink in between a check and a use.
fn open_by_components(path: &Path) -> Result<OwnedFd, Errno> {
    use std::path::Component;
    let flags = OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
    let none = nix::sys::stat::Mode::empty();
    let start = if path.is_absolute() { "/" } else { "." };
    let mut fd = nix::fcntl::open(start, flags | OFlag::O_DIRECTORY, none)?;
    for component in path.components() {
        let name: &std::ffi::OsStr = match component {
            Component::RootDir | Component::CurDir => continue,
            Component::ParentDir => "..".as_ref(),
            Component::Normal(name) => name,
            Component::Prefix(_) => return Err(Errno::EINVAL),
        };
        let next = nix::fcntl::openat(&fd, name, flags, none)?;
        if nix::sys::stat::fstat(&next)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(Errno::ELOOP);
        }
        fd = next;
    }
    Ok(fd)
}

fn exec(payload: &[OsString], mut status: Option<&mut File>) -> ExitCode {
    let program = &payload[0];
    record(
        status.as_deref_mut(),
        Record::Exec(program.to_string_lossy().into_owned()),
    );
    let err = Command::new(program).args(&payload[1..]).exec();
    let line = format!(
        "{DIAGNOSTIC_PREFIX}cannot execute {}: {err}",
        program.to_string_lossy()
    );
    record(status, Record::ExecFailed(line.clone()));
    eprintln!("{line}");
    ExitCode::from(FAILURE_EXIT_CODE as u8)
}
