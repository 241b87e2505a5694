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

use std::path::{Path, PathBuf};

use crate::backends::Backend;
use crate::scenario::MountsStep;
use crate::steps::StepError;
use crate::steps::walk::{Mount, host_path, mounts};
use crate::world::{World, draw_hex, draw_one, unescape_mount_path};

/// The most mount points the payload tries (a host has tens; a container host a few hundred).
const LIMIT: usize = 2000;

/// The payload: the table, then one attempt of each kind per distinct mount point; the points
/// that took an entry are printed as the table spells them (escaped: no space or newline).
fn payload(name: &str, mark: &str) -> String {
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
         echo {mark}\n"
    )
}

/// What the payload printed: the mount table it saw and each entry it made.
struct Seen {
    table: Vec<Mount>,
    /// Each entry's suffix to the case's name (`-N`, `-N.d`: every point gets its own names,
    /// so an entry found on the host is never one made through another point) and its point.
    made: Vec<(String, PathBuf)>,
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
    Seen {
        table: mounts(table),
        made,
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
    let argv = crate::request::dress(&payload(&name, &mark), Vec::new()).argv;
    let done = super::writable::run_in_world(provider, &world, step.mode, &argv)?;
    let stdout = String::from_utf8_lossy(&done.stdout);
    let seen = parse(&stdout);
    let host_table = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| mounts(&t))
        .unwrap_or_default();
    let allowed = |host: &Path| writable.iter().any(|w| host.starts_with(w));
    let mut landed: Vec<String> = Vec::new();
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
    fn the_payload_output_names_each_entry_by_its_escaped_point() {
        let seen = parse(
            "MOUNTS\n1 0 254:0 / / rw - ext4 x rw\nTRIES\nFILE 3 /a\\040b\nDIR 3 /a\\040b\ndone-1\n",
        );
        assert_eq!(seen.table.len(), 1);
        assert_eq!(
            seen.made,
            vec![
                ("-3".to_owned(), PathBuf::from("/a b")),
                ("-3.d".to_owned(), PathBuf::from("/a b"))
            ]
        );
    }
}
