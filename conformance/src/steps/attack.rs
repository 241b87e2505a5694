//! The `attack` step: a hostile payload confined by the backend in a fresh world, then the host is
//! checked: the named files, a diff of the whole world, the `/etc` probe, leftover mounts.
//!
//! Every attack stays harmless when it succeeds: it writes only inside its world (and the one
//! unique `/etc` name, removed afterwards), and a mount it leaves on the world is detached before
//! the world is removed.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sandbox::{
    ClassEnforcement, ClassReport, Classification, EnforcementClass, ExtraRoot, ProviderPolicy,
    SandboxProvider,
};
use sandbox_local::launch::{self, Finished, LaunchOptions};

use crate::backends::Backend;
use crate::scenario::{AttackExpect, AttackOutcome, AttackStep, WorkspaceSpelling};
use crate::steps::StepError;
use crate::survivors::{CallStart, SURVIVOR_GRACE, TAG_VAR, survivors};
use crate::world::World;

/// The longest `after_ms` a scenario may ask for.
const MAX_AFTER: Duration = Duration::from_millis(5000);

/// The lowest descriptor number the held descriptor gets.
const HELD_FD_MIN: i32 = 64;

/// The call's timeout when the scenario names none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// How much later than its timeout a timed-out call may return: the contract's bound (every
/// process of the call gone within 2 s of its timeout, a fork bomb's too), which covers the
/// supervisor's grace for output still held open and scheduling on a loaded host (1.5 s was
/// missed by 0.1-0.3 s at a load of 25-46 while a fork bomb was being reaped).
const TIMEOUT_SLACK: Duration = Duration::from_millis(2000);

/// What the harness runs before the scenario's script: the canary that proves the payload ran.
const PROLOGUE: &str = "{ printf ran > \"$CANARY\"; } 2>/dev/null\n";

/// The paths of one attack's world and how the payload sees them.
struct Stage {
    world: World,
    /// The workspace as the policy spells it.
    spelled: PathBuf,
    /// The payload's working directory.
    cwd: PathBuf,
    /// The temp dir as the policy spells it.
    temp_dir: Option<PathBuf>,
    /// The file the held descriptor appends to.
    held_file: PathBuf,
    /// A unique name under `/etc` the payload may try to create.
    etc_probe: PathBuf,
    /// Where the prologue leaves its canary.
    canary: PathBuf,
    /// Tags every process of the call (in its environment).
    tag: String,
}

impl Stage {
    fn new(step: &AttackStep) -> Result<Stage, StepError> {
        let world = World::new().map_err(super::world_error)?;
        let spelled = world.workspace(step.workspace);
        let cwd = match step.workspace {
            WorkspaceSpelling::Missing | WorkspaceSpelling::File => world.ws.clone(),
            _ => spelled.clone(),
        };
        let temp_dir = step.temp_dir.map(|t| world.temp_dir(t));
        let held_file = world.outside.join("held");
        std::fs::write(&held_file, "held")
            .map_err(|e| StepError::Harness(format!("cannot make the held file: {e}")))?;
        // Names an ordinary system could have: a backup of a file /etc has, a state file.
        // Never a name the host already has (it is removed afterwards).
        let etc_probe = std::iter::repeat_with(|| {
            PathBuf::from(format!(
                "/etc/{}.{}",
                crate::world::draw_one(&["hosts", "motd", "environment", "profile", "issue"]),
                crate::world::draw_hex(6)
            ))
        })
        .take(16)
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .ok_or_else(|| StepError::harness("16 drawn /etc probe names all exist"))?;
        let canary = world
            .tmp
            .join(crate::world::draw_one(&[".state", "last-run", ".done"]));
        let tag = crate::world::draw_hex(32);
        if step.repo {
            if step.linked {
                world.linked_repo().map_err(StepError::harness)?;
            } else {
                world.init_repo(&world.ws).map_err(StepError::harness)?;
            }
            if let Some(setup) = &step.setup {
                world
                    .host_bash(&world.ws, setup)
                    .map_err(StepError::harness)?;
            }
        }
        if step.extra_root {
            world
                .extra_root()
                .map_err(|e| StepError::Harness(format!("cannot make the extra root: {e}")))?;
        }
        Ok(Stage {
            world,
            spelled,
            cwd,
            temp_dir,
            held_file,
            etc_probe,
            canary,
            tag,
        })
    }

    /// `%WS%` and friends replaced by this world's paths.
    fn expand(&self, text: &str) -> String {
        self.world.expand_with(
            text,
            &self.spelled,
            &[("ETC_PROBE", self.etc_probe.display().to_string())],
        )
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        // Only ever a file this attack named; never anything else under /etc.
        if std::fs::symlink_metadata(&self.etc_probe).is_ok_and(|m| !m.is_dir()) {
            let _ = std::fs::remove_file(&self.etc_probe);
        }
    }
}

/// A descriptor on a file outside, inheritable only while the call is made.
struct Held(OwnedFd);

impl Held {
    /// Opens `path` for append at a descriptor number of at least [`HELD_FD_MIN`], so it cannot
    /// be confused with a descriptor the launch maps (the status channel is 3).
    fn open(path: &Path) -> Result<Held, StepError> {
        use nix::fcntl::{FcntlArg, fcntl};
        use std::os::fd::FromRawFd;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| StepError::Harness(format!("cannot open the held file: {e}")))?;
        let high = fcntl(&file, FcntlArg::F_DUPFD_CLOEXEC(HELD_FD_MIN))
            .map_err(|e| StepError::Harness(format!("cannot move the held descriptor up: {e}")))?;
        // SAFETY: `high` was just returned by F_DUPFD_CLOEXEC: a fresh descriptor nothing else
        // in this process refers to, so taking sole ownership of it is sound.
        #[allow(unsafe_code)]
        let owned = unsafe { OwnedFd::from_raw_fd(high) };
        Ok(Held(owned))
    }

    /// Clears or sets close-on-exec. The harness is multi-threaded: while it is cleared, any
    /// process this harness spawns may inherit it (the reference spawn path closes it).
    fn inheritable(&self, yes: bool) -> Result<(), StepError> {
        use nix::fcntl::{FcntlArg, FdFlag, fcntl};
        let flags = if yes {
            FdFlag::empty()
        } else {
            FdFlag::FD_CLOEXEC
        };
        fcntl(&self.0, FcntlArg::F_SETFD(flags))
            .map(|_| ())
            .map_err(|e| {
                StepError::Harness(format!(
                    "cannot change close-on-exec of the held descriptor: {e}"
                ))
            })
    }
}

/// A FIFO the payload opens for reading first thing (its descriptor 9, inherited by every process
/// it starts) and whose write end only the harness holds. The payload takes the one byte the
/// harness left in it, which says it reached the pipe; once a write by the harness finds no
/// reader (`EPIPE`), no process of the call holds it any more, so a check made `after_ms` later
/// can be made now. Reading is allowed in every mode, so the read-only payload reaches it too.
/// When the payload never reached it (a backend that hides the world's directory), the harness
/// waits the whole `after_ms`.
struct Release {
    path: PathBuf,
    write: OwnedFd,
}

impl Release {
    fn open(path: &Path) -> Result<Release, StepError> {
        use nix::fcntl::{OFlag, open};
        use nix::sys::stat::Mode;
        let fail = |what: &str, e: nix::Error| {
            StepError::Harness(format!("cannot {what} the release pipe: {e}"))
        };
        nix::unistd::mkfifo(path, Mode::from_bits_truncate(0o644)).map_err(|e| fail("make", e))?;
        let flags = OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        // A write end opens without blocking only while a reader exists: hold one meanwhile.
        let read =
            open(path, OFlag::O_RDONLY | flags, Mode::empty()).map_err(|e| fail("open", e))?;
        let write =
            open(path, OFlag::O_WRONLY | flags, Mode::empty()).map_err(|e| fail("open", e))?;
        nix::unistd::write(&write, b"g").map_err(|e| fail("fill", e))?;
        drop(read);
        Ok(Release {
            path: path.to_path_buf(),
            write,
        })
    }

    /// The script line that opens the read end as descriptor 9 and takes the byte.
    fn prologue(&self) -> String {
        format!(
            "{{ exec 9<{}; read -r -n 1 -u 9 _; }} 2>/dev/null\n",
            crate::world::shell_quote(self.path.as_os_str())
        )
    }

    /// Bytes waiting in the pipe.
    fn pending(&self) -> Option<i32> {
        let mut n: nix::libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int through the pointer, which points at `n`, alive for
        // the call; the descriptor is our own open FIFO. nix has no wrapper for this ioctl.
        #[allow(unsafe_code)]
        let rc =
            unsafe { nix::libc::ioctl(self.write.as_raw_fd(), nix::libc::FIONREAD, &raw mut n) };
        (rc == 0).then_some(n)
    }

    /// Waits until no process of the call holds the pipe, or `longest`, whichever comes first.
    fn wait(&self, longest: Duration) {
        let deadline = Instant::now() + longest;
        if self.pending() != Some(0) {
            // The payload never took the byte: nothing tells when its processes are gone.
            std::thread::sleep(longest);
            return;
        }
        while Instant::now() < deadline {
            if let Err(nix::errno::Errno::EPIPE) = nix::unistd::write(&self.write, b"x") {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// How the call came out.
enum Came {
    /// `confine` refused.
    Refused(String),
    /// The launch ran (or the runner failed), taking this long; the backend reported these
    /// classes.
    Launched(
        Box<Finished>,
        Duration,
        Vec<(EnforcementClass, ClassReport)>,
    ),
}

pub(super) fn run(backend: &Backend, step: &AttackStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let after = step.after_ms.map(Duration::from_millis).unwrap_or_default();
    if after > MAX_AFTER {
        return Err(StepError::Unmet(format!(
            "after_ms {} exceeds the bound of {} ms",
            after.as_millis(),
            MAX_AFTER.as_millis()
        )));
    }
    let since = CallStart::now();
    let stage = Stage::new(step)?;
    // The person's tools while the call runs: set up before the world's snapshot.
    let person = match &step.during {
        Some(d) => Some(super::during::Person::new(
            d,
            PathBuf::from(stage.expand(&d.marker)),
            &stage.world.ws,
            stage.temp_dir.clone(),
            &stage.world.dir,
        )?),
        None => None,
    };
    // A call checked a while after it returned holds a pipe from its first line on, so every
    // process it starts inherits it: the wait ends as soon as the last of them is gone.
    let pipe = if after.is_zero() {
        None
    } else {
        Some(Release::open(&stage.world.dir.join(".lock"))?)
    };
    let before = stage.world.snapshot();
    let mut policy = ProviderPolicy::new(step.mode, stage.spelled.clone())
        .with_roots(|r| r.with_temp_dir(stage.temp_dir.clone()))
        .with_cwd(&stage.cwd);
    if step.extra_root {
        policy = policy
            .with_roots(|r| r.with_extra_roots(vec![ExtraRoot::new(stage.world.extra.clone())]));
    }
    if let Some(paths) = &step.protected_paths {
        policy = policy.with_roots(|r| r.with_protected_paths(paths.clone()));
    }
    let mut script = String::from(PROLOGUE);
    if let Some(pipe) = &pipe {
        script.push_str(&pipe.prologue());
    }
    script.push_str(&step.run);
    if person.is_some() {
        script.push_str(&super::during::Person::epilogue());
    }
    let held = if step.hold_fd {
        Some(Held::open(&stage.held_file)?)
    } else {
        None
    };
    let d = &stage.world.dir;
    let mut vars: Vec<(&str, OsString)> = vec![
        ("WS", stage.spelled.clone().into_os_string()),
        ("OUTSIDE", stage.world.outside.clone().into_os_string()),
        ("TMP", stage.world.tmp.clone().into_os_string()),
        ("WORLD", d.clone().into_os_string()),
        ("EXTRA", stage.world.extra.clone().into_os_string()),
        ("ETC_PROBE", stage.etc_probe.clone().into_os_string()),
        ("CANARY", stage.canary.clone().into_os_string()),
        ("CALLER", std::process::id().to_string().into()),
    ];
    if let Some(h) = &held {
        vars.push(("HELD", h.0.as_raw_fd().to_string().into()));
    }
    vars.extend(person.iter().flat_map(|p| p.vars()));
    let dressed = crate::request::dress(&script, vars);
    let argv = dressed.argv;
    let twin = crate::metamorphic::Twin::new(provider.clone(), &stage.world, true)?;
    let answer = twin.confine(&argv, &policy);
    twin.verdict()?;
    let mut while_running: Result<(), StepError> = Ok(());
    let came = match answer {
        Err(e) => Came::Refused(e.to_string()),
        Ok(confined) => {
            let mut options = LaunchOptions::in_dir(&stage.cwd);
            options.env = dressed.env.clone();
            options.env.push((TAG_VAR.into(), stage.tag.clone().into()));
            match &stage.temp_dir {
                Some(t) => options
                    .env
                    .push(("TMPDIR".into(), t.clone().into_os_string())),
                None => options.env_remove.push("TMPDIR".into()),
            }
            options.timeout = Some(
                step.timeout_ms
                    .map(Duration::from_millis)
                    .unwrap_or(DEFAULT_TIMEOUT),
            );
            if let Some(h) = &held {
                h.inheritable(true)?;
            }
            let guard = twin.call_guard(&policy);
            let started = Instant::now();
            let done = match &person {
                Some(p) => {
                    let (done, found) = p.launch(&confined, &options, guard);
                    while_running = found;
                    done
                }
                None => launch::run_guarded(&confined, &options, guard),
            };
            let took = started.elapsed();
            if let Some(h) = &held {
                h.inheritable(false)?;
            }
            let classes = EnforcementClass::ALL
                .iter()
                .map(|c| (*c, confined.class_report(*c)))
                .collect();
            Came::Launched(Box::new(done), took, classes)
        }
    };
    drop(held);
    // No process of the call may outlive it: look for the call's tag right after it returned.
    let survivors = survivors(&stage.tag, since, SURVIVOR_GRACE);
    if let Some(pipe) = &pipe {
        pipe.wait(after);
    }
    // Said with what the launch reported, as the checks before it say it.
    let said = |e: StepError| match e {
        StepError::Unmet(m) => StepError::Unmet(format!("{m}; {}", launch_summary(backend, &came))),
        other => other,
    };
    while_running.map_err(said)?;
    check(backend, step, &stage, &before, &came)?;
    if let Some(host) = &step.host_git {
        host_git(&stage, host).map_err(said)?;
    }
    if let Some(p) = &person {
        p.act("after the call").map_err(said)?;
    }
    if survivors.is_empty() {
        Ok(())
    } else {
        Err(StepError::Unmet(format!(
            "{} process(es) of the call outlived it (killed now): {}",
            survivors.len(),
            crate::survivors::shown(&survivors)
        )))
    }
}

/// The person's next `git commit` and `git status`, run by the harness outside the sandbox in
/// `host.dir` of the workspace: both must succeed (the repository still works) and the marker a
/// planted hook or fsmonitor would create must be absent.
fn host_git(stage: &Stage, host: &crate::scenario::HostGit) -> Result<(), StepError> {
    let dir = stage.world.ws.join(&host.dir);
    let marker = PathBuf::from(stage.expand(&host.marker));
    if let Some(expected) = &host.git_dir {
        let expected = PathBuf::from(stage.expand(expected));
        let found = super::person::git_dir(&dir).map_err(|e| {
            StepError::Unmet(format!("the person's git rev-parse outside failed: {e}"))
        })?;
        let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => a == b,
        };
        if !same(&found, &expected) {
            return Err(StepError::Unmet(format!(
                "the person's git in {} finds the repository {} (not {}): its config's pager, aliases and hooks are the payload's",
                host.dir,
                found.display(),
                expected.display()
            )));
        }
    }
    // As the world's own set-up scripts do, the person's environment names the outside folder.
    let ran = super::person::git(
        &dir,
        &[
            &["add", "-A"],
            &["commit", "-qm", "person"],
            &["status", "--short"],
        ],
        &[("OUTSIDE", stage.world.outside.as_os_str())],
        super::person::OnFailure::Stop,
    );
    if std::fs::symlink_metadata(&marker).is_ok() {
        let said = std::fs::read_to_string(&marker).unwrap_or_default();
        return Err(StepError::Unmet(format!(
            "the person's git commit and git status outside ran the payload's code: {} holds {said:?}",
            marker.display()
        )));
    }
    ran.map(drop).map_err(|e| {
        StepError::Unmet(format!(
            "the person's git commit or git status outside failed: {e}"
        ))
    })
}

fn check(
    backend: &Backend,
    step: &AttackStep,
    stage: &Stage,
    before: &crate::world::Snapshot,
    came: &Came,
) -> Result<(), StepError> {
    let describe = || match came {
        Came::Refused(_) => launch_summary(backend, came),
        Came::Launched(done, took, _) => format!(
            "{}, {}, timed out {}, {} ms, stdout {:?}, stderr {:?}{}",
            launch_summary(backend, came),
            serde_json::to_string(&done.classification).unwrap_or_default(),
            done.timed_out,
            took.as_millis(),
            String::from_utf8_lossy(&done.stdout),
            tail(&done.stderr),
            if done.dropped.any() {
                format!(
                    ", output cut ({} bytes of stdout and {} of stderr dropped)",
                    done.dropped.stdout, done.dropped.stderr
                )
            } else {
                String::new()
            },
        ),
    };
    let fail = |what: String| Err(StepError::Unmet(format!("{what}; {}", describe())));
    let expect: &AttackExpect = &step.expect;
    let canary = std::fs::symlink_metadata(&stage.canary).is_ok();
    // How it ended.
    let refused = match came {
        Came::Refused(_) => true,
        Came::Launched(done, _, _) => {
            // A call this harness stopped at its deadline before the runner reported the payload's
            // start reads as a runner failure; where the case expects the timeout, that is what
            // ended it (a runner slow to start on a loaded host: firejail takes 100 to 400 ms).
            matches!(done.classification, Classification::RunnerFailure { .. })
                && !(done.timed_out && matches!(expect.outcome, AttackOutcome::TimedOut))
        }
    };
    if refused {
        if let Came::Launched(done, _, _) = came
            && (!done.stdout.is_empty() || canary)
        {
            return fail("the runner failure is a lie: the payload ran (stdout or canary)".into());
        }
        if !matches!(
            expect.outcome,
            AttackOutcome::Refused | AttackOutcome::RefusedOrRan
        ) {
            return fail(format!(
                "expected {:?}, the call was refused",
                expect.outcome
            ));
        }
    } else if let Came::Launched(done, took, _) = came {
        if let Classification::StartFailed { .. } = done.classification {
            return fail("the launch could not start".into());
        }
        match expect.outcome {
            AttackOutcome::Refused => {
                return fail("expected a refusal (nothing run), the payload ran".into());
            }
            AttackOutcome::TimedOut => {
                let limit = Duration::from_millis(step.timeout_ms.unwrap_or(0)) + TIMEOUT_SLACK;
                if !done.timed_out {
                    return fail("expected the timeout to end the call".into());
                }
                if *took > limit {
                    return fail(format!(
                        "the call outlived its timeout: returned after {} ms (limit {} ms)",
                        took.as_millis(),
                        limit.as_millis()
                    ));
                }
            }
            AttackOutcome::Ran | AttackOutcome::RefusedOrRan => {
                if done.timed_out {
                    return fail("the call timed out".into());
                }
                if let Some(exit) = expect.exit
                    && done.exit_code() != Some(exit)
                {
                    return fail(format!("expected exit code {exit}"));
                }
                if let Some(want) = &expect.stdout
                    && done.stdout != stage.expand(want).as_bytes()
                {
                    return fail(format!("expected stdout exactly {want:?}"));
                }
            }
        }
        let stdout = String::from_utf8_lossy(&done.stdout);
        for needle in &expect.stdout_contains {
            if !stdout.contains(&stage.expand(needle)) {
                return fail(format!("stdout lacks {needle:?}"));
            }
        }
        // What was cut cannot be shown to lack anything: a backend (or its wrapper) that floods
        // stdout past the cap must not pass a `stdout_lacks` by pushing the evidence out.
        if !expect.stdout_lacks.is_empty() && done.dropped.stdout > 0 {
            return fail(format!(
                "stdout was cut at the output cap ({} bytes dropped): stdout_lacks cannot be checked",
                done.dropped.stdout
            ));
        }
        for needle in &expect.stdout_lacks {
            if stdout.contains(&stage.expand(needle)) {
                return fail(format!("stdout must not contain {needle:?}"));
            }
        }
    }
    // The host.
    if std::fs::symlink_metadata(&stage.etc_probe).is_ok() {
        return fail(format!(
            "the payload created {} (removed again)",
            stage.etc_probe.display()
        ));
    }
    // A backend that reported the class short of full has said it may not keep these files;
    // one that reported it in full is held to them.
    let admitted = match (expect.files_or_reported, came) {
        (Some(class), Came::Launched(_, _, classes)) => classes
            .iter()
            .any(|(c, r)| *c == class && r.enforcement != ClassEnforcement::Full),
        _ => false,
    };
    for (path, want) in &expect.files {
        if let Err(e) = super::check_file(Path::new(&stage.expand(path)), want)
            && !admitted
        {
            return fail(e.to_string());
        }
    }
    if std::fs::read_to_string(&stage.held_file).ok().as_deref() != Some("held") {
        return fail(format!(
            "the file behind the held descriptor changed: {:?}",
            std::fs::read_to_string(&stage.held_file).ok()
        ));
    }
    let mounted = stage.world.mounts();
    let stuck = stage.world.unmount_leftovers();
    let mut may_change: Vec<PathBuf> = expect
        .may_change
        .iter()
        .map(|p| PathBuf::from(stage.expand(p)))
        .collect();
    may_change.push(stage.canary.clone());
    let diff = before.diff(&stage.world.snapshot(), &may_change);
    if !diff.is_empty() {
        return fail(format!(
            "the world changed outside what the case allows:\n  {}",
            diff.join("\n  ")
        ));
    }
    if !mounted.is_empty() {
        return fail(format!(
            "the payload mounted over the world in the caller's mount namespace: {mounted:?} (detached again; still there: {stuck:?})"
        ));
    }
    Ok(())
}

/// How a launch reported `class`: its enforcement, and what it left ungoverned.
/// How the launch went, in the words every failure of an attack step starts its account with:
/// the backend, the protected class it reported and the exit (or why confine refused).
fn launch_summary(backend: &Backend, came: &Came) -> String {
    match came {
        Came::Refused(why) => format!("{}: confine refused: {why}", backend.name),
        Came::Launched(done, _, classes) => format!(
            "{}: protected paths {}, exit {:?}",
            backend.name,
            shown(classes, EnforcementClass::Protected),
            done.exit_code()
        ),
    }
}

fn shown(classes: &[(EnforcementClass, ClassReport)], class: EnforcementClass) -> String {
    classes
        .iter()
        .find(|(c, _)| *c == class)
        .map(|(_, r)| {
            // A path per protected pattern no bind covers is one fact: said once, counted.
            const UNCOVERED: &str = "protected path not covered";
            let (uncovered, rest): (Vec<&String>, Vec<&String>) =
                r.ungoverned.iter().partition(|u| u.starts_with(UNCOVERED));
            let mut named: Vec<String> = rest.into_iter().cloned().collect();
            if !uncovered.is_empty() {
                named.insert(
                    0,
                    format!(
                        "{UNCOVERED} (missing or behind a symlink): {} paths",
                        uncovered.len()
                    ),
                );
            }
            if named.is_empty() {
                r.enforcement.to_string()
            } else {
                format!("{} ({})", r.enforcement, named.join("; "))
            }
        })
        .unwrap_or_default()
}

/// The last lines of stderr, for messages.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(6)..].join(" | ")
}
