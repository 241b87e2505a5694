//! The `sandbox-agent` command line: the reference ACP agent over stdio, on the `agent-client-protocol` crate's
//! agent-side connection, with a scripted model (see [`crate::server`]).
//!
//! `sandbox-agent --sessions DIR [--mode read-only] [--approval ask] [--workspace DIR]
//! [--writable-root DIR]... [--protected-path PATH]... [--no-protected-paths]
//! [--pre-tool-hook CMD] [--no-approval-service] [--unconfined-shell] [--backend B] [--abi-cap N]`

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::server::{AgentSetup, serve};
use crate::{Bridge, Composition};
use clap::Parser;
use sandbox::{NetworkMode, ProtectedPath, SandboxMode};
use sandbox_local::{LocalConfig, LocalProvider};
use sandbox_policy::presets::PresetTable;
use sandbox_policy::{ApprovalPolicy, PolicyService};

#[derive(Parser)]
#[command(
    name = "sandbox-agent",
    version,
    about = "The reference ACP agent (scripted model) over stdio"
)]
struct Cli {
    /// Where session logs live (one JSON-lines file per session): outside the workspace, every
    /// extra writable root, /tmp and $TMPDIR, and writable by no one else (else the agent refuses
    /// to start, STATE_DIR_IN_WRITABLE_ROOT or STATE_DIR_WRITABLE_BY_OTHERS); made 0700 if missing.
    #[arg(long)]
    sessions: PathBuf,
    /// The deployment default sandbox mode.
    #[arg(long, default_value = "read-only")]
    mode: SandboxMode,
    /// The deployment default approval policy: ask or never.
    #[arg(long, default_value = "ask", value_parser = ["ask", "never"])]
    approval: String,
    /// The deployment default network: restricted or enabled (enabled keeps the seeds'
    /// behaviour: no network restriction). The presets stand for it.
    #[arg(long, default_value_t = NetworkMode::Enabled)]
    network: NetworkMode,
    /// The configured workspace root (the fallback; sessions use their own cwd).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// An extra writable root under workspace-write (repeatable): absolute, an existing
    /// directory, checked like the workspace and pinned at start.
    #[arg(long = "writable-root", value_name = "DIR")]
    writable_roots: Vec<PathBuf>,
    /// A protected path inside the workspace and every extra root (repeatable; relative, no
    /// `..`); replaces the default (`sandbox::DEFAULT_PROTECTED_PATHS`).
    #[arg(long = "protected-path", value_name = "PATH", value_parser = parse_protected)]
    protected_paths: Vec<ProtectedPath>,
    /// Protect nothing inside the writable roots (not even `.git/hooks` and `.git/config`; the
    /// git surface guard is off too).
    #[arg(long, conflicts_with = "protected_paths")]
    no_protected_paths: bool,
    /// A named unix socket on the host every confined command may connect to (repeatable; an
    /// ssh agent's `$SSH_AUTH_SOCK`): absolute, an existing socket, outside the workspace and the
    /// extra roots. No backend here allows it by path: `host-ipc` is then reported `partial`.
    #[arg(long = "allow-socket", value_name = "PATH")]
    allow_sockets: Vec<PathBuf>,
    /// A hook command run before every tool call through the session's confined shell, under the
    /// session's policy; `$SANDBOX_AGENT_TOOL` names the tool; a non-zero exit blocks the call.
    #[arg(long)]
    pre_tool_hook: Option<String>,
    /// Compose without an approval service (refused: the permission presets need one).
    #[arg(long)]
    no_approval_service: bool,
    /// Compose over a shell that does not confine (refused: the presets' modes would mean nothing).
    #[arg(long)]
    unconfined_shell: bool,
    /// Confine with this backend only (bwrap, landlock, seatbelt) instead of the platform chain:
    /// when it is not usable here every confined call is SANDBOX_UNAVAILABLE, never unconfined.
    #[arg(long)]
    backend: Option<sandbox_local::Backend>,
    /// Cap the Landlock ABI the launcher uses (it then reports partial below ABI 3).
    #[arg(long)]
    abi_cap: Option<u32>,
    /// Share the host's /tmp and $TMPDIR with confined commands (writable under
    /// workspace-write), as the seeds do: every result then names the gap (`shared temp area`).
    /// Without it the agent makes a private temp area when it starts (named on stderr), which
    /// its commands see at /tmp (or as $TMPDIR where no mount namespace can be had) and the
    /// write and read tools map /tmp to; it is removed when the agent ends.
    #[arg(long)]
    shared_tmp: bool,
}

/// The provider's configuration: the platform chain, or one backend, with the ABI cap.
fn local_config(backend: Option<sandbox_local::Backend>, abi_cap: Option<u32>) -> LocalConfig {
    let mut config = backend.map(LocalConfig::only).unwrap_or_default();
    config.landlock_abi_cap = abi_cap;
    config
}

fn parse_protected(pattern: &str) -> Result<ProtectedPath, String> {
    ProtectedPath::new(pattern).map_err(|e| e.to_string())
}

/// Runs `sandbox-agent` on `args` (the program's name first, as `std::env::args_os` gives it):
/// the binary is this on its own argv, and a multi-call binary (an installed `certify`) that is
/// to act as the agent hands it an argv whose first element is `sandbox-agent`. Clap's usage
/// errors exit the process as they do for the binary.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::parse_from(args);
    let approval = if cli.approval == "never" {
        ApprovalPolicy::Never
    } else {
        ApprovalPolicy::Ask
    };
    let workspace = cli
        .workspace
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let composition = Composition {
        approval: !cli.no_approval_service,
        confining: !cli.unconfined_shell,
    };
    let protected = match (cli.no_protected_paths, cli.protected_paths.is_empty()) {
        (true, _) => Vec::new(),
        (false, true) => ProtectedPath::defaults(),
        (false, false) => cli.protected_paths.clone(),
    };
    // Held until the agent ends, then removed with whatever its commands left in it.
    let area = match cli.shared_tmp {
        true => None,
        false => match sandbox_local::temp_area::TempAreaDir::create() {
            Ok(area) => {
                eprintln!(
                    "sandbox-agent: private temp area (what commands write in /tmp): {}",
                    area.path().join("tmp").display()
                );
                Some(area)
            }
            Err(e) => {
                eprintln!("sandbox-agent: cannot make the private temp area: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let temp_area = area
        .as_ref()
        .map_or(sandbox::TempArea::Shared, |a| a.temp_area());
    let setup = PolicyService::new(cli.mode, &workspace)
        .map(|policy| policy.with_temp_area(temp_area))
        .and_then(|policy| policy.with_writable_roots(&cli.writable_roots))
        .map(|policy| policy.with_protected_paths(protected))
        .and_then(|policy| policy.with_allow_unix_sockets(&cli.allow_sockets))
        .map_err(|e| e.to_string())
        .and_then(|policy| {
            let presets = PresetTable::standard(cli.mode, approval)
                .map_err(|e| e.to_string())?
                .with_default_network(cli.network);
            let policy = policy
                .with_default_approval(approval)
                .with_default_network(cli.network);
            // Outside every writable root and private, or the agent does not start: a confined
            // command that could append to a log could switch its own session's mode.
            let sessions =
                crate::prepare_sessions_dir(&policy, &cli.sessions).map_err(|e| e.to_string())?;
            Bridge::new(policy, presets, &sessions, composition).map_err(|e| e.to_string())
        });
    let bridge = match setup {
        Ok(b) => b,
        Err(e) => {
            eprintln!("sandbox-agent: bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sandbox-agent: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let served = runtime.block_on(serve(AgentSetup {
        bridge,
        provider: Arc::new(LocalProvider::new(local_config(cli.backend, cli.abi_cap))),
        pre_tool_hook: cli.pre_tool_hook,
    }));
    // Turns still running when the editor leaves are not waited for.
    runtime.shutdown_background();
    drop(area);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandbox-agent: {e}");
            ExitCode::from(1)
        }
    }
}
