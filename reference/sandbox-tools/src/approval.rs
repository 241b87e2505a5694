//! The approval seam: how an escalated retry asks a human, and what the human answered.

use std::collections::VecDeque;
use std::sync::Mutex;

use sandbox::SandboxMode;
use serde::Serialize;

/// What the human is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalRequest {
    /// The session asking.
    pub session: String,
    /// The agent the request is routed through.
    pub agent: String,
    /// The tool call it is for.
    pub call_id: String,
    /// The tool (`bash`, `write`, `edit`).
    pub tool: String,
    /// The command or path.
    pub subject: String,
    /// The mode asked for.
    pub mode: SandboxMode,
    /// The model's justification.
    pub justification: String,
    /// The sentence shown to the user, built from the mode and the justification.
    pub reason: String,
}

/// The human's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Allowed, for this one call.
    AllowedOnce,
    /// Rejected.
    Rejected,
    /// The prompt was dismissed or the turn cancelled.
    Cancelled,
    /// The approval channel could not deliver the question.
    Unavailable,
}

/// Asks a human.
pub trait ApprovalService: Send + Sync {
    /// Asks and waits for the answer.
    fn ask(&self, request: &ApprovalRequest) -> Decision;
}

/// A scripted answerer (a fake human for tests and scenarios): answers with its decisions in
/// order and records every question. Asked more often than scripted, it answers `unavailable`.
#[derive(Debug, Default)]
pub struct ScriptedApprover {
    decisions: Mutex<VecDeque<Decision>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedApprover {
    /// An answerer that gives `decisions` in order.
    pub fn new(decisions: impl IntoIterator<Item = Decision>) -> ScriptedApprover {
        ScriptedApprover {
            decisions: Mutex::new(decisions.into_iter().collect()),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Every question asked so far.
    pub fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl ApprovalService for ScriptedApprover {
    fn ask(&self, request: &ApprovalRequest) -> Decision {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(request.clone());
        }
        self.decisions
            .lock()
            .ok()
            .and_then(|mut d| d.pop_front())
            .unwrap_or(Decision::Unavailable)
    }
}
