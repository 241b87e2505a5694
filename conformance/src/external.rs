//! An external backend: a process speaking the JSON-lines protocol, used as a
//! [`SandboxProvider`]. A crash, a closed pipe, a malformed answer or a late answer is recorded as
//! a protocol failure; every case from then on is an error, never a pass.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandbox::{
    ConfinedArgv, ProviderPolicy, SANDBOX_UNAVAILABLE, SandboxEnforcement, SandboxProvider,
    SandboxUnavailable,
};

use crate::protocol::{
    Differences, ErrorCode, Implementation, PROTOCOL_VERSION, Request, Response,
    SUPPORTED_VERSIONS, WirePolicy,
};
use crate::scenario::Capability;

/// Why the conversation with a backend broke down.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolFailure {
    /// It crashed, closed its pipe, or answered something that is not the protocol.
    #[error("protocol error: {0}")]
    Error(String),
    /// It did not answer in time.
    #[error("protocol timeout: {0}")]
    Timeout(String),
}

/// What a backend sent that cannot be used as it is (a dialect, declared differences): the
/// reason, carried into a [`ProtocolFailure::Error`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct Unusable(String);

/// Why a `confined` answer cannot be used as it is: every rule and signature a backend sends is
/// validated like an operator's, since a signature that matches every line (`""`) would turn
/// every result into a runner failure or a denial.
fn check_dialect(
    denial_signatures: &[String],
    runner_failure_rules: &[sandbox::RunnerFailureRule],
    status_channel: Option<&sandbox::StatusChannel>,
) -> Result<(), Unusable> {
    for (i, sig) in denial_signatures.iter().enumerate() {
        if sig.trim().is_empty() || sig.contains(['\n', '\r']) {
            return Err(Unusable(format!(
                "denial signature #{i} {sig:?} is empty or spans lines: it would match every line"
            )));
        }
    }
    for (i, rule) in runner_failure_rules.iter().enumerate() {
        rule.validate()
            .map_err(|e| Unusable(format!("runner-failure rule #{i} is invalid: {e}")))?;
    }
    if let Some(channel) = status_channel.filter(|c| c.fd <= 2) {
        return Err(Unusable(format!(
            "status channel fd {} would replace stdin, stdout or stderr",
            channel.fd
        )));
    }
    Ok(())
}

struct Conn {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

/// A running external backend.
pub struct External {
    /// Who it says it is.
    pub implementation: Implementation,
    /// What it says it can do here.
    pub capabilities: Vec<Capability>,
    /// The enforcement it says it achieves here.
    pub enforcement: SandboxEnforcement,
    /// The protocol version the handshake settled on.
    pub protocol: u32,
    /// Where it says its writable set differs from the reference one (version 2 on).
    pub differences: Differences,
    conn: Arc<Mutex<Conn>>,
    failure: Mutex<Option<ProtocolFailure>>,
    /// Calls whose answer asked to be settled, by the workspace root their policy spelled (the
    /// harness takes the guard right after confining, before the launch).
    to_settle: Mutex<Vec<(std::path::PathBuf, u64)>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    timeout: Duration,
}

/// The least time an external backend is given to start and answer the handshake, whatever
/// `--protocol-timeout` says (that bounds each later request).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

impl External {
    /// Starts `command` and performs the handshake (allowed at least [`START_TIMEOUT`]).
    pub fn start(command: &[OsString], timeout: Duration) -> Result<External, ProtocolFailure> {
        let Some(program) = command.first() else {
            return Err(ProtocolFailure::Error("no backend command given".into()));
        };
        let mut child = Command::new(program)
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ProtocolFailure::Error(format!("cannot start {program:?}: {e}")))?;
        let (tx, lines) = channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut s) = sink.lock() {
                        s.extend_from_slice(&buf[..n]);
                    }
                }
            });
        }
        let stdin = child.stdin.take();
        let mut conn = Conn {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        // Offer the newest version; a backend that refuses it with PROTOCOL_VERSION (a strict
        // version 1 backend) is offered version 1 on the same connection.
        // The handshake also waits for the backend's start (an interpreter, its imports), which
        // a loaded machine can stretch past a request's timeout: it gets the longer of the two.
        let start_timeout = timeout.max(START_TIMEOUT);
        let mut answer = exchange(&mut conn, &hello(PROTOCOL_VERSION), start_timeout, &stderr)?;
        if matches!(&answer, Response::Error { code, .. }
            if ErrorCode::of(code) == Some(ErrorCode::ProtocolVersion))
        {
            answer = exchange(&mut conn, &hello(1), start_timeout, &stderr)?;
        }
        let (implementation, capabilities, enforcement, protocol, differences) = match answer {
            Response::Hello {
                protocol,
                implementation,
                capabilities,
                enforcement,
                differences,
            } => {
                if !SUPPORTED_VERSIONS.contains(&protocol) {
                    return Err(ProtocolFailure::Error(format!(
                        "the backend speaks protocol {protocol}, the harness {SUPPORTED_VERSIONS:?}"
                    )));
                }
                if protocol < 2 && !differences.is_empty() {
                    return Err(ProtocolFailure::Error(
                        "declared differences need protocol 2; the backend answered 1".into(),
                    ));
                }
                check_differences(&differences)
                    .map_err(|e| ProtocolFailure::Error(e.to_string()))?;
                let capabilities = capabilities.into_iter().map(Capability::from).collect();
                (
                    implementation,
                    capabilities,
                    enforcement,
                    protocol,
                    differences,
                )
            }
            Response::Error { code, message } => {
                return Err(ProtocolFailure::Error(format!(
                    "handshake refused: {code}: {message}"
                )));
            }
            other => {
                return Err(ProtocolFailure::Error(format!(
                    "expected a hello answer, got {other:?}"
                )));
            }
        };
        Ok(External {
            implementation,
            capabilities,
            enforcement,
            protocol,
            differences,
            conn: Arc::new(Mutex::new(conn)),
            failure: Mutex::new(None),
            to_settle: Mutex::new(Vec::new()),
            stderr,
            timeout,
        })
    }

    /// The protocol failure that ended the conversation, if any.
    pub fn failure(&self) -> Option<ProtocolFailure> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }

    /// Sends `shutdown` and waits briefly for the backend to exit; kills it otherwise.
    pub fn shutdown(&self) {
        let Ok(mut conn) = self.conn.lock() else {
            return;
        };
        if let Some(mut stdin) = conn.stdin.take()
            && let Ok(line) = serde_json::to_string(&Request::Shutdown)
        {
            let _ = writeln!(stdin, "{line}");
        }
        for _ in 0..50 {
            if matches!(conn.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = conn.child.kill();
        let _ = conn.child.wait();
    }
}

/// The handshake offering `protocol`.
fn hello(protocol: u32) -> Request {
    Request::Hello {
        protocol,
        supported: if protocol >= 2 {
            SUPPORTED_VERSIONS.to_vec()
        } else {
            Vec::new()
        },
        suite: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// Why declared differences cannot be verified as they are: an extra writable path must be
/// absolute and a protected one relative, inside the workspace; a state directory a plain path
/// strictly below a shared place (never the place itself, which would excuse everything).
fn check_differences(differences: &Differences) -> Result<(), Unusable> {
    use std::path::Component;
    for state in &differences.state {
        let plain = state.path.is_absolute()
            && state
                .path
                .components()
                .skip(1)
                .all(|c| matches!(c, Component::Normal(_)));
        let below = crate::leftovers::RUN_PLACES.iter().any(|place| {
            state.path.starts_with(place) && state.path != std::path::Path::new(place)
        });
        if !plain || !below {
            return Err(Unusable(format!(
                "declared state directory {:?} is not a plain absolute path strictly below one of \
                 the shared places {}",
                state.path,
                crate::leftovers::RUN_PLACES.join(", ")
            )));
        }
    }
    for extra in &differences.extra_writable {
        if !extra.path.is_absolute() {
            return Err(Unusable(format!(
                "declared extra writable path {} is not absolute",
                extra.path.display()
            )));
        }
    }
    for protected in &differences.protected {
        let inside = !protected.path.as_os_str().is_empty()
            && protected
                .path
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !inside {
            return Err(Unusable(format!(
                "declared protected path {:?} is not a plain path inside the workspace",
                protected.path
            )));
        }
    }
    Ok(())
}

/// Sends one request and reads one answer.
fn exchange(
    conn: &mut Conn,
    request: &Request,
    timeout: Duration,
    stderr: &Mutex<Vec<u8>>,
) -> Result<Response, ProtocolFailure> {
    let tail = || {
        let s = stderr.lock().map(|s| s.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&s);
        let last: Vec<&str> = text.lines().rev().take(3).collect();
        if last.is_empty() {
            String::new()
        } else {
            format!(
                " (backend stderr: {})",
                last.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )
        }
    };
    let line = serde_json::to_string(request).map_err(|e| ProtocolFailure::Error(e.to_string()))?;
    let stdin = conn
        .stdin
        .as_mut()
        .ok_or_else(|| ProtocolFailure::Error("the backend's stdin is closed".into()))?;
    writeln!(stdin, "{line}")
        .and_then(|()| stdin.flush())
        .map_err(|e| {
            ProtocolFailure::Error(format!("cannot write to the backend: {e}{}", tail()))
        })?;
    let answer = match conn.lines.recv_timeout(timeout) {
        Ok(answer) => answer,
        Err(RecvTimeoutError::Timeout) => {
            return Err(ProtocolFailure::Timeout(format!(
                "no answer within {timeout:?}{}",
                tail()
            )));
        }
        Err(RecvTimeoutError::Disconnected) => {
            let status = conn.child.try_wait().ok().flatten();
            return Err(ProtocolFailure::Error(format!(
                "the backend closed its stdout{}{}",
                status
                    .map(|s| format!(" and exited ({s})"))
                    .unwrap_or_default(),
                tail()
            )));
        }
    };
    serde_json::from_str(&answer)
        .map_err(|e| ProtocolFailure::Error(format!("malformed answer {answer:?}: {e}{}", tail())))
}

/// How many requests back a confined call may still be waiting to be settled.
const PENDING_WINDOW: u64 = 256;

/// A backend's check after one call, settled over the protocol (`settle`, `settled`).
struct Settle {
    conn: Arc<Mutex<Conn>>,
    id: u64,
    timeout: Duration,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl sandbox::CallGuard for Settle {
    fn settle(self: Box<Self>) -> Vec<String> {
        let Ok(mut conn) = self.conn.lock() else {
            return vec![format!("settle #{}: connection lock poisoned", self.id)];
        };
        match exchange(
            &mut conn,
            &Request::Settle { id: self.id },
            self.timeout,
            &self.stderr,
        ) {
            Ok(Response::Settled { id, reverted }) if id == self.id => reverted,
            // The backend could not say what it reverted: the harness reads that as a denial
            // it cannot trust, and the world diff decides.
            Ok(other) => vec![format!(
                "unexpected answer to settle #{}: {other:?}",
                self.id
            )],
            Err(e) => vec![format!("settle #{}: {e}", self.id)],
        }
    }
}

impl SandboxProvider for External {
    fn temp_area_at_tmp(&self, policy: &ProviderPolicy) -> bool {
        !policy.roots.temp_area.is_shared()
            && self.differences.temp_area == Some(crate::protocol::TempAreaView::AtTmp)
    }

    fn call_guard(&self, policy: &ProviderPolicy) -> Option<Box<dyn sandbox::CallGuard>> {
        let mut pending = self.to_settle.lock().ok()?;
        let at = pending
            .iter()
            .rposition(|(root, _)| *root == policy.roots.workspace_root)?;
        let (_, id) = pending.remove(at);
        // Calls confined for the metamorphic twin are never launched: keep only the recent ones
        // (cases run in parallel, so an older entry may still be some case's own).
        let keep = id.saturating_sub(PENDING_WINDOW);
        pending.retain(|(_, other)| *other > keep);
        Some(Box::new(Settle {
            conn: Arc::clone(&self.conn),
            id,
            timeout: self.timeout,
            stderr: Arc::clone(&self.stderr),
        }))
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &ProviderPolicy,
    ) -> Result<ConfinedArgv, SandboxUnavailable> {
        let broken = |failure: &ProtocolFailure| SandboxUnavailable {
            mode: policy.mode,
            backend: Some(self.implementation.name.clone()),
            detail: failure.to_string(),
        };
        if let Some(f) = self.failure() {
            return Err(broken(&f));
        }
        let mut record = |failure: ProtocolFailure| {
            let err = broken(&failure);
            if let Ok(mut slot) = self.failure.lock() {
                slot.get_or_insert(failure);
            }
            err
        };
        let Ok(mut conn) = self.conn.lock() else {
            return Err(record(ProtocolFailure::Error(
                "connection lock poisoned".into(),
            )));
        };
        let id = conn.next_id;
        conn.next_id += 1;
        let request = Request::Confine {
            id,
            argv: argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: if self.protocol >= 2 {
                Some(
                    policy
                        .cwd
                        .clone()
                        .unwrap_or_else(|| policy.roots.workspace_root.clone()),
                )
            } else {
                None
            },
            policy: WirePolicy {
                mode: policy.mode,
                workspace_root: policy.roots.workspace_root.clone(),
                temp_dir: policy.roots.temp_dir.clone(),
                network: policy.network,
                writable_roots: policy
                    .roots
                    .extra_roots
                    .iter()
                    .map(|r| r.path.clone())
                    .collect(),
                allow_unix_sockets: policy.roots.allow_unix_sockets.clone(),
                // Only to a backend that said it takes one.
                temp_area: match &policy.roots.temp_area {
                    sandbox::TempArea::Private(area) if self.differences.temp_area.is_some() => {
                        Some(area.clone())
                    }
                    _ => None,
                },
                // Always explicit, so a backend is certified for what the case asks, never for
                // its own default.
                protected_paths: (policy.mode == sandbox::ConfinedMode::WorkspaceWrite).then(
                    || {
                        policy
                            .roots
                            .protected_paths
                            .iter()
                            .cloned()
                            .map(String::from)
                            .collect()
                    },
                ),
            },
        };
        let answer = exchange(&mut conn, &request, self.timeout, &self.stderr);
        drop(conn);
        match answer.map_err(&mut record)? {
            Response::Confined {
                id: got,
                argv,
                enforcement,
                classes,
                denial_signatures,
                runner_failure_rules,
                status_channel,
                settle,
            } if got == id => {
                if argv.is_empty() {
                    return Err(record(ProtocolFailure::Error(
                        "confined answer with an empty argv".into(),
                    )));
                }
                if let Err(why) = check_dialect(
                    &denial_signatures,
                    &runner_failure_rules,
                    status_channel.as_ref(),
                ) {
                    return Err(record(ProtocolFailure::Error(format!(
                        "confined answer #{id}: {why}"
                    ))));
                }
                if settle && let Ok(mut pending) = self.to_settle.lock() {
                    pending.push((policy.roots.workspace_root.clone(), id));
                }
                Ok(ConfinedArgv {
                    argv: argv.into_iter().map(OsString::from).collect(),
                    backend: self.implementation.name.clone(),
                    enforcement,
                    classes: classes
                        .unwrap_or_else(|| sandbox::ClassEnforcements::from_overall(enforcement)),
                    denial_signatures,
                    runner_failure_rules,
                    status_channel,
                    fds: Default::default(),
                })
            }
            Response::Unavailable {
                id: got,
                code,
                detail,
            } if got == id && code == SANDBOX_UNAVAILABLE => Err(SandboxUnavailable {
                mode: policy.mode,
                backend: Some(self.implementation.name.clone()),
                detail,
            }),
            other => Err(record(ProtocolFailure::Error(format!(
                "unexpected answer to confine #{id}: {other:?}"
            )))),
        }
    }
}

impl Drop for External {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::StateDir;

    fn with_state(path: &str) -> Differences {
        Differences {
            state: vec![StateDir {
                path: path.into(),
                reason: None,
            }],
            ..Differences::default()
        }
    }

    #[test]
    fn a_state_directory_must_lie_strictly_below_a_shared_place() {
        for good in ["/tmp/tool-daemon-0", "/dev/shm/tool/cache", "/var/tmp/tool"] {
            assert!(check_differences(&with_state(good)).is_ok(), "{good}");
        }
        // The place itself would excuse everything; elsewhere is no shared place; `..` and a
        // relative path name another directory than they seem to.
        for bad in [
            "/tmp",
            "/tmp/",
            "/etc/tool",
            "/tmp/../etc",
            "tmp/tool",
            "/tmpx/tool",
        ] {
            let Err(Unusable(why)) = check_differences(&with_state(bad)) else {
                panic!("{bad} was accepted");
            };
            assert!(why.contains("strictly below"), "{why}");
        }
    }
}
