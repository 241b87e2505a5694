//! `sandboxctl` as a person uses it, on this host's real bwrap and Landlock: the JSON facts and
//! what is on disk afterwards.

use std::path::{Path, PathBuf};
use std::process::Command;

use sandbox::{ClassEnforcement, EnforcementClass, SandboxEnforcement, SandboxMode};
use sandbox_cli::{RanFacts, RunFacts};
use sandbox_test_support::{Dirs, euid, facts, facts_or_null, is_root, scratch_dir};
use serde_json::Value;

const SANDBOXCTL: &str = env!("CARGO_BIN_EXE_sandboxctl");

/// A workspace and an outside directory under /var/tmp (outside /tmp, which workspace-write may
/// write).
fn dirs() -> Dirs {
    Dirs::new("sandboxctl-test-")
}

/// `sandboxctl run`'s facts, typed: a field renamed in `RunFacts` fails to compile here.
fn typed(facts: &Value) -> RunFacts {
    serde_json::from_value(facts.clone())
        .unwrap_or_else(|e| panic!("not sandboxctl's facts ({e}): {facts:?}"))
}

/// The facts of a command that went to its runner.
fn ran(facts: &RunFacts) -> &RanFacts {
    match facts {
        RunFacts::Ran(ran) => ran,
        other => panic!("the command never went to a runner: {other:?}"),
    }
}

fn run(args: &[&str], ws: &Path, script: &str) -> (Option<i32>, RunFacts) {
    let out = Command::new(SANDBOXCTL)
        .arg("run")
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "bash", "-c", script])
        .output()
        .expect("run sandboxctl");
    (
        out.status.code(),
        typed(&facts(format_args!("sandboxctl run {args:?}"), &out)),
    )
}

#[test]
fn read_only_denies_a_workspace_write_and_the_file_stays_absent() {
    let d = dirs();
    let target = d.ws.join("f");
    let (code, facts) = run(
        &["--mode", "read-only"],
        &d.ws,
        &format!("printf x > {}", target.display()),
    );
    assert!(!target.exists());
    assert_ne!(code, Some(0));
    assert!(ran(&facts).denied, "{facts:?}");
    assert!(!ran(&facts).runner_failed);
    assert_eq!(
        ran(&facts).marker.as_deref(),
        Some("[sandbox: file access denied under read-only mode]")
    );
    assert_eq!(ran(&facts).mode, SandboxMode::ReadOnly);
}

#[test]
fn workspace_write_lands_inside_and_denies_outside_on_each_backend() {
    for backend in ["bwrap", "landlock"] {
        let d = dirs();
        let (inside, outside) = (d.ws.join("in"), d.outside.join("out"));
        let (code, facts) = run(
            &["--mode", "workspace-write", "--backend", backend],
            &d.ws,
            &format!("printf x > {}", inside.display()),
        );
        assert_eq!(code, Some(0), "{facts:?}");
        assert_eq!(std::fs::read_to_string(&inside).expect("inside"), "x");
        assert_eq!(ran(&facts).backend, backend);
        // Landlock governs no metadata change at any ABI, and says so.
        let enforcement = if backend == "landlock" {
            SandboxEnforcement::Partial
        } else {
            SandboxEnforcement::Full
        };
        assert_eq!(ran(&facts).enforcement, enforcement, "{facts:?}");
        assert!(!ran(&facts).denied);

        let (code, facts) = run(
            &["--mode", "workspace-write", "--backend", backend],
            &d.ws,
            &format!("printf x > {}", outside.display()),
        );
        assert_ne!(code, Some(0));
        assert!(!outside.exists(), "{backend} let a write escape");
        assert!(ran(&facts).denied, "{facts:?}");
        assert_eq!(ran(&facts).backend, backend);
    }
}

#[test]
fn a_capped_launcher_reports_partial() {
    let d = dirs();
    let (_, facts) = run(
        &[
            "--mode",
            "read-only",
            "--backend",
            "landlock",
            "--abi-cap",
            "2",
        ],
        &d.ws,
        "true",
    );
    assert_eq!(
        ran(&facts).enforcement,
        SandboxEnforcement::Partial,
        "{facts:?}"
    );
}

/// Below ABI 6 signals are not scoped, but the launcher's PID namespace keeps the caller (whose
/// check after the call judges what was staged) out of the payload's reach: the protected class
/// names nothing of it, and a capped launcher's top-level `.git/config` stays unwritable.
#[test]
fn a_launcher_capped_below_signal_scoping_still_protects_and_hides_its_caller() {
    let d = dirs();
    std::fs::create_dir_all(d.ws.join(".git")).expect(".git");
    std::fs::write(d.ws.join(".git/config"), "[core]\n").expect("config");
    let write = "printf '[core]\\n\\tfsmonitor = x\\n' > .git/config";
    let (_, capped) = run(
        &[
            "--mode",
            "workspace-write",
            "--backend",
            "landlock",
            "--abi-cap",
            "5",
        ],
        &d.ws,
        write,
    );
    // What it names ungoverned is what a config names outside its git directory, no more: not
    // the caller, and no protected path left uncovered.
    assert_eq!(
        ran(&capped)
            .classes
            .get(EnforcementClass::Protected)
            .ungoverned,
        vec![sandbox_local::GIT_NAMED_SURFACE_GAP.to_owned()],
        "{capped:?}"
    );
    // Refused while the call runs, not written and put back after the call.
    let said = ran(&capped).stderr.as_str();
    assert!(!said.contains("reverted after the call"), "{capped:?}");
    assert!(ran(&capped).denied, "{capped:?}");
    assert_eq!(
        std::fs::read_to_string(d.ws.join(".git/config")).expect("config"),
        "[core]\n"
    );
}

#[test]
fn danger_full_access_never_reaches_a_provider() {
    let d = dirs();
    let target = d.outside.join("free");
    let (code, facts) = run(
        &[
            "--mode",
            "danger-full-access",
            "--bwrap",
            "/nonexistent/bwrap",
        ],
        &d.ws,
        &format!("printf x > {}", target.display()),
    );
    assert_eq!(code, Some(0));
    assert_eq!(ran(&facts).backend, "none");
    assert!(target.exists());
}

#[test]
fn an_unknown_mode_is_refused_before_anything_runs() {
    let d = dirs();
    let canary = d.ws.join("canary");
    let out = Command::new(SANDBOXCTL)
        .args(["run", "--mode", "full-access", "--workspace"])
        .arg(&d.ws)
        .args(["--", "bash", "-c"])
        .arg(format!("printf x > {}", canary.display()))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown sandbox mode \"full-access\"")
            && stderr.contains("read-only, workspace-write, danger-full-access"),
        "{stderr}"
    );
    assert!(!canary.exists());
}

#[test]
fn a_signature_without_a_runner_command_is_bad_configuration() {
    let out = Command::new(SANDBOXCTL)
        .args([
            "run",
            "--mode",
            "read-only",
            "--runner-failure-signature",
            "x",
            "--",
            "true",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --runner-command"));
}

#[test]
fn probe_reports_both_linux_backends_usable_here() {
    let out = Command::new(SANDBOXCTL)
        .arg("probe")
        .output()
        .expect("probe");
    let report = facts("sandboxctl probe", &out);
    let backend = |name: &str| {
        report["backends"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["backend"] == name))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(backend("bwrap")["usable"], true, "{report}");
    assert!(
        backend("bwrap")["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("bubblewrap"))
    );
    assert_eq!(backend("landlock")["usable"], true, "{report}");
    assert!(
        backend("landlock")["kernel_landlock_abi"]
            .as_u64()
            .is_some_and(|abi| abi >= 3)
    );
    assert_eq!(backend("seatbelt")["usable"], cfg!(target_os = "macos"));
    assert_eq!(report["selected"]["backend"], "bwrap");
}

/// `sandboxctl run` through `bash -c` so the shell can hold descriptors and set the environment
/// exactly as a person's shell would; returns the exit code and the JSON facts.
fn shell_run(prefix: &str, args: &str, script: &str) -> (Option<i32>, RunFacts) {
    let line = format!("{prefix} '{SANDBOXCTL}' run {args} -- bash -c '{script}'");
    let out = Command::new("bash")
        .args(["-c", &line])
        .output()
        .expect("run sandboxctl through bash");
    (out.status.code(), typed(&facts(&line, &out)))
}

#[test]
fn a_descriptor_held_by_the_callers_shell_never_reaches_the_payload() {
    for backend in ["bwrap", "landlock"] {
        for mode in ["read-only", "workspace-write"] {
            let d = dirs();
            let held = d.outside.join("held");
            std::fs::write(&held, "before").expect("held");
            let (code, facts) = shell_run(
                &format!("exec 7>>'{}';", held.display()),
                &format!(
                    "--mode {mode} --backend {backend} --workspace '{}'",
                    d.ws.display()
                ),
                "printf x >&7; printf y >> /proc/self/fd/7; : > /proc/self/fd/7; test -e /proc/self/fd/7 && echo fd7-visible; echo done",
            );
            assert_eq!(
                std::fs::read_to_string(&held).expect("held"),
                "before",
                "{backend} {mode}: the payload wrote through the inherited descriptor: {facts:?}"
            );
            assert_eq!(ran(&facts).stdout, "done\n", "{backend} {mode}: {facts:?}");
            assert_eq!(code, Some(0), "{backend} {mode}: {facts:?}");
        }
    }
}

#[test]
fn root_escapes_write_nothing_outside_even_in_read_only() {
    // As root these are the ways out of a plain bwrap; as a user they fail anyway. Either way the
    // host must be unchanged and the call must still report that the payload ran. Host kernel
    // settings are probed by opening them for append and writing nothing (`: >> f`).
    for backend in ["bwrap", "landlock"] {
        let d = dirs();
        let out = d.outside.display().to_string();
        let script = format!(
            "mount -o remount,rw / 2>/dev/null; printf x > {out}/remount; \
             printf x > /proc/$PPID/root{out}/ppid_root; printf x > /proc/1/root{out}/init_root; \
             for f in /proc/$PPID/fd/* /proc/1/fd/*; do printf junk > \"$f\"; done 2>/dev/null; \
             mknod {out}/null c 1 3 2>/dev/null; unshare -rm true 2>/dev/null && echo unshared; \
             for f in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches /proc/sysrq-trigger; do \
             {{ : >> $f; }} 2>/dev/null && echo \"writable $f\"; done; \
             grep CapEff /proc/self/status; exit 3"
        );
        let (code, facts) = run(
            &["--mode", "read-only", "--backend", backend],
            &d.ws,
            &script,
        );
        let entries: Vec<_> = std::fs::read_dir(&d.outside)
            .expect("outside")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(entries.is_empty(), "{backend}: landed outside: {entries:?}");
        assert_eq!(
            code,
            Some(3),
            "{backend}: the payload ran and exited 3: {facts:?}"
        );
        assert_eq!(ran(&facts).exit_code, Some(3), "{backend}: {facts:?}");
        // Its own stdout may carry the junk it wrote through /proc/1/fd/1 (inside the sandbox,
        // that is its own output); the capability line must be all zero.
        let stdout = ran(&facts).stdout.as_str();
        assert!(
            !stdout.contains("writable") && !stdout.contains("unshared"),
            "{backend}: host kernel settings or namespaces within reach: {facts:?}"
        );
        assert!(
            stdout.ends_with("CapEff:\t0000000000000000\n"),
            "{backend}: the payload holds capabilities: {facts:?}"
        );
    }
}

#[test]
fn a_setsid_daemon_dies_with_the_call_and_with_its_timeout() {
    for backend in ["bwrap", "landlock"] {
        // The writers wait until after the call ended: by itself, or by its 1 s timeout.
        for (extra, delay, tail) in [("", 0.5, ""), ("--timeout 1", 1.5, "; sleep 30")] {
            let d = dirs();
            let script = format!(
                "setsid sh -c \"sleep {delay}; echo late > late\" & ( (sleep {delay}; echo late > late2) & ) {tail}"
            );
            let mut args = vec!["--mode", "workspace-write", "--backend", backend];
            args.extend(extra.split_whitespace());
            let (_code, facts) = run(&args, &d.ws, &script);
            std::thread::sleep(std::time::Duration::from_millis(1500));
            assert!(
                !d.ws.join("late").exists() && !d.ws.join("late2").exists(),
                "{backend} {extra}: a process outlived the call: {facts:?}"
            );
        }
    }
}

#[test]
fn bad_roots_are_refused_before_anything_runs_each_with_its_own_code() {
    let d = dirs();
    let file = d.outside.join("a-file");
    std::fs::write(&file, "x").expect("file");
    let canary = d.ws.join("canary");
    let ws = d.ws.display().to_string();
    let cases = [
        (
            "",
            format!("--workspace '{}'", d.ws.join("gone").display()),
            "WORKSPACE_MISSING",
        ),
        (
            "",
            format!("--workspace '{}'", file.display()),
            "WORKSPACE_NOT_A_DIRECTORY",
        ),
        ("", "--workspace /".to_owned(), "WORKSPACE_TOO_BROAD"),
        ("", "--workspace /etc".to_owned(), "WORKSPACE_TOO_BROAD"),
        (
            "TMPDIR=/",
            format!("--workspace '{ws}'"),
            "TEMP_DIR_TOO_BROAD",
        ),
        (
            "TMPDIR=/etc",
            format!("--workspace '{ws}'"),
            "TEMP_DIR_TOO_BROAD",
        ),
        (
            &format!("TMPDIR='{}'", d.ws.parent().expect("parent").display()),
            format!("--workspace '{ws}'"),
            "TEMP_DIR_TOO_BROAD",
        ),
        (
            &format!("TMPDIR='{}'", file.display()),
            format!("--workspace '{ws}'"),
            "TEMP_DIR_NOT_A_DIRECTORY",
        ),
    ];
    // A temp dir through a link in /tmp that leads to a system directory, and the home directory.
    let link = tempfile::Builder::new()
        .prefix("sandboxctl-link-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    std::os::unix::fs::symlink("/var/lib", link.path().join("out")).expect("link");
    let mut cases: Vec<(String, String, &str)> = cases
        .iter()
        .map(|(e, a, c)| ((*e).to_owned(), a.clone(), *c))
        .collect();
    cases.push((
        format!("TMPDIR='{}'", link.path().join("out").display()),
        format!("--workspace '{ws}'"),
        "TEMP_DIR_TOO_BROAD",
    ));
    if let Some(home) = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .filter(|h| h.is_dir())
    {
        cases.push((
            String::new(),
            format!("--workspace '{}'", home.display()),
            "WORKSPACE_TOO_BROAD",
        ));
        cases.push((
            format!("TMPDIR='{}'", home.display()),
            format!("--workspace '{ws}'"),
            "TEMP_DIR_TOO_BROAD",
        ));
    }
    for backend in ["bwrap", "landlock"] {
        for (env, args, expected) in &cases {
            let (code, facts) = shell_run(
                env,
                &format!("--mode workspace-write --backend {backend} {args}"),
                &format!("printf ran > {}", canary.display()),
            );
            assert_eq!(
                facts.error(),
                Some(*expected),
                "{backend} {env} {args}: {facts:?}"
            );
            assert!(
                facts.detail().is_some_and(|d| d.starts_with(expected)),
                "{backend} {env} {args}: {facts:?}"
            );
            assert_eq!(code, Some(2), "{backend} {env} {args}: {facts:?}");
            assert!(!canary.exists(), "{backend} {env} {args}: it ran");
        }
    }
}

#[test]
fn a_denial_is_reported_whatever_the_exit_status() {
    // The RFC: a kernel denial is a result fact independent of exit status.
    for backend in ["bwrap", "landlock"] {
        let d = dirs();
        let out = d.outside.display().to_string();
        // bwrap reports a signal death as exit 128+N, the launcher dies by the same signal.
        for (script, exit) in [
            (format!("printf x > {out}/f; echo after"), Some(0)),
            (format!("printf x > {out}/f; kill -9 $$"), None),
        ] {
            let (_code, facts) = run(
                &["--mode", "read-only", "--backend", backend],
                &d.ws,
                &script,
            );
            assert!(ran(&facts).denied, "{backend} {script}: {facts:?}");
            assert_eq!(
                ran(&facts).marker.as_deref(),
                Some("[sandbox: file access denied under read-only mode]"),
                "{backend} {script}: {facts:?}"
            );
            if exit.is_some() {
                assert_eq!(ran(&facts).exit_code, Some(0), "{backend}: {facts:?}");
            } else {
                let killed = ran(&facts).signal == Some(9) || ran(&facts).exit_code == Some(137);
                assert!(killed, "{backend}: {facts:?}");
            }
            assert!(!d.outside.join("f").exists(), "{backend}: it landed");
        }
    }
}

/// A launcher that counts its invocations in `dir/runs`, fails like a broken runner while
/// `dir/fail` exists, and is otherwise the real one.
fn counting_launcher(dir: &Path) -> PathBuf {
    let real = Path::new(SANDBOXCTL).with_file_name("landlock-run");
    let wrapper = dir.join("landlock-run");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{runs}'\nif [ -e '{fail}' ]; then echo 'landlock-run: simulated failure' >&2; exit 125; fi\nexec '{real}' \"$@\"\n",
            runs = dir.join("runs").display(),
            fail = dir.join("fail").display(),
            real = real.display()
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    wrapper
}

/// A world and a tools directory beside it holding the probe cache (not made yet) and the counting
/// launcher. Outside /tmp: a probe cache where any workspace-write payload may write is refused.
fn cache_world() -> (Dirs, tempfile::TempDir, PathBuf, PathBuf) {
    let d = dirs();
    let tools = scratch_dir("sandboxctl-tools-");
    let cache = tools.path().join("cache");
    let launcher = counting_launcher(tools.path());
    (d, tools, cache, launcher)
}

fn cached_run(cache: &Path, launcher: &Path, ws: &Path) -> (Option<i32>, Value) {
    let out = Command::new(SANDBOXCTL)
        .env("SANDBOX_PROBE_CACHE", cache)
        .args([
            "run",
            "--mode",
            "workspace-write",
            "--backend",
            "landlock",
            "--launcher",
        ])
        .arg(launcher)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "bash", "-c", "printf ran > canary"])
        .output()
        .expect("run sandboxctl");
    (out.status.code(), facts_or_null(&out))
}

fn launcher_runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

#[test]
fn later_invocations_share_the_probe_verdict_and_a_runner_failure_drops_it() {
    use std::os::unix::fs::PermissionsExt;
    let (d, tools, cache, launcher) = cache_world();

    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(0), "{facts:?}");
    let first = launcher_runs(tools.path());
    assert!(first >= 2, "the first call probes, then runs: {first}");
    // Private: only its user may enter the directory or read an entry.
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&cache), 0o700);
    let stored = entries(&cache);
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(mode(&stored[0]), 0o600);

    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(0), "{facts:?}");
    assert_eq!(
        launcher_runs(tools.path()),
        first + 1,
        "the second call probed again"
    );

    // A corrupt entry means probing again, and the entry is rewritten.
    std::fs::write(&stored[0], "{ not json").expect("corrupt");
    let before = launcher_runs(tools.path());
    let (code, _) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(0));
    assert_eq!(
        launcher_runs(tools.path()),
        before + first,
        "a corrupt entry was trusted"
    );

    // A cache directory others may write, named explicitly, is bad input: nothing runs (not
    // even a probe) and nothing in it is read or rewritten.
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let before = launcher_runs(tools.path());
    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(2), "{facts:?}");
    assert_eq!(
        typed(&facts).error(),
        Some("STATE_DIR_WRITABLE_BY_OTHERS"),
        "{facts}"
    );
    assert_eq!(
        launcher_runs(tools.path()),
        before,
        "an open cache was used"
    );
    assert_eq!(mode(&cache), 0o777, "a refused cache was written");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).expect("chmod");

    // A planted entry with the right key but another program (one that confines nothing) is
    // not trusted: the runner is always the one located now.
    let entry = entries(&cache).into_iter().next().expect("an entry");
    let mut planted: Value =
        serde_json::from_str(&std::fs::read_to_string(&entry).expect("entry")).expect("json");
    planted["program"] = Value::from("/bin/env");
    std::fs::write(&entry, planted.to_string()).expect("plant");
    let before = launcher_runs(tools.path());
    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(0), "{facts:?}");
    assert_eq!(
        launcher_runs(tools.path()),
        before + first,
        "a planted program was trusted: {facts:?}"
    );

    // The cached runner fails: the call fails closed, and the entry is gone.
    std::fs::remove_file(d.ws.join("canary")).expect("rm canary");
    std::fs::write(tools.path().join("fail"), "").expect("fail flag");
    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(
        typed(&facts).error(),
        Some("SANDBOX_UNAVAILABLE"),
        "{facts}"
    );
    assert_eq!(code, Some(125));
    assert!(!d.ws.join("canary").exists(), "it ran");
    assert!(entries(&cache).is_empty(), "the failed verdict was kept");
}

#[test]
fn a_stale_symlinked_or_foreign_owned_entry_is_ignored_and_a_wrong_verdict_fails_closed() {
    use std::os::unix::fs::PermissionsExt;
    let (d, tools, cache, launcher) = cache_world();
    let canary = d.ws.join("canary");

    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(0), "{facts:?}");
    let first = launcher_runs(tools.path());
    assert!(first >= 2, "the first call probes, then runs: {first}");
    // Each case below must make the next call probe again (`first` launcher runs) and run.
    let probes_again = |case: &str| {
        let before = launcher_runs(tools.path());
        let (code, facts) = cached_run(&cache, &launcher, &d.ws);
        assert_eq!(code, Some(0), "{case}: {facts:?}");
        assert_eq!(
            launcher_runs(tools.path()),
            before + first,
            "{case}: the entry was trusted: {facts:?}"
        );
    };
    let only_entry = || {
        let all = entries(&cache);
        assert_eq!(all.len(), 1, "{all:?}");
        all.into_iter().next().expect("an entry")
    };
    let (code, _) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(0));
    assert_eq!(launcher_runs(tools.path()), first + 1, "a warm call probed");

    // Stale: the entry was written for another key (the file name is only a hash of the key).
    let entry = only_entry();
    let mut stale: Value =
        serde_json::from_str(&std::fs::read_to_string(&entry).expect("entry")).expect("json");
    stale["key"] = Value::from(format!(
        "{}|another kernel",
        stale["key"].as_str().unwrap_or("")
    ));
    std::fs::write(&entry, stale.to_string()).expect("stale");
    probes_again("an entry with another key");

    // Stale: the runner binary changed since the verdict (its identity is in the key).
    let script = std::fs::read_to_string(&launcher).expect("launcher");
    std::fs::write(&launcher, format!("{script}# rebuilt\n")).expect("rebuild");
    probes_again("a changed runner");
    // The verdict for the old runner can never match again: it is gone, not left behind.
    let entry = only_entry();

    // An entry others may write, or a symlink to a valid entry elsewhere, is not trusted.
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    probes_again("a world-writable entry");
    let elsewhere = tools.path().join("planted.json");
    std::fs::copy(&entry, &elsewhere).expect("copy");
    std::fs::remove_file(&entry).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, &entry).expect("symlink");
    probes_again("a symlinked entry");
    assert!(
        !std::fs::symlink_metadata(&entry)
            .expect("entry")
            .file_type()
            .is_symlink(),
        "the store replaced the link with a file"
    );

    // Foreign-owned: only root can give a file or a directory to another user.
    if is_root() {
        std::os::unix::fs::chown(&entry, Some(65534), None).expect("chown entry");
        probes_again("an entry another user owns");
        std::os::unix::fs::chown(&cache, Some(65534), None).expect("chown dir");
        // Named explicitly, a directory another user owns is refused before anything runs.
        let before = launcher_runs(tools.path());
        let (code, facts) = cached_run(&cache, &launcher, &d.ws);
        assert_eq!(code, Some(2), "{facts:?}");
        assert_eq!(
            typed(&facts).error(),
            Some("STATE_DIR_WRITABLE_BY_OTHERS"),
            "{facts}"
        );
        assert_eq!(
            launcher_runs(tools.path()),
            before,
            "a foreign cache was used"
        );
        // Hand it back for the rest of the test.
        std::os::unix::fs::chown(&cache, Some(0), None).expect("chown back");
    } else {
        eprintln!(
            "foreign-owned variant skipped: only root can give a file to another user (uid {})",
            euid()
        );
    }

    // A wrong cached verdict: the runner the cache calls usable now fails. The call fails
    // closed, the payload never ran, and the entry is dropped.
    let (code, _) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(code, Some(0));
    assert!(entry.is_file(), "a usable verdict is cached");
    std::fs::remove_file(&canary).expect("rm canary");
    std::fs::write(tools.path().join("fail"), "").expect("fail flag");
    let before = launcher_runs(tools.path());
    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(
        launcher_runs(tools.path()),
        before + 1,
        "the cached verdict was used (no probe): {facts:?}"
    );
    let failed = typed(&facts);
    assert_eq!(failed.error(), Some("SANDBOX_UNAVAILABLE"), "{facts}");
    assert_eq!(failed.runner_failed(), Some(true), "{facts}");
    assert!(
        failed
            .detail()
            .is_some_and(|d| d.contains("landlock-run: simulated failure")),
        "the runner's own words: {facts}"
    );
    assert_eq!(code, Some(125));
    assert!(!canary.exists(), "the payload ran");
    assert!(!entry.exists(), "the wrong verdict was kept");
    // The next call probes again, fails closed at the probe, and caches nothing.
    let (code, facts) = cached_run(&cache, &launcher, &d.ws);
    assert_eq!(
        typed(&facts).error(),
        Some("SANDBOX_UNAVAILABLE"),
        "{facts}"
    );
    assert_eq!(code, Some(125));
    assert!(!canary.exists(), "the payload ran");
    assert!(!entry.exists(), "an unusable verdict was cached");
}

#[test]
fn writable_root_and_protect_widen_and_narrow_what_a_command_may_write() {
    for backend in ["bwrap", "landlock"] {
        let d = dirs();
        let extra = d.outside.join("cache");
        std::fs::create_dir(&extra).expect("extra");
        std::fs::create_dir(d.ws.join("secrets")).expect("secrets");
        let (granted, kept, plain) = (extra.join("ok"), d.ws.join("secrets/x"), d.ws.join("fine"));
        let extra_arg = extra.display().to_string();
        let (_, facts) = run(
            &[
                "--mode",
                "workspace-write",
                "--backend",
                backend,
                "--writable-root",
                &extra_arg,
                "--protect",
                "secrets",
            ],
            &d.ws,
            &format!(
                "printf a > {}; printf b > {}; printf c > {}",
                granted.display(),
                kept.display(),
                plain.display()
            ),
        );
        assert_eq!(
            std::fs::read_to_string(&granted).ok().as_deref(),
            Some("a"),
            "{backend}: {facts:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&plain).ok().as_deref(),
            Some("c"),
            "{backend}: {facts:?}"
        );
        // The launcher keeps protected paths only where it can make a mount namespace: it says
        // which, and a path it says it keeps must be kept.
        if ran(&facts)
            .classes
            .get(EnforcementClass::Protected)
            .enforcement
            != ClassEnforcement::NotGoverned
        {
            assert!(
                !kept.exists(),
                "{backend} wrote a protected path: {facts:?}"
            );
            assert!(ran(&facts).denied, "{backend}: {facts:?}");
        }
        assert!(!d.outside.join("stray").exists());
    }
}

#[test]
fn a_bad_writable_root_or_protected_path_is_refused_before_anything_runs() {
    let d = dirs();
    let marker = d.ws.join("ran");
    let script = format!("printf x > {}", marker.display());
    let (code, facts) = run(
        &[
            "--mode",
            "workspace-write",
            "--writable-root",
            "relative/dir",
        ],
        &d.ws,
        &script,
    );
    assert_eq!(code, Some(2));
    assert_eq!(facts.error(), Some("WRITABLE_ROOT_RELATIVE"), "{facts:?}");
    let out = Command::new(SANDBOXCTL)
        .args([
            "run",
            "--mode",
            "workspace-write",
            "--protect",
            "../up",
            "--workspace",
        ])
        .arg(&d.ws)
        .args(["--", "bash", "-c", &script])
        .output()
        .expect("sandboxctl");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("BAD_PROTECTED_PATH"), "{stderr}");
    assert!(!marker.exists(), "a refused call ran");
}

#[test]
fn probe_into_a_reader_that_left_is_no_panic() {
    // `sandboxctl probe | head -1` where head has gone: the read end is closed before a byte is
    // written, so the write fails with EPIPE.
    let mut child = Command::new(SANDBOXCTL)
        .arg("probe")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sandboxctl");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// `--allow-socket`: the payload (python, connecting and sending) reaches a real listener this
/// test starts outside the workspace, and the facts say `host-ipc` is partial with that socket
/// under `allowed`; without the flag the same payload is refused and the class is full; a bad
/// path is refused with its code before anything runs.
#[test]
fn allow_socket_reaches_that_listener_and_the_facts_say_so_and_a_bad_one_runs_nothing() {
    use std::io::Read;
    use std::os::unix::net::UnixListener;

    let d = dirs();
    let sock = d.outside.join("agent.sock");
    let listener = UnixListener::bind(&sock).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let connect = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); s.sendall(b\"agent\")'",
        sock.display()
    );
    for backend in ["bwrap", "landlock"] {
        let (code, facts) = run(
            &[
                "--mode",
                "read-only",
                "--backend",
                backend,
                "--allow-socket",
                sock.to_str().expect("utf-8"),
            ],
            &d.ws,
            &connect,
        );
        assert_eq!(code, Some(0), "{backend}: {facts:?}");
        let ipc = ran(&facts).classes.get(EnforcementClass::HostIpc);
        assert_eq!(
            ipc.enforcement,
            ClassEnforcement::Partial,
            "{backend}: {facts:?}"
        );
        assert_eq!(ipc.ungoverned[0], "unix-sockets", "{backend}: {facts:?}");
        assert_eq!(
            ipc.allowed,
            vec![sock.display().to_string()],
            "{backend}: {facts:?}"
        );
        // The connection the payload made before it exited is in the backlog.
        let (mut conn, _) = listener.accept().expect("the listener was reached");
        conn.set_nonblocking(false).expect("blocking");
        let mut got = String::new();
        conn.read_to_string(&mut got).expect("read");
        assert_eq!(got, "agent", "{backend}");

        let (code, facts) = run(
            &["--mode", "read-only", "--backend", backend],
            &d.ws,
            &connect,
        );
        assert_ne!(
            code,
            Some(0),
            "{backend}: connected without an allowance: {facts:?}"
        );
        assert_eq!(
            ran(&facts).classes.get(EnforcementClass::HostIpc),
            sandbox::ClassReport {
                enforcement: ClassEnforcement::Full,
                ungoverned: Vec::new(),
                allowed: Vec::new(),
            },
            "{backend}"
        );
        assert!(
            listener.accept().is_err(),
            "{backend}: reached without an allowance"
        );
    }
    let marker = d.ws.join("ran");
    let script = format!("printf x > {}", marker.display());
    let not_a_socket = d.outside.join("plain");
    std::fs::write(&not_a_socket, "x").expect("write");
    for (path, code) in [
        ("relative.sock".to_owned(), "UNIX_SOCKET_RELATIVE"),
        (
            d.outside.join("gone.sock").display().to_string(),
            "UNIX_SOCKET_MISSING",
        ),
        (
            not_a_socket.display().to_string(),
            "UNIX_SOCKET_NOT_A_SOCKET",
        ),
        (
            format!("/proc/self/root{}", sock.display()),
            "UNIX_SOCKET_NOT_GRANTABLE",
        ),
    ] {
        let (exit, facts) = run(
            &["--mode", "workspace-write", "--allow-socket", &path],
            &d.ws,
            &script,
        );
        assert_eq!(exit, Some(2), "{path}: {facts:?}");
        assert_eq!(facts.error(), Some(code), "{path}: {facts:?}");
    }
    assert!(!marker.exists(), "a refused call ran");
}
