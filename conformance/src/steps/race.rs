//! The `fence-race` and `world` steps, over the case's tool composition.
//!
//! `fence-race` calls the write tool again and again while a thread exchanges a directory in the
//! workspace (or the symlink the workspace is spelled through) with a symlink to the outside tree
//! (`renameat2(RENAME_EXCHANGE)`, atomic), so the
//! fence's check and the write see different trees. Nothing may appear outside, not even a
//! temporary file. Both the number of calls and the swapping thread are bounded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sandbox_tools::tool::Tool;
use serde_json::json;

use super::tool::{Rig, rig};
use crate::backends::Backend;
use crate::scenario::{FenceRaceStep, ToolSetup, WorldStep};
use crate::steps::StepError;

/// The most write calls one step may make.
const MAX_ITERATIONS: u32 = 2000;

/// The longest the swapping thread runs, whatever happens to the writes.
const SWAP_DEADLINE: Duration = Duration::from_secs(5);

/// The name the symlink waits under while the directory is in place (and vice versa).
fn swap_partner(swap: &Path) -> PathBuf {
    let mut name = swap.as_os_str().to_os_string();
    name.push(".swap");
    PathBuf::from(name)
}

pub(super) fn fence_race(
    backend: &Backend,
    setup: Option<&ToolSetup>,
    step: &FenceRaceStep,
    slot: &mut Option<Rig>,
) -> Result<(), StepError> {
    if !(1..=MAX_ITERATIONS).contains(&step.iterations) {
        return Err(StepError::Harness(format!(
            "iterations must be 1..={MAX_ITERATIONS}, not {}",
            step.iterations
        )));
    }
    let rig = rig(backend, setup, slot)?;
    let outside = rig.world().outside.clone();
    let swap = PathBuf::from(rig.expanded(&step.swap));
    let partner = swap_partner(&swap);
    let target = rig.expanded(&step.path);
    std::fs::create_dir_all(&swap)
        .map_err(|e| StepError::Harness(format!("cannot make {}: {e}", swap.display())))?;
    std::os::unix::fs::symlink(&outside, &partner)
        .map_err(|e| StepError::Harness(format!("cannot make {}: {e}", partner.display())))?;
    let outside_before = entries(&outside)?;

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, swap, partner) = (
            Arc::clone(&stop),
            Arc::clone(&swaps),
            swap.clone(),
            partner.clone(),
        );
        std::thread::spawn(move || -> Result<(), StepError> {
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed) && started.elapsed() < SWAP_DEADLINE {
                exchange(&swap, &partner)?;
                swaps.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    };
    let mut codes: BTreeMap<String, u32> = BTreeMap::new();
    let started = Instant::now();
    for i in 0..step.iterations {
        let out = rig.call(
            Tool::Write.name(),
            &json!({ "path": target, "content": format!("race {i}") }),
        );
        *codes.entry(out.code.into()).or_default() += 1;
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let swapped = swapper
        .join()
        .map_err(|_| StepError::harness("the swapping thread panicked"))?;
    // Put things back where the tool expects them, whichever way the last exchange left them.
    if std::fs::read_link(&swap).is_ok_and(|target| target == outside) {
        let _ = exchange(&swap, &partner);
    }
    let summary = format!(
        "{} writes in {} ms against {} swaps, codes {codes:?}",
        step.iterations,
        took.as_millis(),
        swaps.load(Ordering::Relaxed)
    );
    swapped.map_err(|e| StepError::Harness(format!("{e}; {summary}")))?;
    let outside_after = entries(&outside)?;
    let new: Vec<&String> = outside_after.difference(&outside_before).collect();
    if !new.is_empty() {
        return Err(StepError::Unmet(format!(
            "the race carried writes outside: new entries {new:?} in {}; {summary}",
            outside.display()
        )));
    }
    if !step.expect.codes.is_empty()
        && let Some(code) = codes.keys().find(|c| !step.expect.codes.contains(c))
    {
        return Err(StepError::Unmet(format!(
            "a write returned {code}, expected one of {:?}; {summary}",
            step.expect.codes
        )));
    }
    Ok(())
}

/// The names in a directory.
fn entries(dir: &Path) -> Result<std::collections::BTreeSet<String>, StepError> {
    Ok(std::fs::read_dir(dir)
        .map_err(|e| StepError::Harness(format!("cannot list {}: {e}", dir.display())))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

pub(super) fn world(
    backend: &Backend,
    setup: Option<&ToolSetup>,
    step: &WorldStep,
    slot: &mut Option<Rig>,
) -> Result<(), StepError> {
    let rig = rig(backend, setup, slot)?;
    let may_change: Vec<PathBuf> = step
        .may_change
        .iter()
        .map(|p| PathBuf::from(rig.expanded(p)))
        .collect();
    let diff = rig.diff(&may_change);
    if diff.is_empty() {
        Ok(())
    } else {
        Err(StepError::Unmet(format!(
            "the world changed outside what the case allows:\n  {}",
            diff.join("\n  ")
        )))
    }
}

/// The most calls one `bind-race` step may make.
const MAX_BIND_RACE_CALLS: u32 = 200;

/// The latest moment of a call the exchange may come at: past the runner's setup (bwrap binds
/// within a few milliseconds of its start).
const BIND_RACE_SPREAD_US: u64 = 6000;

/// Everything beneath `dir`, as paths relative to it.
fn tree(dir: &Path) -> Result<std::collections::BTreeSet<PathBuf>, StepError> {
    let mut out = std::collections::BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)
            .map_err(|e| StepError::Harness(format!("cannot list {}: {e}", d.display())))?
        {
            let entry = entry
                .map_err(|e| StepError::Harness(format!("cannot list {}: {e}", d.display())))?;
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            out.insert(path.strip_prefix(dir).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(out)
}

/// Exchanges `a` and `b` atomically: `renameat2(RENAME_EXCHANGE)`.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> Result<(), StepError> {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        a,
        nix::fcntl::AT_FDCWD,
        b,
        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
    )
    .map_err(|e| StepError::Harness(format!("renameat2 exchange failed: {e}")))
}

/// No atomic exchange off Linux (the race steps are not planned there).
#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> Result<(), StepError> {
    Err(StepError::Unavailable {
        step: "race",
        needs: "renameat2(RENAME_EXCHANGE)",
    })
}

/// The `bind-race` step (see [`crate::scenario::BindRaceStep`]): one exchange per call, at a moment
/// spread over the call's launch, so the pin, the provider's own check and the runner's binds see
/// different trees; a call must fail closed or write into the pinned directory, never outside.
pub(super) fn bind_race(
    backend: &Backend,
    step: &crate::scenario::BindRaceStep,
) -> Result<(), StepError> {
    use sandbox::{ExecutionPolicy, SandboxMode};
    use sandbox_local::launch::{self, LaunchOptions};
    if !(1..=MAX_BIND_RACE_CALLS).contains(&step.iterations) {
        return Err(StepError::Harness(format!(
            "iterations must be 1..={MAX_BIND_RACE_CALLS}, not {}",
            step.iterations
        )));
    }
    let provider = super::confining(backend)?;
    let world = crate::world::World::new().map_err(super::world_error)?;
    let nest = world.ws.join("nest");
    let partner = world.ws.join("nest.swap");
    let inner = nest.join("inner");
    let make = |p: &Path| {
        std::fs::create_dir_all(p)
            .map_err(|e| StepError::Harness(format!("cannot make {}: {e}", p.display())))
    };
    make(&inner)?;
    // The look-alike the parent's symlink leads to, outside every writable root.
    make(&world.outside.join("inner"))?;
    // Relative, as a payload confined in the outer workspace would write it (the outside tree
    // is a sibling of the workspace in the world directory).
    let name = world
        .outside
        .file_name()
        .ok_or_else(|| StepError::harness("the outside tree has no name"))?;
    std::os::unix::fs::symlink(Path::new("..").join(name), &partner)
        .map_err(|e| StepError::Harness(format!("cannot make {}: {e}", partner.display())))?;
    let outside_before = tree(&world.outside)?;
    let world_before = world.snapshot();
    let mut policy = ExecutionPolicy::new(SandboxMode::WorkspaceWrite, &inner);
    policy.roots.temp_dir = None;
    let policy = policy
        .pinned()
        .map_err(|e| StepError::Harness(format!("cannot pin {}: {e}", inner.display())))?;
    let provider_policy = policy
        .for_provider()
        .ok_or_else(|| StepError::harness("workspace-write reaches the provider"))?;
    let mut codes: BTreeMap<String, u32> = BTreeMap::new();
    let started = Instant::now();
    for i in 0..step.iterations {
        let delay = Duration::from_micros((u64::from(i) * 997) % BIND_RACE_SPREAD_US);
        let swapper = {
            let (nest, partner) = (nest.clone(), partner.clone());
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                exchange(&nest, &partner)
            })
        };
        let argv = [
            "/bin/sh".into(),
            "-c".into(),
            // Relative to the working directory the call starts in: the inner workspace, or the
            // look-alike when the exchange came before the spawn.
            format!("printf x > f{i}").into(),
        ];
        let code = match provider.confine(&argv, &provider_policy) {
            Err(e) => e
                .detail
                .split(':')
                .next()
                .filter(|c| c.chars().all(|ch| ch.is_ascii_uppercase() || ch == '_'))
                .unwrap_or(sandbox::SANDBOX_UNAVAILABLE)
                .to_owned(),
            Ok(confined) => {
                let mut options = LaunchOptions::in_dir(&inner);
                options.env_remove.push("TMPDIR".into());
                options.timeout = Some(Duration::from_secs(20));
                crate::survivors::tag_launch(&mut options);
                let done = launch::run(&confined, &options);
                let code = done.classification.code();
                match done.exit_code() {
                    Some(0) | None => code.to_owned(),
                    Some(n) => format!(
                        "{code} (exit {n}: {})",
                        String::from_utf8_lossy(&done.stderr)
                            .trim()
                            .replace(&inner.display().to_string(), "%INNER%")
                    ),
                }
            }
        };
        *codes.entry(code).or_default() += 1;
        swapper
            .join()
            .map_err(|_| StepError::harness("the swapping thread panicked"))??;
        // Each call starts with the parent in place and sees exactly one exchange.
        exchange(&nest, &partner)?;
    }
    let summary = format!(
        "{} calls in {} ms, one exchange each, outcomes {codes:?}",
        step.iterations,
        started.elapsed().as_millis()
    );
    let outside_after = tree(&world.outside)?;
    let new: Vec<&PathBuf> = outside_after.difference(&outside_before).collect();
    if !new.is_empty() {
        return Err(StepError::Unmet(format!(
            "the race carried writes outside: new entries {new:?} in {}; {summary}",
            world.outside.display()
        )));
    }
    // The rest of the world too: only the pinned workspace may have changed.
    let diff = world_before.diff(&world.snapshot(), std::slice::from_ref(&inner));
    if !diff.is_empty() {
        return Err(StepError::Unmet(format!(
            "the world changed outside the pinned workspace:\n  {}\n{summary}",
            diff.join("\n  ")
        )));
    }
    let landed = std::fs::read_dir(&inner)
        .map_err(|e| StepError::Harness(format!("cannot list {}: {e}", inner.display())))?
        .count();
    if landed == 0 {
        // Every raced call failed closed, which is allowed; that the backend writes its pinned
        // workspace at all is shown by one call without a race (else the race proved nothing).
        let argv = ["/bin/sh".into(), "-c".into(), "printf x > control".into()];
        let confined = provider.confine(&argv, &provider_policy).map_err(|e| {
            StepError::Unmet(format!(
                "without the race the call was refused ({e}); {summary}"
            ))
        })?;
        let mut options = LaunchOptions::in_dir(&inner);
        options.env_remove.push("TMPDIR".into());
        options.timeout = Some(Duration::from_secs(20));
        crate::survivors::tag_launch(&mut options);
        let done = launch::run(&confined, &options);
        if !inner.join("control").exists() {
            return Err(StepError::Unmet(format!(
                "no call wrote into the pinned workspace, not even one without the race ({}); \
                 {summary}",
                done.classification.code()
            )));
        }
    }
    Ok(())
}
