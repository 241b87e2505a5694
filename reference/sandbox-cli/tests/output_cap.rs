//! `sandboxctl run`'s output cap, measured: a payload printing 128 MiB leaves sandboxctl a few
//! tens of MiB resident (its peak RSS, from `getrusage` of its children: this file's tests start
//! no other large child), the result says how much was dropped, and a cap that is not a size is
//! a usage error before anything runs.

use std::process::Command;

use nix::sys::resource::{UsageWho, getrusage};
use sandbox_test_support::{facts, scratch_dir};

const SANDBOXCTL: &str = env!("CARGO_BIN_EXE_sandboxctl");

/// What sandboxctl may hold at most for 128 MiB printed (it kept about 1 GiB before the cap).
const RSS_LIMIT_KIB: i64 = 48 * 1024;

fn workspace() -> tempfile::TempDir {
    scratch_dir("sandboxctl-cap-")
}

#[test]
fn a_payload_printing_128_mib_leaves_sandboxctl_small_and_the_result_says_what_was_dropped() {
    let ws = workspace();
    for backend in ["bwrap", "landlock"] {
        let out = Command::new(SANDBOXCTL)
            .env("SANDBOX_PROBE_CACHE", "off")
            .args(["run", "--mode", "workspace-write", "--backend", backend])
            .arg("--workspace")
            .arg(ws.path())
            .args([
                "--",
                "bash",
                "-c",
                "head -c 134217728 /dev/zero | tr '\\0' a; head -c 8388608 /dev/zero | tr '\\0' b >&2",
            ])
            .output()
            .expect("run sandboxctl");
        let peak = getrusage(UsageWho::RUSAGE_CHILDREN)
            .expect("getrusage")
            .max_rss();
        let facts = facts(backend, &out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{backend}: {}",
            facts["classification"]
        );
        assert!(
            peak < RSS_LIMIT_KIB,
            "{backend}: sandboxctl peaked at {peak} KiB for 128 MiB printed"
        );
        let cap = 4 * 1024 * 1024;
        assert_eq!(
            facts["stdout"].as_str().map(str::len),
            Some(cap),
            "{backend}"
        );
        assert_eq!(
            facts["stderr"].as_str().map(str::len),
            Some(cap),
            "{backend}"
        );
        assert_eq!(
            facts["dropped"]["stdout"],
            134_217_728 - cap as u64,
            "{backend}: {}",
            facts["dropped"]
        );
        assert_eq!(
            facts["dropped"]["stderr"],
            8_388_608 - cap as u64,
            "{backend}"
        );
        eprintln!("{backend}: sandboxctl peak RSS {peak} KiB for 136 MiB printed");
    }
}

#[test]
fn a_configured_cap_is_kept_and_a_small_output_has_no_dropped_field() {
    let ws = workspace();
    let run = |cap: &str, script: &str| {
        let out = Command::new(SANDBOXCTL)
            .env("SANDBOX_PROBE_CACHE", "off")
            .args(["run", "--mode", "read-only", "--output-cap", cap])
            .arg("--workspace")
            .arg(ws.path())
            .args(["--", "bash", "-c", script])
            .output()
            .expect("run sandboxctl");
        facts(cap, &out)
    };
    let facts = run("4096", "head -c 10000 /dev/zero | tr '\\0' a");
    assert_eq!(facts["stdout"].as_str().map(str::len), Some(4096));
    assert_eq!(facts["dropped"]["stdout"], 10000 - 4096);
    assert_eq!(facts["dropped"]["stderr"], 0);
    let facts = run("5MiB", "echo small");
    assert_eq!(facts["stdout"], "small\n");
    assert!(facts.get("dropped").is_none(), "{facts}");
}

#[test]
fn an_output_cap_that_is_not_a_size_is_a_usage_error_and_nothing_runs() {
    let ws = workspace();
    let canary = ws.path().join("canary");
    for bad in ["lots", "-1", "1.5MiB", ""] {
        let out = Command::new(SANDBOXCTL)
            .env("SANDBOX_PROBE_CACHE", "off")
            .args(["run", "--mode", "workspace-write"])
            .arg(format!("--output-cap={bad}"))
            .arg("--workspace")
            .arg(ws.path())
            .args(["--", "bash", "-c", "echo ran > canary"])
            .output()
            .expect("run sandboxctl");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(
            stderr.contains("OUTPUT_CAP_NOT_A_SIZE"),
            "{bad:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{bad:?}");
        assert!(!canary.exists(), "{bad:?}: the command ran");
    }
}
