//! The reference agent as an editor sees it, over real stdio through the `agent-client-protocol`
//! crate's client side: cancellation kills the running command's process tree, a mid-turn switch
//! is answered at once and honoured by the very next call, tool call ids are unique across prompts
//! and restarts, a reloaded session shows its history, background tasks outlive their prompt, the
//! pre-tool hook rides the confined shell, and the composition fails loud at load.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionConfigOptionValue, SessionId, SessionNotification,
    SetSessionConfigOptionRequest, StopReason, TextContent,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent};
use sandbox_test_support::AgentDirs;
use serde_json::Value;

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

type Updates = Arc<Mutex<Vec<Value>>>;

/// One test's world: a sessions directory and a workspace.
struct World {
    _dirs: AgentDirs,
    sessions: PathBuf,
    ws: PathBuf,
}

impl World {
    fn new() -> World {
        let dirs = AgentDirs::new("sandbox-agent-editor-");
        let (sessions, ws) = (dirs.sessions.clone(), dirs.ws.clone());
        World {
            sessions,
            ws,
            _dirs: dirs,
        }
    }

    fn agent(&self, extra: &[&str]) -> AcpAgent {
        let mut args = vec![
            "--sessions".to_owned(),
            self.sessions.to_str().expect("utf8").to_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        AcpAgent::new(AcpAgentConfig::new(AGENT).args(args))
    }

    fn log(&self, id: &SessionId) -> Vec<Value> {
        std::fs::read_to_string(self.sessions.join(format!("{}.jsonl", id.0)))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("log line"))
            .collect()
    }
}

/// Runs `body` against a fresh agent process; the editor answers permission requests with
/// `answer` and records every session update.
async fn with_agent<F>(agent: AcpAgent, answer: &'static str, updates: Updates, body: F)
where
    F: AsyncFnOnce(ConnectionTo<Agent>) -> Result<(), agent_client_protocol::Error> + Send,
{
    let seen = updates.clone();
    agent_client_protocol::Client
        .v1()
        .on_receive_request(
            async move |_request: RequestPermissionRequest, responder, _cx| {
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(answer)),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: SessionNotification, _cx| {
                seen.lock()
                    .expect("lock")
                    .push(serde_json::to_value(&note.update).expect("json"));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(agent, async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            body(cx).await
        })
        .await
        .expect("the conversation");
}

fn text(s: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(s))]
}

async fn new_session(cx: &ConnectionTo<Agent>, ws: &Path) -> SessionId {
    cx.send_request(NewSessionRequest::new(ws.to_path_buf()))
        .block_task()
        .await
        .expect("new")
        .session_id
}

async fn select(cx: &ConnectionTo<Agent>, id: &SessionId, value: &str) -> Value {
    let answer = cx
        .send_request(SetSessionConfigOptionRequest::new(
            id.clone(),
            "permission",
            SessionConfigOptionValue::value_id(value.to_owned()),
        ))
        .block_task()
        .await
        .expect("set");
    serde_json::to_value(&answer.config_options).expect("json")
}

/// Waits until an update satisfies `pred`.
async fn wait_for(updates: &Updates, what: &str, pred: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if updates.lock().expect("lock").iter().any(&pred) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn in_progress(id: &'static str) -> impl Fn(&Value) -> bool {
    move |u| {
        u["sessionUpdate"] == "tool_call_update"
            && u["toolCallId"] == id
            && u["status"] == "in_progress"
    }
}

/// The final update of a call: (status, text, raw output).
fn settled(updates: &Updates, id: &str) -> Option<(String, String, Value)> {
    updates
        .lock()
        .expect("lock")
        .iter()
        .rfind(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == id
                && u.get("content").is_some()
        })
        .map(|u| {
            (
                u["status"].as_str().unwrap_or("").to_owned(),
                u["content"][0]["content"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                u["rawOutput"].clone(),
            )
        })
}

/// Processes on the host whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_sleep_30_and_nothing_of_it_remains_when_the_agent_answers() {
    let world = World::new();
    let updates: Updates = Arc::default();
    let ws = world.ws.clone();
    let seen = updates.clone();
    // A unique duration marks the command's processes (bash and its sleep) on the host.
    // (Ended by `s`, so no other test's marker, say 30.12345s, contains this one, 30.1234s.)
    let marker = format!("30.{}s", std::process::id());
    let script = format!(
        "tool bash {{\"command\":\"sleep {marker}; echo late\"}}\ntool bash {{\"command\":\"printf x > after\"}}"
    );
    let id_cell = Arc::new(Mutex::new(None));
    let id_out = id_cell.clone();
    let marker_in = marker.clone();
    with_agent(
        world.agent(&["--mode", "workspace-write"]),
        "allow-once",
        updates.clone(),
        async move |cx| {
            let id = new_session(&cx, &ws).await;
            *id_out.lock().expect("lock") = Some(id.clone());
            let prompt = tokio::spawn(
                cx.send_request(PromptRequest::new(id.clone(), text(&script)))
                    .block_task(),
            );
            wait_for(&seen, "the sleep to start", in_progress("call-1")).await;
            let deadline = Instant::now() + Duration::from_secs(60);
            while processes_with(&marker_in).is_empty() {
                assert!(
                    Instant::now() < deadline,
                    "the sleep never showed up on the host"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let cancelled_at = Instant::now();
            cx.send_notification(CancelNotification::new(id.clone()))?;
            let response = prompt.await.expect("join")?;
            let took = cancelled_at.elapsed();
            // Read at once: nothing of the call may be alive once the agent answered.
            let left = processes_with(&marker_in);
            assert_eq!(response.stop_reason, StopReason::Cancelled);
            assert!(
                left.is_empty(),
                "the agent answered cancelled while processes of the call were alive: {left:?}"
            );
            // A hang guard, not a speed test: on a loaded host killing the tree takes seconds.
            assert!(
                took < Duration::from_secs(60),
                "the turn ended {took:?} after session/cancel"
            );
            eprintln!("cancel: answered {took:?} after session/cancel, nothing of the call left");
            Ok(())
        },
    )
    .await;
    let left = processes_with(&marker);
    assert!(
        left.is_empty(),
        "no process of the cancelled call may remain: {left:?}"
    );
    assert!(
        !world.ws.join("after").exists(),
        "no further tool may run after a cancel"
    );
    let (status, _, output) = settled(&updates, "call-1").expect("call-1 settled");
    assert_eq!(status, "failed");
    assert_eq!(output["facts"]["cancelled"], true, "{output}");
    assert!(settled(&updates, "call-2").is_none(), "call-2 never ran");
    let id = id_cell.lock().expect("lock").clone().expect("id");
    let log = world.log(&id);
    assert_eq!(
        log.iter().filter(|e| e["type"] == "tool/call").count(),
        1,
        "the log records exactly the one call that ran: {log:?}"
    );
    assert_eq!(
        log.last().map(|e| e["type"].clone()),
        Some("turn/ended".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_answers_a_pending_permission_request_as_cancelled() {
    let world = World::new();
    let updates: Updates = Arc::default();
    let ws = world.ws.clone();
    let asked: Arc<Mutex<Vec<Value>>> = Arc::default();
    let asked_in = asked.clone();
    let seen = updates.clone();
    let agent = world.agent(&[]);
    // An editor that never answers: the question stays pending until the turn is cancelled.
    agent_client_protocol::Client
        .v1()
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                asked_in.lock().expect("lock").push(serde_json::to_value(&request).expect("json"));
                std::mem::forget(responder);
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: SessionNotification, _cx| {
                seen.lock().expect("lock").push(serde_json::to_value(&note.update).expect("json"));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(agent, async |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await?;
            let id = new_session(&cx, &ws).await;
            let script = "tool bash {\"command\":\"printf x > f\",\"sandbox_permissions\":\"workspace-write\",\"justification\":\"save\"}\ntool bash {\"command\":\"printf y > g\"}";
            let prompt = tokio::spawn(cx.send_request(PromptRequest::new(id.clone(), text(script))).block_task());
            let deadline = Instant::now() + Duration::from_secs(60);
            while asked.lock().expect("lock").is_empty() {
                assert!(Instant::now() < deadline, "never asked");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            cx.send_notification(CancelNotification::new(id.clone()))?;
            // The editor never answers: a turn that waited for it would never end (a hang
            // guard with room for a loaded host, not a speed test).
            let response = tokio::time::timeout(Duration::from_secs(60), prompt)
                .await
                .expect("the turn ends without the editor answering")
                .expect("join")?;
            assert_eq!(response.stop_reason, StopReason::Cancelled);
            Ok(())
        })
        .await
        .expect("conversation");
    let (_, text, output) = settled(&updates, "call-1").expect("call-1 settled");
    assert_eq!(output["code"], "ESCALATION_CANCELLED", "{text}");
    assert!(!world.ws.join("f").exists() && !world.ws.join("g").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_to_read_only_mid_turn_is_answered_at_once_and_denies_the_next_write() {
    let world = World::new();
    let updates: Updates = Arc::default();
    let ws = world.ws.clone();
    let seen = updates.clone();
    let id_cell = Arc::new(Mutex::new(None));
    let id_out = id_cell.clone();
    with_agent(world.agent(&["--mode", "workspace-write"]), "allow-once", updates.clone(), async move |cx| {
        let id = new_session(&cx, &ws).await;
        *id_out.lock().expect("lock") = Some(id.clone());
        // The first call waits for a gate this test opens only after the switch was answered:
        // an answer held back until the turn ends would never come (the 60 s guard fails it),
        // so the order of events decides, not a clock.
        let script = "tool bash {\"command\":\"printf a > first; until [ -e go ]; do sleep 0.05; done\"}\ntool bash {\"command\":\"printf b > second\"}";
        let prompt = tokio::spawn(cx.send_request(PromptRequest::new(id.clone(), text(script))).block_task());
        wait_for(&seen, "the first call to run", in_progress("call-1")).await;
        let state = tokio::time::timeout(Duration::from_secs(60), select(&cx, &id, "read-only"))
            .await
            .expect("set_config_option is answered during the turn, not after it");
        assert!(!prompt.is_finished(), "the turn was still open when the switch was answered");
        assert_eq!(state[0]["currentValue"], "read-only");
        std::fs::write(ws.join("go"), "").expect("gate");
        let response = prompt.await.expect("join")?;
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    assert!(
        world.ws.join("first").exists(),
        "the first write ran under workspace-write"
    );
    assert!(
        !world.ws.join("second").exists(),
        "the next write runs under the switch"
    );
    let (_, text, output) = settled(&updates, "call-2").expect("call-2");
    assert_eq!(output["code"], "DENIED", "{text}");
    assert!(
        text.contains("[sandbox: file access denied under read-only mode]"),
        "{text}"
    );
    let id = id_cell.lock().expect("lock").clone().expect("id");
    let types: Vec<String> = world
        .log(&id)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect();
    let knob = types
        .iter()
        .position(|t| t == "sandbox/mode")
        .expect("appended at once");
    let calls: Vec<usize> = types
        .iter()
        .enumerate()
        .filter(|(_, t)| *t == "tool/call")
        .map(|(i, _)| i)
        .collect();
    assert!(
        calls[0] < knob && knob < calls[1],
        "appended inside the turn, between the calls: {types:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mid_turn_approval_switch_is_narrated_at_the_next_pre_step() {
    let world = World::new();
    let updates: Updates = Arc::default();
    let ws = world.ws.clone();
    let seen = updates.clone();
    let id_cell = Arc::new(Mutex::new(None));
    let id_out = id_cell.clone();
    with_agent(
        world.agent(&[]),
        "allow-once",
        updates.clone(),
        async move |cx| {
            let id = new_session(&cx, &ws).await;
            *id_out.lock().expect("lock") = Some(id.clone());
            let script = "tool bash {\"command\":\"sleep 1\"}\ntool bash {\"command\":\"true\"}";
            let prompt = tokio::spawn(
                cx.send_request(PromptRequest::new(id.clone(), text(script)))
                    .block_task(),
            );
            wait_for(&seen, "the first call to run", in_progress("call-1")).await;
            select(&cx, &id, "full-access").await;
            prompt.await.expect("join")?;
            Ok(())
        },
    )
    .await;
    let id = id_cell.lock().expect("lock").clone().expect("id");
    let log = world.log(&id);
    let types: Vec<&str> = log
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    let notice = types
        .iter()
        .position(|t| *t == "notice")
        .unwrap_or_else(|| panic!("a notice event: {types:?}"));
    let second_call = types
        .iter()
        .rposition(|t| *t == "tool/call")
        .expect("call-2");
    assert!(
        notice < second_call,
        "the notice reaches the model before its next request, inside the turn: {types:?}"
    );
    assert_eq!(log[notice]["source"], "user");
    assert!(
        log[notice + 1]["type"] == "request/header"
            && log[notice + 1]["prompt"]
                .as_str()
                .unwrap_or("")
                .contains("Approval policy: never"),
        "{log:?}"
    );
    assert_eq!(
        types.iter().filter(|t| **t == "notice").count(),
        1,
        "coalesced: one notice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_unique_across_prompts_and_a_restart_and_a_reloaded_session_shows_its_history() {
    let world = World::new();
    let first: Updates = Arc::default();
    let ws = world.ws.clone();
    let id_cell = Arc::new(Mutex::new(None));
    let id_out = id_cell.clone();
    with_agent(
        world.agent(&["--mode", "workspace-write"]),
        "allow-once",
        first.clone(),
        async move |cx| {
            let id = new_session(&cx, &ws).await;
            *id_out.lock().expect("lock") = Some(id.clone());
            for n in 1..=2 {
                cx.send_request(PromptRequest::new(
                    id.clone(),
                    text(&format!(
                        "tool write {{\"path\":\"n{n}\",\"content\":\"{n}\"}}"
                    )),
                ))
                .block_task()
                .await?;
            }
            Ok(())
        },
    )
    .await;
    let id = id_cell.lock().expect("lock").clone().expect("id");
    let announced = |u: &Updates| -> Vec<String> {
        u.lock()
            .expect("lock")
            .iter()
            .filter(|v| v["sessionUpdate"] == "tool_call")
            .map(|v| v["toolCallId"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(announced(&first), ["call-1", "call-2"]);
    let diff = first.lock().expect("lock").iter().find_map(|u| {
        (u["sessionUpdate"] == "tool_call_update"
            && u["toolCallId"] == "call-1"
            && u.get("content").is_some())
        .then(|| u["content"][1].clone())
    });
    assert_eq!(
        diff.as_ref().map(|d| d["type"].clone()),
        Some("diff".into()),
        "{diff:?}"
    );
    assert_eq!(diff.map(|d| d["newText"].clone()), Some("1".into()));

    let second: Updates = Arc::default();
    let ws = world.ws.clone();
    let seen = second.clone();
    let reload_id = id.clone();
    with_agent(
        world.agent(&["--mode", "workspace-write"]),
        "allow-once",
        second.clone(),
        async move |cx| {
            cx.send_request(LoadSessionRequest::new(reload_id.clone(), ws.clone()))
                .block_task()
                .await?;
            let history: Vec<Value> = seen.lock().expect("lock").clone();
            let kinds: Vec<&str> = history
                .iter()
                .map(|u| u["sessionUpdate"].as_str().unwrap_or(""))
                .collect();
            assert!(
                kinds.contains(&"user_message_chunk") && kinds.contains(&"agent_message_chunk"),
                "{kinds:?}"
            );
            let cards: Vec<(String, String)> = history
                .iter()
                .filter(|u| u["sessionUpdate"] == "tool_call")
                .map(|u| {
                    (
                        u["toolCallId"].as_str().unwrap_or("").to_owned(),
                        u["status"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            assert_eq!(
                cards,
                [
                    ("call-1".into(), "completed".into()),
                    ("call-2".into(), "completed".into())
                ],
                "{history:#?}"
            );
            cx.send_request(PromptRequest::new(
                reload_id.clone(),
                text("tool read {\"path\":\"n1\"}"),
            ))
            .block_task()
            .await?;
            // Another cwd is refused: the sandbox never moves.
            let elsewhere = cx
                .send_request(LoadSessionRequest::new(
                    reload_id.clone(),
                    std::env::temp_dir(),
                ))
                .block_task()
                .await;
            let error = elsewhere.expect_err("a load with another cwd is refused");
            assert!(
                error.to_string().contains("SESSION_CWD_MISMATCH")
                    || format!("{error:?}").contains("SESSION_CWD_MISMATCH"),
                "{error:?}"
            );
            Ok(())
        },
    )
    .await;
    let after_restart: Vec<String> = announced(&second);
    assert_eq!(
        after_restart.last().map(String::as_str),
        Some("call-3"),
        "{after_restart:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_outlives_its_prompt_and_an_escalated_one_says_so() {
    let world = World::new();
    let updates: Updates = Arc::default();
    let ws = world.ws.clone();
    with_agent(world.agent(&[]), "allow-once", updates.clone(), async move |cx| {
        let id = new_session(&cx, &ws).await;
        cx.send_request(PromptRequest::new(id.clone(), text("tool bash {\"command\":\"sleep 0.3; printf x > bg\",\"run_in_background\":true,\"sandbox_permissions\":\"workspace-write\",\"justification\":\"write the file\"}")))
            .block_task().await?;
        cx.send_request(PromptRequest::new(id.clone(), text("tool bash_output {\"task_id\":1,\"wait_ms\":10000}")))
            .block_task().await?;
        Ok(())
    })
    .await;
    let (_, text, started) = settled(&updates, "call-1").expect("call-1");
    assert_eq!(started["code"], "STARTED", "{text}");
    let (status, text, output) = settled(&updates, "call-2").expect("call-2");
    assert_eq!(
        (status.as_str(), output["code"].as_str()),
        ("completed", Some("OK")),
        "{text}"
    );
    assert_eq!(output["facts"]["escalated"], true, "{output}");
    assert_eq!(output["facts"]["mode"], "workspace-write");
    assert!(world.ws.join("bg").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pre_tool_hook_rides_the_confined_shell_under_the_session_policy() {
    let world = World::new();
    let updates: Updates = Arc::default();
    let ws = world.ws.clone();
    let hook = "printf \"$SANDBOX_AGENT_TOOL\" >> hooked";
    let id_cell = Arc::new(Mutex::new(None));
    let id_out = id_cell.clone();
    with_agent(
        world.agent(&["--pre-tool-hook", hook]),
        "allow-once",
        updates.clone(),
        async move |cx| {
            let id = new_session(&cx, &ws).await;
            *id_out.lock().expect("lock") = Some(id.clone());
            // Read-only: the hook's own write is denied by the kernel, so the call is blocked.
            cx.send_request(PromptRequest::new(
                id.clone(),
                text("tool bash {\"command\":\"printf x > ran\"}"),
            ))
            .block_task()
            .await?;
            select(&cx, &id, "workspace-write").await;
            // Workspace-write: the hook writes in the workspace and the call runs.
            cx.send_request(PromptRequest::new(
                id.clone(),
                text("tool bash {\"command\":\"printf y > ran\"}"),
            ))
            .block_task()
            .await?;
            Ok(())
        },
    )
    .await;
    let (_, text, blocked) = settled(&updates, "call-1").expect("call-1");
    assert_eq!(blocked["code"], "HOOK_BLOCKED", "{text}");
    assert!(
        text.contains("[sandbox: file access denied under read-only mode]"),
        "{text}"
    );
    let (_, text, ran) = settled(&updates, "call-2").expect("call-2");
    assert_eq!(ran["code"], "OK", "{text}");
    assert_eq!(
        std::fs::read_to_string(world.ws.join("hooked")).expect("hooked"),
        "bash"
    );
    assert_eq!(
        std::fs::read_to_string(world.ws.join("ran")).expect("ran"),
        "y"
    );
    let id = id_cell.lock().expect("lock").clone().expect("id");
    let hooks: Vec<(Value, Value)> = world
        .log(&id)
        .iter()
        .filter(|e| e["type"] == "hook/ran")
        .map(|e| (e["code"].clone(), e["allowed"].clone()))
        .collect();
    assert_eq!(
        hooks,
        [("DENIED".into(), false.into()), ("OK".into(), true.into())]
    );
}

#[test]
fn a_preset_layer_without_an_approval_service_or_a_confining_shell_fails_at_start() {
    let world = World::new();
    for flag in ["--no-approval-service", "--unconfined-shell"] {
        let out = std::process::Command::new(AGENT)
            .args(["--sessions", world.sessions.to_str().expect("utf8"), flag])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("BAD_COMPOSITION: the permission presets require"),
            "{flag}: {stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_matching_no_preset_start_as_custom() {
    let world = World::new();
    let ws = world.ws.clone();
    with_agent(
        world.agent(&["--mode", "danger-full-access", "--approval", "ask"]),
        "allow-once",
        Arc::default(),
        async move |cx| {
            let new = cx
                .send_request(NewSessionRequest::new(ws.clone()))
                .block_task()
                .await?;
            let options = serde_json::to_value(&new.config_options).expect("json");
            assert_eq!(options[0]["currentValue"], "custom", "{options}");
            let values: Vec<&str> = options[0]["options"]
                .as_array()
                .expect("options")
                .iter()
                .map(|o| o["value"].as_str().unwrap_or(""))
                .collect();
            assert_eq!(
                values,
                ["read-only", "workspace-write", "full-access", "custom"]
            );
            let switched = select(&cx, &new.session_id, "read-only").await;
            assert_eq!(switched[0]["currentValue"], "read-only");
            assert_eq!(
                switched[0]["options"].as_array().map(Vec::len),
                Some(3),
                "custom is switch-away-only"
            );
            Ok(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_alone_reconstructs_an_escalated_exchange() {
    let world = World::new();
    let ws = world.ws.clone();
    let id_cell = Arc::new(Mutex::new(None));
    let id_out = id_cell.clone();
    let script = "tool bash {\"command\":\"printf x > notes.txt\"}\ntool bash {\"command\":\"printf x > notes.txt\",\"sandbox_permissions\":\"workspace-write\",\"justification\":\"save the notes\"}";
    with_agent(
        world.agent(&[]),
        "allow-once",
        Arc::default(),
        async move |cx| {
            let id = new_session(&cx, &ws).await;
            *id_out.lock().expect("lock") = Some(id.clone());
            cx.send_request(PromptRequest::new(id.clone(), text(script)))
                .block_task()
                .await?;
            Ok(())
        },
    )
    .await;
    let id = id_cell.lock().expect("lock").clone().expect("id");
    let log = world.log(&id);
    let line = |e: &Value| -> String {
        let t = e["type"].as_str().unwrap_or("").to_owned();
        match t.as_str() {
            "tool/call" => format!("{t} {} {}", e["call_id"], e["input"]["command"]),
            "tool/result" => format!("{t} {} {} {}", e["call_id"], e["code"], e["status"]),
            "approval/asked" => format!("{t} {} {}", e["call_id"], e["mode"]),
            "approval/decided" => format!("{t} {} {}", e["call_id"], e["outcome"]),
            "user/message" | "agent/message" => format!("{t} {}", e["text"]),
            _ => t,
        }
    };
    let got: Vec<String> = log.iter().map(line).collect();
    let want = [
        "session/header".to_owned(),
        "turn/started".into(),
        "request/header".into(),
        format!("user/message {}", Value::from(script)),
        r#"tool/call "call-1" "printf x > notes.txt""#.into(),
        r#"tool/result "call-1" "DENIED" "failed""#.into(),
        r#"agent/message "bash (call-1) -> DENIED\n\n""#.into(),
        "request/header".into(),
        r#"tool/call "call-2" "printf x > notes.txt""#.into(),
        r#"approval/asked "call-2" "workspace-write""#.into(),
        r#"approval/decided "call-2" "granted""#.into(),
        r#"tool/result "call-2" "OK" "completed""#.into(),
        r#"agent/message "bash (call-2) -> OK\n\n""#.into(),
        "request/header".into(),
        r#"agent/message "Done.""#.into(),
        "turn/ended".into(),
    ];
    assert_eq!(got, want, "the exchange, from the session log alone");
    assert!(
        log[5]["text"]
            .as_str()
            .unwrap_or("")
            .contains("[sandbox: file access denied under read-only mode]"),
        "the result the model read is in the log: {}",
        log[5]
    );
}
