//! The Seatbelt dialect (macOS `sandbox-exec`): a `(deny default)` profile in which every
//! allowance is named with why a command needs it, and the parameters that carry every path.
//!
//! SBPL is evaluated rule by rule and the last matching rule wins, so the profile is laid out as
//! the anchors lay theirs out (Codex's `seatbelt_base_policy.sbpl`, sandbox-runtime's
//! `macos-sandbox-utils.ts`): closed by default, then what a shell, git, cargo, python and node
//! need, then the writable roots, then the denials that must win over every grant (protected
//! paths, the ancestors of protected paths, set-id bits, the macOS deputies).
//!
//! Paths never appear in the profile text: each is a `(param ...)` passed with `-D`, so no path
//! can break out of the SBPL string syntax. The conformance suite evaluates these profiles on
//! Linux through a model of SBPL (`conformance::seatbelt_model`); `ci/macos-smoke.sh` compiles
//! and runs them on macOS.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use sandbox::NetworkMode;

use crate::profile::WritableSet;

/// One rule of the profile with why it is there (the comment line written above it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Why a command needs it (or why it must win), written as an SBPL comment above it.
    pub why: &'static str,
    /// The SBPL form, on one line.
    pub sbpl: &'static str,
}

const fn rule(why: &'static str, sbpl: &'static str) -> Rule {
    Rule { why, sbpl }
}

/// The first rule: everything no later rule names is refused.
pub const DENY_DEFAULT: &str = "(deny default)";

/// What every confined command gets, in every mode: process basics, reads, the Mach services a
/// shell, git, cargo, python and node look up, and the devices a terminal needs.
pub const BASE: &[Rule] = &[
    rule(
        "a shell runs commands: fork and exec (children inherit this profile)",
        "(allow process-fork)",
    ),
    rule(
        "exec of any program (it runs under this profile)",
        "(allow process-exec)",
    ),
    rule(
        "job control and kill within the call only: no host process can be signalled",
        "(allow signal (target same-sandbox))",
    ),
    rule(
        "ps, wait and libproc on the call's own processes only",
        "(allow process-info* (target same-sandbox))",
    ),
    rule(
        "reads are not governed by any mode (file effects only)",
        "(allow file-read*)",
    ),
    rule(
        "stat-like existence checks (a separate operation on recent macOS)",
        "(allow file-test-existence)",
    ),
    rule(
        "dyld maps libraries and executables (a read)",
        "(allow file-map-executable)",
    ),
    rule(
        "kernel facts (hw.ncpu, kern.osrelease, kern.proc.* for ps): reading changes nothing",
        "(allow sysctl-read)",
    ),
    rule(
        "node's os.cpus() and python's os.cpu_count() ask the host port (host_processor_info)",
        "(allow mach-host*)",
    ),
    rule(
        "CFPreferences reads (cfprefsd checks user-preference-write itself, denied below)",
        "(allow user-preference-read)",
    ),
    rule(
        "getpwuid and getgrouplist (the shell's prompt, git's identity, python's pwd)",
        "(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\") (global-name \"com.apple.system.opendirectoryd.membership\"))",
    ),
    rule(
        "notify(3): libc's time zone and locale caches",
        "(allow mach-lookup (global-name \"com.apple.system.notification_center\"))",
    ),
    rule(
        "confstr(_CS_DARWIN_USER_TEMP_DIR) and the user cache directory clang and xcrun ask for",
        "(allow mach-lookup (global-name \"com.apple.bsd.dirhelper\"))",
    ),
    rule(
        "CFPreferences reads go through cfprefsd (it refuses this sandbox's writes)",
        "(allow mach-lookup (global-name \"com.apple.cfprefsd.daemon\") (global-name \"com.apple.cfprefsd.agent\"))",
    ),
    rule(
        "socketpair and unix sockets among the call's own processes (cargo, node's IPC channel); connecting to a named one is network-outbound, closed below",
        "(allow system-socket (socket-domain AF_UNIX))",
    ),
    rule(
        "/dev/null is the one device every mode may write",
        "(allow file-write-data (require-all (literal \"/dev/null\") (vnode-type CHARACTER-DEVICE)))",
    ),
    rule(
        "/dev/stdout, /dev/stderr and /dev/fd/N reopen a descriptor the call already holds",
        "(allow file-write-data (regex #\"^/dev/fd/[0-9]+$\"))",
    ),
    rule(
        "openpty(): a pty the call makes itself",
        "(allow pseudo-tty)",
    ),
    rule(
        "the pty master clone device",
        "(allow file-write-data file-ioctl (literal \"/dev/ptmx\"))",
    ),
    rule(
        "a pty slave this sandbox made (the extension is issued to its maker): never the person's terminal, so no TIOCSTI into it",
        "(allow file-write-data file-ioctl (require-all (regex #\"^/dev/ttys[0-9]+$\") (extension \"com.apple.sandbox.pty\")))",
    ),
    rule(
        "/dev/tty is the controlling terminal: after setsid only a pty the call made",
        "(allow file-write-data file-ioctl (literal \"/dev/tty\"))",
    ),
];

/// What a network the policy leaves `enabled` adds: IP sockets, DNS and TLS trust. Unix sockets
/// stay closed (host IPC), whatever the knob says.
pub const NETWORK_ENABLED: &[Rule] = &[
    rule(
        "IP sockets (TCP, UDP); unix sockets are host IPC and stay closed",
        "(allow system-socket (socket-domain AF_INET) (socket-domain AF_INET6))",
    ),
    rule(
        "connect and send to any IP address",
        "(allow network-outbound (remote ip \"*:*\"))",
    ),
    rule(
        "bind and accept on any local IP address (a test server)",
        "(allow network-bind network-inbound (local ip \"*:*\"))",
    ),
    rule(
        "getaddrinfo asks mDNSResponder over this socket (a deputy that resolves names only)",
        "(allow network-outbound (literal \"/private/var/run/mDNSResponder\"))",
    ),
    rule(
        "DNS configuration and TLS trust evaluation (git, curl, cargo over https); the keychain (com.apple.SecurityServer) stays closed",
        "(allow mach-lookup (global-name \"com.apple.SystemConfiguration.configd\") (global-name \"com.apple.SystemConfiguration.DNSConfiguration\") (global-name \"com.apple.networkd\") (global-name \"com.apple.trustd.agent\") (global-name \"com.apple.ocspd\"))",
    ),
];

/// The denials that must win over every grant above them, in every mode. `(deny default)`
/// already refuses them; naming them last keeps a later, broader allowance from opening them.
pub const DEPUTIES: &[Rule] = &[
    rule(
        "launchctl submit and at: launchd would run the job outside this sandbox",
        "(deny job-creation)",
    ),
    rule(
        "open(1) and LaunchServices: the opened app runs outside this sandbox",
        "(deny lsopen)",
    ),
    rule(
        "osascript: another app (Terminal's do script) acts for the payload",
        "(deny appleevent-send)",
    ),
    rule(
        "defaults write: cfprefsd would write ~/Library/Preferences for the payload",
        "(deny user-preference-write)",
    ),
    rule(
        "POSIX shared memory and semaphores are host-wide names another process may act on",
        "(deny ipc-posix*)",
    ),
    rule(
        "the host's SysV message queues, semaphores and shared memory",
        "(deny ipc-sysv*)",
    ),
    rule(
        "the task port of any process, its own included (it would write another process's memory)",
        "(deny mach-priv-task-port)",
    ),
    rule(
        "set-id bits, even on a file in a writable root (chmod u+s)",
        "(deny file-write-setugid)",
    ),
];

/// The shape of one profile: how many of each parameter it names, and the network knob.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// `WRITABLE_ROOT_n`: the workspace, the temp roots, the extra roots.
    pub roots: usize,
    /// `PROTECTED_n`, `PROTECTED_ROOT_n` and `PROTECTED_CI_n`: each protected path exactly, and
    /// its part below the innermost writable root holding it in any letter case.
    pub protected: usize,
    /// `ANCESTOR_n`: each directory above a protected path, up to and including the outermost
    /// writable root holding it.
    pub ancestors: usize,
    /// `FOLDED_ROOT_n` and `FOLDED_CI_n`: each of those strictly below its innermost root, in
    /// any letter case.
    pub folded_ancestors: usize,
    /// `UNIX_SOCKET_n`: each named unix socket the policy allows, as given and canonical.
    pub sockets: usize,
    /// The network knob.
    pub network: NetworkMode,
}

/// The Seatbelt profile text of `shape`: `(deny default)`, [`BASE`], the network rules, the
/// writable roots, the allowed sockets, the protected paths and their ancestors, then
/// [`DEPUTIES`]. Each rule follows a comment saying why.
pub fn seatbelt_profile(shape: &Shape) -> String {
    let mut out = String::from("(version 1)\n");
    let mut push = |why: &str, sbpl: &str| {
        out.push_str("; ");
        out.push_str(why);
        out.push('\n');
        out.push_str(sbpl);
        out.push('\n');
    };
    push(
        "closed by default: an operation no rule below names is refused (EPERM)",
        DENY_DEFAULT,
    );
    for r in BASE {
        push(r.why, r.sbpl);
    }
    if !shape.network.is_restricted() {
        for r in NETWORK_ENABLED {
            push(r.why, r.sbpl);
        }
    }
    for i in 0..shape.roots {
        push(
            "a writable root: create, write, remove and rename beneath it",
            &format!("(allow file-write* (subpath (param \"WRITABLE_ROOT_{i}\")))"),
        );
        push(
            "a hard link to a file in a writable root (cargo's and git's links); a file outside cannot be linked in and written through",
            &format!("(allow file-link (subpath (param \"WRITABLE_ROOT_{i}\")))"),
        );
    }
    for i in 0..shape.sockets {
        push(
            "a named unix socket the deployment allowed (allow_unix_sockets)",
            &format!("(allow network-outbound (literal (param \"UNIX_SOCKET_{i}\")))"),
        );
    }
    // Last but for the deputies, so they win over the grants: the protected paths, existing or
    // not, in any letter case (macOS volumes are usually case-insensitive: `.GIT/config` is
    // `.git/config`), and every directory above one, up to the outermost writable root holding
    // it, kept from being removed or renamed (renaming `.git` or the workspace away, editing the
    // config there and renaming it back must fail; writing `.git/index` must not).
    for i in 0..shape.protected {
        push(
            "a protected path, and its name below its root in any letter case: no write, create, remove, rename or hard link of it or beneath it",
            &format!(
                "(deny file-write* file-link (subpath (param \"PROTECTED_{i}\")) (require-all (subpath (param \"PROTECTED_ROOT_{i}\")) (regex (param \"PROTECTED_CI_{i}\"))))"
            ),
        );
    }
    for i in 0..shape.ancestors {
        push(
            "a directory above a protected path, up to the outermost writable root: it may not be removed or renamed away",
            &format!("(deny file-write-unlink (literal (param \"ANCESTOR_{i}\")))"),
        );
    }
    for i in 0..shape.folded_ancestors {
        push(
            "the same directory below its root in any letter case",
            &format!(
                "(deny file-write-unlink (require-all (subpath (param \"FOLDED_ROOT_{i}\")) (regex (param \"FOLDED_CI_{i}\"))))"
            ),
        );
    }
    for r in DEPUTIES {
        push(r.why, r.sbpl);
    }
    out
}

/// The in-sandbox exec trampoline: reports `{"exec": ...}` on the status fd just before exec'ing
/// the payload (closing the fd first), or `{"exec-failed": ...}` when the program is not found.
/// Its records are [`sandbox::status`]'s (a test reads each one through it).
pub const SEATBELT_TRAMPOLINE: &str = r#"if command -v -- "$1" >/dev/null 2>&1; then printf '{"exec":"ok"}\n' >&3; exec 3>&- "$@"; else printf '{"exec-failed":"trampoline: %s: not found"}\n' "$1" >&3; exit 127; fi"#;

/// Every parameter of the profile for `set`, in the order [`Shape`] counts them, with the shape.
pub fn seatbelt_params(
    set: &WritableSet,
    network: NetworkMode,
) -> (Shape, Vec<(String, OsString)>) {
    let roots: Vec<&PathBuf> = set
        .workspace
        .iter()
        .chain(set.temp.iter())
        .chain(set.extra.iter())
        .collect();
    let mut params = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        params.push((format!("WRITABLE_ROOT_{i}"), root.as_os_str().to_owned()));
    }
    let sockets = socket_spellings(&set.unix_sockets);
    for (i, socket) in sockets.iter().enumerate() {
        params.push((format!("UNIX_SOCKET_{i}"), socket.as_os_str().to_owned()));
    }
    let protected = &set.protected.paths;
    for (i, path) in protected.iter().enumerate() {
        let (root, below) = split_at_anchor(path, &set.protected.ancestors);
        params.push((format!("PROTECTED_{i}"), path.as_os_str().to_owned()));
        params.push((format!("PROTECTED_ROOT_{i}"), root.as_os_str().to_owned()));
        params.push((format!("PROTECTED_CI_{i}"), any_case_regex(below, true)));
    }
    let ancestors = ancestors(protected, &roots);
    for (i, dir) in ancestors.iter().enumerate() {
        params.push((format!("ANCESTOR_{i}"), dir.as_os_str().to_owned()));
    }
    // Folded only strictly below the root the protected path was anchored at: a name at or
    // above it is a name of the world (a workspace inside /tmp), not of the protected pattern.
    let mut folded: Vec<(&Path, &Path)> = Vec::new();
    for path in protected {
        let (root, _) = split_at_anchor(path, &set.protected.ancestors);
        for dir in path.ancestors().skip(1) {
            let Ok(below) = dir.strip_prefix(root) else {
                break;
            };
            if below.as_os_str().is_empty() {
                break;
            }
            if !folded.contains(&(root, below)) {
                folded.push((root, below));
            }
        }
    }
    for (i, (root, below)) in folded.iter().enumerate() {
        params.push((format!("FOLDED_ROOT_{i}"), root.as_os_str().to_owned()));
        params.push((format!("FOLDED_CI_{i}"), any_case_regex(below, false)));
    }
    let folded = folded.len();
    let shape = Shape {
        roots: roots.len(),
        protected: protected.len(),
        ancestors: ancestors.len(),
        folded_ancestors: folded,
        sockets: sockets.len(),
        network,
    };
    (shape, params)
}

/// `sandbox-exec` arguments (after the program): the profile, one `-D NAME=VALUE` per parameter,
/// then the payload wrapped in the trampoline when a status fd is used.
pub fn seatbelt_args(
    set: &WritableSet,
    network: NetworkMode,
    status_fd: Option<i32>,
) -> Vec<OsString> {
    let (shape, params) = seatbelt_params(set, network);
    let mut args = vec![
        OsString::from("-p"),
        OsString::from(seatbelt_profile(&shape)),
    ];
    for (name, value) in params {
        let mut define = OsString::from(format!("{name}="));
        define.push(value);
        args.extend([OsString::from("-D"), define]);
    }
    if status_fd.is_some() {
        args.extend(
            ["/bin/sh", "-c", SEATBELT_TRAMPOLINE, "sandbox-trampoline"].map(OsString::from),
        );
    }
    args
}

/// The directories above each protected path that a payload could rename or remove to move the
/// path out from under its rule: from its parent up to and including the outermost writable root
/// holding it (a workspace inside `/tmp`, itself a root, is renamed through `/tmp`'s grant).
/// Without duplicates, in first-seen order.
pub fn ancestors(protected: &[PathBuf], roots: &[&PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in protected {
        let Some(outermost) = roots
            .iter()
            .filter(|r| path.starts_with(r) && path != **r)
            .min_by_key(|r| r.components().count())
        else {
            continue;
        };
        for dir in path.ancestors().skip(1) {
            if !dir.starts_with(outermost) {
                break;
            }
            if !out.iter().any(|d| d == dir) {
                out.push(dir.to_path_buf());
            }
        }
    }
    out
}

/// Each allowed socket as given and, when it differs, as its canonical path (Seatbelt may see
/// `/tmp/x` as `/private/tmp/x`).
fn socket_spellings(sockets: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for socket in sockets {
        let canonical = sandbox::canonical_path(socket).ok();
        for spelling in std::iter::once(socket.clone()).chain(canonical) {
            if !out.contains(&spelling) {
                out.push(spelling);
            }
        }
    }
    out
}

/// `path` split at the root it was anchored at (the workspace or an extra root): the parent of
/// the shallowest directory on its way that the plan lists as an ancestor, or its own parent.
/// The part below is the protected pattern (`.git/hooks`), never a name of the world.
fn split_at_anchor<'a>(path: &'a Path, ancestors: &[PathBuf]) -> (&'a Path, &'a Path) {
    let anchor = path
        .ancestors()
        .skip(1)
        .filter(|d| ancestors.iter().any(|a| a == d))
        .last()
        .and_then(Path::parent)
        .or_else(|| path.parent())
        .unwrap_or(path);
    (anchor, path.strip_prefix(anchor).unwrap_or(path))
}

/// A regex matching a path that ends in `/` + `below` in any ASCII letter case (and everything
/// beneath it when `subtree`), anchored at the end only: every regex metacharacter is escaped,
/// every letter becomes a two-letter class (`.git` -> `\.[gG][iI][tT]`), other bytes stand for
/// themselves. The profile pairs it with `(subpath ROOT)` (the root the protected path was
/// anchored at), so it matches that name at any depth below the root: SBPL cannot fold the case
/// of a parameter, and a regex spelling the root would not be the root's path (a backend's
/// answer must be the same for a renamed world).
pub fn any_case_regex(below: &Path, subtree: bool) -> OsString {
    let mut re = vec![b'/'];
    for &b in below.as_os_str().as_bytes() {
        if b.is_ascii_alphabetic() {
            re.extend_from_slice(&[b'[', b.to_ascii_lowercase(), b.to_ascii_uppercase(), b']']);
        } else if b".[]{}()*+?^$|\\".contains(&b) {
            re.extend_from_slice(&[b'\\', b]);
        } else {
            re.push(b);
        }
    }
    re.extend_from_slice(if subtree { b"(/.*)?$" } else { b"$" });
    OsString::from_vec(re)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox::status::Record;
    use sandbox::{PayloadStatus, StatusFormat};

    /// The records the trampoline prints, as `printf` writes them for a program named `prog`.
    fn printed(program: &str) -> Vec<String> {
        SEATBELT_TRAMPOLINE
            .split("printf '")
            .skip(1)
            .filter_map(|rest| rest.split_once("\\n'"))
            .map(|(format, _)| format.replace("%s", program) + "\n")
            .collect()
    }

    #[test]
    fn the_trampoline_writes_the_status_records_of_the_sandbox_crate() {
        let lines = printed("prog");
        assert_eq!(lines.len(), 2, "{SEATBELT_TRAMPOLINE}");
        assert_eq!(lines[0], Record::Exec("ok".into()).to_line());
        assert_eq!(
            lines[1],
            Record::ExecFailed("trampoline: prog: not found".into()).to_line()
        );
        let format = StatusFormat::LaunchReport;
        assert_eq!(
            format.parse(lines[0].as_bytes()),
            PayloadStatus::Ran { exit_code: None }
        );
        assert_eq!(
            format.parse(lines[1].as_bytes()),
            PayloadStatus::NeverRan {
                detail: Some("trampoline: prog: not found".into())
            }
        );
    }

    #[test]
    fn the_any_case_regex_escapes_and_folds() {
        let re = any_case_regex(Path::new("a.b+(c)/.git"), true);
        assert_eq!(
            re.to_string_lossy(),
            r"/[aA]\.[bB]\+\([cC]\)/\.[gG][iI][tT](/.*)?$"
        );
        assert_eq!(
            any_case_regex(Path::new("x"), false).to_string_lossy(),
            "/[xX]$"
        );
    }

    #[test]
    fn ancestors_reach_the_outermost_root_holding_the_path() {
        let tmp = PathBuf::from("/tmp");
        let ws = PathBuf::from("/tmp/proj");
        let got = ancestors(&[ws.join(".git/hooks")], &[&ws, &tmp]);
        assert_eq!(
            got,
            [ws.join(".git"), ws.clone(), tmp.clone()].map(PathBuf::from)
        );
        // A path in no root has no ancestors to keep.
        assert!(ancestors(&[PathBuf::from("/etc/x")], &[&ws]).is_empty());
    }
}
