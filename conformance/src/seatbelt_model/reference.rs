//! The reference Seatbelt profile judged through the model, on paths as macOS spells them: the
//! effects issue 33 names (a hard link in, the rename-away, set-id bits, the deputies) are
//! denied, and a workspace write, a pty and git's own work are allowed.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use sandbox::{NetworkMode, ProtectedPlan};
use sandbox_local::profile::WritableSet;
use sandbox_local::seatbelt;

use super::{Action, Profile, Request, Vnode, split_args};

const WS: &str = "/private/tmp/proj";

/// A workspace inside `/private/tmp` (itself a writable root), with `.git/hooks` and
/// `.git/config` protected and one allowed socket.
fn set() -> WritableSet {
    let ws = PathBuf::from(WS);
    WritableSet {
        workspace: Some(ws.clone()),
        temp: vec![
            PathBuf::from("/private/tmp"),
            PathBuf::from("/private/var/folders/xy/T"),
        ],
        protected: ProtectedPlan {
            paths: vec![
                ws.join(".git/hooks"),
                ws.join(".git/config"),
                ws.join(".husky"),
            ],
            ancestors: vec![ws.join(".git")],
            ..ProtectedPlan::default()
        },
        unix_sockets: vec![PathBuf::from("/private/var/run/agent.sock")],
        ..WritableSet::default()
    }
}

/// The profile `sandbox-exec` would get for `set` under `network`, compiled by the model.
fn compiled(set: &WritableSet, network: NetworkMode) -> (String, Profile) {
    let args = seatbelt::seatbelt_args(set, network, Some(3));
    let bytes: Vec<Vec<u8>> = args
        .iter()
        .map(|a: &OsString| a.as_bytes().to_vec())
        .collect();
    let (text, params, at) = split_args(&bytes).expect("sandbox-exec arguments");
    assert_eq!(
        bytes[at], b"/bin/sh",
        "the trampoline follows the parameters"
    );
    let profile = Profile::compile(&text, &params).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (text, profile)
}

fn decide(profile: &Profile, request: Request) -> Action {
    profile.decide(&request)
}

fn file(op: &str, path: &str) -> Request {
    Request::path(op, path)
}

#[test]
fn every_generated_profile_starts_closed_and_never_allows_by_default() {
    let shapes = [WritableSet::default(), set()];
    for set in &shapes {
        for network in [NetworkMode::Enabled, NetworkMode::Restricted] {
            let (text, profile) = compiled(set, network);
            assert!(!text.contains("(allow default)"), "{text}");
            let first_rule = text
                .lines()
                .find(|l| l.starts_with('(') && !l.starts_with("(version"));
            assert_eq!(first_rule, Some("(deny default)"), "{text}");
            assert!(!profile.allows_by_default());
        }
    }
}

#[test]
fn the_attacks_of_issue_33_are_denied() {
    let (_, p) = compiled(&set(), NetworkMode::Enabled);
    let deny = |r: Request| assert_eq!(decide(&p, r.clone()), Action::Deny, "{r:?}");
    // A hard link from outside into the workspace (`ln ~/.zshrc ws/z`): linking the outside file.
    deny(file("file-link", "/Users/me/.zshrc"));
    // A hard link of the protected config inside the workspace.
    deny(file("file-link", &format!("{WS}/.git/config")));
    // The rename-away: `.git` and the workspace itself (inside /private/tmp, a root).
    deny(file("file-write-unlink", &format!("{WS}/.git")));
    deny(file("file-write-unlink", WS));
    deny(file("file-write-unlink", &format!("{WS}/.GIT")));
    // Set-id bits on a workspace file.
    deny(file("file-write-setugid", &format!("{WS}/tool")));
    // Protected paths in any letter case.
    deny(file(
        "file-write-create",
        &format!("{WS}/.git/hooks/pre-commit"),
    ));
    deny(file(
        "file-write-create",
        &format!("{WS}/.Git/Hooks/pre-commit"),
    ));
    deny(file(
        "file-write-create",
        &format!("{WS}/.HUSKY/pre-commit"),
    ));
    deny(file("file-write-data", &format!("{WS}/.git/CONFIG")));
    // The deputies, and a write outside.
    for op in [
        "job-creation",
        "lsopen",
        "appleevent-send",
        "user-preference-write",
        "ipc-posix-shm",
        "ipc-sysv-msg",
    ] {
        deny(Request::op(op));
    }
    deny(file("file-write-create", "/Users/me/.zshrc"));
    deny(Request {
        global_name: Some("com.apple.pasteboard.1".into()),
        ..Request::op("mach-lookup")
    });
    deny(Request {
        global_name: Some("com.apple.SecurityServer".into()),
        ..Request::op("mach-lookup")
    });
    // Host IPC: a host daemon's unix socket, whatever the network knob says.
    deny(file("network-outbound", "/private/tmp/tmux-501/default"));
    // TIOCSTI into the person's terminal (a tty this sandbox did not make).
    deny(Request {
        vnode: Some(Vnode::CharDevice),
        ..file("file-ioctl", "/dev/ttys003")
    });
    // Signals to a host process.
    deny(Request {
        same_sandbox: Some(false),
        ..Request::op("signal")
    });
}

#[test]
fn ordinary_work_is_allowed() {
    let (_, p) = compiled(&set(), NetworkMode::Enabled);
    let allow = |r: Request| assert_eq!(decide(&p, r.clone()), Action::Allow, "{r:?}");
    allow(file("file-write-create", &format!("{WS}/src/main.rs")));
    allow(file("file-write-data", &format!("{WS}/src/main.rs")));
    allow(file("file-write-unlink", &format!("{WS}/src/old.rs")));
    // git's own work: the index, objects, refs, a lockfile renamed over the index.
    for path in [
        ".git/index",
        ".git/index.lock",
        ".git/objects/ab/cdef",
        ".git/refs/heads/main",
        ".git/HEAD",
    ] {
        allow(file("file-write-create", &format!("{WS}/{path}")));
        allow(file("file-write-unlink", &format!("{WS}/{path}")));
    }
    // cargo's hard links inside the workspace.
    allow(file(
        "file-link",
        &format!("{WS}/target/debug/deps/app-1234"),
    ));
    // A pty the call makes: the clone device, and its slave with the sandbox's pty extension.
    allow(Request::op("pseudo-tty"));
    allow(Request {
        vnode: Some(Vnode::CharDevice),
        ..file("file-ioctl", "/dev/ptmx")
    });
    let slave = Request {
        vnode: Some(Vnode::CharDevice),
        extensions: vec!["com.apple.sandbox.pty".into()],
        ..file("file-ioctl", "/dev/ttys007")
    };
    allow(slave.clone());
    allow(Request {
        op: "file-write-data".into(),
        ..slave
    });
    allow(Request {
        vnode: Some(Vnode::CharDevice),
        ..file("file-write-data", "/dev/null")
    });
    allow(file("file-write-data", "/dev/fd/2"));
    allow(file("file-read-data", "/etc/passwd"));
    allow(Request {
        same_sandbox: Some(true),
        ..Request::op("signal")
    });
    allow(Request {
        socket_domain: Some("AF_UNIX".into()),
        ..Request::op("system-socket")
    });
    allow(Request {
        global_name: Some("com.apple.system.opendirectoryd.libinfo".into()),
        ..Request::op("mach-lookup")
    });
    // The allowed socket, and the network the knob leaves enabled.
    allow(file("network-outbound", "/private/var/run/agent.sock"));
    allow(Request {
        remote_ip: true,
        ..Request::op("network-outbound")
    });
}

#[test]
fn a_restricted_network_names_no_ip_socket() {
    let (_, p) = compiled(&set(), NetworkMode::Restricted);
    assert_eq!(
        decide(
            &p,
            Request {
                remote_ip: true,
                ..Request::op("network-outbound")
            }
        ),
        Action::Deny
    );
    let inet = Request {
        socket_domain: Some("AF_INET".into()),
        ..Request::op("system-socket")
    };
    assert_eq!(decide(&p, inet), Action::Deny);
    assert_eq!(
        decide(
            &p,
            file("network-outbound", "/private/var/run/mDNSResponder")
        ),
        Action::Deny
    );
    // The deployment's allowed socket stays reachable.
    assert_eq!(
        decide(&p, file("network-outbound", "/private/var/run/agent.sock")),
        Action::Allow
    );
}

#[test]
fn read_only_writes_nothing_but_dev_null() {
    let (_, p) = compiled(&WritableSet::default(), NetworkMode::Enabled);
    assert_eq!(
        decide(&p, file("file-write-create", &format!("{WS}/x"))),
        Action::Deny
    );
    assert_eq!(
        decide(&p, file("file-link", &format!("{WS}/x"))),
        Action::Deny
    );
    let null = Request {
        vnode: Some(Vnode::CharDevice),
        ..file("file-write-data", "/dev/null")
    };
    assert_eq!(decide(&p, null), Action::Allow);
}
