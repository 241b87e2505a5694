//! Where worlds may lie on this host: the bases (`/var/tmp`, the home directory, `/srv`) a world
//! may be drawn under, the project folders each already has, and this host's own names.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::BaseRefused;

/// Where worlds may lie on this host, and why the other candidates were left out.
#[derive(Clone, Debug)]
pub struct Places {
    /// The usable bases (canonical), each with the kind of place it is.
    pub bases: Vec<(PathBuf, &'static str)>,
    /// Candidates left out, with the reason.
    pub left_out: Vec<(PathBuf, String)>,
    /// The project folders each base already had when the run began (`~/src`): a world lies in
    /// one of them when drawn, else right in the base. Fixed for the run, so a seed replays it.
    pub(crate) folders: Vec<PathBuf>,
    /// Names this host's own software goes by (`/usr/share/doc`), sorted: a third of project and
    /// neighbour names come from here, so a backend keyed on the harness's word lists would key
    /// on ordinary names of this very host as well.
    pub(super) names: Vec<String>,
}

/// This host's [`Places`], decided once per process: `/var/tmp`, the home directory and `/srv`,
/// each kept only when it is a directory this user can write that does not resolve into a
/// writable root (`/tmp`, `/dev/shm`) and is not `/`.
pub fn places() -> &'static Places {
    static PLACES: OnceLock<Places> = OnceLock::new();
    PLACES.get_or_init(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut candidates: Vec<(PathBuf, &'static str)> =
            vec![(PathBuf::from("/var/tmp"), "var-tmp")];
        match home {
            Some(h) if h.is_absolute() => candidates.push((h, "home")),
            _ => {}
        }
        candidates.push((PathBuf::from("/srv"), "srv"));
        let mut places = Places {
            bases: Vec::new(),
            left_out: Vec::new(),
            folders: Vec::new(),
            names: host_names(Path::new("/usr/share/doc")),
        };
        for (path, kind) in candidates {
            match usable_base(&path) {
                Ok(canonical) => {
                    places.folders.extend(
                        folders(kind)
                            .iter()
                            .map(|f| canonical.join(f))
                            .filter(|f| f.is_dir()),
                    );
                    places.bases.push((canonical, kind));
                }
                Err(why) => places.left_out.push((path, why.to_string())),
            }
        }
        places
    })
}

/// The entries of `dir` that make plausible folder names (UTF-8, not hidden, 2 to 40 bytes,
/// without the harness's own words), sorted so a seed replays the same draws on this host.
fn host_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| (2..=40).contains(&n.len()) && !n.starts_with('.'))
                .filter(|n| {
                    let lower = n.to_lowercase();
                    !lower.contains("sandbox") && !lower.contains("conformance")
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `path` canonical, when worlds may lie under it.
fn usable_base(path: &Path) -> Result<PathBuf, BaseRefused> {
    let canonical = std::fs::canonicalize(path).map_err(BaseRefused::Unresolved)?;
    if !canonical.is_dir() {
        return Err(BaseRefused::NotADirectory);
    }
    if canonical == Path::new("/") {
        return Err(BaseRefused::Root);
    }
    for root in ["/tmp", "/dev/shm"] {
        if std::fs::canonicalize(root).is_ok_and(|r| canonical.starts_with(r)) {
            return Err(BaseRefused::UnderWritableRoot(root));
        }
    }
    nix::unistd::access(&canonical, nix::unistd::AccessFlags::W_OK)
        .map_err(BaseRefused::NotWritable)?;
    Ok(canonical)
}

/// Folders projects are kept in, per kind of base.
pub(super) fn folders(kind: &str) -> &'static [&'static str] {
    match kind {
        "home" => &[
            "src",
            "code",
            "work",
            "Projets",
            "dev/repos",
            "Documents/Code",
            "git",
        ],
        "srv" => &["git", "www", "data", "builds", "repos"],
        _ => &["build", "ci-runs", "checkouts", "jobs", "cache/work"],
    }
}
