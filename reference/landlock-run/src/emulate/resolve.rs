//! A stopped thread's view of a path: its memory, its descriptors, its working directory and
//! root, read through `/proc/<tid>` and `process_vm_readv` (the emulator's Landlock domain is an
//! ancestor of the payload's, so the kernel lets it), and the path resolved one component at a
//! time the way the kernel would resolve it for that thread.
//!
//! The kernel would resolve `/proc/self` and `/proc/thread-self` as the emulator itself, so the
//! walk does it by hand: every symlink is followed textually, `self` and `thread-self` at the root
//! of a procfs become the thread's own entries, and a procfs "magic" link (`/proc/<pid>/fd/N`,
//! `cwd`, `root`, `exe`: their text is no path to follow) is opened by the kernel from the
//! thread's own `/proc` directory, which reaches the very object the thread holds.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

/// The kernel's limit on one path argument, terminating NUL included.
const PATH_MAX: usize = 4096;

/// How many symlinks one resolution follows before it fails with `ELOOP` (the kernel's 40).
const MAX_LINKS: u32 = 40;

/// `PROC_SUPER_MAGIC` (linux/magic.h).
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// The thread a call stopped in.
#[derive(Clone, Copy, Debug)]
pub struct Task {
    /// The thread's id (in the emulator's PID namespace).
    pub tid: i32,
    /// Its thread group (process) id.
    pub tgid: i32,
    /// Its file-creation mask when the call stopped.
    umask: u32,
}

impl Task {
    /// The thread `tid`, with its thread group and file-creation mask read from one read of
    /// `/proc/<tid>/status` (the kernel writes the whole file for every read: one per call).
    pub fn of(tid: i32) -> Result<Task, Errno> {
        let text = std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(io_errno)?;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        let tgid = field("Tgid:")
            .ok_or(Errno::ESRCH)?
            .parse()
            .map_err(|_| Errno::ESRCH)?;
        // A kernel that shows no mask (before 4.7): the usual one.
        let umask = field("Umask:")
            .and_then(|v| u32::from_str_radix(v, 8).ok())
            .unwrap_or(0o022);
        Ok(Task { tid, tgid, umask })
    }

    /// The thread's file-creation mask (`0o022` where the kernel does not show it).
    pub fn umask(&self) -> u32 {
        self.umask
    }

    /// The NUL-terminated string at `addr` in the thread's memory (`EFAULT` for a bad address,
    /// `ENAMETOOLONG` past [`PATH_MAX`]). Read page by page, so a string ending just before an
    /// unmapped page is read whole.
    pub fn read_string(&self, addr: u64) -> Result<Vec<u8>, Errno> {
        const PAGE: u64 = 4096;
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < PATH_MAX {
            let room = (PAGE - at % PAGE).min((PATH_MAX - out.len()) as u64) as usize;
            let mut buf = vec![0u8; room];
            let got = read_memory(self.tid, at, &mut buf)?;
            if got == 0 {
                return Err(Errno::EFAULT);
            }
            if let Some(end) = buf[..got].iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..end]);
                return Ok(out);
            }
            out.extend_from_slice(&buf[..got]);
            at += got as u64;
        }
        Err(Errno::ENAMETOOLONG)
    }

    /// The directory a `*at` call's `dirfd` names for this thread: its working directory for
    /// `AT_FDCWD`, else its descriptor (opened `O_PATH` through `/proc/<tid>/fd/N`).
    pub fn dir(&self, dirfd: i32) -> Result<OwnedFd, Errno> {
        let path = if dirfd == libc::AT_FDCWD {
            format!("/proc/{}/cwd", self.tid)
        } else if dirfd < 0 {
            return Err(Errno::EBADF);
        } else {
            format!("/proc/{}/fd/{dirfd}", self.tid)
        };
        nix::fcntl::open(
            path.as_str(),
            OFlag::O_PATH | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| if e == Errno::ENOENT { Errno::EBADF } else { e })
    }

    /// The thread's root directory.
    pub fn root(&self) -> Result<OwnedFd, Errno> {
        nix::fcntl::open(
            format!("/proc/{}/root", self.tid).as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
    }

    /// The `/proc/<tid>/fd/N` path of one of the thread's descriptors (for `AT_EMPTY_PATH`).
    pub fn fd_path(&self, fd: i32) -> String {
        format!("/proc/{}/fd/{fd}", self.tid)
    }
}

fn io_errno(e: std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// `process_vm_readv(2)` of one range: how many bytes were read.
fn read_memory(tid: i32, addr: u64, buf: &mut [u8]) -> Result<usize, Errno> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec points at `buf`, which is live and as long as it says; the remote
    // one names memory of the other process, which the kernel reads checked (EFAULT when bad).
    #[allow(unsafe_code)]
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    usize::try_from(Errno::result(n)?).map_err(|_| Errno::EIO)
}

/// Where a path leads.
#[derive(Debug)]
pub enum Found {
    /// A name in a directory: it does not exist, or it exists and is not followed (a symlink
    /// when the last component is not followed, or anything that is no symlink).
    Entry {
        /// The directory (`O_PATH`).
        parent: OwnedFd,
        /// The last component.
        name: OsString,
        /// The path ended with `/` (the call must see it: `open("x/", O_CREAT)` is `EISDIR`).
        trailing_slash: bool,
    },
    /// A procfs magic link (`/proc/<pid>/fd/N`, `cwd`, `root`, `exe`) as the last component: it
    /// names an object, not a path, and only the kernel can open it.
    Magic {
        /// Its procfs directory (`O_PATH`).
        dir: OwnedFd,
        /// Its name there.
        name: OsString,
    },
}

impl Found {
    /// The directory, the name and its trailing `/`, for a call that makes a new name: a magic
    /// link there fails with `magic` (it names an object that exists).
    pub fn entry(self, magic: Errno) -> Result<(OwnedFd, OsString, bool), Errno> {
        match self {
            Found::Entry {
                parent,
                name,
                trailing_slash,
            } => Ok((parent, name, trailing_slash)),
            Found::Magic { .. } => Err(magic),
        }
    }

    /// The last component with the trailing `/` the path had, as the final call must get it.
    pub fn call_name(name: &OsStr, trailing_slash: bool) -> OsString {
        let mut n = name.to_os_string();
        if trailing_slash {
            n.push("/");
        }
        n
    }
}

fn is_proc(fd: &OwnedFd) -> bool {
    nix::sys::statfs::fstatfs(fd).is_ok_and(|s| s.filesystem_type().0 == PROC_SUPER_MAGIC)
}

fn is_proc_root(fd: &OwnedFd) -> bool {
    is_proc(fd) && nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_ino == 1)
}

/// Whether `a` and `b` are the same directory on the same mount.
fn same_place(a: &OwnedFd, b: &OwnedFd) -> bool {
    match (nix::sys::stat::fstat(a), nix::sys::stat::fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino && mnt_id(a) == mnt_id(b),
        _ => false,
    }
}

/// The mount id of the mount `fd` is on (`statx` `STATX_MNT_ID`), or `None`.
pub fn mnt_id(fd: &impl AsFd) -> Option<u64> {
    // SAFETY: `statx` is plain old data, zeroed before the call fills it.
    #[allow(unsafe_code)]
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: statx(2) with AT_EMPTY_PATH reads the descriptor's own inode; the path is a valid
    // empty C string and `stx` a live local the kernel writes.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::statx(
            fd.as_fd().as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_MNT_ID,
            &mut stx,
        )
    };
    (rc == 0 && stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id)
}

fn dup(fd: &OwnedFd) -> Result<OwnedFd, Errno> {
    fd.try_clone().map_err(io_errno)
}

fn components(path: &[u8]) -> Vec<OsString> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(|c| OsString::from_vec(c.to_vec()))
        .collect()
}

/// Resolves `path` for `task`, starting at `start` when relative (at the task's root when
/// absolute). The last component is followed when `follow_last` (or the path ends with `/`).
pub fn resolve(
    task: &Task,
    start: &OwnedFd,
    path: &[u8],
    follow_last: bool,
) -> Result<Found, Errno> {
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    let root = task.root()?;
    let trailing_slash = path.len() > 1 && path.ends_with(b"/");
    let follow_last = follow_last || trailing_slash;
    let mut cur = if path[0] == b'/' {
        dup(&root)?
    } else {
        dup(start)?
    };
    let mut rest: std::collections::VecDeque<OsString> = components(path).into();
    if rest.is_empty() {
        // "/" or "." or "a/.." reduced to nothing: the start itself, named "." in itself.
        return Ok(Found::Entry {
            parent: cur,
            name: ".".into(),
            trailing_slash: false,
        });
    }
    let mut links = 0;
    while let Some(comp) = rest.pop_front() {
        let last = rest.is_empty();
        if comp == ".." {
            if last {
                return Ok(Found::Entry {
                    parent: cur,
                    name: comp,
                    trailing_slash,
                });
            }
            if !same_place(&cur, &root) {
                cur = nix::fcntl::openat(
                    &cur,
                    "..",
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
            }
            continue;
        }
        if (comp == "self" || comp == "thread-self") && is_proc_root(&cur) {
            let own = if comp == "self" {
                task.tgid.to_string()
            } else {
                format!("{}/task/{}", task.tgid, task.tid)
            };
            for (i, c) in components(own.as_bytes()).into_iter().enumerate() {
                rest.insert(i, c);
            }
            continue;
        }
        if last && !follow_last {
            return Ok(Found::Entry {
                parent: cur,
                name: comp,
                trailing_slash,
            });
        }
        let st = match nix::sys::stat::fstatat(&cur, comp.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
        {
            Ok(st) => st,
            Err(Errno::ENOENT) if last => {
                return Ok(Found::Entry {
                    parent: cur,
                    name: comp,
                    trailing_slash,
                });
            }
            Err(e) => return Err(e),
        };
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            let target = nix::fcntl::readlinkat(&cur, comp.as_os_str())?;
            let bytes = target.as_bytes();
            if is_proc(&cur) && (bytes.starts_with(b"/") || bytes.contains(&b':')) {
                // A magic link: only the kernel can follow it (to the thread's own object).
                if last {
                    return Ok(Found::Magic {
                        dir: cur,
                        name: comp,
                    });
                }
                cur = nix::fcntl::openat(
                    &cur,
                    comp.as_os_str(),
                    OFlag::O_PATH | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
                continue;
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(Errno::ELOOP);
            }
            if bytes.starts_with(b"/") {
                cur = dup(&root)?;
            }
            let mut spliced: std::collections::VecDeque<OsString> = components(bytes).into();
            if spliced.is_empty() && last {
                // A link to "/" or ".": the directory itself.
                return Ok(Found::Entry {
                    parent: cur,
                    name: ".".into(),
                    trailing_slash,
                });
            }
            spliced.extend(rest);
            rest = spliced;
            continue;
        }
        if last {
            return Ok(Found::Entry {
                parent: cur,
                name: comp,
                trailing_slash,
            });
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        cur = nix::fcntl::openat(
            &cur,
            comp.as_os_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
    }
    // Only reachable when every remaining component was consumed by a ".." or a proc rewrite.
    Ok(Found::Entry {
        parent: cur,
        name: ".".into(),
        trailing_slash,
    })
}

/// The path of an open descriptor as this process's `/proc` spells it (`None` for an object
/// with no path: a pipe, a socket, a deleted file). `/proc` marks a deleted object by appending
/// ` (deleted)`, which a folder may also be named: the path counts when it still leads to the
/// very object (a payload's folder named `x (deleted)` is judged as any other).
pub fn fd_path(fd: &impl AsFd) -> Option<std::path::PathBuf> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd())).ok()?;
    let bytes = link.as_os_str().as_bytes();
    if !bytes.starts_with(b"/") {
        return None;
    }
    if bytes.ends_with(b" (deleted)") {
        let here = nix::sys::stat::fstat(fd).ok()?;
        let named = nix::sys::stat::lstat(&link).ok()?;
        if (named.st_dev, named.st_ino) != (here.st_dev, here.st_ino) {
            return None;
        }
    }
    Some(link)
}
