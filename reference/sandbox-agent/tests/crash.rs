//! A crash between an idle switch and the next prompt reverts the switch: it lived only on the
//! bridge's session record. After a restart `session/load` reports the durable truth, and the log
//! holds no knob event.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use agent_client_protocol::v1::schema::{
    LoadSessionRequest, NewSessionRequest, SessionConfigOptionValue, SetSessionConfigOptionRequest,
};
use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

struct Agent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Agent {
    fn start(sessions: &std::path::Path) -> Agent {
        let mut child = Command::new(AGENT)
            .args(["--sessions", sessions.to_str().expect("utf8")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the agent");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut agent = Agent {
            child,
            stdin,
            stdout,
            next: 1,
        };
        let init = agent.call("initialize", &json!({ "protocolVersion": 1 }));
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        agent
    }

    fn call<T: serde::Serialize>(&mut self, method: &str, params: &T) -> Value {
        let id = self.next;
        self.next += 1;
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.stdin, "{request}").expect("write");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        serde_json::from_str(&line).expect("a JSON-RPC answer")
    }
}

#[test]
fn a_crash_before_anchoring_reverts_the_idle_switch() {
    let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    let sessions = dir.path().join("sessions");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");

    let mut agent = Agent::start(&sessions);
    let new = agent.call("session/new", &NewSessionRequest::new(ws.clone()));
    let id = new["result"]["sessionId"].as_str().expect("id").to_owned();
    let set = agent.call(
        "session/set_config_option",
        &SetSessionConfigOptionRequest::new(
            id.clone(),
            "permission",
            SessionConfigOptionValue::value_id("workspace-write"),
        ),
    );
    assert_eq!(
        set["result"]["configOptions"][0]["currentValue"],
        "workspace-write"
    );
    agent.child.kill().expect("SIGKILL before the next prompt");
    agent.child.wait().expect("reap");

    let log = std::fs::read_to_string(sessions.join(format!("{id}.jsonl"))).unwrap_or_default();
    assert!(
        !log.contains("sandbox/mode"),
        "an idle switch must not be durable yet: {log}"
    );

    let mut restarted = Agent::start(&sessions);
    let loaded = restarted.call(
        "session/load",
        &LoadSessionRequest::new(id.clone(), ws.clone()),
    );
    assert_eq!(
        loaded["result"]["configOptions"][0]["currentValue"], "read-only",
        "session/load reports the durable truth: {loaded}"
    );
    let unknown = restarted.call("session/load", &LoadSessionRequest::new("session-99", ws));
    assert_eq!(unknown["error"]["data"]["code"], "UNKNOWN_SESSION");
    let _ = restarted.child.kill();
    let _ = restarted.child.wait();
}

#[test]
fn a_torn_log_tail_is_dropped_with_a_warning_the_operator_sees() {
    let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    let sessions = dir.path().join("sessions");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&sessions).expect("sessions");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(
        sessions.join("session-1.jsonl"),
        "{\"type\":\"sandbox/mode\",\"mode\":\"workspace-write\"}\n{\"type\":\"sandbox/mo",
    )
    .expect("torn log");
    let mut child = Command::new(AGENT)
        .args(["--sessions", sessions.to_str().expect("utf8")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent");
    // A client waits for the initialize answer before it sends anything else.
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut exchange = |request: Value| {
        writeln!(stdin, "{request}").expect("write");
        stdin.flush().expect("flush");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        serde_json::from_str::<Value>(&line).expect("answer")
    };
    exchange(json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": 1 } }));
    let answer = exchange(json!({ "jsonrpc": "2.0", "id": 2, "method": "session/load",
        "params": LoadSessionRequest::new("session-1", ws) }));
    drop(stdin);
    assert_eq!(
        answer["result"]["configOptions"][0]["currentValue"],
        "workspace-write"
    );
    let out = child.wait_with_output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("torn last line"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_default_mode_fails_loudly_at_load() {
    let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    let out = Command::new(AGENT)
        .args([
            "--sessions",
            dir.path().to_str().expect("utf8"),
            "--mode",
            "full-access",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown sandbox mode \"full-access\"")
            && stderr.contains("read-only, workspace-write, danger-full-access"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing may be served with a bad configuration"
    );
}
