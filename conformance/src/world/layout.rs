//! Drawing a world's place and names, and laying out what its shapes and steps rely on.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::names::{
    NEIGHBOURS, PROJECTS, SCRATCH, draw_name, draw_project, file_name, name, pick_ws_name,
};
use super::odd::{self, odd};
use super::places::{folders, places};
use super::seed::{draw, pick, token};
use super::{Layout, SENTINEL, World};
use crate::scenario::Shape;

impl World {
    pub(super) fn drawn(layout: Layout, near: Option<&Path>) -> io::Result<World> {
        super::presence::announce();
        let places = places();
        let near_bases: Vec<&(PathBuf, &'static str)> = places
            .bases
            .iter()
            .filter(|(base, _)| near.is_some_and(|dir| dir.starts_with(base)))
            .collect();
        // A world whose base no longer matches (a base spelled through a symlink) gets a twin
        // anywhere, as every world does.
        let bases: Vec<&(PathBuf, &'static str)> = if near_bases.is_empty() {
            places.bases.iter().collect()
        } else {
            near_bases
        };
        if bases.is_empty() {
            return Err(io::Error::other(format!(
                "no place for a world on this host: {:?}",
                places.left_out
            )));
        }
        let odd = odd();
        for _ in 0..16 {
            let (base, kind) = draw(|rng| bases[rng.usize(..bases.len())].clone());
            let (folder, plain_project, neighbour, alias, tmpdir, tmp, shm, extra) = draw(|rng| {
                let (project, pooled) = draw_project(rng, &places.names);
                let folder = pick(rng, folders(kind));
                // A name from a pool carries a suffix, as copies and clones do: without one, two
                // worlds of a run would often draw the same folder and the later one would have
                // to draw again, differently from one run to the next. A coined name is one of
                // millions and mostly carries none.
                let suffix = match (pooled, rng.u8(..6)) {
                    (_, 0) | (true, 3) => format!(" ({})", rng.u16(2..999)),
                    (_, 1) | (true, 4) => format!("-{}", token(rng, 6)),
                    (_, 2) | (true, 5) => format!("_{}", rng.u32(1000..99999)),
                    _ => String::new(),
                };
                let scratch =
                    |rng: &mut fastrand::Rng| format!("{}{}", pick(rng, SCRATCH), token(rng, 10));
                (
                    folder.to_owned(),
                    format!("{project}{suffix}"),
                    draw_name(rng, NEIGHBOURS, &places.names),
                    format!("{} link", draw_name(rng, PROJECTS, &places.names)),
                    format!(
                        "{}{}",
                        pick(rng, &["tmp-", "build-tmp.", "scratch ", "tmp."]),
                        token(rng, 8)
                    ),
                    scratch(rng),
                    scratch(rng),
                    format!(
                        "{}{}",
                        pick(rng, &["shared-", "vendor ", "cache.", "deps_"]),
                        token(rng, 6)
                    ),
                )
            });
            let project = match &odd {
                Some(o) => o.project.on(&plain_project),
                None => plain_project.clone(),
            };
            // A world removes its four roots when dropped, so it must own each: a root that is
            // there already (another world's, drawn alike) means drawing again.
            let taken = |p: &Path| std::fs::symlink_metadata(p).is_ok();
            let scratch_roots = [
                Path::new("/var/tmp").join(&tmpdir),
                Path::new("/tmp").join(&tmp),
                Path::new("/dev/shm").join(&shm),
            ];
            if scratch_roots.iter().any(|p| taken(p)) {
                continue;
            }
            // A project lies in the drawn folder when this host has it (`~/src`), else right in
            // the base: the harness makes no folder on the way, so it leaves none behind (another
            // process may be using one when this one is done).
            let parent = base.join(&folder);
            let dir = if places.folders.contains(&parent) {
                parent.join(&project)
            } else {
                base.join(&project)
            };
            let ws_name = pick_ws_name(&plain_project);
            // A case with odd names dresses each (the same way in every world of the case, so a
            // twin carries the same characters), and a workspace named like a glob pattern gets
            // the sibling the pattern matches instead (a decoy).
            let (ws_name, decoy, neighbour, alias, extra) = match &odd {
                Some(o) => (
                    o.workspace.on(&ws_name),
                    o.workspace.decoy_of(&ws_name),
                    o.siblings[0].on(&neighbour),
                    o.siblings[1].on(&alias),
                    o.siblings[2].on(&extra),
                ),
                None => (ws_name, None, neighbour, alias, extra),
            };
            // The workspace, the outside tree, the alias, the extra root and the decoy are
            // siblings: drawn from shared pools (this host's names, coined ones), two could
            // coincide.
            let siblings = [
                ws_name.as_str(),
                neighbour.as_str(),
                alias.as_str(),
                extra.as_str(),
                decoy.as_deref().unwrap_or("."),
            ];
            if (1..siblings.len()).any(|i| siblings[..i].contains(&siblings[i])) {
                continue;
            }
            // A world named like a project folder (`git`, `data`) would pass for one in a run
            // that starts while it exists, and take that run's worlds with it when removed.
            if ["home", "srv", "var-tmp"].iter().any(|kind| {
                folders(kind)
                    .iter()
                    .any(|f| f.split('/').any(|part| part == project))
            }) {
                continue;
            }
            let ws = dir.join(&ws_name);
            // The world exists (and is dropped, removing its roots) only once its folder is
            // made here: a folder that was there is another world's, never removed by this one.
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let [tmpdir, tmp, shm] = scratch_roots;
            let decoy = decoy.map(|d| dir.join(d));
            let world = World {
                ws,
                decoy,
                outside: dir.join(&neighbour),
                alias: dir.join(&alias),
                tmpdir,
                tmp,
                shm,
                extra: dir.join(&extra),
                base: base.clone(),
                dir,
            };
            // The decoy is in every world of the case, a twin's too: a runner that globs its
            // workspace finds it in both and answers both alike (and confines the wrong one).
            if let Some(decoy) = &world.decoy {
                std::fs::create_dir_all(decoy)?;
            }
            if !matches!(layout, Layout::Twin) {
                odd::record_world(world.ws.clone(), world.decoy.clone());
            }
            match layout {
                Layout::Full => world.lay_out()?,
                Layout::Twin => {}
                Layout::Effect(shape) => world.lay_out_for(shape)?,
            }
            // The decoy is a copy of the workspace as laid out (a copy of a project beside it),
            // so what a payload does in a workspace confined as the decoy lands there, and the
            // world diff names it.
            if let (Some(decoy), false) = (&world.decoy, matches!(layout, Layout::Twin)) {
                super::host::copy_tree(&world.ws, decoy, &[])?;
            }
            return Ok(world);
        }
        Err(io::Error::other("16 drawn world places were all taken"))
    }

    fn lay_out_for(&self, shape: Shape) -> io::Result<()> {
        // Only what the shape works on is made (each inode made and removed on a real disk
        // makes the next ones dearer); a tree it does not make is still in the world diff,
        // which names anything that appears there.
        std::fs::create_dir(&self.ws)?;
        std::fs::create_dir(&self.outside)?;
        match shape {
            Shape::RootViaSymlink => symlink(&self.ws, &self.alias)?,
            // `ws/dir/../..`: the path passes through `dir`.
            Shape::Dotdot => std::fs::create_dir(self.ws.join(file_name("dir")))?,
            Shape::DevShm if Path::new("/dev/shm").is_dir() => std::fs::create_dir(&self.shm)?,
            _ => {}
        }
        std::fs::write(self.outside.join("sentinel"), SENTINEL)?;
        std::fs::write(self.ws.join(file_name("src")), "src")?;
        let plain = OsStr::new("");
        match shape {
            Shape::Inside | Shape::RootViaSymlink | Shape::RootTrailingSlash => {
                populate(&self.ws.join(file_name("dir")), plain)?;
            }
            Shape::Root => populate(&self.ws, plain)?,
            Shape::Dotdot | Shape::AbsoluteOutside | Shape::FsRootWorkspace => {
                populate(&self.outside, plain)?;
            }
            Shape::SymlinkDir => {
                populate(&self.outside, plain)?;
                symlink(&self.outside, self.ws.join(file_name("link_out")))?;
            }
            Shape::SymlinkFile => {
                populate(&self.outside, plain)?;
                symlink(
                    self.outside.join(file_name("existing")),
                    self.ws.join(file_name("file_link")),
                )?;
                symlink(
                    self.outside.join(file_name("new")),
                    self.ws.join(file_name("dangling")),
                )?;
            }
            Shape::Tmp => populate(&self.tmp, plain)?,
            Shape::Tmpdir => populate(&self.tmpdir, plain)?,
            Shape::DevNull | Shape::DevShm => {}
            Shape::WsUnderTmp => {
                populate(&self.tmp.join("ws").join(file_name("dir")), plain)?;
                std::fs::write(self.tmp.join("ws").join(file_name("src")), "src")?;
            }
            Shape::NonUtf8 => {
                populate(&self.ws.join(file_name("dir")), OsStr::from_bytes(b"\xff"))?
            }
            Shape::NonUtf8Outside => populate(&self.outside, OsStr::from_bytes(b"\xff"))?,
            Shape::Space => populate(&self.ws.join("with space"), OsStr::new(" x"))?,
            Shape::Prelinked => {
                std::fs::write(self.outside.join("linked_target"), "old")?;
                std::fs::hard_link(
                    self.outside.join("linked_target"),
                    self.ws.join("prelinked"),
                )?;
            }
        }
        Ok(())
    }

    fn lay_out(&self) -> io::Result<()> {
        let d = &self.dir;
        for dir in [self.ws.join("dir"), self.outside.clone()] {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::create_dir(&self.tmpdir)?;
        std::fs::create_dir_all(self.tmp.join("ws/dir"))?;
        if Path::new("/dev/shm").is_dir() {
            std::fs::create_dir_all(&self.shm)?;
        }
        std::fs::write(self.outside.join("sentinel"), SENTINEL)?;
        for ws in [self.ws.clone(), self.tmp.join("ws")] {
            std::fs::write(ws.join("src"), "src")?;
        }
        for (dir, suffix) in [
            (self.ws.join("dir"), OsStr::new("")),
            (self.ws.clone(), OsStr::new("")),
            (self.outside.clone(), OsStr::new("")),
            (self.tmpdir.clone(), OsStr::new("")),
            (self.tmp.clone(), OsStr::new("")),
            (self.tmp.join("ws/dir"), OsStr::new("")),
            (self.ws.join("dir"), OsStr::from_bytes(b"\xff")),
            (self.outside.clone(), OsStr::from_bytes(b"\xff")),
            (self.ws.join("with space"), OsStr::new(" x")),
        ] {
            populate(&dir, suffix)?;
        }
        symlink(&self.outside, self.ws.join("link_out"))?;
        symlink(self.outside.join("existing"), self.ws.join("file_link"))?;
        symlink(self.outside.join("new"), self.ws.join("dangling"))?;
        symlink(&self.ws, &self.alias)?;
        std::fs::write(self.outside.join("linked_target"), "old")?;
        std::fs::hard_link(
            self.outside.join("linked_target"),
            self.ws.join("prelinked"),
        )?;
        std::fs::write(d.join("afile"), "afile")?;
        Ok(())
    }
}

/// `existing<suffix>` (content `old`, mode 0644) and an empty `emptydir<suffix>` in `dir`.
fn populate(dir: &Path, suffix: &OsStr) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let existing = dir.join(name("existing", suffix));
    std::fs::write(&existing, "old")?;
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644))?;
    std::fs::create_dir_all(dir.join(name("emptydir", suffix)))
}
