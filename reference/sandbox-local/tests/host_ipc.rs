//! Host IPC is closed while the payload's own plumbing keeps working: confined by the real bwrap
//! and the real launcher, a payload still gets `socketpair`s and pipes (Python's multiprocessing
//! with a pipe and a child process, `socket.socketpair`, cargo), while a unix socket of its own
//! and a keyring call are refused, and a SysV queue too where the IPC namespace is the host's. CI runs it as root and as the unprivileged user.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;

use sandbox::{ConfinedMode, EnforcementClass, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_test_support::{euid, scratch_dir, scratch_root};

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
    let dir = scratch_dir("host-ipc-test-");
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
        // Every route this test tries is closed; the one gap is the shared temp area.
        assert_eq!(
            confined.class_report(EnforcementClass::HostIpc).ungoverned,
            [sandbox_local::probe::HOST_IPC_SHARED_TEMP],
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
                euid()
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

/// An npm script whose node forks a child and talks to it over the IPC channel (libuv makes it
/// with `socketpair(AF_UNIX, SOCK_STREAM)`) and runs a subprocess, then a fresh `cargo build` of
/// a crate in the workspace (rustc through cargo's pipes and jobserver), both confined by the real
/// bwrap and the real launcher under `workspace-write`: the guard that refuses `socket(AF_UNIX)`
/// leaves them working, and what they build lands in the workspace.
#[test]
fn an_npm_script_with_fork_ipc_and_a_cargo_build_work_confined() {
    const FORK_JS: &str = r#"
const { fork, execFileSync } = require("child_process");
if (process.argv[2] === "child") {
  process.on("message", (m) => { process.send(m + 1); process.exit(0); });
} else {
  const c = fork(__filename, ["child"]);
  c.on("message", (m) => {
    console.log("fork-ipc", m === 42 ? "ok" : m);
    console.log("exec", execFileSync("sh", ["-c", "echo ok"]).toString().trim());
  });
  c.send(41);
}
"#;
    let npm = which::which("npm").expect("npm (the CI install step installs nodejs and npm)");
    let (_dir, ws) = scratch_root("host-ipc-npm-");
    std::fs::write(
        ws.join("package.json"),
        r#"{"name":"t","version":"1.0.0","private":true,"scripts":{"test":"node fork.js"}}"#,
    )
    .expect("package.json");
    std::fs::write(ws.join("fork.js"), FORK_JS).expect("fork.js");
    std::fs::create_dir_all(ws.join("crate/src")).expect("crate");
    std::fs::write(
        ws.join("crate/Cargo.toml"),
        "[package]\nname = \"confined\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .expect("Cargo.toml");
    std::fs::write(
        ws.join("crate/src/main.rs"),
        "fn main() { println!(\"built\"); }\n",
    )
    .expect("main.rs");
    // A cargo this uid can run (root's toolchain lives under /root, out of the CI user's reach).
    let cargo = which::which("cargo").ok().filter(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if cargo.is_none() {
        eprintln!(
            "uid {}: no cargo reachable: only the npm script is checked",
            euid()
        );
    }
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let provider = LocalProvider::new(LocalConfig::only(backend));
        let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws.clone());
        // npm writes its cache and logs under $HOME, which is not writable: point them inside.
        let argv: Vec<OsString> = vec![
            "/usr/bin/env".into(),
            format!("npm_config_cache={}", ws.join(".npm").display()).into(),
            npm.clone().into_os_string(),
            "test".into(),
            "--silent".into(),
        ];
        let confined = provider.confine(&argv, &policy).expect("confine");
        let done = launch::run(&confined, &LaunchOptions::in_dir(&ws));
        let stdout = String::from_utf8_lossy(&done.stdout);
        assert_eq!(
            stdout,
            "fork-ipc ok\nexec ok\n",
            "{backend:?} npm: stderr {:?}",
            String::from_utf8_lossy(&done.stderr)
        );
        if let Some(cargo) = &cargo {
            let _ = std::fs::remove_dir_all(ws.join("crate/target"));
            // A CARGO_TARGET_DIR in the caller's environment (CI sets one) would send the build
            // elsewhere: the build must land in the workspace.
            let argv: Vec<OsString> = vec![
                "/usr/bin/env".into(),
                "-u".into(),
                "CARGO_TARGET_DIR".into(),
                "-u".into(),
                "CARGO_BUILD_TARGET_DIR".into(),
                cargo.clone().into_os_string(),
                "run".into(),
                "-q".into(),
                "--offline".into(),
                "--manifest-path".into(),
                ws.join("crate/Cargo.toml").into_os_string(),
            ];
            let confined = provider.confine(&argv, &policy).expect("confine");
            let done = launch::run(&confined, &LaunchOptions::in_dir(&ws));
            assert_eq!(
                String::from_utf8_lossy(&done.stdout),
                "built\n",
                "{backend:?} cargo: stderr {:?}",
                String::from_utf8_lossy(&done.stderr)
            );
            assert!(
                ws.join("crate/target/debug/confined").is_file(),
                "{backend:?}: the build is in the workspace"
            );
        }
    }
}

/// A pytest run confined by the real bwrap and the real launcher under `workspace-write`: its tests
/// use a multiprocessing pipe to a child, a stream socketpair and pytest's own `tmp_path`, and one
/// tries to write outside the workspace. The suite passes (the refusal is what that test
/// expects), its temporary files land in the workspace, and the file outside is unchanged. A
/// multiprocessing pool works under bwrap (a private `/dev/shm`) and is refused under Landlock,
/// where `/dev/shm` is the host's: its semaphores would be files outside the writable set.
#[test]
fn a_pytest_run_with_multiprocessing_and_socketpairs_works_confined() {
    const TESTS: &str = r#"
import multiprocessing as mp, os, socket, pytest

def square(n):
    return n * n

def test_pipe_and_a_child():
    a, b = mp.Pipe()
    p = mp.get_context("fork").Process(target=b.send, args=(7,))
    p.start()
    assert a.recv() == 7
    p.join()

def test_pool_of_workers():
    # A pool's locks are POSIX semaphores, files in /dev/shm: bwrap gives the payload a private
    # /dev/shm; under Landlock it is the host's, outside the writable set, and refused.
    if os.environ["SHM"] == "private":
        with mp.get_context("fork").Pool(2) as pool:
            assert pool.map(square, range(5)) == [0, 1, 4, 9, 16]
    else:
        with pytest.raises(PermissionError):
            mp.get_context("fork").Pool(2)

def test_socketpair():
    a, b = socket.socketpair()
    a.sendall(b"ping")
    assert b.recv(4) == b"ping"

def test_tmp_path(tmp_path):
    (tmp_path / "made").write_text("by pytest")
    assert (tmp_path / "made").read_text() == "by pytest"

def test_outside_is_refused():
    with pytest.raises(OSError):
        with open(os.environ["OUTSIDE"], "w") as f:
            f.write("written by the payload")
"#;
    let python = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("a system python3 (the CI install step installs it)");
    let has_pytest = std::process::Command::new(python)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_pytest,
        "{python} has no pytest: the CI install step installs python3-pytest"
    );
    let (_dir, ws) = scratch_root("host-ipc-pytest-");
    let outside_dir = scratch_dir("host-ipc-pytest-outside-");
    let outside = outside_dir.path().join("sentinel");
    std::fs::write(&outside, "host").expect("sentinel");
    // The unprivileged leg's user may write it without the sandbox: only the sandbox refuses.
    std::fs::set_permissions(outside_dir.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod");
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    std::fs::write(ws.join("test_confined.py"), TESTS).expect("tests");
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let _ = std::fs::remove_dir_all(ws.join("basetemp"));
        let provider = LocalProvider::new(LocalConfig::only(backend));
        let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws.clone());
        let argv: Vec<OsString> = vec![
            "/usr/bin/env".into(),
            format!("OUTSIDE={}", outside.display()).into(),
            format!(
                "SHM={}",
                if backend == Backend::Bwrap {
                    "private"
                } else {
                    "host"
                }
            )
            .into(),
            python.into(),
            "-m".into(),
            "pytest".into(),
            "-q".into(),
            "-p".into(),
            "no:cacheprovider".into(),
            "--basetemp".into(),
            ws.join("basetemp").into_os_string(),
            ws.join("test_confined.py").into_os_string(),
        ];
        let confined = provider.confine(&argv, &policy).expect("confine");
        let done = launch::run(&confined, &LaunchOptions::in_dir(&ws));
        let stdout = String::from_utf8_lossy(&done.stdout);
        assert!(
            stdout.contains("5 passed"),
            "{backend:?} pytest: stdout {stdout:?} stderr {:?}",
            String::from_utf8_lossy(&done.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("basetemp/test_tmp_path0/made"))
                .ok()
                .as_deref(),
            Some("by pytest"),
            "{backend:?}: pytest's tmp_path is in the workspace"
        );
        assert_eq!(
            std::fs::read_to_string(&outside).expect("sentinel"),
            "host",
            "{backend:?}: the file outside is unchanged"
        );
    }
}
