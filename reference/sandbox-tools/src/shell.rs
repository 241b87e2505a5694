//! The confined shell executor: one call = one policy = one confined `bash -c` launch.
//!
//! The exact argv `bash -c <command>` is confined by the provider and the returned argv is spawned
//! directly (no outer shell evaluates anything, `BASH_ENV` included, outside the sandbox). The
//! command sees `$TMPDIR` exactly as the policy's writable set does. `danger-full-access` never
//! touches the provider. Result facts say the mode the call actually ran under, so an escalated
//! call and its neighbours never mix.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use sandbox::{
    Classification, ConfinedArgv, ExecutionPolicy, ProcessOutcome, SandboxEnforcement, SandboxMode,
    SandboxProvider, SandboxUnavailable,
};
use sandbox_local::launch::{self, LaunchOptions};
use serde::Serialize;

/// The default most output kept per stream ([`ShellExecutor::with_output_cap`]); the rest is
/// never held in memory: it is counted ([`ShellResult::dropped`]) and cut with a note.
pub const OUTPUT_LIMIT: usize = 256 * 1024;

/// One shell call.
#[derive(Clone, Debug)]
pub struct ShellRequest {
    /// The command, run as `bash -c <command>`.
    pub command: String,
    /// Its working directory (default: the workspace root).
    pub workdir: Option<PathBuf>,
    /// Kill the whole process tree after this long.
    pub timeout: Option<Duration>,
}

/// What a finished call did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShellResult {
    /// The mode it actually ran under.
    pub mode: SandboxMode,
    /// The backend that confined it (`none` under `danger-full-access`).
    pub backend: String,
    /// The enforcement of that launch.
    pub enforcement: SandboxEnforcement,
    /// The enforcement of that launch per class (files, network), with what it left ungoverned.
    pub classes: sandbox::ClassEnforcements,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// The kernel refused a file effect.
    pub denied: bool,
    /// The sandbox itself failed and the command never ran (background tasks only; a foreground
    /// call returns [`ShellError::SandboxUnavailable`] instead).
    pub runner_failed: bool,
    /// The runner's own words when it failed.
    pub runner_detail: Option<String>,
    /// The timeout killed it.
    pub timed_out: bool,
    /// Cancellation killed it.
    pub cancelled: bool,
    /// Every process it started is known gone (see `sandbox_local::launch::Finished`); not part
    /// of the result's wire.
    #[serde(skip)]
    pub tree_reaped: bool,
    /// Its stdout (cut at the shell's output cap, [`OUTPUT_LIMIT`] unless configured).
    pub stdout: String,
    /// Its stderr (cut at the shell's output cap).
    pub stderr: String,
    /// How many bytes of each stream were cut (read and not kept); all zero when nothing was.
    #[serde(skip_serializing_if = "no_drop")]
    pub dropped: launch::Dropped,
}

fn no_drop(dropped: &launch::Dropped) -> bool {
    !dropped.any()
}

/// Why a foreground call did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The sandbox could not confine the command; it never ran.
    #[error(transparent)]
    SandboxUnavailable(#[from] SandboxUnavailable),
    /// The command could not start (a missing workdir, a resource limit).
    #[error("SHELL_START_FAILED: {0}")]
    StartFailed(String),
    /// The policy's roots were refused before anything ran (a missing or moved workspace, a
    /// temp dir that would widen the writable set, ...).
    #[error(transparent)]
    Root(#[from] sandbox::RootError),
}

impl ShellError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ShellError::SandboxUnavailable(_) => sandbox::SANDBOX_UNAVAILABLE,
            ShellError::StartFailed(_) => "SHELL_START_FAILED",
            ShellError::Root(e) => e.code(),
        }
    }
}

/// A background task's id.
pub type TaskId = u64;

/// A background task: its result once it finished (kept, so every read sees it), and its
/// cancel flag.
struct Task {
    result: Mutex<Option<ShellResult>>,
    finished: Condvar,
    cancel: Arc<AtomicBool>,
}

impl Task {
    /// Waits up to `wait` for the result without holding anything but this task's own lock.
    fn wait(&self, wait: Duration) -> Option<ShellResult> {
        let guard = self.result.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = self
            .finished
            .wait_timeout_while(guard, wait, |r| r.is_none())
            .unwrap_or_else(|p| p.into_inner());
        guard.clone()
    }
}

/// The shell: confining when it has a provider, honestly unconfined when it has none.
pub struct ShellExecutor {
    provider: Option<Arc<dyn SandboxProvider>>,
    tasks: Mutex<HashMap<TaskId, Arc<Task>>>,
    next_task: Mutex<TaskId>,
    output_cap: usize,
}

impl ShellExecutor {
    /// A confining shell over `provider`.
    pub fn confining(provider: Arc<dyn SandboxProvider>) -> ShellExecutor {
        ShellExecutor {
            provider: Some(provider),
            tasks: Mutex::new(HashMap::new()),
            next_task: Mutex::new(1),
            output_cap: OUTPUT_LIMIT,
        }
    }

    /// A shell that never confines (the escalation fields are not advertised over it).
    pub fn unconfined() -> ShellExecutor {
        ShellExecutor {
            provider: None,
            tasks: Mutex::new(HashMap::new()),
            next_task: Mutex::new(1),
            output_cap: OUTPUT_LIMIT,
        }
    }

    /// The same shell keeping at most `cap` bytes of each stream of a call (default
    /// [`OUTPUT_LIMIT`]); the rest is read, counted and never held.
    pub fn with_output_cap(mut self, cap: usize) -> ShellExecutor {
        self.output_cap = cap;
        self
    }

    /// True when calls are confined (so a sandbox mode means something here).
    pub fn confines(&self) -> bool {
        self.provider.is_some()
    }

    /// Where `path`, as this shell's commands see it under `policy`, lies on the host (see
    /// [`sandbox::Roots::host_path`]): a path in `/tmp` is in the session's private temp area
    /// when the provider shows that area at `/tmp`. The write and read tools act there, so a
    /// file one puts at `/tmp/x` is the file the shell reads at `/tmp/x`.
    pub fn host_path(
        &self,
        path: &std::path::Path,
        policy: &ExecutionPolicy,
    ) -> std::path::PathBuf {
        let at_tmp = match (&self.provider, policy.for_provider()) {
            (Some(provider), Some(p)) => provider.temp_area_at_tmp(&p),
            _ => false,
        };
        policy.roots.host_path(path, at_tmp)
    }

    /// The launch for `request` under `policy`: the provider's, or the bare argv when the mode
    /// (or this shell) does not confine. The roots are checked first, so nothing starts on a bad
    /// or moved workspace.
    fn launch(
        &self,
        request: &ShellRequest,
        policy: &ExecutionPolicy,
    ) -> Result<(ConfinedArgv, SandboxMode, Guard), ShellError> {
        policy.check()?;
        let argv: Vec<OsString> = vec!["bash".into(), "-c".into(), request.command.clone().into()];
        match (&self.provider, policy.for_provider()) {
            (Some(provider), Some(provider_policy)) => {
                let provider_policy = provider_policy.with_cwd(workdir(request, policy));
                let confined = provider.confine(&argv, &provider_policy)?;
                let guard = provider.call_guard(&provider_policy);
                Ok((confined, policy.mode, guard))
            }
            (None, _) | (_, None) => Ok((
                ConfinedArgv::unconfined(argv),
                // An unconfined shell runs everything with full access, whatever was asked.
                if self.provider.is_some() {
                    policy.mode
                } else {
                    SandboxMode::DangerFullAccess
                },
                None,
            )),
        }
    }

    /// Runs `request` in the foreground. A runner failure is [`ShellError::SandboxUnavailable`]
    /// with the runner's words: the command never ran.
    pub fn run(
        &self,
        request: &ShellRequest,
        policy: &ExecutionPolicy,
    ) -> Result<ShellResult, ShellError> {
        self.run_cancellable(request, policy, None)
    }

    /// [`ShellExecutor::run`] that stops when `cancel` is set: the whole process tree is killed
    /// (as for a cancelled background task) and the result says `cancelled`.
    pub fn run_cancellable(
        &self,
        request: &ShellRequest,
        policy: &ExecutionPolicy,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<ShellResult, ShellError> {
        let (launch_argv, mode, guard) = self.launch(request, policy)?;
        let result = execute(
            &launch_argv,
            mode,
            request,
            policy,
            cancel,
            self.output_cap,
            guard,
        );
        if result.runner_failed {
            return Err(ShellError::SandboxUnavailable(SandboxUnavailable {
                mode: policy
                    .mode
                    .confined()
                    .unwrap_or(sandbox::ConfinedMode::ReadOnly),
                backend: Some(launch_argv.backend.clone()),
                detail: result.runner_detail.unwrap_or_default(),
            }));
        }
        if result.exit_code.is_none()
            && result.signal.is_none()
            && let Some(start) = &result.runner_detail
        {
            return Err(ShellError::StartFailed(start.clone()));
        }
        Ok(result)
    }

    /// Starts `request` in the background under its own policy; its facts stay its own.
    pub fn start(
        &self,
        request: ShellRequest,
        policy: ExecutionPolicy,
    ) -> Result<TaskId, ShellError> {
        let (launch_argv, mode, guard) = self.launch(&request, &policy)?;
        let task = Arc::new(Task {
            result: Mutex::new(None),
            finished: Condvar::new(),
            cancel: Arc::new(AtomicBool::new(false)),
        });
        let worker = Arc::clone(&task);
        let cap = self.output_cap;
        std::thread::spawn(move || {
            let flag = Arc::clone(&worker.cancel);
            let result = execute(
                &launch_argv,
                mode,
                &request,
                &policy,
                Some(flag),
                cap,
                guard,
            );
            *worker.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
            worker.finished.notify_all();
        });
        let id = {
            let mut next = self.next_task.lock().unwrap_or_else(|p| p.into_inner());
            let id = *next;
            *next += 1;
            id
        };
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, task);
        Ok(id)
    }

    /// Cancels a background task: its whole process tree is killed. False for an unknown id.
    pub fn cancel(&self, task: TaskId) -> bool {
        let tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        match tasks.get(&task) {
            Some(t) => {
                t.cancel.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Waits up to `wait` for a background task; `None` while it still runs or for an unknown id.
    /// A finished task's result stays readable (every later read sees it). A settled task whose
    /// runner failed carries `runner_failed`. The task table is not locked while waiting, so
    /// starting and cancelling other tasks never waits on a read.
    pub fn output(&self, task: TaskId, wait: Duration) -> Option<ShellResult> {
        let task = {
            let tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(tasks.get(&task)?)
        };
        task.wait(wait)
    }
}

/// The kept head of a stream, with a visible note of what was cut after it.
fn cut(bytes: &[u8], dropped: u64) -> String {
    let text = String::from_utf8_lossy(bytes).into_owned();
    if dropped > 0 {
        format!("{text}\n[output cut: {dropped} bytes not shown]")
    } else {
        text
    }
}

/// The directory `request` runs in: its own, else the workspace root.
fn workdir(request: &ShellRequest, policy: &ExecutionPolicy) -> PathBuf {
    request
        .workdir
        .clone()
        .unwrap_or_else(|| policy.roots.workspace_root.clone())
}

/// The provider's check around one call, taken before it starts (see [`sandbox::CallGuard`]).
type Guard = Option<Box<dyn sandbox::CallGuard>>;

/// Spawns and classifies one launch, then settles its guard (a revert is a denial); never fails
/// (a failure is in the facts).
fn execute(
    launch_argv: &ConfinedArgv,
    mode: SandboxMode,
    request: &ShellRequest,
    policy: &ExecutionPolicy,
    cancel: Option<Arc<AtomicBool>>,
    output_cap: usize,
    guard: Guard,
) -> ShellResult {
    let mut options = LaunchOptions::in_dir(workdir(request, policy));
    options.timeout = request.timeout;
    options.cancel = cancel;
    options.output_cap = output_cap;
    match policy.roots.command_tmpdir() {
        Some(t) => options.env.push(("TMPDIR".into(), t.into_os_string())),
        None => options.env_remove.push("TMPDIR".into()),
    }
    let done = launch::run_guarded(launch_argv, &options, guard);
    let (exit_code, signal) = match &done.outcome {
        ProcessOutcome::Exited { code, .. } => (Some(*code), None),
        ProcessOutcome::Signaled { signal, .. } => (None, Some(*signal)),
        ProcessOutcome::SpawnFailed(_) => (None, None),
    };
    let (runner_failed, runner_detail) = match &done.classification {
        // A call stopped by its cancel or timeout before the payload ran is that, not a broken
        // sandbox: the runner was killed while it set up.
        Classification::RunnerFailure { detail, .. } if done.cancelled || done.timed_out => {
            (false, Some(detail.clone()))
        }
        Classification::RunnerFailure { detail, .. } => (true, Some(detail.clone())),
        Classification::StartFailed { detail } => (false, Some(detail.clone())),
        _ => (false, None),
    };
    ShellResult {
        mode,
        backend: launch_argv.backend.clone(),
        enforcement: launch_argv.enforcement,
        classes: launch_argv.classes.clone(),
        exit_code,
        signal,
        denied: matches!(done.classification, Classification::Denied { .. }),
        runner_failed,
        runner_detail,
        timed_out: done.timed_out,
        cancelled: done.cancelled,
        tree_reaped: done.tree_reaped,
        stdout: cut(&done.stdout, done.dropped.stdout),
        stderr: cut(&done.stderr, done.dropped.stderr),
        dropped: done.dropped,
    }
}
