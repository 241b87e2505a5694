//! A deployment's allowance for named unix sockets (`allow_unix_sockets`, an ssh agent's
//! `$SSH_AUTH_SOCK`), confined by the real bwrap and the real launcher, with real listeners this
//! test starts on the host: with the allowance the payload reaches the allowed socket's listener
//! and the launch reports `host-ipc` as `partial` naming `unix-sockets` (no backend here allows a
//! socket by path, so the test checks that the other listener is reached too: the gap the report
//! names is real); without it no listener hears anything and the class is `full`; a bad allowance
//! is refused with its code before anything runs. CI runs it as root and as the unprivileged user.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use sandbox::{
    ClassEnforcement, ConfinedMode, EnforcementClass, ExecutionPolicy, NetworkMode, ProviderPolicy,
    SandboxMode, SandboxProvider,
};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::probe::{HOST_IPC_SHARED_TEMP, HOST_IPC_UNIX_SOCKETS};
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_test_support::{euid, scratch_root};

/// Connects to each path given and sends its own name, one `<path> ok|refused` line per path.
/// First, whether a datagram unix socket and a vsock socket may be made (the allowance never
/// opens those: a datagram socket re-aims at any named one, vsock is the hypervisor's host).
const PAYLOAD: &str = r#"
import socket, sys
for name, family, kind in (("dgram", socket.AF_UNIX, socket.SOCK_DGRAM), ("vsock", 40, socket.SOCK_STREAM)):
    try:
        socket.socket(family, kind); print(name, "open")
    except OSError as e:
        print(name, "refused" if e.errno == 1 else e.errno)
for p in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(p); s.sendall(p.encode()); s.close(); print(p, "ok")
    except OSError as e:
        print(p, "refused", e.errno)
"#;

fn python() -> &'static str {
    ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("a system python3 (the CI install step installs it)")
}

/// A directory outside /tmp (so the workspace-write set does not contain the sockets) that the
/// unprivileged CI user may use: the workspace and two socket directories beside it.
struct Host {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    allowed: PathBuf,
    other: PathBuf,
}

fn host() -> Host {
    let (dir, base) = scratch_root("allowed-sockets-test-");
    let ws = base.join("ws");
    std::fs::create_dir(&ws).expect("ws");
    std::fs::create_dir(base.join("agent")).expect("agent dir");
    std::fs::create_dir(base.join("daemon")).expect("daemon dir");
    for d in [&base, &ws] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    Host {
        _dir: dir,
        ws,
        allowed: base.join("agent/agent.sock"),
        other: base.join("daemon/daemon.sock"),
    }
}

/// A listener on the host, non-blocking: a connection the payload completed before it exited is
/// in the backlog, so [`heard`] after the payload ended needs no wait.
fn listen(path: &Path) -> UnixListener {
    let l = UnixListener::bind(path).expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    l
}

/// What the listener received from connections made so far (empty: nobody connected).
fn heard(l: &UnixListener) -> Vec<String> {
    let mut got = Vec::new();
    while let Ok((mut conn, _)) = l.accept() {
        conn.set_nonblocking(false).expect("blocking");
        let mut text = String::new();
        // The payload sent and closed before exiting: this read ends at its close.
        conn.read_to_string(&mut text).expect("read");
        got.push(text);
    }
    got
}

fn run(
    backend: Backend,
    policy: &ProviderPolicy,
    targets: &[&Path],
) -> (sandbox::ClassReport, String) {
    let provider = LocalProvider::new(LocalConfig::only(backend));
    let mut argv = vec![OsString::from(python()), "-c".into(), PAYLOAD.into()];
    argv.extend(targets.iter().map(|t| t.as_os_str().to_owned()));
    let confined = provider.confine(&argv, policy).expect("confine");
    let done = launch::run(
        &confined,
        &LaunchOptions::in_dir(&policy.roots.workspace_root),
    );
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(
        stdout.lines().count() == targets.len() + 2,
        "{backend:?}: the payload did not run through: {stdout:?} / {:?}",
        String::from_utf8_lossy(&done.stderr)
    );
    (confined.class_report(EnforcementClass::HostIpc), stdout)
}

#[test]
fn an_allowed_socket_is_reached_and_the_launch_says_what_else_is_open() {
    let h = host();
    let (allowed, other) = (listen(&h.allowed), listen(&h.other));
    let me = euid();
    for backend in [Backend::Bwrap, Backend::Landlock] {
        for mode in [ConfinedMode::ReadOnly, ConfinedMode::WorkspaceWrite] {
            for network in [NetworkMode::Enabled, NetworkMode::Restricted] {
                let what = format!("{backend:?} {mode:?} {network:?} (uid {me})");
                let policy = ProviderPolicy::new(mode, h.ws.clone())
                    .with_network(network)
                    .with_roots(|r| r.with_allow_unix_sockets(vec![h.allowed.clone()]));
                let (report, stdout) = run(backend, &policy, &[&h.allowed, &h.other]);
                for line in ["dgram refused", "vsock refused"] {
                    assert!(stdout.lines().any(|l| l == line), "{what}: {stdout:?}");
                }
                assert_eq!(
                    report.allowed,
                    [h.allowed.display().to_string()],
                    "{what}: the facts list the allowance"
                );
                assert_eq!(
                    heard(&allowed),
                    [h.allowed.display().to_string()],
                    "{what}: the allowed listener heard the payload once; stdout {stdout:?}"
                );
                let reached_other = heard(&other);
                match report.enforcement {
                    // A path-precise backend: nothing but the allowed socket.
                    ClassEnforcement::Full => assert!(
                        reached_other.is_empty(),
                        "{what}: full, yet another listener heard {reached_other:?}"
                    ),
                    // The gap named is real: another socket on the host is reachable too.
                    _ => {
                        assert!(
                            report.ungoverned.iter().any(|g| g == HOST_IPC_UNIX_SOCKETS),
                            "{what}: partial without naming unix sockets: {report:?}"
                        );
                        assert_eq!(
                            reached_other,
                            [h.other.display().to_string()],
                            "{what}: reported open but not reached; stdout {stdout:?}"
                        );
                    }
                }
            }
        }
        // Without the allowance nothing is heard, and the class names no socket and nothing
        // allowed: only the shared temp area every workspace-write launch reports.
        let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, h.ws.clone());
        let (report, stdout) = run(backend, &policy, &[&h.allowed, &h.other]);
        assert_eq!(
            report,
            sandbox::ClassReport::with_gaps([HOST_IPC_SHARED_TEMP]),
            "{backend:?}"
        );
        assert!(
            stdout.lines().skip(2).all(|l| l.contains(" refused 1")),
            "{backend:?}: {stdout:?}"
        );
        assert!(
            heard(&allowed).is_empty() && heard(&other).is_empty(),
            "{backend:?}"
        );
    }
}

#[test]
fn a_bad_allowance_is_refused_with_its_code_and_nothing_runs() {
    let h = host();
    let _allowed = listen(&h.allowed);
    let in_ws = h.ws.join("own.sock");
    let _own = listen(&in_ws);
    let file = h.ws.join("not-a-socket");
    std::fs::write(&file, "x").expect("write");
    let marker = h.ws.join("ran");
    let through_proc = PathBuf::from(format!("/proc/self/root{}", h.allowed.display()));
    let cases: [(PathBuf, &str); 6] = [
        (
            PathBuf::from("agent/agent.sock"),
            sandbox::UNIX_SOCKET_RELATIVE,
        ),
        (
            h.allowed.with_file_name("gone.sock"),
            sandbox::UNIX_SOCKET_MISSING,
        ),
        (file.clone(), sandbox::UNIX_SOCKET_NOT_A_SOCKET),
        (h.ws.clone(), sandbox::UNIX_SOCKET_NOT_A_SOCKET),
        (in_ws.clone(), sandbox::UNIX_SOCKET_NOT_GRANTABLE),
        (through_proc, sandbox::UNIX_SOCKET_NOT_GRANTABLE),
    ];
    for (path, code) in cases {
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            let policy = ExecutionPolicy::new(mode, h.ws.clone())
                .with_roots(|r| r.with_allow_unix_sockets(vec![h.allowed.clone(), path.clone()]));
            let err = policy.check().expect_err("refused");
            assert_eq!(err.code(), code, "{path:?} {mode:?}: {err}");
            let provider_policy = policy.for_provider().expect("confined");
            for backend in [Backend::Bwrap, Backend::Landlock] {
                let provider = LocalProvider::new(LocalConfig::only(backend));
                let argv = ["/usr/bin/touch".into(), marker.clone().into_os_string()];
                let refused = provider
                    .confine(&argv, &provider_policy)
                    .expect_err("no launch for a bad allowance");
                assert!(refused.detail.starts_with(code), "{backend:?}: {refused:?}");
            }
        }
    }
    assert!(!marker.exists(), "something ran");
}
