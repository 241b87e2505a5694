//! The harness's own commands on the host (never confined): git repositories and bash set-up
//! scripts a case's world needs before the call.

use std::path::Path;

use super::{HostError, World};

impl World {
    /// Makes `dir` a git repository as `git init` leaves it (sample hooks, a config), before the
    /// call, the way a person's checkout is. Needs `git` on `PATH`.
    pub fn init_repo(&self, dir: &Path) -> Result<(), HostError> {
        let out = std::process::Command::new("git")
            .args(["-c", "init.defaultBranch=main", "init", "-q"])
            .arg(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .map_err(HostError::NoGit)?;
        if !out.status.success() {
            return Err(HostError::GitInit {
                dir: dir.to_path_buf(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }

    /// Runs `script` with bash in `dir` on the host (never confined), git's global and system
    /// config left out and an author set, so the world's repositories behave the same on every
    /// host. Fails with the script's own words when it exits non-zero.
    pub fn host_bash(&self, dir: &Path, script: &str) -> Result<String, HostError> {
        let out = std::process::Command::new("bash")
            .args(["-c", script])
            .current_dir(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "person")
            .env("GIT_AUTHOR_EMAIL", "person@example.invalid")
            .env("GIT_COMMITTER_NAME", "person")
            .env("GIT_COMMITTER_EMAIL", "person@example.invalid")
            .env("OUTSIDE", &self.outside)
            .output()
            .map_err(HostError::NoBash)?;
        if !out.status.success() {
            return Err(HostError::Script {
                script: script.to_owned(),
                dir: dir.to_path_buf(),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Gives the repository at `dir` (made by [`World::init_repo`]) a commit, a submodule `sub`
    /// (from a repository beside the workspace) and a linked worktree `wt`.
    pub fn link_repo(&self, dir: &Path) -> Result<(), HostError> {
        let upstream = self.dir.join("upstream");
        self.init_repo(&upstream)?;
        self.host_bash(&upstream, "git commit -q --allow-empty -m upstream")?;
        let quoted = format!("'{}'", upstream.to_string_lossy().replace('\'', "'\\''"));
        self.host_bash(
            dir,
            &format!(
                "printf 'a\\n' > a && git add a && git commit -qm init && git -c protocol.file.allow=always submodule -q add {quoted} sub && git commit -qm sub && git worktree add -q wt -b wt"
            ),
        )?;
        Ok(())
    }
}
