//! The survivor scan: the processes of one call (or one case), found in the host's process table
//! by a tag in their environment, and killed when they outlived what started them.
//!
//! The harness tags every confined launch of a case with [`TAG_VAR`] (see [`case_tag`]) and the
//! agent process of a `wire` case with its own tag; a scan reads only the pids handed out since
//! the call began ([`CallStart`]), so the host's other processes are never touched. A process
//! found is killed (stopped first, so a forking tree cannot outrun the kill), and reported by the
//! step whose contract promises no survivors.

use std::cell::RefCell;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The environment variable that tags every process of one call, so survivors can be found. It is
/// the one systemd gives every unit (32 hex digits), so a backend cannot tell a harness call
/// from a service's.
pub(crate) const TAG_VAR: &str = "INVOCATION_ID";

/// How long processes of a finished call may take to disappear (killed, being reaped).
pub(crate) const SURVIVOR_GRACE: Duration = Duration::from_millis(300);

/// How long processes of a case's calls may still take to end once the case is over, before the
/// case-end scan ([`in_case`]) kills and reports them. Longer than [`SURVIVOR_GRACE`]: this scan
/// is the catch-all for leaks no step promised against, and a runner's own helpers (srt's
/// `socat` bridges, which it stops as it exits) were seen ending a few hundred milliseconds late
/// at a load of 80. A step whose contract promises no survivors scans with
/// [`SURVIVOR_GRACE`] right after its call.
pub(crate) const CASE_END_GRACE: Duration = Duration::from_secs(3);

/// How long killing the survivors of one scan may take (a fork bomb forks while it is stopped).
const KILL_BOUND: Duration = Duration::from_secs(10);

thread_local! {
    /// The tag of the case running on this thread, and where it began.
    static CASE: RefCell<Option<(String, CallStart)>> = const { RefCell::new(None) };
}

/// Runs `body` as one case: every launch it makes through [`tag_launch`] carries a fresh tag;
/// afterwards every process of the case still alive is killed and returned (described).
pub(crate) fn in_case<T>(body: impl FnOnce() -> T) -> (T, Vec<String>) {
    let tag = crate::world::draw_hex(32);
    let since = CallStart::now();
    let outer = CASE.with(|c| c.replace(Some((tag.clone(), since))));
    let result = body();
    CASE.with(|c| *c.borrow_mut() = outer);
    let left = survivors(&tag, since, CASE_END_GRACE);
    (result, left)
}

/// The tag of the case running on this thread (a fresh one when none runs).
pub(crate) fn case_tag() -> String {
    CASE.with(|c| c.borrow().as_ref().map(|(t, _)| t.clone()))
        .unwrap_or_else(|| crate::world::draw_hex(32))
}

/// Tags a launch with the running case's tag, so its survivors are found and killed when the
/// case ends.
pub(crate) fn tag_launch(options: &mut sandbox_local::launch::LaunchOptions) {
    options.env.push((TAG_VAR.into(), case_tag().into()));
}

/// Processes whose environment carries `tag` that were alive right after the call returned and
/// can still run (not a zombie, not exiting, no SIGKILL pending) `grace` later ([`SURVIVOR_GRACE`] covers a runner whose
/// namespace is still being torn down by the kernel as it returns; the scenarios' survivors live
/// for seconds, so they cannot end by themselves within it; zero: at once). Every one found is
/// killed before this returns (with any it forked meanwhile), so it leaks into no later case.
pub(crate) fn survivors(tag: &str, since: CallStart, grace: Duration) -> Vec<String> {
    survivors_except(tag, since, grace, None)
}

/// [`survivors`], passing over `except` (the agent process whose calls are scanned: it carries
/// the tag it hands them, and it is meant to be alive).
pub(crate) fn survivors_except(
    tag: &str,
    since: CallStart,
    grace: Duration,
    except: Option<u32>,
) -> Vec<String> {
    let needle = format!("{TAG_VAR}={tag}");
    let except = except.map(|p| p.to_string());
    let tagged = |needle: &str, since| -> Vec<Tagged> {
        tagged(needle, since)
            .into_iter()
            .filter(|t| Some(&t.pid) != except.as_ref())
            .collect()
    };
    let mut left: Vec<Tagged> = tagged(&needle, since)
        .into_iter()
        .filter(|t| !t.ended)
        .collect();
    let found = still_there(&mut left, grace, || {
        tagged(&needle, since)
            .into_iter()
            .filter(|t| !t.ended)
            .map(|t| t.pid)
            .collect()
    });
    if !left.is_empty() {
        kill_tagged(&needle, since, except.as_deref());
    }
    found
}

/// Keeps of `left` what a scan (`live`, the pids it finds) still finds `grace` later (looked at
/// every 20 ms, so what ends sooner is let go at once), and describes each as `pid N: command`.
fn still_there(
    left: &mut Vec<Tagged>,
    grace: Duration,
    live: impl Fn() -> Vec<String>,
) -> Vec<String> {
    let deadline = Instant::now() + grace;
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = live();
        left.retain(|t| now.contains(&t.pid));
    }
    left.iter()
        .map(|t| format!("pid {}: {}", t.pid, t.cmdline))
        .collect()
}

/// The first few of `found`, and how many more: a fork bomb's survivors are thousands.
pub(crate) fn shown(found: &[String]) -> String {
    const FIRST: usize = 8;
    let mut text = found
        .iter()
        .take(FIRST)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if found.len() > FIRST {
        text.push_str(&format!("; and {} more", found.len() - FIRST));
    }
    text
}

/// Stops, then kills, every live process carrying `needle` (see [`kill_rounds`]).
fn kill_tagged(needle: &str, since: CallStart, except: Option<&str>) {
    kill_rounds(|| {
        tagged(needle, since)
            .into_iter()
            .filter(|t| !t.ended && Some(t.pid.as_str()) != except)
            .filter_map(|t| t.pid.parse().ok().map(Pid::from_raw))
            .collect()
    });
}

/// Stops, then kills, every process `live` lists, round after round, until a scan finds none
/// (or [`KILL_BOUND`]): a stopped process forks no more, and what it forked before it stopped is
/// found in the next round.
fn kill_rounds(live: impl Fn() -> Vec<Pid>) {
    let deadline = Instant::now() + KILL_BOUND;
    loop {
        let live = live();
        if live.is_empty() || Instant::now() >= deadline {
            return;
        }
        for pid in &live {
            let _ = kill(*pid, Signal::SIGSTOP);
        }
        for pid in &live {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Processes of the run still alive once its last case has ended: every process started since
/// the run began (`since`) that descends from [`crate::reaper::run_root`] (the supervisor, to
/// which a detached process is reparented, or certify itself), certify excepted, that can still
/// run `grace` later. No case claimed them: a payload that dropped its tag from its environment,
/// or a helper a runner started outside any call. Every one found is killed before this returns
/// (with what it forked meanwhile) and described.
pub(crate) fn left_by_run(since: CallStart, grace: Duration) -> Vec<String> {
    // With the supervisor gone (a backend killed it), this process's parent is some host
    // process (init): what is below it is not the run's, and nothing is killed.
    if let Some(supervisor) = crate::reaper::supervisor_gone() {
        return vec![format!(
            "certify's supervisor (pid {supervisor}) was killed during the run: the processes \
             the run left can no longer be told from the host's, so none was looked for"
        )];
    }
    let root = crate::reaper::run_root().to_string();
    let me = std::process::id().to_string();
    // Every pid, not only those handed out since the run began: a backend that sets
    // `ns_last_pid` (root) gives its daemon a pid below that window. The start time, the
    // kernel's, still tells the run's processes from older ones.
    let since = CallStart {
        last_pid: None,
        ..since
    };
    let below = || -> Vec<Tagged> {
        let all = started_since(since);
        let parents: std::collections::HashMap<&str, &str> = all
            .iter()
            .map(|p| (p.tagged.pid.as_str(), p.parent.as_str()))
            .collect();
        let descends = |pid: &str| {
            let mut at = pid;
            // Certify may have started before `since` (then it is not among `all`), so it is
            // a link of its own. Every step goes to a process started earlier (or to one outside
            // the run), so the walk ends; the bound is for a pid reused mid-scan.
            for _ in 0..=parents.len() {
                if at == me {
                    return true;
                }
                match parents.get(at) {
                    Some(parent) if *parent == root || *parent == me => return true,
                    Some(parent) => at = parent,
                    None => return false,
                }
            }
            false
        };
        all.iter()
            .filter(|p| p.tagged.pid != me && !p.tagged.ended && descends(&p.tagged.pid))
            .map(|p| Tagged {
                pid: p.tagged.pid.clone(),
                cmdline: p.tagged.cmdline.clone(),
                ended: false,
            })
            .collect()
    };
    let mut left = below();
    let found = still_there(&mut left, grace, || {
        below().into_iter().map(|t| t.pid).collect()
    });
    if !left.is_empty() {
        kill_rounds(|| {
            below()
                .into_iter()
                .filter_map(|t| t.pid.parse().ok().map(Pid::from_raw))
                .collect()
        });
    }
    found
}

/// A process started since a run began, with its parent's pid.
struct Started {
    tagged: Tagged,
    parent: String,
}

/// Every process (thread-group leader) started since `since`, with its parent and command line.
fn started_since(since: CallStart) -> Vec<Started> {
    let mut found = Vec::new();
    for pid in candidate_pids(since).pids().0 {
        let path = Path::new("/proc").join(pid.to_string());
        let pid = pid.to_string();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        if let Some(since) = since.ticks
            && start_ticks(&stat).is_none_or(|t| t < since)
        {
            continue;
        }
        let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
        if !is_leader(&status, &pid) {
            continue;
        }
        let Some(parent) = parent_pid(&stat) else {
            continue;
        };
        let (seen, ended) = view(&path, &pid, &status, &stat);
        found.push(Started {
            tagged: Tagged {
                cmdline: cmdline(&seen),
                ended,
                pid,
            },
            parent,
        });
    }
    found
}

/// The parent's pid in `/proc/<pid>/stat` (field 4, counted from the command name's last `)`).
fn parent_pid(stat: &str) -> Option<String> {
    sandbox::liveness::stat_field(stat, 1).map(str::to_owned)
}

/// A process's command line, its arguments joined by spaces (lossy for non-UTF-8 bytes).
fn cmdline(proc_dir: &Path) -> String {
    let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    let shown: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    shown.join(" ")
}

/// A process of a call, found by its tag.
struct Tagged {
    pid: String,
    cmdline: String,
    /// It can do nothing more: it has exited and waits to be reaped, or it is exiting, or a
    /// SIGKILL is pending for it (a runner's namespace init killed by its parent's death, whose
    /// end a loaded host may take longer than any grace to schedule).
    ended: bool,
}

/// The `/proc/<pid>/task/<tid>` of a thread of `pid` that still runs code (see
/// [`sandbox::liveness`]), or `None` once none can.
fn running_task(pid: &str) -> Option<std::path::PathBuf> {
    pid.parse().ok().and_then(sandbox::liveness::running_task)
}

/// Where to read the process at `path` (`/proc/<pid>`, or a thread of it that still runs when
/// its leader ended: such a process shows no environment or command line at `/proc/<pid>`)
/// and whether it has ended, from its leader's `status` and `stat`. The other threads are read
/// only when the leader ended, so a scan costs no more for the processes that are all of them.
fn view(path: &Path, pid: &str, status: &str, stat: &str) -> (std::path::PathBuf, bool) {
    if !sandbox::liveness::task_ended(status, stat) {
        return (path.to_path_buf(), false);
    }
    match running_task(pid) {
        Some(task) => (task, false),
        None => (path.to_path_buf(), true),
    }
}

/// True when the environment block `environ` (`/proc/<pid>/environ`) holds `needle`
/// (`NAME=value`) as one whole entry.
fn holds(environ: &[u8], needle: &str) -> bool {
    environ
        .split(|b| *b == 0)
        .any(|var| var == needle.as_bytes())
}

/// True when `/proc/<pid>/status` is that of a thread-group leader (`Tgid` is the pid).
fn is_leader(status: &str, pid: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .is_none_or(|tgid| tgid.trim() == pid)
}

/// Where a call begins, to tell its processes from the host's: the last pid handed out and the
/// clock ticks since boot a second ago. Every process the call starts gets a higher pid (pids
/// are handed out in order; only a wrap-around at `pid_max`, seen as a lower last pid later,
/// breaks that, and then start times decide) and starts after that tick.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallStart {
    last_pid: Option<u64>,
    ticks: Option<u64>,
}

impl CallStart {
    /// Now.
    pub(crate) fn now() -> CallStart {
        CallStart {
            last_pid: last_pid(),
            ticks: ticks_since_boot(),
        }
    }
}

/// The last pid the kernel handed out in this pid namespace.
fn last_pid() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Clock ticks since boot a second ago: every process a call starts starts after it.
fn ticks_since_boot() -> Option<u64> {
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let secs: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let ticks = (secs - 1.0).max(0.0) * hz as f64;
    Some(ticks as u64)
}

/// When a process started, in clock ticks since boot (`/proc/<pid>/stat`, field 22; the command
/// name in field 2 may hold spaces and parentheses, so fields are counted from its last `)`).
fn start_ticks(stat: &str) -> Option<u64> {
    sandbox::liveness::stat_field(stat, 19)?.parse().ok()
}

/// The pids a process of the call can have: those handed out since it began (`ns_last_pid` then
/// and now; across a wrap-around at `pid_max`, both ends of the range), so the host's other
/// processes, however many, are never read. When the kernel does not say, every pid in `/proc`.
fn candidate_pids(since: CallStart) -> Candidates {
    const MOST: u64 = 1 << 16;
    if let (Some(first), Some(now)) = (since.last_pid, last_pid()) {
        if now >= first && now - first <= MOST {
            return Candidates::HandedOut((first + 1..=now).collect());
        }
        let max: Option<u64> = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|m| m.trim().parse().ok());
        if let Some(max) = max.filter(|max| now < first && max - first + now <= MOST) {
            return Candidates::HandedOut((first + 1..max).chain(1..=now).collect());
        }
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Candidates::Every(Vec::new());
    };
    Candidates::Every(
        dir.filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
            .collect(),
    )
}

/// The pids a scan reads, and whether each was handed out since the call began.
enum Candidates {
    /// Handed out since the call began (no wrap-around past the call's first pid): none of
    /// them is an older process's, so a scan reads a candidate's start time only once its
    /// environment holds the tag.
    HandedOut(Vec<u64>),
    /// Every pid in `/proc`: the start time tells the call's processes from older ones.
    Every(Vec<u64>),
}

impl Candidates {
    /// The pids, and whether their start times must be read to pass over older processes.
    fn pids(self) -> (Vec<u64>, bool) {
        match self {
            Candidates::HandedOut(pids) => (pids, false),
            Candidates::Every(pids) => (pids, true),
        }
    }
}

/// The processes whose environment holds `needle`, among those started since the call began
/// (all, when that is unknown). A pid and a start time are the kernel's, so a process of the
/// call cannot hide behind them, and the host's long-lived processes (hundreds on a busy
/// machine) are passed over without reading anything of theirs.
fn tagged(needle: &str, since: CallStart) -> Vec<Tagged> {
    let mut found = Vec::new();
    let (pids, check_start) = candidate_pids(since).pids();
    for pid in pids {
        let path = Path::new("/proc").join(pid.to_string());
        let pid = pid.to_string();
        let old = |stat: &str| {
            since
                .ticks
                .is_some_and(|since| start_ticks(stat).is_none_or(|t| t < since))
        };
        // Of every pid in /proc, the host's older processes are passed over by their start
        // time before anything else of theirs is read.
        let stat = if check_start {
            let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
            if old(&stat) {
                continue;
            }
            Some(stat)
        } else {
            None
        };
        // Most candidates are other calls' processes: an environment that reads and lacks the
        // tag settles it (every thread of a process shares the one environment, so reading it
        // through another thread, below, could not find the tag either).
        if std::fs::read(path.join("environ"))
            .is_ok_and(|env| !env.is_empty() && !holds(&env, needle))
        {
            continue;
        }
        let stat = match stat {
            Some(stat) => stat,
            None => {
                // A handed-out pid is no older process's, unless pids wrapped around past the
                // call's first one while it ran: the start time settles that too.
                let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
                if old(&stat) {
                    continue;
                }
                stat
            }
        };
        // A thread of a process is readable at /proc/<tid> too (never listed): its process is
        // counted under its leader, and a thread of the harness or of the agent is not a
        // process of the call.
        let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
        if !is_leader(&status, &pid) {
            continue;
        }
        // Read through a thread that still runs: a process whose leader thread ended shows no
        // environment at /proc/<pid>, and runs on all the same.
        let (seen, ended) = view(&path, &pid, &status, &stat);
        let Ok(environ) = std::fs::read(seen.join("environ")) else {
            continue;
        };
        if holds(&environ, needle) {
            found.push(Tagged {
                pid: pid.to_owned(),
                cmdline: cmdline(&seen),
                ended,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "1234 (a ) b) (c) S 1 2 3 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 98765 1000";
        assert_eq!(start_ticks(stat), Some(98765));
        // This process started before now (less a second, give or take a tick).
        let me = std::fs::read_to_string("/proc/self/stat").expect("stat");
        let since = ticks_since_boot().expect("uptime");
        assert!(start_ticks(&me).expect("start") <= since + 101);
    }

    #[test]
    fn a_process_started_during_the_call_is_found_and_one_from_before_is_passed_over() {
        let tag = format!("{TAG_VAR}=test-{}", std::process::id());
        let before = std::process::Command::new("sleep")
            .arg("5")
            .env(TAG_VAR, format!("test-{}", std::process::id()))
            .spawn()
            .expect("sleep");
        std::thread::sleep(Duration::from_millis(1200));
        let since = CallStart::now();
        let during = std::process::Command::new("sleep")
            .arg("5")
            .env(TAG_VAR, format!("test-{}", std::process::id()))
            .spawn()
            .expect("sleep");
        // A spawn returns as the child execs, before the kernel has laid out its environment.
        std::thread::sleep(Duration::from_millis(100));
        let pids: Vec<String> = tagged(&tag, since).into_iter().map(|t| t.pid).collect();
        let during_pid = during.id().to_string();
        let unknown = CallStart {
            last_pid: None,
            ticks: None,
        };
        let all: Vec<String> = tagged(&tag, unknown).into_iter().map(|t| t.pid).collect();
        // By start time alone (as after a wrap-around of the pids).
        let by_time = CallStart {
            last_pid: None,
            ..since
        };
        let timed: Vec<String> = tagged(&tag, by_time).into_iter().map(|t| t.pid).collect();
        for mut child in [before, during] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(pids, vec![during_pid.clone()]);
        assert_eq!(timed, vec![during_pid]);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_thread_of_a_tagged_process_is_not_a_process_of_its_own() {
        let me = std::process::id().to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let tid = nix::unistd::gettid().to_string();
            let _ = tx.send(tid);
            let _ = stopped.recv();
        });
        let tid = rx.recv().expect("tid");
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).expect("status");
        assert!(!is_leader(&status, &tid), "{status}");
        let own = std::fs::read_to_string(format!("/proc/{me}/status")).expect("status");
        assert!(is_leader(&own, &me));
        let _ = stop.send(());
        thread.join().expect("join");
    }

    #[test]
    fn survivors_are_killed_with_what_they_forked() {
        let tag = format!("kill-{}", std::process::id());
        let since = CallStart::now();
        // A shell that keeps forking sleepers, as a small bomb would.
        let mut bomb = std::process::Command::new("sh")
            .args(["-c", "for i in $(seq 50); do sleep 30 & done; sleep 30"])
            .env(TAG_VAR, &tag)
            .spawn()
            .expect("sh");
        let needle = format!("{TAG_VAR}={tag}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while tagged(&needle, since).len() < 10 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let found = survivors(&tag, since, Duration::ZERO);
        let _ = bomb.wait();
        let left: Vec<Tagged> = tagged(&needle, since)
            .into_iter()
            .filter(|t| !t.ended)
            .collect();
        assert!(found.len() >= 10, "{found:?}");
        assert!(
            left.is_empty(),
            "{:?}",
            left.iter().map(|t| &t.cmdline).collect::<Vec<_>>()
        );
    }
}
