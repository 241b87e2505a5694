//! The seccomp user-notification plumbing of `seatbelt-model-exec`: start the command with a
//! filter that hands the judged calls to a listener, take the listener, and answer each call.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};

/// The audit architecture of this build (the filter refuses nothing of another one: such calls
/// are not judged, which the fake's documentation says).
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// The exit code `sandbox-exec` uses when it cannot exec the command.
const EXEC_ERROR: i32 = 71;

/// A classic BPF program: the judged call numbers go to the listener, everything else runs.
fn program(calls: &[i64]) -> Vec<libc::sock_filter> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf: 0,
        k,
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let n = calls.len();
    let mut prog = vec![
        stmt(load, 4),
        // Another architecture: not judged (past the number checks, to ALLOW).
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: (n + 1) as u8,
            k: AUDIT_ARCH,
        },
        stmt(load, 0),
    ];
    for (i, nr) in calls.iter().enumerate() {
        prog.push(jump(*nr as u32, (n - i) as u8));
    }
    prog.push(stmt(ret, libc::SECCOMP_RET_ALLOW));
    prog.push(stmt(ret, libc::SECCOMP_RET_USER_NOTIF));
    prog
}

/// Forks `argv` under the filter for `calls` and returns the listener and the command's pid.
pub fn spawn(argv: &[CString], calls: &[i64]) -> Result<(OwnedFd, u32), String> {
    let prog = program(calls);
    let (number_r, number_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    let (ack_r, ack_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    // SAFETY: this process is single-threaded here (the fake's main has started no thread), so
    // the child may run arbitrary code before exec.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() }.map_err(|e| e.to_string())?;
    match forked {
        ForkResult::Child => {
            drop((number_r, ack_w));
            child(argv, &prog, number_w, ack_r)
        }
        ForkResult::Parent { child } => {
            drop((number_w, ack_r));
            let mut number = [0u8; 4];
            read_exact(&number_r, &mut number)?;
            let listener = take_fd(child.as_raw(), i32::from_ne_bytes(number))?;
            nix::unistd::write(&ack_w, b"k").map_err(|e| e.to_string())?;
            let pid = u32::try_from(child.as_raw()).map_err(|e| e.to_string())?;
            Ok((listener, pid))
        }
    }
}

fn read_exact(fd: &OwnedFd, buf: &mut [u8]) -> Result<(), String> {
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(fd, &mut buf[got..]) {
            Ok(0) => return Err("the command ended before its filter was set".into()),
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// The child: no new privileges, the filter (its listener's number sent to the parent), then
/// exec once the parent holds the listener. Never returns.
fn child(argv: &[CString], prog: &[libc::sock_filter], number_w: OwnedFd, ack_r: OwnedFd) -> ! {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: prctl and seccomp take integers and a pointer to `fprog`, which outlives the call.
    #[allow(unsafe_code)]
    let listener = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if listener < 0 {
        eprintln!("sandbox-exec: seccomp: {}", std::io::Error::last_os_error());
        std::process::exit(EXEC_ERROR);
    }
    let number = (listener as i32).to_ne_bytes();
    let _ = nix::unistd::write(&number_w, &number);
    let mut ack = [0u8; 1];
    let _ = nix::unistd::read(&ack_r, &mut ack);
    // The payload must never hold its own listener (it could answer its own calls).
    // SAFETY: closes a descriptor this process owns and no other code uses.
    #[allow(unsafe_code)]
    unsafe {
        libc::close(listener as i32);
    }
    let Some(program) = argv.first() else {
        std::process::exit(64)
    };
    let err = nix::unistd::execvp(program, argv).err();
    eprintln!(
        "sandbox-exec: execvp() of '{}' failed: {}",
        program.to_string_lossy(),
        err.map(|e| e.desc()).unwrap_or("unknown")
    );
    std::process::exit(EXEC_ERROR)
}

/// Copies descriptor `fd` of process `pid` into this one (`pidfd_getfd`).
fn take_fd(pid: i32, fd: i32) -> Result<OwnedFd, String> {
    // SAFETY: plain system calls on integers; each returned descriptor is owned right away.
    #[allow(unsafe_code)]
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        if pidfd < 0 {
            return Err(format!("pidfd_open: {}", std::io::Error::last_os_error()));
        }
        let pidfd = OwnedFd::from_raw_fd(pidfd as i32);
        let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
        if got < 0 {
            return Err(format!("pidfd_getfd: {}", std::io::Error::last_os_error()));
        }
        Ok(OwnedFd::from_raw_fd(got as i32))
    }
}

/// Answers every notified call with `judge(pid, nr, args)` (`Some(errno)` refuses it, `None`
/// lets it run) until the command ends, then exits as it did (its code, or its signal).
pub fn serve(
    listener: OwnedFd,
    child: u32,
    mut judge: impl FnMut(u32, i64, [u64; 6]) -> Option<i32>,
) -> Result<std::convert::Infallible, String> {
    let pid = Pid::from_raw(child as i32);
    loop {
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(&listener),
            nix::poll::PollFlags::POLLIN,
        )];
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u16)).unwrap_or(0);
        if ready > 0
            && fds[0]
                .revents()
                .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLIN))
        {
            answer_one(&listener, &mut judge);
        }
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => std::process::exit(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                // SAFETY: resets one signal's disposition and raises it on this process.
                #[allow(unsafe_code)]
                unsafe {
                    libc::signal(signal as i32, libc::SIG_DFL);
                    libc::raise(signal as i32);
                }
                std::process::exit(128 + signal as i32)
            }
            Ok(_) => {}
            Err(e) => return Err(format!("waitpid: {e}")),
        }
    }
}

/// Receives one notification and sends its answer (a call whose thread died meanwhile is gone).
fn answer_one(listener: &OwnedFd, judge: &mut impl FnMut(u32, i64, [u64; 6]) -> Option<i32>) {
    // SAFETY: the kernel fills the zeroed structs we pass by pointer; both outlive the ioctls.
    #[allow(unsafe_code)]
    unsafe {
        let mut notif: libc::seccomp_notif = std::mem::zeroed();
        if libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut notif,
        ) != 0
        {
            return;
        }
        let verdict = judge(notif.pid, i64::from(notif.data.nr), notif.data.args);
        let mut resp: libc::seccomp_notif_resp = std::mem::zeroed();
        resp.id = notif.id;
        match verdict {
            Some(errno) => resp.error = -errno,
            None => resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        }
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp,
        );
    }
}
