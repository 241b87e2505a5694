//! Writing a run's reports into place: `report.json`, `junit.xml`, `matrix.md` and
//! `report.html`, all or nothing.

use std::path::{Path, PathBuf};

use super::{Report, junit, markdown};

/// The files a run writes, in its report directory.
pub const REPORT_FILES: [&str; 4] = ["report.json", "junit.xml", "matrix.md", "report.html"];

/// Writes `report.json`, `junit.xml`, `matrix.md` and `report.html` into `dir`, all or nothing: they are written
/// into a new sibling directory first, which then takes `dir`'s place in one step (an exchange
/// where the kernel has one), so a run that fails to write, or is stopped while writing, leaves
/// the previous report as it was.
pub fn write(report: &Report, dir: &Path) -> std::io::Result<()> {
    let name = dir
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no directory", dir.display())))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)?;
    let mut staging_name = std::ffi::OsString::from(".");
    staging_name.push(name);
    staging_name.push(format!(".writing-{}", std::process::id()));
    let staging = parent.join(staging_name);
    let _ = std::fs::remove_dir_all(&staging);
    let fill = |into: &Path| -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
        std::fs::write(into.join("report.json"), json)?;
        std::fs::write(
            into.join("junit.xml"),
            junit(report).map_err(std::io::Error::other)?,
        )?;
        std::fs::write(into.join("matrix.md"), markdown(report))?;
        let label = report.host.leg.as_deref().unwrap_or("this host");
        std::fs::write(
            into.join("report.html"),
            super::html::html("Certification report", &[(label, report)]),
        )
    };
    if let Err(e) = std::fs::create_dir(&staging) {
        if e.kind() != std::io::ErrorKind::PermissionDenied {
            return Err(e);
        }
        // A directory we may write in a parent we may not (a CI user's report directory):
        // stage inside it, then rename each file into place (each file whole, never torn).
        std::fs::create_dir_all(dir)?;
        let inside = dir.join(format!(".writing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&inside);
        std::fs::create_dir(&inside)?;
        let written = fill(&inside).and_then(|()| {
            REPORT_FILES
                .iter()
                .try_for_each(|f| std::fs::rename(inside.join(f), dir.join(f)))
        });
        let _ = std::fs::remove_dir_all(&inside);
        return written;
    }
    let written = fill(&staging).and_then(|()| replace_dir(&staging, dir));
    let _ = std::fs::remove_dir_all(&staging);
    written
}

/// Puts the directory `new` at `dir`; what was at `dir` ends up at `new` (removed by the caller).
fn replace_dir(new: &Path, dir: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        return std::fs::rename(new, dir);
    }
    #[cfg(target_os = "linux")]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        renameat2(AT_FDCWD, new, AT_FDCWD, dir, RenameFlags::RENAME_EXCHANGE)
            .map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        // No exchange: move the old report aside, then the new one in (a crash in between
        // leaves the old one beside it, never a half-written one at `dir`).
        let mut aside = new.as_os_str().to_owned();
        aside.push(".old");
        let aside = PathBuf::from(aside);
        std::fs::rename(dir, &aside)?;
        std::fs::rename(new, dir)?;
        let _ = std::fs::remove_dir_all(&aside);
        Ok(())
    }
}
