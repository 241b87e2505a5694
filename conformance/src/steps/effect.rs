//! The `effect` step: one file effect, confined for real, then the host is checked.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::{Classification, ProviderPolicy, SandboxProvider};
use sandbox_local::launch::{self, LaunchOptions};

use crate::backends::Backend;
use crate::scenario::{Effect, EffectStep, ExpectedEffect, PathRoute, Shape};
use crate::steps::StepError;
use crate::world::{SENTINEL, World, file_name, name, shell_quote};

/// Where one effect lands.
struct Place {
    /// The workspace root as the policy spells it.
    root: PathBuf,
    /// The command's working directory.
    cwd: PathBuf,
    /// The path handed to the command (`$T`).
    target: PathBuf,
    /// The real workspace (`$W`: where `src` lives and `moved` lands).
    ws: PathBuf,
    /// `$TMPDIR` for the command and the policy.
    temp_dir: Option<PathBuf>,
    /// The real file whose content or mode the effect changes (links followed).
    content: PathBuf,
    /// The directory entry the effect creates or removes (last component not followed).
    entry: PathBuf,
}

/// The file name an effect works on.
fn file_for(op: Effect) -> &'static str {
    match op {
        Effect::Overwrite
        | Effect::Append
        | Effect::Truncate
        | Effect::Unlink
        | Effect::RenameOut
        | Effect::Chmod => "existing",
        Effect::Create | Effect::RenameIn | Effect::Hardlink => "new",
        Effect::Mkdir => "newdir",
        Effect::Rmdir => "emptydir",
        Effect::Symlink => "newlink",
    }
}

/// The bash script for an effect, on `$T` (target) and `$W` (workspace).
fn script(op: Effect) -> &'static str {
    match op {
        Effect::Create | Effect::Overwrite => r#"printf new > "$T""#,
        Effect::Append => r#"printf new >> "$T""#,
        Effect::Truncate => {
            r#"perl -e 'truncate($ARGV[0], 0) or die "truncate $ARGV[0]: $!\n"' -- "$T""#
        }
        Effect::Unlink => r#"rm -f -- "$T""#,
        Effect::RenameIn => r#"mv -- "$W/src" "$T""#,
        Effect::RenameOut => r#"mv -- "$T" "$W/moved""#,
        Effect::Mkdir => r#"mkdir -- "$T""#,
        Effect::Rmdir => r#"rmdir -- "$T""#,
        Effect::Symlink => r#"ln -s /etc/hostname "$T""#,
        Effect::Hardlink => r#"ln -- "$W/src" "$T""#,
        Effect::Chmod => r#"chmod 600 -- "$T""#,
    }
}

/// The script with its paths spelled in it, as an ordinary command spells them (a name that is
/// not UTF-8 as bash octal escapes).
fn spelled_script(op: Effect, place: &Place) -> String {
    let q = |p: &Path| shell_quote(p.as_os_str());
    script(op)
        .replace(r#""$W/src""#, &q(&place.ws.join(file_name("src"))))
        .replace(r#""$W/moved""#, &q(&place.ws.join(file_name("moved"))))
        .replace(r#""$T""#, &q(&place.target))
}

/// The effect as a program run directly, without a shell (as clients run `mkdir`, `mv`, `rm`),
/// for the effects one program does and paths an argv can carry (UTF-8: the protocol's JSON
/// cannot carry other bytes, so such a name is built by the shell instead).
fn direct(op: Effect, place: &Place) -> Option<Vec<OsString>> {
    let t = place.target.as_os_str();
    let src = place.ws.join(file_name("src")).into_os_string();
    let moved = place.ws.join(file_name("moved")).into_os_string();
    if t.to_str().is_none() || src.to_str().is_none() {
        return None;
    }
    let argv: Vec<&OsStr> = match op {
        Effect::Unlink => vec!["rm".as_ref(), "-f".as_ref(), "--".as_ref(), t],
        Effect::RenameIn => vec!["mv".as_ref(), "--".as_ref(), &src, t],
        Effect::RenameOut => vec!["mv".as_ref(), "--".as_ref(), t, &moved],
        Effect::Mkdir => vec!["mkdir".as_ref(), "--".as_ref(), t],
        Effect::Rmdir => vec!["rmdir".as_ref(), "--".as_ref(), t],
        Effect::Symlink => vec!["ln".as_ref(), "-s".as_ref(), "/etc/hostname".as_ref(), t],
        Effect::Hardlink => vec!["ln".as_ref(), "--".as_ref(), &src, t],
        Effect::Chmod => vec!["chmod".as_ref(), "600".as_ref(), "--".as_ref(), t],
        // Truncation is tried by path (truncate(2)), which only Perl's `truncate` does; the
        // others need the shell's redirections.
        Effect::Truncate | Effect::Create | Effect::Overwrite | Effect::Append => return None,
    };
    Some(argv.into_iter().map(OsStr::to_os_string).collect())
}

#[expect(
    clippy::too_many_lines,
    reason = "the table of every shape of place, one arm each: split, the table would be read across files"
)]
fn place(world: &World, shape: Shape, op: Effect) -> Result<Place, StepError> {
    let file = file_for(op);
    let plain = |root: PathBuf, ws: PathBuf, spelled: PathBuf, real: PathBuf, suffix: &OsStr| {
        let n = name(file, suffix);
        Place {
            cwd: ws.clone(),
            root,
            ws,
            temp_dir: None,
            target: spelled.join(&n),
            content: real.join(&n),
            entry: real.join(&n),
        }
    };
    let none = OsStr::new("");
    let ws = world.ws.clone();
    let outside = world.outside.clone();
    let only = |ops: &[Effect]| {
        if ops.contains(&op) {
            Ok(())
        } else {
            Err(StepError::Unmet(format!(
                "shape {shape:?} does not apply to effect {op:?}"
            )))
        }
    };
    Ok(match shape {
        Shape::Inside => plain(
            ws.clone(),
            ws.clone(),
            ws.join(file_name("dir")),
            ws.join(file_name("dir")),
            none,
        ),
        Shape::Root => plain(ws.clone(), ws.clone(), ws.clone(), ws.clone(), none),
        Shape::Dotdot => plain(
            ws.clone(),
            ws.clone(),
            ws.join(file_name("dir"))
                .join("../..")
                .join(outside.file_name().unwrap_or_default()),
            outside,
            none,
        ),
        Shape::AbsoluteOutside => plain(ws.clone(), ws.clone(), outside.clone(), outside, none),
        Shape::SymlinkDir => plain(
            ws.clone(),
            ws.clone(),
            ws.join(file_name("link_out")),
            outside,
            none,
        ),
        Shape::SymlinkFile => {
            use Effect::*;
            only(&[
                Create, Overwrite, Append, Truncate, Chmod, Unlink, RenameOut,
            ])?;
            let (link, real) = if file == "new" {
                (
                    ws.join(file_name("dangling")),
                    outside.join(file_name("new")),
                )
            } else {
                (
                    ws.join(file_name("file_link")),
                    outside.join(file_name("existing")),
                )
            };
            Place {
                root: ws.clone(),
                cwd: ws.clone(),
                ws,
                temp_dir: None,
                target: link.clone(),
                content: real,
                entry: link,
            }
        }
        Shape::Tmp => plain(
            ws.clone(),
            ws.clone(),
            world.tmp.clone(),
            world.tmp.clone(),
            none,
        ),
        Shape::Tmpdir => {
            let tmpdir = world.tmpdir.clone();
            let mut p = plain(ws.clone(), ws.clone(), tmpdir.clone(), tmpdir.clone(), none);
            p.temp_dir = Some(tmpdir);
            p
        }
        Shape::DevNull => {
            only(&[Effect::Overwrite, Effect::Append])?;
            Place {
                root: ws.clone(),
                cwd: ws.clone(),
                ws,
                temp_dir: None,
                target: PathBuf::from("/dev/null"),
                content: PathBuf::from("/dev/null"),
                entry: PathBuf::from("/dev/null"),
            }
        }
        Shape::DevShm => plain(
            ws.clone(),
            ws.clone(),
            world.shm.clone(),
            world.shm.clone(),
            none,
        ),
        Shape::WsUnderTmp => {
            let tws = world.tmp.join("ws");
            plain(
                tws.clone(),
                tws.clone(),
                tws.join(file_name("dir")),
                tws.join(file_name("dir")),
                none,
            )
        }
        Shape::RootViaSymlink => {
            let alias = world.alias.clone();
            let mut p = plain(
                alias.clone(),
                ws.clone(),
                alias.join(file_name("dir")),
                ws.join(file_name("dir")),
                none,
            );
            p.cwd = alias;
            p
        }
        Shape::RootTrailingSlash => {
            let mut spelled = ws.clone().into_os_string();
            spelled.push("/");
            let mut p = plain(
                ws.clone(),
                ws.clone(),
                ws.join(file_name("dir")),
                ws.join(file_name("dir")),
                none,
            );
            p.root = PathBuf::from(spelled);
            p
        }
        Shape::FsRootWorkspace => {
            let mut p = plain(
                PathBuf::from("/"),
                ws.clone(),
                outside.clone(),
                outside,
                none,
            );
            p.cwd = PathBuf::from("/");
            p
        }
        Shape::NonUtf8 => {
            let s = OsStr::from_bytes(b"\xff");
            plain(
                ws.clone(),
                ws.clone(),
                ws.join(file_name("dir")),
                ws.join(file_name("dir")),
                s,
            )
        }
        Shape::NonUtf8Outside => {
            let s = OsStr::from_bytes(b"\xff");
            plain(ws.clone(), ws.clone(), outside.clone(), outside, s)
        }
        Shape::Space => {
            let d = ws.join("with space");
            plain(ws.clone(), ws.clone(), d.clone(), d, OsStr::new(" x"))
        }
        Shape::Prelinked => {
            use Effect::*;
            only(&[Overwrite, Append, Truncate, Chmod])?;
            Place {
                root: ws.clone(),
                cwd: ws.clone(),
                target: ws.join("prelinked"),
                content: outside.join("linked_target"),
                entry: ws.join("prelinked"),
                ws,
                temp_dir: None,
            }
        }
    })
}

/// What the host shows after the effect.
#[derive(Debug, PartialEq, Eq)]
enum State {
    /// The effect happened in full.
    Effected,
    /// The host is exactly as before.
    Unchanged,
    /// Something else (a half-done effect): always a failure.
    Other(String),
}

fn read(path: &Path) -> Option<String> {
    std::fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn state(op: Effect, p: &Place) -> State {
    let content = read(&p.content);
    let by_content = |unchanged: Option<&str>, effected: Option<&str>| {
        if content.as_deref() == unchanged {
            State::Unchanged
        } else if content.as_deref() == effected {
            State::Effected
        } else {
            State::Other(format!("{} holds {content:?}", p.content.display()))
        }
    };
    let by_entry = |unchanged: bool, effected: bool, what: &str| match (unchanged, effected) {
        (true, false) => State::Unchanged,
        (false, true) => State::Effected,
        _ => State::Other(format!("{}: {what}", p.entry.display())),
    };
    let src = p.ws.join(file_name("src"));
    match op {
        Effect::Create => by_content(None, Some("new")),
        Effect::Overwrite => by_content(Some("old"), Some("new")),
        Effect::Append => by_content(Some("old"), Some("oldnew")),
        Effect::Truncate => by_content(Some("old"), Some("")),
        Effect::Chmod => {
            match std::fs::metadata(&p.content).map(|m| m.permissions().mode() & 0o777) {
                Ok(0o644) => State::Unchanged,
                Ok(0o600) => State::Effected,
                other => State::Other(format!("{} mode {other:?}", p.content.display())),
            }
        }
        Effect::Unlink => by_entry(exists(&p.entry), !exists(&p.entry), "unlink half-done"),
        Effect::Rmdir => by_entry(p.entry.is_dir(), !exists(&p.entry), "rmdir half-done"),
        Effect::RenameOut => by_entry(
            exists(&p.entry),
            !exists(&p.entry) && exists(&p.ws.join(file_name("moved"))),
            "rename out half-done",
        ),
        Effect::RenameIn => by_entry(
            !exists(&p.entry) && exists(&src),
            read(&p.entry).as_deref() == Some("src") && !exists(&src),
            "rename in half-done",
        ),
        Effect::Mkdir => by_entry(!exists(&p.entry), p.entry.is_dir(), "not a directory"),
        Effect::Symlink => by_entry(
            !exists(&p.entry),
            std::fs::symlink_metadata(&p.entry).is_ok_and(|m| m.file_type().is_symlink()),
            "not a symlink",
        ),
        Effect::Hardlink => by_entry(
            !exists(&p.entry),
            exists(&p.entry) && std::fs::metadata(&src).is_ok_and(|m| m.nlink() == 2),
            "not a hard link to src",
        ),
    }
}

pub(super) fn run(backend: &Backend, step: &EffectStep) -> Result<(), StepError> {
    // The files the effect works on get names drawn for the case (`notes.txt`, `lib`, ...).
    crate::world::with_file_names(|| run_named(backend, step))
}

fn run_named(backend: &Backend, step: &EffectStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let world = World::for_effect(step.shape).map_err(super::world_error)?;
    let place = place(&world, step.shape, step.op)?;
    let policy = ProviderPolicy::new(step.mode, place.root.clone())
        .with_roots(|r| r.with_temp_dir(place.temp_dir.clone()))
        .with_cwd(&place.cwd);
    // A third of the effects one program can do run it directly, the rest through a shell.
    let dressed = match step.via {
        PathRoute::Argv => match direct(step.op, &place) {
            Some(argv) if crate::world::draw_one(&["direct", "shell", "shell"]) == "direct" => {
                crate::request::Dressed::direct(argv)
            }
            _ => crate::request::dress(&spelled_script(step.op, &place), Vec::new()),
        },
        PathRoute::Env => crate::request::dress(
            // A drawn name may hold quotes, `$` or a backslash (a case with odd names): it
            // follows the variable as a word of its own.
            &script(step.op)
                .replace(
                    r#""$W/src""#,
                    &format!(r#""$W"/{}"#, shell_quote(OsStr::new(&file_name("src")))),
                )
                .replace(
                    r#""$W/moved""#,
                    &format!(r#""$W"/{}"#, shell_quote(OsStr::new(&file_name("moved")))),
                ),
            vec![
                ("T", place.target.clone().into_os_string()),
                ("W", place.ws.clone().into_os_string()),
            ],
        ),
    };
    let argv = dressed.argv.clone();
    let before = world.snapshot();
    let twin = crate::metamorphic::Twin::new(provider.clone(), &world, true)?;
    let answer = twin.confine(&argv, &policy);
    twin.verdict()?;
    let confined = match answer {
        Ok(confined) => confined,
        Err(e) if step.expect == ExpectedEffect::Refused => {
            let diff = before.diff(&world.snapshot(), &[]);
            return match state(step.op, &place) {
                State::Unchanged if diff.is_empty() => Ok(()),
                State::Unchanged => Err(StepError::Unmet(format!(
                    "confine refused ({e}) but the world changed:\n  {}",
                    diff.join("\n  ")
                ))),
                other => Err(StepError::Unmet(format!(
                    "confine refused ({e}) but the host shows {other:?}"
                ))),
            };
        }
        Err(e) => return Err(StepError::Unmet(format!("confine refused: {e}"))),
    };
    let mut options = LaunchOptions::in_dir(&place.cwd);
    options.env = dressed.env;
    match &place.temp_dir {
        Some(t) => options
            .env
            .push(("TMPDIR".into(), t.clone().into_os_string())),
        None => options.env_remove.push("TMPDIR".into()),
    }
    options.timeout = Some(Duration::from_secs(20));
    crate::survivors::tag_launch(&mut options);
    let done = launch::run(&confined, &options);

    let observed = if step.shape == Shape::DevNull {
        None
    } else {
        Some(state(step.op, &place))
    };
    let describe = || {
        format!(
            "{} {:?} on {:?} under {}: exit {:?}, {}, host {:?}, stderr {:?}",
            backend.name,
            step.op,
            step.shape,
            step.mode,
            done.exit_code(),
            serde_json::to_string(&done.classification).unwrap_or_default(),
            observed,
            String::from_utf8_lossy(&done.stderr).trim()
        )
    };
    let sentinel = read(&world.outside.join("sentinel"));
    if sentinel.as_deref() != Some(SENTINEL) {
        return Err(StepError::Unmet(format!(
            "the sentinel outside the workspace changed (now {sentinel:?}): {}",
            describe()
        )));
    }
    if let Classification::RunnerFailure { .. } | Classification::StartFailed { .. } =
        done.classification
    {
        if step.expect == ExpectedEffect::Refused && observed == Some(State::Unchanged) {
            return Ok(());
        }
        return Err(StepError::Unmet(format!(
            "the sandbox did not run the command: {}",
            describe()
        )));
    }
    let denied = matches!(done.classification, Classification::Denied { .. });
    let private_tmp = backend.temp_is_private() && step.shape == Shape::Tmp;
    let expect = expected_here(backend, step);
    let private_place = backend.in_private_place(step.mode, &world.dir)
        || backend.in_private_place(step.mode, &place.target);
    let ok = judged(
        expect,
        private_tmp,
        private_place,
        &done,
        denied,
        observed.as_ref(),
    );
    // Everything else in the world must be as it was: a write under another name than the one
    // asked (a backend that rewrites bytes it cannot carry) is named here.
    let may_change: Vec<PathBuf> = if expect == ExpectedEffect::Allowed || private_tmp {
        changes(step.op, &place)
    } else if step.op == Effect::RenameOut && step.mode == sandbox::ConfinedMode::WorkspaceWrite {
        // A rename the kernel refuses across mounts (EXDEV) makes `mv` copy the file into the
        // workspace before it fails to remove the source: a read outside and a write inside,
        // both allowed.
        vec![place.ws.join(file_name("moved"))]
    } else {
        Vec::new()
    };
    let diff = before.diff(&world.snapshot(), &may_change);
    let stray = if diff.is_empty() {
        String::new()
    } else {
        format!(
            "; the world changed where the case expects no change (the effect was asked on {}):\n  {}",
            crate::world::shown(&place.entry),
            diff.join("\n  ")
        )
    };
    if ok && diff.is_empty() {
        Ok(())
    } else if ok {
        Err(StepError::Unmet(format!(
            "{}; {}",
            stray.trim_start_matches("; "),
            describe()
        )))
    } else {
        Err(StepError::Unmet(format!(
            "expected {:?}; got {}{stray}",
            step.expect,
            describe()
        )))
    }
}

/// What `step` expects of `backend`. A backend whose calls have a temp area of their own shows
/// the host's /tmp through it (what an effect there makes or changes is the call's own: the
/// host's place stays as it was) and leaves the caller's $TMPDIR outside its writable set (denied,
/// as anywhere outside).
fn expected_here(backend: &Backend, step: &EffectStep) -> ExpectedEffect {
    match (backend.temp_is_private(), step.shape, step.expect) {
        (true, Shape::Tmp, ExpectedEffect::Allowed) => ExpectedEffect::Contained,
        (true, Shape::Tmpdir, ExpectedEffect::Allowed) => ExpectedEffect::Denied,
        _ => step.expect,
    }
}

/// Whether a launch that ran met `expect`: `observed` is the host's state of the place.
fn judged(
    expect: ExpectedEffect,
    private_tmp: bool,
    private_place: bool,
    done: &launch::Finished,
    denied: bool,
    observed: Option<&State>,
) -> bool {
    match expect {
        // A rename into the call's own /tmp takes the workspace's file away (the workspace is
        // writable) and puts it where only the call sees it.
        ExpectedEffect::Contained if private_tmp => observed != Some(&State::Effected),
        ExpectedEffect::Allowed => {
            done.exit_code() == Some(0) && !denied && observed.is_none_or(|s| *s == State::Effected)
        }
        // In a place the backend declared private (its own tmpfs over the world's folder), a
        // write that lands there or finds nothing leaves the host as it was: judged on the host.
        ExpectedEffect::Denied if private_place => observed == Some(&State::Unchanged),
        ExpectedEffect::Denied => denied && observed == Some(&State::Unchanged),
        ExpectedEffect::Contained => observed == Some(&State::Unchanged),
        // It ran although the policy should have been refused.
        ExpectedEffect::Refused => false,
    }
}

/// The paths an allowed effect changes.
fn changes(op: Effect, p: &Place) -> Vec<PathBuf> {
    let mut paths = vec![p.entry.clone(), p.content.clone()];
    match op {
        Effect::RenameIn => paths.push(p.ws.join(file_name("src"))),
        Effect::RenameOut => paths.push(p.ws.join(file_name("moved"))),
        _ => {}
    }
    paths
}
