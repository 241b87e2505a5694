//! The output cap: a launch keeps at most `output_cap` bytes of each stream (the head), says how
//! much more there was, never holds the rest, and a cap never hides a denial from the classifier:
//! with a fake denial signature on plain bash, and with the real bwrap and Landlock backends.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use sandbox::{Classification, ConfinedArgv, ConfinedMode, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, Dropped, LaunchOptions, parse_size};
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_test_support::scratch_dir;

fn bash(script: &str, denial: &[&str]) -> ConfinedArgv {
    ConfinedArgv {
        denial_signatures: denial.iter().map(|s| (*s).to_owned()).collect(),
        ..ConfinedArgv::unconfined(vec!["bash".into(), "-c".into(), OsString::from(script)])
    }
}

fn capped(cap: usize) -> LaunchOptions {
    let mut options = LaunchOptions::in_dir("/");
    options.output_cap = cap;
    options
}

#[test]
fn each_stream_keeps_its_head_up_to_the_cap_and_counts_the_rest() {
    let done = launch::run(
        &bash(
            "printf 'first line\\n'; head -c 3000000 /dev/zero | tr '\\0' a; printf 'E:'>&2; head -c 2000000 /dev/zero | tr '\\0' b >&2",
            &[],
        ),
        &capped(1 << 20),
    );
    assert_eq!(done.exit_code(), Some(0));
    assert_eq!(done.stdout.len(), 1 << 20);
    assert!(
        done.stdout.starts_with(b"first line\naaa"),
        "the head is kept"
    );
    assert_eq!(done.stderr.len(), 1 << 20);
    assert!(done.stderr.starts_with(b"E:bbb"));
    assert_eq!(
        done.dropped,
        Dropped {
            stdout: 3_000_011 - (1 << 20),
            stderr: 2_000_002 - (1 << 20),
        }
    );
    assert!(matches!(done.classification, Classification::Ordinary));
}

#[test]
fn nothing_is_dropped_under_the_cap_and_the_default_is_a_few_mib() {
    let done = launch::run(
        &bash("echo out; echo err >&2", &[]),
        &LaunchOptions::in_dir("/"),
    );
    assert_eq!(done.stdout, b"out\n");
    assert_eq!(done.stderr, b"err\n");
    assert!(!done.dropped.any());
    assert_eq!(LaunchOptions::in_dir("/").output_cap, 4 << 20);
}

#[test]
fn a_denial_after_the_cap_still_classifies_as_denied() {
    // A long stderr first, then the denial on a line of its own, on a line that straddles the
    // cap, and deep inside one huge line.
    for (name, script) in [
        (
            "own line",
            "head -c 3000000 /dev/zero | tr '\\0' x >&2; echo >&2; echo 'bash: /f: Read-only file system' >&2",
        ),
        (
            "straddling",
            "head -c 1048570 /dev/zero | tr '\\0' x >&2; echo 'bash: /f: Read-only file system' >&2",
        ),
        (
            "deep in one line",
            "head -c 3000000 /dev/zero | tr '\\0' x >&2; echo ' READ-ONLY FILE SYSTEM' >&2; head -c 100000 /dev/zero >&2",
        ),
    ] {
        let done = launch::run(&bash(script, &["Read-only file system"]), &capped(1 << 20));
        match &done.classification {
            Classification::Denied { line } => {
                assert!(
                    line.to_ascii_lowercase().contains("read-only file system"),
                    "{name}: {line:?}"
                );
                assert!(line.len() <= launch::EVIDENCE_MAX, "{name}: {}", line.len());
            }
            other => panic!("{name}: a denial beyond the cap was hidden: {other:?}"),
        }
        assert!(done.dropped.stderr > 0, "{name}");
        assert_eq!(done.stderr.len(), 1 << 20, "{name}");
    }
    // No signature anywhere: ordinary, however long.
    let done = launch::run(
        &bash(
            "head -c 3000000 /dev/zero | tr '\\0' x >&2",
            &["Read-only file system"],
        ),
        &capped(1 << 20),
    );
    assert!(matches!(done.classification, Classification::Ordinary));
}

#[test]
fn a_real_denial_late_in_a_flood_is_denied_on_every_backend() {
    let ws = scratch_dir("output-cap-");
    let target = ws.path().join("denied.txt");
    for backend in [Backend::Bwrap, Backend::Landlock] {
        let provider = LocalProvider::new(LocalConfig::only(backend));
        let policy = ProviderPolicy::new(ConfinedMode::ReadOnly, ws.path());
        let script = format!(
            "head -c 6000000 /dev/zero | tr '\\0' y >&2; echo >&2; echo x > {}",
            target.display()
        );
        let argv: Vec<OsString> = vec!["bash".into(), "-c".into(), script.into()];
        let confined = provider.confine(&argv, &policy).expect("confine");
        let done = launch::run(&confined, &LaunchOptions::in_dir(ws.path()));
        assert!(
            matches!(done.classification, Classification::Denied { .. }),
            "{backend}: {:?}",
            done.classification
        );
        assert!(done.dropped.stderr > 0, "{backend}");
        assert!(!target.exists(), "{backend}: the write landed");
    }
}

#[test]
fn a_flood_without_pause_neither_grows_nor_outruns_the_timeout() {
    // `cat /dev/zero` writes as fast as the pipe drains: the supervisor still sees its deadline.
    let mut options = capped(64 * 1024);
    options.timeout = Some(Duration::from_millis(500));
    let started = Instant::now();
    let done = launch::run(&bash("cat /dev/zero; cat /dev/zero >&2", &[]), &options);
    assert!(done.timed_out);
    // A hang guard (the flood never ends by itself), not a speed test.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(done.stdout.len(), 64 * 1024);
    assert!(done.dropped.stdout > 0);
}

#[test]
fn sizes_parse_and_anything_else_is_refused_with_its_code() {
    for (text, want) in [
        ("4096", 4096),
        ("0", 0),
        ("5MiB", 5 << 20),
        ("512KiB", 512 << 10),
        ("2 mib", 2 << 20),
        ("1G", 1 << 30),
        ("10B", 10),
    ] {
        assert_eq!(parse_size(text), Ok(want), "{text}");
    }
    for text in [
        "lots",
        "-1",
        "",
        "1.5MiB",
        "5MB",
        "MiB",
        "99999999999999999999",
        "17179869184GiB",
    ] {
        let err = parse_size(text).expect_err(text);
        assert!(
            err.to_string().starts_with("OUTPUT_CAP_NOT_A_SIZE: "),
            "{err}"
        );
    }
}
