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
use serde::Deserialize;
use serde_json::Value;

use crate::approval::ApprovalService;
use crate::escalation::{Asker, EscalationFields, Refusal, approve};
use crate::fs::{FileSystem, FsError};
use crate::outcome::{Code, Facts, FileFacts, ReadFacts, ShellFacts, Started, TaskRef};
use crate::shell::{ShellExecutor, ShellRequest, ShellResult};
use crate::tool::{
    BashArgs, CancelArgs, EditArgs, OutputArgs, ReadArgs, Tool, WriteArgs, with_escalation,
};

/// The model-facing result of one tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// `OK`, `DENIED`, `FS_SANDBOX_DENIED`, `SANDBOX_UNAVAILABLE`, `BAD_ARGUMENTS`, an
    /// `ESCALATION_*` code, ...
    pub code: Code,
    /// What the model reads.
    pub text: String,
    /// Structured facts (the mode the call ran under, denied, exit code, ...).
    pub facts: Facts,
}

impl ToolOutput {
    fn new(code: Code, text: String, facts: Facts) -> ToolOutput {
        ToolOutput { code, text, facts }
    }

    fn refused(r: Refusal) -> ToolOutput {
        ToolOutput::new(Code::from_error_code(r.code), r.text, Facts::not_run())
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
pub fn denial_text(mode: SandboxMode, tool: Tool, advertised: bool) -> String {
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

/// The tools over one composition.
pub struct Toolbox {
    policy: Arc<PolicyService>,
    shell: Arc<ShellExecutor>,
    fs: FileSystem,
    approval: Option<Arc<dyn ApprovalService>>,
    /// Background tasks started by a granted escalation (their results say `escalated: true`).
    escalated_tasks: Mutex<HashSet<crate::shell::TaskId>>,
}

fn bad_arguments(tool: impl std::fmt::Display, e: impl std::fmt::Display) -> ToolOutput {
    ToolOutput::new(
        Code::BadArguments,
        format!("{tool}: bad arguments: {e}. Nothing was run."),
        Facts::not_run(),
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
    pub fn advertises_escalation(&self, tool: Tool) -> bool {
        match tool {
            Tool::Bash => self.shell.confines(),
            Tool::Write | Tool::Edit => self.fs.confines(),
            Tool::BashOutput | Tool::BashCancel | Tool::Read => false,
        }
    }

    /// The tool definitions (name, description, JSON Schema of the arguments), the schemas
    /// derived from the argument types; the escalation fields and their teaching sentence appear
    /// exactly on the tools whose executor or filesystem confines.
    pub fn schemas(&self) -> Value {
        Value::Array(
            Tool::ADVERTISED
                .into_iter()
                .map(|tool| tool.definition(self.advertises_escalation(tool)))
                .collect(),
        )
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
        let Some(tool) = Tool::from_name(tool) else {
            started();
            return bad_arguments(tool, "no such tool");
        };
        if !tool.escalates() {
            started();
        }
        match tool {
            Tool::Bash => match with_escalation::<BashArgs>(args) {
                Ok((a, fields)) => self.bash(a, fields, ctx, cancel, started),
                Err(e) => bad_arguments(tool, e),
            },
            Tool::BashOutput => match OutputArgs::deserialize(args) {
                Ok(a) => self.bash_output(a),
                Err(e) => bad_arguments(tool, e),
            },
            Tool::BashCancel => match CancelArgs::deserialize(args) {
                Ok(a) if self.shell.cancel(a.task_id) => ToolOutput::new(
                    Code::Cancelled,
                    format!(
                        "task {} is being stopped (its whole process tree)",
                        a.task_id
                    ),
                    Facts::Task(TaskRef { task_id: a.task_id }),
                ),
                Ok(a) => bad_arguments(tool, format!("no task {}", a.task_id)),
                Err(e) => bad_arguments(tool, e),
            },
            Tool::Read => match ReadArgs::deserialize(args) {
                Ok(a) => self.read(&a.path, ctx),
                Err(e) => bad_arguments(tool, e),
            },
            Tool::Write => match with_escalation::<WriteArgs>(args) {
                Ok((a, fields)) => {
                    self.mutate(tool, &a.path, fields, ctx, started, |fs, path, policy| {
                        fs.write(path, &a.content, policy)
                    })
                }
                Err(e) => bad_arguments(tool, e),
            },
            Tool::Edit => match with_escalation::<EditArgs>(args) {
                Ok((a, fields)) => {
                    self.mutate(tool, &a.path, fields, ctx, started, |fs, path, policy| {
                        fs.edit(path, &a.old_text, &a.new_text, policy)
                    })
                }
                Err(e) => bad_arguments(tool, e),
            },
        }
    }

    /// Validates the escalation fields, asks when they ask, and resolves the call's policy.
    fn policy_for(
        &self,
        tool: Tool,
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
                Code::PolicyError,
                format!("{tool}: {e}. Nothing was run."),
                Facts::not_run(),
            )
        })?;
        started();
        Ok((policy, granted.is_some()))
    }

    fn bash(
        &self,
        a: BashArgs,
        fields: EscalationFields,
        ctx: &CallContext<'_>,
        cancel: Option<Arc<AtomicBool>>,
        started: &dyn Fn(),
    ) -> ToolOutput {
        if a.command.contains('\0') {
            return bad_arguments(Tool::Bash, "the command contains a NUL byte");
        }
        let (policy, escalated) =
            match self.policy_for(Tool::Bash, &a.command, &fields, ctx, started) {
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
                        Code::Started,
                        format!(
                            "started background task {task}; read it with {}",
                            Tool::BashOutput
                        ),
                        Facts::Started(Started {
                            task_id: task,
                            mode: policy.mode,
                            escalated,
                        }),
                    )
                }
                Err(e) => ToolOutput::new(
                    Code::from_error_code(e.code()),
                    e.to_string(),
                    Facts::not_run(),
                ),
            };
        }
        match self.shell.run_cancellable(&request, &policy, cancel) {
            Ok(result) => self.shell_output(&result, escalated),
            Err(e) => ToolOutput::new(
                Code::from_error_code(e.code()),
                e.to_string(),
                Facts::not_run_under(policy.mode),
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
                Code::Running,
                format!("task {} has not finished (or does not exist)", a.task_id),
                Facts::Task(TaskRef { task_id: a.task_id }),
            ),
            Some(result) if result.runner_failed => ToolOutput::new(
                Code::SandboxUnavailable,
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
                Tool::Bash,
                self.advertises_escalation(Tool::Bash),
            ));
            Code::Denied
        } else {
            Code::Ok
        };
        ToolOutput::new(code, text, facts(result, escalated))
    }

    /// Reads pass in every mode; relative paths are under the session's workspace root.
    fn read(&self, path: &str, ctx: &CallContext<'_>) -> ToolOutput {
        if path.contains('\0') {
            return bad_arguments(Tool::Read, "the path contains a NUL byte");
        }
        let policy = match self.policy.resolve(ctx.session, None) {
            Ok(p) => p.into_policy(),
            Err(e) => {
                return ToolOutput::new(Code::PolicyError, e.to_string(), Facts::not_run());
            }
        };
        let target = policy.roots.workspace_root.join(path);
        let facts = |path: PathBuf| Facts::Read(ReadFacts { ran: true, path });
        // What the shell sees at this path: the private temp area's copy when it has one (as an
        // overlay shows it), else the host's file below it.
        let host = self.shell.host_path(&target, &policy);
        let source = if host != target && std::fs::symlink_metadata(&host).is_err() {
            target.clone()
        } else {
            host
        };
        match self.fs.read(&source, &policy) {
            Ok(text) => ToolOutput::new(Code::Ok, text, facts(target)),
            Err(e) => ToolOutput::new(
                Code::from_error_code(e.code()),
                e.to_string(),
                facts(target),
            ),
        }
    }

    fn mutate(
        &self,
        tool: Tool,
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
        let target = policy.roots.workspace_root.join(PathBuf::from(path));
        let facts = Facts::File(FileFacts {
            ran: true,
            mode: policy.mode,
            escalated,
            path: target.clone(),
        });
        // Where the shell's write to this path lands: the private temp area for a path in /tmp
        // a mount shows it at (the host's folders and file on the way copied up first, as the
        // overlay does), else the path itself.
        let host = self.shell.host_path(&target, &policy);
        if host != target
            && let Some(area) = policy.roots.temp_area.dir()
            && let Ok(rest) = host.strip_prefix(&area)
        {
            crate::fs::copy_up(&area, rest);
        }
        match op(self.fs, &host, &policy) {
            Ok(()) => ToolOutput::new(
                Code::Ok,
                format!("{tool}: {} updated", target.display()),
                facts,
            ),
            Err(FsError::SandboxDenied { mode, .. }) => ToolOutput::new(
                Code::FsSandboxDenied,
                denial_text(mode, tool, self.advertises_escalation(tool)),
                facts,
            ),
            Err(e) => ToolOutput::new(Code::from_error_code(e.code()), e.to_string(), facts),
        }
    }
}

fn facts(result: &ShellResult, escalated: bool) -> Facts {
    Facts::Shell(ShellFacts::of(result, escalated))
}
