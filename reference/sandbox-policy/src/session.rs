//! A session and its event log: the knob events are the store of per-session modes
//! (`effective = last event ?? config default`), and the approval events make every escalation
//! reconstructible from the log alone.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use sandbox::{NetworkMode, PinnedDir, SandboxMode};
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Event {
    /// The session was created: its workspace root, pinned (canonical path and directory
    /// identity). Always the first event of a session created by the bridge; a load with another
    /// cwd is refused against it.
    #[serde(rename = "session/header")]
    SessionHeader {
        /// The cwd the session was created with.
        cwd: PathBuf,
        /// The directory it was then.
        pin: PinnedDir,
    },
    /// The user's prompt text of a turn.
    #[serde(rename = "user/message")]
    UserMessage {
        /// The text.
        text: String,
    },
    /// Text the agent said to the user.
    #[serde(rename = "agent/message")]
    AgentMessage {
        /// The text.
        text: String,
    },
    /// The model asked for a tool call (announced to the editor as `tool_call`).
    #[serde(rename = "tool/call")]
    ToolCall {
        /// Its id, unique within the session (across prompts and restarts).
        call_id: String,
        /// The tool.
        tool: String,
        /// Its arguments, as the model sent them.
        input: serde_json::Value,
    },
    /// A tool call's result (its final status on the editor's card).
    #[serde(rename = "tool/result")]
    ToolResult {
        /// The call.
        call_id: String,
        /// The stable code (`OK`, `DENIED`, ...).
        code: String,
        /// `completed` or `failed` (ACP tool call statuses).
        status: String,
        /// What the model read.
        text: String,
    },
    /// A hook command ran before a tool call, through the confined shell.
    #[serde(rename = "hook/ran")]
    HookRan {
        /// The tool call it ran for.
        call_id: String,
        /// The code of the hook's own run (`OK`, `DENIED`, `SANDBOX_UNAVAILABLE`, ...).
        code: String,
        /// Its exit code, when it exited.
        exit_code: Option<i32>,
        /// Whether the tool call was allowed to proceed.
        allowed: bool,
    },
    /// A coalesced approval-policy notice delivered to the model at a pre-step.
    #[serde(rename = "notice")]
    Notice {
        /// Who changed the policy: `user` or `operator`.
        source: String,
        /// The policy now in force.
        policy: ApprovalPolicy,
        /// The sentence the model read.
        text: String,
    },
    /// A turn opened (a prompt was submitted).
    #[serde(rename = "turn/started")]
    TurnStarted,
    /// The open turn closed.
    #[serde(rename = "turn/ended")]
    TurnEnded,
    /// The exact prompt the model was sent for one request.
    #[serde(rename = "request/header")]
    RequestHeader {
        /// The system prompt text.
        prompt: String,
    },
    /// The session's sandbox mode knob was switched.
    #[serde(rename = "sandbox/mode")]
    SandboxMode {
        /// The new mode.
        mode: SandboxMode,
    },
    /// The session's network knob was switched.
    #[serde(rename = "sandbox/network")]
    SandboxNetwork {
        /// The new network mode.
        network: NetworkMode,
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
        /// The command or path the question was about (absent in logs written before it was
        /// recorded): a rejected subject is never asked about again in the session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
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

/// A session: its immutable cwd, pinned to the directory it was when the session was opened, and
/// its event log (in memory, or durable on disk).
#[derive(Debug)]
pub struct Session {
    id: String,
    cwd: PathBuf,
    pin: Option<PinnedDir>,
    events: Mutex<Vec<Event>>,
    log: Option<crate::log::SessionLog>,
}

impl Session {
    /// The pinned workspace recorded by the log's `session/header`, if it has one.
    pub fn header(&self) -> Option<(PathBuf, PinnedDir)> {
        self.with_events(|events| {
            events.iter().find_map(|e| match e {
                Event::SessionHeader { cwd, pin } => Some((cwd.clone(), pin.clone())),
                _ => None,
            })
        })
    }

    /// A new session with an empty log.
    pub fn new(id: impl Into<String>, cwd: &Path) -> Session {
        Session {
            id: id.into(),
            cwd: cwd.to_path_buf(),
            pin: PinnedDir::pin(cwd).ok(),
            events: Mutex::new(Vec::new()),
            log: None,
        }
    }

    /// A durable session backed by the JSON-lines log at `path`: its events are replayed (a torn
    /// last line from a crash is dropped and reported), and every append is written and synced
    /// before it counts.
    pub fn open(
        id: impl Into<String>,
        cwd: &Path,
        path: &Path,
    ) -> Result<(Session, crate::log::LoadReport), crate::log::LogError> {
        let (log, report) = crate::log::SessionLog::open(path)?;
        // A session whose log records its header keeps the workspace pinned at creation, whatever
        // cwd the caller names now (the caller refuses a different one).
        let header = report.events.iter().find_map(|e| match e {
            Event::SessionHeader { cwd, pin } => Some((cwd.clone(), pin.clone())),
            _ => None,
        });
        let (cwd, pin) = match header {
            Some((cwd, pin)) => (cwd, Some(pin)),
            None => (cwd.to_path_buf(), PinnedDir::pin(cwd).ok()),
        };
        let session = Session {
            id: id.into(),
            cwd,
            pin,
            events: Mutex::new(report.events.clone()),
            log: Some(log),
        };
        Ok((session, report))
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its working directory (the workspace boundary of its calls).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The directory its cwd was when the session was opened (`None` if it did not exist then:
    /// every call then fails on the missing workspace). A call whose cwd now resolves elsewhere
    /// fails closed with `WORKSPACE_MOVED`.
    pub fn pin(&self) -> Option<&PinnedDir> {
        self.pin.as_ref()
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

    /// Runs `f` over the log without copying it (folds on long sessions).
    pub fn with_events<R>(&self, f: impl FnOnce(&[Event]) -> R) -> R {
        f(&self.log())
    }

    /// Appends one event: to the durable log first (when there is one), then to memory, so
    /// memory never holds an event the disk does not.
    pub fn append(&self, event: Event) -> Result<(), crate::log::LogError> {
        let mut events = self.log();
        if let Some(log) = &self.log {
            log.append(&event)?;
        }
        events.push(event);
        Ok(())
    }

    /// THE write path of the sandbox mode knob: a switch is its event.
    pub fn set_sandbox_mode(&self, mode: SandboxMode) -> Result<(), crate::log::LogError> {
        self.append(Event::SandboxMode { mode })
    }

    /// THE write path of the network knob: a switch is its event.
    pub fn set_network(&self, network: NetworkMode) -> Result<(), crate::log::LogError> {
        self.append(Event::SandboxNetwork { network })
    }

    /// THE write path of the approval policy knob.
    pub fn set_approval_policy(&self, policy: ApprovalPolicy) -> Result<(), crate::log::LogError> {
        self.append(Event::ApprovalPolicy { policy })
    }
}

/// The session's sandbox mode override: its last `sandbox/mode` event.
pub fn effective_sandbox_mode(events: &[Event]) -> Option<SandboxMode> {
    events.iter().rev().find_map(|e| match e {
        Event::SandboxMode { mode } => Some(*mode),
        _ => None,
    })
}

/// The session's network override: its last `sandbox/network` event.
pub fn effective_network(events: &[Event]) -> Option<NetworkMode> {
    events.iter().rev().find_map(|e| match e {
        Event::SandboxNetwork { network } => Some(*network),
        _ => None,
    })
}

/// The mode a user already rejected escalating `subject` of `tool` to in this session, if they
/// did: the RFC's "rejection ... permits no re-ask".
pub fn rejected_escalation(events: &[Event], tool: &str, subject: &str) -> Option<SandboxMode> {
    events.iter().enumerate().rev().find_map(|(i, e)| match e {
        Event::ApprovalAsked {
            call_id,
            tool: t,
            mode,
            subject: Some(s),
            ..
        } if t == tool && s == subject => events[i + 1..].iter().find_map(|d| match d {
            Event::ApprovalDecided {
                call_id: c,
                outcome,
            } if c == call_id && outcome == "rejected" => Some(*mode),
            _ => None,
        }),
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
