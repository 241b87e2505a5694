//! The classifier as a consumer sees it: which verdict a launch gets, and the words it carries.
//! Each row pins one rule of the priority order (spawn channel > runner failure > denial >
//! ordinary) or one detail a user reads in `SANDBOX_UNAVAILABLE`.

use std::ffi::OsString;
use std::path::PathBuf;

use rstest::rstest;
use sandbox::{
    Classification, ConfinedArgv, Evidence, PayloadStatus, ProcessOutcome, RunnerFailureRule,
    SandboxEnforcement, SpawnErrorKind, SpawnFailure, StatusChannel, StatusFormat, classify,
};

const RUNNER: &str = "/usr/bin/bwrap";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// A bwrap-shaped launch: `EROFS` denials, a `bwrap: ` rule on exit 1, no status channel.
fn launch() -> ConfinedArgv {
    ConfinedArgv {
        argv: vec![RUNNER.into(), "--".into(), "true".into()],
        backend: "bwrap".into(),
        enforcement: SandboxEnforcement::Full,
        classes: Default::default(),
        denial_signatures: strings(&["Read-only file system"]),
        runner_failure_rules: vec![RunnerFailureRule {
            allowed_exit_codes: Some(vec![1]),
            fatal_signatures: strings(&["bwrap: "]),
            informational_lines: Vec::new(),
        }],
        status_channel: None,
        fds: Default::default(),
    }
}

/// The Landlock launcher's shape: a status channel decides runner failure; `EACCES` denials.
fn launcher() -> ConfinedArgv {
    ConfinedArgv {
        argv: vec!["/usr/libexec/landlock-run".into(), "true".into()],
        backend: "landlock".into(),
        enforcement: SandboxEnforcement::Full,
        classes: Default::default(),
        denial_signatures: strings(&["Permission denied"]),
        runner_failure_rules: vec![RunnerFailureRule {
            allowed_exit_codes: Some(vec![125]),
            fatal_signatures: strings(&["landlock-run: "]),
            informational_lines: strings(&["landlock-run: partial enforcement"]),
        }],
        status_channel: Some(StatusChannel {
            fd: 3,
            format: StatusFormat::LaunchReport,
        }),
        fds: Default::default(),
    }
}

fn exited(code: i32, stderr: &str) -> ProcessOutcome {
    ProcessOutcome::Exited {
        code,
        stderr: stderr.as_bytes().to_vec(),
    }
}

fn signaled(stderr: &str) -> ProcessOutcome {
    ProcessOutcome::Signaled {
        signal: 9,
        stderr: stderr.as_bytes().to_vec(),
    }
}

fn runner_failure(evidence: Evidence, detail: &str) -> Classification {
    Classification::RunnerFailure {
        evidence,
        detail: detail.to_owned(),
    }
}

fn denied(line: &str) -> Classification {
    Classification::Denied {
        line: line.to_owned(),
    }
}

#[rstest]
#[case::clean_success(exited(0, ""), Classification::Ordinary)]
#[case::plain_failure(
    exited(2, "ls: cannot access 'x': No such file or directory\n"),
    Classification::Ordinary
)]
#[case::runner_line_on_its_exit_code(
    exited(
        1,
        "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n"
    ),
    runner_failure(
        Evidence::StderrRule,
        "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"
    )
)]
#[case::runner_line_on_another_exit_code_is_the_payloads(
    exited(2, "bwrap: from the payload's own bwrap\n"),
    Classification::Ordinary
)]
#[case::runner_line_on_exit_0_never_is_a_runner_failure(
    exited(0, "bwrap: warning\n"),
    Classification::Ordinary
)]
#[case::denial_with_exit_0_is_still_a_denial(
    exited(0, "bash: f: Read-only file system\n"),
    denied("bash: f: Read-only file system")
)]
#[case::denial_on_failure(
    exited(1, "touch: cannot touch '/etc/x': Read-only file system\n"),
    denied("touch: cannot touch '/etc/x': Read-only file system")
)]
#[case::runner_failure_beats_a_denial_on_the_same_stderr(
    exited(
        1,
        "touch: x: Read-only file system\nbwrap: execvp true: No such file\n"
    ),
    runner_failure(Evidence::StderrRule, "bwrap: execvp true: No such file")
)]
#[case::signal_death_is_ordinary(
    signaled("bwrap: looks like a runner\n"),
    Classification::Ordinary
)]
#[case::signal_death_after_a_denial_is_a_denial(
    signaled("cp: x: Read-only file system\n"),
    denied("cp: x: Read-only file system")
)]
#[case::the_first_denial_line_is_reported(
    exited(1, "a: Read-only file system\nb: Read-only file system\n"),
    denied("a: Read-only file system")
)]
#[case::crlf_lines_lose_their_terminator(
    exited(1, "x: Read-only file system\r\n"),
    denied("x: Read-only file system")
)]
#[case::crlf_runner_line_loses_its_terminator(
    exited(1, "bwrap: boom\r\n"),
    runner_failure(Evidence::StderrRule, "bwrap: boom")
)]
#[case::signatures_match_case_insensitively(
    exited(1, "x: READ-ONLY FILE SYSTEM\n"),
    denied("x: READ-ONLY FILE SYSTEM")
)]
#[case::runner_signatures_match_case_insensitively(
    exited(1, "BWRAP: Boom\n"),
    runner_failure(Evidence::StderrRule, "BWRAP: Boom")
)]
#[case::another_backends_errno_is_ordinary(
    exited(1, "x: Permission denied\n"),
    Classification::Ordinary
)]
fn stderr_verdicts_of_a_launch_without_status_channel(
    #[case] outcome: ProcessOutcome,
    #[case] expected: Classification,
) {
    assert_eq!(classify(&launch(), &outcome, None), expected);
}

#[test]
fn a_signature_in_upper_case_matches_a_lower_case_line() {
    let mut l = launch();
    l.denial_signatures = strings(&["READ-ONLY File System"]);
    l.runner_failure_rules[0].fatal_signatures = strings(&["BWRAP: "]);
    assert_eq!(
        classify(&l, &exited(1, "x: read-only file system\n"), None),
        denied("x: read-only file system")
    );
    assert_eq!(
        classify(&l, &exited(1, "bwrap: boom\n"), None),
        runner_failure(Evidence::StderrRule, "bwrap: boom")
    );
}

#[test]
fn an_empty_signature_never_matches() {
    let mut l = launch();
    l.denial_signatures = strings(&[""]);
    l.runner_failure_rules[0].fatal_signatures = strings(&[""]);
    assert_eq!(
        classify(&l, &exited(1, "anything at all\n"), None),
        Classification::Ordinary
    );
}

#[test]
fn a_rule_without_exit_codes_matches_any_non_zero_exit_but_not_zero() {
    let mut l = launch();
    l.runner_failure_rules[0].allowed_exit_codes = None;
    for code in [1, 2, 71, 125, 255] {
        assert_eq!(
            classify(&l, &exited(code, "bwrap: boom\n"), None),
            runner_failure(Evidence::StderrRule, "bwrap: boom"),
            "exit {code}"
        );
    }
    assert_eq!(
        classify(&l, &exited(0, "bwrap: boom\n"), None),
        Classification::Ordinary
    );
}

#[test]
fn informational_lines_are_removed_whole_and_case_insensitively_before_matching() {
    let mut l = launch();
    l.runner_failure_rules[0].informational_lines = strings(&["bwrap: NOTICE only"]);
    // The informational line alone is no failure, whatever its case.
    assert_eq!(
        classify(&l, &exited(1, "BWRAP: notice ONLY\n"), None),
        Classification::Ordinary
    );
    // A line that merely contains it is still fatal.
    assert_eq!(
        classify(&l, &exited(1, "bwrap: notice only, then died\n"), None),
        runner_failure(Evidence::StderrRule, "bwrap: notice only, then died")
    );
    // Next to a fatal line, the fatal one is reported.
    assert_eq!(
        classify(&l, &exited(1, "bwrap: notice only\nbwrap: died\n"), None),
        runner_failure(Evidence::StderrRule, "bwrap: died")
    );
}

#[test]
fn the_first_rule_that_matches_decides() {
    let mut l = launch();
    l.runner_failure_rules.push(RunnerFailureRule {
        allowed_exit_codes: Some(vec![2]),
        fatal_signatures: strings(&["second: "]),
        informational_lines: Vec::new(),
    });
    assert_eq!(
        classify(&l, &exited(2, "second: failed\n"), None),
        runner_failure(Evidence::StderrRule, "second: failed")
    );
    assert_eq!(
        classify(&l, &exited(1, "second: failed\n"), None),
        Classification::Ordinary
    );
}

#[test]
fn undecodable_stderr_is_read_lossily() {
    let outcome = ProcessOutcome::Exited {
        code: 1,
        stderr: b"\xff\xfe: Read-only file system\n".to_vec(),
    };
    assert_eq!(
        classify(&launch(), &outcome, None),
        denied("\u{fffd}\u{fffd}: Read-only file system")
    );
}

// The status channel, when the launch declares one, decides runner failure alone.

fn ran() -> Option<PayloadStatus> {
    Some(PayloadStatus::Ran { exit_code: None })
}

fn never_ran(detail: Option<&str>) -> Option<PayloadStatus> {
    Some(PayloadStatus::NeverRan {
        detail: detail.map(str::to_owned),
    })
}

#[rstest]
#[case::ran_and_succeeded(exited(0, ""), ran(), Classification::Ordinary)]
#[case::ran_and_failed_with_runner_words(
    exited(125, "landlock-run: from a nested launcher\n"),
    ran(),
    Classification::Ordinary
)]
#[case::ran_and_was_denied(
    exited(1, "touch: /etc/x: Permission denied\n"),
    ran(),
    denied("touch: /etc/x: Permission denied")
)]
#[case::never_ran_uses_the_channels_words(
    exited(125, "landlock-run: cannot open /ws for --rw: Permission denied\n"),
    never_ran(Some("exec failed: No such file or directory")),
    runner_failure(Evidence::StatusChannel, "exec failed: No such file or directory")
)]
#[case::never_ran_beats_a_denial_line(
    exited(125, "landlock-run: cannot open /ws for --rw: Permission denied\n"),
    never_ran(None),
    runner_failure(
        Evidence::StatusChannel,
        "landlock-run: cannot open /ws for --rw: Permission denied"
    )
)]
#[case::blank_channel_words_fall_back_to_the_runner_line(
    exited(125, "noise\nlandlock-run: died\nmore noise\n"),
    never_ran(Some("  \t")),
    runner_failure(Evidence::StatusChannel, "landlock-run: died")
)]
#[case::the_runner_line_is_found_whatever_the_exit_code(
    exited(3, "noise\nlandlock-run: died\nmore noise\n"),
    never_ran(None),
    runner_failure(Evidence::StatusChannel, "landlock-run: died")
)]
#[case::an_informational_line_is_not_the_runners_words(
    exited(125, "landlock-run: partial enforcement\nlast words\n\n"),
    never_ran(None),
    runner_failure(Evidence::StatusChannel, "last words")
)]
#[case::without_a_runner_line_the_last_non_blank_line(
    exited(9, "first\nlast words\n  \n"),
    never_ran(None),
    runner_failure(Evidence::StatusChannel, "last words")
)]
#[case::silence_on_the_channel_is_never_ran(
    exited(125, "landlock-run: died\n"),
    None,
    runner_failure(Evidence::StatusChannel, "landlock-run: died")
)]
#[case::nothing_at_all_is_said_so(
    exited(125, ""),
    None,
    runner_failure(
        Evidence::StatusChannel,
        "landlock exited 125 before the payload ran and printed nothing"
    )
)]
#[case::exit_0_is_never_a_runner_failure(
    exited(0, "x: Permission denied\n"),
    None,
    denied("x: Permission denied")
)]
#[case::a_signal_is_never_a_runner_failure(signaled(""), never_ran(None), Classification::Ordinary)]
fn status_channel_verdicts(
    #[case] outcome: ProcessOutcome,
    #[case] status: Option<PayloadStatus>,
    #[case] expected: Classification,
) {
    assert_eq!(classify(&launcher(), &outcome, status.as_ref()), expected);
}

#[test]
fn a_status_is_ignored_when_the_launch_declares_no_channel() {
    // bwrap's shape has no channel: a stray NeverRan changes nothing, the rules decide.
    assert_eq!(
        classify(
            &launch(),
            &exited(2, "plain failure\n"),
            never_ran(None).as_ref()
        ),
        Classification::Ordinary
    );
    assert_eq!(
        classify(&launch(), &exited(1, "bwrap: boom\n"), ran().as_ref()),
        runner_failure(Evidence::StderrRule, "bwrap: boom")
    );
}

// Spawn failures: only an ENOENT/EACCES attributable to the runner program, with a usable workdir,
// is the sandbox's fault.

fn spawn(kind: SpawnErrorKind, path: Option<&str>, workdir_usable: bool) -> ProcessOutcome {
    ProcessOutcome::SpawnFailed(SpawnFailure {
        kind,
        path: path.map(PathBuf::from),
        workdir_usable,
        message: "spawn error".to_owned(),
    })
}

fn start_failed() -> Classification {
    Classification::StartFailed {
        detail: "spawn error".to_owned(),
    }
}

#[rstest]
#[case::runner_missing(SpawnErrorKind::NotFound, Some(RUNNER), true, true)]
#[case::runner_not_executable(SpawnErrorKind::PermissionDenied, Some(RUNNER), true, true)]
#[case::workdir_missing(SpawnErrorKind::NotFound, Some(RUNNER), false, false)]
#[case::workdir_unusable_eacces(SpawnErrorKind::PermissionDenied, Some(RUNNER), false, false)]
#[case::resource_limit(SpawnErrorKind::Other, Some(RUNNER), true, false)]
#[case::another_program(SpawnErrorKind::NotFound, Some("/bin/true"), true, false)]
#[case::unattributed(SpawnErrorKind::NotFound, None, true, false)]
fn spawn_failures(
    #[case] kind: SpawnErrorKind,
    #[case] path: Option<&str>,
    #[case] workdir_usable: bool,
    #[case] runners_fault: bool,
) {
    let expected = if runners_fault {
        runner_failure(Evidence::SpawnChannel, "spawn error")
    } else {
        start_failed()
    };
    let outcome = spawn(kind, path, workdir_usable);
    assert_eq!(classify(&launch(), &outcome, None), expected);
    // A status channel changes nothing: nothing was spawned to write it.
    assert_eq!(classify(&launcher_at(RUNNER), &outcome, None), expected);
}

fn launcher_at(runner: &str) -> ConfinedArgv {
    let mut l = launcher();
    l.argv[0] = OsString::from(runner);
    l
}

#[rstest]
#[case::runner_failure(runner_failure(Evidence::SpawnChannel, "x"), "runner-failure")]
#[case::denied(denied("x"), "denied")]
#[case::start_failed(start_failed(), "start-failed")]
#[case::ordinary(Classification::Ordinary, "ordinary")]
fn verdict_codes_are_stable(#[case] verdict: Classification, #[case] code: &str) {
    assert_eq!(verdict.code(), code);
    let json = serde_json::to_value(&verdict).expect("serialize");
    assert_eq!(json["class"], code);
}
