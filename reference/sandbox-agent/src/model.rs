//! The scripted model and the ACP approval channel.
//!
//! The scripted model reads tool calls from the prompt, one per line: `tool <name> <json args>`
//! (for example `tool bash {"command":"make"}`), runs them in the turn through the reference tools
//! under the session's policy, and reports each result to the editor as an agent message. An
//! escalated call asks the editor with `session/request_permission` and waits for the answer.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SessionNotification, SessionUpdate,
    TextContent, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use sandbox_tools::approval::{ApprovalRequest, ApprovalService, Decision};
use serde_json::{Value, json};

/// The id of the "allow once" permission option.
pub const ALLOW_ONCE: &str = "allow-once";
/// The id of the "reject" permission option.
pub const REJECT_ONCE: &str = "reject-once";

/// The stdio connection, shared by the request loop and the approval channel: lines read while
/// waiting for an answer that belong to someone else wait in the backlog.
pub struct Wire<R, W> {
    reader: R,
    writer: W,
    backlog: VecDeque<Value>,
    next_id: u64,
}

impl<R: BufRead, W: Write> Wire<R, W> {
    /// A connection over `reader` and `writer`.
    pub fn new(reader: R, writer: W) -> Self {
        Wire {
            reader,
            writer,
            backlog: VecDeque::new(),
            next_id: 1,
        }
    }

    /// The next incoming message; `None` at end of input. A line that is not JSON yields an error
    /// value for the caller to answer.
    pub fn next_message(&mut self) -> Option<Result<Value, String>> {
        if let Some(m) = self.backlog.pop_front() {
            return Some(Ok(m));
        }
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) if line.trim().is_empty() => continue,
                Ok(_) => {
                    return Some(
                        serde_json::from_str(&line).map_err(|e| format!("parse error: {e}")),
                    );
                }
            }
        }
    }

    /// Writes one message.
    pub fn send(&mut self, message: &Value) -> std::io::Result<()> {
        writeln!(self.writer, "{message}")?;
        self.writer.flush()
    }

    /// Sends a request to the editor and waits for its answer (other messages are kept).
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = format!("agent-{}", self.next_id);
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .map_err(|e| e.to_string())?;
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return Err("the editor closed the connection".into()),
                Ok(_) if line.trim().is_empty() => continue,
                Ok(_) => {
                    let Ok(message) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                        return match (message.get("result"), message.get("error")) {
                            (Some(result), _) => Ok(result.clone()),
                            (None, Some(error)) => Err(error.to_string()),
                            (None, None) => Err("an answer with neither result nor error".into()),
                        };
                    }
                    self.backlog.push_back(message);
                }
            }
        }
    }
}

/// A connection shared between the request loop and the approval channel.
pub type SharedWire<R, W> = Arc<Mutex<Wire<R, W>>>;

/// Asks the editor through `session/request_permission`.
pub struct AcpApprover<R, W> {
    wire: SharedWire<R, W>,
    session: String,
}

impl<R, W> AcpApprover<R, W> {
    /// An approver for `session` over `wire`.
    pub fn new(wire: SharedWire<R, W>, session: &str) -> Self {
        AcpApprover {
            wire,
            session: session.to_owned(),
        }
    }
}

impl<R: BufRead + Send, W: Write + Send> ApprovalService for AcpApprover<R, W> {
    fn ask(&self, request: &ApprovalRequest) -> Decision {
        let question = RequestPermissionRequest::new(
            self.session.clone(),
            ToolCallUpdate::new(
                request.call_id.clone(),
                ToolCallUpdateFields::new()
                    .title(request.reason.clone())
                    .kind(if request.tool == "bash" {
                        ToolKind::Execute
                    } else {
                        ToolKind::Edit
                    })
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
        let Ok(params) = serde_json::to_value(&question) else {
            return Decision::Unavailable;
        };
        let answer = match self.wire.lock() {
            Ok(mut wire) => wire.request("session/request_permission", params),
            Err(_) => return Decision::Unavailable,
        };
        let Ok(response) = answer.and_then(|v| {
            serde_json::from_value::<RequestPermissionResponse>(v).map_err(|e| e.to_string())
        }) else {
            return Decision::Unavailable;
        };
        match response.outcome {
            RequestPermissionOutcome::Selected(s) if &*s.option_id.0 == ALLOW_ONCE => {
                Decision::AllowedOnce
            }
            RequestPermissionOutcome::Selected(_) => Decision::Rejected,
            RequestPermissionOutcome::Cancelled => Decision::Cancelled,
            _ => Decision::Unavailable,
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

/// The agent message reporting one tool result to the editor.
pub fn report(session: &str, tool: &str, code: &str, text: &str) -> SessionNotification {
    SessionNotification::new(
        session.to_owned(),
        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
            format!("{tool} -> {code}\n{text}"),
        )))),
    )
}
