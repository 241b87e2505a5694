//! The `walk` step: the writable set found from the inside out. The confined payload walks every
//! directory it can see (bounded in depth and count; `/proc` and `/sys` skipped), tries to create
//! a file with a name unique to the case in each, and reports where that worked, with the mount
//! table it sees. The harness then maps each such place to the host: through the sandbox's own
//! mount table (a bind shows the filesystem and the directory of it that it exposes) to where
//! that filesystem is mounted on the host, and at the same path too. A file found there outside
//! the declared writable set fails the case, with the path inside and the path on the host named.
//! A place private to the sandbox (its own `/dev`, a private tmpfs) passes: nothing lands on the
//! host. Every file the walk left on the host is removed.
//!
//! The walk never opens an existing file: it creates a new name (so a device node, a FIFO or a
//! watchdog is never opened), and it does not descend into the writable roots nor into the places
//! where the suite's worlds lie (it tries each of them itself), so it touches nothing of the host
//! a confined command may already write, nor another case's world.

use std::path::{Path, PathBuf};

use crate::backends::Backend;
use crate::scenario::WalkStep;
use crate::steps::StepError;
use crate::world::{World, draw_hex, draw_one, shell_quote, unescape_mount_path};

/// How deep below `/` the walk goes (`/run/stage/var/lib` is depth 4).
const DEPTH: usize = 4;

/// The most directories the walk tries, shallowest first (this host has about 9,000 within
/// [`DEPTH`]).
const LIMIT: usize = 12000;

/// One line of a mount table: which filesystem, which directory of it, mounted where.
#[derive(Clone, Debug)]
pub(super) struct Mount {
    /// `major:minor` of the filesystem.
    pub(super) device: String,
    /// The directory of that filesystem the mount exposes.
    pub(super) root: PathBuf,
    /// Where it is mounted.
    pub(super) point: PathBuf,
}

/// `/proc/self/mountinfo` lines: `id parent major:minor root point options ... - type source ...`.
pub(super) fn mounts(table: &str) -> Vec<Mount> {
    table
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            Some(Mount {
                device: (*fields.get(2)?).to_owned(),
                root: unescape_mount_path(fields.get(3)?),
                point: unescape_mount_path(fields.get(4)?),
            })
        })
        .collect()
}

/// The mount `path` lies on: the last-mounted one whose point is the longest prefix of it.
pub(super) fn mount_of<'a>(table: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    table
        .iter()
        .rev()
        .filter(|m| path.starts_with(&m.point))
        .max_by_key(|m| m.point.components().count())
}

/// Where the directory `inside` (a path in the sandbox, on `inside_table`) is on the host: the same
/// filesystem mounted on the host at a point whose root holds the directory. `None` when the
/// filesystem is not mounted on the host at all (private to the sandbox) or not that part of it.
pub(super) fn host_path(
    inside: &Path,
    inside_table: &[Mount],
    host_table: &[Mount],
) -> Option<PathBuf> {
    let mount = mount_of(inside_table, inside)?;
    let rel = inside.strip_prefix(&mount.point).ok()?;
    let in_fs = mount.root.join(rel);
    host_table
        .iter()
        .filter(|h| h.device == mount.device && in_fs.starts_with(&h.root))
        .max_by_key(|h| h.root.components().count())
        .and_then(|h| Some(h.point.join(in_fs.strip_prefix(&h.root).ok()?)))
}

/// The payload: walk, try, report, then print the mount table it sees and the mark.
fn payload(name: &str, mark: &str, not_into: &[PathBuf]) -> String {
    let mut skip = String::new();
    for root in not_into {
        let q = shell_quote(root.as_os_str());
        skip.push_str(&format!("{q}/*) continue ;; "));
    }
    format!(
        "n=0\n\
         while IFS= read -r d; do\n\
         \x20 case \"$d\" in {skip}esac\n\
         \x20 n=$((n + 1)); [ \"$n\" -gt {LIMIT} ] && break\n\
         \x20 {{ : > \"$d/{name}\"; }} 2>/dev/null && printf 'MADE %s\\n' \"$d\"\n\
         done < <(find / -maxdepth {DEPTH} \\( -path /proc -o -path /sys \\) -prune -o -type d -print 2>/dev/null |\n\
         \x20 awk -F/ '{{ print NF \"\\t\" $0 }}' | sort -n -s -k1,1 | cut -f2-)\n\
         echo MOUNTS\n\
         cat /proc/self/mountinfo 2>/dev/null\n\
         echo {mark}\n"
    )
}

pub(super) fn run(backend: &Backend, step: &WalkStep) -> Result<(), StepError> {
    let provider = super::confining(backend)?;
    let world = World::for_effect(crate::scenario::Shape::Inside).map_err(super::world_error)?;
    let ws = world.ws.clone();
    // What this call may write on the host: the workspace and /tmp under workspace-write (no
    // $TMPDIR is given), /dev/null always, and whatever the backend declared for this mode.
    let mut writable: Vec<PathBuf> = Vec::new();
    if step.mode == sandbox::ConfinedMode::WorkspaceWrite {
        writable.push(ws.clone());
        writable.extend(std::fs::canonicalize("/tmp").ok());
    }
    writable.extend(backend.declared_writable(step.mode));
    let name = format!(
        ".{}-{}",
        draw_one(&["lock", "cache", "stamp", "tmp", "pid"]),
        draw_hex(10)
    );
    let mark = format!("{}-{}", draw_one(&["done", "ok", "finished"]), draw_hex(6));
    // Not descended into (each is tried itself): the writable roots, and where every case's
    // world lies (the world places, /tmp, /dev/shm), so a backend that leaks (or a fixture that
    // confines nothing) never puts a file into another case's world while that case diffs it.
    let mut skip = writable.clone();
    skip.extend(crate::world::places().bases.iter().map(|(b, _)| b.clone()));
    // Also the user's home as the password database has it: a run given another `$HOME` (a
    // test's scratch home) draws its worlds there, but other runs of this user draw theirs
    // under the real one, and a walk of it wrote into their worlds' parents while they diffed
    // them (a case of a concurrent test failed on a stray `.lock-…` of another run's walk).
    skip.extend(
        nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .and_then(|user| std::fs::canonicalize(user.dir).ok()),
    );
    skip.extend(
        ["/tmp", "/dev/shm"]
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok()),
    );
    let argv = crate::request::dress(&payload(&name, &mark, &skip), Vec::new()).argv;
    let done = super::writable::run_in_world(provider, &world, step.mode, &argv)?;
    let stdout = String::from_utf8_lossy(&done.stdout);
    let (walk, table) = stdout
        .split_once("\nMOUNTS\n")
        .or_else(|| stdout.strip_prefix("MOUNTS\n").map(|t| ("", t)))
        .unwrap_or((&stdout, ""));
    let made: Vec<PathBuf> = walk
        .lines()
        .filter_map(|l| l.strip_prefix("MADE "))
        .map(PathBuf::from)
        .collect();
    let inside_table = mounts(table);
    let host_table = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| mounts(&t))
        .unwrap_or_default();
    let allowed = |host: &Path| {
        host == Path::new("/dev/null") || writable.iter().any(|w| host.starts_with(w))
    };
    let mut landed: Vec<String> = Vec::new();
    for dir in &made {
        // Where it may be on the host: through the mount tables, and at the same path (a
        // backend whose mount table says nothing true still cannot hide a write there).
        let mut candidates: Vec<PathBuf> = host_path(dir, &inside_table, &host_table)
            .into_iter()
            .collect();
        if !candidates.contains(dir) {
            candidates.push(dir.clone());
        }
        for host_dir in candidates {
            let file = host_dir.join(&name);
            if std::fs::symlink_metadata(&file).is_err() {
                continue;
            }
            let _ = std::fs::remove_file(&file);
            let canonical = std::fs::canonicalize(&host_dir).unwrap_or(host_dir.clone());
            if !allowed(&canonical) {
                landed.push(if host_dir == *dir {
                    format!("{} (the same path on the host)", file.display())
                } else {
                    format!(
                        "{} inside the sandbox landed at {} on the host",
                        dir.join(&name).display(),
                        file.display()
                    )
                });
            }
        }
    }
    super::ran_to_mark(&done, &stdout, &mark)?;
    if landed.is_empty() {
        Ok(())
    } else {
        Err(StepError::Unmet(format!(
            "writable under {} beyond the writable set, found from the inside ({} places the \
             payload could create a file in): {}",
            step.mode,
            made.len(),
            landed.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_under_another_path_maps_back_to_the_host_directory_it_exposes() {
        let host = mounts(
            "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
             25 22 0:21 / /dev/shm rw - tmpfs tmpfs rw\n",
        );
        let inside = mounts(
            "300 290 254:0 / / ro - ext4 /dev/vda rw\n\
             301 300 0:55 / /dev rw - tmpfs tmpfs rw\n\
             302 300 254:0 /var /run/stage/var rw - ext4 /dev/vda rw\n\
             303 300 254:0 /home/me/my\\040project /home/me/my\\040project rw - ext4 /dev/vda rw\n",
        );
        assert_eq!(
            host_path(Path::new("/run/stage/var/lib"), &inside, &host),
            Some(PathBuf::from("/var/lib"))
        );
        assert_eq!(
            host_path(Path::new("/home/me/my project/src"), &inside, &host),
            Some(PathBuf::from("/home/me/my project/src"))
        );
        // The sandbox's own /dev is a tmpfs the host does not mount: nothing lands there.
        assert_eq!(host_path(Path::new("/dev"), &inside, &host), None);
    }
}
