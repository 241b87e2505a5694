//! Protected paths inside a writable root (`--pin DIR`, `--protect PATH`): Landlock rules only
//! add access, so a write grant on the workspace cannot exclude `.git/hooks`. When the launcher
//! holds the privilege (root, or an unprivileged user namespace the host allows), the payload's
//! process moves into a private mount namespace before it restricts itself, binds every
//! `--protect` path read-only onto itself and every `--pin` directory writable onto itself (a
//! mount point cannot be renamed or removed, so `mv .git .git2 && mkdir -p .git/hooks` fails
//! with `EBUSY`). Nothing propagates back to the host (the namespace's mounts are made slaves
//! first), and the Landlock domain then forbids the payload every mount operation, so it cannot
//! undo them. Each path is opened refusing every symlink and mounted through that descriptor
//! (`open_tree` + `move_mount`), so a swap during the launch cannot redirect a bind.
//!
//! `--probe` reports whether this host lets the launcher do it (`"protect":true`).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sched::{CloneFlags, unshare};

/// Moves this process into a private mount namespace where it may mount: a plain one when it
/// holds `CAP_SYS_ADMIN` (root), else one inside a new user namespace that maps this uid and gid
/// onto themselves (so the payload keeps its identity). The namespace's mounts become slaves, so
/// nothing mounted here reaches the host.
pub fn private_mount_namespace() -> Result<(), String> {
    if unshare(CloneFlags::CLONE_NEWNS).is_err() {
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        // Root without CAP_SYS_ADMIN cannot map uid 0 into a user namespace of its own (that
        // needs CAP_SETFCAP): it would be left in one as the overflow uid.
        if uid.is_root() || nix::unistd::geteuid().is_root() {
            return Err(
                "cannot make a private mount namespace for the protected paths (root without CAP_SYS_ADMIN, and uid 0 cannot be mapped into a user namespace without CAP_SETFCAP)".into(),
            );
        }
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS).map_err(|e| {
            format!(
                "cannot make a private mount namespace for the protected paths (no privilege and no user namespace): {e}"
            )
        })?;
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    }
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the private mount namespace a slave of the host: {e}"))
}

/// Pins each directory of `pinned` (shallowest first: a writable bind onto itself) and binds each
/// path of `read_only` read-only onto itself, in a namespace made by
/// [`private_mount_namespace`]. Then re-enters the working directory, so a payload started inside
/// a protected directory sees the read-only mount too. With nothing to bind, the namespace is
/// made only when `wanted` (the launch stages git directories or mounts a `/proc`), and a host
/// that refuses it then answers `Ok(false)`: the launch goes on without mounts.
pub fn apply(pinned: &[PathBuf], read_only: &[PathBuf], wanted: bool) -> Result<bool, String> {
    if pinned.is_empty() && read_only.is_empty() {
        return Ok(wanted && private_mount_namespace().is_ok());
    }
    private_mount_namespace()?;
    for dir in pinned {
        bind_onto_itself(dir, false)?;
    }
    for path in read_only {
        bind_onto_itself(path, true)?;
    }
    if let Ok(cwd) = std::env::current_dir() {
        // A vanished working directory stays as it was; the payload sees what the caller left.
        let _ = std::env::set_current_dir(cwd);
    }
    Ok(true)
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Clones the mount of `path` (opened refusing symlinks), makes the clone read-only when asked,
/// and moves it onto `path` itself, all through descriptors.
fn bind_onto_itself(path: &Path, read_only: bool) -> Result<(), String> {
    let fail = |what: &str, e: std::io::Error| format!("cannot {what} {path:?}: {e}");
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let target = nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how)
        .map_err(|e| fail("open the protected path", e.into()))?;
    bind_fd_onto(&target, &target, read_only)
        .map(drop)
        .map_err(|(what, e)| fail(what, e))
}

/// Clones the mount at `source` (an open descriptor, `O_PATH` is enough), makes the clone
/// read-only when asked, and moves it onto `target` (another descriptor), with no path resolved
/// in between. Returns the clone's descriptor (its mount id names the new mount).
pub fn bind_fd_onto(
    source: &OwnedFd,
    target: &OwnedFd,
    read_only: bool,
) -> Result<OwnedFd, (&'static str, std::io::Error)> {
    let tree = clone_tree(source, false).map_err(|e| ("clone the mount of", e))?;
    if read_only {
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let empty = CString::default();
        // SAFETY: mount_setattr(2) has no wrapper in std, nix or libc. `attr` is a valid
        // `struct mount_attr` that outlives the call, its size is passed, the descriptor and the
        // empty path are valid.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                empty.as_ptr(),
                libc::AT_EMPTY_PATH as libc::c_uint,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        if rc < 0 {
            return Err((
                "make read-only the bind of",
                std::io::Error::last_os_error(),
            ));
        }
    }
    move_onto(&tree, target).map_err(|e| ("bind onto itself", e))?;
    Ok(tree)
}

/// A detached copy of the mount at `source` (an open descriptor, `O_PATH` is enough), with every
/// mount below it when `recursive`: it holds what it copied however the tree it came from changes
/// later, until [`move_onto`] attaches it.
pub fn clone_tree(source: &OwnedFd, recursive: bool) -> std::io::Result<OwnedFd> {
    let empty = CString::default();
    let mut flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: open_tree(2) has no wrapper in std, nix or libc. The descriptor is open and owned
    // by the caller, the path is a valid NUL-terminated empty string, and the flags are the
    // documented constants; the kernel returns a new descriptor or -1.
    #[allow(unsafe_code)]
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            source.as_raw_fd(),
            empty.as_ptr(),
            flags,
        )
    };
    if tree < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let tree_fd = i32::try_from(tree)
        .map_err(|_| std::io::Error::other(format!("open_tree returned {tree}")))?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    #[allow(unsafe_code)]
    Ok(unsafe { OwnedFd::from_raw_fd(tree_fd) })
}

/// Makes the detached mount `tree` (from [`clone_tree`]) and every mount below it read-only.
pub fn read_only_tree(tree: &OwnedFd) -> std::io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let empty = CString::default();
    // SAFETY: mount_setattr(2) has no wrapper in std, nix or libc. `attr` is a valid
    // `struct mount_attr` that outlives the call, its size is passed, the descriptor and the
    // empty path are valid.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Attaches the detached mount `tree` (from [`clone_tree`]) onto `target` (an open descriptor),
/// with no path resolved in between.
pub fn move_onto(tree: &OwnedFd, target: &OwnedFd) -> std::io::Result<()> {
    let empty = CString::default();
    // SAFETY: move_mount(2) has no wrapper in std, nix or libc. Both descriptors are open and
    // owned here, both paths are the valid empty string, the flags are documented constants.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            target.as_raw_fd(),
            empty.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// True when this process could make a private mount namespace and mount in it (asked in a
/// short-lived child, so the caller's namespaces are untouched).
pub fn can_protect() -> bool {
    // SAFETY: fork(2) in a process that is single-threaded at this point (the probe runs before
    // any thread is started); the child only calls async-signal-safe unshare/mount/write paths
    // and exits with _exit.
    #[allow(unsafe_code)]
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            let code = match private_mount_namespace() {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: _exit is always safe to call; it ends the child without running the
            // parent's destructors or atexit handlers twice.
            #[allow(unsafe_code)]
            unsafe {
                libc::_exit(code)
            }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => matches!(
            nix::sys::wait::waitpid(child, None),
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0))
        ),
        Err(_) => false,
    }
}
