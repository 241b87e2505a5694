//! What every launcher test file shares: the launcher every user can execute, the identities
//! to try, a world both users can write, and output helpers.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sandbox_test_support::{Dirs, euid, is_root};

const BUILT_LAUNCHER: &str = env!("CARGO_BIN_EXE_landlock-run");

/// The launcher every user of these tests can execute. The build directory may sit where only
/// root can enter (CI clones into /root, mode 0700), so when the tests run as root the binary is
/// copied into `/var/tmp/landlock-run-tests/<size>-<mtime>/`, a root-owned directory nobody else
/// may write (checked, so another user cannot plant a binary root then runs), shared by the test
/// processes of one build and replaced atomically.
pub fn launcher_path() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if !is_root() {
            return BUILT_LAUNCHER.to_owned();
        }
        use std::os::unix::fs::DirBuilderExt;
        let built = fs::metadata(BUILT_LAUNCHER).expect("the built launcher");
        let base = Path::new("/var/tmp/landlock-run-tests");
        let dir = base.join(format!("{}-{}", built.len(), built.mtime()));
        for d in [base, dir.as_path()] {
            let _ = fs::DirBuilder::new().mode(0o755).create(d);
            let meta = fs::symlink_metadata(d).expect("scratch dir");
            assert!(
                meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o022 == 0,
                "{} must be a root-owned directory nobody else may write",
                d.display()
            );
        }
        let copy = dir.join("landlock-run");
        if fs::metadata(&copy).map(|m| m.len()).ok() != Some(built.len()) {
            let temp = dir.join(format!(".landlock-run-{}", std::process::id()));
            fs::copy(BUILT_LAUNCHER, &temp).expect("copy the launcher");
            fs::set_permissions(&temp, fs::Permissions::from_mode(0o755)).expect("chmod");
            fs::rename(&temp, &copy).expect("install the copy");
        }
        copy.to_str().expect("utf8").to_owned()
    })
}

/// The user the launcher runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Root,
    Unprivileged,
}

/// The identities to try: both when the tests run as root, otherwise the unprivileged one.
pub fn identities() -> Vec<Who> {
    if is_root() {
        vec![Who::Root, Who::Unprivileged]
    } else {
        eprintln!(
            "root variant skipped: the test process is not root (uid {})",
            euid()
        );
        vec![Who::Unprivileged]
    }
}

/// The argv prefix that runs the launcher as `who`.
pub fn launcher_argv(who: Who) -> Vec<String> {
    let mut argv = Vec::new();
    if who == Who::Unprivileged && is_root() {
        argv.extend(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ]
            .map(String::from),
        );
    }
    argv.push(launcher_path().to_owned());
    argv
}

pub fn launcher(who: Who) -> Command {
    let argv = launcher_argv(who);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir("/");
    cmd
}

/// A world both users can work in: the workspace and the outside directory are writable by
/// anyone, so only the sandbox stands between an unprivileged payload and the outside.
pub struct World {
    pub _dirs: Dirs,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

pub fn world() -> World {
    let dirs = Dirs::new("landlock-run-test-");
    fs::set_permissions(&dirs.root, fs::Permissions::from_mode(0o755)).expect("chmod root");
    for d in [&dirs.ws, &dirs.outside] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let sentinel = dirs.outside.join("sentinel");
    fs::write(&sentinel, "untouched").expect("sentinel");
    fs::set_permissions(&sentinel, fs::Permissions::from_mode(0o666)).expect("chmod sentinel");
    World {
        ws: dirs.ws.clone(),
        outside: dirs.outside.clone(),
        _dirs: dirs,
    }
}

impl World {
    pub fn ws(&self) -> &str {
        self.ws.to_str().expect("utf8")
    }

    pub fn outside(&self) -> &str {
        self.outside.to_str().expect("utf8")
    }

    pub fn sentinel(&self) -> String {
        fs::read_to_string(self.outside.join("sentinel")).expect("sentinel")
    }
}

pub fn launch_as(who: Who, args: &[&str], script: &str) -> Output {
    launcher(who)
        .args(args)
        .args(["--", "bash", "-c", script])
        .output()
        .expect("spawn launcher")
}

pub fn launch(args: &[&str], script: &str) -> Output {
    launch_as(Who::Root, args, script)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Waits up to `limit` for `path` to exist.
pub fn wait_for(path: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
