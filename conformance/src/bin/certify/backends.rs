//! Which backends a run certifies: an operator runner, an external command, or reference backends.

use std::time::Duration;

use conformance::backends::{Backend, REFERENCE_BACKENDS, reference_backend};
use conformance::expectations::{self, ExpectationFile};
use conformance::external::External;
use conformance::scenario::load::LoadError;

use crate::cli::{Cli, CliError};

type Planned = Vec<(Backend, Result<Option<ExpectationFile>, LoadError>)>;
/// The backends of this run, and the reference backends left out because they cannot run here.
pub(crate) fn select_backends(
    cli: &Cli,
    expectations: &std::path::Path,
) -> Result<(Planned, Vec<(String, String)>), CliError> {
    let dir = expectations.to_path_buf();
    if let Some(runner) = &cli.runner_command {
        if !cli.command.is_empty() || !cli.backends.is_empty() {
            return Err(CliError::Usage(
                "--runner-command certifies that runner alone".into(),
            ));
        }
        let runner = sandbox_local::OperatorRunner::new(
            vec![runner.clone().into()],
            &cli.runner_failure_signatures,
        )
        .map_err(|e| CliError::Usage(format!("--runner-command: {e}")))?;
        let expected = match &cli.expectations {
            None => Ok(None),
            Some(path) => expectations::load_path(path, path.clone(), "operator"),
        };
        return Ok((
            vec![(Backend::operator_runner(runner), expected)],
            Vec::new(),
        ));
    }
    if !cli.runner_failure_signatures.is_empty() {
        return Err(CliError::Usage(
            "--runner-failure-signature needs --runner-command".into(),
        ));
    }
    if !cli.command.is_empty() {
        if !cli.backends.is_empty() {
            return Err(CliError::Usage(
                "give either --backend or an external command, not both".into(),
            ));
        }
        let timeout = Duration::from_secs(cli.protocol_timeout);
        let backend = match External::start(&cli.command, timeout) {
            Ok(external) => {
                let name = external.implementation.name.clone();
                if name.is_empty()
                    || !name.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                    })
                {
                    return Err(CliError::Usage(format!(
                        "the backend calls itself {name:?}; names are lowercase letters, digits, '-' and '_'"
                    )));
                }
                Backend::from_external(external)
            }
            Err(failure) => Backend::external_failed("external", &failure.to_string()),
        };
        let expected = match &cli.expectations {
            None => Ok(None),
            Some(path) => expectations::load_path(path, path.clone(), &backend.name),
        };
        return Ok((vec![(backend, expected)], Vec::new()));
    }
    let explicit = !cli.backends.is_empty();
    let names: Vec<String> = if explicit {
        cli.backends.clone()
    } else {
        REFERENCE_BACKENDS
            .iter()
            .filter(|n| **n != "operator")
            .map(|n| (*n).to_owned())
            .collect()
    };
    // A required backend that is unusable here is certified anyway, so it fails loudly.
    let required = conformance::harness::required_backends();
    let mut planned = Vec::new();
    let mut excluded = Vec::new();
    for name in names {
        let backend = reference_backend(&name).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown backend {name:?}; reference backends are {}",
                REFERENCE_BACKENDS.join(", ")
            ))
        })?;
        if !explicit
            && !required.contains(&name)
            && !backend.confines_nothing()
            && let Some(reason) = &backend.unusable
        {
            excluded.push((name, reason.clone()));
            continue;
        }
        let expected = expectations::load(&dir, &backend.name);
        planned.push((backend, expected));
    }
    Ok((planned, excluded))
}
