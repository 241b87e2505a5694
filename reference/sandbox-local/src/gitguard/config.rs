//! Git's config files as the guard reads them: which keys name no program ([`SAFE_KEYS`]), and
//! the entries of a file.

/// Config keys (`section.key`, the subsection left out, lowercase) that name no program and no
/// other file: a config holding only these may be created or changed by a call (`git init`,
/// `git clone`, `git worktree add`, `git submodule`). `core.worktree` (which `git submodule`
/// writes) names the folder the person's checkout writes into: it may stay only when it leads
/// into a root ([`GitGuard`] judges it apart).
pub const SAFE_KEYS: [&str; 20] = [
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "remote.url",
    "remote.fetch",
    "remote.pushurl",
    "remote.mirror",
    "branch.remote",
    "branch.merge",
    "branch.rebase",
    "submodule.url",
    "submodule.active",
];

/// The `(section.key, value)` pairs of a git config, the subsection left out, names lowercase.
/// Lenient: what it cannot read it keeps as an unknown key (so the config is not safe).
pub(super) fn config_entries(bytes: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut section = String::new();
    let mut out = Vec::new();
    for raw in text.lines() {
        let mut line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                out.push(("?".into(), line.into()));
                continue;
            };
            let head = &rest[..end];
            let name = head
                .split(|c: char| c.is_whitespace() || c == '.')
                .next()
                .unwrap_or("");
            section = name.to_ascii_lowercase();
            line = rest[end + 1..].trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (line, "true"),
        };
        out.push((
            format!("{section}.{}", key.to_ascii_lowercase()),
            value.to_owned(),
        ));
    }
    out
}

/// True when every key of the config names no program and no other file.
/// `core.worktree` passes here and is judged apart (it must lead into a root).
pub(super) fn config_is_safe(bytes: &[u8]) -> bool {
    // A continued line (`\` at the end, before LF or CRLF, which git reads as LF) could hide a
    // key in what looks like a value.
    if bytes.windows(2).any(|w| w == b"\\\n" || w == b"\\\r") {
        return false;
    }
    config_entries(bytes)
        .iter()
        .all(|(k, _)| k == "core.worktree" || SAFE_KEYS.contains(&k.as_str()))
}
