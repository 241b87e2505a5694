//! A crash between an idle switch and the next prompt reverts the switch: it lived only on the
//! bridge's session record. After a restart `session/load` reports the durable truth, and the log
//! holds no knob event.

use std::process::{Command, Stdio};

use agent_client_protocol::v1::schema::{
    LoadSessionRequest, NewSessionRequest, SessionConfigOptionValue, SetSessionConfigOptionRequest,
};
use sandbox_test_support::{AgentDirs, AgentProcess, scratch_dir};

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

/// The agent serving `sessions`, initialized.
fn start_agent(sessions: &std::path::Path) -> AgentProcess {
    let mut command = Command::new(AGENT);
    command.args(["--sessions", sessions.to_str().expect("utf8")]);
    AgentProcess::start(command)
}

#[test]
fn a_crash_before_anchoring_reverts_the_idle_switch() {
    let dirs = AgentDirs::new("sandbox-agent-crash-");
    let (sessions, ws) = (dirs.sessions.clone(), dirs.ws.clone());

    let mut agent = start_agent(&sessions);
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
    agent
        .child()
        .kill()
        .expect("SIGKILL before the next prompt");
    agent.child().wait().expect("reap");

    let log = std::fs::read_to_string(sessions.join(format!("{id}.jsonl"))).unwrap_or_default();
    assert!(
        !log.contains("sandbox/mode"),
        "an idle switch must not be durable yet: {log}"
    );

    let mut restarted = start_agent(&sessions);
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
    restarted.stop();
}

#[test]
fn a_torn_log_tail_is_dropped_with_a_warning_the_operator_sees() {
    let dirs = AgentDirs::new("sandbox-agent-crash-");
    let (sessions, ws) = (dirs.sessions.clone(), dirs.ws.clone());
    std::fs::create_dir_all(&sessions).expect("sessions");
    std::fs::write(
        sessions.join("session-1.jsonl"),
        "{\"type\":\"sandbox/mode\",\"mode\":\"workspace-write\"}\n{\"type\":\"sandbox/mo",
    )
    .expect("torn log");
    let mut command = Command::new(AGENT);
    command
        .args(["--sessions", sessions.to_str().expect("utf8")])
        .stderr(Stdio::piped());
    // A client waits for the initialize answer before it sends anything else.
    let mut agent = AgentProcess::start(command);
    let answer = agent.call("session/load", &LoadSessionRequest::new("session-1", ws));
    let out = agent.finish();
    assert_eq!(
        answer["result"]["configOptions"][0]["currentValue"],
        "workspace-write"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("torn last line"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_default_mode_fails_loudly_at_load() {
    let dir = scratch_dir("sandbox-agent-crash-");
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
