//! A model of Seatbelt's profile language (SBPL), as much of it as the suite needs to judge the
//! reference Seatbelt profile on a host without macOS. **A fake**: it stands for Apple's
//! evaluator where that cannot run, and the `seatbelt-model` backend built on it is named as one.
//!
//! What it models (its `facts` module pins each point to its source):
//! - the last matching rule wins, `(deny default)` or `(allow default)` first;
//! - filters `literal`, `subpath`, `prefix`, `regex` (case-sensitive, anchored as written),
//!   `require-all`, `require-any`, `require-not`, several filters in one rule meaning any of
//!   them, and `(param "NAME")` for a string (the `-D NAME=VALUE` of `sandbox-exec`);
//! - the operations the reference profile names, with their hierarchy: `file-write*` covers
//!   every `file-write-...` operation and `file-link` is not one of them;
//! - the non-path filters the profile uses: `(target same-sandbox)`, `global-name`,
//!   `vnode-type`, `extension`, `socket-domain`, `remote ip` and `local ip` (`"*:*"` only).
//!
//! Anything else in a profile (an unknown operation or filter, `define`, `import`) is an error,
//! as `sandbox-exec` refuses a profile it cannot compile: the model never guesses.
//!
//! [`exec`] is the Linux stand-in for `sandbox-exec` that judges a real payload's file, socket
//! and IPC calls through this model (seccomp user notification), so the scenarios' own payloads
//! run against the generated profile.

#[cfg(target_os = "linux")]
pub mod exec;
#[cfg(test)]
mod facts;
#[cfg(target_os = "linux")]
mod judge;
#[cfg(target_os = "linux")]
mod notify;
#[cfg(test)]
mod reference;
mod sbpl;

use std::collections::BTreeMap;

/// Why a profile cannot be compiled by the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The text is not well-formed SBPL.
    #[error("SBPL syntax: {0}")]
    Syntax(String),
    /// A form, operation or filter the model does not know (`sandbox-exec` would refuse an
    /// unknown one; the model refuses what it cannot judge).
    #[error("not modelled: {0}")]
    Unknown(String),
    /// A `(param "NAME")` with no `-D NAME=...`.
    #[error("unbound parameter {0:?}")]
    Unbound(String),
}

/// The name of the fake backend that judges the reference Seatbelt profile through this model.
pub const BACKEND: &str = "seatbelt-model";

/// The scenario families whose effects the model judges: file effects, protected paths, parity
/// and host IPC. Others (hardening, network, selection, ...) test what only a real kernel shows,
/// so the fake is not planned for them.
pub const FAMILIES: [&str; 4] = ["containment", "protected", "parity", "host-ipc"];

/// Whether `backend` is planned for a scenario of `family`: every backend but the fake for every
/// family; the fake for [`FAMILIES`] only.
pub fn plans(backend: &str, family: &str) -> bool {
    backend != BACKEND || FAMILIES.contains(&family)
}

/// An SBPL operation the model knows. Names ending in `*` cover every operation with that prefix.
pub const OPERATIONS: &[&str] = &[
    "default",
    "appleevent-send",
    "file*",
    "file-chroot",
    "file-clone",
    "file-ioctl",
    "file-issue-extension",
    "file-link",
    "file-lock",
    "file-map-executable",
    "file-mknod",
    "file-mount",
    "file-read*",
    "file-read-data",
    "file-read-metadata",
    "file-read-xattr",
    "file-revoke",
    "file-search",
    "file-test-existence",
    "file-unmount",
    "file-write*",
    "file-write-acl",
    "file-write-create",
    "file-write-data",
    "file-write-finderinfo",
    "file-write-flags",
    "file-write-mode",
    "file-write-owner",
    "file-write-setugid",
    "file-write-times",
    "file-write-unlink",
    "file-write-xattr",
    "ipc*",
    "ipc-posix*",
    "ipc-posix-sem",
    "ipc-posix-shm",
    "ipc-sysv*",
    "ipc-sysv-msg",
    "ipc-sysv-sem",
    "ipc-sysv-shm",
    "job-creation",
    "lsopen",
    "mach*",
    "mach-host*",
    "mach-lookup",
    "mach-priv-host-port",
    "mach-priv-task-port",
    "mach-task-name",
    "network*",
    "network-bind",
    "network-inbound",
    "network-outbound",
    "process*",
    "process-exec",
    "process-fork",
    "process-info*",
    "process-info-pidinfo",
    "process-info-listpids",
    "pseudo-tty",
    "signal",
    "sysctl*",
    "sysctl-read",
    "sysctl-write",
    "system-socket",
    "user-preference-read",
    "user-preference-write",
];

/// Whether the rule operation `rule` covers the requested operation `op`: `default` covers all,
/// `x*` covers every operation starting with `x`, any other covers itself only.
pub fn covers(rule: &str, op: &str) -> bool {
    match rule.strip_suffix('*') {
        _ if rule == "default" => true,
        Some(prefix) => op.starts_with(prefix),
        None => rule == op,
    }
}

/// A rule's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The operation goes ahead.
    Allow,
    /// The operation fails (`EPERM`).
    Deny,
}

/// The kind of a file a request is about (`vnode-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vnode {
    /// `REGULAR-FILE`.
    Regular,
    /// `DIRECTORY`.
    Directory,
    /// `SYMLINK`.
    Symlink,
    /// `CHARACTER-DEVICE`.
    CharDevice,
    /// `BLOCK-DEVICE`.
    BlockDevice,
    /// `FIFO`.
    Fifo,
    /// `SOCKET`.
    Socket,
}

impl Vnode {
    fn named(name: &str) -> Option<Vnode> {
        Some(match name {
            "REGULAR-FILE" => Vnode::Regular,
            "DIRECTORY" => Vnode::Directory,
            "SYMLINK" => Vnode::Symlink,
            "CHARACTER-DEVICE" => Vnode::CharDevice,
            "BLOCK-DEVICE" => Vnode::BlockDevice,
            "FIFO" => Vnode::Fifo,
            "SOCKET" => Vnode::Socket,
            _ => return None,
        })
    }
}

/// One operation to judge, with what the filters may ask about it. A filter about something
/// the request does not carry does not match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The operation (`file-write-data`, `mach-lookup`, ...).
    pub op: String,
    /// The path it acts on, as Seatbelt sees it (symlinks resolved where the call follows them).
    pub path: Option<Vec<u8>>,
    /// The kind of file at `path`, when it exists.
    pub vnode: Option<Vnode>,
    /// The target process is in the caller's sandbox (`signal`, `process-info*`).
    pub same_sandbox: Option<bool>,
    /// The Mach service looked up.
    pub global_name: Option<String>,
    /// The socket domain (`AF_UNIX`, `AF_INET`, ...).
    pub socket_domain: Option<String>,
    /// An IP endpoint is the remote end (`network-outbound`).
    pub remote_ip: bool,
    /// An IP endpoint is the local end (`network-bind`, `network-inbound`).
    pub local_ip: bool,
    /// The sandbox extensions the file carries (`com.apple.sandbox.pty`).
    pub extensions: Vec<String>,
}

impl Request {
    /// `op` on `path`.
    pub fn path(op: &str, path: impl AsRef<[u8]>) -> Request {
        Request {
            op: op.to_owned(),
            path: Some(path.as_ref().to_vec()),
            ..Request::default()
        }
    }

    /// `op` with no filter-relevant facts.
    pub fn op(op: &str) -> Request {
        Request {
            op: op.to_owned(),
            ..Request::default()
        }
    }
}

mod compile;
pub use compile::{Filter, Profile};

/// `sandbox-exec`'s arguments read: the profile text, its `-D` parameters, where the command
/// starts.
pub type SandboxExecArgs = (String, BTreeMap<String, Vec<u8>>, usize);

/// The `-p PROFILE` text and `-D NAME=VALUE` parameters of a `sandbox-exec` argv (the
/// arguments after the program), and where the command starts.
pub fn split_args(args: &[Vec<u8>]) -> Result<SandboxExecArgs, ModelError> {
    let mut profile = None;
    let mut params = BTreeMap::new();
    let mut at = 0;
    while at < args.len() {
        match args[at].as_slice() {
            b"-p" => {
                let text = args
                    .get(at + 1)
                    .ok_or_else(|| ModelError::Syntax("-p needs a profile".into()))?;
                profile = Some(String::from_utf8_lossy(text).into_owned());
                at += 2;
            }
            b"-D" => {
                let define = args
                    .get(at + 1)
                    .ok_or_else(|| ModelError::Syntax("-D needs NAME=VALUE".into()))?;
                let eq = define
                    .iter()
                    .position(|b| *b == b'=')
                    .ok_or_else(|| ModelError::Syntax("-D needs NAME=VALUE".into()))?;
                let name = String::from_utf8_lossy(&define[..eq]).into_owned();
                params.insert(name, define[eq + 1..].to_vec());
                at += 2;
            }
            _ => break,
        }
    }
    let profile = profile.ok_or_else(|| ModelError::Syntax("no -p profile".into()))?;
    Ok((profile, params, at))
}

/// The `seatbelt-model` backend: the reference Seatbelt provider with `seatbelt-model-exec` (the
/// Linux stand-in for `sandbox-exec`) as its runner, probed like any local backend, named as a
/// fake. Unusable where the stand-in is not built or not on Linux.
pub fn backend() -> crate::backends::Backend {
    let runner = sandbox_local::probe::locate_sibling("seatbelt-model-exec", "conformance");
    let config = sandbox_local::LocalConfig {
        sandbox_exec: runner
            .unwrap_or_else(|_| std::path::PathBuf::from("/nonexistent/seatbelt-model-exec")),
        ..sandbox_local::LocalConfig::only(sandbox_local::Backend::Seatbelt)
    };
    let mut backend =
        crate::backends::Backend::local(BACKEND, sandbox_local::Backend::Seatbelt, config);
    backend.version = Some(format!(
        "a fake: the reference Seatbelt profile judged by the SBPL model (conformance {})",
        env!("CARGO_PKG_VERSION")
    ));
    backend
}
