//! Twins: the renaming of a world's paths into a twin's, and the twin made of what a request's
//! paths pass through in the world.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::World;

impl World {
    /// Pairs of (this world's root, `twin`'s root): what [`mirror`] makes the twin from.
    pub fn root_pairs(&self, twin: &World) -> Vec<(PathBuf, PathBuf)> {
        self.roots()
            .into_iter()
            .zip(twin.roots())
            .map(|(a, b)| (a.to_path_buf(), b.to_path_buf()))
            .collect()
    }

    /// Pairs of (this world's path, the twin's path) for every tree a request may name, longest
    /// first: what renames a request about this world into the same request about `twin`.
    pub fn renaming(&self, twin: &World) -> Vec<(PathBuf, PathBuf)> {
        let mut pairs = vec![
            (self.ws.clone(), twin.ws.clone()),
            (self.outside.clone(), twin.outside.clone()),
            (self.alias.clone(), twin.alias.clone()),
            (self.dir.clone(), twin.dir.clone()),
            (self.tmpdir.clone(), twin.tmpdir.clone()),
            (self.tmp.clone(), twin.tmp.clone()),
            // A workspace spelled under /tmp is a root of its own (named with its identity) once
            // /tmp is no writable root.
            (self.tmp.join("ws"), twin.tmp.join("ws")),
            (self.shm.clone(), twin.shm.clone()),
            (self.extra.clone(), twin.extra.clone()),
        ];
        if let (Some(a), Some(b)) = (&self.decoy, &twin.decoy) {
            pairs.push((a.clone(), b.clone()));
        }
        // A path spelled in a shell command inside single quotes has each `'` as `'\''`: the
        // same renaming applies to that spelling.
        let quoted = |p: &Path| PathBuf::from(p.to_string_lossy().replace('\'', r"'\''"));
        let spelled: Vec<(PathBuf, PathBuf)> = pairs
            .iter()
            .filter(|(a, _)| a.to_str().is_some_and(|t| t.contains('\'')))
            .map(|(a, b)| (quoted(a), quoted(b)))
            .collect();
        pairs.extend(spelled);
        pairs.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
        pairs
    }
}

/// Makes in a twin what `path` (a path in a world) passes through in the world: each directory,
/// symlink (its target renamed by `renaming`, and mirrored too) and file on the way, as far as
/// it exists there. `roots` pairs each world root with the twin's ([`World::root_pairs`]); the
/// twin's path of each is `renaming` of the world's. What a
/// backend may resolve of a request's path is then in the twin too, and nothing else is made (a
/// request only names the rest).
pub fn mirror(
    roots: &[(PathBuf, PathBuf)],
    path: &Path,
    renaming: &dyn Fn(&OsStr) -> OsString,
) -> io::Result<()> {
    mirror_hops(roots, path, renaming, 8)
}

fn mirror_hops(
    roots: &[(PathBuf, PathBuf)],
    path: &Path,
    renaming: &dyn Fn(&OsStr) -> OsString,
    hops: u8,
) -> io::Result<()> {
    let Some((root, _)) = roots.iter().find(|(root, _)| path.starts_with(root)) else {
        return Ok(());
    };
    let mut here = root.clone();
    let rest = path.strip_prefix(root).unwrap_or(Path::new(""));
    let mut parts = vec![std::path::Component::CurDir];
    parts.extend(rest.components());
    for part in parts {
        match part {
            std::path::Component::Normal(name) => here.push(name),
            std::path::Component::CurDir => {}
            // `..` and the like: what lies beyond is not the twin's to make.
            _ => return Ok(()),
        }
        let Ok(meta) = std::fs::symlink_metadata(&here) else {
            return Ok(());
        };
        // The twin's own names differ (a drawn workspace name): the renaming knows them.
        let there = PathBuf::from(renaming(here.as_os_str()));
        if std::fs::symlink_metadata(&there).is_ok() {
            continue;
        }
        let ft = meta.file_type();
        if ft.is_dir() {
            std::fs::create_dir(&there)?;
            std::fs::set_permissions(&there, meta.permissions())?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&here)?;
            symlink(PathBuf::from(renaming(target.as_os_str())), &there)?;
            if hops > 0 {
                let resolved = here.parent().unwrap_or(Path::new("/")).join(&target);
                mirror_hops(roots, &resolved, renaming, hops - 1)?;
            }
            // A path through a symlink goes on in its target, mirrored above.
            return Ok(());
        } else if ft.is_file() {
            std::fs::copy(&here, &there)?;
            return Ok(());
        } else {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod mirror_tests {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    use super::*;

    #[test]
    fn a_twin_gets_what_a_request_names() {
        let world = World::new().expect("world");
        let twin = World::twin_of(&world).expect("twin");
        let pairs = world.renaming(&twin);
        let roots = world.root_pairs(&twin);
        let rename = |t: &OsStr| {
            let mut s = t.as_bytes().to_vec();
            for (a, b) in &pairs {
                let a = a.as_os_str().as_bytes();
                if s.starts_with(a) {
                    let mut n = b.as_os_str().as_bytes().to_vec();
                    n.extend_from_slice(&s[a.len()..]);
                    s = n;
                    break;
                }
            }
            OsString::from_vec(s)
        };
        mirror(&roots, &world.alias, &rename).expect("mirror");
        assert!(twin.ws.is_dir(), "{:?} {:?}", twin.ws, roots);
        assert!(twin.alias.is_symlink());
        assert!(!twin.outside.exists());
    }
}
