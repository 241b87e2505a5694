//! The `select` step: the reference chain, through `sandboxctl run`, on a host as it is or made
//! hostile for real, with a canary payload proving nothing ever runs unconfined.

use std::ffi::OsString;
use std::process::Command;

use sandbox_cli::{RunFacts, UNAVAILABLE_EXIT};

use crate::scenario::{Host, SelectStep};
use crate::steps::StepError;
use crate::world::World;

/// Landlock refuses a 17th layer (`E2BIG`); 16 permissive layers exhaust it.
const LANDLOCK_MAX_LAYERS: usize = 16;

/// The fake runners a step's `@fakes/<name>` arguments name, written out from the suite
/// compiled into the crate (an installed `certify` has no clone to find them in), or `None`
/// when the step names none.
fn fakes(step: &SelectStep) -> Result<Option<crate::suite::FakeRunners>, StepError> {
    if !step.args.iter().any(|a| a.starts_with("@fakes/")) {
        return Ok(None);
    }
    crate::suite::FakeRunners::new()
        .map(Some)
        .map_err(|e| StepError::Harness(format!("cannot write the fake runners out: {e}")))
}

pub(super) fn run(step: &SelectStep) -> Result<(), StepError> {
    let sandboxctl = sandbox_local::probe::locate_sibling("sandboxctl", "sandbox-cli")
        .map_err(StepError::harness)?;
    let world = World::new().map_err(super::world_error)?;
    let ws = world.ws.clone();
    let outside = world.outside.clone();
    let fakes = fakes(step)?;

    let mut argv: Vec<OsString> = Vec::new();
    if step.host != Host::Normal {
        argv.extend(["setpriv", "--bounding-set=-all", "--inh-caps=-all"].map(OsString::from));
    }
    if step.host == Host::LandlockExhausted {
        let launcher = sandbox_local::probe::locate_launcher().map_err(StepError::harness)?;
        for _ in 0..LANDLOCK_MAX_LAYERS {
            argv.push(launcher.clone().into());
            argv.extend(
                landlock_run::cli::LaunchArgs {
                    read_only: vec!["/".into()],
                    read_write: vec![landlock_run::cli::WritableRoot::new("/")],
                    ..Default::default()
                }
                .flags(),
            );
        }
    }
    argv.push(sandboxctl.into());
    argv.extend(["run", "--mode", "workspace-write", "--workspace"].map(OsString::from));
    argv.push(ws.clone().into());
    for arg in &step.args {
        argv.push(match (arg.strip_prefix("@fakes/"), &fakes) {
            (Some(fake), Some(fakes)) => fakes.dir().join(fake).into(),
            _ => arg.into(),
        });
    }
    argv.extend(["--", "bash", "-c"].map(OsString::from));
    argv.push(r#"printf ran > "$W/canary"; printf escaped > "$O/canary""#.into());

    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .env("W", &ws)
        .env("O", &outside)
        // Each step probes its own host: verdicts cached by another step's host never apply.
        .env(
            sandbox_local::cache::CACHE_ENV,
            world.dir.join("probe-cache"),
        )
        .output()
        .map_err(|e| StepError::Harness(format!("cannot run {:?}: {e}", argv[0])))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let facts: RunFacts = serde_json::from_str(&stdout).map_err(|e| {
        StepError::Unmet(format!(
            "sandboxctl printed no run facts ({e}); exit {:?}, stdout {stdout:?}, stderr {:?}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ))
    })?;
    let inside = std::fs::read_to_string(ws.join("canary")).ok();
    let escaped = outside.join("canary").exists();
    let detail = facts.detail().unwrap_or_default();
    let describe = || {
        let json = serde_json::to_string(&facts).unwrap_or_else(|e| e.to_string());
        format!("exit {:?}, facts {json}", out.status.code())
    };

    if escaped {
        return Err(StepError::Unmet(format!(
            "the canary escaped the workspace: {}",
            describe()
        )));
    }
    let expect = &step.expect;
    if expect.unavailable {
        if facts.error() != Some(sandbox::SANDBOX_UNAVAILABLE) {
            return Err(StepError::Unmet(format!(
                "expected SANDBOX_UNAVAILABLE: {}",
                describe()
            )));
        }
        if out.status.code() != Some(i32::from(UNAVAILABLE_EXIT)) {
            return Err(StepError::Unmet(format!(
                "expected exit {UNAVAILABLE_EXIT}: {}",
                describe()
            )));
        }
        if inside.is_some() {
            return Err(StepError::Unmet(format!(
                "the payload ran although the sandbox was unavailable: {}",
                describe()
            )));
        }
    }
    if let Some(backend) = &expect.backend {
        if facts.backend() != Some(backend.as_str()) {
            return Err(StepError::Unmet(format!(
                "expected backend {backend}: {}",
                describe()
            )));
        }
        if facts.runner_failed() != Some(false) || inside.as_deref() != Some("ran") {
            return Err(StepError::Unmet(format!(
                "the selected backend did not run the canary inside: {}",
                describe()
            )));
        }
    }
    if let Some(enforcement) = expect.enforcement
        && facts.enforcement() != Some(enforcement)
    {
        return Err(StepError::Unmet(format!(
            "expected enforcement {enforcement}: {}",
            describe()
        )));
    }
    for needle in &expect.detail_contains {
        if !detail.contains(needle.as_str()) {
            return Err(StepError::Unmet(format!(
                "the runner's words lack {needle:?}: {}",
                describe()
            )));
        }
    }
    Ok(())
}
