use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};

use super::names::PROJECTS;
use super::*;

#[test]
fn the_diff_names_every_change_outside_what_may_change() {
    let world = World::new().expect("world");
    let before = world.snapshot();
    let outside = world.outside.clone();
    std::fs::write(outside.join("sentinel"), "changed").expect("write");
    std::fs::write(outside.join("new"), "x").expect("write");
    std::fs::remove_file(outside.join("existing")).expect("rm");
    std::fs::write(world.ws.join("allowed"), "x").expect("write");
    symlink("/etc", world.tmp.join("link")).expect("symlink");
    let may = [world.ws.clone()];
    let diff = before.diff(&world.snapshot(), &may);
    let text = diff.join("\n");
    assert_eq!(diff.len(), 4, "{text}");
    assert!(text.contains(&format!("~ {}", outside.join("sentinel").display())));
    assert!(text.contains(&format!("+ {} (file", outside.join("new").display())));
    assert!(text.contains(&format!(
        "- {} (was file",
        outside.join("existing").display()
    )));
    assert!(text.contains("-> /etc"), "{text}");
    assert!(!text.contains("allowed"), "{text}");
}

#[test]
fn a_seed_and_a_trial_replay_the_same_places_and_others_differ() {
    let dirs = |seed: u64, trial: &str| {
        with_case(seed, trial, || {
            let world = World::new().expect("world");
            (world.dir.clone(), world.ws.clone(), world.tmp.clone())
        })
    };
    let first = dirs(7, "containment::bwrap::effects::a");
    assert_eq!(first, dirs(7, "containment::bwrap::effects::a"));
    let others: std::collections::BTreeSet<_> = (0..8u64).map(|n| dirs(n, "x").0).collect();
    assert!(others.len() > 1, "{others:?}");
}

#[test]
fn a_world_drawn_onto_another_never_removes_the_other() {
    // The same seed and trial draw the same places first: the second world must draw again
    // and leave the first one's folder and scratch roots alone.
    // A world for one effect makes no `/tmp` root, so only its folder shows it is taken.
    let first = with_case(11, "x::y", || {
        World::for_effect(Shape::Inside).expect("world")
    });
    let second = with_case(11, "x::y", || {
        World::for_effect(Shape::Inside).expect("world")
    });
    assert_ne!(first.dir, second.dir);
    assert!(first.outside.join("sentinel").is_file());
    drop(second);
    assert!(first.outside.join("sentinel").is_file());
}

#[test]
fn project_names_come_from_the_list_the_host_and_coined_ones() {
    let names: Vec<String> = (0..90u64)
        .map(|n| {
            with_case(n, "names", || {
                let world = World::for_effect(Shape::Inside).expect("world");
                world
                    .dir
                    .file_name()
                    .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
            })
        })
        .collect();
    let listed = |n: &String| PROJECTS.iter().any(|p| n.starts_with(p));
    let hosts = |n: &String| places().names.iter().any(|h| n.starts_with(h.as_str()));
    let from_list = names.iter().filter(|n| listed(n)).count();
    assert!((10..80).contains(&from_list), "{from_list}: {names:?}");
    if !places().names.is_empty() {
        assert!(names.iter().any(hosts), "{names:?}");
    }
    assert!(
        names.iter().any(|n| !listed(n) && !hosts(n)),
        "no coined name: {names:?}"
    );
    // Only coined names go without a suffix: one of millions, they do not collide.
    assert!(
        names.iter().all(|n| !PROJECTS.contains(&n.as_str())),
        "a listed name without a suffix: {names:?}"
    );
    let unsuffixed =
        |n: &&String| !n.contains(['(', '_']) && !n.contains(|c: char| c.is_ascii_digit());
    assert!(
        names
            .iter()
            .any(|n| !listed(n) && !hosts(n) && unsuffixed(&n)),
        "{names:?}"
    );
}

#[test]
fn worlds_carry_no_marker_and_leave_nothing_behind() {
    let world = World::new().expect("world");
    // Only what the harness names is checked: the base is the host's (a CI user's home may
    // well be `/home/sandbox-ci`).
    let drawn = [
        (&world.dir, world.base.as_path()),
        (&world.ws, world.base.as_path()),
        (&world.tmp, Path::new("/tmp")),
        (&world.shm, Path::new("/dev/shm")),
        (&world.tmpdir, Path::new("/var/tmp")),
    ];
    for (p, base) in drawn {
        let named = p
            .strip_prefix(base)
            .unwrap_or_else(|_| panic!("{p:?} in {base:?}"));
        let shown = named.display().to_string().to_lowercase();
        assert!(!shown.is_empty(), "{p:?}");
        assert!(
            !shown.contains("conformance") && !shown.contains("sandbox"),
            "{shown}"
        );
    }
    let roots: Vec<PathBuf> = world.roots().iter().map(|r| r.to_path_buf()).collect();
    let parent = world.dir.parent().map(Path::to_path_buf);
    let parent_existed = parent.as_ref().is_some_and(|p| p.is_dir());
    drop(world);
    for root in roots {
        assert!(!root.exists(), "{root:?}");
    }
    // Nothing made on the way: the world's parent is a folder that was there before.
    assert!(parent_existed);
}

#[test]
fn a_quoted_name_that_is_not_utf8_reaches_bash_byte_for_byte() {
    let name = OsStr::from_bytes(b"caf\xc3\xa9 it's \\ new\xff");
    let quoted = shell_quote(name);
    assert!(quoted.is_ascii() || std::str::from_utf8(quoted.as_bytes()).is_ok());
    let out = std::process::Command::new("bash")
        .args(["-c", &format!("printf '%s' {quoted}")])
        .output()
        .expect("bash");
    assert_eq!(out.stdout, name.as_bytes(), "{quoted}");
}

#[test]
fn a_placeholder_expands_once_and_its_shell_form_reaches_bash_byte_for_byte() {
    let values = vec![
        (
            "WS".to_owned(),
            "/v/it's 50% [draft] \"q\" \\ {a,b};!&".to_owned(),
        ),
        ("TMP".to_owned(), "/t/%WS%".to_owned()),
    ];
    // A value is never expanded again, and a `%` that starts no placeholder stays.
    assert_eq!(
        expand_placeholders("%TMP%|%WS%|%s %X%", &values),
        format!("/t/%WS%|{}|%s %X%", values[0].1)
    );
    let command = expand_placeholders("printf '%s' %sh(%WS%/f) %sh(%TMP%)", &values);
    let out = std::process::Command::new("bash")
        .args(["-c", &command])
        .output()
        .expect("bash");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{}/f/t/%WS%", values[0].1),
        "{command}"
    );
    assert_eq!(
        raw_placeholders("cat %sh(%WS%/a) '%TMP%/b' %WSDIR%"),
        ["%WSDIR%", "%TMP%"]
    );
    assert!(raw_placeholders("printf '%s' %sh(%OUTSIDE%)").is_empty());
}

#[test]
fn a_fixed_share_of_cases_draws_odd_names_the_same_in_every_world_of_the_case() {
    let odd_chars = [
        '[', ']', '(', ')', '*', '?', '&', '%', ',', ';', '!', '{', '}', '\'', '"', '\\', '-', ' ',
        '$', '`', '~', ':', '=', '\n',
    ];
    let mut odd = 0;
    let mut seen: std::collections::BTreeSet<char> = Default::default();
    // Which cases draw odd names, and how, comes first from the case's generator: the same
    // on every host (only the plain names come from the host).
    for n in 0..120u64 {
        with_case(n, "odd::names", || {
            let world = World::for_effect(Shape::Inside).expect("world");
            let twin = World::twin_of(&world).expect("twin");
            let names = with_file_names(|| file_name("existing"));
            let parts = [
                &world.dir,
                &world.ws,
                &world.outside,
                &world.alias,
                &world.extra,
            ];
            let text: String = parts
                .iter()
                .filter_map(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .chain([names])
                .collect::<Vec<_>>()
                .join("/");
            if !odd_names() {
                assert!(world.decoy.is_none() && twin.decoy.is_none());
                return;
            }
            odd += 1;
            seen.extend(text.chars().filter(|c| odd_chars.contains(c)));
            // The same glob characters in the twin's workspace, decoy and all (the plain
            // names differ, and hold spaces and parentheses of their own).
            let shape = |p: &Path| {
                p.file_name().map(|n| {
                    n.to_string_lossy()
                        .chars()
                        .filter(|c| "[]*?".contains(*c))
                        .count()
                })
            };
            assert_eq!(
                shape(&world.ws),
                shape(&twin.ws),
                "{:?} {:?}",
                world.ws,
                twin.ws
            );
            let decoy = world
                .decoy
                .clone()
                .expect("an odd workspace is a glob with a decoy");
            assert!(decoy.is_dir() && twin.decoy.as_ref().is_some_and(|d| d.is_dir()));
            // The decoy is what a glob of the workspace's path finds first, what a shell's
            // expansion of its name gives, or what a split of its name keeps.
            let name = world
                .ws
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            let (program, args): (&str, Vec<std::ffi::OsString>) = if name.contains(['[', '*', '?'])
            {
                let glob = "import glob,sys; print(sorted(glob.glob(sys.argv[1]))[0], end='')";
                (
                    "python3",
                    vec!["-c".into(), glob.into(), world.ws.clone().into()],
                )
            } else if name.contains(['$', '`']) {
                let expand = r#"eval "x=\"$1\""; printf %s "$2/$x""#;
                let dir = world.dir.clone().into_os_string();
                (
                    "bash",
                    vec![
                        "-c".into(),
                        expand.into(),
                        "_".into(),
                        name.clone().into(),
                        dir,
                    ],
                )
            } else {
                let split = name.split([':', '=', '\n']).next().unwrap_or_default();
                let kept = world.dir.join(split).into_os_string();
                ("printf", vec!["%s".into(), kept])
            };
            let out = std::process::Command::new(program)
                .args(&args)
                .output()
                .expect(program);
            assert_eq!(
                std::ffi::OsStr::from_bytes(&out.stdout),
                decoy.as_os_str(),
                "{:?}: {}",
                world.ws,
                String::from_utf8_lossy(&out.stderr)
            );
            let note = noted("failed".into());
            assert!(
                note.contains(&format!("--seed {n}")) && note.contains(&shown(&decoy)),
                "{note}"
            );
        });
    }
    assert!((12..50).contains(&odd), "{odd} of 120 cases drew odd names");
    assert!(seen.len() >= odd_chars.len() - 2, "only {seen:?} drawn");
    // Outside an odd case, a failure is left as it is.
    assert_eq!(noted("failed".into()), "failed");
}

#[test]
fn a_twin_renames_a_path_spelled_in_single_quotes_too() {
    let found = (0..400u64).find_map(|n| {
        with_case(n, "quotes", || {
            let world = World::for_effect(Shape::Inside).expect("world");
            let twin = World::twin_of(&world).expect("twin");
            world.outside.to_string_lossy().contains('\'').then(|| {
                (
                    world.renaming(&twin),
                    world.outside.clone(),
                    twin.outside.clone(),
                )
            })
        })
    });
    let (pairs, outside, twin_outside) = found.expect("a world with a quote in 400 cases");
    let quoted = shell_quote(outside.join("f").as_os_str());
    assert_eq!(
        rename_for_test(&quoted, &pairs),
        shell_quote(twin_outside.join("f").as_os_str())
    );
}

/// The one-pass renaming the twin applies (longest first).
pub(crate) fn rename_for_test(text: &str, pairs: &[(PathBuf, PathBuf)]) -> String {
    let mut pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(a, b)| (a.display().to_string(), b.display().to_string()))
        .collect();
    pairs.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
    let mut out = String::new();
    let mut i = 0;
    'scan: while i < text.len() {
        for (a, b) in &pairs {
            if text[i..].starts_with(a.as_str()) {
                out.push_str(b);
                i += a.len();
                continue 'scan;
            }
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[test]
fn a_mode_change_is_a_change() {
    let world = World::new().expect("world");
    let before = world.snapshot();
    let f = world.outside.join("existing");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let diff = before.diff(&world.snapshot(), &[]);
    assert_eq!(diff.len(), 1, "{diff:?}");
    assert!(
        diff[0].contains("644") && diff[0].contains("600"),
        "{diff:?}"
    );
}

#[test]
fn mount_points_are_unescaped_as_the_kernel_writes_them() {
    assert_eq!(
        unescape_mount_path("/var/tmp/with\\040space\\011tab"),
        PathBuf::from("/var/tmp/with space\ttab")
    );
    assert_eq!(unescape_mount_path("/a\\\\b"), PathBuf::from("/a\\\\b"));
}

#[test]
fn a_twin_keeps_the_order_of_every_name_it_renames() {
    // A backend that sorts its mounts by target answers a world and its twin alike only when the
    // renaming never swaps two paths' order.
    for n in 0..60u64 {
        with_case(n, "twin::order", || {
            let world = World::for_effect(Shape::Inside).expect("world");
            let twin = World::twin_of(&world).expect("twin");
            let pairs = world.renaming(&twin);
            for (a, ta) in &pairs {
                for (b, tb) in &pairs {
                    assert_eq!(
                        a.cmp(b),
                        ta.cmp(tb),
                        "{} vs {} became {} vs {}",
                        a.display(),
                        b.display(),
                        ta.display(),
                        tb.display()
                    );
                }
            }
        });
    }
}
