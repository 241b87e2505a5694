//! The spawner as a user notices it: output is complete, a timeout kills the whole process tree,
//! and something the payload leaves behind can neither hang the call nor outlive it.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use sandbox::{Classification, ConfinedArgv, ProcessOutcome};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_test_support::scratch_dir;

fn bash(script: &str) -> ConfinedArgv {
    ConfinedArgv::unconfined(vec!["bash".into(), "-c".into(), OsString::from(script)])
}

fn pid_alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn output_larger_than_a_pipe_buffer_is_collected_whole() {
    let done = launch::run(
        &bash("head -c 1000000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2"),
        &LaunchOptions::in_dir("/"),
    );
    assert_eq!(done.exit_code(), Some(0));
    assert_eq!(done.stdout.len(), 1_000_000);
    assert_eq!(done.stderr.len(), 300_000);
}

#[test]
fn a_timeout_kills_the_whole_process_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("grandchild");
    let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let mut options = LaunchOptions::in_dir("/");
    options.timeout = Some(Duration::from_millis(300));
    let start = Instant::now();
    let done = launch::run(&bash(&script), &options);
    assert!(done.timed_out);
    // A hang guard (the payload waits on a 300 s sleep), not a speed test.
    assert!(start.elapsed() < Duration::from_secs(60));
    assert!(matches!(done.outcome, ProcessOutcome::Signaled { .. }));
    let grandchild = std::fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .to_owned();
    // SIGKILL is delivered asynchronously: wait for the death it causes (a survivor would
    // still be sleeping when the 30 s guard runs out).
    let deadline = Instant::now() + Duration::from_secs(30);
    while pid_alive(&grandchild) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !pid_alive(&grandchild),
        "the backgrounded sleep survived the timeout"
    );
}

#[test]
fn a_background_leftover_holding_stdout_neither_hangs_nor_outlives_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("leftover");
    let script = format!("sleep 300 & echo $! > {}; echo done", pidfile.display());
    let start = Instant::now();
    let done = launch::run(&bash(&script), &LaunchOptions::in_dir("/"));
    // A hang guard: the leftover holds stdout for 300 s.
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(done.exit_code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&done.stdout), "done\n");
    let leftover = std::fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .to_owned();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!pid_alive(&leftover), "the leftover outlived the call");
}

#[test]
fn a_missing_workdir_is_a_start_failure_not_a_runner_failure() {
    let done = launch::run(
        &bash("true"),
        &LaunchOptions::in_dir("/nonexistent/workdir"),
    );
    assert!(
        matches!(done.classification, Classification::StartFailed { .. }),
        "{:?}",
        done.classification
    );
}

#[test]
fn a_missing_runner_is_a_runner_failure_through_the_spawn_channel() {
    let mut launch = bash("true");
    launch.argv.insert(0, "/nonexistent/runner".into());
    let done = launch::run(&launch, &LaunchOptions::in_dir("/"));
    assert!(
        matches!(
            done.classification,
            Classification::RunnerFailure {
                evidence: sandbox::Evidence::SpawnChannel,
                ..
            }
        ),
        "{:?}",
        done.classification
    );
}

#[test]
fn a_workdir_is_usable_exactly_when_this_process_can_enter_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir("launch-");
    for mode in [0o755, 0o700, 0o600, 0o000] {
        let d = dir.path().join(format!("d{mode:o}"));
        std::fs::create_dir(&d).expect("mkdir");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).expect("chmod");
        // What a spawn would find: can this process chdir there? (root can enter any directory;
        // a user cannot enter one without search permission.)
        let enterable = std::process::Command::new("true")
            .current_dir(&d)
            .status()
            .is_ok();
        assert_eq!(launch::workdir_usable(&d), enterable, "mode {mode:o}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod back");
    }
    assert!(!launch::workdir_usable(&dir.path().join("missing")));
}

#[test]
fn an_unenterable_workdir_is_a_start_failure_not_the_runners() {
    // The runner exists and is executable; the spawn fails on the workdir. Only a user can be
    // refused a directory, so as root this checks the missing-directory path of the same rule.
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir("launch-");
    let d = dir.path().join("closed");
    std::fs::create_dir(&d).expect("mkdir");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let workdir = if launch::workdir_usable(&d) {
        dir.path().join("missing")
    } else {
        d.clone()
    };
    let mut launch_argv = bash("echo ran");
    launch_argv.argv.insert(0, "/usr/bin/env".into());
    let done = launch::run(&launch_argv, &LaunchOptions::in_dir(&workdir));
    assert!(
        matches!(done.classification, Classification::StartFailed { .. }),
        "{:?}",
        done.classification
    );
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod back");
}

/// The launcher's staging directory (where it makes new git directories private while a call
/// runs) belongs to the launch: one confined and never run leaves nothing in this user's cache
/// once its last copy goes, and one that ran leaves nothing either (merged, then removed).
#[test]
fn a_launchs_staging_directory_goes_with_it_whether_it_ran_or_not() {
    use sandbox::{ConfinedMode, ProviderPolicy, SandboxProvider};
    use sandbox_local::{Backend, LocalConfig, LocalProvider};
    let dir = scratch_dir("staging-");
    let ws = sandbox::canonical_path(dir.path()).expect("canonical");
    let provider = LocalProvider::new(LocalConfig::only(Backend::Landlock));
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws.clone());
    let confine = || {
        let argv = [
            OsString::from("/bin/sh"),
            "-c".into(),
            "git init -q new".into(),
        ];
        provider.confine(&argv, &policy).expect("confine")
    };
    let never_run = confine();
    let staged = never_run
        .fds
        .staging()
        .expect("the landlock launch of workspace-write stages new git directories")
        .dir
        .clone();
    assert!(staged.is_dir(), "{}", staged.display());
    let copy = never_run.clone();
    drop(never_run);
    assert!(staged.is_dir(), "a copy of the launch still holds it");
    drop(copy);
    assert!(!staged.exists(), "left behind: {}", staged.display());

    let ran = confine();
    let staged = ran.fds.staging().expect("staging").dir.clone();
    let done = launch::run(&ran, &LaunchOptions::in_dir(&ws));
    assert_eq!(done.exit_code(), Some(0), "{done:?}");
    assert!(
        ws.join("new/.git/HEAD").is_file(),
        "the new repository is merged into place"
    );
    assert!(!staged.exists(), "merged, then removed");
    drop(ran);
    assert!(!staged.exists());
}
