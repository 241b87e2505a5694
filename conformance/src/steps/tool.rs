//! The `tool` step: the reference tools (confined shell, fenced filesystem, shared escalation)
//! over the backend under test, in one world and one session per case, with a scripted answerer.

use std::sync::Arc;

use sandbox::SandboxMode;
use sandbox_policy::{PolicyService, Session};
use sandbox_tools::approval::{ApprovalService, Decision, ScriptedApprover};
use sandbox_tools::fs::FileSystem;
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tools::{CallContext, ToolOutput, Toolbox};
use serde_json::Value;

use crate::backends::Backend;
use crate::scenario::{Answer, Composition, ToolSetup, ToolStep};
use crate::steps::StepError;
use crate::world::{SENTINEL, Snapshot, World};

/// One case's composition.
pub(super) struct Rig {
    world: World,
    /// The workspace as the session spells it (`%WS%`).
    ws: std::path::PathBuf,
    /// The world as it was when the case began (for `world` steps).
    before: Snapshot,
    session: Session,
    approver: Arc<ScriptedApprover>,
    tools: Toolbox,
    agent: bool,
    calls: usize,
    last_task: Option<u64>,
    /// The provider the shell confines with, asking every request twice.
    twin: Arc<crate::metamorphic::Twin>,
    /// A call the case allowed to be refused was refused: its later tool steps are moot.
    pub(super) refused: bool,
    /// The session's private temp area (a backend whose calls have one), with where the
    /// session's calls see it: `%TMPDIR%` is that place, and a `files:` path the calls wrote
    /// through it is looked up in the area.
    area: Option<(sandbox_local::temp_area::TempAreaDir, sandbox::Roots, bool)>,
}

fn decision(answer: Answer) -> Decision {
    match answer {
        Answer::AllowOnce => Decision::AllowedOnce,
        Answer::Reject => Decision::Rejected,
        Answer::Cancel => Decision::Cancelled,
        Answer::Unavailable => Decision::Unavailable,
    }
}

impl Rig {
    fn new(backend: &Backend, setup: &ToolSetup) -> Result<Rig, StepError> {
        let world = World::new().map_err(super::world_error)?;
        // The deployment's configured root is always the world's workspace; the session's cwd
        // (which wins) is the workspace the case names, spelled as it says.
        let configured = world.ws.clone();
        let ws = world.workspace(setup.workspace.unwrap_or_default());
        let temp_dir = setup.tmpdir.map(|t| world.temp_dir(t));
        let mut policy =
            PolicyService::new(setup.mode.unwrap_or(SandboxMode::ReadOnly), &configured)
                .map_err(StepError::harness)?
                .with_temp_dir(temp_dir);
        let area = if backend.temp_is_private() {
            let made = sandbox_local::temp_area::TempAreaDir::create().map_err(|e| {
                StepError::Harness(format!("cannot make the session's temp area: {e}"))
            })?;
            policy = policy.with_temp_area(made.temp_area());
            Some(made)
        } else {
            None
        };
        if setup.repo {
            world.init_repo(&configured).map_err(StepError::harness)?;
        }
        if setup.extra_root {
            let extra = world
                .extra_root()
                .map_err(|e| StepError::Harness(format!("cannot make the extra root: {e}")))?;
            policy = policy
                .with_writable_roots(&[extra])
                .map_err(StepError::harness)?;
        }
        if let Some(paths) = &setup.protected_paths {
            policy = policy.with_protected_paths(paths.clone());
        }
        let session = Session::new("case", &ws);
        if let Some(mode) = setup.session_mode {
            session.set_sandbox_mode(mode).map_err(StepError::harness)?;
        }
        if let Some(policy) = setup.approval_policy {
            session
                .set_approval_policy(policy)
                .map_err(StepError::harness)?;
        }
        let decisions: Vec<Decision> = setup.approver.iter().copied().map(decision).collect();
        let approver = Arc::new(ScriptedApprover::new(decisions));
        let inner = backend.provider.clone().ok_or_else(|| {
            StepError::Harness(format!(
                "backend {} cannot confine on this host",
                backend.name
            ))
        })?;
        // The case changes its world between calls and its twin stays fresh: only two answers
        // are compared, not an answer and a refusal.
        let twin = crate::metamorphic::Twin::new(inner, &world, false)?;
        let provider: Arc<dyn sandbox::SandboxProvider> = twin.clone();
        let as_service = |a: &Arc<ScriptedApprover>| -> Arc<dyn ApprovalService> { a.clone() };
        let (shell, fs, approval) = match setup.composition.unwrap_or(Composition::Confining) {
            Composition::Confining => (
                ShellExecutor::confining(provider),
                FileSystem::Fenced,
                Some(as_service(&approver)),
            ),
            Composition::NoApproval => {
                (ShellExecutor::confining(provider), FileSystem::Fenced, None)
            }
            Composition::NonConfining => (
                ShellExecutor::unconfined(),
                FileSystem::Local,
                Some(as_service(&approver)),
            ),
        };
        let area = area.map(|made| {
            let roots = sandbox::Roots::new(&ws, None).with_temp_area(made.temp_area());
            let probe = sandbox::ProviderPolicy::from_roots(
                sandbox::ConfinedMode::WorkspaceWrite,
                roots.clone(),
            );
            let at_tmp = sandbox::SandboxProvider::temp_area_at_tmp(twin.as_ref(), &probe);
            (made, roots, at_tmp)
        });
        let tools = Toolbox::new(Arc::new(policy), Arc::new(shell), fs, approval);
        let before = world.snapshot();
        Ok(Rig {
            world,
            ws,
            before,
            session,
            approver,
            tools,
            agent: setup.agent.unwrap_or(true),
            calls: 0,
            last_task: None,
            twin,
            refused: false,
            area,
        })
    }

    /// `%WS%` and friends replaced by this world's paths; with a private temp area, `%TMPDIR%`
    /// is the session's calls' `$TMPDIR` (`/tmp` where a mount shows the area there).
    fn expand(&self, text: &str) -> String {
        match &self.area {
            Some((made, _, at_tmp)) => {
                let seen = match at_tmp {
                    true => std::path::PathBuf::from("/tmp"),
                    false => made.path().join("tmp"),
                };
                let mut text = text.replace("%TMPDIR%", &seen.display().to_string());
                if !at_tmp {
                    // No mount shows the area at /tmp: the host's /tmp is outside the writable
                    // set, and the temp area a `/tmp` row means is the area itself.
                    text = text.replace("%TMP%", &self.scratch_in_area(made).display().to_string());
                }
                self.world.expand(&text, &self.ws)
            }
            None => self.world.expand(text, &self.ws),
        }
    }

    /// The world's `/tmp` scratch folder's name, in the session's area (made on first use).
    fn scratch_in_area(&self, made: &sandbox_local::temp_area::TempAreaDir) -> std::path::PathBuf {
        let scratch = made
            .path()
            .join("tmp")
            .join(self.world.tmp.file_name().unwrap_or_default());
        let _ = std::fs::create_dir_all(&scratch);
        scratch
    }

    /// Where a file a step names lies on the host: in the session's private temp area when the
    /// calls wrote it there (as the read tool finds it), else where it is named.
    fn on_host(&self, path: &std::path::Path) -> std::path::PathBuf {
        match &self.area {
            Some((_, roots, at_tmp)) => {
                let host = roots.host_path(path, *at_tmp);
                if host != path && std::fs::symlink_metadata(&host).is_ok() {
                    host
                } else {
                    path.to_path_buf()
                }
            }
            None => path.to_path_buf(),
        }
    }

    fn expand_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) if s == "%LAST_TASK%" => {
                self.last_task.map(Value::from).unwrap_or(Value::Null)
            }
            Value::String(s) => Value::String(self.expand(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.expand_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.expand_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

impl Rig {
    /// Calls one tool in this composition (arguments already expanded).
    pub(super) fn call(&mut self, name: &str, args: &Value) -> ToolOutput {
        self.calls += 1;
        let call_id = format!("call-{}", self.calls);
        self.tools.call(
            name,
            args,
            &CallContext {
                session: Some(&self.session),
                agent: self.agent.then_some("conformance-agent"),
                call_id: &call_id,
            },
        )
    }

    /// The case's world.
    pub(super) fn world(&self) -> &World {
        &self.world
    }

    /// `%WS%` and friends replaced by this world's paths.
    pub(super) fn expanded(&self, text: &str) -> String {
        self.expand(text)
    }

    /// The changes since the case began, outside `may_change`.
    pub(super) fn diff(&self, may_change: &[std::path::PathBuf]) -> Vec<String> {
        self.before.diff(&self.world.snapshot(), may_change)
    }
}

/// The case's composition, made on first use.
pub(super) fn rig<'a>(
    backend: &Backend,
    setup: Option<&ToolSetup>,
    rig: &'a mut Option<Rig>,
) -> Result<&'a mut Rig, StepError> {
    if rig.is_none() {
        *rig = Some(Rig::new(backend, setup.unwrap_or(&ToolSetup::default()))?);
    }
    rig.as_mut()
        .ok_or_else(|| StepError::harness("no composition"))
}

pub(super) fn run(
    backend: &Backend,
    setup: Option<&ToolSetup>,
    step: &ToolStep,
    rig: &mut Option<Rig>,
) -> Result<(), StepError> {
    let rig = self::rig(backend, setup, rig)?;
    let args = rig.expand_value(&step.args);
    let out = rig.call(&step.name, &args);
    rig.twin.verdict()?;
    if let Some(task) = out.facts.task_id() {
        rig.last_task = Some(task);
    }
    let describe = || {
        format!(
            "{} {}: {} {:?} facts {}",
            backend.name, step.name, out.code, out.text, out.facts
        )
    };
    let expect = &step.expect;
    if expect.or_refused && workspace_kept(&rig.ws, &out) {
        rig.refused = true;
        return Ok(());
    }
    if out.code != expect.code.as_str() && !denied_in_private_place(backend, step, &out, &rig.world)
    {
        return Err(StepError::Unmet(format!(
            "expected code {}, got {}",
            expect.code,
            describe()
        )));
    }
    if let Some(text) = &expect.text
        && out.text != rig.expand(text)
    {
        return Err(StepError::Unmet(format!(
            "expected exactly {text:?}, got {}",
            describe()
        )));
    }
    for needle in &expect.text_contains {
        if !out.text.contains(&rig.expand(needle)) {
            return Err(StepError::Unmet(format!(
                "the text lacks {needle:?}: {}",
                describe()
            )));
        }
    }
    // Cut output cannot be shown to lack anything (the shell tool's `dropped` fact).
    if !expect.text_lacks.is_empty() && out.facts.shell().is_some_and(|f| f.dropped.is_some()) {
        return Err(StepError::Unmet(format!(
            "the output was cut at the shell's cap: text_lacks cannot be checked: {}",
            describe()
        )));
    }
    for needle in &expect.text_lacks {
        if out.text.contains(&rig.expand(needle)) {
            return Err(StepError::Unmet(format!(
                "the text must not contain {needle:?}: {}",
                describe()
            )));
        }
    }
    let facts = out.facts.to_json();
    for (key, want) in &expect.facts {
        if facts.get(key) != Some(want) {
            return Err(StepError::Unmet(format!(
                "fact {key} should be {want}: {}",
                describe()
            )));
        }
    }
    if let Some(asked) = expect.asked {
        let got = rig.approver.asked().len();
        if got != asked {
            return Err(StepError::Unmet(format!(
                "expected {asked} approval question(s) so far, got {got}: {}",
                describe()
            )));
        }
    }
    for (path, want) in &expect.files {
        super::check_file(&rig.on_host(std::path::Path::new(&rig.expand(path))), want)
            .map_err(|e| StepError::Unmet(format!("{e}: {}", describe())))?;
    }
    let sentinel = std::fs::read_to_string(rig.world.outside.join("sentinel")).ok();
    if sentinel.as_deref() != Some(SENTINEL) {
        return Err(StepError::Unmet(format!(
            "the sentinel outside the workspace changed: {}",
            describe()
        )));
    }
    Ok(())
}

/// A shell call expected to be `DENIED` in a world that lies in a place the backend declared
/// private (its own tmpfs over the world's folder or its `$TMPDIR` area): the command ran and wrote there or found
/// nothing there. It is judged on what it did to the host instead, by the step's `files:` and
/// the sentinel (and the case's world diff), never by the code.
fn denied_in_private_place(
    backend: &Backend,
    step: &ToolStep,
    out: &ToolOutput,
    world: &crate::world::World,
) -> bool {
    let mode = out
        .facts
        .to_json()
        .get("mode")
        .and_then(|m| serde_json::from_value::<sandbox::ConfinedMode>(m.clone()).ok());
    step.name == "bash"
        && step.expect.code.as_str() == "DENIED"
        && out.code == "OK"
        && mode.is_some_and(|m| {
            backend.in_private_place(m, &world.dir) || backend.in_private_place(m, &world.tmpdir)
        })
}

/// The call was refused (a denial, or a command that failed) and the workspace is still a
/// directory, not a symlink: the swap it tried did not happen.
fn workspace_kept(ws: &std::path::Path, out: &ToolOutput) -> bool {
    let failed = out.code == "DENIED"
        || out
            .facts
            .to_json()
            .get("exit_code")
            .and_then(serde_json::Value::as_i64)
            .is_some_and(|c| c != 0);
    failed && std::fs::symlink_metadata(ws).is_ok_and(|m| m.is_dir())
}
