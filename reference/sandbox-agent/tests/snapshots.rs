//! Pinned wire and prompt. After a deliberate change: run the tests, then `cargo insta review`.
//!
//! - `wire_transcript`: what the real `sandbox-agent` binary answers on stdio to new, set (idle),
//!   prompt, load, and each invalid request.
//! - `prompt_deltas`: the system prompt and notice of each request as the approval policy changes
//!   by the user and by the operator.

use std::process::Command;

use sandbox::SandboxMode;
use sandbox_agent::Bridge;
use sandbox_policy::presets::PresetTable;
use sandbox_policy::{ApprovalPolicy, PolicyService};
use sandbox_test_support::{AgentDirs, AgentProcess};
use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

#[test]
fn wire_transcript() {
    let dirs = AgentDirs::new("sandbox-agent-snapshots-");
    let ws = dirs.ws.clone();
    let cwd = ws.to_str().expect("utf8");
    // Each request waits for its answer (as a client does); what the agent sends meanwhile
    // (session updates) is in the transcript too. A request before initialize is refused by the
    // SDK's connection, a response the agent never asked for is ignored, an unknown session is
    // ACP's resource-not-found (-32002).
    let requests = [
        json!({ "method": "session/new", "params": { "cwd": cwd, "mcpServers": [] } }),
        json!({ "method": "initialize", "params": { "protocolVersion": 1 } }),
        json!({ "method": "session/new", "params": { "cwd": cwd, "mcpServers": [] } }),
        json!({ "method": "session/set_config_option", "params": { "sessionId": "session-1", "configId": "permission", "value": "full-access" } }),
        json!({ "method": "session/prompt", "params": { "sessionId": "session-1", "prompt": [{ "type": "text", "text": "hi" }] } }),
        json!({ "method": "session/load", "params": { "sessionId": "session-1", "cwd": cwd, "mcpServers": [] } }),
        json!({ "method": "session/load", "params": { "sessionId": "session-1", "cwd": "/", "mcpServers": [] } }),
        json!({ "method": "session/set_config_option", "params": { "sessionId": "session-1", "configId": "model", "value": "x" } }),
        json!({ "method": "session/set_config_option", "params": { "sessionId": "session-1", "configId": "permission", "value": "turbo" } }),
        json!({ "method": "session/set_config_option", "params": { "sessionId": "session-1", "configId": "permission", "type": "boolean", "value": true } }),
        json!({ "method": "session/set_config_option", "params": { "sessionId": "session-9", "configId": "permission", "value": "read-only" } }),
        json!({ "method": "session/set_config_option", "params": { "sessionId": "session-1" } }),
        json!({ "method": "session/fork", "params": {} }),
    ];
    let mut command = Command::new(AGENT);
    command.args(["--sessions", dirs.sessions.to_str().expect("utf8")]);
    let mut agent = AgentProcess::spawn(command);
    let mut transcript: Vec<Value> = Vec::new();
    // A response to a request the agent never sent: ignored, nothing is answered.
    agent.send(&json!({ "jsonrpc": "2.0", "id": "stray", "result": {} }));
    for (i, r) in requests.iter().enumerate() {
        let id = i as u64 + 1;
        let mut r = r.clone();
        r["jsonrpc"] = json!("2.0");
        r["id"] = json!(id);
        agent.send(&r);
        let answer = agent.answer(
            id,
            &mut |message| transcript.push(message.clone()),
            &mut |_| {},
        );
        transcript.push(answer);
    }
    agent.finish();
    let root = std::fs::canonicalize(&ws).expect("canon");
    let transcript: Vec<Value> = serde_json::from_str(
        &serde_json::to_string(&transcript)
            .expect("json")
            .replace(root.to_str().expect("utf8"), "[WS]")
            .replace(cwd, "[WS]"),
    )
    .expect("json");
    insta::assert_json_snapshot!("wire_transcript", transcript);
}

#[test]
fn prompt_deltas() {
    // The workspace beside the sessions directory, never around it.
    let dirs = AgentDirs::new("sandbox-agent-snapshots-");
    let (sessions, ws) = (dirs.sessions.clone(), dirs.ws.clone());
    std::fs::create_dir_all(&sessions).expect("sessions");
    let start = |approval| {
        let policy = PolicyService::new(SandboxMode::ReadOnly, &ws)
            .expect("policy")
            .with_default_approval(approval);
        // The standard table plus read-only+never, so a restart with the default approval `never`
        // still has a preset matching its defaults.
        let presets = PresetTable::new(
            PresetTable::standard(SandboxMode::ReadOnly, ApprovalPolicy::Ask)
                .expect("table")
                .presets()
                .iter()
                .cloned()
                .chain([sandbox_policy::presets::Preset {
                    id: "read-only-never".into(),
                    name: "Read only, never ask".into(),
                    mode: SandboxMode::ReadOnly,
                    approval: ApprovalPolicy::Never,
                    network: None,
                }])
                .collect(),
            SandboxMode::ReadOnly,
            approval,
        )
        .expect("table");
        Bridge::new(
            policy,
            presets,
            &sessions,
            sandbox_agent::Composition::COMPLETE,
        )
        .expect("bridge")
    };
    let mut deltas = Vec::new();
    let mut bridge = start(ApprovalPolicy::Ask);
    let (id, _) = bridge.new_session(&ws).expect("new");
    let mut turn = |bridge: &mut Bridge, label: &str| {
        let t = bridge.begin_turn(&id).expect("begin");
        bridge.end_turn(&id).expect("end");
        deltas.push(json!({
            "after": label,
            "system_prompt": t.system_prompt,
            "notice": t.notice.map(|n| n.text),
        }));
    };
    turn(&mut bridge, "first prompt, policy ask");
    let value =
        agent_client_protocol::v1::schema::SessionConfigOptionValue::value_id("full-access");
    bridge
        .set_config_option(&id, "permission", &value)
        .expect("set");
    turn(&mut bridge, "the user selected full-access (never)");
    turn(&mut bridge, "no change");
    let value =
        agent_client_protocol::v1::schema::SessionConfigOptionValue::value_id("workspace-write");
    bridge
        .set_config_option(&id, "permission", &value)
        .expect("set");
    turn(&mut bridge, "the user selected workspace-write (ask)");
    drop(bridge);
    let mut bridge = start(ApprovalPolicy::Never);
    bridge.load_session(&id, &ws).expect("load");
    turn(
        &mut bridge,
        "restart: the default approval is now never, but the session chose ask",
    );
    insta::assert_json_snapshot!("prompt_deltas", deltas);
}
