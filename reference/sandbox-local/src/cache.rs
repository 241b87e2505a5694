//! Probe verdicts shared across processes, so a person or a hook calling `sandboxctl` many times
//! does not probe the host on every call.
//!
//! A verdict is stored under a key made of everything that changes it: the backend and its probe
//! configuration, the runner binary's identity (path, device, inode, size, modification time),
//! the identity of the executable that probed (its profiles live in it), the kernel release, the
//! effective uid and gid, the process's capability bounding and effective sets and
//! `no_new_privs`, the user-namespace sysctls and the kernel's LSM list. The entry holds the full
//! key; a missing, stale (another key), unreadable, corrupt or mismatched entry, an entry or a
//! directory another user owns or may write, and a symlinked entry all mean probing again.
//! Entries live in `$XDG_CACHE_HOME/sandbox-conformance/probes` (or `~/.cache/...`) in a
//! directory only its user may enter, written atomically (a temporary file, then a rename).
//!
//! A cached verdict can only fail closed: if the runner then fails, the call is
//! `SANDBOX_UNAVAILABLE` like any runner failure, and the caller drops the entry
//! ([`crate::LocalProvider::forget_cached_selection`]).
//!
//! No payload may reach the cache: an edited verdict could drop the protected binds. So the
//! directory is checked like every state directory ([`sandbox::check_state_dir`]) when the
//! provider is made (outside `/tmp`, not writable by others) and again for every policy it
//! confines (outside that policy's writable roots, `$TMPDIR` and extra roots included, in any
//! mode). A refused directory is never read or written again by that provider, which probes
//! instead: a refused cache costs a probe per process, never confinement (see [`Cache`]). A
//! caller that named the directory explicitly (`SANDBOX_PROBE_CACHE=DIR`) is told at once
//! (`sandboxctl` refuses to run); a default location that is refused (`XDG_CACHE_HOME=/tmp/...`,
//! as in a CI container) only means probing. What no check here can see is a directory made
//! writable by a policy another process served earlier (a person who once made `~/.cache` a
//! workspace): keep the cache out of every workspace.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::probe::ProbeFacts;
use crate::provider::{Backend, LocalConfig};

/// The environment variable that moves the cache (`off` disables it).
pub const CACHE_ENV: &str = "SANDBOX_PROBE_CACHE";

/// What one entry holds: the key it was written for and the usable verdict's facts.
#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    program: PathBuf,
    facts: ProbeFacts,
}

/// What a refused cache directory is called in errors.
pub const WHAT: &str = "the probe cache";

/// A provider's cache directory, checked, and refused for the provider's lifetime once any
/// policy it serves could reach it.
#[derive(Debug, Default)]
pub struct Cache {
    dir: Option<PathBuf>,
    refusal: std::sync::Mutex<Option<sandbox::StateDirError>>,
}

impl Cache {
    /// The cache in `dir`, checked now against what every policy anywhere may write (`/tmp`)
    /// and against others; `None` or a refused directory means probing in every process.
    pub fn new(dir: Option<PathBuf>) -> Cache {
        let cache = Cache {
            dir: None,
            refusal: std::sync::Mutex::new(None),
        };
        let Some(dir) = dir else { return cache };
        match sandbox::check_state_dir(WHAT, &dir, &[]) {
            Ok(resolved) => Cache {
                dir: Some(resolved),
                ..cache
            },
            Err(e) => {
                *cache.lock() = Some(e);
                cache
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<sandbox::StateDirError>> {
        self.refusal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks the directory against `policy`, before anything runs under it: one whose writable
    /// roots hold it refuses the cache from now on (its payload could edit a verdict).
    pub fn admit(&self, policy: &sandbox::ProviderPolicy) {
        let Some(dir) = &self.dir else { return };
        let mut refusal = self.lock();
        if refusal.is_none()
            && let Err(e) = sandbox::check_state_dir(WHAT, dir, std::slice::from_ref(policy))
        {
            *refusal = Some(e);
        }
    }

    /// The directory to read and write, unless there is none or it was refused.
    pub fn usable(&self) -> Option<&Path> {
        match &*self.lock() {
            Some(_) => None,
            None => self.dir.as_deref(),
        }
    }

    /// Why the directory was refused, if it was.
    pub fn refusal(&self) -> Option<sandbox::StateDirError> {
        self.lock().clone()
    }
}

/// True when the cache directory was named explicitly (`SANDBOX_PROBE_CACHE=DIR`) rather than
/// derived from `XDG_CACHE_HOME` or `HOME`: a refusal of it is the caller's bad input.
pub fn explicit_dir() -> bool {
    std::env::var_os(CACHE_ENV).is_some_and(|v| !v.is_empty() && v != "off")
}

/// The cache directory of this user, or `None` when caching is off or no home is known.
pub fn default_dir() -> Option<PathBuf> {
    match std::env::var_os(CACHE_ENV) {
        Some(v) if v == "off" => return None,
        Some(v) if !v.is_empty() => return Some(PathBuf::from(v)),
        _ => {}
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join("sandbox-conformance").join("probes"))
}

/// A file's identity for the key: path, device, inode, size and modification time.
fn identity(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) => format!(
            "{}:{}:{}:{}:{}.{}",
            path.display(),
            m.dev(),
            m.ino(),
            m.len(),
            m.mtime(),
            m.mtime_nsec()
        ),
        Err(_) => format!("{}:missing", path.display()),
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "-".into())
}

/// The lines of `/proc/self/status` that change what a runner may do.
fn privilege_facts() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| {
            [
                "Uid:",
                "Gid:",
                "CapEff:",
                "CapBnd:",
                "NoNewPrivs:",
                "Seccomp:",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("|")
}

/// Everything that changes `backend`'s verdict under `config`, when its runner is `program`.
pub fn key(backend: Backend, config: &LocalConfig, program: &Path) -> String {
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let exe = std::env::current_exe()
        .map(|e| identity(&e))
        .unwrap_or_default();
    format!(
        "v2|{backend}|cap={:?}|runner={}|exe={exe}|kernel={kernel}|{}|userns={},{},{}|lsm={}",
        config.landlock_abi_cap,
        identity(program),
        privilege_facts(),
        read_trimmed("/proc/sys/user/max_user_namespaces"),
        read_trimmed("/proc/sys/kernel/unprivileged_userns_clone"),
        read_trimmed("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        read_trimmed("/sys/kernel/security/lsm"),
    )
}

/// The entry file of `key`: a stable 64-bit FNV-1a hash of it (the full key is in the entry, so a
/// collision only costs a probe).
fn entry_path(dir: &Path, key: &str) -> PathBuf {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    dir.join(format!("{hash:016x}.json"))
}

/// The cached usable verdict for `key`: its runner program and facts.
pub fn load(dir: &Path, key: &str) -> Option<(PathBuf, ProbeFacts)> {
    // Only a directory that is ours and private is trusted: another user could plant verdicts.
    let meta = std::fs::symlink_metadata(dir).ok()?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
        return None;
    }
    // The entry itself must be a regular file of ours that no one else may write, opened without
    // following a symlink: only we (or root) can put files in a private directory, but a verdict
    // is a decision to trust a runner, so the file is checked too.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(entry_path(dir, key))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0
    {
        return None;
    }
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut text).ok()?;
    let entry: Entry = serde_json::from_slice(&text).ok()?;
    (entry.key == key).then_some((entry.program, entry.facts))
}

/// Stores a usable verdict for `key`, atomically; failures to write are ignored (the next call
/// probes again).
pub fn store(dir: &Path, key: &str, program: &Path, facts: &ProbeFacts) {
    let _ = try_store(dir, key, program, facts);
}

fn try_store(dir: &Path, key: &str, program: &Path, facts: &ProbeFacts) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // An existing directory keeps its mode: make sure it is private.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let entry = Entry {
        key: key.to_owned(),
        program: program.to_path_buf(),
        facts: facts.clone(),
    };
    let bytes = serde_json::to_vec(&entry).map_err(std::io::Error::other)?;
    let target = entry_path(dir, key);
    let temp = tempfile::Builder::new()
        .prefix(".entry-")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .mode(0o600)
        .open(temp.path())?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    temp.persist(&target).map_err(|e| e.error)?;
    prune_superseded(dir, key, program, &target);
    Ok(())
}

/// Removes the entries this one supersedes: written for the same backend, configuration and
/// runner path under another key (the runner was rebuilt, the kernel or a sysctl changed). They
/// could never match again, and without this every rebuild of a runner would leave one behind.
fn prune_superseded(dir: &Path, key: &str, program: &Path, kept: &Path) {
    let runner = format!("|runner={}:", program.display());
    let Some(end) = key.find(&runner).map(|i| i + runner.len()) else {
        return;
    };
    let prefix = &key[..end];
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    for path in listing.filter_map(|e| e.ok().map(|e| e.path())) {
        if path == kept || path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let superseded = std::fs::read(&path)
            .ok()
            .and_then(|text| serde_json::from_slice::<Entry>(&text).ok())
            .is_some_and(|entry| entry.key.starts_with(prefix) && entry.key != key);
        if superseded {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Drops the entry of `key` (its runner failed when used).
pub fn forget(dir: &Path, key: &str) {
    let _ = std::fs::remove_file(entry_path(dir, key));
}
