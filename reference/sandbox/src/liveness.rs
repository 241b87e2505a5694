//! Whether a process can still run code, judged by every one of its threads.
//!
//! A process's first thread (its leader) may end by itself (`SYS_exit`, not `exit_group`) while
//! its other threads run on. `/proc/<pid>` then looks like a zombie's: its state is `Z`, its
//! environment, command line and namespace links cannot be read. Yet the process runs, writes and
//! forks like any other. Every check that finds a payload's processes (the launcher's clean-up,
//! the harness's survivor scans, its mount-namespace sweeps) asks here, and reads what it needs
//! through the thread this module names.
//!
//! ```
//! use sandbox::liveness::task_ended;
//! let stat = "7 (sh) S 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0";
//! assert!(!task_ended("State:\tS (sleeping)\nSigPnd:\t0000000000000000\n", stat));
//! assert!(task_ended("State:\tZ (zombie)\n", stat));
//! ```

use std::path::PathBuf;

/// Field `n` of a `/proc/<pid>/stat` line counted after the command name (0: the state letter,
/// 1: the parent's pid, 6: the flags, 19: the start time in clock ticks): the name is in
/// parentheses and may hold anything, spaces and `)` included, so fields are counted from its
/// last `)`.
///
/// ```
/// use sandbox::liveness::stat_field;
/// let stat = "7 (a ) b) S 1 7 7 0 -1 4194560";
/// assert_eq!(stat_field(stat, 0), Some("S"));
/// assert_eq!(stat_field(stat, 1), Some("1"));
/// ```
pub fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let end = stat.rfind(')')?;
    stat[end + 1..].split_ascii_whitespace().nth(n)
}

/// True when one thread (its `/proc/.../status` and `/proc/.../stat`) runs none of its code
/// again: it is a zombie or dead, it is exiting (`PF_EXITING` in its flags), or a `SIGKILL` is
/// pending for it or for its whole process.
pub fn task_ended(status: &str, stat: &str) -> bool {
    const SIGKILL_BIT: u64 = 1 << (9 - 1);
    const PF_EXITING: u64 = 0x4;
    let by_status = status.lines().any(|line| {
        let mut parts = line.split_whitespace();
        match parts.next() {
            Some("State:") => matches!(parts.next(), Some("Z" | "X")),
            Some("SigPnd:" | "ShdPnd:") => parts
                .next()
                .and_then(|mask| u64::from_str_radix(mask, 16).ok())
                .is_some_and(|mask| mask & SIGKILL_BIT != 0),
            _ => false,
        }
    });
    // "pid (comm) state ppid pgrp session tty tpgid flags ...": comm may hold anything but the
    // last ')', and the flags are the seventh field after it.
    let exiting = stat_field(stat, 6)
        .and_then(|flags| flags.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_EXITING != 0);
    by_status || exiting
}

/// The `/proc/<pid>/task/<tid>` directory of a thread of process `pid` that can still run code
/// (the leader first, the one usually alive), or `None` once every thread has ended or the
/// process is gone. Read a process's environment, command line and namespaces through it: they
/// stay readable there while a live thread remains, whatever became of the leader.
pub fn running_task(pid: u32) -> Option<PathBuf> {
    running_task_in(&PathBuf::from(format!("/proc/{pid}/task")), pid)
}

/// [`running_task`] over `tasks`, a process's `task` directory (a test's own tree stands in for
/// `/proc`: a thread that ended is listed there only for an instant on a real kernel).
fn running_task_in(tasks: &std::path::Path, pid: u32) -> Option<PathBuf> {
    let alive = |dir: &PathBuf| {
        let status = std::fs::read_to_string(dir.join("status"));
        let stat = std::fs::read_to_string(dir.join("stat"));
        matches!((status, stat), (Ok(status), Ok(stat)) if !task_ended(&status, &stat))
    };
    let leader = tasks.join(pid.to_string());
    if alive(&leader) {
        return Some(leader);
    }
    std::fs::read_dir(tasks)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|dir| *dir != leader && alive(dir))
}

/// True while some thread of process `pid` can still run code (see [`running_task`]).
pub fn can_run(pid: u32) -> bool {
    running_task(pid).is_some()
}

/// True once every thread of process `pid` has exited (each is a zombie or dead, whether or not
/// the process was reaped), or the process is gone: what waits for a process to be reapable
/// asks this, since a thread about to die (a `SIGKILL` pending) is not yet reapable.
pub fn every_thread_exited(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.filter_map(Result::ok).all(|task| {
        std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
            stat_field(&stat, 0).is_none_or(|state| state == "Z" || state == "X")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: &str, sig: &str, shd: &str) -> String {
        format!("Name:\tbwrap\nState:\t{state}\nSigPnd:\t{sig}\nShdPnd:\t{shd}\n")
    }

    const RUNNING: &str = "9 (a) b) S 1 9 9 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";

    #[test]
    fn a_thread_that_is_a_zombie_exiting_or_about_to_be_killed_has_ended() {
        let clear = "0000000000000000";
        let kill = "0000000000000100";
        let term = "0000000000004000";
        assert!(!task_ended(&status("S (sleeping)", clear, clear), RUNNING));
        assert!(!task_ended(&status("R (running)", term, term), RUNNING));
        assert!(task_ended(&status("Z (zombie)", clear, clear), RUNNING));
        assert!(task_ended(&status("X (dead)", clear, clear), RUNNING));
        assert!(task_ended(&status("S (sleeping)", kill, clear), RUNNING));
        assert!(task_ended(&status("S (sleeping)", clear, kill), RUNNING));
        // PF_EXITING (0x4) among the flags, read past a command name holding ") ".
        let exiting = RUNNING.replace("4194560", "4194564");
        assert!(task_ended(&status("S (sleeping)", clear, clear), &exiting));
        // Unreadable fields decide nothing.
        assert!(!task_ended("State:\tS\nSigPnd:\tzz\n", "garbage"));
    }

    /// A process's threads as `/proc/<pid>/task` lists them, each `(tid, state, SigPnd)`.
    fn tasks(threads: &[(u32, &str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (tid, state, pending) in threads {
            let task = dir.path().join(tid.to_string());
            std::fs::create_dir(&task).expect("mkdir");
            let clear = "0000000000000000";
            std::fs::write(task.join("status"), status(state, pending, clear)).expect("status");
            let letter = &state[..1];
            let stat = format!("{tid} (python3) {letter} 1 {tid} {tid} 0 -1 4194560 0 0 0");
            std::fs::write(task.join("stat"), stat).expect("stat");
        }
        dir
    }

    #[test]
    fn the_running_task_is_the_leader_else_another_thread_that_still_runs_else_none() {
        let clear = "0000000000000000";
        let kill = "0000000000000100";
        let found = |threads: &[(u32, &str, &str)]| {
            let dir = tasks(threads);
            running_task_in(dir.path(), 7)
                .map(|p| p.strip_prefix(dir.path()).expect("inside").to_owned())
        };
        let leader = [(7, "S (sleeping)", clear), (8, "S (sleeping)", clear)];
        assert_eq!(found(&leader), Some(PathBuf::from("7")));
        let leader_gone = [(7, "Z (zombie)", clear), (8, "S (sleeping)", clear)];
        assert_eq!(found(&leader_gone), Some(PathBuf::from("8")));
        // A thread that is killed but still listed runs nothing more: no thread runs.
        let all_ended = [(7, "Z (zombie)", clear), (8, "S (sleeping)", kill)];
        assert_eq!(found(&all_ended), None);
        let all_dead = [(7, "Z (zombie)", clear), (8, "X (dead)", clear)];
        assert_eq!(found(&all_dead), None);
    }

    #[test]
    fn this_process_can_run_and_a_pid_that_is_gone_cannot() {
        let me = std::process::id();
        assert_eq!(
            running_task(me),
            Some(PathBuf::from(format!("/proc/{me}/task/{me}")))
        );
        assert!(can_run(me));
        assert!(!every_thread_exited(me));
        // Above the largest pid_max the kernel allows (2^22).
        assert!(!can_run(5_000_000));
        assert_eq!(running_task(5_000_000), None);
        assert!(every_thread_exited(5_000_000));
    }
}
