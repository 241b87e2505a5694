//! `sandboxctl`: how a person checks a host by hand.
//!
//! - `sandboxctl probe` prints what each backend would do here (usable or why not, enforcement,
//!   Landlock ABI, bwrap version) and which one the platform chain selects.
//! - `sandboxctl run --mode M [--network N] --workspace DIR [--writable-root DIR]... [--protect P]...
//!   [--allow-socket PATH]... [--backend B] [--output-cap SIZE] -- CMD...` confines one command and prints its result facts as JSON
//!   (at most `--output-cap` of each stream, 4 MiB by default; `dropped` says how much more there was). Usable probe verdicts are shared across invocations
//!   (`sandbox_local::cache`; `SANDBOX_PROBE_CACHE=off` probes every time), and a runner failure
//!   drops the verdict it used.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sandbox::{
    Classification, ExtraRoot, NetworkMode, ProcessOutcome, ProtectedPath, SandboxMode,
    SandboxProvider,
};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::probe::probe_all;
use sandbox_local::{Backend, LocalConfig, LocalProvider, OperatorRunner};
use serde_json::{Value, json};

/// Exit code when the sandbox itself could not confine the command (it never ran).
const UNAVAILABLE_EXIT: u8 = 125;

#[derive(Parser)]
#[command(
    name = "sandboxctl",
    version,
    about = "Probe this host's sandbox backends and run a command confined"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the runners are and how they are probed.
#[derive(clap::Args)]
struct Runners {
    /// Cap the Landlock ABI the launcher uses (it then reports partial below ABI 3).
    #[arg(long)]
    abi_cap: Option<u32>,
    /// The bwrap program (default: bwrap on PATH).
    #[arg(long)]
    bwrap: Option<PathBuf>,
    /// The landlock-run launcher (default: next to sandboxctl, then on PATH).
    #[arg(long)]
    launcher: Option<PathBuf>,
    /// How long one probe may take, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    probe_timeout_ms: u64,
    /// An operator runner command (bwrap-compatible) that skips selection and probes.
    #[arg(long)]
    runner_command: Option<PathBuf>,
    /// A runner-failure signature of the operator runner (repeatable; at least one required).
    #[arg(long = "runner-failure-signature")]
    runner_failure_signatures: Vec<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Print what each backend would do on this host, as JSON.
    Probe {
        #[command(flatten)]
        runners: Runners,
    },
    /// Run one command confined and print the result facts as JSON.
    Run(RunArgs),
}

/// What `sandboxctl run` confines, and how.
#[derive(clap::Args)]
struct RunArgs {
    /// read-only, workspace-write or danger-full-access.
    #[arg(long)]
    mode: SandboxMode,
    /// restricted or enabled (default: enabled, no network restriction).
    #[arg(long, default_value_t = NetworkMode::Enabled)]
    network: NetworkMode,
    /// The workspace root (default: the current directory).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A writable root beyond the workspace under workspace-write (repeatable; an existing
    /// directory, checked like the workspace).
    #[arg(long = "writable-root")]
    writable_roots: Vec<PathBuf>,
    /// A path inside each writable root that is never written, added to the defaults
    /// (sandbox::DEFAULT_PROTECTED_PATHS: git's fixed config and hook files, .husky, editor and
    /// agent folders; repeatable; relative, no `..`).
    #[arg(long, value_parser = protected_path)]
    protect: Vec<ProtectedPath>,
    /// A named unix socket on the host the command may connect to (repeatable; an ssh agent's
    /// `$SSH_AUTH_SOCK`): absolute, an existing socket, outside the workspace and the writable
    /// roots. No backend here allows it by path: `host-ipc` is then reported `partial`, and the
    /// result's `classes.host-ipc.allowed` lists it.
    #[arg(long = "allow-socket", value_name = "PATH")]
    allow_sockets: Vec<PathBuf>,
    /// Use this backend instead of the platform chain.
    #[arg(long)]
    backend: Option<Backend>,
    #[command(flatten)]
    runners: Runners,
    /// Kill the command after this many seconds.
    #[arg(long)]
    timeout: Option<u64>,
    /// The most output kept of each stream (4096, 512KiB, 5MiB; default 4MiB); the rest is read,
    /// counted in the result's `dropped` and never held.
    #[arg(long, value_name = "SIZE", value_parser = output_cap)]
    output_cap: Option<usize>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

fn output_cap(size: &str) -> Result<usize, String> {
    launch::parse_size(size).map_err(|e| e.to_string())
}

fn protected_path(pattern: &str) -> Result<ProtectedPath, String> {
    ProtectedPath::new(pattern).map_err(|e| e.to_string())
}

/// Prints `value` as pretty JSON, streamed (no second copy of a large output). A reader that
/// went away (`sandboxctl probe | head -1`) is no reason to panic: what it did not read is
/// dropped.
fn print_json(value: &Value) {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if serde_json::to_writer_pretty(&mut out, value).is_ok() {
        let _ = writeln!(out);
    }
    let _ = out.flush();
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Probe { runners } => match config(None, &runners) {
            Ok(mut config) => match admit_cache(&mut config, &[]) {
                Ok(()) => probe(config),
                Err(e) => bad_config(&e.to_string()),
            },
            Err(e) => bad_config(&e),
        },
        Command::Run(args) => match config(args.backend, &args.runners) {
            Ok(config) => run(args, config),
            Err(e) => bad_config(&e),
        },
    }
}

fn bad_config(e: &str) -> ExitCode {
    eprintln!("sandboxctl: bad configuration: {e}");
    ExitCode::from(2)
}

/// Checks the probe cache against the policies this call serves (none for `probe`): a directory
/// inside one of their writable roots (or `/tmp`, or one others may write) is never read or
/// written. Named explicitly (`SANDBOX_PROBE_CACHE=DIR`) it is bad input and nothing runs; the
/// default location (`$XDG_CACHE_HOME`, `~/.cache`) only means probing, with a warning.
fn admit_cache(
    config: &mut LocalConfig,
    policies: &[sandbox::ProviderPolicy],
) -> Result<(), sandbox::StateDirError> {
    let Some(dir) = config.verdict_cache.take() else {
        return Ok(());
    };
    match sandbox::check_state_dir(sandbox_local::cache::WHAT, &dir, policies) {
        Ok(resolved) => {
            config.verdict_cache = Some(resolved);
            Ok(())
        }
        Err(e) if sandbox_local::cache::explicit_dir() => Err(e),
        Err(e) => {
            eprintln!("sandboxctl: warning: {e}; probing without the cache");
            Ok(())
        }
    }
}

fn config(backend: Option<Backend>, runners: &Runners) -> Result<LocalConfig, String> {
    let mut config = backend.map(LocalConfig::only).unwrap_or_default();
    config.landlock_abi_cap = runners.abi_cap;
    config.bwrap.clone_from(&runners.bwrap);
    config.launcher.clone_from(&runners.launcher);
    config.probe_timeout = Duration::from_millis(runners.probe_timeout_ms);
    // A person or a hook calls sandboxctl many times: share usable verdicts across processes.
    config.verdict_cache = sandbox_local::cache::default_dir();
    if let Some(cmd) = &runners.runner_command {
        let operator =
            OperatorRunner::new(vec![cmd.clone().into()], &runners.runner_failure_signatures)
                .map_err(|e| format!("--runner-command: {e}"))?;
        config.operator = Some(operator);
    } else if !runners.runner_failure_signatures.is_empty() {
        return Err("--runner-failure-signature needs --runner-command".into());
    }
    Ok(config)
}

fn probe(config: LocalConfig) -> ExitCode {
    let backends: Vec<Value> = probe_all(&config)
        .into_iter()
        .map(|v| {
            let mut entry = json!({ "backend": v.backend.name(), "program": v.program });
            match v.result {
                Ok(facts) => {
                    entry["usable"] = json!(true);
                    entry["enforcement"] = json!(facts.enforcement);
                    entry["version"] = json!(facts.version);
                    entry["landlock_abi"] = json!(facts.abi);
                    entry["kernel_landlock_abi"] = json!(facts.kernel_abi);
                    entry["ungoverned"] = json!(facts.ungoverned);
                    entry["classes"] = json!(facts.capabilities());
                }
                Err(reason) => {
                    entry["usable"] = json!(false);
                    entry["confines_nothing"] = json!(reason.confines_nothing());
                    entry["reason"] = json!(reason.to_string());
                }
            }
            entry
        })
        .collect();
    let provider = LocalProvider::new(config);
    let selected = match provider.selection() {
        Ok(s) => json!({
            "backend": s.backend.name(),
            "enforcement": s.enforcement(),
            "classes": s.capabilities(),
        }),
        Err(reason) => json!({ "error": "SANDBOX_UNAVAILABLE", "detail": reason.to_string() }),
    };
    let report = json!({
        "os": std::env::consts::OS,
        "chain": provider.config().chain.iter().map(|b| b.name()).collect::<Vec<_>>(),
        "selected": selected,
        "backends": backends,
    });
    print_json(&report);
    ExitCode::SUCCESS
}

fn run(args: RunArgs, mut config: LocalConfig) -> ExitCode {
    let RunArgs {
        mode,
        network,
        workspace,
        writable_roots,
        protect,
        allow_sockets,
        timeout,
        output_cap,
        command,
        ..
    } = args;
    let emit = |facts: Value| print_json(&facts);
    let workspace = workspace
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    let mut protected_paths = ProtectedPath::defaults();
    protected_paths.extend(protect);
    let policy = sandbox::ExecutionPolicy::new(mode, &workspace)
        .with_network(network)
        .with_extra_roots(writable_roots.into_iter().map(ExtraRoot::new).collect())
        .with_protected_paths(protected_paths)
        .with_allow_unix_sockets(allow_sockets);
    // Bad roots (and bad socket allowances) are refused before any runner starts, each with its own code.
    let policy = match policy.pinned().and_then(|p| p.check().map(|_| p)) {
        Ok(p) => p,
        Err(e) => {
            emit(json!({ "mode": mode, "error": e.code(), "detail": e.to_string() }));
            return ExitCode::from(2);
        }
    };
    // The probe cache must lie outside what this call's payload may write.
    let served: Vec<sandbox::ProviderPolicy> = policy.for_provider().into_iter().collect();
    if let Err(e) = admit_cache(&mut config, &served) {
        emit(json!({ "mode": mode, "error": e.code(), "detail": e.to_string() }));
        return ExitCode::from(2);
    }
    let workspace = policy
        .workspace_pin
        .as_ref()
        .map_or_else(|| policy.workspace_root.clone(), |pin| pin.path.clone());
    let mut options = LaunchOptions::in_dir(&workspace);
    options.timeout = timeout.map(Duration::from_secs);
    if let Some(cap) = output_cap {
        options.output_cap = cap;
    }
    let provider = LocalProvider::new(config);
    let guard = policy
        .for_provider()
        .and_then(|p| sandbox::SandboxProvider::call_guard(&provider, &p));
    let confined = match policy.for_provider() {
        // danger-full-access never reaches a provider.
        None => sandbox::ConfinedArgv {
            argv: command,
            backend: "none".into(),
            enforcement: sandbox::SandboxEnforcement::Full,
            classes: Default::default(),
            denial_signatures: Vec::new(),
            runner_failure_rules: Vec::new(),
            status_channel: None,
            fds: Default::default(),
        },
        Some(provider_policy) => match provider.confine(&command, &provider_policy) {
            Ok(c) => c,
            Err(e) => {
                emit(json!({
                    "mode": mode,
                    "error": e.code(),
                    "backend": e.backend,
                    "detail": e.detail,
                    "runner_failed": true,
                }));
                return ExitCode::from(UNAVAILABLE_EXIT);
            }
        },
    };
    let mut done = launch::run_guarded(&confined, &options, guard);
    let (exit_code, signal) = match &done.outcome {
        ProcessOutcome::Exited { code, .. } => (Some(*code), None),
        ProcessOutcome::Signaled { signal, .. } => (None, Some(*signal)),
        ProcessOutcome::SpawnFailed(_) => (None, None),
    };
    let runner_failed = matches!(done.classification, Classification::RunnerFailure { .. });
    if runner_failed {
        // A cached verdict fails closed once, then is probed again.
        provider.forget_cached_selection();
    }
    let mut facts = json!({
        "mode": mode,
        "network": network,
        "backend": confined.backend,
        "enforcement": confined.enforcement,
        "classes": confined.classes,
        "exit_code": exit_code,
        "signal": signal,
        "timed_out": done.timed_out,
        "denied": matches!(done.classification, Classification::Denied { .. }),
        "runner_failed": runner_failed,
        "classification": done.classification,
        "stdout": text(std::mem::take(&mut done.stdout)),
        "stderr": text(std::mem::take(&mut done.stderr)),
    });
    // Only present when output was cut: how many bytes of each stream were read and not kept.
    if done.dropped.any() {
        facts["dropped"] = json!(done.dropped);
    }
    if let Classification::Denied { .. } = done.classification {
        facts["marker"] = json!(sandbox::denial_marker(mode));
    }
    if let Classification::RunnerFailure { detail, .. } = &done.classification {
        facts["error"] = json!(sandbox::SANDBOX_UNAVAILABLE);
        facts["detail"] = json!(detail);
    }
    emit(facts);
    match (runner_failed, exit_code) {
        (true, _) => ExitCode::from(UNAVAILABLE_EXIT),
        (false, Some(code)) => ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)),
        (false, None) => ExitCode::from(1),
    }
}

/// Output as text, moved rather than copied when it is UTF-8 (it can be the whole output cap).
fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
