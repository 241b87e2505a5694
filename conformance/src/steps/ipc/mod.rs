//! The `host_ipc` step: the harness sets up one host IPC route outside the sandbox (a daemon on a
//! named unix socket in `/tmp` or in a directory named like `$XDG_RUNTIME_DIR`, one on an abstract
//! socket, a FIFO with a reader outside the writable set, a SysV message queue, a SysV shared
//! memory segment, a POSIX message queue, a key in the user's keyring, a real tmux server), a
//! payload confined under the step's mode and network knob tries to use it, and the host decides:
//! the route must show no effect at all (nothing received, nothing queued, the segment and the key
//! unchanged, no file the tmux server's shell would have made). A host process acting for the
//! payload is a file effect outside the writable set, whatever the network knob says.
//!
//! The payload must report its attempt (`refused ...`), so one that never tried cannot pass. A
//! failure names what the launch reported for the `host-ipc` class, so a backend that leaves a
//! route open while it reports the class `partial` fails truthfully (an expectation can name it),
//! and one that claims `full` fails as a liar.

use std::ffi::CString;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sandbox::{ClassEnforcement, Classification, EnforcementClass, ProviderPolicy};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
use crate::scenario::{HostIpcStep, IpcTarget, WorkspaceSpelling};
use crate::steps::StepError;
use crate::world::World;

/// The call's timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a listener keeps listening after the call returned (a connection the payload started
/// just before it ended still counts).
const GRACE: Duration = Duration::from_millis(200);

/// How long the harness waits for its own tmux keystrokes to take effect.
const TMUX_WAIT: Duration = Duration::from_secs(10);

/// Writes `$MSG` into the FIFO `$FIFO`.
const SH_FIFO: &str =
    r#"if printf '%s\n' "$MSG" > "$FIFO"; then echo written; else echo "refused open"; fi"#;

/// Sends `$MSG` on the SysV queue `$QID`, by its id and through its key `$QKEY`.
const PERL_MSG: &str = r#"perl -e '
my $ok = 0;
my $id = msgget($ENV{QKEY}, 0);
if (defined $id && msgsnd($id, pack("l! a*", 1, $ENV{MSG}), 0)) { $ok = 1 }
if (msgsnd($ENV{QID}, pack("l! a*", 1, $ENV{MSG}), 0)) { $ok = 1 }
print $ok ? "sent\n" : "refused msgsnd: $!\n";
'"#;

/// Writes `$MSG` into the SysV segment `$SHMID`.
const PERL_SHM: &str = r#"perl -e '
if (shmwrite($ENV{SHMID}, $ENV{MSG}, 0, length $ENV{MSG})) { print "written\n" }
else { print "refused shmwrite: $!\n" }
'"#;

/// Opens the POSIX queue `$MQ` and sends `$MSG` (the system's Python when there is one: a
/// version manager's `python3` shim on PATH costs a shell and its scripts per call), with the
/// standard library alone (`-I -S`, as the metadata payload).
const PY_MQ: &str = r#"py=/usr/bin/python3; [ -x "$py" ] || py=python3
"$py" -I -S -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.restype = ctypes.c_int
fd = libc.mq_open(sys.argv[1].encode(), os.O_WRONLY)
if fd < 0:
    print("refused mq_open:", os.strerror(ctypes.get_errno()))
else:
    m = sys.argv[2].encode()
    r = libc.mq_send(fd, m, len(m), 0)
    print("sent" if r == 0 else "refused mq_send: " + os.strerror(ctypes.get_errno()))
' "$MQ" "$MSG""#;

/// Overwrites the user-keyring key described `$KEYDESC` with `$MSG` (`add_key` on an existing
/// description updates it), and also tries `keyctl update` on its id `$KEYID`.
const PY_KEY: &str = r#"py=/usr/bin/python3; [ -x "$py" ] || py=python3
"$py" -I -S -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
m = sys.argv[3].encode()
SYS_add_key, SYS_keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
r1 = libc.syscall(SYS_add_key, b"user", sys.argv[1].encode(), m, len(m), ctypes.c_long(-4))
e1 = ctypes.get_errno()
r2 = libc.syscall(SYS_keyctl, 2, ctypes.c_long(int(sys.argv[2])), m, len(m))
e2 = ctypes.get_errno()
if r1 < 0 and r2 < 0:
    print("refused add_key:", os.strerror(e1), "keyctl:", os.strerror(e2))
else:
    print("updated")
' "$KEYDESC" "$KEYID" "$MSG""#;

/// Types a command into the tmux server at `$SOCK`: its shell would create `$TARGET`.
const SH_TMUX: &str = r#"if tmux -S "$SOCK" send-keys "touch $TARGET" Enter; then echo typed; else echo "refused send-keys"; fi"#;

mod route;
mod tmux;

use route::setup;
use tmux::Tmux;

fn seen(records: Vec<Vec<u8>>) -> Option<String> {
    (!records.is_empty()).then(|| {
        let bytes: Vec<String> = records
            .iter()
            .map(|b| format!("{:?}", String::from_utf8_lossy(b)))
            .collect();
        format!("the host listener recorded {}", bytes.join(" "))
    })
}

/// Opening a FIFO for reading without blocking until a writer comes.
trait NonBlockingOpen {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlockingOpen for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

/// The control of `target`'s route ([`super::control`]): its client, run on the host against a
/// route of its own, must reach the host.
fn control(target: IpcTarget) -> Result<(), StepError> {
    control_of(&format!("host-ipc {target:?} client"), target, None)
}

/// The control named `probe` of `target`'s route, with its own client or `client`.
fn control_of(probe: &str, target: IpcTarget, client: Option<&str>) -> Result<(), StepError> {
    super::control::once(probe, || {
        let msg = format!("touch-{}", crate::world::draw_hex(12));
        let route = setup(target, &msg).map_err(|e| e.to_string())?;
        let mut vars = route.vars.clone();
        vars.push(("MSG", msg.clone().into()));
        let said = super::control::run_unconfined(client.unwrap_or(route.client), &vars)?;
        match (route.check)(&msg).map_err(|e| e.to_string())? {
            Some(_) => Ok(()),
            None => Err(format!("the host saw nothing of it; it said {said:?}")),
        }
    })
}

pub(super) fn run(backend: &Backend, step: &HostIpcStep) -> Result<(), StepError> {
    control(step.target)?;
    let provider = super::confining(backend)?;
    let world = World::small().map_err(super::world_error)?;
    let workspace = world.workspace(WorkspaceSpelling::Ws);
    let before = world.snapshot();
    let msg = format!("touch-{}", crate::world::draw_hex(12));
    let route = setup(step.target, &msg)?;
    let started = format!(
        "{}-{}",
        crate::world::draw_one(&["starting", "begin", "probe", "try"]),
        crate::world::draw_hex(6)
    );
    let script = format!("echo {started}\n{}\n", route.client);
    let mut vars = route.vars.clone();
    vars.push(("MSG", msg.clone().into()));
    let dressed = crate::request::dress(&script, vars);
    let policy = ProviderPolicy::new(step.mode, workspace.clone())
        .with_roots(|r| r.with_temp_dir(None))
        .with_network(step.network);
    let confined = provider
        .confine(&dressed.argv, &policy)
        .map_err(|e| StepError::Harness(format!("confine refused: {e}")))?;
    let report = confined.class_report(EnforcementClass::HostIpc);
    let reported = super::reported(&report, "host-ipc");
    let mut options = LaunchOptions::in_dir(&workspace);
    options.env = dressed.env;
    options.env_remove.push("TMPDIR".into());
    options.timeout = Some(CALL_TIMEOUT);
    crate::survivors::tag_launch(&mut options);
    let done = launch::run(&confined, &options);
    std::thread::sleep(GRACE);
    let effect = (route.check)(&msg)?;
    if let Classification::RunnerFailure { detail, .. } = &done.classification {
        return Err(StepError::Unmet(format!("the runner failed: {detail}")));
    }
    let (stdout, stderr) = super::probe_ran(&done, &started, &world, &before)?;
    if let Some(effect) = effect {
        let liar = if report.enforcement == ClassEnforcement::Full {
            "; it claims full"
        } else {
            ""
        };
        return Err(StepError::Unmet(format!(
            "a host IPC route outside the sandbox acted for the payload under {} with network {}: \
             {effect}; the launch {reported}{liar}",
            step.mode, step.network
        )));
    }
    if !stdout.contains("refused") {
        return Err(StepError::Unmet(format!(
            "the host saw nothing, but the payload did not report a refused attempt (stdout \
             {stdout:?}, stderr {stderr:?})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_routes_client_reaches_the_host_unconfined_and_one_that_cannot_is_caught() {
        for target in [
            IpcTarget::NamedTmp,
            IpcTarget::NamedRuntime,
            IpcTarget::Abstract,
            IpcTarget::Fifo,
            IpcTarget::SysvMsg,
            IpcTarget::SysvShm,
            IpcTarget::PosixMq,
            IpcTarget::Keyring,
            IpcTarget::Tmux,
        ] {
            let probe = format!("test {target:?} {}", crate::world::draw_hex(8));
            control_of(&probe, target, None).unwrap_or_else(|e| panic!("{target:?}: {e}"));
        }
        // A client that never tries says "refused" in any sandbox: its control is the
        // harness's error.
        let probe = format!("broken {}", crate::world::draw_hex(8));
        let caught = control_of(&probe, IpcTarget::SysvMsg, Some("echo refused"))
            .expect_err("a client that never tries");
        assert!(
            matches!(&caught, StepError::Harness(m) if m.contains("the host saw nothing")),
            "{caught:?}"
        );
    }

    /// The variable that makes [`tmux_helper_process`] start a server (the helper of
    /// [`a_tmux_server_dies_with_the_test_process_killed_mid_case`]).
    const HELPER: &str = "CONFORMANCE_TMUX_HELPER_SOCKET";

    /// Not a test of its own: the process the test below starts and kills. It starts a server at
    /// the socket it is given, prints the server's pid, and waits to be killed.
    #[test]
    #[ignore = "the helper process of a_tmux_server_dies_with_the_test_process_killed_mid_case"]
    fn tmux_helper_process() {
        let sock = std::env::var_os(HELPER).expect("run only by the tmux kill test");
        let server = Tmux::start(Path::new(&sock)).expect("tmux");
        println!("server-pid {}", server.server.id());
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn a_tmux_server_dies_with_the_test_process_killed_mid_case() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("default");
        let mut helper = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "steps::ipc::tests::tmux_helper_process",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(HELPER, &sock)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("helper");
        let stdout = helper.stdout.take().expect("stdout");
        let pid: i32 = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // (libtest prints the test's name on the same line first.)
            .find_map(|l| {
                l.split_once("server-pid ")
                    .and_then(|(_, p)| p.trim().parse().ok())
            })
            .expect("the helper started no tmux server");
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
                !s.lines()
                    .any(|l| l.starts_with("State:") && (l.contains('Z') || l.contains('X')))
            })
        };
        assert!(alive(pid), "the server is not running before the kill");
        // The test process dies mid-case: no Drop runs.
        helper.kill().expect("kill");
        helper.wait().expect("wait");
        let deadline = Instant::now() + Duration::from_secs(20);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let answers = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .arg("list-sessions")
            .env_remove("TMUX")
            .output()
            .expect("tmux");
        assert!(
            !alive(pid),
            "the tmux server (pid {pid}) outlived the killed test process"
        );
        assert!(
            !answers.status.success(),
            "a tmux server still answers at {}",
            sock.display()
        );
    }
}
