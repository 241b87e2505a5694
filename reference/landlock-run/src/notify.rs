//! Seccomp user notification (`SECCOMP_RET_USER_NOTIF`): the payload's calls that create a name
//! or open a file for writing stop in the kernel and wait for the launcher's emulator
//! ([`crate::emulate`]) to carry them out or refuse them.
//!
//! The filter is built by `seccompiler` with a `Trace` action carrying [`MARK`] and then patched
//! to `SECCOMP_RET_USER_NOTIF` (seccompiler has no notify action), behind a block that allows
//! every call it does not take over ([`crate::bpf::allow_unnamed`]); it is installed with
//! `SECCOMP_FILTER_FLAG_NEW_LISTENER`, which hands back the listener descriptor. The listener's
//! ioctls are wrapped here; nothing else of the emulator touches raw memory.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch, sock_filter,
};

/// The `Trace` data the filter is built with, replaced by `SECCOMP_RET_USER_NOTIF`.
const MARK: u32 = 0x5eed;

/// `SECCOMP_FILTER_FLAG_NEW_LISTENER` (linux/seccomp.h).
const FLAG_NEW_LISTENER: libc::c_ulong = 1 << 3;

/// `SECCOMP_ADDFD_FLAG_SEND` (Linux 5.14): install the descriptor and answer the call with its
/// number in one step.
const ADDFD_FLAG_SEND: u32 = 1 << 1;

/// The calls the emulator takes over, and which of their arguments holds open flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `open(path, flags, mode)` (x86_64 only).
    Open,
    /// `openat(dirfd, path, flags, mode)`.
    OpenAt,
    /// `creat(path, mode)` (x86_64 only).
    Creat,
    /// `mkdir(path, mode)` (x86_64 only).
    Mkdir,
    /// `mkdirat(dirfd, path, mode)`.
    MkdirAt,
    /// `mknod(path, mode, dev)` (x86_64 only).
    Mknod,
    /// `mknodat(dirfd, path, mode, dev)`.
    MknodAt,
    /// `link(old, new)` (x86_64 only).
    Link,
    /// `linkat(olddirfd, old, newdirfd, new, flags)`.
    LinkAt,
    /// `symlink(target, new)` (x86_64 only).
    Symlink,
    /// `symlinkat(target, newdirfd, new)`.
    SymlinkAt,
    /// `rename(old, new)` (x86_64 only).
    Rename,
    /// `renameat(olddirfd, old, newdirfd, new)`.
    RenameAt,
    /// `renameat2(olddirfd, old, newdirfd, new, flags)`.
    RenameAt2,
    /// `truncate(path, length)`.
    Truncate,
    /// `landlock_restrict_self(fd, flags)`: refused, never emulated (see [`crate::emulate`]).
    LandlockRestrictSelf,
}

impl Call {
    /// Every call and its number on this architecture.
    pub fn all() -> Vec<(Call, libc::c_long)> {
        let mut calls = vec![
            (Call::OpenAt, libc::SYS_openat),
            (Call::MkdirAt, libc::SYS_mkdirat),
            (Call::MknodAt, libc::SYS_mknodat),
            (Call::LinkAt, libc::SYS_linkat),
            (Call::SymlinkAt, libc::SYS_symlinkat),
            (Call::RenameAt2, libc::SYS_renameat2),
            (Call::Truncate, libc::SYS_truncate),
            (Call::LandlockRestrictSelf, libc::SYS_landlock_restrict_self),
        ];
        #[cfg(target_arch = "x86_64")]
        calls.extend([
            (Call::Open, libc::SYS_open),
            (Call::Creat, libc::SYS_creat),
            (Call::Mkdir, libc::SYS_mkdir),
            (Call::Mknod, libc::SYS_mknod),
            (Call::Link, libc::SYS_link),
            (Call::Symlink, libc::SYS_symlink),
            (Call::Rename, libc::SYS_rename),
            (Call::RenameAt, libc::SYS_renameat),
        ]);
        #[cfg(target_arch = "aarch64")]
        calls.push((Call::RenameAt, libc::SYS_renameat));
        calls
    }

    /// The call of number `nr`, if the filter names it.
    pub fn of(nr: i32) -> Option<Call> {
        Call::all()
            .into_iter()
            .find(|(_, n)| *n == libc::c_long::from(nr))
            .map(|(c, _)| c)
    }

    /// The index of the open-flags argument, for the calls that only matter when they write.
    fn flags_arg(self) -> Option<u8> {
        match self {
            Call::Open => Some(1),
            Call::OpenAt => Some(2),
            _ => None,
        }
    }
}

/// The rules that make an open call reach the emulator: it asks for write access, creates, or
/// truncates. A read-only open never leaves the kernel.
fn writing_open(arg: u8) -> Result<Vec<SeccompRule>, String> {
    let fail = |e: seccompiler::BackendError| format!("cannot build the emulator's filter: {e}");
    let masked = |mask: u64, value: u64| {
        SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(mask),
            value,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(fail)
    };
    let acc = libc::O_ACCMODE as u64;
    Ok(vec![
        masked(acc, libc::O_WRONLY as u64)?,
        masked(acc, libc::O_RDWR as u64)?,
        masked(libc::O_CREAT as u64, libc::O_CREAT as u64)?,
        masked(libc::O_TRUNC as u64, libc::O_TRUNC as u64)?,
    ])
}

/// Installs the notifying filter in this process (kept across `execve` and by every child) and
/// returns its listener. `no_new_privs` must already be set (the Landlock restriction sets it).
pub fn install() -> Result<OwnedFd, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("cannot build the emulator's filter: {e}"))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (call, nr) in Call::all() {
        let chain = match call.flags_arg() {
            Some(arg) => writing_open(arg)?,
            // An empty rule list matches every call of that number.
            None => Vec::new(),
        };
        rules.insert(nr, chain);
    }
    // Calls the emulator does not take over are allowed before the chain (crate::bpf).
    let mut program = crate::bpf::allow_unnamed(rules.keys().copied())?;
    let chain: Vec<sock_filter> = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Trace(MARK),
        arch,
    )
    .and_then(seccompiler::BpfProgram::try_from)
    .map_err(|e| format!("cannot build the emulator's filter: {e}"))?;
    let traced = libc::SECCOMP_RET_TRACE | MARK;
    program.extend(chain.into_iter().map(|mut insn| {
        // BPF_RET | BPF_K returning the traced mark becomes a notification.
        if insn.code == crate::bpf::BPF_RET_K && insn.k == traced {
            insn.k = libc::SECCOMP_RET_USER_NOTIF;
        }
        insn
    }));
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len())
            .map_err(|_| "the emulator's filter is too long".to_string())?,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: seccomp(2) has no wrapper that returns the listener. `prog` points at `program`,
    // which outlives the call, with its length; the flags are documented constants. The kernel
    // copies the program and returns a new descriptor or -1.
    #[allow(unsafe_code)]
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(format!(
            "cannot install the emulator's filter: {}",
            io::Error::last_os_error()
        ));
    }
    let fd = i32::try_from(fd).map_err(|_| format!("seccomp returned {fd}"))?;
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    #[allow(unsafe_code)]
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One stopped call, as the kernel reported it.
#[derive(Clone, Copy, Debug)]
pub struct Notification {
    /// The notification's cookie, for [`Listener::valid`] and the answer.
    pub id: u64,
    /// The calling thread, in the listener's PID namespace.
    pub tid: i32,
    /// The call's number.
    pub nr: i32,
    /// The call's six arguments.
    pub args: [u64; 6],
}

/// The listener side of the filter.
pub struct Listener(OwnedFd);

impl Listener {
    /// Takes ownership of a listener descriptor.
    pub fn new(fd: OwnedFd) -> Listener {
        Listener(fd)
    }

    /// The descriptor, to poll on.
    pub fn fd(&self) -> &OwnedFd {
        &self.0
    }

    /// Blocks until a call stops; `ENOENT` when its thread died before it could be read.
    pub fn recv(&self) -> io::Result<Notification> {
        // SAFETY: `seccomp_notif` is plain old data; the kernel requires it zeroed.
        #[allow(unsafe_code)]
        let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl writes one `seccomp_notif` through the pointer, which points at a
        // live local of that type.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut n as *mut libc::seccomp_notif,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Notification {
            id: n.id,
            tid: n.pid as i32,
            nr: n.data.nr,
            args: n.data.args,
        })
    }

    /// Whether the call `id` is still waiting (its thread alive and still in that call): checked
    /// after reading its memory and `/proc` entries, so a pid reused meanwhile is never trusted.
    pub fn valid(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: the ioctl reads one u64 through the pointer, a live local.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &mut id as *mut u64,
            )
        };
        rc == 0
    }

    /// Answers `id` with a return value (`errno` 0) or an error (`errno` > 0, returned as
    /// `-errno`). A thread that died meanwhile makes this fail with `ENOENT`, which is moot.
    pub fn answer(&self, id: u64, value: i64, errno: i32) {
        let mut resp = libc::seccomp_notif_resp {
            id,
            val: if errno == 0 { value } else { 0 },
            error: -errno,
            flags: 0,
        };
        // SAFETY: the ioctl reads one `seccomp_notif_resp` through the pointer, a live local.
        #[allow(unsafe_code)]
        let _ = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut resp as *mut libc::seccomp_notif_resp,
            )
        };
    }

    /// Installs `fd` in the calling thread's process and answers `id` with its number, in one
    /// step (`SECCOMP_ADDFD_FLAG_SEND`); `cloexec` marks it close-on-exec. On failure the call
    /// is answered with the error.
    pub fn answer_fd(&self, id: u64, fd: &OwnedFd, cloexec: bool) {
        let addfd = libc::seccomp_notif_addfd {
            id,
            flags: ADDFD_FLAG_SEND,
            srcfd: fd.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: the ioctl reads one `seccomp_notif_addfd` through the pointer, a live local.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &addfd as *const libc::seccomp_notif_addfd,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            if e != libc::ENOENT && e != libc::EINPROGRESS {
                self.answer(id, 0, e);
            }
        }
    }
}
