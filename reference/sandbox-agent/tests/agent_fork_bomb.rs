//! The agent's `timeout_ms`, end to end, against a 5,000-process fork bomb: the built agent over
//! ACP on stdio, confined by one backend (`--backend`, `--abi-cap`), runs a bash call whose payload
//! forks 5,000 sleepers from a chain of forkers (one in ten in its own session, every one an
//! orphan) and keeps forking orphans while it is stopped, under a 2 s `timeout_ms`, and again
//! with `session/cancel` once all 5,000 are there (or 20 s later on a loaded host). When the call's card settles, no process
//! of the bomb is in the host's process table (every one carries a marker in its command line),
//! the result says it timed out and that the whole tree was killed. How long the call took past
//! its timeout is printed (a generous bound only guards against a hang: speed is measured in
//! benchmarks, not asserted in tests). In the nextest group `fork-bombs` (one at a time).

use std::time::{Duration, Instant};

use sandbox_test_support::agent::serving;
use sandbox_test_support::{AgentDirs, AgentProcess};
use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_sandbox-agent");

/// The call's timeout.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Processes on the host whose command line contains `needle`, zombies excluded (a zombie runs
/// nothing and holds nothing but its pid).
fn processes_with(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("status")).is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("State:") && (l.contains("Z (") || l.contains("X (")))
        });
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && !zombie
            && String::from_utf8_lossy(&cmdline).contains(needle)
        {
            found.push(pid);
        }
    }
    found
}

fn kill_leftovers(marker: &str) {
    for pid in processes_with(marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The bomb (Perl, as sandbox-local's survivors test): a chain of 50 forkers, each forking 100
/// sleepers (one in ten in its own session) and a successor, then exiting, so every sleeper is an
/// orphan; the last one drops `forked` in the workspace; meanwhile the first process forks orphans
/// until it is killed. Every process is named `marker`.
fn bomb(marker: &str) -> String {
    format!(
        r#"$0 = "{marker}"; $| = 1;
my $chain = fork; die "fork: $!" unless defined $chain;
if (!$chain) {{
  for my $l (1 .. 50) {{
    for my $i (1 .. 100) {{
      my $p = fork; die "fork: $!" unless defined $p;
      if (!$p) {{ POSIX::setsid() if $i % 10 == 0; sleep 100; exit 0 }}
    }}
    if ($l < 50) {{ my $p = fork; die "fork: $!" unless defined $p; exit 0 if $p; }}
  }}
  open(my $f, ">", "forked") and close $f;
  sleep 100; exit 0;
}}
for (1 .. 2000) {{
  my $p = fork; next unless defined $p;
  if (!$p) {{ my $q = fork; if (defined $q && !$q) {{ sleep 100 }} exit 0 }}
  waitpid($p, 0);
}}
sleep 100;"#
    )
}

/// How long the cancel waits for the bomb to have forked all 5,000: on a host loaded far past its
/// cores (a load of 90 on two was seen here) forking them takes minutes, so the cancel then comes
/// while the bomb is still forking (the printed peak says how far it got).
const FORK_WAIT: Duration = Duration::from_secs(20);

/// How a call is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// `timeout_ms: 2000`, whatever the bomb reached by then (on a loaded host it is still
    /// forking: the race with the clean-up is the harder case).
    Timeout,
    /// `session/cancel` once all 5,000 are there (the bomb drops a file in the workspace), or
    /// after [`FORK_WAIT`].
    CancelWhenForked,
}

/// The agent serving `ws` in workspace-write on `backend`, initialized.
fn start_agent(sessions: &std::path::Path, ws: &std::path::Path, backend: &[&str]) -> AgentProcess {
    let mut command = serving(AGENT, sessions, ws);
    command
        .args(["--mode", "workspace-write"])
        .args(backend)
        .current_dir(ws);
    AgentProcess::start(command)
}

fn bomb_stopped(label: &str, backend: &[&str], stop: Stop) {
    let dirs = AgentDirs::new("sandbox-agent-agent-fork-bomb-");
    let (sessions, ws) = (dirs.sessions.clone(), dirs.ws.clone());
    let marker = format!("agentbomb-{label}-{stop:?}-{}", std::process::id());
    std::fs::write(ws.join("bomb.pl"), bomb(&marker)).expect("bomb");
    let mut agent = start_agent(&sessions, &ws, backend);
    let new = agent.call("session/new", &json!({ "cwd": ws, "mcpServers": [] }));
    let id = new["result"]["sessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    let call = match stop {
        Stop::Timeout => {
            json!({ "command": "perl -MPOSIX bomb.pl", "timeout_ms": TIMEOUT.as_millis() as u64 })
        }
        Stop::CancelWhenForked => json!({ "command": "perl -MPOSIX bomb.pl" }),
    };
    let prompt = agent.request(
        "session/prompt",
        &json!({ "sessionId": id, "prompt": [{ "type": "text", "text": format!("tool bash {call}") }] }),
    );
    // How many processes of the bomb there were at most (printed: under load the bomb may not
    // reach its 5,000 within the timeout, and the race with the clean-up is the harder case).
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (done, marker) = (std::sync::Arc::clone(&done), marker.clone());
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                peak = peak.max(processes_with(&marker).len());
                std::thread::sleep(Duration::from_millis(200));
            }
            peak
        })
    };
    let mut running_at: Option<Instant> = None;
    // When the prompt was sent: the bound on waiting for the bomb to finish forking.
    let running_since = Some(Instant::now());
    let mut cancelled_at: Option<Instant> = None;
    let forked = ws.join("forked");
    let mut cancel = |agent: &mut AgentProcess| {
        let waited_enough = running_since.is_some_and(|at: Instant| at.elapsed() >= FORK_WAIT);
        if stop == Stop::CancelWhenForked
            && cancelled_at.is_none()
            && (forked.exists() || waited_enough)
        {
            cancelled_at = Some(Instant::now());
            agent.notify("session/cancel", &json!({ "sessionId": id }));
        }
    };
    let mut settled: Option<(Instant, Value, Vec<i32>)> = None;
    let answer = agent.answer(
        prompt,
        &mut |message| {
            let update = &message["params"]["update"];
            if message.get("method").is_none() || update["sessionUpdate"] != "tool_call_update" {
                return;
            }
            match update["status"].as_str() {
                Some("in_progress") => running_at = Some(Instant::now()),
                Some("completed" | "failed") if settled.is_none() => {
                    // Read at once: the card settles after the call returned.
                    let left = processes_with(&marker);
                    settled = Some((Instant::now(), update.clone(), left));
                }
                _ => {}
            }
        },
        &mut cancel,
    );
    let answered_at = Instant::now();
    let left_after = processes_with(&marker);
    kill_leftovers(&marker);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let peak = sampler.join().expect("sampler");
    let (settled_at, card, left) = settled.expect("the call's card settled");
    let running_at = running_at.expect("the call ran");
    let facts = &card["rawOutput"]["facts"];
    let took = match stop {
        Stop::Timeout => {
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
            assert_eq!(facts["timed_out"], true, "{label}: {card}");
            settled_at - running_at
        }
        Stop::CancelWhenForked => {
            assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
            assert_eq!(facts["cancelled"], true, "{label}: {card}");
            answered_at - cancelled_at.expect("cancelled")
        }
    };
    let text = card["content"][0]["content"]["text"].as_str().unwrap_or("");
    assert!(
        text.contains("the whole process tree was killed"),
        "{label}: the result does not say the whole tree was killed: {text}"
    );
    assert!(
        left.is_empty() && left_after.is_empty(),
        "{label} ({stop:?}): {} processes of the bomb outlived the call when its card settled, {} when the prompt was answered",
        left.len(),
        left_after.len()
    );
    // A hang guard, not a speed test (see the module's doc).
    let bound = TIMEOUT + Duration::from_secs(60);
    assert!(took < bound, "{label} ({stop:?}): {took:?} past {bound:?}");
    match stop {
        Stop::Timeout => eprintln!(
            "{label} (timeout): the call settled {took:?} after it started (timeout {TIMEOUT:?}), the bomb had up to {peak} processes, 0 survivors"
        ),
        Stop::CancelWhenForked => eprintln!(
            "{label} (cancel once forked): answered cancelled {took:?} after session/cancel, the bomb had up to {peak} processes, 0 survivors"
        ),
    }
}

fn bomb_past_the_timeout(label: &str, backend: &[&str]) {
    bomb_stopped(label, backend, Stop::Timeout);
    bomb_stopped(label, backend, Stop::CancelWhenForked);
}

#[test]
fn the_agents_timeout_leaves_nothing_of_a_fork_bomb_under_bwrap() {
    bomb_past_the_timeout("bwrap", &["--backend", "bwrap"]);
}

#[test]
fn the_agents_timeout_leaves_nothing_of_a_fork_bomb_under_landlock() {
    bomb_past_the_timeout("landlock", &["--backend", "landlock"]);
}

#[test]
fn the_agents_timeout_leaves_nothing_of_a_fork_bomb_under_landlock_abi2() {
    bomb_past_the_timeout(
        "landlock-abi2",
        &["--backend", "landlock", "--abi-cap", "2"],
    );
}
