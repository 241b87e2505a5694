//! The emulator: the process between the launcher's init and the payload that carries out, or
//! refuses, every call of the payload that creates a name or opens a file for writing
//! ([`crate::notify`] stops them in the kernel). It restricts itself with the payload's own
//! Landlock ruleset and holds no capability, so what it does on the payload's behalf is checked
//! by the kernel exactly as the payload's own call would be; the payload then restricts itself
//! once more (a nested domain), so the emulator may read its memory and descriptors while the
//! payload can neither trace nor (from Landlock ABI 6) signal it.
//!
//! Each call's path is read once from the payload's memory and resolved here
//! ([`resolve`]); the emulator then acts on the descriptors it resolved, never on a path the
//! payload could change meanwhile (another thread rewriting the string after a check is the
//! classic hole of a supervisor that lets the kernel re-read it). [`rules`] decides. Calls are
//! handled one at a time, which also serialises a rename against a create that races it.
//!
//! What it changes for a payload: nothing for ordinary work; git's code surface and the
//! protected paths fail with `EROFS` while the call runs (the protected paths' own dialect: an
//! existing one is a read-only bind); a new `.git` (and a new linked
//! worktree's or submodule's git directory) is private to the sandbox until the call ends, when
//! the caller judges it and moves it into place; and `landlock_restrict_self` fails with
//! `EPERM`, because a Landlock domain the payload added would not bind the emulator, which
//! creates files for it.

mod open;
pub mod resolve;
pub mod rules;

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

use crate::notify::{Call, Listener, Notification};
use resolve::{Found, Task, resolve};
use rules::{Op, Rules, Verdict};

/// The error of a refused call: `EROFS`, as a protected path that exists already answers (a
/// read-only bind), so every dialect reads it as a denial (bwrap's `EROFS`, not its `EACCES`,
/// which a payload's own permission errors print too).
const REFUSED: Errno = Errno::EROFS;

/// How many of the payload's opens may wait at once for a FIFO's other end, each in a thread of
/// the emulator's.
const MAX_WAITING_OPENS: usize = 256;

/// What makes a new git directory private: the launcher's init, which can mount.
pub trait Stager {
    /// Makes the just-created directory (`dir`) or file at `target` private to the sandbox,
    /// with `mode`; returns the mount id of what now covers it.
    fn stage(&mut self, target: &OwnedFd, dir: bool, mode: u32) -> Result<u64, Errno>;
}

/// The emulator's state.
pub struct Emulator {
    listener: Arc<Listener>,
    rules: Rules,
    stager: Option<Box<dyn Stager>>,
    /// Mount ids of the staged git directories.
    staged: HashSet<u64>,
    /// How many opens wait for a FIFO's other end in threads of their own.
    waiting: Arc<AtomicUsize>,
}

/// What a handled call answers.
enum Answer {
    Value(i64),
    Error(Errno),
    Fd(OwnedFd, bool),
    /// Answered by a thread (an open that may block: a FIFO).
    Later,
}

impl From<Result<i64, Errno>> for Answer {
    fn from(r: Result<i64, Errno>) -> Answer {
        match r {
            Ok(v) => Answer::Value(v),
            Err(e) => Answer::Error(e),
        }
    }
}

impl Emulator {
    /// An emulator answering `listener`'s calls under `rules`.
    pub fn new(listener: Listener, rules: Rules, stager: Option<Box<dyn Stager>>) -> Emulator {
        // Modes are masked with each caller's own umask, read per call.
        nix::sys::stat::umask(Mode::empty());
        Emulator {
            listener: Arc::new(listener),
            rules,
            stager,
            staged: HashSet::new(),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The listener's descriptor, to poll on.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.listener.fd().as_fd()
    }

    /// Receives and answers one stopped call (a call whose thread died is dropped).
    pub fn handle_one(&mut self) {
        let Ok(n) = self.listener.recv() else {
            return;
        };
        let answer = match Call::of(n.nr) {
            None => Answer::Error(Errno::ENOSYS),
            Some(call) => match Task::of(n.tid) {
                Err(e) => Answer::Error(e),
                Ok(task) => self.dispatch(call, &task, &n),
            },
        };
        match answer {
            Answer::Value(v) => self.listener.answer(n.id, v, 0),
            Answer::Error(e) => self.listener.answer(n.id, 0, e as i32),
            Answer::Fd(fd, cloexec) => self.listener.answer_fd(n.id, &fd, cloexec),
            Answer::Later => {}
        }
    }

    fn dispatch(&mut self, call: Call, task: &Task, n: &Notification) -> Answer {
        let a = n.args;
        let int = |v: u64| v as u32 as i32;
        match call {
            Call::Open => self.open(task, n, libc::AT_FDCWD, a[0], int(a[1]), a[2] as u32),
            Call::OpenAt => self.open(task, n, int(a[0]), a[1], int(a[2]), a[3] as u32),
            Call::Creat => self.open(
                task,
                n,
                libc::AT_FDCWD,
                a[0],
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                a[1] as u32,
            ),
            Call::Mkdir => self.make(task, n, libc::AT_FDCWD, a[0], Make::Dir(a[1] as u32)),
            Call::MkdirAt => self.make(task, n, int(a[0]), a[1], Make::Dir(a[2] as u32)),
            Call::Mknod => self.make(task, n, libc::AT_FDCWD, a[0], Make::Node(a[1] as u32, a[2])),
            Call::MknodAt => self.make(task, n, int(a[0]), a[1], Make::Node(a[2] as u32, a[3])),
            Call::Symlink => self.make(task, n, libc::AT_FDCWD, a[1], Make::Symlink(a[0])),
            Call::SymlinkAt => self.make(task, n, int(a[1]), a[2], Make::Symlink(a[0])),
            Call::Link => self
                .link(task, n, (libc::AT_FDCWD, a[0]), (libc::AT_FDCWD, a[1]), 0)
                .into(),
            Call::LinkAt => self
                .link(task, n, (int(a[0]), a[1]), (int(a[2]), a[3]), int(a[4]))
                .into(),
            Call::Rename => self
                .rename(task, n, (libc::AT_FDCWD, a[0]), (libc::AT_FDCWD, a[1]), 0)
                .into(),
            Call::RenameAt => self
                .rename(task, n, (int(a[0]), a[1]), (int(a[2]), a[3]), 0)
                .into(),
            Call::RenameAt2 => self
                .rename(task, n, (int(a[0]), a[1]), (int(a[2]), a[3]), a[4] as u32)
                .into(),
            Call::Truncate => self.truncate(task, n, a[0], a[1] as i64).into(),
            Call::LandlockRestrictSelf => Answer::Error(Errno::EPERM),
        }
    }

    /// Reads the path at `addr` and resolves it from `dirfd` for `task`.
    fn path(&self, task: &Task, dirfd: i32, addr: u64, follow: bool) -> Result<Found, Errno> {
        let path = task.read_string(addr)?;
        let start = if path.first() == Some(&b'/') {
            task.root()?
        } else {
            task.dir(dirfd)?
        };
        resolve(task, &start, &path, follow)
    }

    /// Whether the call is still waiting: checked after reading its memory and `/proc`, before
    /// acting, so a thread that died (and a pid reused meanwhile) is never acted for.
    fn still(&self, n: &Notification) -> Result<(), Errno> {
        if self.listener.valid(n.id) {
            Ok(())
        } else {
            Err(Errno::ESRCH)
        }
    }

    fn judge(
        &self,
        parent: &OwnedFd,
        name: &OsStr,
        op: Op,
        moved: Option<(&OwnedFd, &OsStr)>,
    ) -> Verdict {
        self.rules.judge(&self.staged, parent, name, op, moved)
    }

    /// Creates `name` in `parent` empty (`O_EXCL`), then has it staged.
    fn stage_file(&mut self, parent: &OwnedFd, name: &OsStr, mode: Mode) -> Result<(), Errno> {
        let made = nix::fcntl::openat(
            parent,
            name,
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            mode,
        )?;
        drop(made);
        self.stage_at(parent, name, false, mode.bits())
    }

    fn stage_at(
        &mut self,
        parent: &OwnedFd,
        name: &OsStr,
        dir: bool,
        mode: u32,
    ) -> Result<(), Errno> {
        let target = nix::fcntl::openat(
            parent,
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let Some(stager) = self.stager.as_mut() else {
            return Err(REFUSED);
        };
        match stager.stage(&target, dir, mode) {
            Ok(id) => {
                self.staged.insert(id);
                Ok(())
            }
            Err(e) => {
                // What could not be made private must not stay on the host.
                let flag = if dir {
                    nix::unistd::UnlinkatFlags::RemoveDir
                } else {
                    nix::unistd::UnlinkatFlags::NoRemoveDir
                };
                let _ = nix::unistd::unlinkat(parent, name, flag);
                Err(e)
            }
        }
    }

    fn make(&mut self, task: &Task, n: &Notification, dirfd: i32, addr: u64, what: Make) -> Answer {
        self.make_inner(task, n, dirfd, addr, what).into()
    }

    fn make_inner(
        &mut self,
        task: &Task,
        n: &Notification,
        dirfd: i32,
        addr: u64,
        what: Make,
    ) -> Result<i64, Errno> {
        let target = match what {
            Make::Symlink(at) => Some(task.read_string(at)?),
            _ => None,
        };
        let (parent, name, trailing) = self.path(task, dirfd, addr, false)?.entry(Errno::EEXIST)?;
        self.still(n)?;
        let umask = task.umask();
        let call_name = Found::call_name(&name, trailing);
        let op = match what {
            Make::Dir(_) => Op::CreateDir,
            _ => Op::CreateOther,
        };
        let verdict = self.judge(&parent, &name, op, None);
        match (what, verdict) {
            (_, Verdict::Deny) | (Make::Node(..) | Make::Symlink(_), Verdict::StageDir) => {
                Err(REFUSED)
            }
            (_, Verdict::StageFile) => Err(REFUSED),
            (Make::Dir(mode), v) => {
                let mode = mode & !umask & 0o7777;
                nix::sys::stat::mkdirat(
                    &parent,
                    call_name.as_os_str(),
                    Mode::from_bits_truncate(mode),
                )?;
                if v == Verdict::StageDir {
                    self.stage_at(&parent, &name, true, mode)?;
                }
                Ok(0)
            }
            (Make::Node(mode, dev), _) => {
                let kind = mode & libc::S_IFMT;
                let perm = mode & !libc::S_IFMT & !umask & 0o7777;
                let c = std::ffi::CString::new(call_name.into_vec()).map_err(|_| Errno::EINVAL)?;
                #[allow(unsafe_code)]
                // SAFETY: mknodat(2) with a descriptor we own, a valid C string and plain
                // integers; nix's wrapper cannot pass a raw file type of 0 (a regular file).
                let rc = unsafe { libc::mknodat(parent.as_raw_fd(), c.as_ptr(), kind | perm, dev) };
                Errno::result(rc).map(|_| 0)
            }
            (Make::Symlink(_), _) => {
                let target = OsString::from_vec(target.unwrap_or_default());
                nix::unistd::symlinkat(target.as_os_str(), &parent, call_name.as_os_str())?;
                Ok(0)
            }
        }
    }

    fn link(
        &mut self,
        task: &Task,
        n: &Notification,
        (odir, oaddr): (i32, u64),
        (ndir, naddr): (i32, u64),
        flags: i32,
    ) -> Result<i64, Errno> {
        let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
        let empty = flags & libc::AT_EMPTY_PATH != 0;
        let old = task.read_string(oaddr)?;
        let source = if empty && old.is_empty() {
            None
        } else {
            Some(self.path(task, odir, oaddr, follow)?)
        };
        let (np, nn, trailing) = self.path(task, ndir, naddr, false)?.entry(Errno::EEXIST)?;
        self.still(n)?;
        if self.judge(&np, &nn, Op::CreateOther, None) != Verdict::Allow {
            return Err(REFUSED);
        }
        let new_name = Found::call_name(&nn, trailing);
        match source {
            None => {
                // The descriptor itself (an O_TMPFILE file, most often): linked through its
                // /proc entry, which is how an unprivileged process may do it.
                // Held from here on, so the object judged is the one linked (the payload's
                // descriptor may be another by then).
                let via = task.fd_path(odir);
                let obj = nix::fcntl::open(
                    via.as_str(),
                    OFlag::O_PATH | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
                if self.held_denied(&obj) {
                    return Err(REFUSED);
                }
                link_held(&obj, &np, &new_name)?;
            }
            Some(Found::Magic { dir, name }) => {
                let obj = held(&dir, &name)?;
                if self.held_denied(&obj) {
                    return Err(REFUSED);
                }
                link_held(&obj, &np, &new_name)?;
            }
            Some(Found::Entry { parent, name, .. }) => {
                // A second name for a file the rules keep unwritten would let it be written.
                if self.judge(&parent, &name, Op::WriteExisting, None) == Verdict::Deny {
                    return Err(REFUSED);
                }
                nix::unistd::linkat(
                    &parent,
                    name.as_os_str(),
                    &np,
                    new_name.as_os_str(),
                    AtFlags::empty(),
                )?;
            }
        }
        Ok(0)
    }

    fn rename(
        &mut self,
        task: &Task,
        n: &Notification,
        (odir, oaddr): (i32, u64),
        (ndir, naddr): (i32, u64),
        flags: u32,
    ) -> Result<i64, Errno> {
        let (op, on, ot) = self.path(task, odir, oaddr, false)?.entry(Errno::EXDEV)?;
        let (np, nn, nt) = self.path(task, ndir, naddr, false)?.entry(Errno::EXDEV)?;
        self.still(n)?;
        let is_dir = |p: &OwnedFd, name: &OsString| {
            nix::sys::stat::fstatat(p, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        };
        let moved_dir = is_dir(&op, &on);
        let verdict = self.judge(
            &np,
            &nn,
            Op::RenameTarget { dir: moved_dir },
            Some((&op, &on)),
        );
        if verdict != Verdict::Allow {
            return Err(REFUSED);
        }
        if flags & libc::RENAME_EXCHANGE != 0 {
            let back = Op::RenameTarget {
                dir: is_dir(&np, &nn),
            };
            if self.judge(&op, &on, back, Some((&np, &nn))) != Verdict::Allow {
                return Err(REFUSED);
            }
        }
        let (old_name, new_name) = (Found::call_name(&on, ot), Found::call_name(&nn, nt));
        nix::fcntl::renameat2(
            &op,
            old_name.as_os_str(),
            &np,
            new_name.as_os_str(),
            nix::fcntl::RenameFlags::from_bits_retain(flags),
        )?;
        Ok(0)
    }

    fn truncate(
        &mut self,
        task: &Task,
        n: &Notification,
        addr: u64,
        len: i64,
    ) -> Result<i64, Errno> {
        let target = match self.path(task, libc::AT_FDCWD, addr, true)? {
            Found::Entry { parent, name, .. } => Target::Name(parent, name),
            // Held, so what is judged is what is truncated.
            Found::Magic { dir, name } => Target::Held(held(&dir, &name)?),
        };
        self.still(n)?;
        let denied = match &target {
            Target::Held(obj) => self.held_denied(obj),
            Target::Name(dir, name) => {
                self.judge(dir, name, Op::WriteExisting, None) == Verdict::Deny
            }
        };
        if denied {
            return Err(REFUSED);
        }
        let st = match &target {
            Target::Held(obj) => nix::sys::stat::fstat(obj)?,
            Target::Name(dir, name) => {
                nix::sys::stat::fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?
            }
        };
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => return Err(Errno::EISDIR),
            libc::S_IFREG => {}
            _ => return Err(Errno::EINVAL),
        }
        if self.rules.truncate_ungoverned {
            // As the payload's own truncate(2) would go: by path, which its ABI does not govern.
            nix::unistd::truncate(&target.proc_path(), len)?;
            return Ok(0);
        }
        let oflags = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        let fd = target.open(oflags | OFlag::O_NOFOLLOW, Mode::empty())?;
        nix::unistd::ftruncate(&fd, len)?;
        Ok(0)
    }
}

/// What an open acts on.
enum Target {
    /// A name in a directory (never followed when the call said so: the flags carry it).
    Name(OwnedFd, OsString),
    /// An object the emulator holds (`O_PATH`), reached through a procfs magic link and judged as
    /// held: it is opened again through the emulator's own `/proc/self/fd`, never through the
    /// payload's descriptor, which another of its threads may point elsewhere meanwhile.
    Held(OwnedFd),
}

impl Target {
    /// Opens it with `oflags` (`O_NOFOLLOW` is dropped for a held object: its magic link must be
    /// followed, and leads only to the object held).
    fn open(&self, oflags: OFlag, mode: Mode) -> Result<OwnedFd, Errno> {
        match self {
            Target::Name(dir, name) => nix::fcntl::openat(dir, name.as_os_str(), oflags, mode),
            Target::Held(obj) => {
                nix::fcntl::open(own_path(obj).as_str(), oflags & !OFlag::O_NOFOLLOW, mode)
            }
        }
    }

    /// A path that reaches it through this process's `/proc`.
    fn proc_path(&self) -> std::path::PathBuf {
        match self {
            Target::Name(dir, name) => std::path::Path::new(&own_path(dir)).join(name),
            Target::Held(obj) => own_path(obj).into(),
        }
    }
}

/// The path of one of the emulator's own descriptors.
fn own_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// The object the procfs magic link `name` in `dir` leads to now, held by the emulator.
fn held(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    nix::fcntl::openat(dir, name, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
}

/// Links the held object `obj` as `name` in `dir`.
fn link_held(obj: &OwnedFd, dir: &OwnedFd, name: &OsStr) -> Result<(), Errno> {
    nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        own_path(obj).as_str(),
        dir,
        name,
        AtFlags::AT_SYMLINK_FOLLOW,
    )
}

/// What a `make` call creates.
#[derive(Clone, Copy)]
enum Make {
    Dir(u32),
    Node(u32, u64),
    /// The address of the link's target string.
    Symlink(u64),
}
