//! The `forge` step: a payload prints the backend's own declared runner-failure signatures and
//! exits with the rule's code. It ran (it leaves a mark), so each must be an ordinary result.

use std::time::Duration;

use sandbox::{Classification, ProviderPolicy, RunnerFailureRule};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
use crate::scenario::ForgeStep;
use crate::steps::StepError;
use crate::world::World;

/// What the payload prints after the signature, so the line is the payload's own.
const TAIL: &str = "forged by the payload";

/// The forgeries for `rules`: every non-blank fatal signature with every allowed exit code (1
/// when a rule admits any non-zero code).
fn forgeries(rules: &[RunnerFailureRule]) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for rule in rules {
        let codes: Vec<i32> = match &rule.allowed_exit_codes {
            Some(codes) if !codes.is_empty() => codes.iter().copied().filter(|c| *c != 0).collect(),
            _ => vec![1],
        };
        for sig in rule
            .fatal_signatures
            .iter()
            .filter(|s| !s.trim().is_empty())
        {
            for code in &codes {
                let pair = (sig.clone(), *code);
                if !out.contains(&pair) {
                    out.push(pair);
                }
            }
        }
    }
    out
}

pub(super) fn run(backend: &Backend, step: &ForgeStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let world = World::new().map_err(super::world_error)?;
    let ws = world.ws.clone();
    let policy = ProviderPolicy::new(step.mode, ws.clone())
        .with_roots(|r| r.with_temp_dir(None))
        .with_cwd(&ws);
    let script = format!(r#"printf '%s{TAIL}\n' "$SIG" >&2; printf ran > "$MARK"; exit "$CODE""#);
    let dressed = crate::request::dress(
        &script,
        vec![("SIG", "".into()), ("CODE", "".into()), ("MARK", "".into())],
    );
    let argv = dressed.argv.clone();
    // The signatures are the ones the backend declares for this very launch.
    let first = provider
        .confine(&argv, &policy)
        .map_err(|e| StepError::Unmet(format!("confine refused: {e}")))?;
    let mut tries = forgeries(&first.runner_failure_rules);
    // A backend without rules cannot be fooled through them; its payload must still read as an
    // ordinary result that ran.
    if tries.is_empty() {
        tries.push(("error: ".to_owned(), 1));
    }
    let mut fooled = Vec::new();
    for (i, (sig, code)) in tries.iter().enumerate() {
        let confined = provider
            .confine(&argv, &policy)
            .map_err(|e| StepError::Unmet(format!("confine refused: {e}")))?;
        let mark = ws.join(format!("forged-{i}"));
        let mut options = LaunchOptions::in_dir(&ws);
        options.env = vec![
            (dressed.alias("SIG"), sig.into()),
            (dressed.alias("CODE"), code.to_string().into()),
            (dressed.alias("MARK"), mark.clone().into_os_string()),
        ];
        options.env_remove.push("TMPDIR".into());
        options.timeout = Some(Duration::from_secs(20));
        crate::survivors::tag_launch(&mut options);
        let done = launch::run(&confined, &options);
        let ran = std::fs::read_to_string(&mark).ok().as_deref() == Some("ran");
        if !ran {
            return Err(StepError::Unmet(format!(
                "the payload forging {sig:?} with exit {code} did not run (no mark): exit {:?}, {}, stderr {:?}",
                done.exit_code(),
                serde_json::to_string(&done.classification).unwrap_or_default(),
                String::from_utf8_lossy(&done.stderr).trim()
            )));
        }
        if done.exit_code() != Some(*code) {
            return Err(StepError::Unmet(format!(
                "the payload exited {code} but the launch exited {:?}",
                done.exit_code()
            )));
        }
        if done.classification != Classification::Ordinary {
            fooled.push(format!(
                "{sig:?} with exit {code} read as {}",
                serde_json::to_string(&done.classification).unwrap_or_default()
            ));
        }
    }
    if fooled.is_empty() {
        Ok(())
    } else {
        Err(StepError::Unmet(format!(
            "a payload that ran and printed a declared runner-failure signature was not an ordinary result ({} of {}; status channel: {}): {}",
            fooled.len(),
            tries.len(),
            if first.status_channel.is_some() {
                "yes"
            } else {
                "none"
            },
            fooled.join("; ")
        )))
    }
}
