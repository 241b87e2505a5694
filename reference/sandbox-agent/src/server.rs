//! The reference agent on the `agent-client-protocol` crate's agent-side connection: routing,
//! concurrency and the JSON-RPC rules (initialize first, unknown methods, responses, request
//! cancellation) come from the SDK. A prompt runs on its own thread, so the connection keeps
//! answering while a turn runs: a `session/set_config_option` sent mid-turn is answered at once and
//! appended at once (the next tool call runs under it), and `session/cancel` stops the turn.
//!
//! One turn: the prompt opens it (anchoring pending switches), each model request is preceded by
//! the pre-step (a coalesced approval-policy notice, the request header), each tool call is
//! announced (`tool_call`), optionally gated by the configured pre-tool hook (run through the same
//! confined shell and policy), started (`in_progress`) and settled (`completed` or `failed`, with
//! its output and, for write and edit, a diff). Everything is recorded in the session log, so
//! `session/load` replays the conversation from disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, Diff, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, SessionNotification,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, StopReason,
    TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields,
};
use agent_client_protocol::{Client, Error, ErrorCode};
use sandbox::SandboxProvider;
use sandbox_policy::Event;
use sandbox_tools::fs::FileSystem;
use sandbox_tools::outcome::{Code, Facts, HookFacts};
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tool::Tool;
use sandbox_tools::tools::{CallContext, ToolOutput, Toolbox};
use serde_json::{Value, json};

use crate::model::{AcpApprover, TurnControl, help, prompt_text, scripted_calls, tool_kind};
use crate::{Bridge, BridgeError};

/// The agent name tool calls and approvals are routed through.
pub const AGENT_NAME: &str = "sandbox-agent";

/// How the agent is set up besides the bridge.
pub struct AgentSetup {
    /// The bridge (policy home, presets, session records).
    pub bridge: Bridge,
    /// The sandbox provider of the confining shell.
    pub provider: Arc<dyn SandboxProvider>,
    /// A pre-tool hook command, run before every tool call through the session's confined shell
    /// under the session's policy; a non-zero exit (or a runner failure) blocks the call.
    pub pre_tool_hook: Option<String>,
}

/// One live session's runtime: its shell (background tasks live as long as the session) and its
/// running turn.
struct SessionRuntime {
    tools: Toolbox,
    approver: Arc<AcpApprover>,
    turn: Mutex<Option<Arc<TurnControl>>>,
}

struct State {
    bridge: Mutex<Bridge>,
    provider: Arc<dyn SandboxProvider>,
    hook: Option<String>,
    runtimes: Mutex<HashMap<String, Arc<SessionRuntime>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A bridge error on the wire: an unknown session is ACP's `-32002` (resource not found), the
/// rest invalid params; `data.code` carries the stable code.
fn wire_error(e: &BridgeError) -> Error {
    let code = match e {
        BridgeError::UnknownSession(_) => ErrorCode::RESOURCE_NOT_FOUND,
        _ => ErrorCode::INVALID_PARAMS,
    };
    Error::new(code, e.to_string()).data(json!({ "code": e.code() }))
}

impl State {
    /// The session's runtime, made on first use: its toolbox (one shell, so background tasks
    /// outlive the prompt that started them) and its approval channel.
    fn runtime(
        &self,
        id: &str,
        cx: &ConnectionTo<Client>,
        handle: &tokio::runtime::Handle,
    ) -> Arc<SessionRuntime> {
        let policy = lock(&self.bridge).policy().clone();
        let mut runtimes = lock(&self.runtimes);
        Arc::clone(runtimes.entry(id.to_owned()).or_insert_with(|| {
            let approver = Arc::new(AcpApprover::new(cx.clone(), handle.clone(), id));
            let tools = Toolbox::new(
                Arc::new(policy),
                Arc::new(ShellExecutor::confining(Arc::clone(&self.provider))),
                FileSystem::Fenced,
                Some(Arc::clone(&approver) as Arc<dyn sandbox_tools::approval::ApprovalService>),
            );
            Arc::new(SessionRuntime {
                tools,
                approver,
                turn: Mutex::new(None),
            })
        }))
    }

    /// The running turn of a session, if one runs.
    fn running_turn(&self, id: &str) -> Option<Arc<TurnControl>> {
        let runtime = lock(&self.runtimes).get(id).cloned()?;
        lock(&runtime.turn).clone()
    }

    fn notify(&self, cx: &ConnectionTo<Client>, id: &str, update: SessionUpdate) {
        // A client that went away cannot be told; the log still records the turn.
        let _ = cx.send_notification(SessionNotification::new(id.to_owned(), update));
    }

    fn say(&self, cx: &ConnectionTo<Client>, id: &str, text: &str) -> Result<(), Error> {
        lock(&self.bridge)
            .record_event(
                id,
                Event::AgentMessage {
                    text: text.to_owned(),
                },
            )
            .map_err(|e| wire_error(&e))?;
        self.notify(
            cx,
            id,
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                TextContent::new(text),
            ))),
        );
        Ok(())
    }

    /// Replays a loaded session's conversation from its log, as `session/update`s.
    fn replay(&self, cx: &ConnectionTo<Client>, id: &str) -> Result<(), Error> {
        let events = lock(&self.bridge).events(id).map_err(|e| wire_error(&e))?;
        let mut calls: HashMap<String, (String, Value)> = HashMap::new();
        for event in &events {
            match event {
                Event::UserMessage { text } => self.notify(
                    cx,
                    id,
                    SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::Text(
                        TextContent::new(text.clone()),
                    ))),
                ),
                Event::AgentMessage { text } => self.notify(
                    cx,
                    id,
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                        TextContent::new(text.clone()),
                    ))),
                ),
                Event::ToolCall {
                    call_id,
                    tool,
                    input,
                } => {
                    calls.insert(call_id.clone(), (tool.clone(), input.clone()));
                }
                Event::ToolResult {
                    call_id,
                    status,
                    text,
                    ..
                } => {
                    let (tool, input) = calls.remove(call_id).unwrap_or_default();
                    let card = ToolCall::new(call_id.clone(), title(&tool, &input))
                        .kind(tool_kind(&tool))
                        .status(parse_status(status))
                        .raw_input(input)
                        .content(vec![ToolCallContent::from(ContentBlock::Text(
                            TextContent::new(text.clone()),
                        ))]);
                    self.notify(cx, id, SessionUpdate::ToolCall(card));
                }
                _ => {}
            }
        }
        // Calls announced but never settled (a crash mid-call) are shown as failed.
        let mut open: Vec<_> = calls.into_iter().collect();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        for (call_id, (tool, input)) in open {
            let card = ToolCall::new(call_id, title(&tool, &input))
                .kind(tool_kind(&tool))
                .status(ToolCallStatus::Failed)
                .raw_input(input);
            self.notify(cx, id, SessionUpdate::ToolCall(card));
        }
        Ok(())
    }

    /// Runs one prompt's turn on the calling (blocking) thread.
    fn run_turn(
        self: &Arc<Self>,
        request: PromptRequest,
        cx: ConnectionTo<Client>,
        handle: tokio::runtime::Handle,
    ) -> Result<PromptResponse, Error> {
        let id = request.session_id.0.to_string();
        let (session, policy) = {
            let bridge = lock(&self.bridge);
            (
                bridge.shared_session(&id).map_err(|e| wire_error(&e))?,
                bridge.policy().clone(),
            )
        };
        let runtime = self.runtime(&id, &cx, &handle);
        let control = Arc::new(TurnControl::default());
        runtime.approver.set_turn(Arc::clone(&control));
        {
            let mut turn = lock(&runtime.turn);
            if turn.is_some() {
                return Err(Error::new(
                    ErrorCode::INVALID_PARAMS,
                    format!("TURN_RUNNING: session {id:?} already has a prompt running"),
                )
                .data(json!({ "code": "TURN_RUNNING" })));
            }
            *turn = Some(Arc::clone(&control));
        }
        let result = self.turn_body(
            &id,
            &request,
            &cx,
            &runtime.tools,
            &control,
            &session,
            policy,
        );
        *lock(&runtime.turn) = None;
        let ended = lock(&self.bridge).end_turn(&id);
        result?;
        ended.map_err(|e| wire_error(&e))?;
        Ok(PromptResponse::new(if control.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        }))
    }

    #[allow(clippy::too_many_arguments)]
    fn turn_body(
        self: &Arc<Self>,
        id: &str,
        request: &PromptRequest,
        cx: &ConnectionTo<Client>,
        tools: &Toolbox,
        control: &Arc<TurnControl>,
        session: &Arc<sandbox_policy::Session>,
        policy: sandbox_policy::PolicyService,
    ) -> Result<(), Error> {
        {
            let mut bridge = lock(&self.bridge);
            bridge.begin_turn(id).map_err(|e| wire_error(&e))?;
            bridge
                .record_event(
                    id,
                    Event::UserMessage {
                        text: prompt_text(&request.prompt),
                    },
                )
                .map_err(|e| wire_error(&e))?;
        }
        let calls = scripted_calls(&request.prompt);
        if calls.is_empty() {
            return self.say(cx, id, &help());
        }
        for (n, (tool, args)) in calls.into_iter().enumerate() {
            if control.is_cancelled() {
                break;
            }
            if n > 0 {
                // The model is asked again with the last result: its pre-step delivers any notice
                // owed since the previous request (a mid-turn approval switch included).
                lock(&self.bridge)
                    .pre_step(id)
                    .map_err(|e| wire_error(&e))?;
            }
            let call_id = {
                let bridge = lock(&self.bridge);
                let call_id = bridge.next_call_id(id).map_err(|e| wire_error(&e))?;
                bridge
                    .record_event(
                        id,
                        Event::ToolCall {
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            input: args.clone(),
                        },
                    )
                    .map_err(|e| wire_error(&e))?;
                call_id
            };
            let target = file_target(&policy, session, &tool, &args);
            let mut card = ToolCall::new(call_id.clone(), title(&tool, &args))
                .kind(tool_kind(&tool))
                .status(ToolCallStatus::Pending)
                .raw_input(args.clone());
            if let Some(path) = &target {
                card = card.locations(vec![ToolCallLocation::new(path.clone())]);
            }
            self.notify(cx, id, SessionUpdate::ToolCall(card));
            let ctx = CallContext {
                session: Some(session),
                agent: Some(AGENT_NAME),
                call_id: &call_id,
            };
            let blocked = self.run_hook(id, tools, &ctx, &tool, control)?;
            let before = target
                .as_ref()
                .and_then(|p| sandbox_tools::fs::read_regular(p).ok());
            let out = match blocked {
                Some(out) => out,
                // The card turns in_progress once the call's policy is fixed (after any
                // approval): a switch the editor sends after seeing it applies to the next call.
                None => tools.call_observed(&tool, &args, &ctx, Some(control.flag()), &|| {
                    self.notify(
                        cx,
                        id,
                        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                            call_id.clone(),
                            ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                        )),
                    );
                }),
            };
            let mut out = out;
            if out.facts.cancelled() {
                // The turn's cancellation killed it: its card says so.
                out.code = Code::Cancelled;
            }
            let status = if succeeded(&out) {
                ToolCallStatus::Completed
            } else {
                ToolCallStatus::Failed
            };
            let mut content = vec![ToolCallContent::from(ContentBlock::Text(TextContent::new(
                out.text.clone(),
            )))];
            if let (Some(path), Code::Ok, Some(true)) = (
                &target,
                out.code,
                Tool::from_name(&tool).map(Tool::changes_file),
            ) && let Ok(after) = sandbox_tools::fs::read_regular(path)
            {
                content.push(ToolCallContent::from(
                    Diff::new(path.clone(), after).old_text(before),
                ));
            }
            lock(&self.bridge)
                .record_event(
                    id,
                    Event::ToolResult {
                        call_id: call_id.clone(),
                        code: out.code.into(),
                        status: status_word(&status).into(),
                        text: out.text.clone(),
                    },
                )
                .map_err(|e| wire_error(&e))?;
            self.notify(
                cx,
                id,
                SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id.clone(),
                    ToolCallUpdateFields::new()
                        .status(status)
                        .content(content)
                        .raw_output(json!({ "code": out.code, "facts": out.facts })),
                )),
            );
            // Each result is its own paragraph of the agent's message.
            self.say(cx, id, &format!("{tool} ({call_id}) -> {}\n\n", out.code))?;
        }
        if !control.is_cancelled() {
            lock(&self.bridge)
                .pre_step(id)
                .map_err(|e| wire_error(&e))?;
            self.say(cx, id, "Done.")?;
        }
        Ok(())
    }

    /// Runs the pre-tool hook, if one is configured, through the session's confined shell under
    /// the session's own policy (never a grant). `Some(output)` blocks the tool call.
    fn run_hook(
        &self,
        id: &str,
        tools: &Toolbox,
        ctx: &CallContext<'_>,
        tool: &str,
        control: &Arc<TurnControl>,
    ) -> Result<Option<ToolOutput>, Error> {
        let Some(hook) = &self.hook else {
            return Ok(None);
        };
        // The tool name is one of the closed set of reference tools or an unknown name the tool
        // layer refuses; it is passed single-quoted with quotes escaped.
        let quoted = tool.replace('\'', "'\\''");
        let command = format!("export SANDBOX_AGENT_TOOL='{quoted}'\n{hook}");
        let out = tools.call_cancellable(
            Tool::Bash.name(),
            &json!({ "command": command }),
            ctx,
            Some(control.flag()),
        );
        let exit = out.facts.exit_code();
        let allowed = out.code == Code::Ok && exit == Some(0);
        lock(&self.bridge)
            .record_event(
                id,
                Event::HookRan {
                    call_id: ctx.call_id.to_owned(),
                    code: out.code.into(),
                    exit_code: exit,
                    allowed,
                },
            )
            .map_err(|e| wire_error(&e))?;
        if allowed {
            return Ok(None);
        }
        Ok(Some(ToolOutput {
            code: Code::HookBlocked,
            text: format!(
                "the pre-tool hook refused this call ({}); nothing was run.\n{}",
                out.code, out.text
            ),
            facts: Facts::Hook(HookFacts {
                ran: false,
                hook: Box::new(out.facts),
            }),
        }))
    }
}

fn succeeded(out: &ToolOutput) -> bool {
    // A call killed by the turn's cancellation (`facts.cancelled`) failed; `bash_cancel`'s own
    // CANCELLED (it stopped a background task as asked) succeeded.
    matches!(
        out.code,
        Code::Ok | Code::Started | Code::Running | Code::Cancelled
    ) && !out.facts.cancelled()
}

fn status_word(status: &ToolCallStatus) -> &'static str {
    match status {
        ToolCallStatus::Completed => "completed",
        ToolCallStatus::InProgress => "in_progress",
        ToolCallStatus::Pending => "pending",
        _ => "failed",
    }
}

fn parse_status(word: &str) -> ToolCallStatus {
    match word {
        "completed" => ToolCallStatus::Completed,
        _ => ToolCallStatus::Failed,
    }
}

/// The card title of a call.
fn title(tool: &str, args: &Value) -> String {
    let field = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    match Tool::from_name(tool) {
        Some(Tool::Bash) => field("command").to_owned(),
        Some(Tool::Read | Tool::Write | Tool::Edit) => format!("{tool} {}", field("path")),
        Some(Tool::BashOutput | Tool::BashCancel) => format!(
            "{tool} {}",
            args.get("task_id")
                .map(Value::to_string)
                .unwrap_or_default()
        ),
        None => tool.to_owned(),
    }
}

/// The file a read, write or edit call names, under the session's workspace root.
fn file_target(
    policy: &sandbox_policy::PolicyService,
    session: &sandbox_policy::Session,
    tool: &str,
    args: &Value,
) -> Option<PathBuf> {
    if !Tool::from_name(tool).is_some_and(Tool::names_file) {
        return None;
    }
    let path = args.get("path")?.as_str()?;
    let root = policy
        .resolve(Some(session), None)
        .ok()?
        .into_policy()
        .roots
        .workspace_root;
    Some(root.join(Path::new(path)))
}

/// Serves ACP on stdin/stdout until the editor closes the connection.
pub async fn serve(setup: AgentSetup) -> Result<(), Error> {
    let state = Arc::new(State {
        bridge: Mutex::new(setup.bridge),
        provider: setup.provider,
        hook: setup.pre_tool_hook,
        runtimes: Mutex::new(HashMap::new()),
    });
    let (s_new, s_load, s_set, s_prompt, s_cancel) = (
        Arc::clone(&state),
        Arc::clone(&state),
        Arc::clone(&state),
        Arc::clone(&state),
        Arc::clone(&state),
    );
    agent_client_protocol::Agent
        .v1()
        .name(AGENT_NAME)
        .on_receive_request(
            async move |_request: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new().load_session(true))
                        .agent_info(Implementation::new(AGENT_NAME, env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                let answer = lock(&s_new.bridge).new_session(&request.cwd);
                match answer {
                    Ok((id, options)) => {
                        responder.respond(NewSessionResponse::new(id).config_options(options))
                    }
                    Err(e) => responder.respond_with_error(wire_error(&e)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let id = request.session_id.0.to_string();
                if s_load.running_turn(&id).is_some() {
                    return responder.respond_with_error(
                        Error::new(
                            ErrorCode::INVALID_PARAMS,
                            format!("TURN_RUNNING: session {id:?} has a prompt running"),
                        )
                        .data(json!({ "code": "TURN_RUNNING" })),
                    );
                }
                let loaded = lock(&s_load.bridge).load_session(&id, &request.cwd);
                for warning in lock(&s_load.bridge).take_warnings() {
                    eprintln!("sandbox-agent: warning: {warning}");
                }
                match loaded {
                    Ok(options) => match s_load.replay(&cx, &id) {
                        Ok(()) => {
                            responder.respond(LoadSessionResponse::new().config_options(options))
                        }
                        Err(e) => responder.respond_with_error(e),
                    },
                    Err(e) => responder.respond_with_error(wire_error(&e)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest, responder, _cx| {
                let answer = lock(&s_set.bridge).set_config_option(
                    &request.session_id.0,
                    &request.config_id.0,
                    &request.value,
                );
                match answer {
                    Ok(options) => responder.respond(SetSessionConfigOptionResponse::new(options)),
                    Err(e) => responder.respond_with_error(wire_error(&e)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let state = Arc::clone(&s_prompt);
                let handle = tokio::runtime::Handle::current();
                let turn_cx = cx.clone();
                cx.spawn(async move {
                    let ran = tokio::task::spawn_blocking(move || {
                        state.run_turn(request, turn_cx, handle)
                    })
                    .await;
                    match ran {
                        Ok(Ok(response)) => responder.respond(response),
                        Ok(Err(e)) => responder.respond_with_error(e),
                        Err(e) => responder.respond_with_internal_error(e),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: CancelNotification, _cx| {
                let id = note.session_id.0.to_string();
                if let Some(turn) = s_cancel.running_turn(&id) {
                    turn.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(agent_client_protocol::Stdio::new())
        .await
}
