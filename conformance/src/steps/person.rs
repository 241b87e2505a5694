//! The person at the host: their own tools (`git`, `cargo`, `pytest`), run by the harness
//! unconfined, as the person's shell would run them, while a call runs ([`super::during`]) and
//! after it ([`super::attack`]'s `host_git`).
//!
//! Each runs through the one launch path (`sandbox_local::launch`): its own process group,
//! killed when it ends or when its deadline passes, stdin from `/dev/null` and its output kept,
//! so a planted hook that never returns or a daemon holding the output open cannot hang the
//! harness, and a failure is told in the tool's own words. No shell and no `timeout` process
//! stand between the harness and the tool: on a virtual machine every process start costs as
//! much as a small tool's whole run (docs/speed.md).

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sandbox::{ConfinedArgv, ProcessOutcome};
use sandbox_local::launch::{self, LaunchOptions};

/// The longest one of the person's tools, or one round of the person's git, may take (a planted
/// fsmonitor that never returns).
pub(super) const TOOL_TIMEOUT: Duration = Duration::from_secs(20);

/// The most of each of a tool's output streams kept (stdout for what the harness reads back,
/// the last line of stderr to explain a failure).
const TOOL_OUTPUT_CAP: usize = 64 * 1024;

/// The file the person changes before a commit, so the commit has something to record.
const PERSONS_FILE: &str = "person.txt";

/// The person's programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Program {
    /// `git`.
    Git,
    /// `cargo`: rustup's proxy where there is one.
    Cargo,
    /// `pytest`.
    Pytest,
}

impl Program {
    /// The program the person's shell finds ([`crate::prerequisites::locate`]: for `cargo`,
    /// rustup's proxy, never a toolchain's own `bin` a parent `cargo` put first on this
    /// process's `PATH`), looked up once per run; its bare name when it is not found (running
    /// it then fails in the spawn's own words).
    pub(super) fn path(self) -> OsString {
        static FOUND: [OnceLock<OsString>; 3] = [const { OnceLock::new() }; 3];
        let name = match self {
            Program::Git => "git",
            Program::Cargo => "cargo",
            Program::Pytest => "pytest",
        };
        FOUND[self as usize]
            .get_or_init(|| {
                crate::prerequisites::locate(name)
                    .map_or_else(|| OsString::from(name), PathBuf::into_os_string)
            })
            .clone()
    }
}

/// Whether an environment variable of this process is one a parent `cargo`, test runner or
/// git set for itself, never the person's: a `RUSTUP_TOOLCHAIN` would override a toolchain
/// file, a `CARGO_TARGET_DIR` move the build, a `GIT_DIR` point git elsewhere.
fn parental(key: &OsStr) -> bool {
    let k = key.to_string_lossy();
    (k.starts_with("CARGO") && k != "CARGO_HOME")
        || k.starts_with("RUSTC")
        || k.starts_with("RUSTDOC")
        || k.starts_with("RUSTFLAGS")
        || k == "RUSTUP_TOOLCHAIN"
        || k.starts_with("PYTEST")
        || k.starts_with("PYTHON")
        || k.starts_with("GIT_")
        || k == "NEXTEST"
        || k.starts_with("NEXTEST_")
        || k == "LD_LIBRARY_PATH"
}

/// Runs `argv` in `dir` on the host as the person would, unconfined, until `deadline`: the
/// environment a parent set for itself left out ([`parental`]), git's global and system config
/// too ([`crate::world::PERSON_GIT`]), `env` added. `ok` judges the exit code. Its stdout, or
/// the failure in the tool's own words (its last line of stderr).
pub(super) fn run(
    dir: &Path,
    argv: Vec<OsString>,
    env: &[(&str, &OsStr)],
    deadline: Instant,
    ok: fn(i32) -> bool,
) -> Result<Vec<u8>, String> {
    let what = argv
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    // This process's environment does not change during a run: read once.
    static PARENTAL: OnceLock<Vec<OsString>> = OnceLock::new();
    let mut options = LaunchOptions::in_dir(dir);
    options.env_remove = PARENTAL
        .get_or_init(|| {
            std::env::vars_os()
                .map(|(k, _)| k)
                .filter(|k| parental(k))
                .collect()
        })
        .clone();
    options.env = crate::world::PERSON_GIT
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .chain(
            env.iter()
                .map(|(k, v)| (OsString::from(k), v.to_os_string())),
        )
        .collect();
    options.timeout = Some(deadline.saturating_duration_since(Instant::now()));
    options.output_cap = TOOL_OUTPUT_CAP;
    let done = launch::run(&ConfinedArgv::unconfined(argv), &options);
    let said = || {
        let text = String::from_utf8_lossy(&done.stderr);
        let last = text.lines().rev().find(|l| !l.trim().is_empty());
        last.map(|l| format!(" (it said: {})", l.trim()))
            .unwrap_or_default()
    };
    if done.timed_out {
        return Err(format!(
            "{what} did not end before its deadline (the person's tools get {} s){}",
            TOOL_TIMEOUT.as_secs(),
            said()
        ));
    }
    match &done.outcome {
        ProcessOutcome::Exited { code, .. } if ok(*code) => Ok(done.stdout),
        ProcessOutcome::Exited { code, .. } => Err(format!("{what} exited with {code}{}", said())),
        ProcessOutcome::Signaled { signal, .. } => {
            Err(format!("{what} was killed by signal {signal}{}", said()))
        }
        ProcessOutcome::SpawnFailed(f) => Err(format!("cannot run {what}: {}", f.message)),
    }
}

/// How the person's git goes on after a command of it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OnFailure {
    /// The rest runs anyway (what each command runs matters, not whether it succeeds).
    GoOn,
    /// The first failure is the answer (the repository must still work).
    Stop,
}

/// The person's git in `dir`: a change to [`PERSONS_FILE`] (never through a link or into a FIFO
/// the payload left there: the harness must not be the one that writes outside), then each of
/// `rounds` in order, with `env` added, all within one [`TOOL_TIMEOUT`]. Its last command's
/// stdout, or the first failure.
pub(super) fn git(
    dir: &Path,
    rounds: &[&[&str]],
    env: &[(&str, &OsStr)],
    on_failure: OnFailure,
) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + TOOL_TIMEOUT;
    let _ = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(dir.join(PERSONS_FILE))
        .and_then(|mut f| f.write_all(b"person\n"));
    let mut last = Ok(Vec::new());
    let mut failed = None;
    for args in rounds {
        let mut argv = vec![Program::Git.path()];
        argv.extend(args.iter().map(OsString::from));
        last = run(dir, argv, env, deadline, |c| c == 0);
        if let Err(e) = &last {
            if on_failure == OnFailure::Stop {
                break;
            }
            failed.get_or_insert_with(|| e.clone());
        }
    }
    match failed {
        Some(e) => Err(e),
        None => last,
    }
}

/// What `git rev-parse --absolute-git-dir` says in `dir` (the repository the person's git finds
/// there), before anything is changed.
pub(super) fn git_dir(dir: &Path) -> Result<PathBuf, String> {
    let argv = vec![
        Program::Git.path(),
        "rev-parse".into(),
        "--absolute-git-dir".into(),
    ];
    let out = run(dir, argv, &[], Instant::now() + TOOL_TIMEOUT, |c| c == 0)?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out).trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_that_fails_or_hangs_is_named_in_its_own_words() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let sh = |script: &str| vec!["/bin/sh".into(), "-c".into(), script.into()];
        let far = Instant::now() + Duration::from_secs(60);
        let said = run(dir.path(), sh("echo broken >&2; exit 3"), &[], far, |c| {
            c == 0
        })
        .expect_err("exit 3 is a failure here");
        assert!(
            said.contains("exited with 3") && said.contains("broken"),
            "{said}"
        );
        let env = [("ADDED", OsStr::new("here"))];
        let ok = |c| c == 0 || c == 5;
        let out = run(dir.path(), sh("echo $ADDED; exit 5"), &env, far, ok);
        assert_eq!(out.expect("5 is judged ok"), b"here\n");
        // A planted hook that never returns: stopped at the deadline (launch kills its group).
        let started = Instant::now();
        let soon = started + Duration::from_millis(300);
        let said = run(dir.path(), sh("exec sleep 600"), &[], soon, |_| true)
            .expect_err("stopped at its deadline");
        assert!(said.contains("did not end"), "{said}");
        // A hang guard, not a speed test.
        assert!(started.elapsed() < Duration::from_secs(60), "{said}");
    }

    #[test]
    fn the_persons_change_never_follows_a_link_or_waits_on_a_fifo_the_payload_left() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "kept\n").expect("outside file");
        let linked = dir.path().join("linked");
        std::fs::create_dir(&linked).expect("mkdir");
        std::os::unix::fs::symlink(&outside, linked.join(PERSONS_FILE)).expect("link");
        let _ = git(&linked, &[], &[], OnFailure::Stop);
        assert_eq!(std::fs::read(&outside).expect("outside"), b"kept\n");
        // A FIFO nobody reads: the open fails at once instead of waiting for a reader forever.
        let piped = dir.path().join("piped");
        std::fs::create_dir(&piped).expect("mkdir");
        let fifo = piped.join(PERSONS_FILE);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644))
            .expect("mkfifo");
        let _ = git(&piped, &[], &[], OnFailure::Stop);
        // Without either, the change is made.
        let plain = dir.path().join("plain");
        std::fs::create_dir(&plain).expect("mkdir");
        let _ = git(&plain, &[], &[], OnFailure::Stop);
        let made = std::fs::read(plain.join(PERSONS_FILE)).expect("made");
        assert_eq!(made, b"person\n");
    }

    #[test]
    fn the_persons_git_stops_at_the_first_failure_or_goes_on_as_asked() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let ws = dir.path();
        let made = std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(ws)
            .status();
        assert!(made.is_ok_and(|s| s.success()));
        let commit = [&["add", "-A"][..], &["commit", "-qm", "person"]];
        git(ws, &commit, &[], OnFailure::Stop).expect("a commit");
        let log = || {
            let rounds = [&["log", "--format=%an %s"][..]];
            git(ws, &rounds, &[], OnFailure::Stop).expect("log")
        };
        assert_eq!(log(), b"person person\n");
        let failing = [
            &["no-such-command"][..],
            &["add", "-A"],
            &["commit", "-qm", "more"],
        ];
        let e = git(ws, &failing, &[], OnFailure::Stop).expect_err("an unknown command fails");
        assert!(e.contains("no-such-command"), "{e}");
        assert_eq!(log(), b"person person\n", "it stopped there");
        let e = git(ws, &failing, &[], OnFailure::GoOn).expect_err("the failure is still told");
        assert!(e.contains("no-such-command"), "{e}");
        assert_eq!(log(), b"person more\nperson person\n", "it went on");
        assert_eq!(
            git_dir(ws).expect("rev-parse"),
            std::fs::canonicalize(ws.join(".git")).expect("canonical")
        );
    }
}
