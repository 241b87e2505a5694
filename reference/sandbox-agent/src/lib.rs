//! The bridge between an editor (ACP) and the policy home.
//!
//! The editor sees one `permission` select (category `mode`) whose options are the deployment's
//! presets and whose current value is folded from the session log (plus what is pending).
//! Turn enclosure is the commit boundary: a switch during an open turn is appended at once; an
//! idle switch is held on the bridge's session record and anchored at the next prompt submission,
//! inside the new turn and before anything is assembled or executed; last write wins per knob, so
//! N idle flips anchor at most one event per knob and a net-zero sequence (or an echo of the
//! current value) anchors none. A crash before anchoring loses the pending switch, and
//! `session/load` reports the durable truth.
//!
//! Every model request of a turn is preceded by [`Bridge::pre_step`]: the coalesced
//! approval-policy notice owed since the last request header is delivered there (and logged as a
//! `notice` event), so a mid-turn switch is narrated before the very next request. A session's
//! workspace root is pinned in its `session/header` event when it is created; a load naming
//! another cwd is refused. The preset layer is composed over an approval service and a confining
//! shell or not at all ([`Composition`]). [`server`] serves all of this over ACP on stdio, and
//! [`cli`] is the `sandbox-agent` command line over it ([`model`]: the scripted model).

pub mod cli;
pub mod model;
pub mod server;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption,
};
use sandbox::{NetworkMode, PinnedDir, ProviderPolicy, SandboxMode};
use sandbox_policy::presets::{CUSTOM, Knobs, PresetTable};
use sandbox_policy::prompt::{Notice, approval_section, pending_notice};
use sandbox_policy::{ApprovalPolicy, Event, PolicyService, Session};

/// The id of the permission select.
pub const PERMISSION_CONFIG_ID: &str = "permission";

/// The base system prompt every request starts from (the sandbox mode is never stated).
pub const BASE_PROMPT: &str = "You are a coding agent. Use the tools to do what the user asks.";

/// Why the bridge refused a request. Each has a stable code; all are invalid-params on the wire.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// No such session (or it was never loaded in this process).
    #[error("UNKNOWN_SESSION: no session {0:?}")]
    UnknownSession(String),
    /// No config option with this id.
    #[error("UNKNOWN_CONFIG_ID: no config option {0:?}; the only one is \"permission\"")]
    UnknownConfigId(String),
    /// Not one of the select's values (`custom` included: it can only be switched away from).
    #[error("UNKNOWN_CONFIG_VALUE: {value:?} is not a permission preset; choose one of {choices}")]
    UnknownValue {
        /// What was sent.
        value: String,
        /// The presets, comma separated.
        choices: String,
    },
    /// A boolean (or other non-select value) for the select.
    #[error("NOT_A_SELECT_VALUE: the permission option takes a preset id, not {0}")]
    NotSelectValue(String),
    /// The session log could not be read or written.
    #[error("SESSION_LOG: {0}")]
    Log(#[from] sandbox_policy::log::LogError),
    /// The session's cwd cannot be used.
    #[error("BAD_CWD: {0}")]
    BadCwd(String),
    /// `session/load` named another cwd than the one the session was created with: the workspace
    /// root is pinned at creation and never moves.
    #[error(
        "SESSION_CWD_MISMATCH: session {id:?} was created in {pinned:?}; it cannot be loaded in {given:?} (the workspace root is pinned when a session is created)"
    )]
    CwdMismatch {
        /// The session.
        id: String,
        /// The pinned root.
        pinned: PathBuf,
        /// The cwd the load named.
        given: PathBuf,
    },
    /// The composition cannot carry the permission select (a partially composed preset layer).
    #[error("BAD_COMPOSITION: {0}")]
    Composition(String),
    /// The sessions directory (or a log in it) could be written by a confined command of a
    /// session this agent serves, or by someone else ([`sandbox::check_state_dir`]).
    #[error(transparent)]
    StateDir(#[from] sandbox::StateDirError),
}

impl BridgeError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            BridgeError::UnknownSession(_) => "UNKNOWN_SESSION",
            BridgeError::UnknownConfigId(_) => "UNKNOWN_CONFIG_ID",
            BridgeError::UnknownValue { .. } => "UNKNOWN_CONFIG_VALUE",
            BridgeError::NotSelectValue(_) => "NOT_A_SELECT_VALUE",
            BridgeError::Log(_) => "SESSION_LOG",
            BridgeError::BadCwd(_) => "BAD_CWD",
            BridgeError::CwdMismatch { .. } => "SESSION_CWD_MISMATCH",
            BridgeError::Composition(_) => "BAD_COMPOSITION",
            BridgeError::StateDir(e) => e.code(),
        }
    }
}

/// Knob values held on the record while idle (`None`: nothing pending for that knob).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pending {
    mode: Option<SandboxMode>,
    approval: Option<ApprovalPolicy>,
    network: Option<NetworkMode>,
}

struct Record {
    session: Arc<Session>,
    pending: Pending,
}

/// What the permission select is composed over. The RFC: the preset layer "requires the approval
/// seam and a confining executor, so a partially composed preset layer fails loud at load".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Composition {
    /// An approval service is mounted (escalations can be put to a human).
    pub approval: bool,
    /// The shell executor confines (a sandbox mode means something).
    pub confining: bool,
}

impl Composition {
    /// The complete composition: an approval service over a confining executor.
    pub const COMPLETE: Composition = Composition {
        approval: true,
        confining: true,
    };
}

/// What a pre-step delivered before one model request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepStart {
    /// The system prompt of this request (recorded as its request header).
    pub system_prompt: String,
    /// The coalesced approval-policy notice delivered at this pre-step, if one was owed.
    pub notice: Option<Notice>,
}

/// What a prompt submission did before the model runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnStart {
    /// The system prompt sent with this request (recorded as its request header).
    pub system_prompt: String,
    /// The coalesced approval-policy notice delivered before the first step, if one was owed.
    pub notice: Option<Notice>,
    /// The knob events anchored by this submission.
    pub anchored: Vec<Event>,
}

/// What the sessions directory is called in errors.
const SESSIONS_DIR: &str = "the sessions directory";

/// The policies whose payloads must never reach the sessions directory: the deployment's, and
/// the one of a session in `cwd` when one is given, each taken in `workspace-write` by
/// [`sandbox::check_state_dir`] (a preset switch or one approved escalation can bring any session
/// there; `danger-full-access` is unconfined and reaches everything by the person's choice).
fn served_policies(policy: &PolicyService, cwd: Option<&Path>) -> Vec<ProviderPolicy> {
    let Ok(stamp) = policy.resolve(None, Some(SandboxMode::WorkspaceWrite)) else {
        return Vec::new();
    };
    let deployment = stamp.into_policy();
    let mut policies: Vec<ProviderPolicy> = deployment.for_provider().into_iter().collect();
    if let Some(cwd) = cwd {
        let mut session = deployment;
        session.roots.workspace_root =
            sandbox::canonical_path(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        session.roots.workspace_pin = None;
        policies.extend(session.for_provider());
    }
    policies
}

/// Checks `dir` as the sessions directory of `policy` (outside every writable root of the
/// deployment, `/tmp` and `$TMPDIR` included, and not writable by others), creates it private
/// (0700) when it does not exist, checks it again as it now is, and returns its canonical path:
/// the one to use from now on. Nothing is created when the first check fails.
pub fn prepare_sessions_dir(policy: &PolicyService, dir: &Path) -> Result<PathBuf, BridgeError> {
    use std::os::unix::fs::DirBuilderExt;
    let policies = served_policies(policy, None);
    let resolved = sandbox::check_state_dir(SESSIONS_DIR, dir, &policies)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&resolved)
        .map_err(|e| {
            BridgeError::Log(sandbox_policy::log::LogError::Io {
                path: resolved.clone(),
                source: e,
            })
        })?;
    // Made now, or there already (possibly made by someone else first): judged as it is.
    Ok(sandbox::check_state_dir(
        SESSIONS_DIR,
        &resolved,
        &policies,
    )?)
}

/// The bridge: the policy home, the preset table, and one record per live session.
pub struct Bridge {
    policy: PolicyService,
    presets: PresetTable,
    dir: PathBuf,
    records: HashMap<String, Record>,
    warnings: Vec<String>,
}

impl Bridge {
    /// A bridge keeping session logs in `dir`, composed over `composition`. A preset layer
    /// without an approval service or over an executor that does not confine fails here, at load.
    pub fn new(
        policy: PolicyService,
        presets: PresetTable,
        dir: &Path,
        composition: Composition,
    ) -> Result<Bridge, BridgeError> {
        let mut missing = Vec::new();
        if !composition.approval {
            missing.push("an approval service (escalations could never be put to the user)");
        }
        if !composition.confining {
            missing
                .push("a confining shell executor (the presets' sandbox modes would mean nothing)");
        }
        if !missing.is_empty() {
            return Err(BridgeError::Composition(format!(
                "the permission presets require {}",
                missing.join(" and ")
            )));
        }
        // No payload of this deployment may reach the logs that decide its sessions' modes.
        let dir = sandbox::check_state_dir(SESSIONS_DIR, dir, &served_policies(&policy, None))?;
        Ok(Bridge {
            policy,
            presets,
            dir,
            records: HashMap::new(),
            warnings: Vec::new(),
        })
    }

    /// Warnings since the last call (a torn log tail dropped on load), for the operator.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn log_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    /// Refuses a session in `cwd` whose writable roots would hold the sessions directory (a
    /// workspace around it, say), checked when a session is created, loaded, and at every turn.
    fn check_sessions_dir(&self, cwd: &Path) -> Result<(), BridgeError> {
        sandbox::check_state_dir(
            SESSIONS_DIR,
            &self.dir,
            &served_policies(&self.policy, Some(cwd)),
        )?;
        Ok(())
    }

    fn record(&self, id: &str) -> Result<&Record, BridgeError> {
        self.records
            .get(id)
            .ok_or_else(|| BridgeError::UnknownSession(id.to_owned()))
    }

    /// Creates a session whose boundary is `cwd`.
    pub fn new_session(
        &mut self,
        cwd: &Path,
    ) -> Result<(String, Vec<SessionConfigOption>), BridgeError> {
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(BridgeError::BadCwd(format!(
                "{} is not an absolute directory",
                cwd.display()
            )));
        }
        self.check_sessions_dir(cwd)?;
        let mut n = self.records.len() + 1;
        let id = loop {
            let candidate = format!("session-{n}");
            if !self.records.contains_key(&candidate) && !self.log_path(&candidate).exists() {
                break candidate;
            }
            n += 1;
        };
        let pin = PinnedDir::pin(cwd).map_err(|e| BridgeError::BadCwd(e.to_string()))?;
        let (session, _) = Session::open(id.clone(), cwd, &self.log_path(&id))?;
        session.append(Event::SessionHeader {
            cwd: cwd.to_path_buf(),
            pin,
        })?;
        self.records.insert(
            id.clone(),
            Record {
                session: Arc::new(session),
                pending: Pending::default(),
            },
        );
        let options = self.options(&id)?;
        Ok((id, options))
    }

    /// Loads a session from its durable log (nothing pending survives a restart).
    pub fn load_session(
        &mut self,
        id: &str,
        cwd: &Path,
    ) -> Result<Vec<SessionConfigOption>, BridgeError> {
        let path = self.log_path(id);
        if !path.is_file() || id.contains(['/', '\0']) {
            return Err(BridgeError::UnknownSession(id.to_owned()));
        }
        self.check_sessions_dir(cwd)?;
        // A log someone else may write (or a symlink put in its place) is not the durable truth.
        sandbox::check_state_file("a session log", &path)?;
        let (session, report) = Session::open(id.to_owned(), cwd, &path)?;
        if let Some((_, pin)) = session.header() {
            let given = sandbox::canonical_path(cwd).unwrap_or_else(|_| cwd.to_path_buf());
            if given != pin.path {
                return Err(BridgeError::CwdMismatch {
                    id: id.to_owned(),
                    pinned: pin.path,
                    given: cwd.to_path_buf(),
                });
            }
        }
        self.warnings.extend(report.dropped_tail);
        self.records.insert(
            id.to_owned(),
            Record {
                session: Arc::new(session),
                pending: Pending::default(),
            },
        );
        self.options(id)
    }

    /// The durable knob values of a session (its log folded over the config defaults).
    fn durable(&self, record: &Record) -> Knobs {
        self.policy.knobs(Some(&record.session))
    }

    /// What the editor sees: the durable values overlaid with what is pending.
    pub fn current(&self, id: &str) -> Result<Knobs, BridgeError> {
        let record = self.record(id)?;
        let durable = self.durable(record);
        Ok(Knobs {
            mode: record.pending.mode.unwrap_or(durable.mode),
            approval: record.pending.approval.unwrap_or(durable.approval),
            network: record.pending.network.unwrap_or(durable.network),
        })
    }

    /// The session's complete config-option state.
    pub fn options(&self, id: &str) -> Result<Vec<SessionConfigOption>, BridgeError> {
        let current = self.presets.current(self.current(id)?).to_owned();
        let mut choices: Vec<SessionConfigSelectOption> = self
            .presets
            .presets()
            .iter()
            .map(|p| SessionConfigSelectOption::new(p.id.clone(), p.name.clone()))
            .collect();
        if current == CUSTOM {
            choices.push(SessionConfigSelectOption::new(CUSTOM, "Custom"));
        }
        let mut option =
            SessionConfigOption::select(PERMISSION_CONFIG_ID, "Permissions", current, choices);
        option.category = Some(SessionConfigOptionCategory::Mode);
        option.description =
            Some("How much the agent may change without asking, and whether it asks.".into());
        Ok(vec![option])
    }

    /// True while the session's last turn boundary is a start.
    pub fn turn_open(&self, id: &str) -> Result<bool, BridgeError> {
        Ok(self.record(id)?.session.with_events(|events| {
            events
                .iter()
                .rev()
                .find_map(|e| match e {
                    Event::TurnStarted => Some(true),
                    Event::TurnEnded => Some(false),
                    _ => None,
                })
                .unwrap_or(false)
        }))
    }

    /// `session/set_config_option`: validates, then appends (open turn) or holds (idle); returns
    /// the complete refreshed state.
    pub fn set_config_option(
        &mut self,
        id: &str,
        config_id: &str,
        value: &SessionConfigOptionValue,
    ) -> Result<Vec<SessionConfigOption>, BridgeError> {
        self.record(id)?;
        if config_id != PERMISSION_CONFIG_ID {
            return Err(BridgeError::UnknownConfigId(config_id.to_owned()));
        }
        let Some(value) = value.as_value_id() else {
            return Err(BridgeError::NotSelectValue(
                serde_json::to_string(value).unwrap_or_else(|_| "that value".into()),
            ));
        };
        let unknown = || BridgeError::UnknownValue {
            value: value.0.to_string(),
            choices: self
                .presets
                .presets()
                .iter()
                .map(|p| p.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        };
        let preset = self
            .presets
            .presets()
            .iter()
            .find(|p| *p.id == *value.0)
            .cloned()
            .ok_or_else(unknown)?;
        if self.turn_open(id)? {
            let events = self
                .presets
                .switch(&preset.id, self.current(id)?)
                .map_err(|_| unknown())?;
            let record = self.record(id)?;
            for e in events {
                record.session.append(e)?;
            }
        } else {
            let durable = {
                let record = self.record(id)?;
                self.durable(record)
            };
            // What selecting the preset would write now: one value per knob that changes.
            let mut pending = Pending::default();
            for event in self
                .presets
                .switch(&preset.id, durable)
                .map_err(|_| unknown())?
            {
                match event {
                    Event::SandboxMode { mode } => pending.mode = Some(mode),
                    Event::ApprovalPolicy { policy } => pending.approval = Some(policy),
                    Event::SandboxNetwork { network } => pending.network = Some(network),
                    _ => {}
                }
            }
            if let Some(record) = self.records.get_mut(id) {
                record.pending = pending;
            }
        }
        self.options(id)
    }

    /// A prompt submission: opens the turn, anchors what is pending (at most one event per knob),
    /// owes the coalesced notice, and records the exact system prompt as the request header.
    pub fn begin_turn(&mut self, id: &str) -> Result<TurnStart, BridgeError> {
        let durable = {
            let record = self.record(id)?;
            // Before anything of the turn is written or run: the session's policy (its mode
            // included, once anchored) must still leave the sessions directory out of reach.
            self.check_sessions_dir(record.session.cwd())?;
            self.durable(record)
        };
        let pending = self
            .records
            .get_mut(id)
            .map(|r| std::mem::take(&mut r.pending))
            .unwrap_or_default();
        let record = self.record(id)?;
        record.session.append(Event::TurnStarted)?;
        let mut anchored = Vec::new();
        if let Some(m) = pending.mode.filter(|m| *m != durable.mode) {
            anchored.push(Event::SandboxMode { mode: m });
        }
        if let Some(a) = pending.approval.filter(|a| *a != durable.approval) {
            anchored.push(Event::ApprovalPolicy { policy: a });
        }
        if let Some(n) = pending.network.filter(|n| *n != durable.network) {
            anchored.push(Event::SandboxNetwork { network: n });
        }
        for e in &anchored {
            record.session.append(e.clone())?;
        }
        let step = self.pre_step(id)?;
        Ok(TurnStart {
            system_prompt: step.system_prompt,
            notice: step.notice,
            anchored,
        })
    }

    /// The pre-step before every model request of an open turn (the first one included): the
    /// coalesced approval-policy notice owed since the last request header is delivered now and
    /// recorded as a `notice` event, then the exact system prompt is recorded as this request's
    /// header. A switch made mid-turn is therefore narrated before the very next model request
    /// (the RFC's mid-turn immediacy bound), not only at the next prompt.
    pub fn pre_step(&self, id: &str) -> Result<StepStart, BridgeError> {
        let record = self.record(id)?;
        let default_approval = self.policy.default_approval();
        let notice = record
            .session
            .with_events(|events| pending_notice(events, default_approval));
        let now = self.policy.effective_approval(Some(&record.session));
        let mut system_prompt = BASE_PROMPT.to_owned();
        if let Some(section) = approval_section(now) {
            system_prompt.push_str("\n\n");
            system_prompt.push_str(section);
        }
        if let Some(n) = &notice {
            record.session.append(Event::Notice {
                source: match n.source {
                    sandbox_policy::prompt::Source::User => "user".into(),
                    sandbox_policy::prompt::Source::Operator => "operator".into(),
                },
                policy: n.policy,
                text: n.text.clone(),
            })?;
            system_prompt.push_str("\n\nNotice: ");
            system_prompt.push_str(&n.text);
        }
        record.session.append(Event::RequestHeader {
            prompt: system_prompt.clone(),
        })?;
        Ok(StepStart {
            system_prompt,
            notice,
        })
    }

    /// Appends one event to the session's log (tool calls, results, messages).
    pub fn record_event(&self, id: &str, event: Event) -> Result<(), BridgeError> {
        self.record(id)?.session.append(event)?;
        Ok(())
    }

    /// The next tool call id of the session: unique within it, across prompts and restarts,
    /// because it is counted from the durable log.
    pub fn next_call_id(&self, id: &str) -> Result<String, BridgeError> {
        let n = self.record(id)?.session.with_events(|events| {
            events
                .iter()
                .filter(|e| matches!(e, Event::ToolCall { .. }))
                .count()
        });
        Ok(format!("call-{}", n + 1))
    }

    /// Closes the open turn.
    pub fn end_turn(&mut self, id: &str) -> Result<(), BridgeError> {
        self.record(id)?.session.append(Event::TurnEnded)?;
        Ok(())
    }

    /// The session's log, as recorded.
    pub fn events(&self, id: &str) -> Result<Vec<Event>, BridgeError> {
        Ok(self.record(id)?.session.events())
    }

    /// The live session (for the tools of a turn).
    pub fn session(&self, id: &str) -> Result<&Session, BridgeError> {
        Ok(&self.record(id)?.session)
    }

    /// The live session, shared (a turn runs its tools without holding the bridge).
    pub fn shared_session(&self, id: &str) -> Result<Arc<Session>, BridgeError> {
        Ok(Arc::clone(&self.record(id)?.session))
    }

    /// The policy home.
    pub fn policy(&self) -> &PolicyService {
        &self.policy
    }

    /// The policy a tool call in this session would run under now.
    pub fn effective_mode(&self, id: &str) -> Result<SandboxMode, BridgeError> {
        Ok(self.policy.effective_mode(Some(&self.record(id)?.session)))
    }
}
