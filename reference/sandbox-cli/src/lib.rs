//! `sandboxctl`: how a person checks a host by hand, as a library with a thin binary.
//!
//! - `sandboxctl probe` prints what each backend would do here (usable or why not, enforcement,
//!   Landlock ABI, bwrap version) and which one the platform chain selects.
//! - `sandboxctl run --mode M [--network N] --workspace DIR [--writable-root DIR]... [--protect P]...
//!   [--allow-socket PATH]... [--backend B] [--output-cap SIZE] -- CMD...` confines one command and prints its result facts as JSON
//!   (at most `--output-cap` of each stream, 4 MiB by default; `dropped` says how much more there was). Usable probe verdicts are shared across invocations
//!   (`sandbox_local::cache`; `SANDBOX_PROBE_CACHE=off` probes every time), and a runner failure
//!   drops the verdict it used.

//!
//! The binary (`src/main.rs`) is one line: [`main_with_args`] on the process's arguments. Another
//! binary embeds `sandboxctl` the same way (a multi-call binary that acts as `sandboxctl` when
//! called by that name hands its whole argv, program name first, to [`main_with_args`]).
//!
//! Modules:
//!
//! - [`facts`]: [`RunFacts`], the typed JSON `sandboxctl run` prints (the conformance suite reads
//!   it back with the same type);
//! - `probe`: `sandboxctl probe`, every backend's verdict and the chain's selection;
//! - `run`: `sandboxctl run`, one command confined and its facts.

pub mod facts;
mod probe;
mod run;

pub use facts::{RanFacts, RefusedFacts, RunFacts, UnavailableFacts};

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sandbox::{NetworkMode, ProtectedPath, SandboxMode};
use sandbox_local::launch;
use sandbox_local::{Backend, LocalConfig, OperatorRunner};
use serde::Serialize;

/// The exit code of `sandboxctl run` when the sandbox itself could not confine the command (it
/// never ran).
pub const UNAVAILABLE_EXIT: u8 = 125;

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
    /// How long one probe may take, in milliseconds (a hang guard).
    #[arg(long, default_value_t = sandbox_local::DEFAULT_PROBE_TIMEOUT.as_millis() as u64)]
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
pub(crate) struct RunArgs {
    /// read-only, workspace-write or danger-full-access.
    #[arg(long)]
    pub(crate) mode: SandboxMode,
    /// restricted or enabled (default: enabled, no network restriction).
    #[arg(long, default_value_t = NetworkMode::Enabled)]
    pub(crate) network: NetworkMode,
    /// The workspace root (default: the current directory).
    #[arg(long)]
    pub(crate) workspace: Option<PathBuf>,
    /// A writable root beyond the workspace under workspace-write (repeatable; an existing
    /// directory, checked like the workspace).
    #[arg(long = "writable-root")]
    pub(crate) writable_roots: Vec<PathBuf>,
    /// A path inside each writable root that is never written, added to the defaults
    /// (sandbox::DEFAULT_PROTECTED_PATHS: git's fixed config and hook files, .husky, hook
    /// managers', mise's and toolchain files, editor and agent folders; repeatable; relative, no
    /// `..`).
    #[arg(long, value_parser = protected_path)]
    pub(crate) protect: Vec<ProtectedPath>,
    /// A named unix socket on the host the command may connect to (repeatable; an ssh agent's
    /// `$SSH_AUTH_SOCK`): absolute, an existing socket, outside the workspace and the writable
    /// roots. No backend here allows it by path: `host-ipc` is then reported `partial`, and the
    /// result's `classes.host-ipc.allowed` lists it.
    #[arg(long = "allow-socket", value_name = "PATH")]
    pub(crate) allow_sockets: Vec<PathBuf>,
    /// Use this backend instead of the platform chain.
    #[arg(long)]
    pub(crate) backend: Option<Backend>,
    /// Share the host's /tmp and $TMPDIR with the command (writable under workspace-write), as
    /// the seeds do: the result then names the gap (`shared temp area`). Without it the command
    /// gets a private temp area of its own, seen at /tmp where a mount namespace can be had (else
    /// as $TMPDIR) and removed after it.
    #[arg(long)]
    pub(crate) shared_tmp: bool,
    #[command(flatten)]
    pub(crate) runners: Runners,
    /// Kill the command after this many seconds.
    #[arg(long)]
    pub(crate) timeout: Option<u64>,
    /// The most output kept of each stream (4096, 512KiB, 5MiB; default 4MiB); the rest is read,
    /// counted in the result's `dropped` and never held.
    #[arg(long, value_name = "SIZE", value_parser = output_cap)]
    pub(crate) output_cap: Option<usize>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub(crate) command: Vec<OsString>,
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
fn print_json<T: Serialize + ?Sized>(value: &T) {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if serde_json::to_writer_pretty(&mut out, value).is_ok() {
        let _ = writeln!(out);
    }
    let _ = out.flush();
}

/// Runs `sandboxctl` on `args` (program name first, as [`std::env::args_os`] yields them; its
/// file name is the program name in usage and help) and returns its exit status: 0, the
/// confined command's own status, 2 for bad input or configuration (and clap's usage errors),
/// [`UNAVAILABLE_EXIT`] when the sandbox could not confine the command. It prints to stdout and
/// stderr and never exits the process itself.
///
/// What a multi-call binary does when it is called as `sandboxctl`:
///
/// ```
/// let status = sandbox_cli::main_with_args(["sandboxctl", "--version"]);
/// assert_eq!(status, std::process::ExitCode::SUCCESS);
/// ```
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        // Usage, `--help` and `--version` print as clap's own `exit` would, with its status.
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    match cli.command {
        Command::Probe { runners } => match config(None, &runners) {
            Ok(mut config) => match admit_cache(&mut config, &[]) {
                Ok(()) => probe::probe(config),
                Err(e) => bad_config(&e.to_string()),
            },
            Err(e) => bad_config(&e),
        },
        Command::Run(args) => match config(args.backend, &args.runners) {
            Ok(config) => run::run(args, config),
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
pub(crate) fn admit_cache(
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
