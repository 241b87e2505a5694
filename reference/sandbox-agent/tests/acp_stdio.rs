//! The reference agent over real stdio JSON-RPC, driven by the `agent-client-protocol` crate's
//! client side: initialize, new session, switch the permission select while idle, prompt, and
//! find exactly one anchored event per changed knob in the log file on disk.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionConfigOptionValue,
    SetSessionConfigOptionRequest, TextContent,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent};
use sandbox_test_support::AgentDirs;

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

fn knob_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("\"sandbox/mode\"") || l.contains("\"approval/policy\""))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_switch_is_anchored_once_per_changed_knob_at_the_next_prompt() {
    let dirs = AgentDirs::new("sandbox-agent-acp-stdio-");
    let (sessions, ws) = (dirs.sessions.clone(), dirs.ws.clone());
    let agent = AcpAgent::new(
        AcpAgentConfig::new(AGENT).args(["--sessions", sessions.to_str().expect("utf8")]),
    );
    let ws_for_client = ws.clone();
    let sessions_for_client = sessions.clone();
    agent_client_protocol::Client
        .v1()
        .connect_with(agent, |cx: ConnectionTo<Agent>| async move {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let new = cx
                .send_request(NewSessionRequest::new(ws_for_client.clone()))
                .block_task()
                .await?;
            let session = new.session_id.clone();
            let before = serde_json::to_value(&new.config_options).expect("json");
            assert_eq!(before[0]["currentValue"], "read-only", "{before}");
            assert_eq!(before[0]["category"], "mode");

            // Idle: read-only+ask -> full-access (both knobs) -> workspace-write (mode only) ->
            // full-access again. Last write wins per knob.
            for value in ["full-access", "workspace-write", "full-access"] {
                let answer = cx
                    .send_request(SetSessionConfigOptionRequest::new(
                        session.clone(),
                        "permission",
                        SessionConfigOptionValue::value_id(value),
                    ))
                    .block_task()
                    .await?;
                let state = serde_json::to_value(&answer.config_options).expect("json");
                assert_eq!(
                    state[0]["currentValue"], value,
                    "the refreshed state overlays the pending switch"
                );
            }
            let log = sessions_for_client.join(format!("{}.jsonl", session.0));
            let idle = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                knob_lines(&idle).is_empty(),
                "nothing is appended while idle: {idle}"
            );

            cx.send_request(PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new("hello"))],
            ))
            .block_task()
            .await?;
            let anchored = std::fs::read_to_string(&log).expect("log");
            let knobs = knob_lines(&anchored);
            assert_eq!(
                knobs,
                [
                    r#"{"type":"sandbox/mode","mode":"danger-full-access"}"#,
                    r#"{"type":"approval/policy","policy":"never"}"#
                ],
                "{anchored}"
            );
            let started = anchored.find("turn/started").expect("turn");
            let first_knob = anchored.find("sandbox/mode").expect("knob");
            let header = anchored.find("request/header").expect("header");
            assert!(
                started < first_knob && first_knob < header,
                "anchored inside the turn, before the request"
            );
            Ok(())
        })
        .await
        .expect("the conversation");
}
