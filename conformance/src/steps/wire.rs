//! The `wire` step: the reference ACP bridge in-process, one sessions directory per case, checked
//! through its answers, the system prompt it records, and the session log files on disk.

use std::collections::HashMap;
use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    SessionConfigKind, SessionConfigOption, SessionConfigOptionValue, SessionConfigSelectOptions,
};
use sandbox::SandboxMode;
use sandbox_agent::{Bridge, Composition};
use sandbox_policy::presets::PresetTable;
use sandbox_policy::prompt::Source;
use sandbox_policy::{ApprovalPolicy, PolicyService};

use std::sync::Arc;

use sandbox_tools::approval::ScriptedApprover;
use sandbox_tools::fs::FileSystem;
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tools::{CallContext, Toolbox};

use crate::backends::Backend;
use crate::scenario::{Transport, WireAction, WireConfig, WireExpect, WireStep};
use crate::steps::StepError;

mod stdio;

/// One case's agent "process" and its sessions directory.
pub(super) struct Rig {
    _dir: tempfile::TempDir,
    sessions: PathBuf,
    workspace: PathBuf,
    bridge: Bridge,
    ids: HashMap<String, String>,
    /// The real agent binary, when the case runs over stdio.
    stdio: Option<stdio::StdioAgent>,
    /// Where the last `start` began: the processes of its calls have later pids.
    started: Option<crate::survivors::CallStart>,
}

/// The private temp area of the in-process agents of this harness process, as the agent binary
/// makes one when it starts (left for the next area made on the host to sweep once this process
/// is gone).
fn in_process_area() -> Result<sandbox::TempArea, StepError> {
    static AREA: std::sync::OnceLock<Result<sandbox_local::temp_area::TempAreaDir, String>> =
        std::sync::OnceLock::new();
    AREA.get_or_init(|| sandbox_local::temp_area::TempAreaDir::create().map_err(|e| e.to_string()))
        .as_ref()
        .map(|a| a.temp_area())
        .map_err(|e| StepError::Harness(format!("cannot make the agent's temp area: {e}")))
}

fn start(
    sessions: &std::path::Path,
    workspace: &std::path::Path,
    config: &WireConfig,
) -> Result<Bridge, StepError> {
    let mode = config.mode.unwrap_or(SandboxMode::ReadOnly);
    let approval = config.approval.unwrap_or(ApprovalPolicy::Ask);
    let network = config.network.unwrap_or_default();
    let policy = PolicyService::new(mode, workspace)
        .map_err(StepError::harness)?
        .with_temp_area(in_process_area()?)
        .with_default_approval(approval)
        .with_default_network(network);
    let presets = PresetTable::standard(mode, approval)
        .map_err(StepError::harness)?
        .with_default_network(network);
    Bridge::new(
        policy,
        presets,
        sessions,
        Composition {
            approval: config.approval_service.unwrap_or(true),
            confining: config.confining.unwrap_or(true),
        },
    )
    .map_err(|e| StepError::Unmet(e.code().to_owned()))
}

impl Rig {
    fn new(config: &WireConfig, backend: &Backend) -> Result<Rig, StepError> {
        // Outside /tmp: /tmp is writable in workspace-write anyway, so a workspace under it would
        // make "the workspace was honoured" and "/tmp is writable" look the same.
        let dir = tempfile::Builder::new()
            .prefix("anchoring-")
            .tempdir_in("/var/tmp")
            .map_err(|e| {
                StepError::Harness(format!(
                    "cannot make the case's directory under /var/tmp: {e}"
                ))
            })?;
        let sessions = dir.path().join("sessions");
        let workspace = dir.path().join("ws");
        for d in [&sessions, &workspace] {
            std::fs::create_dir_all(d).map_err(StepError::harness)?;
        }
        let bridge = start(&sessions, &workspace, config)?;
        let stdio = match config.transport.unwrap_or(Transport::InProcess) {
            Transport::InProcess => None,
            Transport::Stdio => Some(stdio::StdioAgent::start(
                &sessions, &workspace, config, backend,
            )?),
        };
        Ok(Rig {
            _dir: dir,
            sessions,
            workspace,
            bridge,
            ids: HashMap::new(),
            stdio,
            started: None,
        })
    }

    /// The session's event types, read back from its log file. A missing log is an error, never
    /// an empty one (`log: []` must not pass when nothing was written at all).
    fn log_types(&self, id: &str) -> Result<Vec<String>, StepError> {
        let path = self.sessions.join(format!("{id}.jsonl"));
        let text = std::fs::read_to_string(&path).map_err(|e| {
            StepError::Harness(format!("no session log at {}: {e}", path.display()))
        })?;
        text.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .map_err(|e| StepError::Harness(format!("log line {l:?}: {e}")))
                    .map(|v| v["type"].as_str().unwrap_or("?").to_owned())
            })
            .collect()
    }

    /// Checks the `log` and `knob_events` expectations against session `name`'s log on disk.
    fn check_log(&self, name: &str, expect: &WireExpect) -> Result<(), StepError> {
        if expect.log.is_none() && expect.knob_events.is_none() {
            return Ok(());
        }
        let Some(id) = self.ids.get(name) else {
            return Err(StepError::Unmet(format!(
                "no session named {name:?} to read the log of"
            )));
        };
        let types = self.log_types(id)?;
        if let Some(want) = &expect.log
            && &types != want
        {
            return Err(StepError::Unmet(format!(
                "the log on disk should hold {want:?}, holds {types:?}"
            )));
        }
        let knobs = types.iter().filter(|t| is_knob_event(t)).count();
        if let Some(want) = expect.knob_events
            && knobs != want
        {
            return Err(StepError::Unmet(format!(
                "the log on disk should hold {want} knob event(s), holds {knobs}: {types:?}"
            )));
        }
        Ok(())
    }
}

fn select(options: &[SessionConfigOption]) -> Option<(String, Vec<String>)> {
    let option = options.iter().find(|o| o.id.0.as_ref() == "permission")?;
    match &option.kind {
        SessionConfigKind::Select(s) => {
            let values = match &s.options {
                SessionConfigSelectOptions::Ungrouped(list) => {
                    list.iter().map(|o| o.value.0.to_string()).collect()
                }
                _ => Vec::new(),
            };
            Some((s.current_value.0.to_string(), values))
        }
        _ => None,
    }
}

/// Runs a scripted bash call in the session through the reference tools, confined by `backend`.
fn tool_call(
    backend: &Backend,
    bridge: &Bridge,
    id: &str,
    command: &str,
) -> Result<String, StepError> {
    let provider = backend
        .provider
        .clone()
        .ok_or_else(|| StepError::harness("no sandbox on this host for scripted tool calls"))?;
    let tools = Toolbox::new(
        Arc::new(bridge.policy().clone()),
        Arc::new(ShellExecutor::confining(provider)),
        FileSystem::Fenced,
        // The preset layer is composed over an approval service (nobody answers here: a
        // scripted call that escalates is `unavailable`).
        Some(Arc::new(ScriptedApprover::new([]))),
    );
    let session = bridge.session(id).map_err(StepError::harness)?;
    let out = tools.call(
        sandbox_tools::tool::Tool::Bash.name(),
        &serde_json::json!({ "command": command }),
        &CallContext {
            session: Some(session),
            agent: Some("scripted-model"),
            call_id: "scripted",
        },
    );
    Ok(out.code.into())
}

#[expect(
    clippy::too_many_lines,
    reason = "one wire action and its expectations in the order the agent answers them; to split by action next"
)]
pub(super) fn run(
    backend: &Backend,
    step: &WireStep,
    rig: &mut Option<Rig>,
) -> Result<(), StepError> {
    if rig.is_none() {
        *rig = Some(Rig::new(
            step.config
                .as_ref()
                .filter(|_| step.action == WireAction::New)
                .unwrap_or(&WireConfig::default()),
            backend,
        )?);
    }
    let Some(rig) = rig.as_mut() else {
        return Err(StepError::unmet("no bridge"));
    };
    if rig.stdio.is_some() {
        return run_stdio(step, rig, backend);
    }
    if matches!(
        step.action,
        WireAction::Start | WireAction::Wait | WireAction::Cancel
    ) || step.ready.is_some()
        || step.expect.no_survivors
    {
        return Err(StepError::Unmet(format!(
            "{} exists over stdio only (config: {{ transport: stdio }})",
            step.action
        )));
    }
    let name = step.session.clone().unwrap_or_else(|| "a".into());
    let id = rig.ids.get(&name).cloned();
    let need_id = || {
        id.clone()
            .unwrap_or_else(|| format!("never-created-{name}"))
    };
    let expect: &WireExpect = &step.expect;
    let mut options: Option<Vec<SessionConfigOption>> = None;
    let mut started = None;
    let mut ran: Option<Result<String, StepError>> = None;
    let result: Result<(), sandbox_agent::BridgeError> = (|| {
        match step.action {
            WireAction::New => {
                let (new_id, opts) = rig.bridge.new_session(&rig.workspace)?;
                rig.ids.insert(name.clone(), new_id);
                options = Some(opts);
            }
            WireAction::Load => {
                options = Some(rig.bridge.load_session(&need_id(), &rig.workspace)?)
            }
            WireAction::Set => {
                let value = match (&step.value, step.value_bool) {
                    (_, Some(b)) => SessionConfigOptionValue::boolean(b),
                    (Some(v), None) => SessionConfigOptionValue::value_id(v.clone()),
                    (None, None) => SessionConfigOptionValue::value_id(String::new()),
                };
                let config_id = step
                    .config_id
                    .clone()
                    .unwrap_or_else(|| "permission".into());
                options = Some(
                    rig.bridge
                        .set_config_option(&need_id(), &config_id, &value)?,
                );
            }
            WireAction::Begin => started = Some(rig.bridge.begin_turn(&need_id())?),
            WireAction::Step => {
                let step = rig.bridge.pre_step(&need_id())?;
                started = Some(sandbox_agent::TurnStart {
                    system_prompt: step.system_prompt,
                    notice: step.notice,
                    anchored: Vec::new(),
                });
            }
            WireAction::End => rig.bridge.end_turn(&need_id())?,
            WireAction::Prompt => {
                started = Some(rig.bridge.begin_turn(&need_id())?);
                if let Some(command) = &step.run {
                    ran = Some(tool_call(backend, &rig.bridge, &need_id(), command));
                }
                rig.bridge.end_turn(&need_id())?;
            }
            // Handled below, or over stdio only (refused above).
            WireAction::Call
            | WireAction::Crash
            | WireAction::Restart
            | WireAction::Start
            | WireAction::Wait
            | WireAction::Cancel => {}
        }
        Ok(())
    })();
    match step.action {
        WireAction::Crash | WireAction::Restart => {
            let config = step.config.clone().unwrap_or_default();
            match start(&rig.sessions, &rig.workspace, &config) {
                Ok(bridge) => rig.bridge = bridge,
                // A composition the presets cannot ride fails loud at load: the new process
                // refuses to start, and the case ends there.
                Err(code) if expect.error.as_ref() == Some(&code.to_string()) => return Ok(()),
                Err(e) => return Err(StepError::Unmet(format!("the agent did not start: {e}"))),
            }
        }
        WireAction::Call => {
            let command = step
                .run
                .as_deref()
                .ok_or_else(|| StepError::harness("a call needs run"))?;
            if !rig
                .bridge
                .turn_open(&need_id())
                .map_err(StepError::harness)?
            {
                return Err(StepError::unmet(
                    "a scripted call happens inside an open turn (begin first)",
                ));
            }
            ran = Some(tool_call(backend, &rig.bridge, &need_id(), command));
        }
        _ => {}
    }
    match (&result, &expect.error) {
        (Err(e), Some(code)) if e.code() == code => {}
        (Err(e), _) => return Err(StepError::Unmet(format!("{} failed: {e}", step.action))),
        (Ok(()), Some(code)) => {
            return Err(StepError::Unmet(format!(
                "{} should fail with {code} but succeeded",
                step.action
            )));
        }
        (Ok(()), None) => {}
    }
    if let Some(want) = &expect.current {
        let got = options.as_deref().and_then(select).map(|(c, _)| c);
        if got.as_deref() != Some(want.as_str()) {
            return Err(StepError::Unmet(format!(
                "current value should be {want}, got {got:?}"
            )));
        }
    }
    if let Some(want) = &expect.options {
        let got = options.as_deref().and_then(select).map(|(_, v)| v);
        if got.as_ref() != Some(want) {
            return Err(StepError::Unmet(format!(
                "offered values should be {want:?}, got {got:?}"
            )));
        }
    }
    rig.check_log(&name, expect)?;
    if let Some(want) = expect.mode_now {
        let got = rig
            .bridge
            .effective_mode(&need_id())
            .map_err(StepError::harness)?;
        if got != want {
            return Err(StepError::Unmet(format!(
                "a call now would run under {got}, not {want}"
            )));
        }
    }
    if let Some(want) = expect.network_now {
        // Read now: a `new` step has just created the session.
        let id = rig.ids.get(&name).cloned().unwrap_or_else(need_id);
        let session = rig.bridge.session(&id).map_err(StepError::harness)?;
        let got = rig
            .bridge
            .policy()
            .resolve(Some(session), None)
            .map_err(StepError::harness)?
            .network;
        if got != want {
            return Err(StepError::Unmet(format!(
                "a call now would run with the network {got}, not {want}"
            )));
        }
    }
    if let Some(turn) = &started {
        if let Some(want) = &expect.notice {
            let got = match turn.notice.as_ref().map(|n| n.source) {
                None => "none",
                Some(Source::User) => "user",
                Some(Source::Operator) => "operator",
            };
            if got != want {
                return Err(StepError::Unmet(format!(
                    "the notice should come from {want}, got {got}: {:?}",
                    turn.notice
                )));
            }
        }
        for needle in &expect.prompt_contains {
            if !turn.system_prompt.contains(needle.as_str()) {
                return Err(StepError::Unmet(format!(
                    "the prompt lacks {needle:?}: {:?}",
                    turn.system_prompt
                )));
            }
        }
        for needle in &expect.prompt_lacks {
            if turn.system_prompt.contains(needle.as_str()) {
                return Err(StepError::Unmet(format!(
                    "the prompt must not contain {needle:?}: {:?}",
                    turn.system_prompt
                )));
            }
        }
    } else if expect.notice.is_some()
        || !expect.prompt_contains.is_empty()
        || !expect.prompt_lacks.is_empty()
    {
        return Err(StepError::unmet(
            "notice and prompt expectations need a prompt or begin action",
        ));
    }
    if let Some(want) = &expect.run_code {
        match &ran {
            Some(Ok(code)) if code == want => {}
            Some(Ok(code)) => {
                return Err(StepError::Unmet(format!(
                    "the scripted call returned {code}, not {want}"
                )));
            }
            Some(Err(e)) => return Err(e.clone()),
            None => return Err(StepError::unmet("run_code needs a scripted call (run)")),
        }
    }
    for (path, want) in &expect.files {
        super::check_file(&rig.workspace.join(path), want)?;
    }
    Ok(())
}

fn select_json(options: &serde_json::Value) -> Option<(String, Vec<String>)> {
    let option = options
        .as_array()?
        .iter()
        .find(|o| o["id"] == "permission")?;
    Some((
        option["currentValue"].as_str()?.to_owned(),
        option["options"]
            .as_array()?
            .iter()
            .filter_map(|o| o["value"].as_str().map(str::to_owned))
            .collect(),
    ))
}

/// The knob events of a session log: one per knob (sandbox mode, approval policy, network).
fn is_knob_event(kind: &str) -> bool {
    matches!(kind, "sandbox/mode" | "approval/policy" | "sandbox/network")
}

/// How long a `start` waits for its `ready` file.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// One wire action against the real agent binary over stdio.
#[expect(
    clippy::too_many_lines,
    reason = "one wire action over stdio and its expectations in the order the agent answers them; to split by action next"
)]
fn run_stdio(step: &WireStep, rig: &mut Rig, backend: &Backend) -> Result<(), StepError> {
    let expect: &WireExpect = &step.expect;
    if expect.mode_now.is_some()
        || expect.network_now.is_some()
        || expect.notice.is_some()
        || !expect.prompt_contains.is_empty()
        || !expect.prompt_lacks.is_empty()
    {
        return Err(StepError::unmet(
            "mode_now, network_now, notice and prompt expectations are in-process only; over stdio check the log",
        ));
    }
    let name = step.session.clone().unwrap_or_else(|| "a".into());
    let id = rig
        .ids
        .get(&name)
        .cloned()
        .unwrap_or_else(|| format!("never-created-{name}"));
    let mut commands: Vec<String> = step.run.iter().cloned().collect();
    commands.extend(step.runs.iter().cloned());
    let ws = rig.workspace.to_string_lossy().into_owned();
    let mut exchange = None;
    match step.action {
        WireAction::Crash | WireAction::Restart => {
            if let Some(agent) = rig.stdio.as_mut() {
                agent.kill();
            }
            let mut config = step.config.clone().unwrap_or_default();
            config.transport = Some(Transport::Stdio);
            match stdio::StdioAgent::start(&rig.sessions, &rig.workspace, &config, backend) {
                Ok(agent) => rig.stdio = Some(agent),
                Err(e)
                    if expect
                        .error
                        .as_deref()
                        .is_some_and(|code| e.to_string().contains(code)) =>
                {
                    return Ok(());
                }
                Err(e) => return Err(StepError::Unmet(format!("the agent did not start: {e}"))),
            }
        }
        action => {
            let agent = rig
                .stdio
                .as_mut()
                .ok_or_else(|| StepError::harness("no agent process"))?;
            exchange = match action {
                WireAction::New => Some(agent.call(
                    "session/new",
                    serde_json::json!({ "cwd": ws, "mcpServers": [] }),
                )?),
                WireAction::Load => Some(agent.call(
                    "session/load",
                    serde_json::json!({ "sessionId": id, "cwd": ws, "mcpServers": [] }),
                )?),
                WireAction::Set => {
                    let mut params = serde_json::json!({ "sessionId": id,
                        "configId": step.config_id.clone().unwrap_or_else(|| "permission".into()) });
                    match (&step.value, step.value_bool) {
                        (_, Some(b)) => {
                            params["type"] = "boolean".into();
                            params["value"] = b.into();
                        }
                        (v, None) => params["value"] = v.clone().unwrap_or_default().into(),
                    }
                    Some(agent.call("session/set_config_option", params)?)
                }
                WireAction::Prompt => {
                    agent.start_prompt(&id, &stdio::prompt_text(&commands))?;
                    Some(agent.wait_prompt()?)
                }
                WireAction::Start => {
                    rig.started = Some(crate::survivors::CallStart::now());
                    agent.start_prompt(&id, &stdio::prompt_text(&commands))?;
                    if !commands.is_empty() {
                        agent.wait_until_running()?;
                    }
                    if let Some(ready) = &step.ready {
                        agent.wait_ready(&rig.workspace.join(ready), READY_TIMEOUT)?;
                    }
                    None
                }
                WireAction::Wait => Some(agent.wait_prompt()?),
                WireAction::Cancel => {
                    agent.cancel(&id)?;
                    None
                }
                other => {
                    return Err(StepError::Unmet(format!(
                        "wire action {other} is in-process only"
                    )));
                }
            };
        }
    }
    if expect.no_survivors {
        if step.action != WireAction::Wait || exchange.is_none() {
            return Err(StepError::unmet(
                "no_survivors is checked when a prompt's answer arrives (wait)",
            ));
        }
        let since = rig
            .started
            .ok_or_else(|| StepError::harness("no_survivors needs a start before the wait"))?;
        let agent = rig.stdio.as_ref().map(stdio::StdioAgent::pid);
        let left = crate::survivors::survivors_except(
            &crate::survivors::case_tag(),
            since,
            std::time::Duration::ZERO,
            agent,
        );
        if !left.is_empty() {
            return Err(StepError::Unmet(format!(
                "the agent answered while {} process(es) of its calls were alive (killed now): {}",
                left.len(),
                crate::survivors::shown(&left)
            )));
        }
    }
    if let Some(x) = &exchange {
        match (&x.error, &expect.error) {
            (Some(e), Some(want)) if e == want => {}
            (Some(e), _) => return Err(StepError::Unmet(format!("{} failed: {e}", step.action))),
            (None, Some(want)) => {
                return Err(StepError::Unmet(format!(
                    "{} should fail with {want} but succeeded",
                    step.action
                )));
            }
            (None, None) => {}
        }
        if step.action == WireAction::New
            && let Some(new_id) = x.result.as_ref().and_then(|r| r["sessionId"].as_str())
        {
            rig.ids.insert(name.clone(), new_id.to_owned());
        }
        x.check_answer_time(&step.action, expect)?;
        let state = x
            .result
            .as_ref()
            .and_then(|r| select_json(&r["configOptions"]));
        if let Some(want) = &expect.current
            && state.as_ref().map(|(c, _)| c) != Some(want)
        {
            return Err(StepError::Unmet(format!(
                "current value should be {want}, got {state:?}"
            )));
        }
        if let Some(want) = &expect.options
            && state.as_ref().map(|(_, v)| v) != Some(want)
        {
            return Err(StepError::Unmet(format!(
                "offered values should be {want:?}, got {state:?}"
            )));
        }
        if let Some(want) = &expect.stop_reason {
            let got = x.result.as_ref().and_then(|r| r["stopReason"].as_str());
            if got != Some(want.as_str()) {
                return Err(StepError::Unmet(format!(
                    "stop reason should be {want}, got {got:?}"
                )));
            }
        }
        if let Some(want) = &expect.run_code
            && x.codes.first() != Some(want)
        {
            return Err(StepError::Unmet(format!(
                "the scripted call returned {:?}, not {want}",
                x.codes
            )));
        }
        if let Some(want) = &expect.run_codes
            && &x.codes != want
        {
            return Err(StepError::Unmet(format!(
                "the scripted calls returned {:?}, not {want:?}",
                x.codes
            )));
        }
    } else if expect.error.is_some()
        || expect.current.is_some()
        || expect.run_code.is_some()
        || expect.run_codes.is_some()
        || expect.stop_reason.is_some()
    {
        return Err(StepError::Unmet(format!(
            "{} has no answer to check (wait for it)",
            step.action
        )));
    }
    rig.check_log(&name, expect)?;
    for (path, want) in &expect.files {
        super::check_file(&rig.workspace.join(path), want)?;
    }
    Ok(())
}
