//! The scripted model and the ACP approval channel.
//!
//! The scripted model reads tool calls from the prompt, one per line: `tool <name> <json args>`
//! (for example `tool bash {"command":"make"}`), runs them in the turn through the reference tools
//! under the session's policy, and reports each one to the editor as a tool call. An escalated
//! call asks the editor with `session/request_permission` about the announced call and waits for
//! the answer, or for the turn to be cancelled (then the answer is `cancelled`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use sandbox_tools::approval::{ApprovalRequest, ApprovalService, Decision};
use sandbox_tools::tool::{Tool, ToolKind as Kind};
use serde_json::{Value, json};

/// The id of the "allow once" permission option.
pub const ALLOW_ONCE: &str = "allow-once";
/// The id of the "reject" permission option.
pub const REJECT_ONCE: &str = "reject-once";

/// What the scripted model says to a prompt that asks for no tool call.
pub fn help() -> String {
    let tools: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
    format!(
        "I am the scripted model of the reference agent: I do not understand free text. Put one tool call per line in your prompt, `tool <name> <json arguments>`, for example `tool {} {{\"command\":\"ls\"}}`. Tools: {}; an escalation adds \"sandbox_permissions\" and \"justification\" to the arguments.",
        Tool::Bash,
        tools.join(", ")
    )
}

/// The cancel flag of one turn: set by `session/cancel`, read by the running tool call (its
/// process tree is killed) and by a pending permission request (answered as cancelled).
#[derive(Debug, Default)]
pub struct TurnControl {
    cancelled: Arc<AtomicBool>,
}

impl TurnControl {
    /// Cancels the turn.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// True once the turn was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// The flag the shell watches.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancelled)
    }

    /// Resolves once the turn is cancelled.
    pub async fn cancelled(&self) {
        while !self.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Asks the editor through `session/request_permission`, from the (blocking) thread of a turn.
/// One per session; each turn installs its own cancel flag.
pub struct AcpApprover {
    cx: ConnectionTo<Client>,
    runtime: tokio::runtime::Handle,
    session: String,
    turn: Mutex<Arc<TurnControl>>,
}

impl AcpApprover {
    /// An approver for `session` over `cx`.
    pub fn new(cx: ConnectionTo<Client>, runtime: tokio::runtime::Handle, session: &str) -> Self {
        AcpApprover {
            cx,
            runtime,
            session: session.to_owned(),
            turn: Mutex::new(Arc::default()),
        }
    }

    /// The turn whose cancellation answers a pending question as cancelled.
    pub fn set_turn(&self, turn: Arc<TurnControl>) {
        *self.turn.lock().unwrap_or_else(|p| p.into_inner()) = turn;
    }

    fn turn(&self) -> Arc<TurnControl> {
        Arc::clone(&self.turn.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The ACP tool kind of a reference tool.
pub fn tool_kind(tool: &str) -> ToolKind {
    match Tool::from_name(tool).map(Tool::kind) {
        Some(Kind::Execute) => ToolKind::Execute,
        Some(Kind::Read) => ToolKind::Read,
        Some(Kind::Edit) => ToolKind::Edit,
        Some(Kind::Other) | None => ToolKind::Other,
    }
}

impl ApprovalService for AcpApprover {
    fn ask(&self, request: &ApprovalRequest) -> Decision {
        let turn = self.turn();
        if turn.is_cancelled() {
            return Decision::Cancelled;
        }
        let question = RequestPermissionRequest::new(
            self.session.clone(),
            ToolCallUpdate::new(
                request.call_id.clone(),
                ToolCallUpdateFields::new()
                    .title(request.reason.clone())
                    .kind(tool_kind(&request.tool))
                    .raw_input(json!({
                        "tool": request.tool,
                        "subject": request.subject,
                        "sandbox_permissions": request.mode,
                        "justification": request.justification,
                    })),
            ),
            vec![
                PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        let answer = self.cx.send_request(question).block_task();
        let outcome = self.runtime.block_on(async move {
            tokio::select! {
                answer = answer => Some(answer),
                // Dropping the pending request sends `$/cancel_request` for it.
                () = turn.cancelled() => None,
            }
        });
        match outcome {
            None => Decision::Cancelled,
            Some(Err(_)) => Decision::Unavailable,
            Some(Ok(response)) => match response.outcome {
                RequestPermissionOutcome::Selected(s) if &*s.option_id.0 == ALLOW_ONCE => {
                    Decision::AllowedOnce
                }
                RequestPermissionOutcome::Selected(_) => Decision::Rejected,
                RequestPermissionOutcome::Cancelled => Decision::Cancelled,
                _ => Decision::Unavailable,
            },
        }
    }
}

/// The tool calls a scripted prompt asks for, in order.
pub fn scripted_calls(prompt: &[ContentBlock]) -> Vec<(String, Value)> {
    prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .flat_map(str::lines)
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("tool ")?;
            let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
            Some((
                name.to_owned(),
                serde_json::from_str(args).unwrap_or(Value::String(args.to_owned())),
            ))
        })
        .collect()
}

/// The prompt's text, as the user wrote it.
pub fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
