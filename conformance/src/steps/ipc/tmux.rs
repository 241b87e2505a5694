//! A real tmux server on the host, the person's terminal a payload would type into.

use super::*;

/// A tmux server of the harness's own, with one shell, killed on drop. The server runs in the
/// foreground (`-D`, not daemonized) as a child of the harness that gets SIGKILL when the thread
/// that started it ends (`PR_SET_PDEATHSIG`), so a test process killed mid-case (a timeout, a
/// Ctrl-C, nextest's terminate-after) leaves no tmux server behind; its shell ends with it (its
/// terminal closes).
pub(super) struct Tmux {
    pub(super) sock: PathBuf,
    pub(super) server: std::process::Child,
}

/// How long a fresh server may take to make its socket.
const TMUX_START: Duration = Duration::from_secs(10);

impl Tmux {
    pub(super) fn start(sock: &Path) -> Result<Tmux, StepError> {
        use std::os::unix::process::CommandExt;
        let tmux = which::which("tmux")
            .map_err(|_| StepError::harness("tmux is not installed (not on PATH)"))?;
        let mut command = std::process::Command::new(&tmux);
        command
            .arg("-S")
            .arg(sock)
            .args(["-f", "/dev/null", "-D"])
            .env_remove("TMUX")
            // The server's shell is the harness's choice, never the user's login shell (a user
            // whose shell is nologin has no session at all: every send-keys finds no target).
            .env("SHELL", "/bin/sh")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: the closure runs in the child between fork and exec and only makes the
        // prctl(2) system call (async-signal-safe, no allocation, no lock).
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let server = command
            .spawn()
            .map_err(|e| StepError::Harness(format!("cannot start tmux: {e}")))?;
        // From here on, dropping the value kills the server whatever fails.
        let tmux_server = Tmux {
            sock: sock.to_owned(),
            server,
        };
        let deadline = Instant::now() + TMUX_START;
        while std::fs::symlink_metadata(sock).is_err() {
            if Instant::now() > deadline {
                return Err(StepError::Harness(format!(
                    "the tmux server made no socket at {} within {TMUX_START:?}",
                    sock.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = std::process::Command::new(&tmux)
            .arg("-S")
            .arg(sock)
            .args([
                "-f",
                "/dev/null",
                "set-option",
                "-g",
                "default-shell",
                "/bin/sh",
                ";",
                "new-session",
                "-d",
                "-x",
                "80",
                "-y",
                "24",
                "/bin/sh",
            ])
            .env_remove("TMUX")
            .env("SHELL", "/bin/sh")
            .output()
            .map_err(|e| StepError::Harness(format!("cannot start tmux: {e}")))?;
        if !out.status.success() {
            return Err(StepError::Harness(format!(
                "cannot start a tmux session: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // Anyone may connect: only the sandbox may stand between the payload and the server.
        let _ = std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o777));
        Ok(tmux_server)
    }

    pub(super) fn type_line(&self, line: &str) -> Result<(), StepError> {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(["send-keys", line, "Enter"])
            .env_remove("TMUX")
            .output()
            .map_err(|e| StepError::Harness(format!("cannot run tmux: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(StepError::Harness(format!(
                "tmux send-keys failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .arg("kill-server")
            .env_remove("TMUX")
            .output();
        // The server is our child: killed (should kill-server have failed) and reaped.
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}
