//! What Seatbelt would be asked for one Linux system call of a payload: the SBPL operations, each
//! on the path as Seatbelt sees it (symlinks resolved where the call follows them, the final
//! component kept where it does not), read from the payload's memory and `/proc`.
//!
//! Linux calls with no macOS counterpart stand for the nearest macOS route, named in
//! [`Call::requests`]: a POSIX message queue for `ipc-posix*`, a keyring for the keychain's Mach
//! service, an abstract unix socket for a unix socket with no path.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use super::{Request, Vnode};

/// One payload thread's memory and directories, read through `/proc`.
pub struct Task {
    /// The thread that made the call.
    pub pid: u32,
}

impl Task {
    /// A NUL-terminated string at `addr` in the task's memory (at most 4096 bytes).
    pub fn string(&self, addr: u64) -> Option<Vec<u8>> {
        let bytes = self.bytes(addr, 4096)?;
        let end = bytes.iter().position(|b| *b == 0)?;
        Some(bytes[..end].to_vec())
    }

    /// Up to `len` bytes at `addr` in the task's memory (fewer at the end of a mapping).
    pub fn bytes(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        if addr == 0 {
            return None;
        }
        let mem = std::fs::File::open(format!("/proc/{}/mem", self.pid)).ok()?;
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match mem.read_at(&mut buf[got..], addr + got as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        (got > 0).then(|| {
            buf.truncate(got);
            buf
        })
    }

    /// The directory a `*at` call's `dirfd` names (`AT_FDCWD`: the working directory).
    fn dir(&self, dirfd: i64) -> Option<PathBuf> {
        let link = if dirfd as i32 == libc::AT_FDCWD {
            format!("/proc/{}/cwd", self.pid)
        } else {
            format!("/proc/{}/fd/{}", self.pid, dirfd as i32)
        };
        std::fs::read_link(link).ok()
    }

    /// The path an open descriptor names.
    pub fn fd_path(&self, fd: i64) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{}/fd/{}", self.pid, fd as i32)).ok()
    }

    /// The absolute spelling of `path` given to a call relative to `dirfd`.
    pub fn absolute(&self, dirfd: i64, path: &[u8]) -> Option<PathBuf> {
        let path = Path::new(OsStr::from_bytes(path));
        if path.is_absolute() {
            Some(path.to_path_buf())
        } else {
            Some(self.dir(dirfd)?.join(path))
        }
    }
}

/// `path` as Seatbelt sees it without following its last component: its parent resolved (every
/// symlink on the way), the name kept. `/dev/stdout` and `/proc/<pid>/fd/N` are macOS's
/// `/dev/fd/N` (a descriptor the call already holds).
pub fn nofollow(path: &Path) -> PathBuf {
    if let Some(fd) = descriptor_alias(path) {
        return fd;
    }
    let lexical = lexical(path);
    match (lexical.parent(), lexical.file_name()) {
        (Some(parent), Some(name)) => resolve_dir(parent).join(name),
        _ => lexical,
    }
}

/// `path` as Seatbelt sees it following every symlink, a dangling last one included (a create
/// through it lands at its target).
pub fn follow(path: &Path) -> PathBuf {
    let mut at = nofollow(path);
    for _ in 0..40 {
        match std::fs::read_link(&at) {
            Ok(target) if !at.starts_with("/dev/fd") => {
                let base = at.parent().map(Path::to_path_buf).unwrap_or_default();
                at = nofollow(&base.join(target));
            }
            _ => return at,
        }
    }
    at
}

/// The macOS `/dev/fd/N` for the Linux spellings of a held descriptor.
fn descriptor_alias(path: &Path) -> Option<PathBuf> {
    let text = path.to_str()?;
    let fd = match text {
        "/dev/stdin" => "0",
        "/dev/stdout" => "1",
        "/dev/stderr" => "2",
        _ => {
            let rest = text
                .strip_prefix("/dev/fd/")
                .or_else(|| text.strip_prefix("/proc/self/fd/"))
                .or_else(|| {
                    let after = text.strip_prefix("/proc/")?;
                    let (pid, rest) = after.split_once('/')?;
                    pid.bytes()
                        .all(|b| b.is_ascii_digit())
                        .then_some(rest)?
                        .strip_prefix("fd/")
                })?;
            rest.bytes().all(|b| b.is_ascii_digit()).then_some(rest)?
        }
    };
    Some(PathBuf::from(format!("/dev/fd/{fd}")))
}

/// `path` with `.` dropped and `..` applied lexically (the kernel applies `..` after resolving
/// what comes before it, which [`resolve_dir`] does for the parent).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out = resolve_dir(&out);
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

/// A directory path with every symlink resolved; the part that does not exist is kept as given.
fn resolve_dir(dir: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(dir) {
        return real;
    }
    match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => resolve_dir(parent).join(name),
        _ => dir.to_path_buf(),
    }
}

/// The kind of file at `path` (not following a last symlink), when there is one.
pub fn vnode(path: &Path) -> Option<Vnode> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let t = meta.file_type();
    Some(if t.is_dir() {
        Vnode::Directory
    } else if t.is_symlink() {
        Vnode::Symlink
    } else if t.is_char_device() {
        Vnode::CharDevice
    } else if t.is_block_device() {
        Vnode::BlockDevice
    } else if t.is_fifo() {
        Vnode::Fifo
    } else if t.is_socket() {
        Vnode::Socket
    } else {
        Vnode::Regular
    })
}

/// `op` on `path`, with the kind of file there.
pub fn on(op: &str, path: &Path) -> Request {
    Request {
        vnode: vnode(path),
        ..Request::path(op, path.as_os_str().as_bytes())
    }
}

/// The requests of opening `path` with `flags`: none for a plain read (reads are not
/// governed), `file-write-create` for a new file, `file-write-data` for writing an existing one.
pub fn open(path: &Path, flags: i32) -> Vec<Request> {
    let write = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
    let create = flags & libc::O_CREAT != 0;
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return vec![on("file-write-create", &follow(path).join(".tmpfile"))];
    }
    if !write && !create {
        return Vec::new();
    }
    let target = if flags & libc::O_NOFOLLOW != 0 {
        nofollow(path)
    } else {
        follow(path)
    };
    let exists = std::fs::symlink_metadata(&target).is_ok();
    match (exists, create, write) {
        (false, true, _) => vec![on("file-write-create", &target)],
        (true, _, true) => vec![on("file-write-data", &target)],
        _ => Vec::new(),
    }
}

/// The requests of renaming `from` to `to`: removing the old name and creating the new one (and
/// removing what the new name replaces); both ways for an exchange.
pub fn rename(from: &Path, to: &Path, exchange: bool) -> Vec<Request> {
    let (from, to) = (nofollow(from), nofollow(to));
    let mut out = vec![on("file-write-unlink", &from), on("file-write-create", &to)];
    if std::fs::symlink_metadata(&to).is_ok() {
        out.push(on("file-write-unlink", &to));
    }
    if exchange {
        out.push(on("file-write-create", &from));
    }
    out
}

/// The mode change `mode` on `path`: `file-write-mode`, and `file-write-setugid` for a set-id bit.
pub fn chmod(path: &Path, mode: u64) -> Vec<Request> {
    let mut out = vec![on("file-write-mode", path)];
    if mode & 0o6000 != 0 {
        out.push(on("file-write-setugid", path));
    }
    out
}

/// The socket domain's SBPL name (`AF_UNIX`, ...); a Linux-only domain keeps its number.
pub fn domain(family: i64) -> String {
    match family as i32 {
        libc::AF_UNIX => "AF_UNIX".into(),
        libc::AF_INET => "AF_INET".into(),
        libc::AF_INET6 => "AF_INET6".into(),
        other => format!("AF_{other}"),
    }
}

/// The requests of reaching the address at `addr` (`len` bytes) in the task's memory with `op`
/// (`network-outbound` for connect and send, `network-bind` for bind): an IP endpoint, or a unix
/// socket by its path (an abstract one has none, so no path rule matches it). `None`: no address.
pub fn address(task: &Task, addr: u64, len: u64, op: &str) -> Option<Vec<Request>> {
    let bytes = task.bytes(addr, (len as usize).min(128))?;
    let family = i32::from(u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]));
    Some(match family {
        libc::AF_INET | libc::AF_INET6 => {
            let remote = op == "network-outbound";
            vec![Request {
                remote_ip: remote,
                local_ip: !remote,
                ..Request::op(op)
            }]
        }
        libc::AF_UNIX => {
            let path = &bytes[2..];
            if path.first() == Some(&0) || path.is_empty() {
                return Some(vec![Request::op(op)]);
            }
            let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
            let given = task.absolute(libc::AT_FDCWD as i64, &path[..end])?;
            if op == "network-bind" {
                let at = nofollow(&given);
                vec![on(op, &at), on("file-write-create", &at)]
            } else {
                vec![on(op, &follow(&given))]
            }
        }
        _ => Vec::new(),
    })
}

/// Whether `pid` descends from `root` (its parent chain, read from `/proc`, reaches it).
pub fn descends(pid: u32, root: u32) -> bool {
    let mut at = pid;
    for _ in 0..4096 {
        if at == root {
            return true;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{at}/stat")) else {
            return false;
        };
        match sandbox::liveness::stat_field(&stat, 1).and_then(|p| p.parse().ok()) {
            Some(parent) if parent > 1 => at = parent,
            _ => return false,
        }
    }
    false
}
