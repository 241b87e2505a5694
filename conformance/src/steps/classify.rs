//! The `classify` step: the one classifier against the backend's dialect, pure data.

use std::ffi::OsString;
use std::path::PathBuf;

use sandbox::{
    Classification, ConfinedArgv, ProcessOutcome, SandboxEnforcement, SpawnFailure, StatusChannel,
    classify,
};

use crate::backends::Backend;
use crate::scenario::{Attribution, ClassifyStep, Workdir};
use crate::steps::StepError;

/// The runner path the synthetic launch uses as `argv[0]`.
const RUNNER: &str = "/usr/libexec/sandbox-runner";

pub(super) fn run(backend: &Backend, step: &ClassifyStep) -> Result<(), StepError> {
    let dialect = match (&step.dialect, &backend.dialect) {
        (Some(inline), _) => sandbox_local::dialect::Dialect {
            denial_signatures: inline.denial_signatures.clone(),
            runner_failure_rules: inline.runner_failure_rules.clone(),
        },
        (None, Some(own)) => own.clone(),
        (None, None) => {
            return Err(StepError::Unmet(format!(
                "backend {} has no dialect of its own; the step must give `dialect`",
                backend.name
            )));
        }
    };
    let launch = ConfinedArgv {
        argv: vec![RUNNER.into(), "--".into(), "bash".into()],
        backend: backend.name.clone(),
        enforcement: SandboxEnforcement::Full,
        classes: Default::default(),
        denial_signatures: dialect.denial_signatures,
        runner_failure_rules: dialect.runner_failure_rules,
        status_channel: step.status.as_ref().map(|s| StatusChannel {
            fd: 3,
            format: s.format,
        }),
        fds: Default::default(),
    };
    let outcome = outcome_of(step)?;
    let status = step
        .status
        .as_ref()
        .map(|s| s.format.parse(s.records.as_bytes()));
    let got = classify(&launch, &outcome, status.as_ref());
    check(step, &got)
}

fn outcome_of(step: &ClassifyStep) -> Result<ProcessOutcome, StepError> {
    let o = &step.outcome;
    let stderr = o.stderr.clone().into_bytes();
    match (o.exit, o.signal, &o.spawn_error) {
        (Some(code), None, None) => Ok(ProcessOutcome::Exited { code, stderr }),
        (None, Some(signal), None) => Ok(ProcessOutcome::Signaled { signal, stderr }),
        (None, None, Some(spawn)) => Ok(ProcessOutcome::SpawnFailed(SpawnFailure {
            kind: spawn.kind,
            path: match spawn.program {
                Attribution::Runner => Some(PathBuf::from(RUNNER)),
                Attribution::Other => Some(PathBuf::from("/usr/bin/some-other-program")),
                Attribution::Unknown => None,
            },
            workdir_usable: spawn.workdir == Workdir::Usable,
            message: if o.stderr.is_empty() {
                format!("spawn {:?}: {:?}", OsString::from(RUNNER), spawn.kind)
            } else {
                o.stderr.clone()
            },
        })),
        _ => Err(StepError::unmet(
            "outcome needs exactly one of `exit`, `signal`, `spawn-error`",
        )),
    }
}

fn check(step: &ClassifyStep, got: &Classification) -> Result<(), StepError> {
    let want = &step.expect;
    let describe = || serde_json::to_string(got).unwrap_or_else(|_| format!("{got:?}"));
    if got.code() != want.class.code() {
        return Err(StepError::Unmet(format!(
            "expected class {}, classifier said {}",
            want.class.code(),
            describe()
        )));
    }
    if let Some(evidence) = want.evidence {
        match got {
            Classification::RunnerFailure { evidence: e, .. } if *e == evidence => {}
            _ => {
                return Err(StepError::Unmet(format!(
                    "expected evidence {evidence:?}, classifier said {}",
                    describe()
                )));
            }
        }
    }
    if let Some(detail) = &want.detail {
        let actual = match got {
            Classification::RunnerFailure { detail, .. } => Some(detail),
            Classification::Denied { line } => Some(line),
            Classification::StartFailed { detail } => Some(detail),
            Classification::Ordinary => None,
        };
        if actual != Some(detail) {
            return Err(StepError::Unmet(format!(
                "expected detail {detail:?}, classifier said {}",
                describe()
            )));
        }
    }
    Ok(())
}
