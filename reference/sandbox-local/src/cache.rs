//! Probe verdicts shared across processes, so a person or a hook calling `sandboxctl` many times
//! does not probe the host on every call.
//!
//! A verdict is stored under a key made of everything that changes it: the backend and its probe
//! configuration, the runner binary's identity (path, device, inode, size, modification time),
//! the identity of the executable that probed (its profiles live in it), the kernel release, the
//! effective uid and gid, the process's capability bounding and effective sets and
//! `no_new_privs`, the user-namespace sysctls and the kernel's LSM list. The entry holds the full
//! key; a missing, stale, unreadable or mismatched entry means probing again. Entries live in
//! `$XDG_CACHE_HOME/sandbox-conformance/probes` (or `~/.cache/...`) in a directory only its user
//! may enter, written atomically (a temporary file, then a rename).
//!
//! A cached verdict can only fail closed: if the runner then fails, the call is
//! `SANDBOX_UNAVAILABLE` like any runner failure, and the caller drops the entry
//! ([`crate::LocalProvider::forget_cached_selection`]).

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
    let text = std::fs::read(entry_path(dir, key)).ok()?;
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
    Ok(())
}

/// Drops the entry of `key` (its runner failed when used).
pub fn forget(dir: &Path, key: &str) {
    let _ = std::fs::remove_file(entry_path(dir, key));
}
