//! Controls: a probe that a step runs confined and expects to be refused is first run once
//! unconfined, against a target of its own, and must reach it there.
//!
//! A refusal proves something only from a probe that can succeed. A shell built without
//! `/dev/tcp`, a perl whose socket address is packed wrong for this host, a Python without
//! `ctypes` or a `tmux` too old for its flags all print `refused` in any sandbox, and a step that
//! expects exactly that would pass a backend that confines nothing. So each probe's first use
//! in a process runs it on the host, outside any sandbox, against a fresh listener, queue or
//! server of the harness's own (nothing of the host's), and a probe that cannot reach it there
//! turns every case that uses it into the harness's error, with the probe's own words. The
//! answer is kept for the rest of the process: a probe does not change within a run.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Mutex;
use std::time::Duration;

use sandbox::{ConfinedArgv, ProcessOutcome};
use sandbox_local::launch::{self, LaunchOptions};

use super::StepError;

/// The longest a control may take (a probe that hangs is a broken probe).
const CONTROL_TIMEOUT: Duration = Duration::from_secs(20);

/// Each probe's answer, by its name, once its control ran in this process.
static ANSWERS: Mutex<BTreeMap<String, Result<(), String>>> = Mutex::new(BTreeMap::new());

/// Runs `control` for the probe named `probe` unless this process already did, and makes its
/// failure the harness's error. Held while it runs, so a probe's control runs once even when
/// cases start together.
pub(super) fn once(
    probe: &str,
    control: impl FnOnce() -> Result<(), String>,
) -> Result<(), StepError> {
    let mut answers = ANSWERS.lock().unwrap_or_else(|p| p.into_inner());
    let answer = match answers.get(probe) {
        Some(answer) => answer.clone(),
        None => {
            let answer = control();
            answers.insert(probe.to_owned(), answer.clone());
            answer
        }
    };
    answer.map_err(|why| {
        StepError::Harness(format!(
            "the {probe} probe does not reach the harness's own target on this host, unconfined, \
             so its refusal in a sandbox would prove nothing: {why}"
        ))
    })
}

/// Runs `script` with `bash -c` on the host, unconfined, in a scratch directory, with `vars`
/// added to the environment (under their own names: nothing here is dressed as a request).
/// What it printed on stdout, or why it did not end well, in its own words.
pub(super) fn run_unconfined(script: &str, vars: &[(&str, OsString)]) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a scratch directory: {e}"))?;
    let mut options = LaunchOptions::in_dir(dir.path());
    options.env = vars
        .iter()
        .map(|(k, v)| (OsString::from(k), v.clone()))
        .collect();
    options.timeout = Some(CONTROL_TIMEOUT);
    crate::survivors::tag_launch(&mut options);
    let argv = ["bash", "-c", script].map(OsString::from).to_vec();
    let done = launch::run(&ConfinedArgv::unconfined(argv), &options);
    let stdout = String::from_utf8_lossy(&done.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&done.stderr).trim().to_owned();
    if done.timed_out {
        return Err(format!(
            "it did not end within {} s (stdout {stdout:?}, stderr {stderr:?})",
            CONTROL_TIMEOUT.as_secs()
        ));
    }
    match &done.outcome {
        ProcessOutcome::Exited { code: 0, .. } => Ok(stdout),
        ProcessOutcome::SpawnFailed(f) => Err(format!("cannot run bash: {}", f.message)),
        other => Err(format!(
            "it ended with {other:?} (stdout {stdout:?}, stderr {stderr:?})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_controlled_once_and_a_failing_one_is_the_harnesss_error() {
        let probe = format!("test-{}", crate::world::draw_hex(8));
        let mut runs = 0;
        once(&probe, || {
            runs += 1;
            Err("it printed refused".into())
        })
        .expect_err("a failing control");
        let again = once(&probe, || {
            runs += 1;
            Ok(())
        })
        .expect_err("the answer is kept");
        assert_eq!(runs, 1);
        match again {
            StepError::Harness(m) => {
                assert!(
                    m.contains(&probe) && m.contains("it printed refused"),
                    "{m}"
                )
            }
            other => panic!("not the harness's error: {other:?}"),
        }
        let fine = format!("test-{}", crate::world::draw_hex(8));
        once(&fine, || Ok(())).expect("a passing control");
    }

    #[test]
    fn an_unconfined_run_tells_its_output_or_its_failure() {
        let vars = [("SAID", OsString::from("hello"))];
        assert_eq!(
            run_unconfined("echo \"$SAID\"", &vars).as_deref(),
            Ok("hello")
        );
        let failed = run_unconfined("echo broken >&2; exit 3", &[]).expect_err("exit 3");
        assert!(failed.contains("broken"), "{failed}");
    }
}
