//! An `attack` step's `during`: the person's own tools, run by the harness on the host WHILE the
//! call is still running, and once more after it ended.
//!
//! A backend that finds and reverts what the payload planted only after the call (git's code
//! surface, a config in a shared `/tmp`) certifies on every check made afterwards, yet the
//! person's editor runs `git status` on every file event, a shell prompt on every Enter, and a
//! `cargo build` or `pytest` in any `mktemp -d` folder reads config from every parent folder. So
//! the payload plants, then reaches a rendezvous: it opens a FIFO the harness made for reading
//! (allowed in every mode), which completes the harness's own blocking open of its write end (an
//! event, never a sleep), and blocks reading it until the harness writes one byte (a hang guard
//! bounds that read). Meanwhile the harness acts as the person: `git status` and `git commit` in
//! the workspace and in every folder of it that holds a repository, `cargo build` of a tiny
//! crate through rustup's proxy and `pytest` in a fresh folder of the host's `/tmp` and of the
//! call's `$TMPDIR`, and a reader of a FIFO in the host's `/tmp` that was open before the call.
//! The marker a planted command would write must stay absent, and nothing may reach the FIFO.
//!
//! Cases that plant at the top of the host's `/tmp` hold an exclusive lock on `/tmp` itself
//! (`flock`, no file made) for the whole case, so two of them never see each other's plants, and
//! they remove afterwards exactly the names that were not there before (refusing to run, as the
//! harness's error, when the person's `/tmp` already holds one).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use sandbox::ConfinedArgv;
use sandbox_local::launch::{self, Finished, LaunchOptions};

use super::person;

use crate::scenario::{During, PersonTool};
use crate::steps::StepError;
use crate::world::{draw_hex, draw_one, shell_quote};

/// The names a payload plants at the top of a shared temp folder that the person's tools read
/// (cargo's config folder, rustup's toolchain file, pytest's config and conftest, and the bytecode
/// folder pytest writes beside a conftest it imported).
pub const SHARED_TMP_PLANTS: &[&str] = &[
    ".cargo",
    "rust-toolchain.toml",
    "rust-toolchain",
    "pytest.ini",
    "conftest.py",
    "__pycache__",
];

/// How long the payload waits at the rendezvous for the harness before it goes on anyway.
const HANG_GUARD_SECONDS: u32 = 30;

/// The person at the host while a call runs: the tools, where they run, and what they watch.
pub(super) struct Person {
    tools: Vec<PersonTool>,
    marker: PathBuf,
    ws: PathBuf,
    /// The call's `$TMPDIR` on the host, when it has one.
    tmpdir: Option<PathBuf>,
    /// The rendezvous FIFO (in the world directory).
    go: PathBuf,
    /// A FIFO in the host's `/tmp` with the person's reader open on it.
    fifo: Option<(PathBuf, std::fs::File)>,
    /// Held for the whole case by one that plants at the top of `/tmp` or makes its FIFO there.
    tmp_lock: Option<nix::fcntl::Flock<std::fs::File>>,
    /// The shared-folder names absent before the call (removed after the case).
    absent_before: Vec<PathBuf>,
}

impl Person {
    /// Sets the person up before the call: the rendezvous in `world_dir`, the FIFO reader, and
    /// for the temp-folder tools the lock on `/tmp` and the record of what it holds.
    pub(super) fn new(
        during: &During,
        marker: PathBuf,
        ws: &Path,
        tmpdir: Option<PathBuf>,
        world_dir: &Path,
    ) -> Result<Person, StepError> {
        let go = world_dir.join(format!(
            ".{}-{}",
            draw_one(&["sock", "lck", "ipc"]),
            draw_hex(8)
        ));
        nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o644))
            .map_err(|e| StepError::Harness(format!("cannot make the rendezvous FIFO: {e}")))?;
        let shared = during
            .tools
            .iter()
            .any(|t| matches!(t, PersonTool::Cargo | PersonTool::Pytest));
        let mut person = Person {
            tools: during.tools.clone(),
            marker,
            ws: ws.to_path_buf(),
            tmpdir,
            go,
            fifo: None,
            tmp_lock: None,
            absent_before: Vec::new(),
        };
        if shared {
            person.lock_shared_tmp()?;
        }
        if person.tools.contains(&PersonTool::Fifo) {
            // A FIFO anyone may write at the top of /tmp: the watch of the shared places of the
            // harness's other runs must not see it (crate::leftovers::lock_tmp).
            if person.tmp_lock.is_none() {
                person.tmp_lock = Some(lock_tmp()?);
            }
            person.fifo = Some(open_fifo_reader()?);
        }
        Ok(person)
    }

    /// Takes the lock on `/tmp` and records which planted names it lacks; the person's own
    /// `/tmp` already holding one is the harness's trouble (it cannot tell a plant from it).
    fn lock_shared_tmp(&mut self) -> Result<(), StepError> {
        self.tmp_lock = Some(lock_tmp()?);
        for name in SHARED_TMP_PLANTS {
            let path = Path::new("/tmp").join(name);
            if std::fs::symlink_metadata(&path).is_ok() {
                return Err(StepError::Harness(format!(
                    "the host's /tmp already holds {}: the case cannot tell a plant from the \
                     person's own file (move it away to run this case)",
                    path.display()
                )));
            }
            self.absent_before.push(path);
        }
        Ok(())
    }

    /// The variables the payload reads: the rendezvous, the marker, the FIFO in `/tmp`.
    pub(super) fn vars(&self) -> Vec<(&'static str, OsString)> {
        let hex: String = self
            .marker
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut vars = vec![
            ("GO", self.go.clone().into_os_string()),
            // The marker as one POSIX shell word (for a planted script, hook or git config
            // value) and as hex (for a planted Python file): odd names hold quotes.
            ("MARK_SH", shell_quote(self.marker.as_os_str()).into()),
            ("MARK_HEX", hex.into()),
        ];
        if let Some((path, _)) = &self.fifo {
            vars.push(("FIFO", path.clone().into_os_string()));
        }
        vars
    }

    /// What the harness appends to the payload: reach the rendezvous and wait for the release.
    pub(super) fn epilogue() -> String {
        format!(
            "\n{{ exec 8<\"$GO\" && read -r -t {HANG_GUARD_SECONDS} -n 1 -u 8 _; exec 8<&-; }} 2>/dev/null || :\n"
        )
    }

    /// Runs the call; once the payload reached the rendezvous, the person's tools run while it
    /// waits, then it is released. Returns the call and what the tools found while it ran (an
    /// unmet expectation when the payload never reached the rendezvous: nothing was checked
    /// while it ran).
    pub(super) fn launch(
        &self,
        confined: &ConfinedArgv,
        options: &LaunchOptions,
        guard: Option<Box<dyn sandbox::CallGuard>>,
    ) -> (Finished, Result<(), StepError>) {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let ready = tx.clone();
            let go = self.go.clone();
            // Completes when a reader opens the FIFO: the payload at its rendezvous.
            s.spawn(move || {
                let _ = ready.send(Event::Ready(
                    std::fs::OpenOptions::new().write(true).open(&go),
                ));
            });
            s.spawn(move || {
                let _ = tx.send(Event::Done(Box::new(launch::run_guarded(
                    confined, options, guard,
                ))));
            });
            let (done, found) = match rx.recv() {
                Ok(Event::Ready(Ok(mut release))) => {
                    let found = self.act("while the call runs");
                    let _ = release.write_all(b"g");
                    drop(release);
                    (next_done(&rx), found)
                }
                Ok(Event::Ready(Err(e))) => {
                    let e = StepError::Harness(format!("cannot open the rendezvous FIFO: {e}"));
                    (next_done(&rx), Err(e))
                }
                Ok(Event::Done(done)) => {
                    // The payload never came: complete the waiting open ourselves.
                    let unblock = nix::fcntl::open(
                        &self.go,
                        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_NONBLOCK,
                        nix::sys::stat::Mode::empty(),
                    );
                    let _ = rx.recv();
                    drop(unblock);
                    let e = StepError::Unmet(
                        "the payload ended without reaching its rendezvous (it could not open a \
                         FIFO of its world for reading, or never got that far): nothing was \
                         checked while the call ran"
                            .into(),
                    );
                    (Some(*done), Err(e))
                }
                Err(_) => (None, Err(StepError::harness("the launch thread vanished"))),
            };
            let done = done.unwrap_or_else(|| launch::run(confined, options));
            (done, found)
        })
    }

    /// The person's tools, once: each in every place it runs; the marker is looked at after
    /// each, so a failure names the tool and the folder that ran the payload's code.
    pub(super) fn act(&self, phase: &str) -> Result<(), StepError> {
        for tool in &self.tools {
            match tool {
                PersonTool::Git => {
                    for dir in repositories(&self.ws) {
                        // Whether each succeeds is not the backend's business, only what it runs.
                        let rounds = [
                            &["status", "--short"][..],
                            &["add", "-A"],
                            &["commit", "-qm", "person"],
                        ];
                        let _ = person::git(&dir, &rounds, &[], person::OnFailure::GoOn);
                        self.marker_absent(
                            phase,
                            &format!("git status and git commit in {}", dir.display()),
                        )?;
                    }
                }
                PersonTool::Cargo | PersonTool::Pytest => {
                    for base in self.fresh_bases() {
                        self.in_fresh_folder(*tool, &base, phase)?;
                    }
                }
                PersonTool::Fifo => self.fifo_untouched(phase)?,
            }
        }
        Ok(())
    }

    /// The host's `/tmp` and the call's `$TMPDIR`, where fresh folders are made.
    fn fresh_bases(&self) -> Vec<PathBuf> {
        let mut bases = vec![PathBuf::from("/tmp")];
        bases.extend(self.tmpdir.iter().filter(|t| t.is_dir()).cloned());
        bases
    }

    /// One tool in a fresh folder of `base` (removed again at once): cargo builds a tiny crate
    /// there, pytest runs there. A tool that fails without running the payload's code is the
    /// harness's trouble (the host's tool is broken), never the backend's.
    fn in_fresh_folder(&self, tool: PersonTool, base: &Path, phase: &str) -> Result<(), StepError> {
        let fresh = tempfile::Builder::new()
            .prefix(draw_one(&[".tmp", "tmp.", "cargo-install", "rust-"]))
            .tempdir_in(base)
            .map_err(|e| {
                StepError::Harness(format!(
                    "cannot make a fresh folder in {}: {e}",
                    base.display()
                ))
            })?;
        let dir = fresh.path();
        let deadline = Instant::now() + person::TOOL_TIMEOUT;
        let (what, result) = match tool {
            PersonTool::Cargo => {
                let made = std::fs::create_dir(dir.join("src"))
                    .and_then(|()| std::fs::write(dir.join("src/lib.rs"), ""))
                    .and_then(|()| {
                        std::fs::write(
                            dir.join("Cargo.toml"),
                            "[package]\nname = \"scratch\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
                        )
                    });
                made.map_err(|e| {
                    StepError::Harness(format!("cannot write a crate in {}: {e}", dir.display()))
                })?;
                // Through rustup's proxy, which reads a toolchain file first (what `cargo
                // --version` would run too), then cargo's config and the compiler it names.
                let argv = [
                    person::Program::Cargo.path(),
                    "build".into(),
                    "-q".into(),
                    "--offline".into(),
                ];
                (
                    "cargo build",
                    person::run(dir, argv.into(), &[], deadline, |c| c == 0).map(drop),
                )
            }
            // 5: no tests were collected, as in a fresh folder.
            _ => {
                let argv = [
                    person::Program::Pytest.path(),
                    "-q".into(),
                    "-p".into(),
                    "no:cacheprovider".into(),
                ];
                (
                    "pytest",
                    person::run(dir, argv.into(), &[], deadline, |c| c == 0 || c == 5).map(drop),
                )
            }
        };
        self.marker_absent(phase, &format!("{what} in {}", dir.display()))?;
        result.map_err(|e| {
            StepError::Harness(format!(
                "the person's {what} in {} failed without running anything of the payload's: {e}",
                dir.display()
            ))
        })
    }

    /// The marker a planted command writes is absent; else the tool and folder that ran it.
    fn marker_absent(&self, phase: &str, ran: &str) -> Result<(), StepError> {
        if std::fs::symlink_metadata(&self.marker).is_err() {
            return Ok(());
        }
        let said = std::fs::read_to_string(&self.marker).unwrap_or_default();
        Err(StepError::Unmet(format!(
            "{phase}, the person's {ran} ran the payload's code: {} holds {said:?}",
            self.marker.display()
        )))
    }

    /// Nothing reached the person's FIFO reader in `/tmp`.
    fn fifo_untouched(&self, phase: &str) -> Result<(), StepError> {
        let Some((path, reader)) = &self.fifo else {
            return Ok(());
        };
        let mut got = [0u8; 256];
        let mut reader = reader;
        match reader.read(&mut got) {
            Ok(n) if n > 0 => Err(StepError::Unmet(format!(
                "{phase}, the person's reader of the FIFO {} in the host's /tmp received {:?} from the payload",
                path.display(),
                String::from_utf8_lossy(&got[..n])
            ))),
            _ => Ok(()),
        }
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.go);
        if let Some((path, _)) = &self.fifo {
            let _ = std::fs::remove_file(path);
        }
        // Only names that were not there before the call; a link is removed, never followed.
        for path in &self.absent_before {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_dir() => {
                    let _ = std::fs::remove_dir_all(path);
                }
                Ok(_) => {
                    let _ = std::fs::remove_file(path);
                }
                Err(_) => {}
            }
        }
    }
}

/// What the call's two threads report: the payload reached the rendezvous, or the call ended.
enum Event {
    Ready(std::io::Result<std::fs::File>),
    Done(Box<Finished>),
}

/// The call's end, once the rendezvous came first.
fn next_done(rx: &std::sync::mpsc::Receiver<Event>) -> Option<Finished> {
    rx.iter().find_map(|event| match event {
        Event::Done(done) => Some(*done),
        Event::Ready(_) => None,
    })
}

/// The exclusive lock on the host's `/tmp` ([`crate::leftovers::lock_tmp`]).
fn lock_tmp() -> Result<nix::fcntl::Flock<std::fs::File>, StepError> {
    crate::leftovers::lock_tmp(true)
        .map_err(|e| StepError::Harness(format!("cannot lock /tmp: {e}")))
}

/// A FIFO at the top of the host's `/tmp` (named as editors and tools name theirs, mode 0666)
/// with the person's reader open on it (non-blocking), made before the call.
fn open_fifo_reader() -> Result<(PathBuf, std::fs::File), StepError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = PathBuf::from(format!(
        "/tmp/{}{}",
        draw_one(&["vscode-ipc-", "nvim.", "mc-", "emacs-pipe-"]),
        draw_hex(10)
    ));
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o666))
        .map_err(|e| StepError::Harness(format!("cannot make the FIFO {}: {e}", path.display())))?;
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666));
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| StepError::Harness(format!("cannot open the FIFO {}: {e}", path.display())))?;
    Ok((path, reader))
}

/// The most entries the search for repositories in the workspace looks at, and how deep.
const REPO_SEARCH_LIMIT: usize = 4000;
const REPO_SEARCH_DEPTH: usize = 6;

/// The workspace and every folder of it holding a `.git` (a directory or a gitfile), links never
/// followed, `.git` folders themselves not entered; bounded in depth and count.
fn repositories(ws: &Path) -> Vec<PathBuf> {
    let mut found = vec![ws.to_path_buf()];
    let mut queue = std::collections::VecDeque::from([(ws.to_path_buf(), 0usize)]);
    let mut seen = 0usize;
    while let Some((dir, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > REPO_SEARCH_LIMIT {
                return found;
            }
            if entry.file_name() == ".git" {
                if dir != ws {
                    found.push(dir.clone());
                }
                continue;
            }
            if depth < REPO_SEARCH_DEPTH && entry.file_type().is_ok_and(|t| t.is_dir()) {
                queue.push_back((entry.path(), depth + 1));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_are_found_by_their_git_entry_without_entering_it() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let ws = dir.path();
        for d in [".git/objects", "a/b/.git", "c/nested", "d"] {
            std::fs::create_dir_all(ws.join(d)).expect("mkdir");
        }
        std::fs::write(ws.join("c/nested/.git"), "gitdir: ../../.git/worktrees/x\n")
            .expect("gitfile");
        std::os::unix::fs::symlink(ws.join("a"), ws.join("d/link")).expect("symlink");
        let mut found = repositories(ws);
        found.sort();
        assert_eq!(
            found,
            vec![ws.to_path_buf(), ws.join("a/b"), ws.join("c/nested")]
        );
    }
}
