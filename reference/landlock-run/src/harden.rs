//! What the payload's process does to itself after the Landlock restriction and before exec: drop
//! every capability and keep every descriptor above 2 from crossing the exec.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// The capability that allows emptying the bounding set.
const CAP_SETPCAP: u32 = 8;

/// The highest capability number a 64-bit capability word can hold.
const CAP_LAST_REPRESENTABLE: u32 = 63;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`, one 32-bit word of each set.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

type CapSets = [CapData; 2];

fn header() -> CapHeader {
    CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    }
}

/// This thread's effective, permitted and inheritable sets.
#[allow(unsafe_code)]
fn capget() -> io::Result<CapSets> {
    let mut hdr = header();
    let mut data = CapSets::default();
    // SAFETY: capget(2) with a version-3 header writes exactly two `__user_cap_data_struct`s,
    // which `data` provides; both pointers are valid for the duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc == 0 {
        Ok(data)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Replaces this thread's effective, permitted and inheritable sets.
#[allow(unsafe_code)]
fn capset(data: &CapSets) -> io::Result<()> {
    let mut hdr = header();
    // SAFETY: capset(2) with a version-3 header reads exactly two `__user_cap_data_struct`s,
    // which `data` provides; both pointers are valid for the duration of the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `prctl(option, arg2, 0, 0, 0)` for the capability options, which take integer arguments.
#[allow(unsafe_code)]
fn prctl(option: libc::c_int, arg2: libc::c_ulong) -> io::Result<libc::c_int> {
    let zero: libc::c_ulong = 0;
    // SAFETY: PR_CAPBSET_DROP and PR_CAP_AMBIENT take integer arguments only; no pointer is
    // passed and no memory of this process is read or written.
    let rc = unsafe { libc::prctl(option, arg2, zero, zero, zero) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Drops every capability this process holds: the bounding set (when it holds `CAP_SETPCAP`),
/// then the ambient, inheritable, permitted and effective sets. A process that holds none has
/// nothing to drop and succeeds without touching anything. Any failure while capabilities are
/// held is returned: the caller must not exec.
pub fn drop_capabilities() -> Result<(), String> {
    let held = capget().map_err(|e| format!("cannot read this process's capabilities: {e}"))?;
    if held == CapSets::default() {
        // Ambient capabilities are a subset of permitted and inheritable ones: none are held.
        return Ok(());
    }
    let setpcap = 1u32 << CAP_SETPCAP;
    if held[0].permitted & setpcap != 0 {
        if held[0].effective & setpcap == 0 {
            let mut raised = held;
            raised[0].effective |= setpcap;
            capset(&raised).map_err(|e| format!("cannot raise CAP_SETPCAP: {e}"))?;
        }
        drop_bounding_set()?;
    }
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    )
    .map_err(|e| format!("cannot clear the ambient capabilities: {e}"))?;
    capset(&CapSets::default()).map_err(|e| format!("cannot drop capabilities: {e}"))?;
    match capget() {
        Ok(left) if left == CapSets::default() => Ok(()),
        Ok(_) => Err("capabilities are still held after dropping them".into()),
        Err(e) => Err(format!("cannot verify the capability drop: {e}")),
    }
}

/// Drops every capability number from the bounding set, from 0 up to the kernel's last one: the
/// first number the kernel refuses as not a capability (`EINVAL`) ends the loop. Asking the kernel
/// itself instead of reading `/proc/sys/kernel/cap_last_cap` keeps `/proc` off the launch path and
/// works where `/proc` is not mounted.
fn drop_bounding_set() -> Result<(), String> {
    for cap in 0..=CAP_LAST_REPRESENTABLE {
        match prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap)) {
            Ok(_) => {}
            // Past the kernel's last capability (capability 0 always exists).
            Err(e) if cap > 0 && e.raw_os_error() == Some(libc::EINVAL) => return Ok(()),
            Err(e) => {
                return Err(format!(
                    "cannot drop capability {cap} from the bounding set: {e}"
                ));
            }
        }
    }
    Ok(())
}

/// Marks every descriptor above 2 close-on-exec, so only stdin, stdout and stderr reach the
/// payload: `close_range(2)` when the kernel has it, otherwise each entry of `/proc/self/fd`.
#[allow(unsafe_code)]
pub fn cloexec_above_stderr() -> Result<(), String> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only sets the close-on-exec flag of open
    // descriptors; it closes nothing and touches no memory of this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let dir = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("cannot list this process's descriptors: {e}"))?;
    for entry in dir {
        let entry = entry.map_err(|e| format!("cannot list this process's descriptors: {e}"))?;
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::c_int>().ok())
        else {
            continue;
        };
        if fd <= 2 {
            continue;
        }
        // SAFETY: F_SETFD only changes a descriptor's close-on-exec flag; it neither closes
        // the descriptor nor touches memory, so no owner of `fd` in this process is affected.
        let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // The directory listing's own descriptor is gone once the listing ends.
            if e.raw_os_error() != Some(libc::EBADF) {
                return Err(format!("cannot mark descriptor {fd} close-on-exec: {e}"));
            }
        }
    }
    Ok(())
}

/// Whether this build has the setuid guard ([`install_setuid_guard`]): x86_64 and aarch64 only.
pub use crate::SETUID_GUARD_SUPPORTED;

/// The mode bits the guard refuses: `S_ISUID | S_ISGID`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SET_ID_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// Each syscall that takes a file mode, with the index of its mode argument. x86_64 also has the
/// legacy path calls aarch64 never had.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn mode_syscalls() -> Vec<(libc::c_long, u8)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),   // fchmod(fd, mode)
        (libc::SYS_fchmodat, 2), // fchmodat(dirfd, path, mode)
        (SYS_FCHMODAT2, 2),      // fchmodat2(dirfd, path, mode, flags)
        (libc::SYS_openat, 3),   // openat(dirfd, path, flags, mode)
        (libc::SYS_mknodat, 2),  // mknodat(dirfd, path, mode, dev)
        (libc::SYS_mkdirat, 2),  // mkdirat(dirfd, path, mode)
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1), // chmod(path, mode)
        (libc::SYS_open, 2),  // open(path, flags, mode)
        (libc::SYS_creat, 1), // creat(path, mode)
        (libc::SYS_mknod, 1), // mknod(path, mode, dev)
        (libc::SYS_mkdir, 1), // mkdir(path, mode)
    ]);
    calls
}

/// `fchmodat2(2)` (Linux 6.6): 452 on every architecture (the unified syscall table).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_FCHMODAT2: libc::c_long = 452;

/// The x32 ABI's syscall numbers on x86_64 carry this bit (`__X32_SYSCALL_BIT`); they share the
/// x86_64 audit arch, so only the number tells them apart.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Refuses, in this process and everything it execs, every way to set the setuid or setgid bit
/// through a mode argument: Landlock governs no metadata, so without this a payload could
/// `chmod u+s` its own files (or, as root, root-owned files outside the writable set) and plant
/// a setuid program for another user or a later unconfined step.
///
/// One seccomp program in two parts (`no_new_privs` is already set by the Landlock restriction):
///
/// 1. the *guard*, built here by hand: any architecture but the native one is killed (a 32-bit
///    `int 0x80` on x86_64 arrives with `AUDIT_ARCH_I386` and other syscall numbers), x32 calls
///    fail with `EPERM`, `openat2` fails with `ENOSYS` (its mode lives in a struct seccomp cannot
///    read; glibc and most programs then fall back to `openat`), and `io_uring_setup` fails with
///    `ENOSYS` (io_uring opens and creates files with a mode no filter sees), and so does
///    `clone3` (its flags live in a struct: see the user-namespace rule below);
/// 2. the *mode filter*, compiled by `seccompiler` (behind [`crate::bpf::allow_unnamed`], which
///    allows at once every call none of its rules names): `chmod`, `fchmod`, `fchmodat`, `fchmodat2`,
///    `open`, `openat`, `creat`, `mknod`, `mknodat`, `mkdir`, `mkdirat` fail with `EPERM` when
///    their mode argument has `S_ISUID` or `S_ISGID` (for `open`/`openat` the mode only matters
///    with `O_CREAT` or `O_TMPFILE`; refusing the bits regardless changes nothing else).
///
/// The mode filter also refuses `unshare` and `clone` with `CLONE_NEWUSER` (`EPERM`): the payload
/// makes no user namespace of its own; `prlimit64` on any process but the caller (`EPERM`): it
/// changes no other process's resource limits; and it closes the host's IPC ([`add_host_ipc_rules`]:
/// unix and vsock sockets, keyrings, and SysV IPC and POSIX message queues unless `ipc` says the
/// IPC namespace is private).
///
/// Ordinary modes (`chmod 755`, `cp -p`, `tar x`) are untouched.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn install_setuid_guard(
    ipc: IpcGuard,
    unix: UnixSockets,
    host_pids: bool,
) -> Result<(), String> {
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("cannot build the setuid guard: {e}"))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, arg) in mode_syscalls() {
        // The rules of one syscall are alternatives: either bit set matches.
        let chain = SET_ID_BITS
            .iter()
            .map(|&bit| {
                // `mode_t` is 32 bits: compare the low word only, masked to the one bit.
                SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(bit),
                    bit,
                )
                .and_then(|c| SeccompRule::new(vec![c]))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("cannot build the setuid guard: {e}"))?;
        rules.insert(nr, chain);
    }
    // No user namespace of its own: `unshare` and `clone` with `CLONE_NEWUSER` fail with EPERM
    // (`clone3` carries its flags in a struct: the guard makes it fail with ENOSYS, and glibc
    // falls back to `clone`). A nested user namespace would hand the payload a root of its own
    // over new mounts and the kernel code behind them; bwrap's `--disable-userns` does the same.
    let newuser = libc::CLONE_NEWUSER as u64;
    for nr in [libc::SYS_unshare, libc::SYS_clone] {
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(newuser),
            newuser,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| format!("cannot build the user-namespace guard: {e}"))?;
        rules.insert(nr, vec![condition]);
    }
    // No hand on another process's resource limits: `prlimit64` naming any pid but 0 (itself)
    // fails with EPERM. Landlock does not govern it and, without a PID namespace, the payload
    // sees the host's processes of its uid: it could set the monitor's or sandboxctl's
    // RLIMIT_NOFILE to 0 (blinding the post-call guard, leaving the monitor unable to kill a
    // survivor), or raise a host process's core limit and cut its CPU limit so the kernel dumps
    // its core into that process's directory. `setrlimit` and `prlimit(0, ...)` keep working.
    let other_pid = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| format!("cannot build the resource-limit guard: {e}"))?;
    rules.insert(libc::SYS_prlimit64, vec![other_pid.clone()]);
    if host_pids {
        add_host_process_rules(&mut rules, &other_pid)?;
    }
    add_host_ipc_rules(&mut rules, ipc, unix)?;
    let rules_named: Vec<i64> = rules.keys().copied().collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .and_then(seccompiler::BpfProgram::try_from)
    .map_err(|e| format!("cannot build the setuid guard: {e}"))?;
    // One program, one `seccomp(2)` call (each call costs a filter JIT on the launch path): the
    // guard runs first and falls through where it would have allowed; a call no rule names is
    // allowed there (crate::bpf::allow_unnamed), the rest go on into the mode filter.
    let mut program = guard_program();
    program.extend(crate::bpf::allow_unnamed(rules_named)?);
    program.extend(filter);
    seccompiler::apply_filter(&program).map_err(|e| format!("cannot install the setuid guard: {e}"))
}

/// Without a guard for this architecture there is nothing to install; `--probe` says so.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn install_setuid_guard(
    _ipc: IpcGuard,
    _unix: UnixSockets,
    _host_pids: bool,
) -> Result<(), String> {
    Ok(())
}

/// Without a PID namespace of its own the payload names the host's processes of its uid: the
/// calls Landlock does not govern that act on another process's scheduling fail with `EPERM`
/// when they name any pid but 0 (the caller): `sched_setscheduler`, `sched_setparam`,
/// `sched_setattr`, `sched_setaffinity` and `setpriority` and `ioprio_set` naming a process
/// (a payload that starved its monitor with `SCHED_IDLE` and one CPU kept its tree alive 30 s
/// past a timeout: attack round 5); `setpriority` and `ioprio_set` naming a process group or a
/// user fail whatever they name. In a PID namespace of its own none of them reaches the host,
/// and a thread may still pin or re-prioritise its siblings.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn add_host_process_rules(
    rules: &mut std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>>,
    other_pid: &seccompiler::SeccompRule,
) -> Result<(), String> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let err = |e: seccompiler::BackendError| format!("cannot build the host-process guard: {e}");
    for nr in [
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_sched_setaffinity,
    ] {
        rules.insert(nr, vec![other_pid.clone()]);
    }
    // setpriority(which, who, prio) and ioprio_set(which, who, ioprio): which 0 names a process
    // (IOPRIO_WHO_PROCESS is 1), anything else a group or a user.
    for (nr, process) in [(libc::SYS_setpriority, 0u64), (libc::SYS_ioprio_set, 1u64)] {
        let named = SeccompRule::new(vec![
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, process)
                .map_err(err)?,
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0).map_err(err)?,
        ])
        .map_err(err)?;
        let grouped = SeccompRule::new(vec![
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, process)
                .map_err(err)?,
        ])
        .map_err(err)?;
        rules.insert(nr, vec![named, grouped]);
    }
    Ok(())
}

/// How much of the host's IPC the guard must close itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpcGuard {
    /// The launcher shares the host's IPC namespace: SysV IPC and POSIX message queues are the
    /// host's, so the guard refuses them.
    HostNamespace,
    /// The caller put the launcher in an IPC namespace of its own (`--ipc private`, bwrap's
    /// `--unshare-ipc`): SysV IPC and POSIX message queues are the sandbox's own and stay open.
    PrivateNamespace,
}

/// Whether the guard refuses the payload unix sockets of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnixSockets {
    /// `socket(AF_UNIX)` fails with `EPERM` (the default: no host daemon is reachable).
    Refused,
    /// `--allow-unix-sockets`: the deployment allowed named sockets by path, and seccomp cannot
    /// read the address `connect` is given, so stream and seqpacket unix sockets are allowed to
    /// every path the payload can see (the caller reports `host-ipc` partial). Datagram unix
    /// sockets and vsock stay refused.
    StreamAllowed,
}

/// The syscalls that reach the host's IPC whatever namespace the launcher is in, refused
/// unconditionally: the user's keyrings (keyrings are not part of an IPC namespace).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const KEYRING_SYSCALLS: [libc::c_long; 3] =
    [libc::SYS_add_key, libc::SYS_request_key, libc::SYS_keyctl];

/// SysV IPC and POSIX message queues: objects of the IPC namespace, refused when it is the host's.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const NAMESPACED_IPC_SYSCALLS: [libc::c_long; 18] = [
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
];

/// The host-IPC rules of the guard, added to `rules` (every match fails with `EPERM`):
///
/// - `socket(AF_UNIX, ...)`: a unix socket of its own would let the payload connect to any
///   daemon listening on a named or abstract socket (the person's tmux server, an ssh agent, a
///   container engine), which then acts for it outside the sandbox. Connecting is not a write,
///   so no file rule stops it, and Landlock has no right for it before ABI 9. Like Codex and
///   srt, the guard refuses creating the socket: seccomp cannot read the address `connect`
///   is given, nor tell the payload's own listeners from the host's. `socketpair` stays open
///   (cargo's and Python's subprocess plumbing use it), except for datagram pairs: an
///   unconnected-style `sendto` or a re-`connect` on a datagram socket reaches any named
///   datagram socket (`/dev/log`, journald), a stream or seqpacket pair cannot be re-aimed.
/// - `socket(AF_VSOCK, ...)`: the hypervisor's host side, as Codex refuses it.
/// - `add_key`, `request_key`, `keyctl`: the user's and session keyrings.
/// - SysV IPC and POSIX message queues ([`NAMESPACED_IPC_SYSCALLS`]) unless `ipc` says the IPC
///   namespace is the sandbox's own.
///
/// A named FIFO outside the writable set needs no rule here: opening it for writing is a write
/// Landlock refuses.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn add_host_ipc_rules(
    rules: &mut std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>>,
    ipc: IpcGuard,
    unix: UnixSockets,
) -> Result<(), String> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};

    let err = |e: seccompiler::BackendError| format!("cannot build the host-IPC guard: {e}");
    let arg_eq = |index: u8, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(err)
    };
    // The socket type shares its word with SOCK_CLOEXEC and SOCK_NONBLOCK: compare its low bits.
    const SOCK_TYPE_MASK: u64 = 0xf;
    let dgram = || {
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
            libc::SOCK_DGRAM as u64,
        )
        .map_err(err)
    };
    let unix_socket = match unix {
        UnixSockets::Refused => arg_eq(0, libc::AF_UNIX as u64)?,
        // Only datagram unix sockets (re-aimable at any named one, `/dev/log`) stay refused.
        UnixSockets::StreamAllowed => {
            let family = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                libc::AF_UNIX as u64,
            )
            .map_err(err)?;
            SeccompRule::new(vec![family, dgram()?]).map_err(err)?
        }
    };
    rules.insert(
        libc::SYS_socket,
        vec![unix_socket, arg_eq(0, libc::AF_VSOCK as u64)?],
    );
    let dgram_pair = SeccompRule::new(vec![dgram()?]).map_err(err)?;
    rules.insert(libc::SYS_socketpair, vec![dgram_pair]);
    // An empty rule list matches the syscall whatever its arguments.
    for nr in KEYRING_SYSCALLS {
        rules.insert(nr, Vec::new());
    }
    if ipc == IpcGuard::HostNamespace {
        for nr in NAMESPACED_IPC_SYSCALLS {
            rules.insert(nr, Vec::new());
        }
    }
    Ok(())
}

/// The hand-built guard (classic BPF over `struct seccomp_data`: `nr` at offset 0, `arch` at
/// offset 4). Jump offsets count instructions after the jump itself. It ends where it allows:
/// what follows it in the program (the mode filter) decides every call it lets through.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn guard_program() -> Vec<seccompiler::sock_filter> {
    #[cfg(target_arch = "x86_64")]
    use crate::bpf::BPF_JGE_K;
    use crate::bpf::{
        AUDIT_ARCH_NATIVE, BPF_JEQ_K, BPF_LD_W_ABS, BPF_RET_K, OFFSET_ARCH, OFFSET_NR, jump, stmt,
    };

    let errno = |e: libc::c_int| libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA);
    let nr = |n: libc::c_long| n as u32;

    let mut prog = vec![
        // A foreign architecture (x86_64's 32-bit entry, aarch64's aarch32) is killed.
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_NATIVE, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    prog.extend([
        // x32: numbers in [0x4000_0000, 0x8000_0000) fail with EPERM. Numbers from
        // 0x8000_0000 up (-1 is what a tracer sets to skip a call) fall through.
        jump(BPF_JGE_K, 0x8000_0000, 2, 0),
        jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET_K, errno(libc::EPERM)),
    ]);
    prog.extend([
        jump(BPF_JEQ_K, nr(libc::SYS_openat2), 0, 1),
        stmt(BPF_RET_K, errno(libc::ENOSYS)),
        jump(BPF_JEQ_K, nr(libc::SYS_io_uring_setup), 0, 1),
        stmt(BPF_RET_K, errno(libc::ENOSYS)),
        jump(BPF_JEQ_K, nr(libc::SYS_clone3), 0, 1),
        stmt(BPF_RET_K, errno(libc::ENOSYS)),
    ]);
    prog
}
