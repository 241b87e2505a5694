//! The `wire` step over stdio: the built `sandbox-agent` binary driven as an editor drives it,
//! newline-delimited JSON-RPC on its stdin/stdout. A prompt can be sent without waiting for its
//! answer (`start`), so a switch made while it runs is a real concurrent request, answered (and
//! timed) while the turn goes on; `wait` collects the prompt's answer and the codes of its tool
//! calls from the `tool_call_update` cards; `crash` is a SIGKILL.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::backends::{Backend, Kind};
use crate::scenario::WireConfig;
use crate::steps::StepError;

/// How long any answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// One running agent process.
pub(crate) struct StdioAgent {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next: u64,
    answers: Vec<Value>,
    updates: Vec<Value>,
    /// The prompt sent by `start`: its request id and where its updates begin.
    running: Option<(u64, usize)>,
}

/// What one exchange observed.
#[derive(Default)]
pub(crate) struct Exchange {
    /// The `result` of the answer, if it succeeded.
    pub result: Option<Value>,
    /// The stable code of the error answer (`data.code`), or its JSON-RPC code.
    pub error: Option<String>,
    /// How long the answer took.
    pub took: Duration,
    /// For an answer to a request sent while a prompt was running: whether it arrived before
    /// that prompt's own answer (the turn was still open), told by the order the agent wrote
    /// them in, not by a clock.
    pub during_turn: Option<bool>,
    /// For a prompt: the codes of its tool calls, in order.
    pub codes: Vec<String>,
}

impl Exchange {
    /// The expectations on when the answer came: within a time (a hang guard) and during the
    /// running turn or after it (by the order of the agent's messages).
    pub(crate) fn check_answer_time(
        &self,
        action: &impl std::fmt::Display,
        expect: &crate::scenario::WireExpect,
    ) -> Result<(), StepError> {
        if let Some(within) = expect.answered_within_ms
            && self.took > Duration::from_millis(within)
        {
            return Err(StepError::Unmet(format!(
                "{action} was answered after {:?}, not within {within} ms",
                self.took
            )));
        }
        let words = |during: Option<bool>| match during {
            Some(true) => "during the running turn",
            Some(false) => "after the running turn ended",
            None => "with no turn running",
        };
        match expect.answered_during_turn {
            Some(want) if self.during_turn != Some(want) => Err(StepError::Unmet(format!(
                "{action} was answered {} (after {:?}), expected {}",
                words(self.during_turn),
                self.took,
                words(Some(want))
            ))),
            _ => Ok(()),
        }
    }
}

impl StdioAgent {
    /// Starts the agent with `config`'s defaults, its sessions in `sessions`, and initializes it.
    /// A reference local backend under test is the agent's only backend (`--backend`,
    /// `--abi-cap`); any other (the policy bridge) leaves it the platform chain. Its environment
    /// carries the case's tag, which every process of its calls inherits.
    pub(crate) fn start(
        sessions: &Path,
        workspace: &Path,
        config: &WireConfig,
        backend: &Backend,
    ) -> Result<StdioAgent, StepError> {
        let binary = sandbox_local::probe::locate_sibling("sandbox-agent", "sandbox-agent")
            .map_err(StepError::harness)?;
        let mut command = Command::new(binary);
        command
            .arg("--sessions")
            .arg(sessions)
            .arg("--workspace")
            .arg(workspace)
            .args([
                "--mode",
                config
                    .mode
                    .unwrap_or(sandbox::SandboxMode::ReadOnly)
                    .as_str(),
            ])
            .args([
                "--approval",
                match config.approval {
                    Some(sandbox_policy::ApprovalPolicy::Never) => "never",
                    _ => "ask",
                },
            ])
            .current_dir(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match &backend.kind {
            Kind::Local { config: local, .. } => {
                if let [only] = local.chain.as_slice() {
                    command.args(["--backend", only.name()]);
                }
                if let Some(cap) = local.landlock_abi_cap {
                    command.args(["--abi-cap", &cap.to_string()]);
                }
            }
            Kind::Policy => {}
            _ => {
                return Err(StepError::Unmet(format!(
                    "the agent process confines with a reference local backend or the platform \
                     chain, not with {} (name it in the scenario's backends)",
                    backend.name
                )));
            }
        }
        command.env(crate::survivors::TAG_VAR, crate::survivors::case_tag());
        if let Some(network) = config.network {
            command.args(["--network", network.as_str()]);
        }
        if config.approval_service == Some(false) {
            command.arg("--no-approval-service");
        }
        if config.confining == Some(false) {
            command.arg("--unconfined-shell");
        }
        let mut child = command
            .spawn()
            .map_err(|e| StepError::Harness(format!("cannot start sandbox-agent: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| StepError::harness("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| StepError::harness("no stdout"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| StepError::harness("no stderr"))?;
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let said_in = std::sync::Arc::clone(&said);
        let stderr_reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut s) = said_in.lock() {
                    s.push_str(&line);
                    s.push('\n');
                }
            }
        });
        let (tx, incoming) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(message) = serde_json::from_str::<Value>(&line)
                    && tx.send(message).is_err()
                {
                    break;
                }
            }
        });
        let mut agent = StdioAgent {
            child,
            stdin,
            incoming,
            next: 1,
            answers: Vec::new(),
            updates: Vec::new(),
            running: None,
        };
        let init = agent.call("initialize", json!({ "protocolVersion": 1 }));
        match init {
            Ok(Exchange {
                result: Some(_), ..
            }) => Ok(agent),
            other => {
                // The agent may have refused to start before reading anything: its words are on
                // stderr, complete once it exited.
                let _ = agent.child.wait();
                let _ = stderr_reader.join();
                let said = said.lock().map(|s| s.clone()).unwrap_or_default();
                Err(StepError::Unmet(format!(
                    "initialize failed ({:?}); the agent said: {said}",
                    other.map(|x| x.error)
                )))
            }
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), StepError> {
        writeln!(self.stdin, "{message}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| StepError::Harness(format!("the agent's stdin: {e}")))
    }

    /// Takes one incoming message and keeps it ([`StdioAgent::keep`]).
    fn pump(&mut self, deadline: Instant) -> Result<(), StepError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = match self.incoming.recv_timeout(left) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                return Err(StepError::unmet("the agent did not answer in time"));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(StepError::unmet("the agent closed stdout"));
            }
        };
        self.keep(message)
    }

    /// Keeps one incoming message: answers the agent's own requests (a permission request is
    /// rejected: these scenarios never escalate), keeps updates and answers.
    fn keep(&mut self, message: Value) -> Result<(), StepError> {
        match (message.get("method"), message.get("id")) {
            (Some(_), Some(id)) => {
                let answer = json!({ "jsonrpc": "2.0", "id": id,
                    "result": { "outcome": { "outcome": "selected", "optionId": "reject-once" } } });
                self.send(&answer)?;
            }
            (Some(_), None) => self.updates.push(message["params"]["update"].clone()),
            (None, _) => self.answers.push(message),
        }
        Ok(())
    }

    fn wait_answer(&mut self, id: u64, sent: Instant) -> Result<Exchange, StepError> {
        let deadline = sent + ANSWER_TIMEOUT;
        loop {
            if let Some(i) = self.answers.iter().position(|a| a["id"] == json!(id)) {
                // The running prompt's answer, when it came first, sits before this one.
                let during_turn = self
                    .running
                    .map(|(prompt, _)| !self.answers[..i].iter().any(|a| a["id"] == json!(prompt)));
                let answer = self.answers.remove(i);
                let error = answer.get("error").map(|e| {
                    e["data"]["code"]
                        .as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| e["code"].to_string())
                });
                return Ok(Exchange {
                    result: answer.get("result").cloned(),
                    error,
                    took: sent.elapsed(),
                    during_turn: during_turn.filter(|_| Some(id) != self.running.map(|r| r.0)),
                    codes: Vec::new(),
                });
            }
            self.pump(deadline)?;
        }
    }

    /// Sends a request and waits for its answer (updates meanwhile are kept).
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Result<Exchange, StepError> {
        let id = self.next;
        self.next += 1;
        let sent = Instant::now();
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        self.wait_answer(id, sent)
    }

    /// Sends a prompt without waiting for its answer.
    pub(crate) fn start_prompt(&mut self, session: &str, text: &str) -> Result<(), StepError> {
        if self.running.is_some() {
            return Err(StepError::unmet("a prompt is already running (wait first)"));
        }
        let id = self.next;
        self.next += 1;
        self.running = Some((id, self.updates.len()));
        self.send(
            &json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": { "sessionId": session, "prompt": [{ "type": "text", "text": text }] } }),
        )
    }

    /// Waits until the running prompt's first tool call is in progress.
    pub(crate) fn wait_until_running(&mut self) -> Result<(), StepError> {
        let Some((_, from)) = self.running else {
            return Err(StepError::unmet("no prompt is running"));
        };
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        while !self.updates[from..]
            .iter()
            .any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "in_progress")
        {
            self.pump(deadline)?;
        }
        Ok(())
    }

    /// Waits until `path` exists (the running call set itself up), bounded by `limit`. A prompt
    /// that ends first fails at once with its calls' codes (a call that never ran, such as a
    /// `SANDBOX_UNAVAILABLE`, never makes its ready file), not at the case's timeout.
    pub(crate) fn wait_ready(&mut self, path: &Path, limit: Duration) -> Result<(), StepError> {
        let Some((id, from)) = self.running else {
            return Err(StepError::unmet("no prompt is running"));
        };
        let deadline = Instant::now() + limit;
        while std::fs::symlink_metadata(path).is_err() {
            if self.answers.iter().any(|a| a["id"] == json!(id)) {
                let said: Vec<String> = self.updates[from..]
                    .iter()
                    .filter(|u| u["sessionUpdate"] == "tool_call_update")
                    .filter_map(|u| {
                        u["rawOutput"]["text"]
                            .as_str()
                            .or(u["rawOutput"]["code"].as_str())
                    })
                    .map(str::to_owned)
                    .collect();
                return Err(StepError::Unmet(format!(
                    "the prompt ended before its call created {} (its ready file): {}",
                    path.display(),
                    said.join("; ")
                )));
            }
            if Instant::now() >= deadline {
                return Err(StepError::Unmet(format!(
                    "the running call never created {} (its ready file) within {limit:?}",
                    path.display()
                )));
            }
            // The agent's messages are the events here; the file is looked at again after
            // each one, and at least every 10 ms.
            match self.incoming.recv_timeout(Duration::from_millis(10)) {
                Ok(message) => self.keep(message)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(StepError::unmet("the agent closed stdout"));
                }
            }
        }
        Ok(())
    }

    /// Waits for the running prompt's answer; its tool calls' codes come with it.
    pub(crate) fn wait_prompt(&mut self) -> Result<Exchange, StepError> {
        let Some((id, from)) = self.running.take() else {
            return Err(StepError::unmet("no prompt is running"));
        };
        let mut exchange = self.wait_answer(id, Instant::now())?;
        exchange.codes = self.updates[from..]
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update")
            .filter_map(|u| u["rawOutput"]["code"].as_str().map(str::to_owned))
            .collect();
        Ok(exchange)
    }

    /// Sends `session/cancel`.
    pub(crate) fn cancel(&mut self, session: &str) -> Result<(), StepError> {
        self.send(&json!({ "jsonrpc": "2.0", "method": "session/cancel",
            "params": { "sessionId": session } }))
    }

    /// The agent's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: whatever the process held in memory is lost.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for StdioAgent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The prompt text of a scripted turn: one `tool bash` line per command (none: plain text).
pub(crate) fn prompt_text(commands: &[String]) -> String {
    if commands.is_empty() {
        return "hello".into();
    }
    commands
        .iter()
        .map(|c| format!("tool bash {}", json!({ "command": c })))
        .collect::<Vec<_>>()
        .join("\n")
}
