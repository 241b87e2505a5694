//! The launcher's init: the process between the monitor and the rest of a launch when the launch
//! has a PID namespace of its own (`--pid-namespace`) or an emulator (`--prevent`). It is PID 1
//! of that namespace when there is one: no process of the payload can name a process outside
//! it (the monitor, the caller, the person's shell and editor), so none can be signalled,
//! traced, rescheduled, re-prioritised or limited, and when init ends the kernel kills every
//! process left in it. It reaps orphans, makes new git directories private for the emulator
//! ([`Stager`]), and ends as the launch's child ended: PID 1 cannot die by a signal of its own,
//! so it tells the monitor how over a pipe ([`report_ending`]).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::stat::Mode;
use nix::unistd::Pid;

use crate::emulate::Stager;

/// How a process of the launch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
}

impl Ending {
    /// The ending of a raw wait status, if it is one (not a stop).
    pub fn of(status: i32) -> Option<Ending> {
        if libc::WIFEXITED(status) {
            Some(Ending::Code(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(Ending::Signal(libc::WTERMSIG(status)))
        } else {
            None
        }
    }

    fn to_bytes(self) -> [u8; 5] {
        let (kind, v) = match self {
            Ending::Code(c) => (b'c', c),
            Ending::Signal(s) => (b's', s),
        };
        let b = v.to_le_bytes();
        [kind, b[0], b[1], b[2], b[3]]
    }

    fn from_bytes(b: &[u8]) -> Option<Ending> {
        let v = i32::from_le_bytes(b.get(1..5)?.try_into().ok()?);
        match b.first()? {
            b'c' => Some(Ending::Code(v)),
            b's' => Some(Ending::Signal(v)),
            _ => None,
        }
    }
}

/// A pipe the init reports the launch's ending on: made by the monitor before it forks.
pub fn ending_pipe() -> Result<(OwnedFd, OwnedFd), String> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("cannot make the ending pipe: {e}"))
}

/// Writes `ending` for the monitor.
pub fn report_ending(pipe: &OwnedFd, ending: Ending) {
    let _ = nix::unistd::write(pipe, &ending.to_bytes());
}

/// Reads what the init reported, if it did.
pub fn read_ending(pipe: OwnedFd) -> Option<Ending> {
    let mut buf = [0u8; 5];
    let mut f = File::from(pipe);
    f.read_exact(&mut buf).ok()?;
    Ending::from_bytes(&buf)
}

/// Reaps every child that has ended without blocking; returns the ending of `child` if it was
/// among them. `ECHILD` (none left) is `Err`.
pub fn reap(child: Pid) -> Result<Option<Ending>, Errno> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) writes one int through the pointer, which points at a live local.
        #[allow(unsafe_code)]
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
        match Errno::result(pid) {
            Ok(0) => return Ok(found),
            Ok(pid) if pid == child.as_raw() => {
                if let Some(e) = Ending::of(status) {
                    found = Some(e);
                }
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(Errno::ECHILD) if found.is_some() => return Ok(found),
            Err(e) => return Err(e),
        }
    }
}

/// Kills every other process of this PID namespace and reaps them all (only ever called by its
/// PID 1: `kill(-1)` there reaches the namespace and nothing outside it).
pub fn empty_the_namespace() {
    if nix::unistd::getpid().as_raw() != 1 {
        return;
    }
    loop {
        // SAFETY: kill(2) with pid -1 from PID 1 of a namespace signals every process of it
        // but the caller; no memory is involved.
        #[allow(unsafe_code)]
        let _ = unsafe { libc::kill(-1, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: as in `reap`.
        #[allow(unsafe_code)]
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if pid < 0 && Errno::last() == Errno::ECHILD {
            return;
        }
    }
}

/// The init's half of the staging channel: one request, one answer, on a seqpacket pair.
pub struct StageServer {
    sock: OwnedFd,
    root: PathBuf,
    root_fd: OwnedFd,
    next: u32,
    /// The targets staged so far (kept open: their paths are written again at the end, where the
    /// payload may have moved them).
    targets: Vec<(u32, OwnedFd)>,
}

/// The emulator's half.
pub struct StageClient {
    sock: OwnedFd,
}

/// A connected pair for staging, the server's end for the init and the client's for the
/// emulator. `fd` is the staging directory the caller handed over (`--stage-fd`), private to it;
/// it is opened again here by its path in this mount namespace (a mount of another namespace
/// cannot be cloned), and must be the very same directory.
pub fn stage_channel(fd: i32) -> Result<(StageServer, StageClient), String> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let (a, b) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("cannot make the staging channel: {e}"))?;
    // SAFETY: fcntl(F_GETFD) on a raw number only reads its flags (EBADF when it is not open).
    #[allow(unsafe_code)]
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(format!("--stage-fd {fd} is not an open descriptor"));
    }
    // SAFETY: the caller handed this open descriptor over for exactly this use; nothing else in
    // this process refers to it, so taking sole ownership once is sound.
    #[allow(unsafe_code)]
    let handed = unsafe { OwnedFd::from_raw_fd(fd) };
    let _ = nix::fcntl::fcntl(
        &handed,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    let want = nix::sys::stat::fstat(&handed)
        .map_err(|e| format!("--stage-fd {fd} is not an open directory: {e}"))?;
    let root = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map_err(|e| format!("cannot tell where --stage-fd {fd} is: {e}"))?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let root_fd = nix::fcntl::openat2(nix::fcntl::AT_FDCWD, root.as_path(), how)
        .map_err(|e| format!("cannot open the staging directory {}: {e}", root.display()))?;
    let here = nix::sys::stat::fstat(&root_fd).map_err(|e| e.to_string())?;
    if (here.st_dev, here.st_ino) != (want.st_dev, want.st_ino) {
        return Err(format!(
            "the staging directory {} is not the one handed over",
            root.display()
        ));
    }
    Ok((
        StageServer {
            sock: a,
            root,
            root_fd,
            next: 0,
            targets: Vec::new(),
        },
        StageClient { sock: b },
    ))
}

fn send(sock: &OwnedFd, bytes: &[u8], fd: Option<RawFd>) -> Result<(), Errno> {
    let iov = [std::io::IoSlice::new(bytes)];
    let fds: Vec<RawFd> = fd.into_iter().collect();
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None).map(|_| ())
}

fn receive(sock: &OwnedFd, buf: &mut [u8]) -> Result<(usize, Option<OwnedFd>), Errno> {
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fd = None;
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: the kernel just installed this descriptor for us with SCM_RIGHTS;
                // nothing else owns it.
                #[allow(unsafe_code)]
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                fd = Some(owned);
            }
        }
    }
    Ok((msg.bytes, fd))
}

/// Sends a descriptor to the other end of `sock` (the payload's listener to the emulator).
pub fn send_fd(sock: &OwnedFd, fd: &OwnedFd) -> Result<(), String> {
    send(sock, b"fd", Some(fd.as_raw_fd())).map_err(|e| format!("cannot pass a descriptor: {e}"))
}

/// Receives a descriptor [`send_fd`] sent; `None` when the other end closed first.
pub fn recv_fd(sock: &OwnedFd) -> Option<OwnedFd> {
    let mut buf = [0u8; 8];
    receive(sock, &mut buf).ok().and_then(|(_, fd)| fd)
}

impl Stager for StageClient {
    fn stage(&mut self, target: &OwnedFd, dir: bool, mode: u32) -> Result<u64, Errno> {
        let mut req = [0u8; 5];
        req[0] = if dir { b'd' } else { b'f' };
        req[1..5].copy_from_slice(&mode.to_le_bytes());
        send(&self.sock, &req, Some(target.as_raw_fd()))?;
        let mut buf = [0u8; 12];
        let (n, _) = receive(&self.sock, &mut buf)?;
        match (n, buf[0]) {
            (9, b'k') => Ok(u64::from_le_bytes(
                buf[1..9].try_into().map_err(|_| Errno::EIO)?,
            )),
            (5, b'e') => Err(Errno::from_raw(i32::from_le_bytes(
                buf[1..5].try_into().map_err(|_| Errno::EIO)?,
            ))),
            _ => Err(Errno::EIO),
        }
    }
}

impl StageServer {
    /// The descriptor to poll on.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// Answers one request: makes `N` (a directory or a file) in the staging directory, binds it
    /// onto the target the emulator sent, records where it went (`N.target`), and answers the
    /// new mount's id. `Err` when the emulator's end is closed.
    pub fn serve_one(&mut self) -> Result<(), Errno> {
        let mut buf = [0u8; 8];
        let (n, target) = receive(&self.sock, &mut buf)?;
        if n == 0 {
            return Err(Errno::EPIPE);
        }
        let answer = match (n, target) {
            (5, Some(target)) => {
                let dir = buf[0] == b'd';
                let mode = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
                self.stage(&target, dir, mode).inspect(|_| {
                    self.targets.push((self.next - 1, target));
                })
            }
            _ => Err(Errno::EINVAL),
        };
        let mut out = Vec::with_capacity(9);
        match answer {
            Ok(id) => {
                out.push(b'k');
                out.extend_from_slice(&id.to_le_bytes());
            }
            Err(e) => {
                out.push(b'e');
                out.extend_from_slice(&(e as i32).to_le_bytes());
            }
        }
        send(&self.sock, &out, None)
    }

    fn stage(&mut self, target: &OwnedFd, dir: bool, mode: u32) -> Result<u64, Errno> {
        let n = self.next;
        self.next += 1;
        let name = n.to_string();
        let perm = Mode::from_bits_truncate(mode & 0o777);
        if dir {
            nix::sys::stat::mkdirat(&self.root_fd, name.as_str(), perm)?;
        } else {
            drop(nix::fcntl::openat(
                &self.root_fd,
                name.as_str(),
                OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                perm,
            )?);
        }
        let source = nix::fcntl::openat(
            &self.root_fd,
            name.as_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        // The mode the payload asked for, whatever the staging directory's umask made of it.
        let _ = nix::sys::stat::fchmodat(
            &self.root_fd,
            name.as_str(),
            perm,
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        );
        self.write_target(n, target);
        let tree = crate::protect::bind_fd_onto(&source, target, false)
            .map_err(|(_, e)| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        crate::emulate::resolve::mnt_id(&tree).ok_or(Errno::EIO)
    }

    /// Writes `N.target`: where the staged entry belongs (as this namespace spells the path,
    /// which for the workspace and the extra roots is the host's), and its device and inode.
    fn write_target(&self, n: u32, target: &OwnedFd) {
        let Some(path) = crate::emulate::resolve::fd_path(target) else {
            return;
        };
        let Ok(st) = nix::sys::stat::fstat(target) else {
            return;
        };
        let record = crate::staged::StagedTarget {
            path,
            dev: st.st_dev,
            ino: st.st_ino,
        }
        .encode();
        let file = self
            .root
            .join(format!("{n}{}", crate::staged::RECORD_SUFFIX));
        let tmp = self
            .root
            .join(format!("{n}{}.tmp", crate::staged::RECORD_SUFFIX));
        if std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(&record))
            .and_then(|()| std::fs::rename(&tmp, &file))
            .is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Writes every `N.target` again with where its target is now (a payload may have renamed a
    /// folder holding one).
    pub fn finish(&self) {
        for (n, target) in &self.targets {
            self.write_target(*n, target);
        }
    }
}

/// Waits until `child` ends, serving `stage` meanwhile and reaping orphans; returns how the
/// child ended.
pub fn wait_serving(child: Pid, mut stage: Option<&mut StageServer>) -> Ending {
    let pidfd = crate::monitor::pidfd_open(child).ok();
    loop {
        match reap(child) {
            Ok(Some(ending)) => return ending,
            Ok(None) => {}
            Err(e) => {
                eprintln!("{}init lost its child: {e}", crate::DIAGNOSTIC_PREFIX);
                return Ending::Code(crate::FAILURE_EXIT_CODE);
            }
        }
        let mut fds = Vec::with_capacity(2);
        if let Some(p) = &pidfd {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
        }
        if let Some(s) = stage.as_deref() {
            fds.push(PollFd::new(s.fd(), PollFlags::POLLIN));
        }
        // Orphans end without waking the pidfd: look again now and then.
        let timeout = PollTimeout::from(200u16);
        let ready = poll(&mut fds, timeout).unwrap_or(0);
        let stage_ready = fds
            .last()
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty())
            && stage.is_some();
        drop(fds);
        if ready > 0
            && stage_ready
            && let Some(s) = stage.as_deref_mut()
            && s.serve_one().is_err()
        {
            stage = None;
        }
    }
}

/// Makes the children this process forks from now on PID 1 and below of a new PID namespace: a
/// plain one when it may (root with its capabilities), else one owned by a new user namespace
/// that maps this uid and gid onto themselves (so nothing changes for the payload's files).
/// Called by the monitor before it forks; the monitor itself stays where it is, out of the
/// payload's sight. `Ok(false)` when the host allows neither (the launch goes on without one);
/// `Err` when the user namespace was made but its identity could not be mapped: this process
/// then has no usable identity, and the launch fails closed.
pub fn new_pid_namespace_for_children() -> Result<bool, String> {
    use nix::sched::{CloneFlags, unshare};
    if unshare(CloneFlags::CLONE_NEWPID).is_ok() {
        return Ok(true);
    }
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    // Root without CAP_SYS_ADMIN (a capability-dropped container) cannot map uid 0 into a user
    // namespace of its own (that needs CAP_SETFCAP): it would end up as the overflow uid.
    if uid.is_root() || nix::unistd::geteuid().is_root() {
        return Ok(false);
    }
    if unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID).is_err() {
        return Ok(false);
    }
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(true)
}

/// Mounts a `/proc` of this PID namespace (this process is its PID 1, in a mount namespace of
/// its own), so `/proc/<pid>` names the namespace's processes: what the emulator reads for a
/// stopped call must be that call's thread. `/proc/sys` is then bound read-only onto itself, as
/// bwrap does.
pub fn mount_proc() -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("cannot mount /proc for the PID namespace: {e}"))?;
    let sys = nix::fcntl::open(
        "/proc/sys",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot open /proc/sys: {e}"))?;
    crate::protect::bind_fd_onto(&sys, &sys, true)
        .map(drop)
        .map_err(|(what, e)| format!("cannot {what} /proc/sys: {e}"))
}
