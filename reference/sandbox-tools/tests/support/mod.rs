//! Set-up the sandbox-tools suites share: a toolbox over a workspace (the confined shell on a
//! local provider, the fenced filesystem) and one tool call in a session.

use std::path::Path;
use std::sync::Arc;

use sandbox::SandboxMode;
use sandbox_local::{LocalConfig, LocalProvider};
use sandbox_policy::{PolicyService, Session};
use sandbox_tools::approval::ApprovalService;
use sandbox_tools::fs::FileSystem;
use sandbox_tools::shell::ShellExecutor;
use sandbox_tools::tools::{CallContext, ToolOutput, Toolbox};
use serde_json::Value;

/// The tools of a session over `ws` in `mode`: the shell confined by `config`'s provider, the
/// fenced filesystem, and `approval` to ask (none: escalation is unavailable).
pub fn confined_toolbox(
    mode: SandboxMode,
    ws: &Path,
    config: LocalConfig,
    approval: Option<Arc<dyn ApprovalService>>,
) -> Toolbox {
    let policy = Arc::new(PolicyService::new(mode, ws).expect("policy"));
    let provider = Arc::new(LocalProvider::new(config));
    Toolbox::new(
        policy,
        Arc::new(ShellExecutor::confining(provider)),
        FileSystem::Fenced,
        approval,
    )
}

/// Calls `tool` with `args` in `session`, as call `call_id` of `agent`.
pub fn call(
    tools: &Toolbox,
    session: &Session,
    agent: Option<&str>,
    call_id: &str,
    tool: &str,
    args: &Value,
) -> ToolOutput {
    let ctx = CallContext {
        session: Some(session),
        agent,
        call_id,
    };
    tools.call(tool, args, &ctx)
}
