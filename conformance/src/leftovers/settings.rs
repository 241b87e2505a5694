//! The host's settings that name a program the host runs later, as root or as the person, outside
//! every sandbox. The kernel's: the core dump helper (`core_pattern` starting with `|`), the
//! module loader, the hotplug and uevent helpers, the power-off command, `binfmt_misc`'s
//! interpreters, and each cgroup v1 hierarchy's `release_agent` (run when a cgroup marked
//! `notify_on_release` empties). And the places the host's own software reads programs from:
//! cron's tables, systemd's units, the login shells' `profile.d`, `sudoers.d`, the dynamic
//! linker's preload and path, udev's rules, modprobe's options, the desktop's autostart, and the
//! person's systemd units and autostart. A runner that changes one has left a deputy behind: the
//! host's next crash, module load, boot, login or cron minute runs what it named, long after the
//! run (found red-teaming: a root runner wrote an `@reboot` line naming each workspace into
//! `/etc/cron.d`, drawn names with `$(...)` in them included, and the run was CERTIFIED). A run
//! reads them when it starts and when it is over, and each one that changed fails it (the
//! report's `changed_host_settings`, apart from what was left in the shared places: a setting
//! is read for what it says, not for its owner or mode).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The settings read, each a file whose whole text is the setting.
const SETTINGS: [&str; 5] = [
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
    "/proc/sys/kernel/hotplug",
    "/proc/sys/kernel/poweroff_cmd",
    "/sys/kernel/uevent_helper",
];

/// Where `binfmt_misc` lists its interpreters, one file each (when it is mounted).
const BINFMT: &str = "/proc/sys/fs/binfmt_misc";

/// Files and folders of files the host's software reads programs or commands from (each file of
/// a folder, and of its folders one level down: `/var/spool/cron/crontabs/<user>`,
/// `/etc/systemd/system/<target>.wants/<unit>`), and the same below the home directory.
const HOOKS: [&str; 17] = [
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/var/spool/cron",
    "/etc/systemd/system",
    "/etc/profile.d",
    "/etc/sudoers.d",
    "/etc/ld.so.preload",
    "/etc/ld.so.conf.d",
    "/etc/udev/rules.d",
    "/etc/modprobe.d",
    "/etc/xdg/autostart",
    "/etc/environment",
    "/etc/rc.local",
];

/// The same below the home directory.
const HOME_HOOKS: [&str; 2] = [".config/autostart", ".config/systemd/user"];

/// The most a file read is kept of, and the most files read: what lies past them is not read.
const MOST_BYTES: usize = 64 * 1024;
const MOST_FILES: usize = 4000;

/// Every file of `HOOKS` and `HOME_HOOKS` as it is now (a symlink: its target, as `-> target`).
fn hook_files() -> Vec<(PathBuf, String)> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let places: Vec<PathBuf> = HOOKS
        .iter()
        .map(PathBuf::from)
        .chain(
            home.iter()
                .flat_map(|h| HOME_HOOKS.iter().map(move |d| h.join(d))),
        )
        .collect();
    let mut found = Vec::new();
    let mut queue: Vec<(PathBuf, usize)> = places.into_iter().map(|p| (p, 0)).collect();
    while let Some((path, depth)) = queue.pop() {
        if found.len() >= MOST_FILES {
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if depth < 2 {
                for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                    queue.push((entry.path(), depth + 1));
                }
            }
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap_or_default();
            found.push((path, format!("-> {}", target.display())));
        } else if meta.is_file() {
            let mut text = std::fs::read(&path).unwrap_or_default();
            text.truncate(MOST_BYTES);
            found.push((path, String::from_utf8_lossy(&text).into_owned()));
        }
    }
    found
}

/// The settings' text at one moment, by file (a setting this kernel lacks is absent).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Settings(BTreeMap<PathBuf, String>);

impl Settings {
    /// Reads every setting now.
    pub fn now() -> Self {
        let mut read = BTreeMap::new();
        let files = SETTINGS
            .iter()
            .map(PathBuf::from)
            .chain(
                std::fs::read_dir(BINFMT)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.file_name().is_some_and(|n| n != "register")),
            )
            .chain(release_agents());
        for file in files {
            if let Ok(text) = std::fs::read(&file) {
                read.insert(file, String::from_utf8_lossy(&text).trim_end().to_owned());
            }
        }
        read.extend(hook_files());
        Self(read)
    }

    /// Each setting that is not what it was in `before`, with what it held then and holds now.
    pub fn changed_since(&self, before: &Settings) -> Vec<SettingChange> {
        let files: std::collections::BTreeSet<&PathBuf> =
            self.0.keys().chain(before.0.keys()).collect();
        files
            .into_iter()
            .filter_map(|file| {
                let (was, now) = (before.0.get(file), self.0.get(file));
                (was != now).then(|| SettingChange {
                    file: file.clone(),
                    was: was.cloned(),
                    now: now.cloned(),
                })
            })
            .collect()
    }
}

/// The `release_agent` file of every cgroup v1 hierarchy mounted in this mount namespace (at
/// the root of its hierarchy, where the kernel keeps it; cgroup v2 has none).
fn release_agents() -> Vec<PathBuf> {
    let table = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = sandbox::mountinfo::entries(&table)
        .into_iter()
        .filter(|m| m.root == std::path::Path::new("/"))
        .map(|m| m.point.join("release_agent"))
        .filter(|agent| agent.is_file())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// One kernel setting a run changed: its file, and its text before and after the run (`None`:
/// the file was absent, as a `binfmt_misc` entry registered or removed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingChange {
    /// The setting's file (`/proc/sys/kernel/core_pattern`).
    pub file: PathBuf,
    /// Its text when the run started.
    pub was: Option<String>,
    /// Its text when the run was over.
    pub now: Option<String>,
}

impl std::fmt::Display for SettingChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        // A table or unit is shown up to its first 300 characters.
        let short = |text: &str| -> String {
            match text.char_indices().nth(300) {
                Some((at, _)) => format!("{:?}...", &text[..at]),
                None => format!("{text:?}"),
            }
        };
        match &self.now {
            Some(now) => write!(f, "holds {}", short(now))?,
            None => write!(f, "is gone")?,
        }
        match &self.was {
            Some(was) => write!(f, ", where the host had {}", short(was)),
            None => write!(f, ", where the host had nothing"),
        }?;
        write!(f, " (the host runs what it names)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(entries: &[(&str, &str)]) -> Settings {
        Settings(
            entries
                .iter()
                .map(|(f, t)| (PathBuf::from(f), (*t).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn each_setting_that_changed_is_named_with_both_values() {
        let before = settings(&[
            ("/nonexistent/core_pattern", "core"),
            ("/nonexistent/poweroff_cmd", "/sbin/poweroff"),
            ("/nonexistent/binfmt_misc/gone", "enabled"),
        ]);
        let after = settings(&[
            ("/nonexistent/core_pattern", "|/run/x %p"),
            ("/nonexistent/poweroff_cmd", "/sbin/poweroff"),
            (
                "/nonexistent/binfmt_misc/new",
                "enabled\ninterpreter /tmp/i",
            ),
        ]);
        let named: Vec<String> = after
            .changed_since(&before)
            .iter()
            .map(ToString::to_string)
            .collect();
        let why = "(the host runs what it names)";
        assert_eq!(
            named,
            [
                format!(
                    "/nonexistent/binfmt_misc/gone: is gone, where the host had \"enabled\" {why}"
                ),
                format!(
                    "/nonexistent/binfmt_misc/new: holds \"enabled\\ninterpreter /tmp/i\", where the host had nothing {why}"
                ),
                format!(
                    "/nonexistent/core_pattern: holds \"|/run/x %p\", where the host had \"core\" {why}"
                ),
            ]
        );
        assert!(Settings::now().changed_since(&Settings::now()).is_empty());
    }
}
