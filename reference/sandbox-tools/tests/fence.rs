//! The fenced filesystem against a hostile workspace: a directory swapped for a symlink while the
//! write tool writes, a workspace moved and replaced by a link after it was pinned, alias
//! spellings of the root. Every test checks what is on disk outside afterwards.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sandbox::SandboxMode;
use sandbox_local::{Backend, LocalConfig};
use sandbox_policy::Session;
use sandbox_test_support::{Dirs, scratch_dir};
use sandbox_tools::tools::{ToolOutput, Toolbox};
use serde_json::{Value, json};
use support::{call, confined_toolbox};

mod support;

/// A workspace in `dir` (writable by the payload when it is under /tmp) and an outside directory
/// beside it.
struct World {
    _dirs: Dirs,
    ws: PathBuf,
    outside: PathBuf,
    session: Session,
    tools: Toolbox,
}

fn world(dir: tempfile::TempDir) -> World {
    let dirs = Dirs::in_dir(dir);
    let (ws, outside) = (dirs.ws.clone(), dirs.outside.clone());
    let tools = confined_toolbox(
        SandboxMode::WorkspaceWrite,
        &ws,
        LocalConfig::only(Backend::Landlock),
        None,
    );
    World {
        session: Session::new("s", &ws),
        _dirs: dirs,
        ws,
        outside,
        tools,
    }
}

impl World {
    fn call(&self, tool: &str, args: Value) -> ToolOutput {
        call(&self.tools, &self.session, Some("a"), "c", tool, &args)
    }

    fn outside_entries(&self) -> Vec<String> {
        entries(&self.outside)
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Swaps `dir` for a symlink to the outside and back, atomically, until told to stop, while the
/// write tool writes `dir/f` 400 times; then nothing may be outside.
fn race(w: &World, dir: &Path, some_land_inside: bool) {
    let parked = dir.with_extension("real");
    let link = dir.with_extension("link");
    std::os::unix::fs::symlink(&w.outside, &link).expect("link");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, dir) = (Arc::clone(&stop), dir.to_path_buf());
        let (parked, link) = (parked.clone(), link.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            while !stop.load(Ordering::SeqCst) && swaps < 200_000 {
                let _ = std::fs::rename(&dir, &parked);
                let _ = std::fs::rename(&link, &dir);
                let _ = std::fs::rename(&dir, &link);
                let _ = std::fs::rename(&parked, &dir);
                swaps += 1;
            }
            swaps
        })
    };
    let target = dir.join("f");
    let mut codes = std::collections::BTreeMap::new();
    for i in 0..400 {
        let out = w.call(
            "write",
            json!({ "path": target, "content": format!("write {i}") }),
        );
        *codes.entry(out.code).or_insert(0) += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let swaps = swapper.join().expect("swapper");
    assert!(swaps > 0, "the race never ran");
    assert_eq!(
        w.outside_entries(),
        Vec::<String>::new(),
        "a write landed outside after {swaps} swaps; codes {codes:?}"
    );
    if some_land_inside {
        assert!(
            codes.contains_key("OK"),
            "no write ever landed inside: {codes:?}"
        );
    }
    // Refusals under the race may carry any error code (a path that vanished between two steps
    // is FS_IO or FS_BAD_PATH); what matters is that nothing landed outside.
}

#[test]
fn a_directory_swapped_for_a_symlink_during_writes_never_lands_outside() {
    let w = world(scratch_dir("fence-test-"));
    std::fs::create_dir(w.ws.join("d")).expect("d");
    race(&w, &w.ws.join("d"), true);
}

#[test]
fn the_workspace_itself_swapped_for_a_symlink_during_writes_never_lands_outside() {
    let w = world(scratch_dir("fence-test-"));
    // The workspace is gone or moved most of the time: refusals, never a write outside.
    race(&w, &w.ws, false);
}

#[test]
fn a_workspace_moved_and_replaced_by_a_link_fails_closed_for_every_tool() {
    let w = world(
        tempfile::Builder::new()
            .prefix("fence-test-")
            .tempdir_in("/tmp")
            .expect("tempdir"),
    );
    // One confined command under workspace-write may do this: the workspace's parent is /tmp.
    let swap = w.call(
        "bash",
        json!({ "command": format!("cd .. && mv ws ws.real && ln -s '{}' ws", w.outside.display()) }),
    );
    assert_eq!(swap.code, "OK", "{swap:?}");
    assert!(w.ws.is_symlink(), "the swap did not happen");
    let write = w.call("write", json!({ "path": w.ws.join("f"), "content": "x" }));
    assert_eq!(write.code, "WORKSPACE_MOVED", "{write:?}");
    assert!(
        write.text.contains(&format!("{:?}", w.ws))
            && write.text.contains(&format!("{:?}", w.outside)),
        "the error names both directories: {}",
        write.text
    );
    std::fs::write(w.ws.parent().expect("parent").join("ws.real/e"), "old").expect("e");
    let edit = w.call(
        "edit",
        json!({ "path": w.ws.join("e"), "old_text": "old", "new_text": "new" }),
    );
    assert_eq!(edit.code, "WORKSPACE_MOVED", "{edit:?}");
    let bash = w.call("bash", json!({ "command": "printf x > f" }));
    assert_eq!(bash.code, "WORKSPACE_MOVED", "{bash:?}");
    assert_eq!(w.outside_entries(), Vec::<String>::new());
}

#[test]
fn an_alias_spelling_of_the_root_writes_inside_and_the_root_itself_is_never_a_file() {
    let w = world(scratch_dir("fence-test-"));
    let alias = w.ws.parent().expect("parent").join("alias");
    std::os::unix::fs::symlink(&w.ws, &alias).expect("alias");
    let out = w.call(
        "write",
        json!({ "path": alias.join("sub/f"), "content": "x" }),
    );
    assert_eq!(out.code, "OK", "{out:?}");
    assert_eq!(std::fs::read_to_string(w.ws.join("sub/f")).expect("f"), "x");
    let mut trailing = w.ws.clone().into_os_string();
    trailing.push("/");
    let root = w.call("write", json!({ "path": trailing, "content": "x" }));
    assert_ne!(root.code, "OK", "{root:?}");
    assert!(w.ws.is_dir(), "the workspace root was replaced by a file");
    assert_eq!(w.outside_entries(), Vec::<String>::new());
    // Nothing but what was asked is left in the workspace: no temp files.
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(entries(&w.ws), vec!["sub".to_owned()]);
}

#[test]
fn two_sessions_of_one_toolbox_cannot_write_into_each_others_workspace() {
    // One deployment, two projects: each session's calls are fenced to its own cwd, by the shell
    // and by the write tool alike.
    let w = world(scratch_dir("fence-test-"));
    let other = w.ws.parent().expect("parent").join("other-project");
    std::fs::create_dir(&other).expect("other");
    let second = Session::new("t", &other);
    let call_in = |session: &Session, tool: &str, args: Value| {
        call(&w.tools, session, Some("a"), "c", tool, &args)
    };
    let into_other = w.call("write", json!({ "path": other.join("a"), "content": "x" }));
    assert_eq!(into_other.code, "FS_SANDBOX_DENIED", "{into_other:?}");
    let shell_into_other = w.call(
        "bash",
        json!({ "command": format!("printf x > '{}'", other.join("b").display()) }),
    );
    assert_eq!(shell_into_other.code, "DENIED", "{shell_into_other:?}");
    let back = call_in(
        &second,
        "write",
        json!({ "path": w.ws.join("c"), "content": "x" }),
    );
    assert_eq!(back.code, "FS_SANDBOX_DENIED", "{back:?}");
    let own = call_in(&second, "write", json!({ "path": "d", "content": "x" }));
    assert_eq!(own.code, "OK", "{own:?}");
    assert_eq!(entries(&other), vec!["d".to_owned()]);
    assert_eq!(entries(&w.ws), Vec::<String>::new());
}
