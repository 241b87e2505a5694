//! A session and its event log: the knob events are the store of per-session modes
//! (`effective = last event ?? config default`), and the approval events make every escalation
//! reconstructible from the log alone.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use sandbox::SandboxMode;
use serde::{Deserialize, Serialize};

/// Whether a human is asked before an escalated retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Ask the user.
    Ask,
    /// Never ask: every escalation is rejected automatically (and the model is told so).
    Never,
}

/// One event in a session's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// The session's sandbox mode knob was switched.
    #[serde(rename = "sandbox/mode")]
    SandboxMode {
        /// The new mode.
        mode: SandboxMode,
    },
    /// The session's approval policy knob was switched.
    #[serde(rename = "approval/policy")]
    ApprovalPolicy {
        /// The new policy.
        policy: ApprovalPolicy,
    },
    /// A human was asked to approve an escalated retry.
    #[serde(rename = "approval/asked")]
    ApprovalAsked {
        /// The tool call it was for.
        call_id: String,
        /// The tool.
        tool: String,
        /// The mode asked for.
        mode: SandboxMode,
        /// The reason shown to the user.
        reason: String,
    },
    /// The answer.
    #[serde(rename = "approval/decided")]
    ApprovalDecided {
        /// The tool call it was for.
        call_id: String,
        /// The outcome code (`granted`, `rejected`, `cancelled`, `unavailable`).
        outcome: String,
    },
}

/// A session: its immutable cwd and its event log.
#[derive(Debug)]
pub struct Session {
    id: String,
    cwd: PathBuf,
    events: Mutex<Vec<Event>>,
}

impl Session {
    /// A new session with an empty log.
    pub fn new(id: impl Into<String>, cwd: &Path) -> Session {
        Session {
            id: id.into(),
            cwd: cwd.to_path_buf(),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its working directory (the workspace boundary of its calls).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    fn log(&self) -> MutexGuard<'_, Vec<Event>> {
        // A panic while holding the log cannot leave a half-written event: appends are single
        // pushes, so the data is still consistent.
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A copy of the log.
    pub fn events(&self) -> Vec<Event> {
        self.log().clone()
    }

    /// Appends one event.
    pub fn append(&self, event: Event) {
        self.log().push(event);
    }

    /// THE write path of the sandbox mode knob: a switch is its event.
    pub fn set_sandbox_mode(&self, mode: SandboxMode) {
        self.append(Event::SandboxMode { mode });
    }

    /// THE write path of the approval policy knob.
    pub fn set_approval_policy(&self, policy: ApprovalPolicy) {
        self.append(Event::ApprovalPolicy { policy });
    }
}

/// The session's sandbox mode override: its last `sandbox/mode` event.
pub fn effective_sandbox_mode(events: &[Event]) -> Option<SandboxMode> {
    events.iter().rev().find_map(|e| match e {
        Event::SandboxMode { mode } => Some(*mode),
        _ => None,
    })
}

/// The session's approval policy override: its last `approval/policy` event.
pub fn effective_approval_policy(events: &[Event]) -> Option<ApprovalPolicy> {
    events.iter().rev().find_map(|e| match e {
        Event::ApprovalPolicy { policy } => Some(*policy),
        _ => None,
    })
}
