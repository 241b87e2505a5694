//! The harness's own commands on the host (never confined): git repositories and bash set-up
//! scripts a case's world needs before the call.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{HostError, World};

/// The environment of the person's git on the host, in a world's set-up and while a call runs:
/// git's global and system config left out and an author set, so the world's repositories
/// behave the same on every host.
pub(crate) const PERSON_GIT: [(&str, &str); 6] = [
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_AUTHOR_NAME", "person"),
    ("GIT_AUTHOR_EMAIL", "person@example.invalid"),
    ("GIT_COMMITTER_NAME", "person"),
    ("GIT_COMMITTER_EMAIL", "person@example.invalid"),
];

/// Makes `dir` a git repository as `git init` leaves it, with the person's own git config.
fn init_repo(dir: &Path) -> Result<(), HostError> {
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

impl World {
    /// Makes `dir` a git repository as `git init` leaves it (sample hooks, a config), before the
    /// call, the way a person's checkout is. Needs `git` on `PATH`.
    pub fn init_repo(&self, dir: &Path) -> Result<(), HostError> {
        init_repo(dir)
    }

    /// Runs `script` with bash in `dir` on the host (never confined), git's global and system
    /// config left out and an author set, so the world's repositories behave the same on every
    /// host. Fails with the script's own words when it exits non-zero.
    pub fn host_bash(&self, dir: &Path, script: &str) -> Result<String, HostError> {
        let mut bash = std::process::Command::new("bash");
        bash.args(["-c", script]).env("OUTSIDE", &self.outside);
        run_on_host(bash, dir, script)
    }

    /// Makes the workspace a repository with a commit, a submodule `sub` (whose upstream lies
    /// beside the workspace, as `upstream`) and a linked worktree `wt`, as
    /// [`World::init_repo`] and git's own commands leave them.
    ///
    /// In a certify run ([`super::defer_removal`]) the repository is made once, in a private
    /// directory, and each case gets a copy with the paths git wrote made its own: a submodule
    /// and a worktree cost about forty git and shell processes to make, and the protected family
    /// needs one in every other case. The copy's indexes are refreshed by git, so its files
    /// stat as clean as the ones git made.
    pub fn linked_repo(&self) -> Result<(), HostError> {
        let upstream = self.dir.join("upstream");
        if !super::removal::deferring() {
            return make_linked(&self.ws, &upstream);
        }
        let template = template()?;
        let rewrite = [
            (template.join("upstream"), upstream.clone()),
            (template.join("ws"), self.ws.clone()),
        ];
        let copied = std::fs::create_dir(&upstream)
            .and_then(|()| copy_tree(&template.join("upstream"), &upstream, &rewrite))
            .and_then(|()| copy_tree(&template.join("ws"), &self.ws, &rewrite));
        copied.map_err(|source| HostError::Template {
            dir: self.ws.clone(),
            source,
        })?;
        for dir in [self.ws.clone(), self.ws.join("wt")] {
            let mut git = std::process::Command::new("git");
            git.args(["update-index", "-q", "--refresh"]);
            run_on_host(git, &dir, "git update-index -q --refresh")?;
        }
        Ok(())
    }
}

/// Runs `command` in `dir` on the host with git's global and system config left out and an
/// author set; its stdout, or the failure in its own words (`what` names it).
fn run_on_host(
    mut command: std::process::Command,
    dir: &Path,
    what: &str,
) -> Result<String, HostError> {
    let is_git = command.get_program() == "git";
    let out = command
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .envs(PERSON_GIT)
        .output()
        .map_err(|e| {
            if is_git {
                HostError::NoGit(e)
            } else {
                HostError::NoBash(e)
            }
        })?;
    if !out.status.success() {
        return Err(HostError::Script {
            script: what.to_owned(),
            dir: dir.to_path_buf(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Makes `ws` (an existing directory) a repository with a commit, a submodule `sub` from
/// `upstream` (its sibling, made here, named by the relative URL `../upstream`) and a linked
/// worktree `wt`.
fn make_linked(ws: &Path, upstream: &Path) -> Result<(), HostError> {
    init_repo(upstream)?;
    let bash = |dir: &Path, script: &str| {
        let mut bash = std::process::Command::new("bash");
        bash.args(["-c", script]);
        run_on_host(bash, dir, script)
    };
    bash(upstream, "git commit -q --allow-empty -m upstream")?;
    init_repo(ws)?;
    bash(
        ws,
        "printf 'a\\n' > a && git add a && git commit -qm init && git -c protocol.file.allow=always submodule -q add ../upstream sub && git commit -qm sub && git worktree add -q wt -b wt",
    )?;
    Ok(())
}

/// The run's linked repository ([`World::linked_repo`]): `ws` and `upstream` in a private
/// directory, made on first use and removed by [`drop_template`].
static TEMPLATE: Mutex<Option<tempfile::TempDir>> = Mutex::new(None);

/// The directory holding the run's linked repository, made now if this is the first.
fn template() -> Result<PathBuf, HostError> {
    let mut held = TEMPLATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(dir) = held.as_ref() {
        return Ok(dir.path().to_path_buf());
    }
    let dir = crate::suite::private_dir("repo").map_err(HostError::NoTemplateDir)?;
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).map_err(|source| HostError::Template {
        dir: ws.clone(),
        source,
    })?;
    make_linked(&ws, &dir.path().join("upstream"))?;
    let path = dir.path().to_path_buf();
    *held = Some(dir);
    Ok(path)
}

/// Removes the run's linked repository (at the end of a certify run).
pub(super) fn drop_template() {
    let mut held = TEMPLATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    held.take();
}

/// Copies what is in the directory `from` into the directory `to` (made already): directories,
/// files with their modes, symlinks as they point; every file and symlink that names one of the
/// `rewrite` pairs' first paths names the second instead (git writes absolute paths into a
/// worktree's links, a submodule's URL and its logs), in a file named `config` as git writes a
/// value there ([`config_value`]: the template's paths are plain, a world's may not be).
pub(super) fn copy_tree(
    from: &Path,
    to: &Path,
    rewrite: &[(PathBuf, PathBuf)],
) -> std::io::Result<()> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let swap = |bytes: Vec<u8>, in_config: bool| -> Vec<u8> {
        rewrite.iter().fold(bytes, |bytes, (old, new)| {
            let new = new.as_os_str().as_bytes();
            let new = if in_config {
                config_value(new)
            } else {
                new.to_vec()
            };
            replace(&bytes, old.as_os_str().as_bytes(), &new)
        })
    };
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir(&dst)?;
            copy_tree(&src, &dst, rewrite)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&src)?.into_os_string().into_vec();
            std::os::unix::fs::symlink(std::ffi::OsString::from_vec(swap(target, false)), &dst)?;
        } else if kind.is_file() {
            let in_config = entry.file_name() == "config";
            std::fs::write(&dst, swap(std::fs::read(&src)?, in_config))?;
            std::fs::set_permissions(&dst, entry.metadata()?.permissions())?;
        }
    }
    Ok(())
}

/// `value` as `git config` writes it into a config file: backslashes, double quotes, tabs and
/// newlines escaped, and the whole in double quotes when it starts or ends with a space or holds
/// `;`, `#` or a carriage return.
fn config_value(value: &[u8]) -> Vec<u8> {
    let quoted = value.first() == Some(&b' ')
        || value.last() == Some(&b' ')
        || value.iter().any(|b| matches!(b, b';' | b'#' | b'\r'));
    let mut out = Vec::with_capacity(value.len() + 2);
    if quoted {
        out.push(b'"');
    }
    for &b in value {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.push(b),
        }
    }
    if quoted {
        out.push(b'"');
    }
    out
}

/// `haystack` with every `old` in it replaced by `new`.
fn replace(haystack: &[u8], old: &[u8], new: &[u8]) -> Vec<u8> {
    if old.is_empty() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = rest.windows(old.len()).position(|w| w == old) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(new);
        rest = &rest[at + old.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `git config` itself writes for `value`, read back from the file it wrote.
    fn written_by_git(value: &[u8]) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("config");
        let status = std::process::Command::new("git")
            .args(["config", "--file"])
            .arg(&file)
            .arg("x.y")
            .arg(std::ffi::OsStr::from_bytes(value))
            .status()
            .expect("git");
        assert!(status.success());
        let text = std::fs::read(&file).expect("config");
        let at = text.windows(4).position(|w| w == b"y = ").expect("y = ") + 4;
        text[at..text.len() - 1].to_vec()
    }

    #[test]
    fn a_config_value_is_written_as_git_writes_it() {
        for value in [
            &b"/var/tmp/plain/upstream"[..],
            b"/var/tmp/back\\slash \"quoted\"/upstream",
            b"/var/tmp/new\nline\ttab/upstream",
            b"/var/tmp/a;b#c/upstream",
            b" /leading and trailing ",
            b"/carriage\rreturn",
            b"/srv/\xc3\xa9t\xc3\xa9 (2)/`echo d`/$(x)/upstream",
        ] {
            assert_eq!(
                String::from_utf8_lossy(&config_value(value)),
                String::from_utf8_lossy(&written_by_git(value)),
                "{}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn every_occurrence_is_replaced() {
        assert_eq!(replace(b"a/T/x T/y", b"T/", b"W/"), b"a/W/x W/y");
        assert_eq!(replace(b"none here", b"T/", b"W/"), b"none here");
    }
}
