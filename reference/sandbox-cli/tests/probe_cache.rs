//! The probe-verdict cache out of the payload's reach, tried as the issue found it: a verdict
//! edited to drop the protected binds. First the edit is shown to bite when its directory is
//! trusted (a private directory beside the workspace: the edited verdict really lets a write into
//! `.git/hooks` land). Then the same edited verdict is planted where a payload could have written
//! it (`XDG_CACHE_HOME=/tmp/...`, the workspace): the default location is refused with a warning
//! and the call probes (the hook stays unwritten, on disk), and a location named explicitly
//! (`SANDBOX_PROBE_CACHE`) is refused before anything runs.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sandbox_test_support::{facts, facts_or_null, scratch_root};
use serde_json::Value;

const SANDBOXCTL: &str = env!("CARGO_BIN_EXE_sandboxctl");

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
}

fn world() -> World {
    let (dir, root) = scratch_root("probe-cache-");
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join(".git/hooks")).expect("hooks");
    std::fs::write(ws.join(".git/config"), "[core]\n").expect("config");
    World {
        _dir: dir,
        root,
        ws,
    }
}

/// `sandboxctl run` in workspace-write on bwrap, writing a hook; `env` sets the cache location.
fn run(ws: &Path, env: &[(&str, &Path)]) -> (Output, Value) {
    let mut cmd = Command::new(SANDBOXCTL);
    cmd.env_remove("SANDBOX_PROBE_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .args(["run", "--mode", "workspace-write", "--backend", "bwrap"])
        .arg("--workspace")
        .arg(ws)
        .args([
            "--",
            "bash",
            "-c",
            "printf ran > canary; printf evil > .git/hooks/pre-commit; exit 0",
        ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("sandboxctl");
    let facts = facts_or_null(&out);
    (out, facts)
}

/// The one entry in `dir`, with its protected class rewritten to `not-governed`.
fn edit_verdict(dir: &Path) -> (String, Vec<u8>) {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("cache dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let mut entry: Value =
        serde_json::from_slice(&std::fs::read(&entries[0]).expect("entry")).expect("json");
    assert_eq!(
        entry["facts"]["classes"]["protected"]["enforcement"],
        "full"
    );
    entry["facts"]["classes"]["protected"] = serde_json::json!({ "enforcement": "not-governed" });
    let name = entries[0]
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned();
    (name, entry.to_string().into_bytes())
}

/// Plants `bytes` as `name` in `dir`, private as our own store would make it.
fn plant(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .expect("dir");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("plant");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn hook(ws: &Path) -> Option<String> {
    std::fs::read_to_string(ws.join(".git/hooks/pre-commit")).ok()
}

#[test]
fn an_edited_verdict_bites_when_trusted_and_is_never_read_where_a_payload_could_write_it() {
    let w = world();
    // A trusted cache: private, beside the workspace.
    let trusted = w.root.join("cache");
    let (out, facts) = run(&w.ws, &[("SANDBOX_PROBE_CACHE", &trusted)]);
    assert_eq!(out.status.code(), Some(0), "{facts}");
    assert_eq!(
        hook(&w.ws),
        None,
        "the hook was written under a full verdict"
    );
    let (name, edited) = edit_verdict(&trusted);
    std::fs::write(trusted.join(&name), &edited).expect("edit");
    let (out, facts) = run(&w.ws, &[("SANDBOX_PROBE_CACHE", &trusted)]);
    assert_eq!(out.status.code(), Some(0), "{facts}");
    // The edited verdict drops the protected binds (the check after the call still reverts a
    // planted hook, so the launch's own report is what shows the bite).
    assert_eq!(
        facts["classes"]["protected"]["enforcement"], "not-governed",
        "the edited verdict did not drop the binds: the attack this test guards against is not real ({facts})"
    );
    let _ = std::fs::remove_file(w.ws.join(".git/hooks/pre-commit"));

    // The same edited verdict where a payload could have put it: the default location under
    // /tmp (XDG_CACHE_HOME=/tmp/..., as in a CI container) and under the workspace.
    let tmp = tempfile::Builder::new()
        .prefix("probe-cache-")
        .tempdir_in("/tmp")
        .expect("tmp");
    for xdg in [tmp.path().to_path_buf(), w.ws.join(".cache")] {
        let probes = xdg.join("sandbox-conformance/probes");
        plant(&probes, &name, &edited);
        std::fs::remove_file(w.ws.join("canary")).ok();
        let (out, facts) = run(&w.ws, &[("XDG_CACHE_HOME", &xdg)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{xdg:?}: {facts} {stderr}");
        assert!(
            stderr.contains("STATE_DIR_IN_WRITABLE_ROOT")
                && stderr.contains("probing without the cache"),
            "{xdg:?}: {stderr}"
        );
        assert_ne!(
            facts["classes"]["protected"]["enforcement"], "not-governed",
            "{xdg:?}: the edited verdict was honoured: {facts}"
        );
        assert_eq!(
            hook(&w.ws),
            None,
            "{xdg:?}: the edited verdict was honoured"
        );
        assert!(w.ws.join("canary").exists(), "{xdg:?}: it did not run");
        // Never read, never rewritten.
        assert_eq!(std::fs::read(probes.join(&name)).expect("entry"), edited);
        assert_eq!(std::fs::read_dir(&probes).expect("dir").count(), 1);
    }

    // Named explicitly, such a directory is bad input: exit 2, the code, both paths, nothing run.
    for dir in [tmp.path().join("explicit"), w.ws.join(".probes")] {
        std::fs::remove_file(w.ws.join("canary")).ok();
        let (out, facts) = run(&w.ws, &[("SANDBOX_PROBE_CACHE", &dir)]);
        assert_eq!(out.status.code(), Some(2), "{dir:?}: {facts}");
        assert_eq!(facts["error"], "STATE_DIR_IN_WRITABLE_ROOT", "{facts}");
        let detail = facts["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(&format!("{dir:?}")), "{detail}");
        assert!(!w.ws.join("canary").exists(), "{dir:?}: it ran");
        assert!(!dir.exists(), "{dir:?}: the refused cache was made");
    }
}

#[test]
fn a_cache_in_an_extra_root_or_tmpdir_of_the_call_is_refused_and_the_call_still_confines() {
    let w = world();
    let extra = w.root.join("extra");
    std::fs::create_dir(&extra).expect("extra");
    let cache = extra.join("cache");
    let out = Command::new(SANDBOXCTL)
        .env("SANDBOX_PROBE_CACHE", &cache)
        .args(["run", "--mode", "workspace-write", "--backend", "bwrap"])
        .arg("--workspace")
        .arg(&w.ws)
        .arg("--writable-root")
        .arg(&extra)
        .args(["--", "bash", "-c", "printf ran > canary"])
        .output()
        .expect("sandboxctl");
    let facts = facts("sandboxctl run", &out);
    assert_eq!(out.status.code(), Some(2), "{facts}");
    assert_eq!(facts["error"], "STATE_DIR_IN_WRITABLE_ROOT");
    assert!(
        facts["detail"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("{extra:?}"))
    );
    assert!(!w.ws.join("canary").exists() && !cache.exists());
    // $TMPDIR, the default location: a warning, a probe, and a confined run.
    let tmpdir = w.root.join("tmpdir");
    std::fs::create_dir(&tmpdir).expect("tmpdir");
    let (out, facts) = run(
        &w.ws,
        &[("TMPDIR", &tmpdir), ("XDG_CACHE_HOME", &tmpdir.join("xdg"))],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{facts} {stderr}");
    assert!(stderr.contains("STATE_DIR_IN_WRITABLE_ROOT"), "{stderr}");
    assert!(!tmpdir.join("xdg").exists(), "the refused cache was made");
    assert_eq!(hook(&w.ws), None);
}
