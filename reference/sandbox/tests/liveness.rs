//! [`sandbox::liveness`] on real processes: one whose leader thread ended while another runs on
//! (it looks like a zombie in `/proc/<pid>`), a real zombie, and one that ran out.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandbox::liveness::{can_run, every_thread_exited, running_task};

/// The state letter of one task, from its `stat`.
fn state(task: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("{task}/stat")).ok()?;
    sandbox::liveness::stat_field(&stat, 0).map(str::to_owned)
}

/// Waits (bounded by a minute, so a loaded host is never a failure) until `done` holds.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Python's leader ends by `SYS_exit` (60 on x86_64, 93 on aarch64) once its thread printed its
/// id; the thread sleeps on.
const ZOMBIE_LEADER: &str = r#"
import ctypes, os, platform, sys, threading, time
def work():
    print(threading.get_native_id(), flush=True)
    time.sleep(600)
threading.Thread(target=work).start()
time.sleep(0.05)
ctypes.CDLL(None).syscall(93 if platform.machine() == "aarch64" else 60, 0)
"#;

#[test]
fn a_process_whose_leader_ended_runs_on_in_its_other_thread_and_is_read_there() {
    let mut child = Command::new("python3")
        .args(["-c", ZOMBIE_LEADER])
        .env("LIVENESS_TAG", "zombie-leader")
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the thread's id");
    let tid: u32 = line.trim().parse().expect("a tid");
    wait_until("the leader is a zombie", || {
        state(&format!("/proc/{pid}")).as_deref() == Some("Z")
    });
    // The leader's own files say nothing any more.
    assert!(
        std::fs::read(format!("/proc/{pid}/environ")).map_or(true, |e| e.is_empty()),
        "the leader's environment is still readable: this kernel differs"
    );
    let task = running_task(pid).expect("a thread runs on");
    assert_eq!(
        task,
        std::path::PathBuf::from(format!("/proc/{pid}/task/{tid}"))
    );
    assert!(can_run(pid));
    assert!(!every_thread_exited(pid), "a thread runs on");
    let environ = std::fs::read(task.join("environ")).expect("environ through the thread");
    assert!(
        environ
            .split(|b| *b == 0)
            .any(|v| v == b"LIVENESS_TAG=zombie-leader")
    );
    child.kill().expect("kill");
    // Not reaped yet: every thread ends, then nothing can run.
    assert!(!can_run(pid), "a SIGKILL is pending");
    wait_until("every thread has exited", || every_thread_exited(pid));
    assert_eq!(running_task(pid), None);
    child.wait().expect("wait");
    assert!(!can_run(pid));
}

#[test]
fn a_zombie_whose_every_thread_ended_cannot_run() {
    let mut child = Command::new("sh")
        .args(["-c", "exit 3"])
        .spawn()
        .expect("sh");
    let pid = child.id();
    wait_until("the child is a zombie", || {
        state(&format!("/proc/{pid}")).as_deref() == Some("Z")
    });
    assert!(!can_run(pid));
    assert!(every_thread_exited(pid));
    assert_eq!(running_task(pid), None);
    assert_eq!(child.wait().expect("wait").code(), Some(3));
}
