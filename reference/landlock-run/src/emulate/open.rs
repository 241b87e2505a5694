//! The emulator's opens: a payload's `open` for writing (or with `O_CREAT`) carried out on the
//! descriptors the emulator resolved, at once or (a FIFO, which may block) on a thread of its
//! own, and a write through a procfs magic link judged on the object it leads to.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

use super::resolve::{self, Found, Task};
use super::rules::{Op, Verdict};
use super::{Answer, Emulator, MAX_WAITING_OPENS, REFUSED, Target, held};
use crate::notify::Notification;

impl Emulator {
    pub(super) fn open(
        &mut self,
        task: &Task,
        n: &Notification,
        dirfd: i32,
        addr: u64,
        flags: i32,
        mode: u32,
    ) -> Answer {
        match self.open_inner(task, n, dirfd, addr, flags, mode) {
            Ok(answer) => answer,
            Err(e) => Answer::Error(e),
        }
    }

    fn open_inner(
        &mut self,
        task: &Task,
        n: &Notification,
        dirfd: i32,
        addr: u64,
        flags: i32,
        mode: u32,
    ) -> Result<Answer, Errno> {
        let creat = flags & libc::O_CREAT != 0;
        let follow = flags & libc::O_NOFOLLOW == 0 && !(creat && flags & libc::O_EXCL != 0);
        let found = self.path(task, dirfd, addr, follow)?;
        let cloexec = flags & libc::O_CLOEXEC != 0;
        let oflags = OFlag::from_bits_retain(flags) | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        let (parent, name, trailing) = match found {
            Found::Magic { dir, name } => {
                // The object is held from here on: the payload's descriptor N may be another
                // object by the time it is opened again (a `dup2` from another thread), so what
                // is judged is what is opened, through the emulator's own descriptor.
                let obj = held(&dir, &name)?;
                self.still(n)?;
                if writes && self.held_denied(&obj) {
                    return Err(REFUSED);
                }
                // A FIFO reopened through its magic link waits for its other end as by name.
                let fifo = nix::sys::stat::fstat(&obj)
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO);
                let target = Target::Held(obj);
                if fifo && flags & libc::O_NONBLOCK == 0 {
                    return Ok(self.open_later(n, target, oflags, Mode::empty(), cloexec));
                }
                return Ok(self.open_now(n, target, oflags, Mode::empty(), cloexec));
            }
            Found::Entry {
                parent,
                name,
                trailing_slash,
            } => (parent, name, trailing_slash),
        };
        let call_name = Found::call_name(&name, trailing);
        let existing =
            nix::sys::stat::fstatat(&parent, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW);
        let op = match &existing {
            Ok(_) if writes => Some(Op::WriteExisting),
            Ok(_) => None,
            Err(Errno::ENOENT) if creat => Some(Op::CreateFile),
            Err(Errno::ENOENT) => return Err(Errno::ENOENT),
            Err(e) => return Err(*e),
        };
        self.still(n)?;
        let mode = Mode::from_bits_truncate(mode & !task.umask() & 0o7777);
        match op.map(|op| self.judge(&parent, &name, op, None)) {
            Some(Verdict::Deny) => return Err(REFUSED),
            Some(Verdict::StageFile) => {
                self.stage_file(&parent, &name, mode)?;
                let again = oflags & !(OFlag::O_CREAT | OFlag::O_EXCL) | OFlag::O_NOFOLLOW;
                let target = Target::Name(parent, name);
                return Ok(self.open_now(n, target, again, Mode::empty(), cloexec));
            }
            Some(Verdict::StageDir) => return Err(REFUSED),
            Some(Verdict::Allow) | None => {}
        }
        let fifo = existing
            .as_ref()
            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO);
        if flags & libc::O_TRUNC != 0
            && flags & libc::O_ACCMODE == libc::O_RDONLY
            && !fifo
            && !self.rules.truncate_ungoverned
        {
            // `O_RDONLY | O_TRUNC` truncates on Linux, which Landlock below ABI 3 does not see:
            // it must be allowed to write there.
            let probe = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            if existing.is_ok() {
                drop(nix::fcntl::openat(
                    &parent,
                    name.as_os_str(),
                    probe,
                    Mode::empty(),
                )?);
            }
        }
        let oflags = oflags | OFlag::O_NOFOLLOW;
        let target = Target::Name(parent, call_name);
        if fifo && flags & libc::O_NONBLOCK == 0 {
            return Ok(self.open_later(n, target, oflags, mode, cloexec));
        }
        Ok(self.open_now(n, target, oflags, mode, cloexec))
    }

    /// Opens `target` for the call without ever blocking the emulator: what was a file
    /// when it was looked at may be a FIFO by the time it is opened (a rename, or a `dup2` behind
    /// `/proc/self/fd/N`), and a blocking open of a FIFO waits for its other end, which the
    /// payload need never provide. The open is made with `O_NONBLOCK`; when the call did not ask
    /// for it and what opened is a FIFO (or a FIFO with no reader refused a writer, `ENXIO`), the
    /// call is answered from a thread of its own ([`Emulator::open_later`]) as a FIFO is; else the
    /// flag is cleared on what opened, which the call then receives.
    fn open_now(
        &self,
        n: &Notification,
        target: Target,
        oflags: OFlag,
        mode: Mode,
        cloexec: bool,
    ) -> Answer {
        let blocking = !oflags.contains(OFlag::O_NONBLOCK);
        let fd = match target.open(oflags | OFlag::O_NONBLOCK, mode) {
            Ok(fd) => fd,
            Err(Errno::ENXIO) if blocking => {
                return self.open_later(n, target, oflags, mode, cloexec);
            }
            Err(e) => return Answer::Error(e),
        };
        if !blocking {
            return Answer::Fd(fd, cloexec);
        }
        match nix::sys::stat::fstat(&fd) {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFIFO => {
                drop(fd);
                // Created by this very open, it is no FIFO: what is there now is one the payload
                // put in its place, opened again without O_CREAT as the kernel would reach it.
                let again = oflags & !(OFlag::O_CREAT | OFlag::O_EXCL);
                self.open_later(n, target, again, mode, cloexec)
            }
            Ok(_) => {
                let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)
                    .map(OFlag::from_bits_retain);
                match flags.and_then(|f| {
                    nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(f - OFlag::O_NONBLOCK))
                }) {
                    Ok(_) => Answer::Fd(fd, cloexec),
                    Err(e) => Answer::Error(e),
                }
            }
            Err(e) => Answer::Error(e),
        }
    }

    /// Opens `target` from a thread of its own and answers the call from there: an open
    /// of a FIFO waits for its other end, and the payload's other calls go on meanwhile. At most
    /// [`MAX_WAITING_OPENS`] wait at once (an open whose caller died waits on until the launch
    /// ends): past that, or when no thread can be made, the call fails with `ENFILE`, so a payload
    /// can exhaust only its own opens, never the emulator that serves its other calls.
    fn open_later(
        &self,
        n: &Notification,
        target: Target,
        oflags: OFlag,
        mode: Mode,
        cloexec: bool,
    ) -> Answer {
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING_OPENS {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Answer::Error(Errno::ENFILE);
        }
        let listener = Arc::clone(&self.listener);
        let waiting = Arc::clone(&self.waiting);
        let id = n.id;
        let spawned = std::thread::Builder::new().spawn(move || {
            match target.open(oflags, mode) {
                Ok(fd) => listener.answer_fd(id, &fd, cloexec),
                Err(e) => listener.answer(id, 0, e as i32),
            }
            waiting.fetch_sub(1, Ordering::SeqCst);
        });
        match spawned {
            Ok(_) => Answer::Later,
            Err(_) => {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                Answer::Error(Errno::ENFILE)
            }
        }
    }

    /// Whether a write to `obj`, an object the emulator holds (one a procfs magic link led to: a
    /// file opened read-only, reopened for writing through `/proc/self/fd/N`), lands on a name the
    /// rules refuse.
    pub(super) fn held_denied(&self, obj: &OwnedFd) -> bool {
        let Some(path) = resolve::fd_path(obj) else {
            return false;
        };
        let (Some(up), Some(file)) = (path.parent(), path.file_name()) else {
            return false;
        };
        let Ok(parent) = nix::fcntl::open(
            up,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            // Where the file is cannot be told: refuse rather than guess.
            return true;
        };
        self.judge(&parent, file, Op::WriteExisting, None) == Verdict::Deny
    }
}
