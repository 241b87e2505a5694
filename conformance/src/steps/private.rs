//! The `private` step: every place a backend declared private to the sandbox (its handshake's
//! `differences.private`: its own tmpfs on `/tmp`, `/var/tmp`, `/home`, or a per-session
//! directory bound there) is verified. Before the call the harness puts a file of its own at the
//! host's place; one payload looks for it there (it must not see it: the place would not be
//! private) and creates a file and a directory there (they must not reach the host's place).
//! Afterwards the host's file holds what it held, and everything is removed again. A place the
//! host does not have gets no file of the harness's, and only the second half is checked.

use std::path::{Path, PathBuf};

use crate::backends::Backend;
use crate::scenario::PrivateStep;
use crate::steps::StepError;
use crate::world::{World, draw_hex, draw_one, shell_quote};

/// What the harness's own file at each host place holds.
const HOST_CONTENT: &str = "host\n";

/// The harness's file at one declared place, removed on drop.
struct Place {
    inside: PathBuf,
    /// The file the harness put at the host's place (`None`: the host lacks the place).
    canary: Option<PathBuf>,
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(c) = &self.canary {
            let _ = std::fs::remove_file(c);
        }
    }
}

/// Where the harness tries a declared private place: the place itself when its user may write
/// there, else the user's home directory when it lies in the place (`/home` for a user who can
/// write only `/home/USER`), else the place (then the harness cannot put its file there).
fn probe_dir(place: &Path) -> PathBuf {
    let writable = |p: &Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
    if writable(place) {
        return place.to_path_buf();
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.starts_with(place) && h.is_dir() && writable(h))
        .unwrap_or_else(|| place.to_path_buf())
}

pub(super) fn run(backend: &Backend, step: &PrivateStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let declared = backend.declared_private(step.mode);
    if declared.is_empty() {
        return Err(StepError::Harness(format!(
            "backend {} declared no private place under {}",
            backend.name, step.mode
        )));
    }
    let world = World::for_effect(crate::scenario::Shape::Inside).map_err(super::world_error)?;
    let stem = || format!(".{}-{}", draw_one(&["state", "lock", "cache"]), draw_hex(8));
    let (canary_name, made) = (stem(), stem());
    let mut places = Vec::new();
    for declared in declared {
        let inside = probe_dir(&declared);
        let canary = inside.is_dir().then(|| inside.join(&canary_name));
        if let Some(c) = &canary {
            std::fs::write(c, HOST_CONTENT).map_err(|e| {
                StepError::Harness(format!("cannot put a file at {}: {e}", c.display()))
            })?;
        }
        places.push(Place { inside, canary });
    }
    let mark = format!("{}-{}", draw_one(&["done", "ok", "finished"]), draw_hex(6));
    let mut script = String::new();
    for (i, p) in places.iter().enumerate() {
        let q = |name: &str| shell_quote(p.inside.join(name).as_os_str());
        script.push_str(&format!(
            "[ -e {c} ] && echo 'SEES {i}'\n{{ : > {m}; }} 2>/dev/null; mkdir {d} 2>/dev/null\n",
            c = q(&canary_name),
            m = q(&made),
            d = q(&format!("{made}.d"))
        ));
    }
    script.push_str(&format!("echo {mark}\n"));
    let argv = crate::request::dress(&script, Vec::new()).argv;
    let done = super::writable::run_in_world(provider, &world, step.mode, &argv)?;
    let stdout = String::from_utf8_lossy(&done.stdout);
    let mut wrong: Vec<String> = Vec::new();
    for (i, p) in places.iter().enumerate() {
        if stdout.lines().any(|l| l == format!("SEES {i}")) {
            wrong.push(format!(
                "the payload sees the host's {} at {}: the place is not private",
                p.canary
                    .as_deref()
                    .map(Path::display)
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
                p.inside.display()
            ));
        }
        if let Some(c) = &p.canary
            && std::fs::read_to_string(c).ok().as_deref() != Some(HOST_CONTENT)
        {
            wrong.push(format!("the host's {} changed", c.display()));
        }
        for name in [made.clone(), format!("{made}.d")] {
            let on_host = p.inside.join(&name);
            if std::fs::symlink_metadata(&on_host).is_ok() {
                let _ = std::fs::remove_file(&on_host).or_else(|_| std::fs::remove_dir(&on_host));
                wrong.push(format!(
                    "{} made inside the declared private {} is on the host",
                    on_host.display(),
                    p.inside.display()
                ));
            }
        }
    }
    super::ran_to_mark(&done, &stdout, &mark)?;
    if wrong.is_empty() {
        return Ok(());
    }
    Err(StepError::Unmet(format!(
        "a place {} declared private under {} is not: {}",
        backend.name,
        step.mode,
        wrong.join("; ")
    )))
}
