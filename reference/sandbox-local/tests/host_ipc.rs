//! Host IPC is closed while the payload's own plumbing keeps working: confined by the real bwrap
//! and the real launcher, a payload still gets `socketpair`s and pipes (Python's multiprocessing
//! with a pipe and a child process, `socket.socketpair`, cargo), while a unix socket of its own
//! and a keyring call are refused, and a SysV queue too where the IPC namespace is the host's. CI runs it as root and as the unprivileged user.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;

use sandbox::{ConfinedMode, EnforcementClass, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::{Backend, LocalConfig, LocalProvider};

/// Runs as it stands: multiprocessing over a pipe with a child process, a stream socketpair, and
/// the refusals, one word per line.
const PROBE: &str = r#"
import ctypes, multiprocessing as mp, os, socket
def child(c):
    c.send(os.getpid()); c.close()
if __name__ == "__main__":
    a, b = mp.Pipe()
    p = mp.Process(target=child, args=(b,)); p.start()
    print("mp-pipe", "ok" if a.recv() != os.getpid() else "same-pid"); p.join()
    x, y = socket.socketpair(); x.send(b"z"); print("socketpair", "ok" if y.recv(1) == b"z" else "bad")
    try:
        socket.socket(socket.AF_UNIX); print("unix-socket", "open")
    except OSError as e:
        print("unix-socket", "refused" if e.errno == 1 else e)
    libc = ctypes.CDLL(None, use_errno=True)
    print("msgget", "refused" if libc.msgget(0, 0o1600) < 0 and ctypes.get_errno() == 1 else "open")
    libc.syscall.restype = ctypes.c_long
    nr = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
    print("keyctl", "refused" if libc.syscall(nr, 0, ctypes.c_long(-3), 0) < 0 and ctypes.get_errno() == 1 else "open")
"#;

#[test]
fn pipes_socketpairs_and_multiprocessing_work_while_host_ipc_is_refused() {
    let python = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("a system python3 (the CI install step installs it)");
    let dir = tempfile::Builder::new()
        .prefix("host-ipc-test-")
        .tempdir_in("/var/tmp")
        .expect("workspace");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let script = dir.path().join("probe.py");
    std::fs::write(&script, PROBE).expect("write probe");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let ws = sandbox::canonical_path(dir.path()).expect("canonical");
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let provider = LocalProvider::new(LocalConfig::only(backend));
        let argv = [OsString::from(python), script.clone().into_os_string()];
        let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws.clone());
        let confined = provider.confine(&argv, &policy).expect("confine");
        assert_eq!(
            confined.class_report(EnforcementClass::HostIpc).enforcement,
            sandbox::ClassEnforcement::Full,
            "{backend:?}"
        );
        let done = launch::run(&confined, &LaunchOptions::in_dir(&ws));
        let stdout = String::from_utf8_lossy(&done.stdout);
        let stderr = String::from_utf8_lossy(&done.stderr);
        // Under bwrap SysV IPC is the sandbox's own (--unshare-ipc): a private queue may be
        // made; the launcher alone shares the host's namespace and refuses it.
        let sysv = match backend {
            Backend::Bwrap => "msgget open",
            _ => "msgget refused",
        };
        for want in [
            "mp-pipe ok",
            "socketpair ok",
            "unix-socket refused",
            sysv,
            "keyctl refused",
        ] {
            assert!(
                stdout.lines().any(|l| l == want),
                "{backend:?} (uid {}): missing {want:?}; stdout {stdout:?} stderr {stderr:?}",
                nix::unistd::geteuid()
            );
        }
        // cargo (which spawns rustc through pipes and socketpairs) still answers confined.
        let cargo = which::which("cargo");
        if cargo.is_err() {
            eprintln!("cargo is not on PATH here: its confined --version is not checked");
        }
        if let Ok(cargo) = cargo {
            let policy = ProviderPolicy::new(ConfinedMode::ReadOnly, ws.clone());
            let confined = provider
                .confine(&[cargo.into_os_string(), "--version".into()], &policy)
                .expect("confine");
            let done = launch::run(&confined, &LaunchOptions::in_dir(&ws));
            assert!(
                String::from_utf8_lossy(&done.stdout).starts_with("cargo "),
                "{backend:?}: cargo --version: {:?}",
                String::from_utf8_lossy(&done.stderr)
            );
        }
    }
}
