//! `--tmp-area DIR`: the session's private temp area, seen at `/tmp`. The host's `/tmp` is shared
//! with every tool the person runs (cargo, rustup and pytest read their config from every parent
//! folder, host processes read FIFOs there), so a call never writes it. In the launcher's
//! private mount namespace `/tmp` becomes an overlay: the host's `/tmp` below (everything
//! already there is still seen), the area's `tmp` directory above (what the payload makes or
//! changes goes there, and only there), the area's `work` directory as the overlay's scratch.
//! What was mounted below `/tmp` (a workspace bound there, a writable root, the protected paths'
//! binds, a clone under a private `/tmp`) is cloned before the overlay hides it and attached
//! again on top, so a workspace below `/tmp` is still the host's own directory. The payload's
//! `$TMPDIR` is `/tmp`. Where overlayfs refuses (mounts a more privileged namespace made below
//! the host's `/tmp`, an upper filesystem without the attributes it needs), the area's `tmp` is
//! bound at `/tmp` instead: the payload then does not see the host's files there; a `read-only`
//! call, which writes nowhere, then keeps the host's `/tmp` read-only instead. Any failure
//! fails the launch: a call never runs with the host's `/tmp`
//! writable when a private one was asked.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::mount::{MsFlags, mount};

use crate::protect::{clone_tree, move_onto, read_only_tree};

/// Where the area is seen.
pub const TMP: &str = "/tmp";

/// Opens `path` as an `O_PATH` descriptor, refusing every symlink on the way.
fn open_path(path: &Path) -> Result<OwnedFd, String> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how)
        .map_err(|e| format!("cannot open {path:?} below the private temp area: {e}"))
}

/// What must stay the host's below `/tmp`: each mount there that no writable root holds (kept
/// read-only: the host's `/tmp` is not written through them either), then each writable root
/// there (kept as it is, its protected paths' read-only binds with it), shallowest first.
fn kept_below_tmp(roots: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
    let table = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read the mount table: {e}"))?;
    let roots = sandbox::mountinfo::topmost(
        roots
            .iter()
            .filter(|r| r.starts_with(TMP) && r.as_path() != Path::new(TMP))
            .cloned()
            .collect(),
    );
    let mounts = sandbox::mountinfo::top_mounts_below(&table, Path::new(TMP))
        .into_iter()
        .filter(|m| !roots.iter().any(|r| m.starts_with(r)))
        .collect();
    Ok((sandbox::mountinfo::topmost(mounts), roots))
}

/// Mounts the area `area_dir` at `/tmp` in this process's mount namespace (made private
/// by the caller), keeping `roots` below `/tmp` the host's own, then sets `$TMPDIR` to `/tmp`.
/// Read-only unless `/tmp` is among `roots` (a `read-only` call sees the area, writes nowhere,
/// and is refused as a read-only bind refuses: `EROFS`; where no overlay can be made it keeps
/// the host's `/tmp`, read-only, instead).
pub fn mount_at_tmp(area_dir: &Path, roots: &[PathBuf]) -> Result<(), String> {
    let writable = roots.iter().any(|r| r.as_path() == Path::new(TMP));
    // Opened here, in this namespace: overlayfs refuses a layer from another mount namespace
    // (a descriptor the caller opened would be one).
    let held = open_path(area_dir)?;
    let area = PathBuf::from(format!("/proc/self/fd/{}", held.as_raw_fd()));
    for part in ["tmp", "work"] {
        if !area.join(part).is_dir() {
            return Err(format!(
                "--tmp-area {area_dir:?} has no {part} directory (the caller makes both)"
            ));
        }
    }
    // Cloned before the overlay hides them (a clone holds its mounts whatever happens to the
    // tree it came from), attached again in the same order afterwards.
    let (mounts, roots) = kept_below_tmp(roots)?;
    let mut clones = Vec::with_capacity(mounts.len() + roots.len());
    for (path, read_only) in mounts
        .iter()
        .map(|m| (m, true))
        .chain(roots.iter().map(|r| (r, false)))
    {
        let source = open_path(path)?;
        let dir = nix::sys::stat::fstat(&source)
            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        let tree = clone_tree(&source, true)
            .map_err(|e| format!("cannot hold {path:?} before the private temp area: {e}"))?;
        if read_only {
            read_only_tree(&tree)
                .map_err(|e| format!("cannot keep {path:?} read-only below {TMP}: {e}"))?;
        }
        clones.push((path, tree, dir));
    }
    let cwd = std::env::current_dir().ok();
    let options = |userxattr: bool| {
        format!(
            "lowerdir={TMP},upperdir={}/tmp,workdir={}/work{}",
            area.display(),
            area.display(),
            if userxattr { ",userxattr" } else { "" }
        )
    };
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    // In a user namespace overlayfs keeps its own attributes as `user.` xattrs (`userxattr`); a
    // kernel or filesystem without them gets the plain options.
    let overlaid = [true, false].into_iter().any(|userxattr| {
        mount(
            Some("overlay"),
            TMP,
            Some("overlay"),
            flags,
            Some(options(userxattr).as_str()),
        )
        .is_ok()
    });
    if !overlaid && !writable {
        // A `read-only` call writes nowhere, so an area without the host's files below it
        // would only hide them: the host's /tmp stays as the caller's profile shows it
        // (read-only), the files of the session's earlier calls not seen.
        drop(clones);
        // SAFETY: as below: the payload's process is single-threaded before its exec.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("TMPDIR", TMP);
        }
        return Ok(());
    }
    if !overlaid {
        // overlayfs refuses a lower directory with mounts below it that a more privileged
        // namespace made (bwrap's binds below /tmp, seen from its nested user namespace), and an
        // upper directory on a filesystem it cannot write its attributes to. The area itself is
        // then the payload's /tmp: still its own, without the host's files below it.
        // The mount points of what is kept, made in the area first (it may be bound read-only).
        for (path, _, dir) in &clones {
            let Ok(rest) = path.strip_prefix(TMP) else {
                continue;
            };
            let point = area.join("tmp").join(rest);
            let made = match dir {
                true => std::fs::create_dir_all(&point),
                false => point
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&point, b"")),
            };
            made.map_err(|e| format!("cannot keep {path:?} below {TMP}: {e}"))?;
        }
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        let upper = nix::fcntl::openat2(&held, "tmp", how)
            .map_err(|e| format!("cannot open the private temp area's tmp: {e}"))?;
        let tree = clone_tree(&upper, false)
            .map_err(|e| format!("cannot mount the private temp area at {TMP}: {e}"))?;
        if !writable {
            read_only_tree(&tree)
                .map_err(|e| format!("cannot mount the private temp area read-only: {e}"))?;
        }
        move_onto(&tree, &open_path(Path::new(TMP))?)
            .map_err(|e| format!("cannot mount the private temp area at {TMP}: {e}"))?;
    }
    for (path, tree, _) in &clones {
        let target = open_path(path)?;
        move_onto(tree, &target)
            .map_err(|e| format!("cannot keep {path:?} the host's below {TMP}: {e}"))?;
    }
    // SAFETY: the launcher's payload process is single-threaded here (no thread is ever spawned
    // before it execs), so nothing reads the environment while it changes.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("TMPDIR", TMP);
    }
    if let Some(cwd) = cwd {
        // A working directory below /tmp is entered again, in the new view.
        let _ = std::env::set_current_dir(cwd);
    }
    Ok(())
}

/// Sets the payload's `$TMPDIR` to `dir` (`--tmpdir`: a private area's `tmp` where no mount
/// shows it at `/tmp`).
pub fn set_tmpdir(dir: &Path) {
    // SAFETY: as in `mount_at_tmp`: the payload's process is single-threaded before its exec.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("TMPDIR", dir);
    }
}
