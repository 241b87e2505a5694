//! The `net` step: the harness listens outside the sandbox (a loopback TCP port, a loopback UDP
//! socket, a unix socket
//! bound to a path outside every writable root, an abstract unix socket), a payload confined with
//! the step's network knob tries to reach one of them, and the listeners' records decide: under
//! `reached: false` no listener may have seen any connection at all; under `reached: true` the
//! target must have received the payload's line.
//!
//! The payload writes nothing: the world it runs in must be unchanged afterwards.
//!
//! A failure names what the launch reported for the network class, so a backend that reaches a
//! listener while it reports the class `partial` or `not-governed` fails truthfully (an expected
//! failure can name that), and one that reaches it while claiming `full` fails as a liar.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use sandbox::{ClassEnforcement, Classification, EnforcementClass, ProviderPolicy};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
use crate::scenario::{NetStep, NetTarget, WorkspaceSpelling};
use crate::steps::StepError;
use crate::world::World;

use super::listen::{DRAIN_MOST, READ_TIMEOUT, Record, serve, serve_unix};

/// The call's timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the listeners keep listening after the call returned (a connection the payload
/// started just before it ended, or one a leftover process makes, still counts).
const GRACE: Duration = Duration::from_millis(200);

/// The default client of each target: sends `$MSG` and prints `connected` (or `sent`), or prints
/// `refused` with the reason. Under `reached: false` the payload must print `refused`, so one that
/// never tried cannot pass. TCP uses bash's own `/dev/tcp`; the unix sockets the steps' one
/// client (`unix_client`, on `$SOCK`).
fn default_client(target: NetTarget) -> &'static str {
    match target {
        NetTarget::Tcp => {
            "if printf '%s\\n' \"$MSG\" > \"/dev/tcp/127.0.0.1/$PORT\"; then echo connected; \
             else echo refused; fi"
        }
        NetTarget::Udp => {
            "if printf '%s\\n' \"$MSG\" > \"/dev/udp/127.0.0.1/$UDP_PORT\"; then echo sent; \
             else echo refused; fi"
        }
        NetTarget::Unix => super::unix_client::NAMED,
        NetTarget::Abstract => super::unix_client::ABSTRACT,
    }
}

/// One listener thread, accepting until told to stop.
struct Listening {
    target: NetTarget,
    record: Record,
    handle: JoinHandle<()>,
}

/// The three listeners of one step and where the payload finds them.
struct Listeners {
    stop: Arc<AtomicBool>,
    threads: Vec<Listening>,
    port: u16,
    udp_port: u16,
    unix_path: PathBuf,
    abstract_name: String,
    /// Holds the socket's directory (under `/var/tmp`, outside every writable root).
    _dir: tempfile::TempDir,
}

impl Listeners {
    fn start() -> Result<Listeners, StepError> {
        static N: AtomicU32 = AtomicU32::new(0);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();

        let tcp = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| StepError::Harness(format!("cannot listen on loopback TCP: {e}")))?;
        let port = tcp
            .local_addr()
            .map_err(|e| StepError::Harness(format!("cannot read the TCP port: {e}")))?
            .port();
        tcp.set_nonblocking(true).map_err(|e| {
            StepError::Harness(format!("cannot make the TCP listener non-blocking: {e}"))
        })?;
        let record = Record::default();
        threads.push(Listening {
            target: NetTarget::Tcp,
            record: record.clone(),
            handle: serve(
                move || tcp.accept().map(|(s, _)| s),
                |s: &std::net::TcpStream| {
                    s.set_nonblocking(false)?;
                    s.set_read_timeout(Some(READ_TIMEOUT))
                },
                stop.clone(),
                record,
            ),
        });

        let udp = std::net::UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| StepError::Harness(format!("cannot bind loopback UDP: {e}")))?;
        let udp_port = udp
            .local_addr()
            .map_err(|e| StepError::Harness(format!("cannot read the UDP port: {e}")))?
            .port();
        udp.set_read_timeout(Some(Duration::from_millis(5)))
            .map_err(|e| StepError::Harness(format!("cannot time the UDP socket: {e}")))?;
        let record = Record::default();
        threads.push(Listening {
            target: NetTarget::Udp,
            record: record.clone(),
            handle: {
                let (stop, record) = (stop.clone(), record);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    let keep = |bytes: &[u8]| {
                        record
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(bytes.to_vec());
                    };
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok((n, _)) = udp.recv_from(&mut buf) {
                            keep(&buf[..n]);
                        }
                    }
                    // The datagrams queued before the stop count too (a read times out at once
                    // on an empty queue).
                    for _ in 0..DRAIN_MOST {
                        match udp.recv_from(&mut buf) {
                            Ok((n, _)) => keep(&buf[..n]),
                            Err(_) => break,
                        }
                    }
                })
            },
        });

        let dir = tempfile::Builder::new()
            .prefix(&format!("app-{}-", crate::world::draw_hex(6)))
            .tempdir_in("/var/tmp")
            .map_err(|e| {
                StepError::Harness(format!(
                    "cannot make the socket directory under /var/tmp: {e}"
                ))
            })?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| StepError::Harness(format!("cannot open up the socket directory: {e}")))?;
        let unix_path = dir.path().join("listener.sock");
        let unix = UnixListener::bind(&unix_path)
            .map_err(|e| StepError::Harness(format!("cannot bind {}: {e}", unix_path.display())))?;
        // Only the network knob may stand between the payload and the socket, not its mode.
        std::fs::set_permissions(&unix_path, std::fs::Permissions::from_mode(0o777)).map_err(
            |e| StepError::Harness(format!("cannot open up {}: {e}", unix_path.display())),
        )?;
        // Drawn like every other name the backend sees: no fixed marker to key on.
        let abstract_name = format!(
            "session-{}-{}-{}-{}",
            crate::world::draw_hex(8),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            dir.path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        let addr = SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .map_err(|e| StepError::Harness(format!("cannot name the abstract socket: {e}")))?;
        let abstract_listener = UnixListener::bind_addr(&addr)
            .map_err(|e| StepError::Harness(format!("cannot bind the abstract socket: {e}")))?;
        for (target, listener) in [
            (NetTarget::Unix, unix),
            (NetTarget::Abstract, abstract_listener),
        ] {
            let record = Record::default();
            let handle = serve_unix(listener, stop.clone(), record.clone()).map_err(|e| {
                StepError::Harness(format!("cannot make the unix listener non-blocking: {e}"))
            })?;
            threads.push(Listening {
                target,
                record,
                handle,
            });
        }
        Ok(Listeners {
            stop,
            threads,
            port,
            udp_port,
            unix_path,
            abstract_name,
            _dir: dir,
        })
    }

    /// Stops every listener and returns what each recorded.
    fn finish(self) -> Vec<(NetTarget, Vec<Vec<u8>>)> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|l| {
                let _ = l.handle.join();
                let record = l.record.lock().unwrap_or_else(|p| p.into_inner()).clone();
                (l.target, record)
            })
            .collect()
    }
}

fn name(target: NetTarget) -> &'static str {
    match target {
        NetTarget::Tcp => "tcp",
        NetTarget::Udp => "udp",
        NetTarget::Unix => "unix",
        NetTarget::Abstract => "abstract",
    }
}

/// The control of `target`'s default client ([`super::control`]): run on the host against
/// listeners of its own, it must deliver its line.
fn control(target: NetTarget) -> Result<(), StepError> {
    let probe = format!("network {} client", name(target));
    control_of(&probe, target, default_client(target))
}

/// The control named `probe` of `client` on `target`: unconfined, `client` must deliver `$MSG` to
/// the target's listener.
fn control_of(probe: &str, target: NetTarget, client: &str) -> Result<(), StepError> {
    super::control::once(probe, || {
        let listeners = Listeners::start().map_err(|e| e.to_string())?;
        let msg = format!("control-{}", crate::world::draw_hex(12));
        let sock = match target {
            NetTarget::Abstract => listeners.abstract_name.clone().into(),
            _ => listeners.unix_path.clone().into_os_string(),
        };
        let vars = [
            ("PORT", listeners.port.to_string().into()),
            ("UDP_PORT", listeners.udp_port.to_string().into()),
            ("SOCK", sock),
            ("MSG", msg.clone().into()),
        ];
        let said = super::control::run_unconfined(client, &vars);
        // The client has ended: what it sent is queued or read (finish takes the queue too).
        let records = listeners.finish();
        let said = said?;
        let want = format!("{msg}\n");
        let reached = records
            .iter()
            .any(|(t, r)| *t == target && r.iter().any(|b| *b == want.as_bytes()));
        if reached {
            Ok(())
        } else {
            Err(format!(
                "the {} listener did not get its line; it said {said:?}",
                name(target)
            ))
        }
    })
}

pub(super) fn run(backend: &Backend, step: &NetStep) -> Result<(), StepError> {
    // A scenario's own client proves itself in its enabled half (NW-002 to NW-004); the default
    // clients here, whose unix targets are refused in every mode (no half reaches them).
    if step.run.is_none() {
        control(step.target)?;
    }
    let provider = super::confining(backend)?;
    // The payload is only ever pointed at its workspace: a small world is enough to see it
    // write nothing.
    let world = World::small().map_err(super::world_error)?;
    let workspace = world.workspace(WorkspaceSpelling::Ws);
    let before = world.snapshot();
    let listeners = Listeners::start()?;
    let msg = format!("hello-{}", crate::world::draw_hex(12));
    // The first line proves the payload ran; its word is drawn, like every name of a request.
    let started = format!(
        "{}-{}",
        crate::world::draw_one(&["starting", "begin", "connecting", "probe"]),
        crate::world::draw_hex(6)
    );
    let script = format!(
        "echo {started}\n{}\n",
        step.run
            .as_deref()
            .unwrap_or_else(|| default_client(step.target))
    );
    let dressed = crate::request::dress(
        &script,
        vec![
            ("PORT", listeners.port.to_string().into()),
            ("UDP_PORT", listeners.udp_port.to_string().into()),
            ("UNIX_PATH", listeners.unix_path.clone().into_os_string()),
            ("ABSTRACT_NAME", listeners.abstract_name.clone().into()),
            // The shared unix client's address, the one of the step's target.
            (
                "SOCK",
                match step.target {
                    NetTarget::Abstract => listeners.abstract_name.clone().into(),
                    _ => listeners.unix_path.clone().into_os_string(),
                },
            ),
            ("MSG", msg.clone().into()),
        ],
    );
    let argv = dressed.argv;
    let policy = ProviderPolicy::new(step.mode, workspace.clone())
        .with_roots(|r| r.with_temp_dir(None))
        .with_network(step.network);
    let confined = provider.confine(&argv, &policy).map_err(|e| {
        StepError::Unmet(format!(
            "confine refused under network {}: {e} (the knob must not make the backend unavailable)",
            step.network
        ))
    })?;
    let report = confined.class_report(EnforcementClass::Network);
    let reported = super::reported(&report, "network");
    let mut options = LaunchOptions::in_dir(&workspace);
    options.env = dressed.env;
    options.env_remove.push("TMPDIR".into());
    options.timeout = Some(CALL_TIMEOUT);
    crate::survivors::tag_launch(&mut options);
    let done = launch::run(&confined, &options);
    std::thread::sleep(GRACE);
    let records = listeners.finish();
    if let Classification::RunnerFailure { detail, .. } = &done.classification {
        return Err(StepError::Unmet(format!(
            "the runner failed under network {}: {detail}",
            step.network
        )));
    }
    let (stdout, stderr) = super::probe_ran(&done, &started, &world, &before)?;
    let seen = |t: NetTarget| {
        records
            .iter()
            .find(|(target, _)| *target == t)
            .map(|(_, r)| r.clone())
            .unwrap_or_default()
    };
    let summary = records
        .iter()
        .filter(|(_, r)| !r.is_empty())
        .map(|(t, r)| {
            let bytes: Vec<String> = r
                .iter()
                .map(|b| format!("{:?}", String::from_utf8_lossy(b)))
                .collect();
            format!("{} <- {}", name(*t), bytes.join(" "))
        })
        .collect::<Vec<_>>();
    if step.expect.reached {
        let want = format!("{msg}\n");
        if seen(step.target).iter().any(|b| *b == want.as_bytes()) {
            return Ok(());
        }
        return Err(StepError::Unmet(format!(
            "the {} listener recorded nothing from the payload under network {} ({reported}); \
             the payload said {:?}, stderr {:?}",
            name(step.target),
            step.network,
            stdout.trim(),
            stderr.trim()
        )));
    }
    if summary.is_empty() {
        // A payload that never tried (a typo, a missing tool) must not pass for a refusal. A UDP
        // datagram is not refused by its sender even where it can reach nothing (no connection,
        // no answer), so for UDP having sent it is the attempt.
        let tried = stdout.contains("refused")
            || (step.target == NetTarget::Udp && stdout.lines().any(|l| l == "sent"));
        if !tried {
            return Err(StepError::Unmet(format!(
                "no listener was reached, but the payload did not report a refused attempt \
                 (stdout {stdout:?}, stderr {stderr:?})"
            )));
        }
        return Ok(());
    }
    let liar = if report.enforcement == ClassEnforcement::Full {
        "; it claims full"
    } else {
        ""
    };
    // The gaps it went through, as a backend that leaves them open names them.
    let routes: Vec<&str> = records
        .iter()
        .filter(|(_, r)| !r.is_empty())
        .map(|(t, _)| match t {
            NetTarget::Tcp => sandbox::gaps::TCP,
            NetTarget::Udp => sandbox::gaps::UDP,
            NetTarget::Unix => sandbox::gaps::NAMED_UNIX_SOCKETS,
            NetTarget::Abstract => sandbox::gaps::ABSTRACT_UNIX_SOCKETS,
        })
        .collect();
    Err(StepError::Unmet(format!(
        "a listener outside the sandbox recorded a connection under network {}: {}; the launch \
         {reported}{liar} {}{})",
        step.network,
        summary.join("; "),
        crate::expectations::THROUGH_GAP,
        routes.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_default_client_reaches_its_listener_unconfined_and_a_client_that_cannot_is_caught() {
        for target in [
            NetTarget::Tcp,
            NetTarget::Udp,
            NetTarget::Unix,
            NetTarget::Abstract,
        ] {
            let probe = format!("test {} {}", name(target), crate::world::draw_hex(8));
            control_of(&probe, target, default_client(target))
                .unwrap_or_else(|e| panic!("{}: {e}", name(target)));
            // A client that never tries (a shell without /dev/tcp, a broken address) says
            // "refused" in any sandbox: its control is the harness's error.
            let broken = format!("broken {} {}", name(target), crate::world::draw_hex(8));
            let caught =
                control_of(&broken, target, "echo refused").expect_err("a client that never tries");
            assert!(
                matches!(&caught, StepError::Harness(m) if m.contains("did not get its line")),
                "{caught:?}"
            );
        }
    }
}
