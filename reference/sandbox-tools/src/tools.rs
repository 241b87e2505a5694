//! The model-facing tools: `bash`, `bash_output`, `read`, `write`, `edit`. The escalation fields exist in
//! a tool's schema exactly when the mounted shell or filesystem confines. The sandbox mode is
//! never stated; a denied result names the mode in its marker and, when escalation is advertised,
//! carries the hint at the point of denial.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandbox::{SandboxMode, denial_marker};
use sandbox_policy::{PolicyService, Session, Stamp};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::approval::ApprovalService;
use crate::escalation::{Asker, EscalationFields, Refusal, approve};
use crate::fs::{FileSystem, FsError};
use crate::shell::{ShellExecutor, ShellRequest, ShellResult};

/// The model-facing result of one tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// `OK`, `DENIED`, `FS_SANDBOX_DENIED`, `SANDBOX_UNAVAILABLE`, `BAD_ARGUMENTS`, an
    /// `ESCALATION_*` code, ...
    pub code: String,
    /// What the model reads.
    pub text: String,
    /// Structured facts (the mode the call ran under, denied, exit code, ...).
    pub facts: Value,
}

impl ToolOutput {
    fn new(code: &str, text: String, facts: Value) -> ToolOutput {
        ToolOutput {
            code: code.to_owned(),
            text,
            facts,
        }
    }

    fn refused(r: Refusal) -> ToolOutput {
        ToolOutput::new(r.code, r.text, json!({ "ran": false }))
    }
}

/// Who is calling.
#[derive(Clone, Copy)]
pub struct CallContext<'a> {
    /// The calling session (its cwd is the workspace root; its log holds the knobs).
    pub session: Option<&'a Session>,
    /// The agent approval questions are routed through.
    pub agent: Option<&'a str>,
    /// This call's id.
    pub call_id: &'a str,
}

/// The shared denial teaching: the marker, then (when escalation is advertised) the hint.
pub fn denial_text(mode: SandboxMode, tool: &str, advertised: bool) -> String {
    let mut text = format!(
        "{}\nThe sandbox refused a file access. Do not try to work around it (no other paths, tools or copies).",
        denial_marker(mode)
    );
    if advertised {
        text.push_str(&format!(
            "\nIf this access is needed, call {tool} again once with the same arguments plus sandbox_permissions (the narrowest sufficient of \"workspace-write\", \"danger-full-access\") and a justification; the user decides."
        ));
    }
    text
}

const BASH_DESCRIPTION: &str = "Run a shell command with bash. Commands run in a file sandbox: a file access the sandbox does not allow fails, and the result then carries [sandbox: file access denied under <mode> mode]. Attempt commands even when they may be denied; never retry around a denial.";
const ESCALATION_DESCRIPTION: &str = " After a denial you may retry the same call once with sandbox_permissions and a justification; the user is asked and decides.";

/// The tools over one composition.
pub struct Toolbox {
    policy: Arc<PolicyService>,
    shell: Arc<ShellExecutor>,
    fs: FileSystem,
    approval: Option<Arc<dyn ApprovalService>>,
    /// Background tasks started by a granted escalation (their results say `escalated: true`).
    escalated_tasks: Mutex<HashSet<crate::shell::TaskId>>,
}

/// The escalation fields' schema vocabulary: the modes an escalation may ask for.
fn escalation_targets(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = <Option<String>>::json_schema(generator);
    schema.insert(
        "enum".into(),
        json!(
            crate::escalation::ESCALATION_TARGETS
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
        ),
    );
    schema
}

/// `bash`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    /// The command, run as `bash -c <command>` in the workspace.
    command: String,
    /// Kill the command and everything it started after this many milliseconds.
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
    /// Start it in the background; read it with bash_output.
    #[serde(default)]
    run_in_background: bool,
    /// Only to retry a denied call once with wider file access; needs justification.
    #[serde(default)]
    #[schemars(schema_with = "escalation_targets")]
    sandbox_permissions: Option<String>,
    /// Why the wider access is needed; shown to the user.
    #[serde(default)]
    justification: Option<String>,
}

/// `bash_output`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct OutputArgs {
    /// The background task.
    task_id: u64,
    /// How long to wait for it to finish, in milliseconds (default 30000).
    #[serde(default)]
    wait_ms: Option<u64>,
}

/// `bash_cancel`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    /// The background task.
    task_id: u64,
}

/// `read`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The file, relative to the workspace or absolute.
    path: String,
}

/// `write`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The file, relative to the workspace or absolute.
    path: String,
    /// Its whole new content.
    content: String,
    /// Only to retry a denied call once with wider file access; needs justification.
    #[serde(default)]
    #[schemars(schema_with = "escalation_targets")]
    sandbox_permissions: Option<String>,
    /// Why the wider access is needed; shown to the user.
    #[serde(default)]
    justification: Option<String>,
}

/// `edit`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    /// The file, relative to the workspace or absolute.
    path: String,
    /// The text to replace; it must occur exactly once.
    old_text: String,
    /// What replaces it.
    new_text: String,
    /// Only to retry a denied call once with wider file access; needs justification.
    #[serde(default)]
    #[schemars(schema_with = "escalation_targets")]
    sandbox_permissions: Option<String>,
    /// Why the wider access is needed; shown to the user.
    #[serde(default)]
    justification: Option<String>,
}

/// The JSON Schema of `T`, derived from the argument type itself, without the escalation fields
/// unless `escalation` (so what is advertised is exactly what is parsed).
fn parameters<T: JsonSchema>(escalation: bool) -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
    });
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("title");
        obj.remove("description");
        if !escalation && let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut)
        {
            props.remove("sandbox_permissions");
            props.remove("justification");
        }
    }
    schema
}

fn bad_arguments(tool: &str, e: impl std::fmt::Display) -> ToolOutput {
    ToolOutput::new(
        "BAD_ARGUMENTS",
        format!("{tool}: bad arguments: {e}. Nothing was run."),
        json!({ "ran": false }),
    )
}

impl Toolbox {
    /// A composition: the policy home, a shell, a filesystem, and (optionally) an approval service.
    pub fn new(
        policy: Arc<PolicyService>,
        shell: Arc<ShellExecutor>,
        fs: FileSystem,
        approval: Option<Arc<dyn ApprovalService>>,
    ) -> Toolbox {
        Toolbox {
            policy,
            shell,
            fs,
            approval,
            escalated_tasks: Mutex::new(HashSet::new()),
        }
    }

    /// True when `tool` advertises the escalation fields (its executor or filesystem confines).
    pub fn advertises_escalation(&self, tool: &str) -> bool {
        match tool {
            "bash" => self.shell.confines(),
            "write" | "edit" => self.fs.confines(),
            _ => false,
        }
    }

    /// The tool definitions (name, description, JSON Schema of the arguments), the schemas
    /// derived from the argument types; the escalation fields and their teaching sentence appear
    /// exactly on the tools whose executor or filesystem confines.
    pub fn schemas(&self) -> Value {
        let describe = |tool: &str, base: &str| {
            if self.advertises_escalation(tool) {
                format!("{base}{ESCALATION_DESCRIPTION}")
            } else {
                base.to_owned()
            }
        };
        let tool = |name: &str, description: String, parameters: Value| json!({ "name": name, "description": description, "parameters": parameters });
        json!([
            tool(
                "bash",
                describe("bash", BASH_DESCRIPTION),
                parameters::<BashArgs>(self.advertises_escalation("bash"))
            ),
            tool(
                "bash_cancel",
                "Stop a background bash task and everything it started.".into(),
                parameters::<CancelArgs>(false)
            ),
            tool(
                "read",
                "Read a text file. Reads are never restricted.".into(),
                parameters::<ReadArgs>(false)
            ),
            tool(
                "bash_output",
                "Read the result of a background bash task.".into(),
                parameters::<OutputArgs>(false)
            ),
            tool(
                "write",
                describe(
                    "write",
                    "Write a file (replacing it). Writes outside what the sandbox allows fail with [sandbox: file access denied under <mode> mode]; never retry around a denial."
                ),
                parameters::<WriteArgs>(self.advertises_escalation("write"))
            ),
            tool(
                "edit",
                describe(
                    "edit",
                    "Replace the one occurrence of old_text in a file with new_text. Denied edits fail like writes."
                ),
                parameters::<EditArgs>(self.advertises_escalation("edit"))
            ),
        ])
    }

    /// Runs one tool call.
    pub fn call(&self, tool: &str, args: &Value, ctx: &CallContext<'_>) -> ToolOutput {
        self.call_cancellable(tool, args, ctx, None)
    }

    /// Runs one tool call that stops when `cancel` is set: a foreground `bash` call's whole
    /// process tree is killed, as for a cancelled background task.
    pub fn call_cancellable(
        &self,
        tool: &str,
        args: &Value,
        ctx: &CallContext<'_>,
        cancel: Option<Arc<AtomicBool>>,
    ) -> ToolOutput {
        self.call_observed(tool, args, ctx, cancel, &|| {})
    }

    /// [`Toolbox::call_cancellable`] that calls `started` once the call's policy is fixed (after
    /// any approval, right before it executes), so a caller can report the call as running
    /// exactly when a later switch can no longer change it. Not called when the call is refused
    /// before it runs.
    pub fn call_observed(
        &self,
        tool: &str,
        args: &Value,
        ctx: &CallContext<'_>,
        cancel: Option<Arc<AtomicBool>>,
        started: &dyn Fn(),
    ) -> ToolOutput {
        if !matches!(tool, "bash" | "write" | "edit") {
            started();
        }
        match tool {
            "bash" => match BashArgs::deserialize(args) {
                Ok(a) => self.bash(a, ctx, cancel, started),
                Err(e) => bad_arguments(tool, e),
            },
            "bash_output" => match OutputArgs::deserialize(args) {
                Ok(a) => self.bash_output(a),
                Err(e) => bad_arguments(tool, e),
            },
            "bash_cancel" => match CancelArgs::deserialize(args) {
                Ok(a) if self.shell.cancel(a.task_id) => ToolOutput::new(
                    "CANCELLED",
                    format!(
                        "task {} is being stopped (its whole process tree)",
                        a.task_id
                    ),
                    json!({ "task_id": a.task_id }),
                ),
                Ok(a) => bad_arguments(tool, format!("no task {}", a.task_id)),
                Err(e) => bad_arguments(tool, e),
            },
            "read" => match ReadArgs::deserialize(args) {
                Ok(a) => self.read(&a.path, ctx),
                Err(e) => bad_arguments(tool, e),
            },
            "write" => match WriteArgs::deserialize(args) {
                Ok(a) => {
                    let fields = EscalationFields::new(a.sandbox_permissions, a.justification);
                    self.mutate(
                        "write",
                        &a.path,
                        fields,
                        ctx,
                        started,
                        |fs, path, policy| fs.write(path, &a.content, policy),
                    )
                }
                Err(e) => bad_arguments(tool, e),
            },
            "edit" => match EditArgs::deserialize(args) {
                Ok(a) => {
                    let fields = EscalationFields::new(a.sandbox_permissions, a.justification);
                    self.mutate("edit", &a.path, fields, ctx, started, |fs, path, policy| {
                        fs.edit(path, &a.old_text, &a.new_text, policy)
                    })
                }
                Err(e) => bad_arguments(tool, e),
            },
            other => bad_arguments(other, "no such tool"),
        }
    }

    /// Validates the escalation fields, asks when they ask, and resolves the call's policy.
    fn policy_for(
        &self,
        tool: &str,
        subject: &str,
        fields: &EscalationFields,
        ctx: &CallContext<'_>,
        started: &dyn Fn(),
    ) -> Result<(Stamp, bool), ToolOutput> {
        let ask = fields
            .validate(self.advertises_escalation(tool))
            .map_err(ToolOutput::refused)?;
        let granted = match &ask {
            None => None,
            Some(ask) => Some(
                approve(
                    ask,
                    &Asker {
                        policy: &self.policy,
                        session: ctx.session,
                        approval: self.approval.as_deref(),
                        agent: ctx.agent,
                        call_id: ctx.call_id,
                        tool,
                        subject,
                    },
                )
                .map_err(ToolOutput::refused)?,
            ),
        };
        let policy = self.policy.resolve(ctx.session, granted).map_err(|e| {
            ToolOutput::new(
                "POLICY_ERROR",
                format!("{tool}: {e}. Nothing was run."),
                json!({ "ran": false }),
            )
        })?;
        started();
        Ok((policy, granted.is_some()))
    }

    fn bash(
        &self,
        a: BashArgs,
        ctx: &CallContext<'_>,
        cancel: Option<Arc<AtomicBool>>,
        started: &dyn Fn(),
    ) -> ToolOutput {
        if a.command.contains('\0') {
            return bad_arguments("bash", "the command contains a NUL byte");
        }
        let fields = EscalationFields::new(a.sandbox_permissions, a.justification);
        let (policy, escalated) = match self.policy_for("bash", &a.command, &fields, ctx, started) {
            Ok(p) => p,
            Err(out) => return out,
        };
        let request = ShellRequest {
            command: a.command,
            workdir: None,
            timeout: a.timeout_ms.map(Duration::from_millis),
        };
        if a.run_in_background {
            return match self.shell.start(request, policy.policy().clone()) {
                Ok(task) => {
                    if escalated {
                        self.escalated_tasks
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(task);
                    }
                    ToolOutput::new(
                        "STARTED",
                        format!("started background task {task}; read it with bash_output"),
                        json!({ "task_id": task, "mode": policy.mode, "escalated": escalated }),
                    )
                }
                Err(e) => ToolOutput::new(e.code(), e.to_string(), json!({ "ran": false })),
            };
        }
        match self.shell.run_cancellable(&request, &policy, cancel) {
            Ok(result) => self.shell_output(&result, escalated),
            Err(e) => ToolOutput::new(
                e.code(),
                e.to_string(),
                json!({ "ran": false, "mode": policy.mode }),
            ),
        }
    }

    fn bash_output(&self, a: OutputArgs) -> ToolOutput {
        let wait = Duration::from_millis(a.wait_ms.unwrap_or(30_000));
        let escalated = self
            .escalated_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&a.task_id);
        match self.shell.output(a.task_id, wait) {
            None => ToolOutput::new(
                "RUNNING",
                format!("task {} has not finished (or does not exist)", a.task_id),
                json!({ "task_id": a.task_id }),
            ),
            Some(result) if result.runner_failed => ToolOutput::new(
                sandbox::SANDBOX_UNAVAILABLE,
                format!(
                    "[sandbox unavailable: the command never ran] {}",
                    result.runner_detail.clone().unwrap_or_default()
                ),
                facts(&result, escalated),
            ),
            Some(result) => self.shell_output(&result, escalated),
        }
    }

    fn shell_output(&self, result: &ShellResult, escalated: bool) -> ToolOutput {
        let mut text = match (result.exit_code, result.signal) {
            (Some(code), _) => format!("exit code: {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "did not run".into(),
        };
        // The whole tree is claimed only when the launch confirmed it is gone; otherwise only
        // what was certainly killed is said.
        let killed = if result.tree_reaped {
            "the whole process tree was killed"
        } else {
            "its process group was killed; processes it moved out of it may still run"
        };
        if result.timed_out {
            text.push_str(&format!(" (timed out: {killed})"));
        }
        if result.cancelled {
            text.push_str(&format!(" (cancelled: {killed})"));
        }
        for (name, stream) in [("stdout", &result.stdout), ("stderr", &result.stderr)] {
            if !stream.is_empty() {
                text.push_str(&format!("\n{name}:\n{stream}"));
            }
        }
        let code = if result.denied {
            text.push('\n');
            text.push_str(&denial_text(
                result.mode,
                "bash",
                self.advertises_escalation("bash"),
            ));
            "DENIED"
        } else {
            "OK"
        };
        ToolOutput::new(code, text, facts(result, escalated))
    }

    /// Reads pass in every mode; relative paths are under the session's workspace root.
    fn read(&self, path: &str, ctx: &CallContext<'_>) -> ToolOutput {
        if path.contains('\0') {
            return bad_arguments("read", "the path contains a NUL byte");
        }
        let root = match self.policy.resolve(ctx.session, None) {
            Ok(p) => p.into_policy().workspace_root,
            Err(e) => {
                return ToolOutput::new("POLICY_ERROR", e.to_string(), json!({ "ran": false }));
            }
        };
        let target = root.join(path);
        match self.fs.read(&target) {
            Ok(text) => ToolOutput::new("OK", text, json!({ "ran": true, "path": target })),
            Err(e) => ToolOutput::new(
                e.code(),
                e.to_string(),
                json!({ "ran": true, "path": target }),
            ),
        }
    }

    fn mutate(
        &self,
        tool: &str,
        path: &str,
        fields: EscalationFields,
        ctx: &CallContext<'_>,
        started: &dyn Fn(),
        op: impl FnOnce(FileSystem, &std::path::Path, &Stamp) -> Result<(), FsError>,
    ) -> ToolOutput {
        if path.contains('\0') {
            return bad_arguments(tool, "the path contains a NUL byte");
        }
        let (policy, escalated) = match self.policy_for(tool, path, &fields, ctx, started) {
            Ok(p) => p,
            Err(out) => return out,
        };
        let target = policy.workspace_root.join(PathBuf::from(path));
        let facts =
            json!({ "ran": true, "mode": policy.mode, "escalated": escalated, "path": target });
        match op(self.fs, &target, &policy) {
            Ok(()) => ToolOutput::new("OK", format!("{tool}: {} updated", target.display()), facts),
            Err(FsError::SandboxDenied { mode, .. }) => ToolOutput::new(
                crate::fs::FS_SANDBOX_DENIED,
                denial_text(mode, tool, self.advertises_escalation(tool)),
                facts,
            ),
            Err(e) => ToolOutput::new(e.code(), e.to_string(), facts),
        }
    }
}

fn facts(result: &ShellResult, escalated: bool) -> Value {
    let mut facts = json!({
        "ran": !result.runner_failed,
        "mode": result.mode,
        "backend": result.backend,
        "enforcement": result.enforcement,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "denied": result.denied,
        "runner_failed": result.runner_failed,
        "timed_out": result.timed_out,
        "cancelled": result.cancelled,
        "escalated": escalated,
    });
    // Only present when output was cut, so a result without a cut reads as it always did.
    if result.dropped.any() {
        facts["dropped"] = json!(result.dropped);
    }
    facts
}
