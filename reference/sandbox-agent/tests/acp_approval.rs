//! The escalation product path through an editor: a scripted prompt runs a shell write that the
//! sandbox denies, then retries it with sandbox_permissions; the agent asks the editor with
//! `session/request_permission`; the answer decides whether the file lands. Both branches are
//! pinned as snapshots (`approval_granted`, `approval_rejected`).

use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, TextContent,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent};
use sandbox_test_support::AgentDirs;
use serde_json::Value;

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

const SCRIPT: &str = r#"tool bash {"command":"printf x > notes.txt"}
tool bash {"command":"printf x > notes.txt","sandbox_permissions":"workspace-write","justification":"save the notes the user asked for"}"#;

/// Runs the scripted prompt with the editor answering `option`; returns the permission requests
/// the editor saw, the session updates, and whether the file landed.
async fn escalate(option: &'static str) -> (Vec<Value>, Vec<Value>, bool) {
    let dirs = AgentDirs::new("sandbox-agent-acp-approval-");
    let (sessions, ws) = (dirs.sessions.clone(), dirs.ws.clone());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let said = Arc::new(Mutex::new(Vec::new()));
    let (asked_in, said_in) = (asked.clone(), said.clone());
    let agent = AcpAgent::new(
        AcpAgentConfig::new(AGENT).args(["--sessions", sessions.to_str().expect("utf8")]),
    );
    let cwd = ws.clone();
    agent_client_protocol::Client
        .v1()
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                asked_in
                    .lock()
                    .expect("lock")
                    .push(serde_json::to_value(&request).expect("json"));
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option)),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: SessionNotification, _cx| {
                said_in
                    .lock()
                    .expect("lock")
                    .push(serde_json::to_value(&note.update).expect("json"));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(agent, |cx: ConnectionTo<Agent>| async move {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let new = cx
                .send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await?;
            cx.send_request(PromptRequest::new(
                new.session_id,
                vec![ContentBlock::Text(TextContent::new(SCRIPT))],
            ))
            .block_task()
            .await?;
            Ok(())
        })
        .await
        .expect("the conversation");
    let landed = ws.join("notes.txt").exists();
    let asked = asked.lock().expect("lock").clone();
    let said = said.lock().expect("lock").clone();
    (asked, said, landed)
}

/// The final update of tool call `id`: its status and its text output.
fn settled(updates: &[Value], id: &str) -> (String, String) {
    let last = updates
        .iter()
        .rfind(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == id
                && u.get("content").is_some()
        })
        .unwrap_or_else(|| panic!("no final update of {id}: {updates:#?}"));
    (
        last["status"].as_str().unwrap_or("").to_owned(),
        last["content"][0]["content"]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
    )
}

/// The permission request names a call that was announced before it.
fn announced_before_asked(updates: &[Value], asked: &Value) {
    let id = asked["toolCall"]["toolCallId"].as_str().expect("id");
    assert!(
        updates
            .iter()
            .any(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == id),
        "the permission request refers to the announced call {id}: {updates:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_escalation_lands_the_file() {
    let (asked, updates, landed) = escalate("allow-once").await;
    assert_eq!(asked.len(), 1, "one question for one escalated call");
    announced_before_asked(&updates, &asked[0]);
    let (status, text) = settled(&updates, "call-1");
    assert_eq!(status, "failed");
    assert!(
        text.contains("[sandbox: file access denied under read-only mode]"),
        "{text}"
    );
    let (status, text) = settled(&updates, "call-2");
    assert_eq!(status, "completed", "{text}");
    assert!(landed);
    insta::assert_json_snapshot!("approval_granted", asked[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_escalation_runs_nothing() {
    let (asked, updates, landed) = escalate("reject-once").await;
    assert_eq!(asked.len(), 1);
    announced_before_asked(&updates, &asked[0]);
    let (status, text) = settled(&updates, "call-2");
    assert_eq!(status, "failed");
    assert!(
        text.contains("the user rejected escalating this command to \"workspace-write\""),
        "{text}"
    );
    assert!(!landed);
    insta::assert_json_snapshot!("approval_rejected", asked[0]);
}
