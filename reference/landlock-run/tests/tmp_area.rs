//! `--tmp-area`: the call's /tmp is the session's private area, on the real kernel, as root and
//! as an unprivileged user. Each test checks the host's /tmp afterwards: the person's cargo,
//! rustup and pytest read config from every parent folder there, so nothing the payload writes
//! may land in it.

mod common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::{Who, identities, launch_as, shell_quote, stderr, stdout};

/// A private temp area (`tmp` and `work`), outside /tmp, owned by the user the launcher runs as.
struct Area {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn area(who: Who) -> Area {
    let dir = tempfile::Builder::new()
        .prefix("tmp-area-test-")
        .tempdir_in("/var/tmp")
        .expect("area");
    let path = fs::canonicalize(dir.path()).expect("canonical");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    for part in ["tmp", "work"] {
        fs::create_dir(path.join(part)).expect("part");
    }
    if who == Who::Unprivileged && sandbox_test_support::is_root() {
        for p in [path.clone(), path.join("tmp"), path.join("work")] {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).expect("chown");
        }
    }
    Area { _dir: dir, path }
}

/// A folder of the host's /tmp that belongs to the user the launcher runs as (a folder of
/// another user's is copied up under that user's name, which a user namespace that maps only
/// the caller's uid cannot write: `EOVERFLOW`), and a file of the host's in it.
fn host_tmp_folder(who: Who) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("tmp-area-host-")
        .tempdir_in("/tmp")
        .expect("host folder");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
    let file = dir.path().join("the-hosts-file");
    fs::write(&file, "host\n").expect("host file");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).expect("chmod");
    if who == Who::Unprivileged && sandbox_test_support::is_root() {
        for p in [dir.path(), file.as_path()] {
            std::os::unix::fs::chown(p, Some(65534), Some(65534)).expect("chown");
        }
    }
    (dir, file)
}

#[test]
fn what_the_payload_writes_in_its_tmp_lands_in_the_area_never_in_the_hosts_tmp() {
    for who in identities() {
        let area = area(who);
        let (folder, host_file) = host_tmp_folder(who);
        let plant = folder.path().join(".cargo");
        let script = format!(
            "printf '%s\\n' \"$TMPDIR\"
             cat {file}
             mkdir -p {plant} && printf '[build]\\nrustc-wrapper = \"/x\"\\n' > {plant}/config.toml
             echo changed >> {file}
             rm -f {file}.gone
             echo made > {folder}/made && echo WROTE",
            file = shell_quote(host_file.to_str().expect("utf8")),
            plant = shell_quote(plant.to_str().expect("utf8")),
            folder = shell_quote(folder.path().to_str().expect("utf8")),
        );
        let area_arg = area.path.to_str().expect("utf8");
        let out = launch_as(
            who,
            &["--ro", "/", "--rw", "/tmp", "--tmp-area", area_arg],
            &script,
        );
        let text = stdout(&out);
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert!(
            text.starts_with("/tmp\nhost\n") && text.contains("WROTE"),
            "{who:?}: the payload sees the host's file and $TMPDIR=/tmp: {text}"
        );
        // The host's /tmp is as it was.
        assert!(
            !plant.exists(),
            "{who:?}: the plant reached the host's /tmp"
        );
        assert!(
            !folder.path().join("made").exists(),
            "{who:?}: a new file reached the host"
        );
        assert_eq!(
            fs::read_to_string(&host_file).expect("host file"),
            "host\n",
            "{who:?}"
        );
        // Everything is in the area, where a person finds it.
        let rel = folder.path().strip_prefix("/tmp").expect("in /tmp");
        let upper = area.path.join("tmp").join(rel);
        assert!(
            upper.join(".cargo/config.toml").is_file(),
            "{who:?}: {upper:?}"
        );
        assert_eq!(
            fs::read_to_string(upper.join("the-hosts-file")).expect("copied up"),
            "host\nchanged\n",
            "{who:?}"
        );
    }
}

#[test]
fn a_workspace_below_tmp_is_still_the_hosts_own_directory() {
    for who in identities() {
        let area = area(who);
        let (folder, _) = host_tmp_folder(who);
        let ws = folder.path().join("ws");
        fs::create_dir(&ws).expect("ws");
        fs::set_permissions(&ws, fs::Permissions::from_mode(0o777)).expect("chmod");
        let ws_arg = ws.to_str().expect("utf8");
        let out = launch_as(
            who,
            &[
                "--ro",
                "/",
                "--rw",
                ws_arg,
                "--rw",
                "/tmp",
                "--tmp-area",
                area.path.to_str().expect("utf8"),
            ],
            &format!(
                "cd {ws} && echo inside > landed && echo beside > ../beside",
                ws = shell_quote(ws_arg)
            ),
        );
        assert!(out.status.success(), "{who:?}: {}", stderr(&out));
        assert_eq!(
            fs::read_to_string(ws.join("landed")).ok().as_deref(),
            Some("inside\n"),
            "{who:?}: a write in the workspace reaches the host's workspace"
        );
        assert!(
            !folder.path().join("beside").exists(),
            "{who:?}: beside it stays private"
        );
    }
}

#[test]
fn read_only_sees_the_area_and_writes_nowhere() {
    for who in identities() {
        let area = area(who);
        fs::write(area.path.join("tmp/earlier"), "from an earlier call\n").expect("earlier");
        let (folder, _) = host_tmp_folder(who);
        let out = launch_as(
            who,
            &["--ro", "/", "--tmp-area", area.path.to_str().expect("utf8")],
            &format!(
                "cat /tmp/earlier; echo x > /tmp/new || echo REFUSED; echo x > {f}/new || echo REFUSED",
                f = shell_quote(folder.path().to_str().expect("utf8"))
            ),
        );
        let text = stdout(&out);
        assert!(
            text.starts_with("from an earlier call\n") && text.matches("REFUSED").count() == 2,
            "{who:?}: {text} {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("Read-only file system"),
            "{who:?}: refused as a read-only bind is: {}",
            stderr(&out)
        );
        assert!(!area.path.join("tmp/new").exists() && !Path::new("/tmp/new").exists());
    }
}

#[test]
fn a_fifo_the_host_reads_in_its_tmp_receives_nothing() {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    for who in identities() {
        let area = area(who);
        let (folder, _) = host_tmp_folder(who);
        let fifo = folder.path().join("commands");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).expect("fifo");
        fs::set_permissions(&fifo, fs::Permissions::from_mode(0o666)).expect("chmod");
        // The host's reader, open before the call (non-blocking, so the test never waits on it).
        let mut reader = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .expect("reader");
        let out = launch_as(
            who,
            &[
                "--ro",
                "/",
                "--rw",
                "/tmp",
                "--tmp-area",
                area.path.to_str().expect("utf8"),
            ],
            &format!(
                "[ -p {f} ] && echo IS-A-FIFO; echo 'touch /tmp/pwned' 1<>{f} && echo SENT",
                f = shell_quote(fifo.to_str().expect("utf8"))
            ),
        );
        assert!(
            stdout(&out).contains("IS-A-FIFO") && stdout(&out).contains("SENT"),
            "{who:?}: {} {}",
            stdout(&out),
            stderr(&out)
        );
        let mut got = Vec::new();
        let _ = reader.read_to_end(&mut got);
        assert!(got.is_empty(), "{who:?}: the host's reader got {got:?}");
        assert!(
            fs::symlink_metadata(&fifo)
                .expect("fifo")
                .file_type()
                .is_fifo()
        );
    }
}

#[test]
fn an_area_without_its_work_directory_fails_the_launch_before_anything_runs() {
    for who in identities() {
        let area = area(who);
        fs::remove_dir(area.path.join("work")).expect("rm work");
        let (folder, _) = host_tmp_folder(who);
        let marker = folder.path().join("ran");
        let out = launch_as(
            who,
            &[
                "--ro",
                "/",
                "--rw",
                "/tmp",
                "--tmp-area",
                area.path.to_str().expect("utf8"),
            ],
            &format!("echo x > {}", shell_quote(marker.to_str().expect("utf8"))),
        );
        assert_eq!(out.status.code(), Some(125), "{who:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("has no work directory"),
            "{}",
            stderr(&out)
        );
        assert!(
            !marker.exists(),
            "{who:?}: the payload ran with the host's /tmp"
        );
    }
}

/// Runs the launcher (`args`, then `bash -c script`) where a more privileged namespace mounted
/// something below `/tmp` (a container's volume, CI's clone bound back below a private `/tmp`):
/// a user namespace of the caller's own binds `/var/tmp` at a fresh folder of `/tmp`, and the
/// launcher runs in a user namespace below that one, where the bind is locked. The kernel then
/// refuses to overlay `/tmp` ("failed to clone lowerpath").
fn launch_below_a_locked_mount(args: &[&str], script: &str) -> std::process::Output {
    let held = tempfile::Builder::new()
        .prefix("tmp-area-held-")
        .tempdir_in("/tmp")
        .expect("held");
    std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "--propagation", "private"])
        .args(["--", "sh", "-c"])
        .arg(r#"mount --bind /var/tmp "$0" && exec unshare --user --map-user=0 --map-group=0 -- "$@""#)
        .arg(held.path())
        .arg(common::launcher_path())
        .args(args)
        .args(["--", "bash", "-c", script])
        .current_dir("/")
        .output()
        .expect("spawn unshare")
}

#[test]
fn below_a_tmp_with_locked_mounts_the_area_stands_alone_and_read_only_keeps_the_hosts_tmp() {
    let who = if sandbox_test_support::is_root() {
        Who::Root
    } else {
        Who::Unprivileged
    };
    let area = area(who);
    let (folder, host_file) = host_tmp_folder(who);
    let area_arg = area.path.to_str().expect("utf8");
    let file = shell_quote(host_file.to_str().expect("utf8"));
    let new = folder.path().join("new");
    // workspace-write: the area alone is /tmp; what the payload writes lands there.
    let out = launch_below_a_locked_mount(
        &["--ro", "/", "--rw", "/tmp", "--tmp-area", area_arg],
        &format!(
            "printf '%s\\n' \"$TMPDIR\"; cat {file} 2>/dev/null || echo UNSEEN; \
             mkdir -p {dir} && echo made > {new} && echo WROTE",
            dir = shell_quote(folder.path().to_str().expect("utf8")),
            new = shell_quote(new.to_str().expect("utf8")),
        ),
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(text, "/tmp\nUNSEEN\nWROTE\n", "{}", stderr(&out));
    assert!(!new.exists(), "the write reached the host's /tmp");
    let rel = folder.path().strip_prefix("/tmp").expect("in /tmp");
    assert_eq!(
        fs::read_to_string(area.path.join("tmp").join(rel).join("new"))
            .ok()
            .as_deref(),
        Some("made\n"),
        "the write lands in the area"
    );
    // read-only: the host's /tmp as it is, read-only (an empty area would only hide it).
    let out = launch_below_a_locked_mount(
        &["--ro", "/", "--tmp-area", area_arg],
        &format!(
            "cat {file}; echo x >> {file} || echo REFUSED; echo x > /tmp/new-ro || echo REFUSED"
        ),
    );
    assert_eq!(stdout(&out), "host\nREFUSED\nREFUSED\n", "{}", stderr(&out));
    assert_eq!(fs::read_to_string(&host_file).expect("host file"), "host\n");
    assert!(!Path::new("/tmp/new-ro").exists());
}
