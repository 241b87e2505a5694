//! `certify` as a backend author and a CI maintainer use it: the main command certifies this
//! host's backends and writes the three reports; an honest external backend is certified; a
//! dishonest or broken one is rejected and the report says why; nothing broken ever passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use conformance::certify::merge::Merged;
use conformance::certify::{BackendReport, CaseResult, Report, Status, Verdict};
use conformance::scenario::Level;
use sandbox::{ClassEnforcement, EnforcementClass, SandboxEnforcement};
use sandbox_test_support::is_root;

const CERTIFY: &str = env!("CARGO_BIN_EXE_certify");
const ADAPTER: &str = env!("CARGO_BIN_EXE_reference-backend");
const RUST_EXAMPLE: &str = env!("CARGO_BIN_EXE_rust-example-backend");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn backend(script: &str) -> Vec<String> {
    let path = repo().join("fixtures/backends").join(script);
    vec!["python3".into(), path.display().to_string()]
}

struct Run {
    code: Option<i32>,
    report: Report,
    matrix: String,
    junit: String,
    html: String,
    _out: tempfile::TempDir,
}

impl Run {
    /// What a failed assertion shows: each case whose status denies certification, with its
    /// message, and the seed to run it again (then the matrix).
    fn why(&self) -> String {
        let mut out = String::new();
        for case in self.report.cases.iter().filter(|c| c.status.is_bad()) {
            out += &format!(
                "{} {}: {}\n",
                case.status.code(),
                case.trial,
                case.message.as_deref().unwrap_or("")
            );
        }
        format!(
            "{out}seed: {} (CONFORMANCE_SEED replays it)\n{}",
            self.report.seed, self.matrix
        )
    }
}

fn certify(args: &[&str], command: &[String]) -> Run {
    certify_with(args, command, &[])
}

/// A scenario root holding only `path` (`family/file.yaml`) of the suite's scenarios.
fn one_scenario_file(path: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let to = root.path().join(path);
    std::fs::create_dir_all(to.parent().expect("a family folder")).expect("mkdir");
    std::fs::copy(repo().join("scenarios").join(path), &to).expect("copy");
    root
}

/// [`certify`] with these variables in its environment.
fn certify_with(args: &[&str], command: &[String], env: &[(&str, &str)]) -> Run {
    let out = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(CERTIFY);
    cmd.args(args).arg("--out").arg(out.path());
    cmd.envs(env.iter().copied());
    if !command.is_empty() {
        cmd.arg("--").args(command);
    }
    let status = cmd.output().expect("run certify");
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap_or_default();
    let report = serde_json::from_str(&read("report.json")).unwrap_or_else(|e| {
        panic!(
            "no report.json ({e}); stdout {} stderr {}",
            String::from_utf8_lossy(&status.stdout),
            String::from_utf8_lossy(&status.stderr)
        )
    });
    Run {
        code: status.status.code(),
        matrix: read("matrix.md"),
        junit: read("junit.xml"),
        html: read("report.html"),
        report,
        _out: out,
    }
}

fn statuses(report: &Report) -> Vec<(String, String)> {
    report
        .cases
        .iter()
        .map(|c| (c.trial.clone(), c.status.code().to_owned()))
        .collect()
}

fn count(report: &Report, status: &str) -> usize {
    statuses(report).iter().filter(|(_, s)| s == status).count()
}

/// A case's message (empty when it has none).
fn message(case: &CaseResult) -> &str {
    case.message.as_deref().unwrap_or("")
}

#[test]
fn the_main_command_certifies_this_hosts_backends_and_writes_three_reports() {
    let run = certify(&[], &[]);
    assert_eq!(run.code, Some(0), "{}", run.why());
    let certified: Vec<&str> = run
        .report
        .backends
        .iter()
        .filter(|b| b.certified)
        .map(|b| b.name.as_str())
        .collect();
    // What this host must certify: the local chain's hostile-host simulations need root.
    for name in conformance::backends::default_required()
        .into_iter()
        .filter(|n| *n != "policy")
    {
        assert!(
            certified.contains(&name),
            "{name} not certified: {}",
            run.matrix
        );
    }
    let host = &run.report.host;
    assert!(host.kernel.is_some());
    assert!(host.landlock_abi.is_some_and(|abi| abi >= 3));
    assert!(
        host.bwrap_version
            .as_deref()
            .is_some_and(|v| v.contains("bubblewrap"))
    );
    assert!(!run.report.suite_version.is_empty());
    assert!(run.matrix.contains("| containment |"), "{}", run.matrix);
    assert!(
        run.matrix.contains("seatbelt"),
        "the excluded backend must be named"
    );
    assert!(run.junit.contains("<testsuites") && run.junit.contains("containment::bwrap::"));
    assert_eq!(count(&run.report, "FAIL"), 0);
    assert!(
        count(&run.report, "XFAIL") > 0,
        "landlock's known limits are reported"
    );
}

#[test]
fn the_worked_example_in_python_is_certified() {
    let expectations = repo().join("fixtures/backends/example_bwrap_backend.yaml");
    let run = certify(
        &["--expectations", expectations.to_str().expect("utf8")],
        &backend("example_bwrap_backend.py"),
    );
    assert_eq!(run.code, Some(0), "{}", run.why());
    // The gap it reports (a unix socket bound to a host path) is an expected failure, named.
    assert!(count(&run.report, "XFAIL") >= 2, "{}", run.matrix);
    assert!(count(&run.report, "PASS") >= 262);
    assert_eq!(run.report.backends[0].name, "example-bwrap-py");
    // The report states what its answers said, not its handshake's `full`: restricted-network
    // answers report the network `partial` (named unix sockets), so the backend is `partial`.
    let me = &run.report.backends[0];
    assert_eq!(me.enforcement, Some(SandboxEnforcement::Partial), "{me:?}");
    let classes = me.classes.clone().unwrap_or_default();
    assert_eq!(
        classes.get(EnforcementClass::Files).enforcement,
        ClassEnforcement::Full,
        "{me:?}"
    );
    let network = classes.get(EnforcementClass::Network);
    assert_eq!(network.enforcement, ClassEnforcement::Partial, "{me:?}");
    assert_eq!(network.ungoverned, ["named-unix-sockets"], "{me:?}");
    assert!(
        run.matrix
            .contains("| **network** | partial (named-unix-sockets) |"),
        "{}",
        run.matrix
    );
}

#[test]
fn the_worked_example_in_rust_is_certified() {
    // conformance/protocol/examples/backend.rs: the protocol crate's typed messages over the
    // reference library's Landlock backend, so Landlock's known limits are its expected failures.
    let expectations = repo().join("fixtures/backends/rust_example_backend.yaml");
    let run = certify(
        &["--expectations", expectations.to_str().expect("utf8")],
        &[RUST_EXAMPLE.to_owned()],
    );
    assert_eq!(run.code, Some(0), "{}", run.why());
    let me = &run.report.backends[0];
    assert_eq!(me.name, "rust-example", "{me:?}");
    assert!(me.certified, "{me:?}");
    assert_eq!(count(&run.report, "FAIL"), 0, "{}", run.matrix);
    assert_eq!(count(&run.report, "SKIP"), 0, "{}", run.matrix);
    assert!(count(&run.report, "XFAIL") > 0, "{}", run.matrix);
    assert!(count(&run.report, "PASS") >= 262, "{}", run.matrix);
    assert!(
        run.junit.contains("containment::rust-example::"),
        "{}",
        run.junit
    );
}

#[test]
fn a_backend_that_passes_argv_through_unconfined_is_rejected_by_name() {
    let run = certify(&[], &backend("broken_passthrough_backend.py"));
    assert_eq!(run.code, Some(1));
    let failed: Vec<String> = statuses(&run.report)
        .into_iter()
        .filter(|(_, s)| s == "FAIL")
        .map(|(t, _)| t)
        .collect();
    assert!(failed.len() > 100, "{}", failed.len());
    let escape =
        "containment::broken-passthrough::effects::create_absolute_outside_workspace-write";
    assert!(failed.iter().any(|t| t == escape));
    assert!(run.matrix.contains(escape), "{}", run.matrix);
    assert!(run.matrix.contains("**no**"));
}

/// Certifies a dishonest fixture on the containment family: NOT CERTIFIED, and the trials with
/// `status` it names.
fn rejected(script: &str, status: &str) -> (Vec<(String, String)>, Run) {
    let run = certify(&["--family", "containment"], &backend(script));
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    assert!(run.matrix.contains("**no**"), "{}", run.matrix);
    let named = statuses(&run.report)
        .into_iter()
        .filter(|(_, s)| s == status)
        .collect();
    (named, run)
}

#[test]
fn a_backend_keyed_on_the_harness_paths_is_rejected_with_the_escapes_named() {
    let (failed, run) = rejected("cheat_on_paths_backend.py", "FAIL");
    let escape = "containment::cheat-on-paths::effects::create_absolute_outside_workspace-write";
    assert!(failed.iter().any(|(t, _)| t == escape), "{failed:?}");
    assert!(run.matrix.contains(escape), "{}", run.matrix);
}

#[test]
fn a_backend_keyed_on_the_harness_markers_is_rejected_with_the_escapes_named() {
    let (failed, run) = rejected("cheat_on_markers_backend.py", "FAIL");
    let escape = "containment::cheat-on-markers::effects::create_absolute_outside_workspace-write";
    assert!(failed.iter().any(|(t, _)| t == escape), "{failed:?}");
    assert!(run.matrix.contains(escape), "{}", run.matrix);
}

/// Certifies a fixture keyed on something of the harness that draws now vary: more than twenty
/// escapes under `prefix`, the first of them named in matrix.md (which names the first hundred
/// failures; report.json every one).
fn rejected_with_many_escapes(script: &str, prefix: &str) {
    let (failed, run) = rejected(script, "FAIL");
    let escapes: Vec<&String> = failed
        .iter()
        .map(|(t, _)| t)
        .filter(|t| t.starts_with(prefix))
        .collect();
    assert!(escapes.len() > 20, "{failed:?}");
    assert!(run.matrix.contains(escapes[0].as_str()), "{}", run.matrix);
}

#[test]
fn a_backend_keyed_on_the_harness_word_list_is_rejected_with_the_escapes_named() {
    // Two thirds of the names are not in the list: escapes on effects of every kind.
    rejected_with_many_escapes(
        "cheat_on_names_backend.py",
        "containment::cheat-on-names::effects::",
    );
}

#[test]
fn a_backend_keyed_on_the_shape_of_the_harness_requests_is_rejected_with_the_escapes_named() {
    rejected_with_many_escapes("cheat_on_shape_backend.py", "containment::cheat-on-shape::");
}

#[test]
fn a_backend_confining_every_other_request_is_inconsistent_with_both_argvs_named() {
    let (inconsistent, run) = rejected("cheat_every_other_backend.py", "INCONSISTENT");
    assert!(inconsistent.len() > 100, "{}", inconsistent.len());
    let case = run
        .report
        .cases
        .iter()
        .find(|c| c.status == Status::Inconsistent)
        .expect("an inconsistent case");
    let message = message(case);
    // Both answers: the confined one and the payload handed back as it was.
    assert!(
        message.contains("bwrap") && message.matches("argv [").count() == 2,
        "{message}"
    );
    assert!(run.matrix.contains("INCONSISTENT"), "{}", run.matrix);
}

#[test]
fn a_backend_that_writes_another_name_than_asked_is_caught_by_the_world_diff() {
    // Only the environment-route scenario: the lossy launcher turns `new\xFF` into `new\u{FFFD}`.
    let root = one_scenario_file("containment/names_via_env.yaml");
    let run = certify(
        &["--scenarios", root.path().to_str().expect("utf8")],
        &backend("lossy_env_backend.py"),
    );
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let case = run
        .report
        .cases
        .iter()
        .find(|c| {
            c.trial == "containment::lossy-env::names_via_env::create_non_utf8_workspace-write"
        })
        .expect("the case ran");
    assert_eq!(case.status, Status::Fail);
    let message = message(case);
    // The stray name that was written, and the name that was asked (both drawn for the case).
    assert!(message.contains("\u{FFFD} (file"), "{message}");
    assert!(
        message.contains("asked on ") && message.contains("\\xFF"),
        "{message}"
    );
}

#[test]
fn a_call_stopped_before_a_slow_runner_started_the_payload_timed_out() {
    // Only the survivors: the runner takes 0.6 s to start the payload, and the cases past a
    // timeout stop the call 0.3 or 0.4 s in, before its status channel says the payload ran.
    let root = one_scenario_file("hardening/survivors.yaml");
    let run = certify(
        &["--scenarios", root.path().to_str().expect("utf8")],
        &backend("slow_start_backend.py"),
    );
    let stopped: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| c.trial.contains("_past_a_timeout_"))
        .collect();
    assert_eq!(stopped.len(), 6, "{}", run.matrix);
    for case in stopped {
        assert_eq!(case.status, Status::Pass, "{case:?}");
    }
}

#[test]
fn a_seed_replays_a_run_exactly() {
    let messages = |seed: &str| {
        let run = certify(
            &["--family", "containment", "--seed", seed],
            &backend("cheat_on_paths_backend.py"),
        );
        assert_eq!(Some(run.report.seed), seed.parse().ok());
        let mut failed: Vec<String> = run
            .report
            .cases
            .iter()
            .filter(|c| c.status == Status::Fail)
            // The inside-out walk (CT-009) and the outside-in list (CT-008) report every host
            // directory and dotfile an unconfined payload could write, and what other processes
            // of a shared machine make there changes between two runs: their failures are named,
            // their messages not compared.
            .filter_map(|c| match c.trial.as_str() {
                t if t.contains("::inside_out::") || t.contains("::writable_set::") => {
                    Some(t.to_owned())
                }
                _ => c.message.clone(),
            })
            .collect();
        failed.sort();
        failed
    };
    let first = messages("4242");
    assert!(!first.is_empty());
    // The escapes name the same drawn places, byte for byte.
    assert_eq!(first, messages("4242"));
}

#[test]
fn a_bwrap_backend_without_the_hardening_is_rejected_by_name() {
    let run = certify(
        &["--family", "hardening"],
        &backend("unhardened_bwrap_backend.py"),
    );
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let failed: Vec<String> = statuses(&run.report)
        .into_iter()
        .filter(|(_, s)| s == "FAIL")
        .map(|(t, _)| t)
        .collect();
    // What each missing piece lets out, as root (capabilities, /proc/<pid>/root, survivors) and
    // as any user (a temp dir of / widens the writable set, a missing workspace still runs).
    let mut named = vec![
        "hardening::unhardened-bwrap-py::temp_dir_widening::temp_dir_fs-root_workspace-write",
        "hardening::unhardened-bwrap-py::workspace_roots::workspace_is_a_file_read-only",
        "hardening::unhardened-bwrap-py::survivors::setsid_daemon_workspace-write",
        // A survivor whose leader thread ended while another runs on (it looks like a zombie);
        // the payload only exits 0 once it said it was up, so the trial cannot pass vacuously.
        "hardening::unhardened-bwrap-py::survivors::zombie_leader_daemon_read-only",
        "hardening::unhardened-bwrap-py::survivors::zombie_leader_daemon_workspace-write",
    ];
    if is_root() {
        named.extend([
            "hardening::unhardened-bwrap-py::root_escapes::no_capabilities_read-only",
            "hardening::unhardened-bwrap-py::root_escapes::remount_root_writable_read-only",
            "hardening::unhardened-bwrap-py::root_escapes::proc_pid_root_workspace-write",
        ]);
    }
    for trial in named {
        assert!(
            failed.iter().any(|t| t == trial),
            "{trial} should have failed; failed: {failed:#?}"
        );
        assert!(run.matrix.contains(trial), "{}", run.matrix);
    }
    assert!(run.matrix.contains("**no**"));
}

#[test]
fn a_backend_that_crashes_mid_run_is_an_error_never_a_pass() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.extend(["crash-after".into(), "5".into()]);
    let run = certify(&["--family", "containment"], &cmd);
    assert_eq!(run.code, Some(1));
    assert!(count(&run.report, "ERROR") > 200);
    assert!(count(&run.report, "PASS") <= 5);
}

#[test]
fn a_backend_that_answers_malformed_json_is_an_error() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("malformed".into());
    let run = certify(&[], &cmd);
    assert_eq!(run.code, Some(1));
    assert_eq!(count(&run.report, "PASS"), 0);
    assert_eq!(count(&run.report, "ERROR"), statuses(&run.report).len());
}

#[test]
fn a_backend_whose_rules_match_every_line_is_an_error() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("match-all-rule".into());
    let run = certify(&["--family", "parity"], &cmd);
    assert_eq!(run.code, Some(1));
    assert_eq!(count(&run.report, "PASS"), 0, "{}", run.matrix);
    assert!(
        run.report
            .cases
            .iter()
            .any(|c| message(c).contains("runner-failure rule #0 is invalid"))
            || run
                .report
                .backends
                .iter()
                .flat_map(|b| b.problems.iter().chain(&b.unusable_reason))
                .chain(&run.report.suite_problems)
                .any(|p| p.contains("runner-failure rule #0 is invalid")),
        "{}",
        run.matrix
    );
}

#[test]
fn a_backend_that_hangs_is_a_timeout() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("hang".into());
    // One small family: the point is that a backend that never answers passes nothing, and a
    // whole-suite run of 1 s timeouts is what took this test past its limit at a load of 39.
    let run = certify(&["--family", "parity", "--protocol-timeout", "1"], &cmd);
    assert_eq!(run.code, Some(1));
    assert_eq!(count(&run.report, "PASS"), 0);
    assert!(count(&run.report, "TIMEOUT") > 0);
}

#[test]
fn a_backend_on_another_protocol_version_is_not_certified() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("wrong-protocol".into());
    let run = certify(&[], &cmd);
    assert_eq!(run.code, Some(1));
    assert!(run.matrix.contains("protocol 99"), "{}", run.matrix);
}

#[test]
fn the_reference_launcher_is_certified_through_the_protocol_too() {
    let expectations = repo().join("fixtures/expectations/landlock.yaml");
    let run = certify(
        &["--expectations", expectations.to_str().expect("utf8")],
        &[ADAPTER.into(), "--backend".into(), "landlock".into()],
    );
    assert_eq!(run.code, Some(0), "{}", run.why());
    assert!(count(&run.report, "XFAIL") > 0);
}

#[test]
fn an_operator_runner_is_certifiable_directly() {
    let run = certify(
        &[
            "--runner-command",
            "/usr/bin/bwrap",
            "--runner-failure-signature",
            "bwrap: ",
            "--expectations",
            repo()
                .join("fixtures/backends/operator_bwrap.yaml")
                .to_str()
                .expect("utf8"),
        ],
        &[],
    );
    assert_eq!(run.code, Some(0), "{}", run.why());
    assert!(
        count(&run.report, "PASS") >= 262 + 11,
        "containment and its runner-failure cases"
    );
}

#[test]
fn an_operator_runner_that_drops_its_profile_is_rejected() {
    let fake = repo().join("fixtures/fake-runners/bwrap-passthrough");
    let run = certify(
        &[
            "--runner-command",
            fake.to_str().expect("utf8"),
            "--runner-failure-signature",
            "bwrap: ",
        ],
        &[],
    );
    assert_eq!(run.code, Some(1));
    assert!(count(&run.report, "FAIL") > 100);
}

fn with_expectations(yaml: &str) -> Run {
    with_expectations_in(&[], yaml)
}

/// The worked example certified with `yaml` as its expectation file, on `families` only (every
/// family when empty).
fn with_expectations_in(families: &[&str], yaml: &str) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("example.yaml");
    std::fs::write(&file, yaml).expect("write");
    let mut args: Vec<&str> = families.iter().flat_map(|f| ["--family", *f]).collect();
    args.extend(["--expectations", file.to_str().expect("utf8")]);
    certify(&args, &backend("example_bwrap_backend.py"))
}

#[test]
fn an_expected_failure_that_passes_fails_the_run() {
    let run = with_expectations(
        "backend: example-bwrap-py\nexpected_failures:\n  - scenario: CT-002\n    when: { effect: chmod }\n    reason: claimed but untrue\n    observed: host Some(Effected)\n",
    );
    assert_eq!(run.code, Some(1));
    assert!(count(&run.report, "XPASS") > 0);
}

#[test]
fn a_must_scenario_cannot_be_expected_to_fail() {
    let run = with_expectations(
        "backend: example-bwrap-py\nexpected_failures:\n  - scenario: CT-001\n    reason: too hard\n    observed: anything\n",
    );
    assert_eq!(run.code, Some(1));
    assert!(run.matrix.contains("is a must"), "{}", run.matrix);
}

#[test]
fn an_expectation_for_an_unknown_scenario_is_an_error() {
    let run = with_expectations(
        "backend: example-bwrap-py\nexpected_failures:\n  - scenario: CT-999\n    reason: typo\n    observed: anything\n",
    );
    assert_eq!(run.code, Some(1));
    assert!(run.matrix.contains("CT-999"), "{}", run.matrix);
}

/// Certifies the unhardened fixture on the hardening family with `expectations` for HD-009 (it
/// lets the payload signal its caller).
fn hd009_with(observed: &str) -> Vec<(String, String, String)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("unhardened.yaml");
    std::fs::write(
        &file,
        format!(
            "backend: unhardened-bwrap-py\nexpected_failures:\n  - scenario: HD-009\n    reason: no PID namespace\n    observed: {observed:?}\n"
        ),
    )
    .expect("write");
    let run = certify(
        &[
            "--family",
            "hardening",
            "--expectations",
            file.to_str().expect("utf8"),
        ],
        &backend("unhardened_bwrap_backend.py"),
    );
    run.report
        .cases
        .iter()
        .filter(|c| c.scenario == "HD-009")
        .map(|c| {
            (
                c.trial.clone(),
                c.status.code().to_owned(),
                message(c).to_owned(),
            )
        })
        .collect()
}

#[test]
fn an_expected_failure_excuses_only_the_observation_it_pins() {
    let pinned = hd009_with("CAN-SIGNAL-CALLER");
    assert!(!pinned.is_empty(), "HD-009 never ran");
    for (trial, status, message) in &pinned {
        assert_eq!(status, "XFAIL", "{trial}: {message}");
        // The report keeps the real message beside the reason.
        assert!(
            message.starts_with("no PID namespace -- observed: ")
                && message.contains("CAN-SIGNAL-CALLER"),
            "{trial}: {message}"
        );
    }
    // The same failure pinned to another observation is a plain failure, with its own words.
    for (trial, status, message) in hd009_with("the sentinel changed") {
        assert_eq!(status, "FAIL", "{trial}: {message}");
        assert!(
            message.contains("but it failed otherwise"),
            "{trial}: {message}"
        );
    }
}

/// A run limited with `--family` that ran clean: exit 0, or 3 where the report marks a run that
/// left families out as PARTIAL; either way no case is bad.
fn ran_clean(run: &Run) -> bool {
    matches!(run.code, Some(0) | Some(3))
        && statuses(&run.report)
            .iter()
            .all(|(_, s)| s == "PASS" || s == "XFAIL" || s == "SKIP")
}

fn backend_report<'a>(run: &'a Run, name: &str) -> &'a BackendReport {
    run.report
        .backends
        .iter()
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("no backend {name}: {}", run.matrix))
}

#[test]
fn the_harness_offers_protocol_2_and_the_example_takes_it() {
    let run = certify(
        &["--family", "runner-failure"],
        &backend("example_bwrap_backend.py"),
    );
    assert!(ran_clean(&run), "{}", run.matrix);
    assert_eq!(backend_report(&run, "example-bwrap-py").protocol, Some(2));
    assert_eq!(
        backend_report(&run, "example-bwrap-py").fooled_by_forged_runner_failure,
        Some(false)
    );
    assert!(
        run.matrix.contains("- example-bwrap-py: protocol 2"),
        "{}",
        run.matrix
    );
}

#[test]
fn a_strict_version_1_backend_keeps_working_and_is_reported_as_version_1() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("v1-strict".into());
    let run = certify(&["--family", "parity"], &cmd);
    assert!(ran_clean(&run), "{}", run.matrix);
    assert_eq!(backend_report(&run, "misbehaving").protocol, Some(1));
    assert!(
        run.matrix.contains("- misbehaving: protocol 1"),
        "{}",
        run.matrix
    );
}

#[test]
fn differences_declared_on_version_1_are_refused() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("v1-declares".into());
    let run = certify(&["--family", "parity"], &cmd);
    assert_eq!(run.code, Some(1));
    assert!(
        run.matrix.contains("declared differences need protocol 2"),
        "{}",
        run.matrix
    );
}

#[test]
fn every_confine_carries_the_directory_the_harness_runs_it_in() {
    // The backend errors on a confine without an existing absolute cwd and runs the payload
    // there (bwrap --chdir): a wrong cwd would send the parity files elsewhere and fail.
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("needs-cwd".into());
    let run = certify(&["--family", "parity", "--family", "runner-failure"], &cmd);
    assert!(ran_clean(&run), "{}", run.matrix);
    assert!(count(&run.report, "PASS") >= 20, "{}", run.matrix);
}

#[test]
fn a_declared_protected_path_that_is_writable_is_caught_on_the_disk() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("lies-protected".into());
    let run = certify(&["--family", "declared"], &cmd);
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let failed: Vec<String> = statuses(&run.report)
        .into_iter()
        .filter(|(_, s)| s == "FAIL")
        .map(|(t, _)| t)
        .collect();
    assert_eq!(
        failed,
        [
            "declared::misbehaving::protected_paths::protected_path_absent_before_the_payload",
            "declared::misbehaving::protected_paths::protected_path_present_before_the_payload",
        ],
        "{}",
        run.matrix
    );
    // matrix.md wraps long messages wherever the drawn path ends: read the report's own.
    let messages: Vec<&str> = run.report.cases.iter().map(message).collect();
    assert!(
        messages.iter().any(|m| m.contains(".git was created")),
        "{messages:?}"
    );
    let declared = run.report.backends[0].declared.as_ref();
    assert!(
        declared.is_some_and(|d| d
            .protected
            .first()
            .is_some_and(|p| p.path == std::path::Path::new(".git"))),
        "{declared:?}"
    );
}

#[test]
fn a_stderr_only_backend_is_fooled_by_a_forged_signature_and_the_report_says_so() {
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("stderr-only".into());
    let run = certify(&["--family", "runner-failure"], &cmd);
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let status = |trial: &str| {
        statuses(&run.report)
            .into_iter()
            .find(|(t, _)| t == trial)
            .map(|(_, s)| s)
    };
    assert_eq!(
        status(
            "runner-failure::misbehaving::forged_signatures_stderr_only::every_declared_signature_read_from_stderr"
        )
        .as_deref(),
        Some("FAIL")
    );
    assert!(
        run.matrix
            .contains("## Can be fooled by a forged runner-failure signature"),
        "{}",
        run.matrix
    );
    assert!(
        run.matrix.contains("\"bwrap: \" with exit 1 read as"),
        "{}",
        run.matrix
    );
    assert_eq!(
        backend_report(&run, "misbehaving").fooled_by_forged_runner_failure,
        Some(true)
    );
}

fn lies_protected_with(yaml: &str) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("misbehaving.yaml");
    std::fs::write(&file, yaml).expect("write");
    let mut cmd = backend("misbehaving_backend.py");
    cmd.push("lies-protected".into());
    certify(
        &[
            "--family",
            "declared",
            "--expectations",
            file.to_str().expect("utf8"),
        ],
        &cmd,
    )
}

#[test]
fn a_known_defect_on_a_must_case_is_xfail_and_never_certifies() {
    let run = lies_protected_with(
        "backend: misbehaving\nknown_defects:\n  - scenario: DCL-001\n    reason: \"it declares .git protected and protects nothing\"\n    observed: \".git\"\n",
    );
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    assert_eq!(count(&run.report, "XFAIL"), 2, "{}", run.matrix);
    assert_eq!(count(&run.report, "FAIL"), 0, "{}", run.matrix);
    assert!(
        run.matrix.contains("2 must case(s) fail as known defects"),
        "{}",
        run.matrix
    );
}

#[test]
fn a_must_case_is_still_never_an_expected_failure() {
    let run = lies_protected_with(
        "backend: misbehaving\nexpected_failures:\n  - scenario: DCL-001\n    reason: \"no\"\n    observed: \".git\"\n",
    );
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    assert!(run.matrix.contains("is a must"), "{}", run.matrix);
}

#[test]
fn an_expectation_can_name_the_cases_it_covers_by_prefix() {
    let run = lies_protected_with(
        "backend: misbehaving\nknown_defects:\n  - scenario: DCL-001\n    case: protected_path_absent\n    reason: \"it declares .git protected and protects nothing\"\n    observed: \".git was created\"\n",
    );
    assert_eq!(
        statuses(&run.report)
            .into_iter()
            .map(|(t, s)| (t.rsplit("::").next().unwrap_or("").to_owned(), s))
            .collect::<Vec<_>>(),
        [
            (
                "protected_path_absent_before_the_payload".to_owned(),
                "XFAIL".to_owned()
            ),
            (
                "protected_path_present_before_the_payload".to_owned(),
                "FAIL".to_owned()
            ),
        ],
        "{}",
        run.matrix
    );
}

#[test]
fn ctrl_c_stops_the_run_and_removes_every_world_it_made() {
    // A home of its own (the worlds drawn under the home directory land there, and nothing
    // else does), so what is left afterwards is this run's alone. Not under /var/tmp: as root
    // the run sees /var/tmp through an overlay of its own, and nothing it made there would ever
    // reach the host for this test to find.
    let home = private_base("home.");
    // Not under /tmp: certify refuses a cache where a confined call may write.
    let cache = private_base("ctrl-c-cache-");
    let out = tempfile::tempdir().expect("out");
    let child = Command::new(CERTIFY)
        .args(["--family", "containment", "--out"])
        .arg(out.path())
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", cache.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("certify");
    let worlds = || std::fs::read_dir(home.path()).map_or(0, Iterator::count);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while worlds() < 10 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let seen = worlds();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let done = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(
        seen >= 10,
        "the run made no worlds in the home directory: {stderr}"
    );
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped after"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(home.path())
        .expect("home")
        .map(|e| e.map(|e| e.file_name()))
        .collect();
    assert!(left.is_empty(), "left in the home directory: {left:?}");
    assert!(!out.path().join("report.json").exists());
}

#[test]
fn a_family_that_names_nothing_is_a_usage_error_and_leaves_the_last_report() {
    let out = tempfile::tempdir().expect("tempdir");
    let report = out.path().join("report.json");
    std::fs::write(&report, "{\"certified\": true, \"kept\": 1}").expect("seed a report");
    let run = Command::new(CERTIFY)
        .args(["--family", "contianment", "--out"])
        .arg(out.path())
        .output()
        .expect("run certify");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("\"contianment\"") && stderr.contains("containment"),
        "the error names the typo and the real families: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&report).expect("the old report is still there"),
        "{\"certified\": true, \"kept\": 1}"
    );
    assert_eq!(
        std::fs::read_dir(out.path()).expect("list").count(),
        1,
        "nothing else was written"
    );
    let help = Command::new(CERTIFY)
        .arg("--help")
        .output()
        .expect("certify --help");
    let help = String::from_utf8_lossy(&help.stdout);
    for family in ["containment", "runner-failure", "hardening", "anchoring"] {
        assert!(help.contains(family), "--help lists {family}: {help}");
    }
}

#[test]
fn a_new_report_replaces_the_old_one_whole() {
    let parent = tempfile::tempdir().expect("tempdir");
    let out = parent.path().join("certify-report");
    std::fs::create_dir(&out).expect("old report dir");
    std::fs::write(out.join("stale.txt"), "from an older run").expect("stale file");
    let run = Command::new(CERTIFY)
        .args(["--backend", "policy", "--family", "runner-failure", "--out"])
        .arg(&out)
        .output()
        .expect("run certify");
    assert!(
        matches!(run.status.code(), Some(0 | 1 | 3)),
        "certify ran: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(&out)
        .expect("report dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["junit.xml", "matrix.md", "report.html", "report.json"],
        "{names:?}"
    );
    let left: Vec<_> = std::fs::read_dir(parent.path())
        .expect("parent")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    assert_eq!(
        left,
        ["certify-report"],
        "no staging directory is left behind"
    );
}

/// Runs `certify merge ARGS...`.
fn merge(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(CERTIFY)
        .arg("merge")
        .args(args)
        .output()
        .expect("run certify merge")
}

#[test]
fn merging_two_legs_reports_yields_one_matrix_with_every_host() {
    let base = tempfile::tempdir().expect("tempdir");
    // Two legs of a matrix, each certifying what it has (a short family keeps this quick).
    for (leg, backend) in [("root", "bwrap"), ("unprivileged", "landlock")] {
        let run = Command::new(CERTIFY)
            .args(["--backend", backend, "--family", "runner-failure", "--out"])
            .arg(base.path().join(leg))
            .output()
            .expect("certify a leg");
        assert_eq!(
            run.status.code(),
            Some(3),
            "a --family run is PARTIAL: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let out = base.path().join("merged");
    let run = merge(&[
        base.path().join("root").as_os_str(),
        base.path().join("unprivileged").as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    // PARTIAL legs are no certificate, so neither is their merge.
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    let matrix = std::fs::read_to_string(out.join("matrix.md")).expect("matrix.md");
    assert!(
        matrix.contains("| family | root: bwrap | unprivileged: landlock |"),
        "{matrix}"
    );
    let row = matrix
        .lines()
        .find(|l| l.starts_with("| runner-failure |"))
        .expect("a runner-failure row");
    assert_eq!(row.matches("passed").count(), 2, "{row}");
    assert!(
        matrix.contains("- **root**: PARTIAL") && matrix.contains("- **unprivileged**: PARTIAL")
    );
    let merged: Merged =
        serde_json::from_str(&std::fs::read_to_string(out.join("merged.json")).expect("json"))
            .expect("merged.json parses");
    assert_eq!(merged.hosts.len(), 2);
    assert!(!merged.certified);
}

#[test]
fn merge_refuses_what_is_not_a_finished_report_of_this_suite_naming_the_file() {
    let base = tempfile::tempdir().expect("tempdir");
    let leg = base.path().join("leg");
    let run = Command::new(CERTIFY)
        .args(["--backend", "bwrap", "--family", "runner-failure", "--out"])
        .arg(&leg)
        .output()
        .expect("certify a leg");
    assert_eq!(run.status.code(), Some(3));
    // Edited as JSON text, as a hand or another version would: the typed report cannot say
    // what an older suite wrote.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(leg.join("report.json")).expect("report"))
            .expect("json");
    let other = base.path().join("other");
    std::fs::create_dir(&other).expect("mkdir");
    let mut older = report.clone();
    older["suite_version"] = "0.0.1".into();
    std::fs::write(other.join("report.json"), older.to_string()).expect("write");
    let another_set = base.path().join("another-set");
    std::fs::create_dir(&another_set).expect("mkdir");
    let mut edited = report.clone();
    edited["suite_hash"] = "sha256:another".into();
    std::fs::write(another_set.join("report.json"), edited.to_string()).expect("write");
    let junk = base.path().join("junk");
    std::fs::create_dir(&junk).expect("mkdir");
    std::fs::write(junk.join("report.json"), "{\"hello\": 1}").expect("write");
    let stopped = base.path().join("stopped");
    std::fs::create_dir(&stopped).expect("mkdir");
    let out = base.path().join("merged");
    for (bad, says) in [
        (&other, "suite version 0.0.1"),
        (&another_set, "scenario set sha256:another"),
        (&junk, "not a certify report"),
        (&stopped, "no report.json"),
    ] {
        let run = merge(&[
            leg.as_os_str(),
            bad.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(says) && stderr.contains(&bad.display().to_string()),
            "names {} and says {says:?}: {stderr}",
            bad.display()
        );
        assert!(!out.exists(), "nothing is written on bad input");
    }
    let run = merge(&[
        leg.as_os_str(),
        other.as_os_str(),
        "--allow-mixed-versions".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(out.join("matrix.md").exists());
}

/// The leaky fixture's run of the containment family: its failed cases (scenario, message).
fn leaky(leak: &str) -> (Run, Vec<(String, String)>) {
    leaky_with(leak, &[])
}

/// [`leaky`] with these variables in certify's environment.
fn leaky_with(leak: &str, env: &[(&str, &str)]) -> (Run, Vec<(String, String)>) {
    let mut cmd = backend("leaky_backend.py");
    cmd.push(leak.into());
    let run = certify_with(&["--family", "containment"], &cmd, env);
    let failed = run
        .report
        .cases
        .iter()
        .filter(|c| !matches!(c.status, Status::Pass | Status::Xfail))
        .map(|c| (c.scenario.clone(), message(c).to_owned()))
        .collect();
    (run, failed)
}

#[test]
fn a_system_directory_or_dotfile_left_writable_is_caught_by_the_writable_set_checks_alone() {
    let home = std::env::var("HOME").expect("HOME");
    let system_dir = if is_root() {
        "/usr/local/bin".to_owned()
    } else {
        format!("{home}/.cache")
    };
    for (leak, place) in [
        ("system-dir", system_dir),
        ("dotfile", format!("{home}/.bashrc")),
    ] {
        let (run, failed) = leaky(leak);
        assert_eq!(run.code, Some(1), "{leak}: {}", run.matrix);
        assert!(!failed.is_empty(), "{leak}: nothing failed");
        // CT-008 catches it, naming the place (shrink its list and this fails); the inside-out
        // walk (CT-009) and the kernel's mount table (CT-010) may see the same place, and no
        // other check is about it.
        for (scenario, message) in &failed {
            assert!(
                ["CT-008", "CT-009", "CT-010"].contains(&scenario.as_str()),
                "{leak}: {scenario} failed too: {message}"
            );
        }
        assert!(
            failed
                .iter()
                .any(|(scenario, message)| scenario == "CT-008" && message.contains(&place)),
            "{leak}: CT-008 names {place}: {failed:?}"
        );
    }
}

#[test]
fn a_host_directory_under_another_name_or_the_hosts_dev_is_caught_by_the_inside_out_checks_alone() {
    let home = std::env::var("HOME").expect("HOME");
    let stage = ["/var/local", "/usr/games", "/var/opt"]
        .into_iter()
        .find(|d| Path::new(d).is_dir())
        .expect("an existing directory to stage under");
    let exposed = if is_root() {
        ["/var/backups", "/usr/src"]
            .into_iter()
            .find(|d| Path::new(d).is_dir())
            .expect("a system directory to expose")
            .to_owned()
    } else {
        format!("{home}/.local/state/leaky-stage")
    };
    let (run, failed) = leaky("stage-dir");
    assert_eq!(run.code, Some(1), "stage-dir: {}", run.matrix);
    assert!(!failed.is_empty(), "stage-dir: nothing failed");
    // The inside-out walk (CT-009) and the kernel's mount table (CT-010) both see it, each
    // naming the path inside and the host path it is.
    for (scenario, message) in &failed {
        let host = match scenario.as_str() {
            "CT-009" => format!("at {exposed}/"),
            "CT-010" => format!("is {exposed}/"),
            _ => panic!("stage-dir: {scenario} failed too: {message}"),
        };
        assert!(
            message.contains(&format!("{stage}/")) && message.contains(&host),
            "stage-dir: names the path inside ({stage}) and on the host ({exposed}): {message}"
        );
    }
    assert!(
        failed.iter().any(|(scenario, _)| scenario == "CT-009"),
        "stage-dir: the inside-out walk catches it: {failed:?}"
    );
    // The host's /dev is writable only as root: as a user the same backend leaks nothing there.
    let (run, failed) = leaky("dev");
    if is_root() {
        assert_eq!(run.code, Some(1), "dev: {}", run.matrix);
        assert!(!failed.is_empty(), "dev: nothing failed");
        for (scenario, message) in &failed {
            assert!(
                ["CT-009", "CT-010"].contains(&scenario.as_str()),
                "dev: {scenario} failed too: {message}"
            );
            assert!(message.contains("/dev/"), "dev: names /dev: {message}");
        }
    } else {
        assert!(
            failed.is_empty(),
            "dev: nothing of /dev is a user's to write: {failed:?}"
        );
    }
}

/// The one rule for levels: a backend that honestly reports the protected class `not-governed`
/// (what a Landlock-only sandbox without a mount namespace is) is not failed at `must` for it. The
/// `must` cases resting on the class (`governs: protected`, PAR-004's hooks rows) are judged at
/// `should` for exactly that gap, so its expectation file names them with `gap: protected` and it
/// certifies; what it did is still on the record (XFAIL at `should`, the class `not-governed`).
#[test]
fn a_backend_honest_about_an_ungoverned_protected_class_is_not_failed_at_must_for_it() {
    let expectations = repo().join("fixtures/backends/unprotected_backend.yaml");
    let run = certify(
        &[
            "--family",
            "parity",
            "--family",
            "protected",
            "--expectations",
            expectations.to_str().expect("utf8"),
        ],
        &backend("unprotected_backend.py"),
    );
    let me = backend_report(&run, "unprotected-py");
    assert_eq!(
        me.classes
            .clone()
            .unwrap_or_default()
            .get(EnforcementClass::Protected)
            .enforcement,
        ClassEnforcement::NotGoverned,
        "{me:?}"
    );
    assert!(me.certified, "{}", run.matrix);
    let hooks: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| c.scenario == "PAR-004" && c.status != Status::Pass)
        .collect();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(hooks[0].status, Status::Xfail, "{hooks:?}");
    assert_eq!(hooks[0].level, Some(Level::Should), "{hooks:?}");
    assert!(
        hooks[0].trial.ends_with("write_hooks_workspace-write"),
        "{hooks:?}"
    );
}

#[test]
fn a_gap_entry_holds_only_where_the_backend_reports_that_gap() {
    // The worked example binds the protected paths; the one protected gap it reports is git's
    // surface planted while the call runs. A `gap: protected` entry naming another gap does not
    // apply to it, so the hooks row is held to `must` and passes.
    let run = with_expectations_in(
        &["parity"],
        "backend: example-bwrap-py\nexpected_failures:\n  - scenario: PAR-004\n    when: { place: hooks }\n    gap: protected\n    gap_names: no private mount namespace\n    reason: claimed gap\n    observed: DENIED\n",
    );
    let hooks: Vec<(String, String)> = statuses(&run.report)
        .into_iter()
        .filter(|(t, _)| t.contains("extra_and_protected::write_hooks"))
        .collect();
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert!(hooks.iter().all(|(_, s)| s == "PASS"), "{hooks:?}");
}

#[test]
fn a_gap_entry_on_a_scenario_that_does_not_rest_on_the_class_is_an_error() {
    let run = with_expectations_in(
        &["parity"],
        "backend: example-bwrap-py\nexpected_failures:\n  - scenario: CT-001\n    gap: protected\n    reason: not the gap\n    observed: anything\n",
    );
    assert_eq!(run.code, Some(1));
    assert!(
        run.matrix.contains("does not rest on that class"),
        "{}",
        run.matrix
    );
}

#[test]
fn what_certify_starts_has_no_signal_blocked() {
    // A process certify starts with SIGINT, SIGTERM or SIGHUP blocked could not be stopped by
    // them: the adapter and every runner record the mask they started with. Outside /tmp and
    // /var/tmp: as root the whole run sees them through overlays of its own, and what the
    // fixture writes there never reaches the host.
    let dir = private_base("masks.");
    let seen = dir.path().join("masks");
    let mut command = backend("signal_probe_backend.py");
    command.push(seen.display().to_string());
    let run = certify(&["--family", "parity"], &command);
    assert_ne!(run.code, Some(2), "{}", run.matrix);
    let masks = std::fs::read_to_string(&seen).expect("the runners recorded their masks");
    assert!(masks.lines().count() > 5, "{masks}");
    for line in masks.lines() {
        let blocked = line.trim_start_matches("SigBlk:").trim();
        assert_eq!(u64::from_str_radix(blocked, 16), Ok(0), "{masks}");
    }
}
/// A private directory for these tests outside every temp root (certify refuses to put its
/// launcher under one): under `$HOME/.cache`, which is where an installed certify's own go, and
/// inside a world base the inside-out walk of concurrent runs does not descend into (a directory
/// made elsewhere would change what their walk finds, and so a replayed run's messages).
fn private_base(tag: &str) -> tempfile::TempDir {
    let home = std::env::var_os("HOME").expect("HOME is set");
    let base = Path::new(&home).join(".cache/sandbox-certify-tests");
    std::fs::create_dir_all(&base).expect("the tests' cache directory");
    tempfile::Builder::new()
        .prefix(tag)
        .tempdir_in(&base)
        .expect("tempdir under $HOME/.cache")
}

/// `certify` copied alone into an empty directory (what `cargo install --path conformance`
/// gives a backend author), run from `/` with no clone in sight of its lookup and no launcher on
/// PATH: the suite inside it and the launcher it provides from itself.
fn lone_certify(cache: &Path, args: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let bin = private_base("lone-bin-");
    let exe = bin.path().join("certify");
    std::fs::copy(CERTIFY, &exe).expect("copy certify alone");
    let out = bin.path().join("out");
    let run = Command::new(&exe)
        .args(args)
        .arg("--out")
        .arg(&out)
        .current_dir("/")
        .env("XDG_CACHE_HOME", cache)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("CONFORMANCE_SCENARIOS")
        .env_remove("CONFORMANCE_EXPECTATIONS")
        .output()
        .expect("run the lone certify");
    (run, bin)
}

#[test]
fn a_lone_installed_certify_certifies_a_family_from_the_root_directory() {
    assert!(
        Command::new("sh")
            .args(["-c", "command -v landlock-run"])
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .is_ok_and(|o| !o.status.success()),
        "a landlock-run on the system PATH would hide what this test checks"
    );
    let cache = private_base("lone-cache-");
    let (run, bin) = lone_certify(
        cache.path(),
        &["--backend", "landlock", "--family", "containment"],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    // PARTIAL: the family passed, and only it ran.
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    let report: Report = serde_json::from_str(
        &std::fs::read_to_string(bin.path().join("out/report.json")).expect("report.json"),
    )
    .expect("json");
    assert_eq!(report.backends[0].name, "landlock");
    assert!(report.backends[0].certified, "{stderr}");
    let cases = report.cases.len();
    assert!(cases > 100, "the containment family ran: {cases} cases");
    // The embedded scenario set is the workspace's, and the report says which it is.
    let hash = conformance::suite::hash_dir(&repo().join("scenarios")).expect("hash");
    assert_eq!(report.suite_hash.as_deref(), Some(hash.as_str()));
    assert!(!report.suite_version.is_empty());
    // The suite's copy and the launcher's link are gone with the run.
    let left: Vec<_> = std::fs::read_dir(cache.path().join("sandbox-certify"))
        .expect("certify's cache directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The backends a clone has beside `certify` (`policy` runs the reference agent, `local` runs
/// `sandboxctl`) are certified by a lone copy too: it acts as both under their names. `local`'s
/// host simulations need root, so as the unprivileged user only `policy` is asked for.
#[test]
fn a_lone_installed_certify_is_also_the_agent_and_sandboxctl() {
    for program in ["sandbox-agent", "sandboxctl"] {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                .output()
                .is_ok_and(|o| !o.status.success()),
            "a {program} on the system PATH would hide what this test checks"
        );
    }
    let cache = private_base("lone-cache-");
    let mut args = vec!["--backend", "policy", "--family", "anchoring"];
    if is_root() {
        args.extend(["--backend", "local", "--family", "selection"]);
    }
    let (run, bin) = lone_certify(cache.path(), &args);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    let report: Report = serde_json::from_str(
        &std::fs::read_to_string(bin.path().join("out/report.json")).expect("report.json"),
    )
    .expect("json");
    let backends = &report.backends;
    assert_eq!(backends.len(), if is_root() { 2 } else { 1 }, "{stderr}");
    for backend in backends {
        assert!(backend.certified, "{}: {stderr}", backend.name);
    }
    let ran = |family: &str| report.cases.iter().filter(|c| c.family == family).count();
    assert!(ran("anchoring") > 30, "the anchoring family ran: {stderr}");
    if is_root() {
        assert!(ran("selection") >= 15, "the selection family ran: {stderr}");
    }
}

/// `certify` beside a launcher but without `sandbox-agent` (a release build of certify and the
/// launcher alone, as the benchmark's build makes): the agent it provides from itself finds that
/// launcher. It looked only next to itself, every agent call was `SANDBOX_UNAVAILABLE`, and
/// each agent case hung until its timeout.
#[test]
fn a_provided_agent_finds_the_launcher_found_beside_certify() {
    let bin = private_base("half-bin-");
    std::fs::copy(CERTIFY, bin.path().join("certify")).expect("copy certify");
    let launcher = Path::new(CERTIFY).with_file_name("landlock-run");
    std::fs::copy(&launcher, bin.path().join("landlock-run")).expect("copy the launcher");
    let scenarios = bin.path().join("scenarios/hardening");
    std::fs::create_dir_all(&scenarios).expect("scenario folder");
    std::fs::copy(
        repo().join("scenarios/hardening/agent_cancel.yaml"),
        scenarios.join("agent_cancel.yaml"),
    )
    .expect("copy the agent's cancel scenario");
    let cache = private_base("half-cache-");
    let out = bin.path().join("out");
    let run = Command::new(bin.path().join("certify"))
        .args([
            "--backend",
            "landlock",
            "--family",
            "hardening",
            "--scenarios",
        ])
        .arg(bin.path().join("scenarios"))
        .arg("--out")
        .arg(&out)
        .current_dir("/")
        .env("XDG_CACHE_HOME", cache.path())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("CONFORMANCE_SCENARIOS")
        .env_remove("CONFORMANCE_EXPECTATIONS")
        .output()
        .expect("run certify");
    let stderr = String::from_utf8_lossy(&run.stderr);
    let report: Report = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("report.json"),
    )
    .expect("json");
    let agent_case = report
        .cases
        .iter()
        .find(|c| c.scenario == "HD-021")
        .unwrap_or_else(|| panic!("the agent's case ran: {stderr}"));
    assert_eq!(
        agent_case.status,
        Status::Pass,
        "{:?}: {stderr}",
        agent_case.message
    );
}

#[test]
fn a_lone_certify_that_cannot_provide_the_launcher_runs_nothing_under_landlock() {
    // Its cache under /tmp (a temp root a confined call may write) is refused: the launcher it
    // would link there could be replaced by a payload.
    let tmp = tempfile::tempdir().expect("tempdir");
    let (run, bin) = lone_certify(
        tmp.path(),
        &["--backend", "landlock", "--family", "containment"],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("cannot provide one") && stderr.contains("which a confined call may write"),
        "{stderr}"
    );
    assert_ne!(run.status.code(), Some(0), "{stderr}");
    assert_ne!(run.status.code(), Some(3), "{stderr}");
    let report = std::fs::read_to_string(bin.path().join("out/report.json")).unwrap_or_default();
    assert!(
        !report.contains("\"certified\": true"),
        "an unusable launcher certifies nothing: {report}"
    );
    assert!(
        !tmp.path()
            .join("sandbox-certify")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
    );
}

#[test]
fn a_workspace_passed_through_a_glob_is_not_certified_with_the_inside_and_host_paths_named() {
    // The runner binds what a glob of the workspace's path matches first: only worlds with odd
    // names (each has a decoy a glob of its workspace's name matches) show it, and every one
    // that does names the workspace (inside) and the decoy where the write landed (host).
    decoy_named("glob");
}

#[test]
fn a_runner_that_expands_or_splits_the_workspace_is_not_certified_with_both_paths_named() {
    // `$(...)`, backticks and `${HOME}` expanded by a shell; a list split at `:`, `=` or a
    // newline: each binds the decoy that expansion or split makes of the workspace's name.
    decoy_named("expand");
    decoy_named("split");
}

/// The leaky fixture `leak` confines a decoy instead of the workspace in the cases whose names
/// call for it: NOT CERTIFIED, each failure naming the workspace (inside) and the decoy (on the
/// host), and one showing where a write landed in the decoy.
fn decoy_named(leak: &str) {
    const DECOY: &str =
        "\n  decoy (what a glob, an expansion or a split of the workspace's name gives): ";
    let glob = leak;
    // Odd names in every case: a name this fixture mangles then appears in every run, not in the
    // one case in 16 a random draw gives it (which missed every sensitive case now and then).
    let (run, failed) = leaky_with(leak, &[(conformance::world::ODD_NAMES_VAR, "every")]);
    assert_eq!(run.code, Some(1), "{glob}: {}", run.matrix);
    assert!(!failed.is_empty(), "{glob}: nothing failed");
    let line = |m: &str, key: &str| {
        m.split_once(key)
            .map(|(_, rest)| rest.split('\n').next().unwrap_or_default().to_owned())
    };
    // Each failure is in a world with odd names and names both paths. Where the write it shows
    // landed may be another world's: the fixture's glob of one world's name can match another
    // drawn beside it (`été 2024-*` matches `été 2024-nmjtrs!`), and a concurrent case's walk
    // then writes there. That is this fixture's leak too, seen from the other world.
    for (scenario, message) in &failed {
        let (Some(ws), Some(decoy)) = (line(message, "\n  workspace: "), line(message, DECOY))
        else {
            panic!("{glob}: {scenario} failed in a world with ordinary names: {message}");
        };
        assert!(
            message.contains(&ws) && !decoy.is_empty(),
            "{glob}: {scenario} names the workspace {ws:?} and the decoy {decoy:?}: {message}"
        );
    }
    assert!(
        failed
            .iter()
            .any(|(_, m)| m.contains("the effect was asked on ")
                && line(m, DECOY).is_some_and(|d| m.contains(&format!("\n  + {d}/"))
                    || m.contains(&format!("\n  ~ {d}/"))
                    || m.contains(&format!("\n  - {d}/")))),
        "{glob}: a write inside the workspace shown where it landed on the host: {failed:?}"
    );
}

#[test]
fn a_backend_that_cannot_carry_a_name_refuses_and_those_cases_say_so() {
    // The honest answer to the same limit: `unavailable` for a workspace named like a glob. Only
    // the cases with odd names fail, each with the runner's words and what its names held.
    let (run, failed) = leaky("glob-refused");
    assert_eq!(run.code, Some(1), "glob-refused: {}", run.matrix);
    assert!(!failed.is_empty(), "glob-refused: nothing failed");
    for (scenario, message) in &failed {
        assert!(
            message.contains("confine refused: SANDBOX_UNAVAILABLE")
                && message.contains("cannot carry a workspace named like a glob pattern")
                && message.contains("this case's names hold the shell and glob characters")
                && message.contains("--seed "),
            "glob-refused: {scenario} says it was refused for its names: {message}"
        );
    }
}

/// `certify` with `args` and its output directory `out` (whose previous report a test keeps).
fn certify_into(
    out: &Path,
    args: &[&str],
    command: &[String],
    path: Option<&Path>,
) -> std::process::Output {
    let mut cmd = Command::new(CERTIFY);
    cmd.args(args).arg("--out").arg(out);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    if !command.is_empty() {
        cmd.arg("--").args(command);
    }
    cmd.output().expect("run certify")
}

#[test]
fn a_missing_expectations_file_is_a_usage_error_that_leaves_the_previous_report() {
    let out = tempfile::tempdir().expect("tempdir");
    let previous = out.path().join("report.json");
    std::fs::write(&previous, "{\"previous\": true}").expect("write");
    let run = certify_into(
        out.path(),
        &["--expectations", "/nonexistent.yaml"],
        &backend("example_bwrap_backend.py"),
        None,
    );
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("--expectations /nonexistent.yaml"),
        "{run:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&previous).expect("the previous report"),
        "{\"previous\": true}"
    );
}

#[test]
fn an_unwritable_out_is_a_usage_error_before_the_first_case() {
    // A report under a regular file cannot be written, as root or as a user.
    let file = tempfile::NamedTempFile::new().expect("a file");
    let out = file.path().join("certify-report");
    let started = std::time::Instant::now();
    let run = certify_into(&out, &["--backend", "bwrap"], &[], None);
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains(&format!("--out {}", out.display())) && stderr.contains("not a directory"),
        "{stderr}"
    );
    // Refused before any case ran (a whole run takes tens of seconds).
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn without_tmux_the_tmux_cases_are_the_harness_error_never_a_backend_failure() {
    // A PATH with every program of /usr/bin but tmux.
    let bin = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir("/usr/bin").expect("/usr/bin").flatten() {
        if entry.file_name() != "tmux" {
            let _ = std::os::unix::fs::symlink(entry.path(), bin.path().join(entry.file_name()));
        }
    }
    let out = tempfile::tempdir().expect("tempdir");
    let run = certify_into(
        out.path(),
        &["--backend", "bwrap", "--family", "host-ipc"],
        &[],
        Some(bin.path()),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("this host lacks tmux"), "{stderr}");
    let report: Report = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("report.json")).expect("report.json"),
    )
    .expect("json");
    let tmux: Vec<(String, String)> = statuses(&report)
        .into_iter()
        .filter(|(t, _)| t.contains("tmux"))
        .collect();
    assert_eq!(tmux.len(), 4, "{tmux:?}");
    assert!(tmux.iter().all(|(_, s)| s == "ERROR"), "{tmux:?}");
    let messages: Vec<&str> = report
        .cases
        .iter()
        .filter(|c| c.trial.contains("tmux"))
        .filter_map(|c| c.message.as_deref())
        .collect();
    assert!(
        messages
            .iter()
            .all(|m| m.contains("the harness's own") && m.contains("tmux is not installed")),
        "{messages:?}"
    );
    // Every other case of the family ran as usual.
    assert_eq!(count(&report, "FAIL"), 0, "{:?}", statuses(&report));
}

/// Certifies a leaky fixture (`script leak`) on `family`: NOT CERTIFIED, every failing case one
/// of `scenario`'s (only its check catches the leak), each message naming `host` (the path on the
/// host the leak reached). Returns the failing trials.
fn caught_only_by(
    family: &str,
    script: &str,
    leak: &str,
    scenario: &str,
    host: &str,
) -> Vec<String> {
    let mut command = backend(script);
    command.push(leak.into());
    let run = certify(&["--family", family], &command);
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let bad: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| !matches!(c.status, Status::Pass | Status::Xfail))
        .collect();
    assert!(!bad.is_empty(), "{}", run.matrix);
    for case in &bad {
        assert_eq!(case.status, Status::Fail, "{case:?}");
        assert_eq!(case.scenario, scenario, "another check caught it: {case:?}");
        let message = message(case);
        assert!(
            message.contains("on the host") && message.contains(host),
            "{message}"
        );
    }
    bad.iter().map(|c| c.trial.clone()).collect()
}

#[test]
fn a_writable_submount_under_a_read_only_bind_is_found_only_in_the_kernels_mount_table() {
    let host = if is_root() {
        "/var/backups/"
    } else {
        "leaky-deep/"
    };
    let failed = caught_only_by(
        "containment",
        "leaky_kernel_view_backend.py",
        "deep-submount",
        "CT-010",
        host,
    );
    assert_eq!(failed.len(), 2, "both modes: {failed:?}");
}

#[test]
fn a_staging_root_aliasing_the_host_root_is_found_by_device_never_pruned_as_a_loop() {
    // As root the alias's own root is the host's / and writable; as a user it is not, but the
    // host's /dev/shm (a mount of its own, writable by everyone) shows through it.
    let host = if is_root() {
        "inside the sandbox is /."
    } else {
        "inside the sandbox is /dev/shm/"
    };
    let failed = caught_only_by(
        "containment",
        "leaky_kernel_view_backend.py",
        "stage-root",
        "CT-010",
        host,
    );
    assert_eq!(failed.len(), 2, "both modes: {failed:?}");
}

/// The directory holding the home bound read-write deep below `/usr/share`: as a user the
/// mount's own root (`/home`) is not writable, the home below it is, and only the kernel's view
/// finds it, by the filesystem and directory the home is, not by the mount's root.
#[test]
fn a_home_writable_below_a_mount_whose_root_is_not_is_found_in_the_kernels_mount_table() {
    let home = std::fs::canonicalize(std::env::var_os("HOME").expect("HOME")).expect("home");
    let failed = caught_only_by(
        "containment",
        "leaky_kernel_view_backend.py",
        "home-parent",
        "CT-010",
        &format!("is {}/.", home.display()),
    );
    assert_eq!(failed.len(), 2, "both modes: {failed:?}");
}

/// HD-031's four cases, as root (where they run).
fn leftovers_cases(run: &Run) -> Vec<&CaseResult> {
    let looked: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| c.scenario == "HD-031")
        .collect();
    assert_eq!(looked.len(), 4, "{}", run.why());
    looked
}

/// As a user HD-031's four cases are not planned (their private places need a mount namespace
/// of the harness's): the report lists each with the reason, and none ran.
fn leftovers_not_planned(run: &Run) {
    assert!(
        !run.report.cases.iter().any(|c| c.scenario == "HD-031"),
        "{}",
        run.why()
    );
    let listed: Vec<&(String, String)> = run
        .report
        .not_planned
        .iter()
        .filter(|(name, _)| name.contains("::leftovers::"))
        .collect();
    assert_eq!(listed.len(), 4, "{:?}", run.report.not_planned);
    for (name, why) in listed {
        assert!(why.contains("root"), "{name}: {why}");
    }
}

/// A runner that keeps state of its own in a directory of the host's `/tmp`, leaving a file there
/// every call, declares it (`differences.state`): while only its owner can write it, what is in
/// it is no leftover, for the cases (HD-031) as for the run; made so that others can write it
/// (1777: a later payload could plant files there), the declaration excuses nothing and each
/// case names the directory as such, and so does the run's own check where no case looks. The
/// declaration is listed in the report and the matrix.
#[test]
fn a_declared_state_directory_is_no_leftover_while_only_its_owner_can_write_it() {
    let root = one_scenario_file("hardening/leftovers.yaml");
    let plain = one_scenario_file("containment/writable_set.yaml");
    for mode in ["state", "state-shared"] {
        let prefix = format!("leaky-{mode}-{}", std::process::id());
        let dir = format!("/tmp/{prefix}-state");
        let run = certify_with(
            &["--scenarios", root.path().to_str().expect("utf8")],
            &backend("leaky_leftovers_backend.py"),
            &[
                ("LEAKY_STAGE_PREFIX", prefix.as_str()),
                ("LEAKY_MODE", mode),
            ],
        );
        let kept_by_cases = std::path::Path::new(&dir).is_dir();
        let _ = std::fs::remove_dir_all(&dir);
        let declared = run.report.backends[0]
            .declared
            .as_ref()
            .map(|d| d.state.iter().map(|s| s.path.clone()).collect::<Vec<_>>());
        assert_eq!(
            declared,
            Some(vec![std::path::PathBuf::from(&dir)]),
            "{}",
            run.why()
        );
        assert!(
            run.matrix
                .contains(&format!("its own state in a shared place (what is there is no leftover, while only its owner can write it): {dir}")),
            "{}",
            run.matrix
        );
        // Where no case looks, the run's own check passes over the same directory, or names it.
        let unlooked = certify_with(
            &["--scenarios", plain.path().to_str().expect("utf8")],
            &backend("leaky_leftovers_backend.py"),
            &[
                ("LEAKY_STAGE_PREFIX", prefix.as_str()),
                ("LEAKY_MODE", mode),
            ],
        );
        let kept_by_run = std::path::Path::new(&dir).is_dir();
        let _ = std::fs::remove_dir_all(&dir);
        let unsound = |uid: u32| {
            vec![format!(
                "{dir} (a declared state directory that is not a directory only its owner can write, owner uid {uid}, mode 1777)"
            )]
        };
        if !is_root() {
            // As a user the calls really keep their state in the host's /tmp (HD-031's cases
            // are not planned, so the first run made no call), and the run names only what
            // others could use there: the state directory others may write, judged by the look
            // at the host's /tmp.
            assert!(kept_by_run, "the fixture kept no state: {}", unlooked.why());
            leftovers_not_planned(&run);
            let expected = if mode == "state" {
                Vec::new()
            } else {
                unsound(nix::unistd::geteuid().as_raw())
            };
            assert_eq!(
                unlooked.report.left_in_shared_places,
                expected,
                "{}",
                unlooked.why()
            );
            continue;
        }
        assert!(
            !kept_by_cases && !kept_by_run,
            "the private places kept the host's /tmp as it was"
        );
        assert!(run.report.left_in_shared_places.is_empty(), "{}", run.why());
        let expected: Vec<String> = if mode == "state" {
            Vec::new()
        } else {
            unsound(0)
        };
        assert_eq!(
            unlooked.report.left_in_shared_places,
            expected,
            "{}",
            unlooked.why()
        );
        let looked = leftovers_cases(&run);
        for case in looked {
            if mode == "state" {
                assert_eq!(case.status, Status::Pass, "{case:?}");
            } else {
                assert_eq!(case.status, Status::Fail, "{case:?}");
                let message = message(case);
                assert!(
                    message.contains(&format!(
                        "{dir} (a declared state directory that is not a directory only its owner can write, owner uid 0, mode 1777)"
                    )),
                    "{message}"
                );
            }
        }
    }
}

/// A runner that stages in the host's `/tmp` and tidies up only when the call ends is caught by
/// the leftovers check (HD-031) when a timeout stops the call, and by nothing else: the
/// directory named on the host with its owner and mode. As a user the check cannot run (its
/// private shared places need a mount namespace of the harness's): the cases say so.
#[test]
fn a_staging_directory_a_stopped_call_leaves_in_the_hosts_tmp_is_named() {
    let prefix = format!("leaky-stage-{}", std::process::id());
    let run = certify_with(
        &["--family", "hardening"],
        &backend("leaky_leftovers_backend.py"),
        &[("LEAKY_STAGE_PREFIX", prefix.as_str())],
    );
    // What the cases that do not look left in the host's /tmp (their timeouts stop the runner).
    for entry in std::fs::read_dir("/tmp").expect("/tmp").flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(&format!("{prefix}."))
        {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
    if !is_root() {
        leftovers_not_planned(&run);
        return;
    }
    let leftovers: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| c.scenario == "HD-031")
        .collect();
    assert_eq!(leftovers.len(), 4, "{}", run.why());
    assert_eq!(run.code, Some(1), "{}", run.why());
    let bad: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| c.status.is_bad() && c.scenario != "HD-030")
        .collect();
    // HD-030 fails as it does for the worked example (it shares the host's /tmp while the call
    // runs); nothing else but the two stopped calls.
    assert_eq!(bad.len(), 2, "the two stopped calls only: {}", run.why());
    for case in bad {
        assert_eq!(case.status, Status::Fail, "{case:?}");
        assert_eq!(case.scenario, "HD-031", "{case:?}");
        assert!(case.trial.contains("timeout"), "{case:?}");
        let message = message(case);
        assert!(
            message.contains(&format!("/tmp/{prefix}."))
                && message.contains("a directory, owner uid 0, mode 0700"),
            "{message}"
        );
    }
}

/// A runner that detaches a helper without the case's tag, which stages in /tmp once the call is
/// over: HD-031 kills what of the case still runs in its mount namespace and fails the case
/// naming it, before it reads the private places (where the helper would write too late to be
/// seen); a helper that staged before the case was over is named as what it left.
#[test]
fn a_helper_the_runner_detaches_is_found_in_the_cases_namespace() {
    let prefix = format!("leaky-late-{}", std::process::id());
    let run = certify_with(
        &["--family", "hardening"],
        &backend("leaky_leftovers_backend.py"),
        &[
            ("LEAKY_STAGE_PREFIX", prefix.as_str()),
            ("LEAKY_MODE", "late"),
        ],
    );
    // What the helpers of the cases that do not look staged in the host's /tmp.
    for entry in std::fs::read_dir("/tmp").expect("/tmp").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{prefix}.")) || name.starts_with(&format!("{prefix}-z.")) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
    if !is_root() {
        leftovers_not_planned(&run);
        return;
    }
    let looked = leftovers_cases(&run);
    for case in looked {
        assert_eq!(case.status, Status::Fail, "{case:?}");
        let message = message(case);
        // Still running when the case was over, or (a call its timeout stopped after the helper's
        // 0.3 s) already staged. On a loaded host a timeout may also stop the runner between its
        // first helper's fork and its `setsid` (the call's kill takes it) while the second one has
        // detached: then only the second is named (seen once in CI at a load of 40).
        assert!(
            (message.contains("still running in its mount namespace")
                && (message.contains("sleep 0.3") || message.contains("leaky zombie leader")))
                || message.contains(&format!("/tmp/{prefix}.")),
            "{message}"
        );
        // The same of the helper whose leader thread ended while its other thread runs on, where
        // the call ended by itself (a timeout of 0.5 s may stop a runner on a loaded host before
        // it started its second helper).
        assert!(
            !case.trial.contains("a_call_that_ends")
                || (message.contains("still running in its mount namespace")
                    && message.contains("leaky zombie leader"))
                || message.contains(&format!("/tmp/{prefix}-z.")),
            "{message}"
        );
    }
}

/// A runner that detaches helpers without the case's tag, which outlive the run (one of them a
/// zombie leader, whose first thread ended while another sleeps on): no case sees them (the
/// survivor scan goes by the tag), so the scan of every process below certify once the last case
/// has ended names each, kills it, and fails the run, with every case passed.
#[test]
fn a_process_the_runner_detaches_without_the_tag_fails_the_run_and_is_killed() {
    let root = one_scenario_file("containment/writable_set.yaml");
    // A duration of this test's own, so the host's processes are told from the helpers.
    let seconds = (80_000 + std::process::id() % 6_000).to_string();
    // As root the sleeps also get pids below the run's window (ns_last_pid set back).
    let low = if is_root() { "1" } else { "" };
    let run = certify_with(
        &["--scenarios", root.path().to_str().expect("utf8")],
        &backend("leaky_leftovers_backend.py"),
        &[
            ("LEAKY_MODE", "linger"),
            ("LEAKY_LINGER_SECONDS", &seconds),
            ("LEAKY_LOW_PID", low),
        ],
    );
    let helper = format!("sleep {seconds}");
    let zombie_leader =
        |line: &str| line.contains("leaky zombie leader") && line.ends_with(&seconds);
    // Read through every thread: the zombie leader's own command line is empty.
    let alive: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read_dir(e.path().join("task")).ok())
        .flat_map(|tasks| tasks.flatten())
        .filter_map(|t| std::fs::read(t.path().join("cmdline")).ok())
        .map(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .filter(|c| *c == helper || zombie_leader(c))
        .collect();
    assert!(alive.is_empty(), "helpers outlived certify: {alive:?}");
    assert_eq!(run.code, Some(1), "{}", run.why());
    assert!(
        run.report.cases.iter().all(|c| !c.status.is_bad()),
        "every case passes: {}",
        run.why()
    );
    assert_eq!(run.report.verdict, Verdict::NotCertified);
    // Each of the two calls left a sleep and a zombie leader.
    assert_eq!(
        run.report.left_behind.len(),
        4,
        "{:?}",
        run.report.left_behind
    );
    for left in &run.report.left_behind {
        assert!(
            left.starts_with("pid ") && (left.ends_with(&helper) || zombie_leader(left)),
            "{left}"
        );
        if is_root() && left.ends_with(&helper) {
            let pid: u64 = left[4..left.find(':').expect(":")].parse().expect("a pid");
            assert!(pid < 10_000, "the fixture's sleep got no low pid: {left}");
        }
    }
    assert_eq!(
        run.report
            .left_behind
            .iter()
            .filter(|l| zombie_leader(l))
            .count(),
        2,
        "{:?}",
        run.report.left_behind
    );
    assert!(
        run.matrix
            .contains("- run: a process still alive after the last case (killed): pid "),
        "{}",
        run.matrix
    );
}

/// A declared state directory excuses nothing others could use or the host had: one holding a
/// directory everyone can write is named with it, and one the host already had (another user's,
/// which the runner made its own and emptied) is named, with the file it removed. As root (the
/// cases run in private places); the host's directory is as it was.
#[test]
fn a_declared_state_directory_excuses_nothing_others_could_use_or_the_host_had() {
    let root = one_scenario_file("hardening/leftovers.yaml");
    for mode in ["state-hazard", "state-takeover"] {
        let prefix = format!("leaky-{mode}-{}", std::process::id());
        let dir = format!("/tmp/{prefix}-state");
        if mode == "state-takeover" && is_root() {
            // Another user's directory, already there.
            std::fs::create_dir(&dir).expect("the host's directory");
            std::fs::write(format!("{dir}/precious"), "mine").expect("precious");
            std::os::unix::fs::chown(&dir, Some(1001), Some(1001)).expect("chown");
        }
        let run = certify_with(
            &["--scenarios", root.path().to_str().expect("utf8")],
            &backend("leaky_leftovers_backend.py"),
            &[
                ("LEAKY_STAGE_PREFIX", prefix.as_str()),
                ("LEAKY_MODE", mode),
            ],
        );
        let host_kept = std::fs::read_to_string(format!("{dir}/precious")).ok();
        let owner = std::fs::metadata(&dir).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid()
        });
        let _ = std::fs::remove_dir_all(&dir);
        if !is_root() {
            leftovers_not_planned(&run);
            continue;
        }
        for case in leftovers_cases(&run) {
            assert_eq!(case.status, Status::Fail, "{case:?}");
            let message = message(case);
            assert!(
                message.contains(&format!(
                    "{dir} (a declared state directory that is not a directory only its owner can write"
                )),
                "{message}"
            );
            if mode == "state-hazard" {
                assert!(
                    message.contains("it holds drop (a directory others can write, mode 0777)"),
                    "{message}"
                );
            } else {
                assert!(
                    message.contains(&format!("{dir}/precious (a host entry it removed")),
                    "{message}"
                );
            }
        }
        if mode == "state-takeover" {
            assert_eq!(
                host_kept.as_deref(),
                Some("mine"),
                "the host's file is gone"
            );
            assert_eq!(owner, Some(1001), "the host's directory changed hands");
        }
    }
}

/// A cache below /var/tmp (CI points `XDG_CACHE_HOME` there) stays the host's inside the run's
/// overlays: the calls' private temp areas live in it (an overlay's upper directory cannot lie
/// on another overlay, so they broke: a call's /tmp lost the host's files), and what the run
/// tidies there of another's (a dead run's temp area) is not blamed on it.
#[test]
fn a_cache_below_var_tmp_keeps_the_temp_areas_working_and_its_tidying_is_no_leftover() {
    let cache = sandbox_test_support::scratch_dir("cache.");
    // A temp area of a process that is gone (above the largest pid_max), which the run removes.
    let dead = cache.path().join("sandbox-conformance/tmp-areas/4999999");
    std::fs::create_dir_all(&dead).expect("a dead run's area");
    let out = tempfile::tempdir().expect("out");
    let done = Command::new(CERTIFY)
        .args(["--backend", "bwrap", "--family", "parity", "--out"])
        .arg(out.path())
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .expect("certify");
    let report: Report = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("report.json")).expect("report.json"),
    )
    .expect("a report");
    let failed: Vec<&CaseResult> = report.cases.iter().filter(|c| c.status.is_bad()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(
        report.left_in_shared_places.is_empty(),
        "{:?}",
        report.left_in_shared_places
    );
    assert_eq!(done.status.code(), Some(3), "PARTIAL: {report:?}");
    // The tidying reached the host's cache.
    assert!(!dead.exists(), "the dead run's area is still there");
}

/// A backend that kills certify's supervisor: certify runs on, but what is now its parent is
/// some host process, so the run-end scan must not take that process's other children for the
/// run's. It kills none of them (a bystander started meanwhile lives on), and the run is NOT
/// CERTIFIED, saying why.
#[test]
fn a_killed_supervisor_fails_the_run_and_no_host_process_is_taken_for_the_runs() {
    let root = one_scenario_file("containment/writable_set.yaml");
    let scratch = private_base("supervisor.");
    let out = scratch.path().join("out");
    let mark = scratch.path().join("killed");
    let mut command = Command::new(CERTIFY);
    command
        .args(["--scenarios", root.path().to_str().expect("utf8"), "--out"])
        .arg(&out)
        .arg("--")
        .args(backend("leaky_leftovers_backend.py"))
        .env("LEAKY_MODE", "kill-supervisor")
        .env("LEAKY_MARK", &mark)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut supervisor = command.spawn().expect("certify");
    // A process of the host's, started while the run goes on, whose parent is not the run's.
    let bystander = Command::new("sh")
        .args([
            "-c",
            "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!",
        ])
        .output()
        .expect("bystander");
    let bystander: i32 = String::from_utf8_lossy(&bystander.stdout)
        .trim()
        .parse()
        .expect("its pid");
    let status = supervisor.wait().expect("wait");
    assert_eq!(status.code(), None, "the supervisor was killed: {status:?}");
    // certify itself runs on and writes its report.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let report = loop {
        if let Ok(text) = std::fs::read_to_string(out.join("report.json"))
            && let Ok(report) = serde_json::from_str::<Report>(&text)
        {
            break report;
        }
        assert!(std::time::Instant::now() < deadline, "no report");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let alive = std::path::Path::new(&format!("/proc/{bystander}")).exists();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(bystander),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(mark.exists(), "the fixture never killed the supervisor");
    assert!(
        alive,
        "the run-end scan killed a host process: {:?}",
        report.left_behind
    );
    assert_eq!(report.verdict, Verdict::NotCertified);
    assert!(
        report
            .left_behind
            .iter()
            .any(|l| l.contains("supervisor") && l.contains("was killed during the run")),
        "{:?}",
        report.left_behind
    );
}

/// A root runner that points a setting the kernel runs as root (here the power-off command, the
/// one least likely to be used while a test runs) somewhere else: no case looks, and the run
/// fails naming the setting with what it holds and what the host had. The test puts the host's
/// setting back whatever happens. As a user the runner cannot change it and the run cannot
/// look: `not_planned` says so.
#[test]
fn a_kernel_setting_a_root_runner_changed_fails_the_run_naming_both_values() {
    /// Writes the host's power-off command back when dropped.
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::write(POWEROFF, &self.0);
        }
    }
    const POWEROFF: &str = "/proc/sys/kernel/poweroff_cmd";
    let host = std::fs::read_to_string(POWEROFF).expect("the power-off command");
    let _restore = Restore(host.trim_end().to_owned());
    let root = one_scenario_file("containment/devices.yaml");
    let planted = "/sbin/poweroff-left-by-a-runner";
    let run = certify_with(
        &["--scenarios", root.path().to_str().expect("utf8")],
        &backend("leaky_leftovers_backend.py"),
        &[("LEAKY_MODE", "setting"), ("LEAKY_SETTING", planted)],
    );
    let now = std::fs::read_to_string(POWEROFF).expect("the power-off command");
    if !is_root() {
        assert_eq!(now, host, "a user's runner cannot change it");
        assert!(
            run.report
                .not_planned
                .iter()
                .any(|(what, why)| what == "run: the host's shared places" && why.contains("root")),
            "{:?}",
            run.report.not_planned
        );
        return;
    }
    assert_eq!(now.trim_end(), planted, "the fixture changed nothing");
    assert_eq!(run.code, Some(1), "{}", run.why());
    assert_eq!(run.report.verdict, Verdict::NotCertified);
    // Reported apart from what was left in the shared places, in every view of the report.
    let named = format!(
        "{POWEROFF}: holds {planted:?}, where the host had {:?} (the host runs what it names)",
        host.trim_end()
    );
    assert_eq!(
        run.report.changed_host_settings,
        std::slice::from_ref(&named),
        "{}",
        run.why()
    );
    assert!(
        !run.report
            .left_in_shared_places
            .iter()
            .any(|e| e.contains(POWEROFF)),
        "{:?}",
        run.report.left_in_shared_places
    );
    assert!(
        run.matrix
            .contains(&format!("- run: a host setting it changed: {named}")),
        "{}",
        run.matrix
    );
    assert!(
        run.junit
            .contains(r#"<testcase name="changed_host_settings" classname="run">"#),
        "{}",
        run.junit
    );
    // The HTML report says why a run whose every case passed is not certified.
    assert!(
        run.html.contains("<ul class=\"problems\">")
            && run
                .html
                .contains("run: a host setting it changed: /proc/sys/kernel/poweroff_cmd"),
        "{}",
        run.html
    );
}

/// A root runner that points a cgroup v1 hierarchy's `release_agent` (the program the kernel runs
/// as root whenever a cgroup of it marked `notify_on_release` empties) at a program of its own:
/// the run fails naming it (found red-teaming: a runner that tracked calls in the host's `pids`
/// hierarchy left its clean-up script there, and the kernel ran it 489 times after the run).
/// The test puts the host's agent back whatever happens. On a host with no cgroup v1 hierarchy
/// the runner's write goes nowhere and the run must pass; as a user it cannot write.
#[test]
fn a_cgroup_release_agent_a_root_runner_left_fails_the_run() {
    /// Writes the host's release agent back when dropped.
    struct Restore(Option<(std::path::PathBuf, String)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some((file, was)) = &self.0 {
                let _ = std::fs::write(file, format!("{was}\n"));
            }
        }
    }
    let table = std::fs::read("/proc/self/mountinfo").expect("mountinfo");
    let agent = sandbox::mountinfo::entries(&table)
        .into_iter()
        .filter(|m| m.root == Path::new("/"))
        .map(|m| m.point.join("release_agent"))
        .find(|a| a.is_file());
    let host = agent
        .as_ref()
        .map(|a| std::fs::read_to_string(a).expect("release_agent"));
    let _restore = Restore(
        agent
            .clone()
            .zip(host.clone())
            .filter(|_| is_root())
            .map(|(a, h)| (a, h.trim_end().to_owned())),
    );
    let file = agent
        .clone()
        .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup/no-v1-hierarchy/release_agent"));
    let root = one_scenario_file("containment/devices.yaml");
    let planted = "/usr/local/sbin/runner-cleanup-left-by-a-runner";
    let run = certify_with(
        &["--scenarios", root.path().to_str().expect("utf8")],
        &backend("leaky_leftovers_backend.py"),
        &[
            ("LEAKY_MODE", "setting"),
            ("LEAKY_SETTING", planted),
            ("LEAKY_SETTING_FILE", file.to_str().expect("utf8")),
        ],
    );
    let now = agent
        .as_ref()
        .map(|a| std::fs::read_to_string(a).expect("release_agent"));
    if !is_root() || agent.is_none() {
        assert_eq!(now, host, "the runner could not change it");
        assert!(run.report.changed_host_settings.is_empty(), "{}", run.why());
        if agent.is_none() && is_root() {
            assert_eq!(run.code, Some(0), "{}", run.why());
        }
        return;
    }
    assert_eq!(
        now.as_deref().map(str::trim_end),
        Some(planted),
        "the fixture changed nothing"
    );
    assert_eq!(run.code, Some(1), "{}", run.why());
    assert_eq!(
        run.report.changed_host_settings,
        [format!(
            "{}: holds {planted:?}, where the host had {:?} (the host runs what it names)",
            file.display(),
            host.as_deref().unwrap_or_default().trim_end()
        )],
        "{}",
        run.why()
    );
}

/// A backend that writes after its case has looked: it binds a session home of its own over ~
/// (declared private) and, when the next call is confined, copies what an ended call left there
/// into the real home. Every case finds the host unchanged when it looks (the outside-in probe
/// included), so only the run's look once every case is over finds the probe's files in ~, names
/// each (really on the host: the test reads, then removes them) and fails the run. Needs no
/// privilege: the same as root and as a user. `--jobs 1` puts each case's look before the next
/// call (found red-teaming: a "persist the session's home" helper, a CERTIFIED run, 22 files in
/// `/root`).
#[test]
fn what_a_backend_writes_after_its_case_looked_fails_the_run() {
    let root = one_scenario_file("containment/writable_set.yaml");
    let run = certify_with(
        &[
            "--jobs",
            "1",
            "--scenarios",
            root.path().to_str().expect("utf8"),
        ],
        &backend("leaky_late_backend.py"),
        &[],
    );
    let home = std::fs::canonicalize(std::env::var_os("HOME").expect("HOME")).expect("home");
    let late: Vec<PathBuf> = run
        .report
        .appeared_after_their_case
        .iter()
        .map(|e| PathBuf::from(e.split(" (a ").next().unwrap_or_default()))
        .collect();
    let on_host: Vec<bool> = late.iter().map(|p| p.is_file()).collect();
    for path in late.iter().filter(|p| p.starts_with(&home)) {
        let _ = std::fs::remove_file(path);
    }
    assert!(
        run.report.cases.iter().all(|c| !c.status.is_bad()),
        "every case looked before the copy: {}",
        run.why()
    );
    assert!(!late.is_empty(), "nothing named: {}", run.why());
    assert!(
        late.iter().all(|p| p.starts_with(&home)) && on_host.iter().all(|f| *f),
        "{late:?} {on_host:?}"
    );
    assert!(
        late.iter()
            .any(|p| p.parent() == Some(home.as_path()) || p.starts_with(home.join(".cargo"))),
        "{late:?}"
    );
    assert_eq!(run.code, Some(1), "{}", run.why());
    assert_eq!(run.report.verdict, Verdict::NotCertified);
    assert!(
        run.matrix
            .contains("- run: on the host after its case had looked: "),
        "{}",
        run.matrix
    );
}

/// A backend that grants another user search permission on the home directory (a place worlds
/// are drawn in) through a POSIX ACL (whose mask leaves the mode bits as they were where the
/// group may already search): no world changed, so no case sees it; the run's look at the directories above its worlds names the
/// home and fails the run, as root and as a user (the owner of a directory may set its ACL).
/// The test puts the home's ACL back whatever happens.
#[test]
fn an_acl_a_backend_grants_on_a_directory_above_the_worlds_fails_the_run() {
    const ACL: &str = "system.posix_acl_access";
    /// Puts the home's access ACL and mode back as they were when dropped.
    struct Restore(PathBuf, Option<Vec<u8>>, std::fs::Permissions);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = match &self.1 {
                Some(acl) => {
                    rustix::fs::setxattr(&self.0, ACL, acl, rustix::fs::XattrFlags::empty())
                }
                None => rustix::fs::removexattr(&self.0, ACL),
            };
            let _ = std::fs::set_permissions(&self.0, self.2.clone());
        }
    }
    let home = std::fs::canonicalize(std::env::var_os("HOME").expect("HOME")).expect("home");
    let mut buf = vec![0u8; 4096];
    let had = rustix::fs::getxattr(&home, ACL, &mut buf[..])
        .ok()
        .map(|n| buf[..n].to_vec());
    let mode = std::fs::metadata(&home).expect("home").permissions();
    let _restore = Restore(home.clone(), had.clone(), mode);
    let root = one_scenario_file("containment/devices.yaml");
    let run = certify_with(
        &["--scenarios", root.path().to_str().expect("utf8")],
        &backend("leaky_leftovers_backend.py"),
        &[("LEAKY_MODE", "acl-above"), ("LEAKY_ACL_UID", "4242")],
    );
    let now = rustix::fs::getxattr(&home, ACL, &mut buf[..])
        .ok()
        .map(|n| buf[..n].to_vec());
    assert_ne!(now, had, "the fixture changed nothing: {}", run.why());
    assert_eq!(run.code, Some(1), "{}", run.why());
    assert!(
        run.report.cases.iter().all(|c| !c.status.is_bad()),
        "no case looks there: {}",
        run.why()
    );
    assert!(
        run.report
            .left_in_shared_places
            .iter()
            .any(|e| e.starts_with(&format!(
                // Its ACL, and its mode too where the group bits lacked search (the mask shows there).
                "{} (a host directory above the run's worlds whose",
                home.display()
            ))),
        "{:?}",
        run.report.left_in_shared_places
    );
}

/// A runner that leaves a hook the host runs later: as root a line in `/etc/cron.d` (found
/// red-teaming: an `@reboot` line naming each workspace, `$(...)` in drawn names included), and
/// whoever runs it an autostart entry in the person's `~/.config/autostart`. No case looks
/// there; the run's look at the host's settings names each with what it holds and fails the
/// run. The test removes what the fixture wrote (and the folder, when it made it).
#[test]
fn a_hook_the_host_runs_later_a_runner_left_fails_the_run() {
    /// Removes the hook, and the folders made for it, when dropped.
    struct Remove(PathBuf, Vec<PathBuf>);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            for dir in &self.1 {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
    let home = std::fs::canonicalize(std::env::var_os("HOME").expect("HOME")).expect("home");
    let tag = std::process::id();
    let mut legs = vec![(
        home.join(format!(".config/autostart/sync-{tag}.desktop")),
        "[Desktop Entry]\nExec=/var/tmp/sync-agent\n",
    )];
    if is_root() {
        legs.push((
            PathBuf::from(format!("/etc/cron.d/sbx-clean-{tag}")),
            "@reboot root rm -rf /var/tmp/sbx-cache\n",
        ));
    }
    let root = one_scenario_file("containment/devices.yaml");
    for (hook, planted) in legs {
        let made: Vec<PathBuf> = hook
            .ancestors()
            .skip(1)
            .take_while(|d| !d.exists())
            .map(Path::to_path_buf)
            .collect();
        let dir = hook.parent().expect("a folder");
        std::fs::create_dir_all(dir).expect("the hook's folder");
        let _remove = Remove(hook.clone(), made);
        let run = certify_with(
            &["--scenarios", root.path().to_str().expect("utf8")],
            &backend("leaky_leftovers_backend.py"),
            &[
                ("LEAKY_MODE", "setting"),
                ("LEAKY_SETTING", planted),
                ("LEAKY_SETTING_FILE", hook.to_str().expect("utf8")),
            ],
        );
        assert_eq!(
            std::fs::read_to_string(&hook).ok().as_deref(),
            Some(planted),
            "the fixture wrote nothing: {}",
            run.why()
        );
        assert_eq!(run.code, Some(1), "{}", run.why());
        assert!(
            run.report.cases.iter().all(|c| !c.status.is_bad()),
            "no case looks there: {}",
            run.why()
        );
        assert_eq!(
            run.report.changed_host_settings,
            [format!(
                "{}: holds {planted:?}, where the host had nothing (the host runs what it names)",
                hook.display()
            )],
            "{}",
            run.why()
        );
    }
}

/// A runner that stages in the host's `/tmp` (or `/var/tmp`, or `/run`) and tidies up only when
/// the call ends, run through the survivors' cases (their timeouts stop calls) and no leftovers
/// case: no case looks at the host's shared places, so the run-level check does (as root the
/// whole run sees `/tmp` and `/var/tmp` through overlays of its own, and watches `/run`), names
/// each staging directory a stopped call left, and fails the run with every case passed. In
/// `/run` the runner makes its staging roots writable by every user, what the watch judges there
/// (and they really are on the host: the test removes them), at its top and five levels below it;
/// in `/dev/shm` too. As a user the run cannot see the places privately (the report says so under
/// `not_planned`, and a user cannot stage in `/run` at all): the look at the host's places names
/// the staging roots every user can write, and one only its owner may write holding one every
/// user can (the run was alone), and passes over those only their owner can use.
#[test]
fn what_stopped_calls_leave_in_the_hosts_tmp_fails_the_run_when_no_case_looked() {
    let root = one_scenario_file("hardening/survivors.yaml");
    // Deep in `/run`, below a chain of directories the host already had that others may search
    // (five levels: deeper than the watch reads every directory).
    let chain = format!("/run/leaky-chain-{}", std::process::id());
    let deep = format!("{chain}/a/b/c/d");
    /// Removes the chain when dropped.
    struct Chain<'a>(&'a str);
    impl Drop for Chain<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0);
        }
    }
    let _chain = Chain(&chain);
    if is_root() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&deep)
            .expect("the chain in /run");
    }
    for (place, mode, inner) in [
        ("/tmp", "", ""),
        ("/var/tmp", "", ""),
        ("/run", "0777", ""),
        (deep.as_str(), "0777", ""),
        ("/dev/shm", "0777", ""),
        // A staging root only its owner may write, holding one every user can.
        ("/tmp", "0755", "locks"),
    ] {
        let watched = place.starts_with("/run");
        if watched && !is_root() {
            continue;
        }
        let prefix = format!("leaky-run-{}", std::process::id());
        let run = certify_with(
            &["--scenarios", root.path().to_str().expect("utf8")],
            &backend("leaky_leftovers_backend.py"),
            &[
                ("LEAKY_STAGE_PREFIX", prefix.as_str()),
                ("LEAKY_STAGE_PLACE", place),
                ("LEAKY_STAGE_MODE", mode),
                ("LEAKY_STAGE_INNER", inner),
            ],
        );
        // As a user the stopped calls' directories are really in the host's place.
        let mut on_host = 0;
        for entry in std::fs::read_dir(place).expect("the place").flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{prefix}."))
            {
                on_host += 1;
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        // What each names: the staging root by its mode, or by what it holds.
        let holding = |uid: u32| {
            format!(
                "(a directory, owner uid {uid}, mode 0755; it holds locks (a directory others can write, mode 0777))"
            )
        };
        assert!(
            run.report.cases.iter().all(|c| !c.status.is_bad()),
            "no case looks: {}",
            run.why()
        );
        if !is_root() {
            assert!(on_host > 0, "the fixture staged nothing: {}", run.why());
            assert!(
                run.report
                    .not_planned
                    .iter()
                    .any(|(what, why)| what == "run: the host's shared places"
                        && why.contains("root")),
                "{:?}",
                run.report.not_planned
            );
            // What only its owner can use cannot be told from what the host makes meanwhile;
            // a staging root every user can write is named from the look at the host's place.
            if mode.is_empty() {
                assert!(run.report.left_in_shared_places.is_empty(), "{}", run.why());
                continue;
            }
            let uid = nix::unistd::geteuid().as_raw();
            let what = if inner.is_empty() {
                format!("(a directory others can write, owner uid {uid}, mode 0777)")
            } else {
                holding(uid)
            };
            let left = &run.report.left_in_shared_places;
            assert!(!left.is_empty(), "{}", run.why());
            for entry in left {
                assert!(
                    entry.starts_with(&format!("{place}/{prefix}.")) && entry.ends_with(&what),
                    "{entry}"
                );
            }
            assert_eq!(run.report.verdict, Verdict::NotCertified);
            continue;
        }
        if watched {
            assert!(on_host > 0, "the fixture staged nothing: {}", run.why());
        } else {
            assert_eq!(
                on_host, 0,
                "the run's overlays kept the host's {place} as it was"
            );
        }
        assert_eq!(run.code, Some(1), "{}", run.why());
        assert_eq!(run.report.verdict, Verdict::NotCertified);
        let left = &run.report.left_in_shared_places;
        assert!(!left.is_empty(), "{}", run.matrix);
        let what = if watched {
            "(a directory others can write, owner uid 0, mode 0777)".to_owned()
        } else if mode.is_empty() {
            "(a directory, owner uid 0, mode 0700)".to_owned()
        } else if inner.is_empty() {
            "(a directory, owner uid 0, mode 0777)".to_owned()
        } else {
            holding(0)
        };
        for entry in left {
            assert!(
                entry.starts_with(&format!("{place}/{prefix}.")) && entry.ends_with(&what),
                "{entry}"
            );
        }
        assert!(
            run.matrix.contains(&format!(
                "- run: left in the host's shared places: {place}/"
            )),
            "{}",
            run.matrix
        );
        assert!(
            run.junit
                .contains(r#"<testcase name="left_in_shared_places" classname="run">"#)
                && run.junit.contains(&format!("{place}/{prefix}.")),
            "{}",
            run.junit
        );
    }
}

#[test]
fn a_plant_in_the_shared_temp_folders_tidied_after_the_call_is_found_while_the_call_runs() {
    let run = certify(
        &["--family", "hardening"],
        &backend("leaky_while_running_backend.py"),
    );
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let bad: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| !matches!(c.status, Status::Pass | Status::Xfail | Status::Skip))
        .collect();
    // Every plant is found, and by nothing but the person's tools while the call runs (the two
    // cargo cases where the harness's user has a cargo to act as the person with).
    let planted = if conformance::prerequisites::locate("cargo").is_some() {
        4
    } else {
        2
    };
    assert_eq!(bad.len(), planted, "{bad:#?}");
    for case in bad {
        assert_eq!(case.status, Status::Fail, "{case:?}");
        assert_eq!(case.scenario, "HD-030", "{case:?}");
        let message = message(case);
        assert!(
            message.contains("while the call runs, the person's"),
            "{message}"
        );
        // The host place named: the fresh folder the tool ran in, or the FIFO in /tmp.
        assert!(
            message.contains(" in /tmp/")
                || message.contains(" in /var/tmp/")
                || message.contains("FIFO /tmp/"),
            "{message}"
        );
    }
}

#[test]
fn a_backend_that_claims_files_full_while_metadata_lands_fails_the_metadata_check() {
    let command = vec![
        "python3".into(),
        repo()
            .join("fixtures/backends/claims_full_backend.py")
            .display()
            .to_string(),
        ADAPTER.into(),
    ];
    let run = certify(&["--family", "containment"], &command);
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let bad: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| !matches!(c.status, Status::Pass | Status::Xfail))
        .collect();
    // Only the metadata checks: CT-011, and CT-002's chmod rows.
    for case in &bad {
        assert_eq!(case.status, Status::Fail, "{case:?}");
        let scenario = case.scenario.as_str();
        assert!(scenario == "CT-011" || scenario == "CT-002", "{case:?}");
    }
    // utimes and xattrs are tried by CT-011 alone, each host path named.
    for effect in ["utimes", "xattr-user"] {
        for mode in ["read-only", "workspace-write"] {
            let trial = format!(
                "containment::claims-full::metadata_effects::{effect}_outside_under_{mode}"
            );
            let case = bad
                .iter()
                .find(|c| c.trial == trial)
                .unwrap_or_else(|| panic!("{trial} did not fail: {}", run.matrix));
            let message = message(case);
            assert!(
                message.contains("changed the host outside the writable set: /")
                    && message.contains("the launch reports files full"),
                "{message}"
            );
        }
    }
}

#[test]
fn a_backend_hiding_var_tmp_and_home_behind_declared_tmpfs_mounts_passes_what_they_touch() {
    let run = certify(
        &[
            "--family",
            "containment",
            "--family",
            "parity",
            "--family",
            "declared",
        ],
        &backend("private_places_backend.py"),
    );
    // Every case of the families its private places touch passes (PARTIAL: families left out).
    assert_eq!(run.code, Some(3), "{}", run.matrix);
    assert_eq!(count(&run.report, "FAIL"), 0, "{}", run.matrix);
    let declared = backend_report(&run, "private-places")
        .declared
        .as_ref()
        .expect("the report lists the private places");
    let places: Vec<&str> = declared
        .private
        .iter()
        .filter_map(|p| p.path.to_str())
        .collect();
    assert_eq!(places, ["/var/tmp", "/home"]);
    // Each declaration was verified, in both modes.
    let verified = statuses(&run.report)
        .into_iter()
        .filter(|(t, s)| t.contains("::private_places::") && s == "PASS")
        .count();
    assert_eq!(verified, 2, "{}", run.matrix);
}

#[test]
fn a_private_place_declared_but_not_hidden_fails_naming_the_host_file_seen() {
    let mut command = backend("private_places_backend.py");
    command.push("lie".into());
    let run = certify(&["--family", "declared"], &command);
    assert_eq!(run.code, Some(1), "{}", run.matrix);
    let messages: Vec<&str> = run
        .report
        .cases
        .iter()
        .filter(|c| c.status == Status::Fail)
        .filter_map(|c| c.message.as_deref())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages
            .iter()
            .all(|m| m.contains("the payload sees the host's /var/tmp/")
                && m.contains("not private")),
        "{messages:?}"
    );
}

#[test]
fn a_sorted_mount_table_is_consistent_and_a_refused_workspace_swap_passes() {
    let run = certify(
        &["--family", "containment", "--family", "hardening"],
        &backend("mount_table_backend.py"),
    );
    let all = statuses(&run.report);
    assert_eq!(count(&run.report, "INCONSISTENT"), 0, "{}", run.matrix);
    let swaps: Vec<&(String, String)> = all
        .iter()
        .filter(|(t, _)| t.contains("::workspace_swap::"))
        .collect();
    assert_eq!(swaps.len(), 3, "{swaps:?}");
    assert!(swaps.iter().all(|(_, s)| s == "PASS"), "{swaps:?}");
    // What it fails is the worked example's own shared /tmp (HD-030), nothing of its shape.
    let bad: Vec<&CaseResult> = run
        .report
        .cases
        .iter()
        .filter(|c| !matches!(c.status, Status::Pass | Status::Xfail))
        .collect();
    assert!(bad.iter().all(|c| c.scenario == "HD-030"), "{bad:#?}");
}

/// A world a run renamed aside for its sweep (`.removed-<pid>-<n>` in a world base) and never
/// removed, because the run was killed first, is removed by the next run of the same user before
/// it starts; one of a process still alive is left to it.
#[test]
fn worlds_a_killed_run_renamed_aside_are_removed_by_the_next_run() {
    let mut gone = Command::new("true").spawn().expect("true");
    let dead = gone.id();
    gone.wait().expect("wait");
    let base = Path::new("/var/tmp");
    let stale = base.join(format!(".removed-{dead}-7"));
    let alive = base.join(format!(".removed-{}-7", std::process::id()));
    for dir in [&stale, &alive] {
        std::fs::create_dir_all(dir.join("repo/dir")).expect("mkdir");
        std::fs::write(dir.join("repo/dir/file"), "x").expect("write");
    }
    let root = one_scenario_file("containment/writable_set.yaml");
    let run = certify(&["--scenarios", root.path().to_str().expect("utf8")], &[]);
    let (kept, swept) = (alive.exists(), !stale.exists());
    let _ = std::fs::remove_dir_all(&alive);
    let _ = std::fs::remove_dir_all(&stale);
    assert!(run.report.cases.len() > 1, "{}", run.why());
    assert!(
        run.report.left_in_shared_places.is_empty(),
        "tidying is not a leftover: {}",
        run.why()
    );
    assert!(swept, "the dead run's world is still there");
    assert!(kept, "a live process's world was removed");
}

/// A runner that stages in the `$TMPDIR` its adapter inherited from certify (a directory every
/// user's programs share, outside `/tmp`) and leaves a staging root every user can write there:
/// the look at the shared places reads that `$TMPDIR` too, as root and as a user.
#[test]
fn a_staging_root_left_in_the_tmpdir_certify_was_given_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let root = one_scenario_file("hardening/survivors.yaml");
    // Outside the watched places, below directories every user may search: /srv as root, the
    // home directory (0755 on the CI host) as a user.
    let parent = if is_root() {
        PathBuf::from("/srv")
    } else {
        PathBuf::from(std::env::var_os("HOME").expect("HOME"))
    };
    let tmpdir = tempfile::Builder::new()
        .prefix("shared-tmp-")
        .tempdir_in(&parent)
        .expect("a shared temporary directory");
    std::fs::set_permissions(tmpdir.path(), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod");
    let place = tmpdir.path().to_str().expect("utf8");
    let prefix = format!("leaky-tmpdir-{}", std::process::id());
    let run = certify_with(
        &["--scenarios", root.path().to_str().expect("utf8")],
        &backend("leaky_leftovers_backend.py"),
        &[
            ("TMPDIR", place),
            ("LEAKY_STAGE_PREFIX", prefix.as_str()),
            ("LEAKY_STAGE_PLACE", place),
            ("LEAKY_STAGE_MODE", "0777"),
        ],
    );
    let staged = std::fs::read_dir(tmpdir.path())
        .expect("the directory")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .count();
    assert!(staged > 0, "the fixture staged nothing: {}", run.why());
    let left = &run.report.left_in_shared_places;
    assert!(!left.is_empty(), "{}", run.why());
    for entry in left {
        assert!(
            entry.starts_with(&format!("{place}/{prefix}."))
                && entry.contains("(a directory others can write, owner uid "),
            "{entry}"
        );
    }
    assert_eq!(run.report.verdict, Verdict::NotCertified);
}
