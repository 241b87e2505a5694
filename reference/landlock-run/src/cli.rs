//! The launcher's command line as one type: [`Invocation`] is what the caller emits
//! ([`Invocation::to_args`]) and what the launcher parses ([`Invocation::parse`]), so a flag
//! exists once. The crate's top-level documentation says what each flag does.
//!
//! ```
//! use landlock_run::cli::{Invocation, LaunchArgs, Namespace, WritableRoot};
//!
//! let launch = LaunchArgs {
//!     ipc: Namespace::Private,
//!     read_only: vec!["/".into()],
//!     read_write: vec![WritableRoot::new("/srv/work")],
//!     payload: vec!["true".into()],
//!     ..LaunchArgs::default()
//! };
//! let args = Invocation::Launch(Box::new(launch.clone())).to_args();
//! assert_eq!(Invocation::parse(args), Ok(Invocation::Launch(Box::new(launch))));
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use crate::BENCH_UNGUARDED_FLAG;
pub use crate::net::NET_FLAG;

/// The flag for a policy that allows named unix sockets: the guard then lets the payload make
/// stream and seqpacket unix sockets (to any path it can see: seccomp cannot read a `connect`
/// address, so the caller reports `host-ipc` partial).
pub const ALLOW_UNIX_SOCKETS_FLAG: &str = "--allow-unix-sockets";
/// The smallest `--memory` the launcher takes (16 MiB): below it no shell starts, and a typo
/// (`--memory 8` for 8 GiB) would read as a broken sandbox.
pub const MIN_MEMORY: u64 = 16 * 1024 * 1024;

const USAGE: &str = "usage: landlock-run [--abi-cap N] [--status-fd FD] [--memory BYTES] \
[--net restricted|enabled] [--ipc private|host] [--pids private|host] [--pid-namespace] \
[--allow-unix-sockets] (--ro PATH | --rw PATH [--rw-identity DEV:INO] | --pin DIR | --protect PATH)... \
[--prevent [--stage-fd FD] [--anchor ROOT]... [--protected-rel REL]... [--protected-name NAME]...] \
[--tmp-area DIR | --tmpdir DIR] -- PROGRAM [ARGS...] | --probe [--abi-cap N]";

/// What one run of the launcher is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Confine and run a payload (`... -- PROGRAM [ARGS...]`).
    Launch(Box<LaunchArgs>),
    /// `--probe`: print what this kernel enforces, as one JSON object.
    Probe {
        /// `--abi-cap N`: the probe asks for at most this ABI.
        abi_cap: Option<u32>,
    },
    /// `--probe-child TARGET`: the probe's restricted child (the launcher runs it on itself).
    ProbeChild {
        /// `--abi-cap N`, as the probe was given it.
        abi_cap: Option<u32>,
        /// The path the child must fail to create.
        target: PathBuf,
    },
}

/// Whether a namespace is the sandbox's own or the host's (`--ipc`, `--pids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Namespace {
    /// The host's: the guard refuses what would reach across it.
    #[default]
    Host,
    /// The caller put the launcher in a namespace of its own (bwrap's `--unshare-*`).
    Private,
}

/// One `--rw PATH`, with the `--rw-identity DEV:INO` that may follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritableRoot {
    /// The directory (or file) the payload may write.
    pub path: PathBuf,
    /// The device and inode the path must still be (what the caller pinned and bound).
    pub identity: Option<(u64, u64)>,
}

impl WritableRoot {
    /// A writable root with no identity to check.
    pub fn new(path: impl Into<PathBuf>) -> WritableRoot {
        WritableRoot {
            path: path.into(),
            identity: None,
        }
    }
}

/// A launch's flags and payload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchArgs {
    /// `--abi-cap N` (1..=7): use at most this Landlock ABI.
    pub abi_cap: Option<u32>,
    /// `--status-fd FD` (above 2): where the launch records go.
    pub status_fd: Option<i32>,
    /// `--memory BYTES` (at least [`MIN_MEMORY`]): each payload process's `RLIMIT_DATA`.
    pub memory: Option<u64>,
    /// `--net restricted`: TCP bind and connect are denied (see [`crate::net`]).
    pub net_restricted: bool,
    /// `--ipc private`: SysV IPC and POSIX message queues are the sandbox's own.
    pub ipc: Namespace,
    /// `--pids private`: the caller's runner gave the launch a PID namespace of its own.
    pub pids: Namespace,
    /// `--pid-namespace`: the launcher makes a PID namespace of its own where it can.
    pub pid_namespace: bool,
    /// `--allow-unix-sockets`: the guard lets the payload make stream unix sockets.
    pub allow_unix_sockets: bool,
    /// [`BENCH_UNGUARDED_FLAG`]: skip the seccomp guard (benchmarks only).
    pub unguarded: bool,
    /// `--ro PATH`: readable (reads are ungoverned; the path must exist, canonical).
    pub read_only: Vec<PathBuf>,
    /// `--rw PATH [--rw-identity DEV:INO]`: writable.
    pub read_write: Vec<WritableRoot>,
    /// `--pin DIR`: a directory pinned for the call (the protected paths below it).
    pub pinned: Vec<PathBuf>,
    /// `--protect PATH`: bound read-only in the launcher's mount namespace.
    pub protected: Vec<PathBuf>,
    /// `--prevent`: the emulator carries out the payload's creates and write-opens.
    pub prevent: bool,
    /// `--stage-fd FD` (above 2): where new git directories are made private.
    pub stage_fd: Option<i32>,
    /// `--anchor ROOT`: a writable root the protected paths are relative to.
    pub anchors: Vec<PathBuf>,
    /// `--protected-rel REL`: a protected path relative to every anchor and worktree top.
    pub protected_rel: Vec<PathBuf>,
    /// `--protected-name NAME`: a name protected in every folder under an anchor.
    pub protected_names: Vec<OsString>,
    /// `--tmp-area DIR`: the session's private temp area (a directory holding `tmp`, what the
    /// payload sees at `/tmp`, and `work`, the overlay's work directory), mounted at `/tmp` in the
    /// launcher's mount namespace; the payload's `$TMPDIR` is then `/tmp`. A path, not a
    /// descriptor: overlayfs takes its layers only from the mount namespace it is mounted in.
    pub tmp_area: Option<PathBuf>,
    /// `--tmpdir DIR`: the payload's `$TMPDIR` (a private temp area's `tmp` where no mount shows
    /// it at `/tmp`; the caller grants it with `--rw`).
    pub tmpdir: Option<PathBuf>,
    /// The program and its arguments, after `--`.
    pub payload: Vec<OsString>,
}

/// A command line the launcher cannot take: the text says which argument and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn os(s: &str) -> OsString {
    OsString::from(s)
}

fn flag_value(args: &mut Vec<OsString>, flag: &str, value: impl Into<OsString>) {
    args.push(os(flag));
    args.push(value.into());
}

impl LaunchArgs {
    /// The launch's flags, ending with `--` (the payload is not included: callers append it).
    pub fn flags(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        if self.pid_namespace {
            args.push(os("--pid-namespace"));
        }
        if let Some(bytes) = self.memory {
            flag_value(&mut args, "--memory", bytes.to_string());
        }
        if let Some(cap) = self.abi_cap {
            flag_value(&mut args, "--abi-cap", cap.to_string());
        }
        if let Some(fd) = self.status_fd {
            flag_value(&mut args, "--status-fd", fd.to_string());
        }
        if self.ipc == Namespace::Private {
            flag_value(&mut args, "--ipc", "private");
        }
        if self.pids == Namespace::Private {
            flag_value(&mut args, "--pids", "private");
        }
        if self.net_restricted {
            flag_value(&mut args, NET_FLAG, "restricted");
        }
        if self.allow_unix_sockets {
            args.push(os(ALLOW_UNIX_SOCKETS_FLAG));
        }
        if self.unguarded {
            args.push(os(BENCH_UNGUARDED_FLAG));
        }
        for path in &self.read_only {
            flag_value(&mut args, "--ro", path);
        }
        for root in &self.read_write {
            flag_value(&mut args, "--rw", &root.path);
            if let Some((dev, ino)) = root.identity {
                flag_value(&mut args, "--rw-identity", format!("{dev}:{ino}"));
            }
        }
        for dir in &self.pinned {
            flag_value(&mut args, "--pin", dir);
        }
        for path in &self.protected {
            flag_value(&mut args, "--protect", path);
        }
        if self.prevent {
            args.push(os("--prevent"));
        }
        if let Some(fd) = self.stage_fd {
            flag_value(&mut args, "--stage-fd", fd.to_string());
        }
        if let Some(dir) = &self.tmp_area {
            flag_value(&mut args, "--tmp-area", dir);
        }
        if let Some(dir) = &self.tmpdir {
            flag_value(&mut args, "--tmpdir", dir);
        }
        for anchor in &self.anchors {
            flag_value(&mut args, "--anchor", anchor);
        }
        for rel in &self.protected_rel {
            flag_value(&mut args, "--protected-rel", rel);
        }
        for name in &self.protected_names {
            flag_value(&mut args, "--protected-name", name);
        }
        args.push(os("--"));
        args
    }
}

impl Invocation {
    /// The launcher's arguments (after `argv[0]`) for this invocation.
    pub fn to_args(&self) -> Vec<OsString> {
        match self {
            Invocation::Launch(launch) => {
                let mut args = launch.flags();
                args.extend(launch.payload.iter().cloned());
                args
            }
            Invocation::Probe { abi_cap } => {
                let mut args = vec![os("--probe")];
                if let Some(cap) = abi_cap {
                    flag_value(&mut args, "--abi-cap", cap.to_string());
                }
                args
            }
            Invocation::ProbeChild { abi_cap, target } => {
                let mut args = Vec::new();
                if let Some(cap) = abi_cap {
                    flag_value(&mut args, "--abi-cap", cap.to_string());
                }
                flag_value(&mut args, "--probe-child", target);
                args
            }
        }
    }

    /// Reads the launcher's arguments (after `argv[0]`).
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Invocation, UsageError> {
        let mut launch = LaunchArgs::default();
        let mut probe = false;
        let mut probe_child = None;
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let Some(flag) = arg.to_str() else {
                return Err(UsageError(format!("unknown argument {arg:?}")));
            };
            let mut value = || {
                it.next()
                    .ok_or_else(|| UsageError(format!("{flag} needs a value")))
            };
            match flag {
                "--" => {
                    launch.payload = it.collect();
                    if launch.payload.is_empty() {
                        return Err(UsageError("nothing to run after --".into()));
                    }
                    if launch.tmp_area.is_some() && launch.tmpdir.is_some() {
                        return Err(UsageError(
                            "--tmp-area and --tmpdir exclude each other (a mounted area is the payload's /tmp and $TMPDIR)".into(),
                        ));
                    }
                    return Ok(Invocation::Launch(Box::new(launch)));
                }
                "--ro" => launch.read_only.push(value()?.into()),
                "--rw" => launch.read_write.push(WritableRoot::new(value()?)),
                "--rw-identity" => {
                    let v = value()?;
                    let id = number_pair(&v).ok_or_else(|| {
                        UsageError(format!("--rw-identity takes DEVICE:INODE, not {v:?}"))
                    })?;
                    match launch.read_write.last_mut() {
                        Some(root @ WritableRoot { identity: None, .. }) => {
                            root.identity = Some(id);
                        }
                        _ => {
                            return Err(UsageError(
                                "--rw-identity follows the --rw it is about, once".into(),
                            ));
                        }
                    }
                }
                "--pin" => launch.pinned.push(value()?.into()),
                "--protect" => launch.protected.push(value()?.into()),
                "--pid-namespace" => launch.pid_namespace = true,
                "--pids" => launch.pids = namespace(flag, value()?)?,
                "--ipc" => launch.ipc = namespace(flag, value()?)?,
                "--prevent" => launch.prevent = true,
                "--anchor" => launch.anchors.push(value()?.into()),
                "--protected-rel" => {
                    let rel = PathBuf::from(value()?);
                    if rel.is_absolute() || rel.as_os_str().is_empty() {
                        return Err(UsageError(format!(
                            "--protected-rel takes a relative path, not {rel:?}"
                        )));
                    }
                    launch.protected_rel.push(rel);
                }
                "--protected-name" => {
                    let name = value()?;
                    if name.is_empty() || Path::new(&name).components().count() != 1 {
                        return Err(UsageError(format!(
                            "--protected-name takes one file name, not {name:?}"
                        )));
                    }
                    launch.protected_names.push(name);
                }
                "--stage-fd" => launch.stage_fd = Some(descriptor(flag, value()?)?),
                "--tmp-area" | "--tmpdir" => {
                    let dir = PathBuf::from(value()?);
                    if !dir.is_absolute() {
                        return Err(UsageError(format!(
                            "{flag} takes an absolute path, not {dir:?}"
                        )));
                    }
                    match flag {
                        "--tmp-area" => launch.tmp_area = Some(dir),
                        _ => launch.tmpdir = Some(dir),
                    }
                }
                "--status-fd" => launch.status_fd = Some(descriptor(flag, value()?)?),
                "--memory" => {
                    let v = value()?;
                    let bytes = v
                        .to_str()
                        .and_then(|s| s.parse::<u64>().ok())
                        .filter(|n| *n >= MIN_MEMORY)
                        .ok_or_else(|| {
                            UsageError(format!(
                                "--memory takes a number of bytes, at least {MIN_MEMORY}, not {v:?}"
                            ))
                        })?;
                    launch.memory = Some(bytes);
                }
                "--abi-cap" => {
                    let v = value()?;
                    let cap = v
                        .to_str()
                        .and_then(|s| s.parse::<u32>().ok())
                        .filter(|n| (1..=7).contains(n))
                        .ok_or_else(|| UsageError(format!("--abi-cap takes 1..=7, not {v:?}")))?;
                    launch.abi_cap = Some(cap);
                }
                NET_FLAG => {
                    let v = value()?;
                    launch.net_restricted = match v.to_str() {
                        Some("restricted") => true,
                        Some("enabled") => false,
                        _ => {
                            return Err(UsageError(format!(
                                "{NET_FLAG} takes restricted or enabled, not {v:?}"
                            )));
                        }
                    };
                }
                ALLOW_UNIX_SOCKETS_FLAG => launch.allow_unix_sockets = true,
                BENCH_UNGUARDED_FLAG => launch.unguarded = true,
                "--probe" => probe = true,
                "--probe-child" => probe_child = Some(PathBuf::from(value()?)),
                _ => return Err(UsageError(format!("unknown argument {arg:?}"))),
            }
        }
        match (probe, probe_child) {
            (_, Some(target)) => Ok(Invocation::ProbeChild {
                abi_cap: launch.abi_cap,
                target,
            }),
            (true, None) => Ok(Invocation::Probe {
                abi_cap: launch.abi_cap,
            }),
            (false, None) => Err(UsageError(USAGE.into())),
        }
    }
}

fn number_pair(v: &OsString) -> Option<(u64, u64)> {
    let (d, i) = v.to_str()?.split_once(':')?;
    Some((d.parse().ok()?, i.parse().ok()?))
}

fn namespace(flag: &str, v: OsString) -> Result<Namespace, UsageError> {
    match v.to_str() {
        Some("private") => Ok(Namespace::Private),
        Some("host") => Ok(Namespace::Host),
        _ => Err(UsageError(format!(
            "{flag} takes private or host, not {v:?}"
        ))),
    }
}

fn descriptor(flag: &str, v: OsString) -> Result<i32, UsageError> {
    v.to_str()
        .and_then(|s| s.parse::<i32>().ok())
        .filter(|n| *n > 2)
        .ok_or_else(|| UsageError(format!("{flag} takes a descriptor above 2, not {v:?}")))
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    /// Every flag set, each list with two entries (one with bytes that are not UTF-8).
    fn every_flag() -> LaunchArgs {
        let odd = || PathBuf::from(std::ffi::OsStr::from_bytes(b"/srv/caf\xe9\nx"));
        LaunchArgs {
            abi_cap: Some(2),
            status_fd: Some(7),
            memory: Some(MIN_MEMORY),
            net_restricted: true,
            ipc: Namespace::Private,
            pids: Namespace::Private,
            pid_namespace: true,
            allow_unix_sockets: true,
            unguarded: true,
            read_only: vec!["/".into(), odd()],
            read_write: vec![
                WritableRoot {
                    path: "/srv/work".into(),
                    identity: Some((2049, 12)),
                },
                WritableRoot::new(odd()),
            ],
            pinned: vec!["/srv/work".into(), odd()],
            protected: vec!["/srv/work/.git/config".into(), odd()],
            prevent: true,
            stage_fd: Some(9),
            tmp_area: Some(odd()),
            tmpdir: None,
            anchors: vec!["/srv/work".into(), odd()],
            protected_rel: vec![".git/hooks".into(), ".vscode/tasks.json".into()],
            protected_names: vec![".envrc".into(), OsString::from(".mise.toml")],
            payload: vec!["sh".into(), "-c".into(), "--ro /x".into()],
        }
    }

    #[test]
    fn every_flag_the_caller_emits_the_launcher_parses_back() {
        for invocation in [
            Invocation::Launch(Box::new(every_flag())),
            Invocation::Launch(Box::new(LaunchArgs {
                payload: vec!["true".into()],
                ..LaunchArgs::default()
            })),
            Invocation::Launch(Box::new(LaunchArgs {
                tmpdir: Some(PathBuf::from(std::ffi::OsStr::from_bytes(
                    b"/var/c/a\xff/tmp",
                ))),
                payload: vec!["true".into()],
                ..LaunchArgs::default()
            })),
            Invocation::Probe { abi_cap: None },
            Invocation::Probe { abi_cap: Some(4) },
            Invocation::ProbeChild {
                abi_cap: Some(1),
                target: "/tmp/p/must-not-exist".into(),
            },
        ] {
            assert_eq!(
                Invocation::parse(invocation.to_args()),
                Ok(invocation.clone())
            );
        }
    }

    #[test]
    fn each_flag_of_a_full_launch_is_emitted() {
        let args: Vec<String> = every_flag()
            .flags()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for flag in [
            "--abi-cap",
            "--status-fd",
            "--memory",
            NET_FLAG,
            "--ipc",
            "--pids",
            "--pid-namespace",
            ALLOW_UNIX_SOCKETS_FLAG,
            BENCH_UNGUARDED_FLAG,
            "--ro",
            "--rw",
            "--rw-identity",
            "--pin",
            "--protect",
            "--prevent",
            "--stage-fd",
            "--tmp-area",
            "--anchor",
            "--protected-rel",
            "--protected-name",
        ] {
            assert!(args.iter().any(|a| a == flag), "{flag} not emitted");
        }
    }

    #[test]
    fn a_wrong_command_line_says_which_argument() {
        for (args, says) in [
            (vec!["--rw"], "--rw needs a value"),
            (vec!["--rw-identity", "1:2", "--", "x"], "follows the --rw"),
            (
                vec!["--rw", "/a", "--rw-identity", "x", "--", "y"],
                "DEVICE:INODE",
            ),
            (vec!["--status-fd", "2", "--", "x"], "above 2"),
            (vec!["--memory", "1", "--", "x"], "at least"),
            (vec!["--abi-cap", "9", "--", "x"], "1..=7"),
            (vec!["--ipc", "shared", "--", "x"], "private or host"),
            (vec!["--protected-rel", "/abs", "--", "x"], "relative"),
            (vec!["--protected-name", "a/b", "--", "x"], "one file name"),
            (vec!["--net", "off", "--", "x"], "restricted or enabled"),
            (vec!["--"], "nothing to run"),
            (vec!["--tmp-area", "rel", "--", "x"], "absolute"),
            (vec!["--tmpdir", "rel", "--", "x"], "absolute"),
            (
                vec!["--tmp-area", "/b", "--tmpdir", "/a", "--", "x"],
                "exclude each other",
            ),
            (vec!["--frobnicate"], "unknown argument"),
            (vec![], "usage:"),
        ] {
            let err = Invocation::parse(args.iter().map(OsString::from))
                .expect_err(&format!("{args:?} parsed"));
            assert!(err.0.contains(says), "{args:?}: {err}");
        }
    }
}
