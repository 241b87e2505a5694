//! Staging: while a call runs, the launcher makes every new git directory it creates (a `.git`
//! of `git init` or `git clone`, a linked worktree's or a submodule's git directory, a gitfile)
//! private to the sandbox: the host sees an empty directory (or file) where the payload sees its
//! own, so the person's git, run beside the call by an editor or a shell prompt, finds no
//! repository there and runs nothing of it. The launcher records where each belongs
//! (`N.target`: the path, then `device:inode`); after the call, once every process of it is
//! gone, [`merge`] judges each staged git directory (what git's code surface it may keep: the
//! rules of [`crate::gitguard`]), drops the rest, and moves it into place, its `HEAD` last (git
//! takes a folder for a git directory only once it holds a `HEAD`). The post-call guard then
//! judges the result as it judges any new repository.
//!
//! The staging directory lies outside every writable root, in this user's cache
//! (`$XDG_CACHE_HOME/sandbox-conformance/stage/`, checked like the probe cache: not reachable by
//! the policy's payload, not writable by others), one per launch, removed after the merge.

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use landlock_run::staged::{RECORD_SUFFIX, StagedTarget};
use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use sandbox::{ProviderPolicy, SandboxMode};

/// Names in a git directory that hold code or config git runs: judged before a staged git
/// directory is merged.
const HOOKS: &str = "hooks";

/// Makes a fresh staging directory for one launch under `policy`: returns the directory of this
/// process that holds it (the same for every launch of the process, so a launch's argv does not
/// depend on which launch it is), the staging directory itself as its guard ([`StageDir`]), and a
/// descriptor of it for the launcher (`--stage-fd`). `None` when this user has no usable place for
/// one: the launcher then refuses new git directories instead.
pub fn create(policy: &ProviderPolicy) -> Option<(PathBuf, StageDir, OwnedFd)> {
    let base = crate::cache::default_dir()?.parent()?.join("stage");
    let base =
        sandbox::check_state_dir("the staging directory", &base, std::slice::from_ref(policy))
            .ok()?;
    let root = base.join(std::process::id().to_string());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .ok()?;
    crate::temp_area::forget_the_dead(&base, |dir| {
        let _ = std::fs::remove_dir_all(dir);
    });
    for attempt in 0..64u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = root.join(format!("call-{nanos:x}-{attempt}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                let fd = nix::fcntl::open(
                    dir.as_path(),
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .ok()?;
                // The guard holds a copy of the launcher's descriptor: the directory is opened
                // once.
                let held = fd.try_clone().ok();
                return Some((root, StageDir { path: dir, held }, fd));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

/// A launch's staging directory, held by the launch ([`sandbox::LaunchFds::hold`]): removed
/// when the last copy of the launch goes, so a launch confined and never run (a caller that only
/// read its argv, or one that failed before the spawn) leaves nothing in this user's cache. After
/// a run [`merge`] has removed it already, and a directory made since under the same name (another
/// launch's) is not this one: the guard holds the directory open, so its inode cannot be reused,
/// and removes the path only while the path is still that inode.
#[derive(Debug)]
pub struct StageDir {
    path: PathBuf,
    held: Option<OwnedFd>,
}

impl StageDir {
    /// Where the staging directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StageDir {
    fn drop(&mut self) {
        let Some(held) = &self.held else {
            return;
        };
        let id = |m: nix::sys::stat::FileStat| (m.st_dev, m.st_ino);
        let same = match (
            nix::sys::stat::fstat(held),
            nix::sys::stat::lstat(self.path.as_path()),
        ) {
            (Ok(a), Ok(b)) => id(a) == id(b),
            _ => false,
        };
        // Nothing of a payload is in it unless the launch ran, and then merge removed it; a
        // link inside is removed as a link, never followed (remove_dir_all does not follow).
        if same {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// One staged entry: `N` in the staging directory and where it belongs.
struct Staged {
    source: PathBuf,
    target: PathBuf,
    id: (u64, u64),
}

fn staged_entries(dir: &Path) -> Vec<Staged> {
    let Ok(list) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, Staged)> = list
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name.strip_suffix(RECORD_SUFFIX)?.parse().ok()?;
            let record = StagedTarget::decode(&std::fs::read(e.path()).ok()?)?;
            Some((
                n,
                Staged {
                    source: dir.join(n.to_string()),
                    target: record.path,
                    id: (record.dev, record.ino),
                },
            ))
        })
        .collect();
    found.sort_by_key(|(n, _)| *n);
    found.into_iter().map(|(_, s)| s).collect()
}

/// The denial line of a staged part that was not merged.
fn line(policy_mode: SandboxMode, what: &str, path: &Path) -> String {
    format!(
        "{} {what} (git's code surface): {}",
        sandbox::denial_marker(policy_mode),
        path.display()
    )
}

/// Opens `target` (absolute) beneath the writable root of `roots` that holds it, never following
/// a symlink, and checks it is still the entry the launcher made (`id`).
fn open_target(target: &Path, roots: &[PathBuf], id: (u64, u64)) -> Result<OwnedFd, String> {
    let root = roots
        .iter()
        .filter(|r| target.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .ok_or_else(|| "outside every writable root".to_string())?;
    let rel = target.strip_prefix(root).map_err(|e| e.to_string())?;
    let root_fd = nix::fcntl::open(
        root.as_path(),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.to_string())?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = nix::fcntl::openat2(&root_fd, rel, how).map_err(|e| e.to_string())?;
    let st = nix::sys::stat::fstat(&fd).map_err(|e| e.to_string())?;
    if (st.st_dev, st.st_ino) != id {
        return Err("it is no longer the entry the launcher made".into());
    }
    Ok(fd)
}

/// Moves the staged git directories and gitfiles of `dir` into place and removes `dir`; returns
/// a denial line for each part of git's code surface it did not merge (and for anything it could
/// not put in place). `roots` are the launch's writable roots (canonical).
pub fn merge(dir: &Path, roots: &[PathBuf], mode: SandboxMode) -> Vec<String> {
    let mut lines = Vec::new();
    let mut heads = Vec::new();
    for s in staged_entries(dir) {
        let target = match open_target(&s.target, roots, s.id) {
            Ok(fd) => fd,
            Err(why) => {
                lines.push(format!(
                    "{} not merged (git's code surface): {}: {why}",
                    sandbox::denial_marker(mode),
                    s.target.display()
                ));
                continue;
            }
        };
        let Ok(meta) = std::fs::symlink_metadata(&s.source) else {
            continue;
        };
        if meta.is_dir() {
            sanitize(&s.source, &s.target, mode, &mut lines);
            if let Err(e) = move_children(&s.source, &target, &s.target) {
                lines.push(line(mode, &format!("not merged: {e}"), &s.target));
            }
            if s.source.join("HEAD").symlink_metadata().is_ok() {
                heads.push((s.source.clone(), target, s.target.clone()));
            }
        } else if let Err(e) = copy_file_into(&s.source, &target) {
            lines.push(line(mode, &format!("not merged: {e}"), &s.target));
        }
    }
    for (source, target, shown) in heads {
        if let Err(e) = move_entry(&source, OsStr::new("HEAD"), &target) {
            lines.push(line(mode, &format!("not merged: {e}"), &shown.join("HEAD")));
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    lines
}

/// Drops from the staged git directory `source` (and every git directory below it: a clone's
/// submodules) what git would run or read as config that the guard would not keep: hooks other
/// than `*.sample`, a config with a key that names a program, `info/attributes`, `remotes`,
/// `branches`, and a `commondir` anywhere but a linked worktree's git directory (where it must
/// lead back to the repository's, `../..`).
fn sanitize(source: &Path, target: &Path, mode: SandboxMode, lines: &mut Vec<String>) {
    let worktree_dir = target
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "worktrees");
    let mut stack = vec![(source.to_path_buf(), target.to_path_buf(), worktree_dir)];
    while let Some((dir, shown, is_worktree)) = stack.pop() {
        let mut drop_it = |rel: &Path| {
            let path = dir.join(rel);
            let gone = if path.is_dir() && !path.is_symlink() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if gone.is_ok() {
                lines.push(line(mode, "not merged", &shown.join(rel)));
            }
        };
        // A symlink in a git directory leads out of it: the merge runs unconfined, so nothing
        // here may be read or removed through one. Each goes, as the link itself.
        if let Ok(list) = std::fs::read_dir(&dir) {
            for entry in list.filter_map(Result::ok) {
                if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    drop_it(Path::new(&entry.file_name()));
                }
            }
        }
        for sub in ["info", "refs", "logs", "objects"] {
            if let Some(Ok(list)) =
                real_dir(&dir.join(sub)).then(|| std::fs::read_dir(dir.join(sub)))
            {
                for entry in list.filter_map(Result::ok) {
                    if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                        drop_it(&Path::new(sub).join(entry.file_name()));
                    }
                }
            }
        }
        if let Some(Ok(hooks)) =
            real_dir(&dir.join(HOOKS)).then(|| std::fs::read_dir(dir.join(HOOKS)))
        {
            for hook in hooks.filter_map(Result::ok) {
                let name = hook.file_name();
                let sample = hook.file_type().is_ok_and(|t| t.is_file())
                    && name.to_string_lossy().ends_with(".sample");
                if !sample {
                    drop_it(&Path::new(HOOKS).join(&name));
                }
            }
        }
        for config in ["config", "config.worktree"] {
            let path = dir.join(config);
            if path.symlink_metadata().is_ok()
                && !(path.is_file()
                    && !path.is_symlink()
                    && std::fs::read(&path).is_ok_and(|b| crate::gitguard::config_is_safe(&b)))
            {
                drop_it(Path::new(config));
            }
        }
        let commondir = dir.join("commondir");
        if commondir.symlink_metadata().is_ok() {
            let leads_back = is_worktree
                && std::fs::read(&commondir).is_ok_and(|b| b.trim_ascii_end() == b"../..");
            if !leads_back {
                drop_it(Path::new("commondir"));
            }
        }
        if dir.join("info/attributes").symlink_metadata().is_ok() {
            drop_it(Path::new("info/attributes"));
        }
        // The old ways to name a remote (a push runs that repository's hooks): what they hold
        // goes; `git init` makes an empty `branches`, which stays.
        for folder in ["remotes", "branches"] {
            let path = dir.join(folder);
            match std::fs::read_dir(&path) {
                Ok(list) if !path.is_symlink() => {
                    for entry in list.filter_map(Result::ok) {
                        drop_it(&Path::new(folder).join(entry.file_name()));
                    }
                }
                _ if path.symlink_metadata().is_ok() => drop_it(Path::new(folder)),
                _ => {}
            }
        }
        // Git directories below: a clone's submodules (`modules/<name>`, at any depth) and
        // worktrees.
        for (folder, worktree) in [("modules", false), ("worktrees", true)] {
            let mut links = Vec::new();
            collect_git_dirs(
                &dir.join(folder),
                &shown.join(folder),
                worktree,
                &mut stack,
                &mut links,
            );
            // A symlink among them (`modules/b -> DIR`) would put a place outside the
            // workspace where git looks for a git directory: each goes, as the link itself.
            for (link, shown) in links {
                if std::fs::remove_file(&link).is_ok() {
                    lines.push(line(mode, "not merged", &shown));
                }
            }
        }
    }
}

/// A directory itself, not a symlink to one.
fn real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Collects the git directories in `dir` (a `modules` or `worktrees`) into `out`, and the
/// symlinks found on the way into `links` (each with the path it is shown as).
fn collect_git_dirs(
    dir: &Path,
    shown: &Path,
    worktree: bool,
    out: &mut Vec<(PathBuf, PathBuf, bool)>,
    links: &mut Vec<(PathBuf, PathBuf)>,
) {
    if !real_dir(dir) {
        return;
    }
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in list.filter_map(Result::ok) {
        let (path, shown) = (entry.path(), shown.join(entry.file_name()));
        let kind = entry.file_type();
        if kind.as_ref().is_ok_and(|t| t.is_symlink()) {
            links.push((path, shown));
            continue;
        }
        if !kind.is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if path.join("HEAD").symlink_metadata().is_ok() {
            out.push((path, shown, worktree));
        } else if !worktree {
            // A submodule named with slashes (`modules/a/b`).
            collect_git_dirs(&path, &shown, false, out, links);
        }
    }
}

/// Moves every entry of `source` but `HEAD` into the directory `target`.
fn move_children(source: &Path, target: &OwnedFd, shown: &Path) -> Result<(), String> {
    let list = std::fs::read_dir(source).map_err(|e| e.to_string())?;
    if std::fs::read_dir(format!("/proc/self/fd/{}", raw(target)))
        .map_err(|e| e.to_string())?
        .next()
        .is_some()
    {
        return Err(format!("{} is not empty", shown.display()));
    }
    for entry in list.filter_map(Result::ok) {
        let name = entry.file_name();
        if name == "HEAD" {
            continue;
        }
        move_entry(source, &name, target)?;
    }
    Ok(())
}

fn raw(fd: &impl AsFd) -> i32 {
    use std::os::fd::AsRawFd;
    fd.as_fd().as_raw_fd()
}

/// Renames `source/name` into `target` (a directory descriptor), copying when they lie on
/// different filesystems.
fn move_entry(source: &Path, name: &OsStr, target: &OwnedFd) -> Result<(), String> {
    let dir = nix::fcntl::open(
        source,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.to_string())?;
    let target_dir = reopen_dir(target)?;
    match nix::fcntl::renameat(&dir, name, &target_dir, name) {
        Ok(()) => Ok(()),
        Err(Errno::EXDEV) => copy_tree(&source.join(name), &target_dir, name),
        Err(e) => Err(format!("{}: {e}", name.to_string_lossy())),
    }
}

/// A directory descriptor (not `O_PATH`) for the directory `fd` holds.
fn reopen_dir(fd: &OwnedFd) -> Result<OwnedFd, String> {
    nix::fcntl::openat(
        fd,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.to_string())
}

/// Copies `from` (a file, directory or symlink of the staging directory) to `name` in `dir`,
/// never following a symlink on the target side.
fn copy_tree(from: &Path, dir: &OwnedFd, name: &OsStr) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(from).map_err(|e| e.to_string())?;
    let err = |e: Errno| format!("{}: {e}", from.display());
    let perm = Mode::from_bits_truncate(meta.mode() & 0o7777 & !0o6000);
    if meta.file_type().is_symlink() {
        let link = std::fs::read_link(from).map_err(|e| e.to_string())?;
        nix::unistd::symlinkat(link.as_os_str(), dir, name).map_err(err)
    } else if meta.is_dir() {
        nix::sys::stat::mkdirat(dir, name, perm).map_err(err)?;
        let sub = nix::fcntl::openat(
            dir,
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(err)?;
        for entry in std::fs::read_dir(from)
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
        {
            copy_tree(&entry.path(), &sub, &entry.file_name())?;
        }
        Ok(())
    } else if meta.is_file() {
        let out = nix::fcntl::openat(
            dir,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            perm,
        )
        .map_err(err)?;
        let mut out = std::fs::File::from(out);
        let mut input = std::fs::File::open(from).map_err(|e| e.to_string())?;
        std::io::copy(&mut input, &mut out).map_err(|e| e.to_string())?;
        Ok(())
    } else {
        // A FIFO or socket the payload made in its git directory is not carried over.
        Ok(())
    }
}

/// Writes the staged file `source` (a gitfile) into the file `target` holds.
fn copy_file_into(source: &Path, target: &OwnedFd) -> Result<(), String> {
    let bytes = std::fs::read(source).map_err(|e| e.to_string())?;
    // An `O_PATH` descriptor reopens through its /proc entry, which is the file itself.
    let out = nix::fcntl::open(
        format!("/proc/self/fd/{}", raw(target)).as_str(),
        OFlag::O_WRONLY | OFlag::O_TRUNC | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.to_string())?;
    std::fs::File::from(out)
        .write_all(&bytes)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    /// The guard of the directory at `path`, as [`create`] makes it: holding it open.
    fn guard(path: PathBuf) -> StageDir {
        let held = nix::fcntl::open(
            path.as_path(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok();
        assert!(held.is_some(), "{} opens", path.display());
        StageDir { path, held }
    }

    /// The guard removes its own staging directory, and never another one made since under the
    /// same name (another launch's, live).
    #[test]
    fn a_staging_directory_is_removed_by_its_guard_and_never_a_later_one_of_its_name() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = base.path().join("call-1-0");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::write(dir.join("0.target"), "x").expect("write");
        drop(guard(dir.clone()));
        assert!(!dir.exists(), "its own directory goes");
        std::fs::create_dir(&dir).expect("mkdir");
        let held = guard(dir.clone());
        std::fs::remove_dir(&dir).expect("merged and removed");
        std::fs::create_dir(&dir).expect("another launch's, same name");
        std::fs::write(dir.join("0.target"), "live").expect("write");
        drop(held);
        assert_eq!(
            std::fs::read_to_string(dir.join("0.target")).expect("still there"),
            "live"
        );
    }

    /// A workspace whose name holds a newline and a byte that is not UTF-8 (real names do, and
    /// `git worktree add` works there unconfined): the staged worktree git directory still
    /// lands where it belongs, and a hook named with such bytes is still dropped.
    #[test]
    fn a_staged_git_directory_lands_under_a_name_with_a_newline_and_bytes_that_are_not_utf8() {
        let base = tempfile::tempdir().expect("tempdir");
        let ws = base.path().join(OsStr::from_bytes(b"site\nd \xe9"));
        // The launcher made the target empty on the host and staged what goes into it.
        let wt = ws.join(".git/worktrees/wt2");
        std::fs::create_dir_all(&wt).expect("worktrees");
        let stage = base.path().join("stage");
        let staged = stage.join("0");
        std::fs::create_dir_all(staged.join("hooks")).expect("staged");
        std::fs::write(staged.join("HEAD"), "ref: refs/heads/wt2\n").expect("HEAD");
        std::fs::write(staged.join("commondir"), "../..\n").expect("commondir");
        std::fs::write(staged.join("hooks").join(OsStr::from_bytes(b"x\xff")), "").expect("hook");
        std::fs::write(staged.join("hooks/pre-commit"), "#!/bin/sh\n").expect("hook");
        let st = std::fs::metadata(&wt).expect("stat");
        let record = StagedTarget {
            path: wt.clone(),
            dev: st.dev(),
            ino: st.ino(),
        };
        std::fs::write(stage.join(format!("0{RECORD_SUFFIX}")), record.encode()).expect("record");

        let lines = merge(
            &stage,
            std::slice::from_ref(&ws),
            SandboxMode::WorkspaceWrite,
        );

        assert_eq!(
            std::fs::read_to_string(wt.join("HEAD")).expect("merged HEAD"),
            "ref: refs/heads/wt2\n"
        );
        assert!(
            wt.join("commondir").is_file(),
            "a worktree's own commondir stays"
        );
        let hooks: Vec<_> = std::fs::read_dir(wt.join("hooks"))
            .expect("hooks")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert!(hooks.is_empty(), "hooks merged: {hooks:?}");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(!stage.exists(), "the staging directory is removed");
    }

    /// The merge runs unconfined: a symlink the payload left in its staged git directory
    /// (`hooks -> /some/dir`, `modules -> /other/repos`, `modules/a/modules -> ..`, `modules/b` or
    /// `worktrees/w` leading to a repository elsewhere, where the person's git would then look) is
    /// removed as a link, never followed (it deleted what the link led to, and a loop hung the caller).
    #[test]
    fn a_symlink_in_a_staged_git_directory_is_dropped_not_followed() {
        let base = tempfile::tempdir().expect("tempdir");
        let outside = base.path().join("outside");
        std::fs::create_dir_all(outside.join("repo/hooks")).expect("outside");
        std::fs::write(outside.join("keep"), "x").expect("keep");
        std::fs::write(outside.join("repo/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(outside.join("repo/hooks/pre-commit"), "x").expect("hook");
        let ws = base.path().join("ws");
        let target = ws.join("sub/.git");
        std::fs::create_dir_all(&target).expect("target");
        let stage = base.path().join("stage");
        let staged = stage.join("0");
        std::fs::create_dir_all(staged.join("modules/a")).expect("staged");
        std::fs::write(staged.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::os::unix::fs::symlink(&outside, staged.join("hooks")).expect("hooks link");
        std::os::unix::fs::symlink(&outside, staged.join("info")).expect("info link");
        std::fs::write(staged.join("modules/a/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::os::unix::fs::symlink("..", staged.join("modules/a/modules")).expect("loop");
        std::os::unix::fs::symlink(&outside, staged.join("modules/b")).expect("modules link");
        std::fs::create_dir(staged.join("worktrees")).expect("worktrees");
        std::os::unix::fs::symlink(outside.join("repo"), staged.join("worktrees/w")).expect("wt");
        let st = std::fs::metadata(&target).expect("stat");
        let record = StagedTarget {
            path: target.clone(),
            dev: st.dev(),
            ino: st.ino(),
        };
        std::fs::write(stage.join(format!("0{RECORD_SUFFIX}")), record.encode()).expect("record");

        merge(
            &stage,
            std::slice::from_ref(&ws),
            SandboxMode::WorkspaceWrite,
        );

        assert!(
            outside.join("keep").is_file(),
            "the merge deleted through a link"
        );
        assert!(
            outside.join("repo/hooks/pre-commit").is_file(),
            "sanitised a repo outside"
        );
        assert!(target.join("HEAD").is_file(), "the staged HEAD was merged");
        for link in [
            "hooks",
            "info",
            "modules/a/modules",
            "modules/b",
            "worktrees/w",
        ] {
            assert!(
                std::fs::symlink_metadata(target.join(link)).is_err(),
                "{link} was merged"
            );
        }
    }
}
