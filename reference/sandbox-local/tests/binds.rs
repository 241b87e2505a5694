//! bwrap binds what was pinned: every root and protected path is opened as a descriptor without
//! following a symlink, checked against its pin, and reaches the runner at a fixed number; a
//! swap between the pin and the launch refuses the call.
//!
//! Linux only: bwrap and its descriptor binds exist nowhere else.
#![cfg(target_os = "linux")]

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sandbox::{ConfinedArgv, ConfinedMode, LaunchFds, ProviderPolicy, SandboxProvider};
use sandbox_local::bind::{self, PROTECTED_PATH_MOVED};
use sandbox_local::launch::{self, LaunchOptions};
use sandbox_local::profile::{self, WritableSet};
use sandbox_local::{Backend, LocalConfig, LocalProvider};
use sandbox_test_support::scratch_root;

/// A workspace `<tmp>/p/ws` pinned now, with a git directory, under workspace-write; the temp dir
/// is left out (the ambient one belongs to nobody here).
fn pinned(root: &Path) -> (PathBuf, ProviderPolicy) {
    let ws = root.join("p/ws");
    std::fs::create_dir_all(ws.join(".git/hooks")).expect("mkdir");
    std::fs::write(ws.join(".git/config"), "[core]\n").expect("config");
    let mut policy = ProviderPolicy::new(ConfinedMode::WorkspaceWrite, &ws)
        .with_roots(|r| r.with_temp_dir(None));
    policy.roots.workspace_pin = Some(sandbox::PinnedDir::pin(&ws).expect("pin"));
    (ws, policy)
}

#[test]
fn every_bind_is_the_pinned_directory_opened_without_a_symlink() {
    let (_d, root) = scratch_root("binds-");
    let (ws, policy) = pinned(&root);
    let set = WritableSet::of(&policy).expect("set");
    let mut fds = LaunchFds::default();
    let binds = bind::open_binds(&profile::bwrap_binds(&set), &policy, &mut fds).expect("open");
    let dests: Vec<&Path> = binds.iter().map(|b| b.dest.as_path()).collect();
    assert!(dests.contains(&ws.as_path()), "{dests:?}");
    assert!(
        dests.contains(&ws.join(".git/config").as_path()),
        "{dests:?}"
    );
    assert_eq!(
        binds.iter().map(|b| b.fd).collect::<Vec<_>>(),
        fds.numbers(),
        "each bind names the number its descriptor gets"
    );
    // Each descriptor is the directory (or file) at its destination, by identity.
    for (bind, (_, fd)) in binds.iter().zip(fds.iter()) {
        let st = nix::sys::stat::fstat(fd).expect("fstat");
        let meta = std::fs::symlink_metadata(&bind.dest).expect("stat");
        assert_eq!((st.st_dev, st.st_ino), (meta.dev(), meta.ino()), "{bind:?}");
        assert_eq!(
            bind.writable,
            bind.dest != ws.join(".git/config") && bind.dest != ws.join(".git/hooks")
        );
    }
}

#[test]
fn a_parent_swapped_for_a_symlink_after_the_pin_is_workspace_moved() {
    let (_d, root) = scratch_root("binds-");
    let (ws, policy) = pinned(&root);
    let set = WritableSet::of(&policy).expect("set");
    // The parent goes aside and a relative symlink to a look-alike takes its place.
    std::fs::create_dir_all(root.join("victim/ws")).expect("victim");
    std::fs::rename(root.join("p"), root.join("p.real")).expect("rename");
    std::os::unix::fs::symlink("victim", root.join("p")).expect("symlink");
    let mut fds = LaunchFds::default();
    let err = bind::open_binds(&profile::bwrap_binds(&set), &policy, &mut fds)
        .expect_err("a symlink on the way");
    assert_eq!(err.code, sandbox::WORKSPACE_MOVED, "{err}");
    assert!(err.to_string().contains("symlink"), "{err}");
    // A real directory renamed into place (no symlink at all) is another directory: the pin.
    std::fs::remove_file(root.join("p")).expect("unlink");
    std::fs::rename(root.join("victim"), root.join("p")).expect("rename");
    let err = bind::open_binds(
        &profile::bwrap_binds(&set),
        &policy,
        &mut LaunchFds::default(),
    )
    .expect_err("another directory");
    assert_eq!(err.code, sandbox::WORKSPACE_MOVED, "{err}");
    assert!(err.to_string().contains("was pinned"), "{err}");
    assert!(!ws.join("f").exists());
}

#[test]
fn a_protected_path_swapped_for_a_symlink_is_refused_and_a_missing_temp_root_left_out() {
    let (_d, root) = scratch_root("binds-");
    let (ws, policy) = pinned(&root);
    let mut set = WritableSet::of(&policy).expect("set");
    set.temp.push(root.join("no-such-temp"));
    std::fs::rename(ws.join(".git/config"), ws.join("config.real")).expect("rename");
    std::os::unix::fs::symlink("../config.real", ws.join(".git/config")).expect("symlink");
    let err = bind::open_binds(
        &profile::bwrap_binds(&set),
        &policy,
        &mut LaunchFds::default(),
    )
    .expect_err("protected path behind a symlink");
    assert_eq!(err.code, PROTECTED_PATH_MOVED, "{err}");
    std::fs::remove_file(ws.join(".git/config")).expect("unlink");
    std::fs::rename(ws.join("config.real"), ws.join(".git/config")).expect("rename");
    let binds = bind::open_binds(
        &profile::bwrap_binds(&set),
        &policy,
        &mut LaunchFds::default(),
    )
    .expect("a missing temp root is no error");
    assert!(binds.iter().all(|b| !b.dest.ends_with("no-such-temp")));
}

#[test]
fn a_launch_hands_its_descriptors_at_their_numbers_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("data");
    std::fs::write(&file, "carried").expect("write");
    // A signal this thread blocks must not stay blocked in the launch, and SIGPIPE (which the
    // Rust runtime ignores) is back to its default there.
    let mut usr2 = nix::sys::signal::SigSet::empty();
    usr2.add(nix::sys::signal::Signal::SIGUSR2);
    usr2.thread_block().expect("block SIGUSR2");
    let bash = which::which("bash").expect("bash on PATH");
    // By name (the `Command` path) and by its path (started by `posix_spawn` on glibc, without
    // copying this process): the same descriptors, signals and working directory either way.
    for program in [OsString::from("bash"), bash.into_os_string()] {
        let mut fds = LaunchFds::default();
        let n = fds.add(std::fs::File::open(&file).expect("open").into());
        assert_eq!(n, LaunchFds::FIRST);
        fds.insert(9, std::fs::File::open(&file).expect("open").into());
        // A descriptor this process holds without close-on-exec must not reach the launch.
        // (F_DUPFD gives a number of 100 or more, without close-on-exec; one at 5 lies between
        // the numbers the launch hands over.)
        let opened = std::fs::File::open(&file).expect("open");
        let stray_n = nix::fcntl::fcntl(&opened, nix::fcntl::FcntlArg::F_DUPFD(100)).expect("dup");
        let gap = nix::fcntl::fcntl(&opened, nix::fcntl::FcntlArg::F_DUPFD(5)).expect("dup");
        let launch = ConfinedArgv {
            fds,
            ..ConfinedArgv::unconfined(vec![
                program.clone(),
                "-c".into(),
                OsString::from(format!(
                    "cat /dev/fd/{n}; echo; cat /dev/fd/9; echo; ls /proc/self/fd | sort -n | tr '\\n' ' '; \
                     [ -e /proc/self/fd/{stray_n} ] && echo STRAY; \
                     [ -e /proc/self/fd/{gap} ] && [ {gap} != 9 ] && echo GAP; \
                     read -r _ < /dev/stdin && echo STDIN; pwd; \
                     blk=$(sed -n 's/^SigBlk:\\t//p' /proc/self/status); ign=$(sed -n 's/^SigIgn:\\t//p' /proc/self/status); \
                     [ $(( 0x$blk & 0x800 )) = 0 ] || echo USR2_BLOCKED; [ $(( 0x$ign & 0x1000 )) = 0 ] || echo PIPE_IGNORED; false"
                )),
            ])
        };
        // Twice: the launch keeps its descriptors for the next spawn (each spawn duplicates
        // them, so they share one offset: the payload reopens them through /dev/fd).
        for _ in 0..2 {
            let done = launch::run(&launch, &LaunchOptions::in_dir(dir.path()));
            let out = String::from_utf8_lossy(&done.stdout);
            assert_eq!(
                done.exit_code(),
                Some(1),
                "{program:?}: {out} {:?}",
                String::from_utf8_lossy(&done.stderr)
            );
            assert!(out.starts_with("carried\ncarried\n"), "{program:?}: {out}");
            for leak in ["STRAY", "GAP", "STDIN", "USR2_BLOCKED", "PIPE_IGNORED"] {
                assert!(!out.contains(leak), "{program:?}: {leak} in {out}");
            }
            let cwd = dir.path().canonicalize().expect("canonical");
            let cwd = cwd.display().to_string();
            assert!(out.lines().any(|l| l.ends_with(&cwd)), "{program:?}: {out}");
        }
        // The descriptors never reach the wire, and a launch read back carries none.
        let wire = serde_json::to_string(&launch).expect("json");
        assert!(!wire.contains("fds"), "{wire}");
        let back: ConfinedArgv = serde_json::from_str(&wire).expect("back");
        assert!(back.fds.is_empty());
        assert_ne!(back, launch);
        assert_eq!(launch.clone(), launch);
        nix::unistd::close(stray_n).expect("close");
        nix::unistd::close(gap).expect("close");
    }
    usr2.thread_unblock().expect("unblock SIGUSR2");
}

#[test]
fn the_provider_hands_bwrap_descriptors_and_names_no_bound_path_twice() {
    let provider = LocalProvider::new(LocalConfig::only(Backend::Bwrap));
    if let Err(e) = provider.selection() {
        panic!("bwrap must be usable on this host: {e}");
    }
    let (_d, root) = scratch_root("binds-");
    let (ws, policy) = pinned(&root);
    let launch = provider
        .confine(&["true".into()], &policy)
        .expect("confine");
    let argv: Vec<String> = launch
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(
        !argv.iter().any(|a| a == "--bind" || a == "--bind-try"),
        "{argv:?}"
    );
    let at = argv
        .iter()
        .position(|a| a == ws.to_str().expect("utf8"))
        .expect("the workspace is a destination");
    assert_eq!(argv[at - 2], "--bind-fd");
    let number: i32 = argv[at - 1].parse().expect("a number");
    assert!(launch.fds.numbers().contains(&number), "{:?}", launch.fds);
    let done = launch::run(&launch, &LaunchOptions::in_dir(&ws));
    assert_eq!(
        done.exit_code(),
        Some(0),
        "{:?}",
        String::from_utf8_lossy(&done.stderr)
    );
}
