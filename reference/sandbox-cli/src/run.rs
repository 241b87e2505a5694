//! `sandboxctl run`: one command confined, its result facts printed as [`RunFacts`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sandbox::{Classification, ExtraRoot, ProcessOutcome, ProtectedPath, SandboxProvider};
use sandbox_local::LocalConfig;
use sandbox_local::LocalProvider;
use sandbox_local::launch::{self, LaunchOptions};

use crate::facts::{RanFacts, RefusedFacts, RunFacts, UnavailableFacts};
use crate::{RunArgs, UNAVAILABLE_EXIT, admit_cache, print_json};

/// Confines and runs the command, prints its facts, and returns its exit status.
pub(crate) fn run(args: RunArgs, mut config: LocalConfig) -> ExitCode {
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
        shared_tmp,
        ..
    } = args;
    let emit = |facts: RunFacts| print_json(&facts);
    let workspace = workspace
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    let mut protected_paths = ProtectedPath::defaults();
    protected_paths.extend(protect);
    let policy = sandbox::ExecutionPolicy::new(mode, &workspace)
        .with_network(network)
        .with_roots(|r| {
            r.with_extra_roots(writable_roots.into_iter().map(ExtraRoot::new).collect())
        })
        .with_roots(|r| r.with_protected_paths(protected_paths))
        .with_roots(|r| r.with_allow_unix_sockets(allow_sockets));
    // Bad roots (and bad socket allowances) are refused before any runner starts, each with its own code.
    let policy = match policy.pinned().and_then(|p| p.check().map(|_| p)) {
        Ok(p) => p,
        Err(e) => {
            emit(refused(mode, e.code(), e.to_string()));
            return ExitCode::from(2);
        }
    };
    // The probe cache must lie outside what this call's payload may write.
    let served: Vec<sandbox::ProviderPolicy> = policy.for_provider().into_iter().collect();
    if let Err(e) = admit_cache(&mut config, &served) {
        emit(refused(mode, e.code(), e.to_string()));
        return ExitCode::from(2);
    }
    let workspace = policy.roots.workspace_pin.as_ref().map_or_else(
        || policy.roots.workspace_root.clone(),
        |pin| pin.path.clone(),
    );
    let mut options = LaunchOptions::in_dir(&workspace);
    options.timeout = timeout.map(Duration::from_secs);
    if let Some(cap) = output_cap {
        options.output_cap = cap;
    }
    let local = std::sync::Arc::new(LocalProvider::new(config));
    // The explicit ask for the host's shared temp places confines with the provider alone; by
    // default the call gets a private temp area of its own.
    let provider: Box<dyn SandboxProvider> = match shared_tmp {
        true => Box::new(local.clone()),
        false => Box::new(sandbox_local::temp_area::PerCallArea::new(local.clone())),
    };
    let guard = policy.for_provider().and_then(|p| provider.call_guard(&p));
    let confined = match policy.for_provider() {
        // danger-full-access never reaches a provider.
        None => sandbox::ConfinedArgv::unconfined(command),
        Some(provider_policy) => match provider.confine(&command, &provider_policy) {
            Ok(c) => c,
            Err(e) => {
                emit(RunFacts::from(UnavailableFacts {
                    mode,
                    error: e.code().into(),
                    backend: e.backend,
                    detail: e.detail,
                    runner_failed: true,
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
        local.forget_cached_selection();
    }
    let denied = matches!(done.classification, Classification::Denied { .. });
    let detail = match &done.classification {
        Classification::RunnerFailure { detail, .. } => Some(detail.clone()),
        _ => None,
    };
    let facts = RanFacts {
        mode,
        network,
        backend: confined.backend,
        enforcement: confined.enforcement,
        classes: confined.classes,
        exit_code,
        signal,
        timed_out: done.timed_out,
        denied,
        runner_failed,
        stdout: text(std::mem::take(&mut done.stdout)),
        stderr: text(std::mem::take(&mut done.stderr)),
        // Only present when output was cut: how many bytes of each stream were read and not kept.
        dropped: done.dropped.any().then_some(done.dropped),
        marker: denied.then(|| sandbox::denial_marker(mode)),
        error: detail
            .is_some()
            .then(|| sandbox::SANDBOX_UNAVAILABLE.to_owned()),
        detail,
        classification: done.classification,
    };
    emit(facts.into());
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

/// The facts of a call refused before any runner started.
fn refused(mode: sandbox::SandboxMode, code: &str, detail: String) -> RunFacts {
    RunFacts::from(RefusedFacts {
        mode,
        error: code.to_owned(),
        detail,
    })
}
