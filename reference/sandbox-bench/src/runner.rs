//! How one command of a row runs and what it cost: a process spawn, the library's spawn path
//! unconfined, or the provider's whole path; the CPU clock around it and the reaping of the
//! orphans a runner leaves to this subreaper.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandbox::{ProviderPolicy, SandboxProvider};
use sandbox_local::LocalProvider;
use sandbox_local::launch::{self, LaunchOptions};

/// The payload every row runs.
pub(crate) const PAYLOAD: [&str; 3] = ["bash", "-c", "true"];

/// One command a row runs: the argv, its environment and where.
pub(crate) struct Spawn {
    argv: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    /// Run before every timed command, untimed (the cold cache is emptied here).
    pub(crate) before: Option<Box<dyn Fn() + Send + Sync>>,
}

impl Spawn {
    pub(crate) fn new(argv: Vec<OsString>, cwd: &Path) -> Spawn {
        Spawn {
            argv,
            env: Vec::new(),
            cwd: cwd.to_path_buf(),
            before: None,
        }
    }

    /// Runs once; the time of the spawn and the wait only.
    fn once(&self) -> Result<Duration, String> {
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let start = Instant::now();
        let out = cmd.output().map_err(|e| format!("cannot spawn: {e}"))?;
        let took = start.elapsed();
        if out.status.success() {
            Ok(took)
        } else {
            Err(format!(
                "{} ({})",
                out.status,
                tail(&String::from_utf8_lossy(&out.stderr))
            ))
        }
    }
}

/// The last line or so of a failure's stderr.
pub(crate) fn tail(s: &str) -> String {
    let s = s.trim();
    let start = s.char_indices().rev().nth(300).map_or(0, |(i, _)| i);
    s[start..].replace('\n', " / ")
}

/// How a row runs one command.
pub(crate) enum Runner {
    Process(Spawn),
    /// The library's spawn path (status channel, descriptor hygiene, classification) on an
    /// unconfined argv: how `danger-full-access` runs.
    Launch(Box<(sandbox::ConfinedArgv, LaunchOptions)>),
    Library(Box<(LocalProvider, ProviderPolicy, LaunchOptions)>),
}

impl Runner {
    /// The untimed preparation of the next command (emptying a cold cache).
    pub(crate) fn before(&self) {
        if let Runner::Process(Spawn {
            before: Some(before),
            ..
        }) = self
        {
            before();
        }
    }

    pub(crate) fn once(&self) -> Result<Duration, String> {
        match self {
            Runner::Process(spawn) => spawn.once(),
            Runner::Launch(launch) => {
                let (argv, options) = &**launch;
                let start = Instant::now();
                let done = launch::run(argv, options);
                let took = start.elapsed();
                match done.exit_code() {
                    Some(0) => Ok(took),
                    _ => Err(format!("{:?}", done.classification)),
                }
            }
            Runner::Library(lib) => {
                let (provider, policy, options) = &**lib;
                let start = Instant::now();
                let confined = provider
                    .confine(&payload(), policy)
                    .map_err(|e| e.to_string())?;
                let done = launch::run(&confined, options);
                let took = start.elapsed();
                match done.exit_code() {
                    Some(0) => Ok(took),
                    _ => Err(format!("{:?}", done.classification)),
                }
            }
        }
    }
}

/// User and system CPU seconds of this process and of every descendant waited for so far: the
/// difference around one command is what it cost the machine, whatever the load (wall time
/// under contention also counts the waits for a CPU).
pub(crate) fn cpu_seconds() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    [UsageWho::RUSAGE_SELF, UsageWho::RUSAGE_CHILDREN]
        .into_iter()
        .filter_map(|who| getrusage(who).ok())
        .map(|u| secs(u.user_time()) + secs(u.system_time()))
        .sum()
}

/// Reaps every child that ended (orphans reparented to this subreaper), waiting at most a
/// little for the ones still exiting.
pub(crate) fn reap_orphans() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let give_up = Instant::now() + Duration::from_millis(200);
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

pub(crate) fn payload() -> Vec<OsString> {
    PAYLOAD.iter().map(OsString::from).collect()
}

pub(crate) fn os<S: AsRef<OsStr>>(s: S) -> OsString {
    s.as_ref().to_os_string()
}

/// Makes this process a child subreaper (or stops); whether it is one now. Linux only
/// (`PR_SET_CHILD_SUBREAPER`): elsewhere it never is, and the table says so.
pub(crate) fn set_subreaper(on: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(on).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = on;
        false
    }
}
