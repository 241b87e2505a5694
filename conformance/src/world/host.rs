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
    /// In a certify run ([`super::defer_removal`]) the repository is made once, read into
    /// memory and its directory removed, and each case gets a copy with the paths git wrote
    /// made its own: a submodule and a worktree cost about forty git and shell processes to
    /// make, and the protected family needs one in every other case. Held in certify's memory,
    /// what a case gets is what git made, whatever a backend or a `danger-full-access` payload
    /// does to the disk meanwhile. The copy's indexes are refreshed by git, so its files stat
    /// as clean as the ones git made.
    pub fn linked_repo(&self) -> Result<(), HostError> {
        let upstream = self.dir.join("upstream");
        if !super::removal::deferring() {
            return make_linked(&self.ws, &upstream);
        }
        let template = template()?;
        let rewrite = [
            (template.dir.join("upstream"), upstream.clone()),
            (template.dir.join("ws"), self.ws.clone()),
        ];
        let copied = std::fs::create_dir(&upstream)
            .and_then(|()| template.upstream.write(&upstream, &rewrite))
            .and_then(|()| template.ws.write(&self.ws, &rewrite));
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

/// The run's linked repository ([`World::linked_repo`]) as git made it, held in memory.
struct Template {
    /// The directory it was made in (removed since): the paths git wrote start with it.
    dir: PathBuf,
    /// The workspace: the repository, its submodule's checkout and its linked worktree.
    ws: Tree,
    /// The submodule's upstream repository, the workspace's sibling.
    upstream: Tree,
}

/// The run's linked repository, made on first use and dropped by [`drop_template`].
static TEMPLATE: Mutex<Option<std::sync::Arc<Template>>> = Mutex::new(None);

/// The run's linked repository, made now (in a private directory, read into memory, the
/// directory removed) if this is the first.
fn template() -> Result<std::sync::Arc<Template>, HostError> {
    let mut held = TEMPLATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(template) = held.as_ref() {
        return Ok(std::sync::Arc::clone(template));
    }
    let dir = crate::suite::private_dir("repo").map_err(HostError::NoTemplateDir)?;
    let (ws, upstream) = (dir.path().join("ws"), dir.path().join("upstream"));
    std::fs::create_dir(&ws).map_err(|source| HostError::Template {
        dir: ws.clone(),
        source,
    })?;
    make_linked(&ws, &upstream)?;
    let read = |from: &Path| {
        Tree::read(from).map_err(|source| HostError::Template {
            dir: from.to_path_buf(),
            source,
        })
    };
    let template = std::sync::Arc::new(Template {
        dir: dir.path().to_path_buf(),
        ws: read(&ws)?,
        upstream: read(&upstream)?,
    });
    *held = Some(std::sync::Arc::clone(&template));
    Ok(template)
}

/// Forgets the run's linked repository (at the end of a certify run).
pub(super) fn drop_template() {
    let mut held = TEMPLATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    held.take();
}

/// Copies what is in the directory `from` into the directory `to` (made already), as
/// [`Tree::write`] does.
pub(super) fn copy_tree(
    from: &Path,
    to: &Path,
    rewrite: &[(PathBuf, PathBuf)],
) -> std::io::Result<()> {
    Tree::read(from)?.write(to, rewrite)
}

/// What is in a directory, read into memory: directories, files with their modes, symlinks as
/// they point (anything else is left out), each by its path relative to the directory, a
/// directory before what it holds.
struct Tree(Vec<(PathBuf, Node)>);

/// One entry of a [`Tree`].
enum Node {
    /// A directory.
    Dir,
    /// A regular file: its bytes and permission bits.
    File(Vec<u8>, std::fs::Permissions),
    /// A symbolic link: where it points.
    Symlink(std::ffi::OsString),
}

impl Tree {
    /// Reads the directory `from`.
    fn read(from: &Path) -> std::io::Result<Self> {
        let mut nodes = Vec::new();
        let mut pending = vec![PathBuf::new()];
        while let Some(relative) = pending.pop() {
            for entry in std::fs::read_dir(from.join(&relative))? {
                let entry = entry?;
                let (path, kind) = (relative.join(entry.file_name()), entry.file_type()?);
                if kind.is_dir() {
                    nodes.push((path.clone(), Node::Dir));
                    pending.push(path);
                } else if kind.is_symlink() {
                    let target = std::fs::read_link(entry.path())?;
                    nodes.push((path, Node::Symlink(target.into_os_string())));
                } else if kind.is_file() {
                    let bytes = std::fs::read(entry.path())?;
                    nodes.push((path, Node::File(bytes, entry.metadata()?.permissions())));
                }
            }
        }
        Ok(Self(nodes))
    }

    /// Writes the tree into the directory `to` (made already); every file and symlink that
    /// names one of the `rewrite` pairs' first paths names the second instead (git writes
    /// absolute paths into a worktree's links, a submodule's URL and its logs), in a file named
    /// `config` as git writes a value there ([`config_value`]: the template's paths are plain,
    /// a world's may not be).
    fn write(&self, to: &Path, rewrite: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let swap = |bytes: &[u8], in_config: bool| -> Vec<u8> {
            rewrite.iter().fold(bytes.to_vec(), |bytes, (old, new)| {
                let new = new.as_os_str().as_bytes();
                let new = if in_config {
                    config_value(new)
                } else {
                    new.to_vec()
                };
                replace(&bytes, old.as_os_str().as_bytes(), &new)
            })
        };
        for (relative, node) in &self.0 {
            let dst = to.join(relative);
            match node {
                Node::Dir => std::fs::create_dir(&dst)?,
                Node::Symlink(target) => std::os::unix::fs::symlink(
                    std::ffi::OsString::from_vec(swap(target.as_bytes(), false)),
                    &dst,
                )?,
                Node::File(bytes, permissions) => {
                    let in_config = relative.file_name().is_some_and(|name| name == "config");
                    std::fs::write(&dst, swap(bytes, in_config))?;
                    std::fs::set_permissions(&dst, permissions.clone())?;
                }
            }
        }
        Ok(())
    }
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
    fn the_runs_repository_is_held_in_memory_and_copied_with_its_paths_made_its_own() {
        let template = template().expect("the run's linked repository");
        assert!(
            !template.dir.exists(),
            "its directory is removed once read, so nothing on disk can change what cases get"
        );
        let to = tempfile::tempdir().expect("tempdir");
        let (ws, upstream) = (to.path().join("w s;#"), to.path().join("upstream"));
        let rewrite = [
            (template.dir.join("upstream"), upstream.clone()),
            (template.dir.join("ws"), ws.clone()),
        ];
        for (tree, dir) in [(&template.ws, &ws), (&template.upstream, &upstream)] {
            std::fs::create_dir(dir).expect("mkdir");
            tree.write(dir, &rewrite).expect("copy");
        }
        let git = |dir: &Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .envs(PERSON_GIT)
                .output()
                .expect("git");
            assert!(out.status.success(), "{args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        assert_eq!(
            git(
                &ws.join("wt"),
                &["rev-parse", "--path-format=absolute", "--git-common-dir"]
            ),
            ws.join(".git").display().to_string(),
            "the linked worktree names the copy's repository"
        );
        assert_eq!(
            git(&ws, &["status", "--porcelain"]),
            "?? wt/",
            "as git leaves it"
        );
        assert_eq!(git(&ws.join("sub"), &["log", "--format=%s"]), "upstream");
        assert_eq!(std::fs::read(ws.join("a")).expect("a"), b"a\n");
    }

    #[test]
    fn every_occurrence_is_replaced() {
        assert_eq!(replace(b"a/T/x T/y", b"T/", b"W/"), b"a/W/x W/y");
        assert_eq!(replace(b"none here", b"T/", b"W/"), b"none here");
    }
}
