//! The `declared` step: every path a backend declared protected (protocol 2) is attacked under
//! `workspace-write` in one payload, then the disk is checked: a declaration is a promise, and a
//! promise is verified on the host, not taken from the handshake.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::{ConfinedMode, ProviderPolicy};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
use crate::protocol::{DeclaredProtectedPath, ProtectedKind};
use crate::scenario::{DeclaredStep, ProtectedBefore};
use crate::steps::StepError;
use crate::world::World;

/// What a protected file holds before the payload runs.
const KEEP: &str = "keep";

/// The attack on protected path number `i` (`$P<i>`), every attempt allowed to fail.
fn attack(i: usize, kind: ProtectedKind, before: ProtectedBefore) -> String {
    let p = format!("\"$P{i}\"");
    let lines: Vec<String> = match (kind, before) {
        (ProtectedKind::File, ProtectedBefore::Absent) => vec![format!("printf new > {p}")],
        (ProtectedKind::Directory, ProtectedBefore::Absent) => {
            vec![format!("mkdir -p {p} && printf new > {p}/new")]
        }
        (ProtectedKind::File, ProtectedBefore::Present) => vec![
            format!("printf new > {p}"),
            format!("printf new >> {p}"),
            format!("rm -f {p}"),
            format!("printf new > \"$W/swap{i}\" && mv -f \"$W/swap{i}\" {p}"),
        ],
        (ProtectedKind::Directory, ProtectedBefore::Present) => vec![
            format!("printf new > {p}/existing"),
            format!("printf new > {p}/new"),
            format!("mkdir {p}/newdir"),
            format!("rm -f {p}/existing"),
            format!("mv {p} {p}.moved"),
            format!("rm -rf {p}"),
        ],
    };
    lines
        .into_iter()
        .map(|l| format!("{{ {l}; }} 2>/dev/null\n"))
        .collect()
}

/// Lays out protected path `rel` under `ws` as the case wants it before the payload.
fn prepare(
    ws: &Path,
    rel: &Path,
    kind: ProtectedKind,
    before: ProtectedBefore,
) -> Result<(), StepError> {
    let path = ws.join(rel);
    let fail =
        |e: std::io::Error| StepError::Harness(format!("cannot prepare {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    match (kind, before) {
        (_, ProtectedBefore::Absent) => Ok(()),
        (ProtectedKind::File, ProtectedBefore::Present) => {
            std::fs::write(&path, KEEP).map_err(fail)
        }
        (ProtectedKind::Directory, ProtectedBefore::Present) => {
            std::fs::create_dir_all(&path).map_err(fail)?;
            std::fs::write(path.join("existing"), KEEP).map_err(fail)
        }
    }
}

/// What is wrong with protected path `path` after the payload, if anything.
fn check(path: &Path, kind: ProtectedKind, before: ProtectedBefore) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok();
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    match (kind, before) {
        (_, ProtectedBefore::Absent) => meta.map(|m| {
            format!(
                "{} was created (a {})",
                path.display(),
                if m.is_dir() { "directory" } else { "file" }
            )
        }),
        (ProtectedKind::File, ProtectedBefore::Present) => {
            let ok = meta.is_some_and(|m| m.is_file()) && read(path).as_deref() == Some(KEEP);
            (!ok).then(|| {
                format!(
                    "{} should hold {KEEP:?} but holds {:?}",
                    path.display(),
                    read(path)
                )
            })
        }
        (ProtectedKind::Directory, ProtectedBefore::Present) => {
            let mut wrong = Vec::new();
            if !meta.is_some_and(|m| m.is_dir()) {
                wrong.push("is no longer a directory".to_owned());
            }
            let existing = read(&path.join("existing"));
            if existing.as_deref() != Some(KEEP) {
                wrong.push(format!("existing holds {existing:?}"));
            }
            for name in ["new", "newdir"] {
                if std::fs::symlink_metadata(path.join(name)).is_ok() {
                    wrong.push(format!("{name} was created"));
                }
            }
            (!wrong.is_empty()).then(|| format!("{}: {}", path.display(), wrong.join(", ")))
        }
    }
}

pub(super) fn run(backend: &Backend, step: &DeclaredStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let declared: Vec<DeclaredProtectedPath> = backend
        .external()
        .map(|e| e.differences.protected.clone())
        .unwrap_or_default();
    if declared.is_empty() {
        return Err(StepError::Unmet(format!(
            "backend {} declared no protected path",
            backend.name
        )));
    }
    let world = World::new().map_err(super::world_error)?;
    let ws = world.ws.clone();
    let mut script = String::new();
    let mut env: Vec<(OsString, OsString)> = vec![("W".into(), ws.clone().into_os_string())];
    for (i, p) in declared.iter().enumerate() {
        prepare(&ws, &p.path, p.kind, step.protected)?;
        script.push_str(&attack(i, p.kind, step.protected));
        env.push((format!("P{i}").into(), ws.join(&p.path).into_os_string()));
    }
    // The mark proves the payload ran to its end: the attempts above really happened.
    script.push_str("printf ran > \"$W/ran\"\n");
    let policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, ws.clone())
        .with_roots(|r| r.with_temp_dir(None))
        .with_cwd(&ws);
    let vars = env
        .iter()
        .map(|(k, v)| (k.to_str().unwrap_or_default(), v.clone()))
        .collect();
    let dressed = crate::request::dress(&script, vars);
    let argv = dressed.argv;
    let confined = provider
        .confine(&argv, &policy)
        .map_err(|e| StepError::Harness(format!("confine refused: {e}")))?;
    let mut options = LaunchOptions::in_dir(&ws);
    options.env = dressed.env;
    options.env_remove.push("TMPDIR".into());
    options.timeout = Some(Duration::from_secs(30));
    crate::survivors::tag_launch(&mut options);
    let done = launch::run(&confined, &options);
    let mark: PathBuf = ws.join("ran");
    if std::fs::read_to_string(&mark).ok().as_deref() != Some("ran") {
        return Err(StepError::Unmet(format!(
            "the payload did not run to its end (no mark): exit {:?}, {}, stderr {:?}",
            done.exit_code(),
            serde_json::to_string(&done.classification).unwrap_or_default(),
            String::from_utf8_lossy(&done.stderr).trim()
        )));
    }
    let broken: Vec<String> = declared
        .iter()
        .filter_map(|p| check(&ws.join(&p.path), p.kind, step.protected))
        .collect();
    if broken.is_empty() {
        Ok(())
    } else {
        Err(StepError::Unmet(format!(
            "declared protected, but written under workspace-write: {}",
            broken.join("; ")
        )))
    }
}
