//! A JSON-RPC client of the `sandbox-agent` binary over its stdio, one JSON message a line, as an
//! editor speaks ACP: spawn, write a line, read lines until the answer. Notifications and the
//! agent's own requests that come on the way are handed to the caller (or skipped), never taken
//! for the answer.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::scratch_dir;

/// How long [`AgentProcess::answer`] waits for an answer before it fails the test (a hang guard).
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(180);

/// How long nothing must come before [`AgentProcess::answer`] calls its `idle` callback.
const IDLE: Duration = Duration::from_millis(10);

/// An agent's world under a fresh [`scratch_dir`], spelled as made (not canonicalized): a
/// workspace `ws` and, beside it (never around it), the `sessions` directory, which is not made
/// (the agent makes it, private).
pub struct AgentDirs {
    dir: TempDir,
    /// The sessions directory (`<dir>/sessions`), not made yet.
    pub sessions: PathBuf,
    /// The workspace (`<dir>/ws`), made.
    pub ws: PathBuf,
}

impl AgentDirs {
    /// A fresh world under [`scratch_dir`]`(prefix)`.
    pub fn new(prefix: &str) -> AgentDirs {
        let dir = scratch_dir(prefix);
        let sessions = dir.path().join("sessions");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).expect("ws");
        AgentDirs { dir, sessions, ws }
    }

    /// The scratch directory both live in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// `program --sessions <sessions> --workspace <ws>`: the agent binary serving `ws` with its state
/// in `sessions` (add the mode, the backend and the rest).
pub fn serving(program: impl AsRef<std::ffi::OsStr>, sessions: &Path, ws: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .arg("--sessions")
        .arg(sessions)
        .arg("--workspace")
        .arg(ws);
    command
}

/// A running agent process with its stdin and a thread reading its stdout; killed when dropped.
pub struct AgentProcess {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Value>,
    next: u64,
}

impl AgentProcess {
    /// Spawns `command` with stdin and stdout piped (stderr as `command` says); sends nothing.
    pub fn spawn(mut command: Command) -> AgentProcess {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the agent");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, incoming) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let message = serde_json::from_str(&line).expect("a JSON-RPC message");
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
        AgentProcess {
            child: Some(child),
            stdin: Some(stdin),
            incoming,
            next: 1,
        }
    }

    /// Spawns `command` and initializes the connection (request 1), checking the agent answers
    /// protocol version 1.
    pub fn start(command: Command) -> AgentProcess {
        let mut agent = AgentProcess::spawn(command);
        let init = agent.call("initialize", &json!({ "protocolVersion": 1 }));
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        agent
    }

    /// Writes one message as a line and flushes it.
    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends a request with the next id; returns the id.
    pub fn request<T: Serialize>(&mut self, method: &str, params: &T) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// Sends a notification (no id, no answer).
    pub fn notify<T: Serialize>(&mut self, method: &str, params: &T) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends a request and reads until its answer (what comes on the way is skipped).
    pub fn call<T: Serialize>(&mut self, method: &str, params: &T) -> Value {
        let id = self.request(method, params);
        self.answer(id, &mut |_| {}, &mut |_| {})
    }

    /// Reads until the answer to request `id` (a message without a method whose id is `id`) and
    /// returns it. Every other message on the way is handed to `other`; `idle` is called after
    /// each of them and whenever nothing came for a moment. Fails the test if the agent closes
    /// its stdout or no answer comes within [`ANSWER_DEADLINE`].
    pub fn answer(
        &mut self,
        id: u64,
        other: &mut dyn FnMut(&Value),
        idle: &mut dyn FnMut(&mut AgentProcess),
    ) -> Value {
        let deadline = Instant::now() + ANSWER_DEADLINE;
        loop {
            assert!(Instant::now() < deadline, "no answer to request {id}");
            let message = match self.incoming.recv_timeout(IDLE) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    idle(self);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => panic!("the agent closed stdout"),
            };
            if message.get("method").is_none() && message["id"] == json!(id) {
                return message;
            }
            other(&message);
            idle(self);
        }
    }

    /// The agent's process (to kill it mid-conversation, as a crash would).
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("the agent process")
    }

    /// Closes the agent's stdin (the editor hangs up) and waits for it to exit; returns its exit
    /// status and stderr (stdout was read as messages).
    pub fn finish(mut self) -> Output {
        drop(self.stdin.take());
        let child = self.child.take().expect("the agent process");
        child.wait_with_output().expect("wait for the agent")
    }

    /// Closes the agent's stdin, kills it and reaps it.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
