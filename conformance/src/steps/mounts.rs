//! The `mounts` step: the writable mounts from the kernel's view. The confined payload reads the
//! whole mount table the kernel shows it (`/proc/self/mountinfo`), and at every mount point (each
//! once: a path reaches the top mount there) tries to create a file and a directory with names
//! unique to the case (a directory too: a cgroup is made by `mkdir`). It prints the point of each
//! that took one as the table spells it. The harness then maps each to the host by the mount's
//! device and the directory of that filesystem it exposes (never by walking names, so nothing is
//! pruned as a loop: a staging root with the inode of `/` is found like any other), and at the
//! same path too. An entry still on the host after the call, outside the writable set, fails the
//! case with the path inside and on the host named; a filesystem private to the sandbox (its own
//! tmpfs, its `/dev`) passes, since nothing of it is on the host. One pass, no recursion: the
//! number of mounts bounds it. Every entry found on the host is removed again.
//!
//! A mount's own root is not all a payload may write through it: a user cannot write the root
//! of an alias of `/`, but can write their home through it. So the harness names the host's
//! directories its user can write outside the writable set ([`Target`]: the home, `/var/tmp`,
//! `/dev/shm`, ...) by filesystem and directory of it, and the payload tries each below every
//! top mount of that filesystem that exposes it.

use std::path::{Path, PathBuf};

use crate::backends::Backend;
use crate::scenario::MountsStep;
use crate::steps::StepError;
use crate::steps::walk::{Mount, host_path, mount_of, mounts};
use crate::world::{World, draw_hex, draw_one, shell_quote, unescape_mount_path};

/// The most mount points the payload tries (a host has tens; a container host a few hundred).
const LIMIT: usize = 2000;

/// The payload: the table, then one attempt of each kind per distinct mount point; the points
/// that took an entry are printed as the table spells them (escaped: no space or newline).
fn payload(name: &str, mark: &str, targets: &[Target]) -> String {
    let (mut devices, mut dirs) = (String::new(), String::new());
    for t in targets {
        devices.push_str(&shell_quote(std::ffi::OsStr::new(&t.device)));
        devices.push(' ');
        dirs.push_str(&shell_quote(t.in_fs.as_os_str()));
        dirs.push(' ');
    }
    format!(
        "echo MOUNTS\n\
         cat /proc/self/mountinfo 2>/dev/null\n\
         echo TRIES\n\
         declare -A tried; n=0\n\
         while read -r _ _ _ _ raw _; do\n\
         \x20 [ -n \"${{tried[$raw]}}\" ] && continue; tried[$raw]=1\n\
         \x20 n=$((n + 1)); [ \"$n\" -gt {LIMIT} ] && break\n\
         \x20 printf -v p '%b' \"$raw\"\n\
         \x20 [ -d \"$p\" ] && [ ! -L \"$p\" ] || continue\n\
         \x20 {{ : > \"$p/{name}-$n\"; }} 2>/dev/null && printf 'FILE %s %s\\n' \"$n\" \"$raw\"\n\
         \x20 mkdir \"$p/{name}-$n.d\" 2>/dev/null && printf 'DIR %s %s\\n' \"$n\" \"$raw\"\n\
         done < /proc/self/mountinfo\n\
         tdev=( {devices}); tin=( {dirs})\n\
         mapfile -t lines < /proc/self/mountinfo; declare -A top; m=0\n\
         for ((i = ${{#lines[@]}} - 1; i >= 0; i--)); do\n\
         \x20 read -r _ _ dev root raw _ <<< \"${{lines[i]}}\"\n\
         \x20 [ -n \"${{top[$raw]}}\" ] && continue; top[$raw]=1\n\
         \x20 m=$((m + 1)); [ \"$m\" -gt {LIMIT} ] && break\n\
         \x20 printf -v p '%b' \"$raw\"; printf -v r '%b' \"$root\"\n\
         \x20 for k in \"${{!tdev[@]}}\"; do\n\
         \x20   [ \"${{tdev[k]}}\" = \"$dev\" ] || continue; t=${{tin[k]}}\n\
         \x20   if [ \"$r\" = / ]; then rel=$t; else case \"$t\" in \"$r\") rel= ;; \"$r\"/*) rel=${{t#\"$r\"}} ;; *) continue ;; esac; fi\n\
         \x20   q=${{p%/}}$rel; [ -n \"$q\" ] || q=/\n\
         \x20   [ -d \"$q\" ] && [ ! -L \"$q\" ] || continue\n\
         \x20   {{ : > \"$q/{name}-$m-t$k\"; }} 2>/dev/null && printf 'TFILE %s %s %s\\n' \"$m\" \"$k\" \"$raw\"\n\
         \x20 done\n\
         done\n\
         echo {mark}\n"
    )
}

/// A directory of the host the harness's user can write outside the call's writable set, by
/// the filesystem it is on and the directory of that filesystem it is.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    /// `major:minor` of its filesystem.
    device: String,
    /// The directory of that filesystem.
    in_fs: PathBuf,
    /// Where the host has it.
    host: PathBuf,
}

/// The host's directories this user can write that `allowed` does not allow (the home, the
/// shared places, the world bases), each located on its filesystem by `host_table`.
fn targets(host_table: &[Mount], allowed: impl Fn(&Path) -> bool) -> Vec<Target> {
    let uid = nix::unistd::getuid();
    let mut candidates: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .map(PathBuf::from)
        .chain(std::env::var_os("HOME").map(PathBuf::from))
        .chain(Some(PathBuf::from(format!("/run/user/{uid}"))))
        .chain(crate::world::places().bases.iter().map(|(b, _)| b.clone()))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    candidates.sort();
    candidates.dedup();
    candidates
        .into_iter()
        .filter(|dir| {
            dir.is_dir()
                && !allowed(dir)
                && nix::unistd::access(dir.as_path(), nix::unistd::AccessFlags::W_OK).is_ok()
        })
        .filter_map(|host| {
            let mount = mount_of(host_table, &host)?;
            let in_fs = mount.root.join(host.strip_prefix(&mount.point).ok()?);
            Some(Target {
                device: mount.device.clone(),
                in_fs,
                host,
            })
        })
        .collect()
}

/// What the payload printed: the mount table it saw and each entry it made.
struct Seen {
    table: Vec<Mount>,
    /// Each entry's suffix to the case's name (`-N`, `-N.d`: every point gets its own names,
    /// so an entry found on the host is never one made through another point) and its point.
    made: Vec<(String, PathBuf)>,
    /// Each file made in a [`Target`] below a point: its suffix (`-M-tK`), the target's index
    /// and the point.
    in_targets: Vec<(String, usize, PathBuf)>,
}

fn parse(stdout: &str) -> Seen {
    let (table, tries) = stdout.split_once("\nTRIES\n").unwrap_or((stdout, ""));
    let table = table.strip_prefix("MOUNTS\n").unwrap_or(table);
    let made = tries
        .lines()
        .filter_map(|l| {
            l.strip_prefix("FILE ")
                .map(|p| ("", p))
                .or_else(|| l.strip_prefix("DIR ").map(|p| (".d", p)))
        })
        .filter_map(|(kind, rest)| {
            let (n, raw) = rest.split_once(' ')?;
            n.parse::<usize>().ok()?;
            Some((format!("-{n}{kind}"), unescape_mount_path(raw)))
        })
        .collect();
    let in_targets = tries
        .lines()
        .filter_map(|l| {
            let mut parts = l.strip_prefix("TFILE ")?.splitn(3, ' ');
            let m: usize = parts.next()?.parse().ok()?;
            let k: usize = parts.next()?.parse().ok()?;
            Some((format!("-{m}-t{k}"), k, unescape_mount_path(parts.next()?)))
        })
        .collect();
    Seen {
        table: mounts(table),
        made,
        in_targets,
    }
}

/// Where the entry `name` made at the mount point `point` may be on the host: through the
/// device and filesystem root of the top mount at that point, and at the same path.
fn candidates(point: &Path, inside: &[Mount], host: &[Mount]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = host_path(point, inside, host).into_iter().collect();
    if !out.iter().any(|p| p == point) {
        out.push(point.to_path_buf());
    }
    out
}

pub(super) fn run(backend: &Backend, step: &MountsStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let world = World::for_effect(crate::scenario::Shape::Inside).map_err(super::world_error)?;
    let mut writable: Vec<PathBuf> = Vec::new();
    if step.mode == sandbox::ConfinedMode::WorkspaceWrite {
        writable.push(world.ws.clone());
        writable.extend(std::fs::canonicalize("/tmp").ok());
    }
    writable.extend(backend.declared_writable(step.mode));
    let name = format!(
        ".{}-{}",
        draw_one(&["lock", "cache", "stamp", "tmp", "pid"]),
        draw_hex(10)
    );
    let mark = format!("{}-{}", draw_one(&["done", "ok", "finished"]), draw_hex(6));
    let host_table = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| mounts(&t))
        .unwrap_or_default();
    let allowed = |host: &Path| writable.iter().any(|w| host.starts_with(w));
    let targets = targets(&host_table, allowed);
    let argv = crate::request::dress(&payload(&name, &mark, &targets), Vec::new()).argv;
    let done = super::writable::run_in_world(provider, &world, step.mode, &argv)?;
    let stdout = String::from_utf8_lossy(&done.stdout);
    let seen = parse(&stdout);
    let mut landed: Vec<String> = Vec::new();
    for (suffix, k, point) in &seen.in_targets {
        let Some(target) = targets.get(*k) else {
            continue;
        };
        let on_host = target.host.join(format!("{name}{suffix}"));
        if std::fs::symlink_metadata(&on_host).is_err() {
            continue;
        }
        let _ = std::fs::remove_file(&on_host);
        let inside = mount_of(&seen.table, point)
            .and_then(|m| target.in_fs.strip_prefix(&m.root).ok())
            .map_or_else(|| point.clone(), |rel| point.join(rel));
        landed.push(format!(
            "{} inside the sandbox is {} on the host",
            inside.join(format!("{name}{suffix}")).display(),
            on_host.display()
        ));
    }
    for (suffix, point) in &seen.made {
        let entry = format!("{name}{suffix}");
        for host_dir in candidates(point, &seen.table, &host_table) {
            let on_host = host_dir.join(&entry);
            let Ok(meta) = std::fs::symlink_metadata(&on_host) else {
                continue;
            };
            let _ = if meta.is_dir() {
                std::fs::remove_dir(&on_host)
            } else {
                std::fs::remove_file(&on_host)
            };
            let canonical = std::fs::canonicalize(&host_dir).unwrap_or(host_dir.clone());
            if !allowed(&canonical) {
                landed.push(format!(
                    "{} inside the sandbox is {} on the host",
                    point.join(&entry).display(),
                    on_host.display()
                ));
            }
        }
    }
    super::ran_to_mark(&done, &stdout, &mark)?;
    if landed.is_empty() {
        return Ok(());
    }
    Err(StepError::Unmet(format!(
        "a mount the payload could change under {} is backed by the host outside the writable \
         set ({} mounts in its table, {} took an entry): {}",
        step.mode,
        seen.table.len(),
        seen.made.len(),
        landed.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staging_root_aliasing_the_host_root_maps_to_the_host_root() {
        let host = mounts(
            "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
             30 22 0:33 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        );
        let inside = mounts(
            "300 290 254:0 / / ro - ext4 /dev/vda rw\n\
             301 300 254:0 / /run/user/0/.stage\\040root rw - ext4 /dev/vda rw\n\
             302 300 0:33 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n\
             303 300 0:90 / /tmp rw - tmpfs tmpfs rw\n",
        );
        let stage = PathBuf::from("/run/user/0/.stage root");
        assert_eq!(
            candidates(&stage, &inside, &host),
            vec![PathBuf::from("/"), stage.clone()]
        );
        assert_eq!(
            candidates(Path::new("/sys/fs/cgroup"), &inside, &host),
            vec![PathBuf::from("/sys/fs/cgroup")]
        );
        // The sandbox's own tmpfs is on no host mount: only the same path is looked at.
        assert_eq!(
            candidates(Path::new("/tmp"), &inside, &host),
            vec![PathBuf::from("/tmp")]
        );
    }

    #[test]
    fn a_target_is_named_by_its_filesystem_and_the_directory_of_it() {
        let home = std::fs::canonicalize(std::env::var_os("HOME").expect("HOME")).expect("home");
        let host = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let host = mounts(&host);
        let found = targets(&host, |_| false);
        let mount = mount_of(&host, &home).expect("the home's mount");
        // The home is writable by its user (root's too).
        let target = found.iter().find(|t| t.host == home).expect("the home");
        assert_eq!(target.device, mount.device);
        assert_eq!(
            target.in_fs,
            mount
                .root
                .join(home.strip_prefix(&mount.point).expect("below"))
        );
        // What the call may write is never a target.
        assert!(targets(&host, |p| p == home).iter().all(|t| t.host != home));
    }

    #[test]
    fn the_payload_output_names_each_entry_by_its_escaped_point() {
        let seen = parse(
            "MOUNTS\n1 0 254:0 / / rw - ext4 x rw\nTRIES\nFILE 3 /a\\040b\nDIR 3 /a\\040b\nTFILE 7 1 /a\\040b\ndone-1\n",
        );
        assert_eq!(seen.table.len(), 1);
        assert_eq!(
            seen.made,
            vec![
                ("-3".to_owned(), PathBuf::from("/a b")),
                ("-3.d".to_owned(), PathBuf::from("/a b"))
            ]
        );
        assert_eq!(
            seen.in_targets,
            vec![("-7-t1".to_owned(), 1, PathBuf::from("/a b"))]
        );
    }
}
