//! The private temp area's directory on the host ([`sandbox::TempArea::Private`]): made by the
//! trusted side for one session (or one conformance case), removed when it is dropped. It lies in
//! this user's cache (`$XDG_CACHE_HOME/sandbox-conformance/tmp-areas/PID/N`, mode 0700), never in
//! `/tmp`, so no tool the person runs in a folder of `/tmp` reads what a payload wrote there. A
//! process that was killed leaves its areas behind; the next area made on the host removes the
//! areas of processes that are gone.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The areas of this process made so far (their names).
static MADE: AtomicU64 = AtomicU64::new(0);

/// One private temp area: `dir` holds `tmp` (what the call sees) and `work` (the overlay's
/// scratch). Removed, whatever the payload left in it, when dropped.
#[derive(Debug)]
pub struct TempAreaDir {
    dir: PathBuf,
}

impl TempAreaDir {
    /// Makes a fresh area for this process.
    pub fn create() -> std::io::Result<TempAreaDir> {
        TempAreaDir::create_for(&[])
    }

    /// Makes a fresh area for this process where no payload of `policies` can reach it (nor any
    /// payload's `/tmp`, nor a caller's `$TMPDIR` the policies name): in this user's cache, else
    /// in `/var/tmp/sandbox-tmp-areas-UID`.
    pub fn create_for(policies: &[sandbox::ProviderPolicy]) -> std::io::Result<TempAreaDir> {
        let base = base_dirs()
            .into_iter()
            .find_map(|b| sandbox::check_state_dir("the private temp area", &b, policies).ok())
            .ok_or_else(|| {
                std::io::Error::other(
                    "no place for a private temp area outside every writable root (this user's cache and /var/tmp are both reachable)",
                )
            })?;
        let own = base.join(std::process::id().to_string());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&own)?;
        // The base may have been made by an earlier process with another umask.
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))?;
        forget_the_dead(&base, remove_all);
        let dir = own.join(MADE.fetch_add(1, Ordering::Relaxed).to_string());
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let area = TempAreaDir { dir };
        for part in ["tmp", "work"] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(area.dir.join(part))?;
        }
        Ok(area)
    }

    /// The area's directory, as a policy names it ([`sandbox::TempArea::Private`]).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The policy's temp area for this directory.
    pub fn temp_area(&self) -> sandbox::TempArea {
        sandbox::TempArea::Private(self.dir.clone())
    }
}

impl Drop for TempAreaDir {
    fn drop(&mut self) {
        remove_all(&self.dir);
    }
}

/// A provider whose every call gets a private temp area of its own when its policy names none:
/// made before the call, held by the launch ([`sandbox::LaunchFds::hold`]) and removed when the
/// last copy of the launch is dropped. For callers with no session to hold one area across
/// calls (`sandboxctl run`, the conformance harness's cases); a policy that names an area (a
/// session's) is confined as it is.
pub struct PerCallArea<P> {
    inner: P,
}

impl<P: sandbox::SandboxProvider> PerCallArea<P> {
    /// `inner`, giving each call an area of its own.
    pub fn new(inner: P) -> PerCallArea<P> {
        PerCallArea { inner }
    }

    /// The provider that confines.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

impl<P: sandbox::SandboxProvider> sandbox::SandboxProvider for PerCallArea<P> {
    fn confine(
        &self,
        argv: &[std::ffi::OsString],
        policy: &sandbox::ProviderPolicy,
    ) -> Result<sandbox::ConfinedArgv, sandbox::SandboxUnavailable> {
        if !policy.roots.temp_area.is_shared() {
            return self.inner.confine(argv, policy);
        }
        let area = TempAreaDir::create_for(std::slice::from_ref(policy)).map_err(|e| {
            sandbox::SandboxUnavailable {
                mode: policy.mode,
                backend: None,
                detail: format!(
                    "{}: cannot make the call's private temp area: {e}",
                    sandbox::TEMP_AREA_UNUSABLE
                ),
            }
        })?;
        let own = policy
            .clone()
            .with_roots(|r| r.with_temp_area(area.temp_area()));
        let mut launch = self.inner.confine(argv, &own)?;
        launch.fds.hold(std::sync::Arc::new(area));
        Ok(launch)
    }

    fn call_guard(&self, policy: &sandbox::ProviderPolicy) -> Option<Box<dyn sandbox::CallGuard>> {
        self.inner.call_guard(policy)
    }

    fn temp_area_at_tmp(&self, policy: &sandbox::ProviderPolicy) -> bool {
        // A call with no area of its own gets one, shown where the inner provider shows one.
        let probe = policy
            .clone()
            .with_roots(|r| r.with_temp_area(sandbox::TempArea::Private(PathBuf::from("/"))));
        self.inner.temp_area_at_tmp(&probe)
    }
}

/// Where this user's areas may lie, in order: beside the probe cache, then
/// `/var/tmp/sandbox-tmp-areas-UID`.
fn base_dirs() -> Vec<PathBuf> {
    crate::cache::default_dir()
        .and_then(|probes| probes.parent().map(|p| p.join("tmp-areas")))
        .into_iter()
        .chain([PathBuf::from(format!(
            "/var/tmp/sandbox-tmp-areas-{}",
            nix::unistd::getuid()
        ))])
        .collect()
}

/// Removes `dir` and everything in it, opening up folders the payload made unreadable or
/// unwritable to itself on the way.
pub fn remove_all(dir: &Path) {
    if std::fs::remove_dir_all(dir).is_ok() {
        return;
    }
    open_up(dir);
    let _ = std::fs::remove_dir_all(dir);
}

fn open_up(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(list) = std::fs::read_dir(dir) {
        for entry in list.filter_map(Result::ok) {
            open_up(&entry.path());
        }
    }
}

/// Removes, with `remove`, each entry of `base` named by the pid of a process that is gone (an
/// area or a staging directory its process never removed: it was killed first).
pub(crate) fn forget_the_dead(base: &Path, remove: impl Fn(&Path)) {
    let Ok(list) = std::fs::read_dir(base) else {
        return;
    };
    for entry in list.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
            || nix::errno::Errno::last() == nix::errno::Errno::EPERM;
        if !alive
            && Path::new(&format!("/proc/{pid}"))
                .symlink_metadata()
                .is_err()
        {
            remove(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_area_holds_tmp_and_work_and_is_removed_with_what_was_left_in_it() {
        let area = TempAreaDir::create().expect("area");
        let dir = area.path().to_path_buf();
        assert!(dir.join("tmp").is_dir() && dir.join("work").is_dir());
        assert!(!dir.starts_with("/tmp"), "{dir:?} lies in /tmp");
        let locked = dir.join("tmp/locked");
        std::fs::create_dir_all(locked.join("inner")).expect("mkdir");
        std::fs::write(locked.join("inner/f"), "x").expect("write");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        assert_eq!(
            area.temp_area(),
            sandbox::TempArea::Private(dir.clone()),
            "the policy names the area itself"
        );
        drop(area);
        assert!(!dir.exists(), "{dir:?} is left");
    }
}
