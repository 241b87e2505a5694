//! Git's config files as the guard reads them: parsed by git's own rules (config.c), so a value
//! the guard judges is the value git uses, and which keys name no program ([`SAFE_KEYS`]).

/// Config keys (`section.key`, the subsection left out, lowercase) that name no program and no
/// other file: a config holding only these may be created or changed by a call (`git init`,
/// `git clone`, `git worktree add`, `git submodule`, `git config user.email`). Judged apart
/// (`JUDGED_KEYS`): `core.worktree`, the folder the person's checkout writes into, and the
/// remotes' URLs, whose local repositories' hooks run at the person's push.
pub const SAFE_KEYS: [&str; 34] = [
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "index.sparse",
    "remote.fetch",
    "remote.mirror",
    "remote.tagopt",
    "remote.prune",
    "branch.merge",
    "branch.rebase",
    "submodule.active",
    "submodule.branch",
    "user.name",
    "user.email",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "rebase.autostash",
    "merge.ff",
    "init.defaultbranch",
    "color.ui",
    "advice.detachedhead",
];

/// Keys that may stay only with a value the guard checks: `core.worktree` must name the folder
/// whose `.git` leads back to the config's git directory; a remote's, submodule's or branch's
/// URL that is a local path must not lead into a writable place the guard does not watch.
pub(super) const JUDGED_KEYS: [&str; 6] = [
    "core.worktree",
    "remote.url",
    "remote.pushurl",
    "submodule.url",
    "branch.remote",
    "branch.pushremote",
];

/// One entry of a git config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ConfigEntry {
    /// `section.key`, lowercase, the subsection left out.
    pub(super) key: String,
    /// The value as git reads it (quotes and escapes resolved, comments and trailing space
    /// gone, cut at a NUL as git's C strings are); `None` for a bare key (true).
    pub(super) value: Option<String>,
}

/// The entries of a git config file, read by git's rules: a UTF-8 BOM skipped, CRLF read as LF,
/// `#` and `;` comments outside quotes, `[section]`, `[section "sub"]` and `[section.sub]`
/// headers (a key may follow on the same line), `key = value` or a bare `key`, values with
/// quotes, the escapes `\\ \" \n \t \b` and `\` line continuation. `None` where git refuses the
/// file (it then stops with "bad config line" and runs nothing of it, but the guard cannot
/// know what a later git would make of it either, so it is not safe).
pub(super) fn parse_config(bytes: &[u8]) -> Option<Vec<ConfigEntry>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut r = Reader { bytes, at: 0 };
    let mut section = String::new();
    let mut out = Vec::new();
    let mut comment = false;
    loop {
        let Some(c) = r.next() else {
            return Some(out);
        };
        if c == b'\n' {
            comment = false;
            continue;
        }
        if comment || is_space(c) {
            continue;
        }
        if c == b'#' || c == b';' {
            comment = true;
            continue;
        }
        if c == b'[' {
            section = r.section()?;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return None;
        }
        let mut key = String::from(char::from(c.to_ascii_lowercase()));
        let mut c = r.next();
        while let Some(k) = c.filter(|k| k.is_ascii_alphanumeric() || *k == b'-') {
            key.push(char::from(k.to_ascii_lowercase()));
            c = r.next();
        }
        while matches!(c, Some(b' ' | b'\t')) {
            c = r.next();
        }
        let value = match c {
            None | Some(b'\n') => None,
            Some(b'=') => Some(r.value()?),
            Some(_) => return None,
        };
        out.push(ConfigEntry {
            key: format!("{section}.{key}"),
            value,
        });
    }
}

/// git's `isspace`: space, tab, LF and CR (not VT or FF).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// A config file read one character at a time, as git's `get_next_char` does (CRLF is LF).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.at)?;
        self.at += 1;
        if c == b'\r' && self.bytes.get(self.at) == Some(&b'\n') {
            self.at += 1;
            return Some(b'\n');
        }
        Some(c)
    }

    /// A section header after its `[`: the section's name, lowercase (what comes after a `.`
    /// or inside quotes is the subsection, left out).
    fn section(&mut self) -> Option<String> {
        let mut name = Vec::new();
        loop {
            let c = self.next()?;
            if c == b']' {
                break;
            }
            if is_space(c) {
                // `[section "subsection"]`: spaces, a quoted name with escapes, then `]`.
                let mut c = c;
                while is_space(c) {
                    if c == b'\n' {
                        return None;
                    }
                    c = self.next()?;
                }
                if c != b'"' {
                    return None;
                }
                loop {
                    match self.next()? {
                        b'\n' => return None,
                        b'"' => break,
                        // An escaped character is taken as it is (the guard reads it), but a
                        // newline is refused.
                        b'\\' if self.next()? == b'\n' => return None,
                        _ => {}
                    }
                }
                if self.next()? != b']' {
                    return None;
                }
                break;
            }
            if !(c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
                return None;
            }
            name.push(c.to_ascii_lowercase());
        }
        let name = String::from_utf8(name).ok()?;
        let section = name.split('.').next().unwrap_or_default().to_owned();
        (!section.is_empty()).then_some(section)
    }

    /// A value after its `=`, as git's `parse_value` reads it.
    fn value(&mut self) -> Option<String> {
        let mut value = Vec::new();
        let (mut quote, mut comment, mut space) = (false, false, 0usize);
        loop {
            let Some(c) = self.next() else {
                return (!quote).then(|| finish(value));
            };
            if c == b'\n' {
                return (!quote).then(|| finish(value));
            }
            if comment {
                continue;
            }
            if is_space(c) && !quote {
                if !value.is_empty() {
                    space += 1;
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            value.extend(std::iter::repeat_n(b' ', space));
            space = 0;
            match c {
                b'\\' => match self.next() {
                    Some(b'\n') => {}
                    Some(b't') => value.push(b'\t'),
                    Some(b'b') => value.push(8),
                    Some(b'n') => value.push(b'\n'),
                    Some(e @ (b'\\' | b'"')) => value.push(e),
                    _ => return None,
                },
                b'"' => quote = !quote,
                c => value.push(c),
            }
        }
    }
}

/// A value's bytes as git uses them: a C string, so cut at the first NUL.
fn finish(mut value: Vec<u8>) -> String {
    if let Some(nul) = value.iter().position(|b| *b == 0) {
        value.truncate(nul);
    }
    String::from_utf8_lossy(&value).into_owned()
}

/// True when git reads every key of the config as one that names no program and no other file
/// ([`SAFE_KEYS`]) or one judged apart ([`JUDGED_KEYS`]), and git can read the file at all.
pub(crate) fn config_is_safe(bytes: &[u8]) -> bool {
    parse_config(bytes).is_some_and(|entries| {
        entries
            .iter()
            .all(|e| SAFE_KEYS.contains(&e.key.as_str()) || JUDGED_KEYS.contains(&e.key.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &[u8], key: &str) -> Vec<Option<String>> {
        parse_config(text)
            .expect("parses")
            .into_iter()
            .filter(|e| e.key == key)
            .map(|e| e.value)
            .collect()
    }

    #[test]
    fn values_are_read_as_git_reads_them() {
        for (text, want) in [
            (&b"[core]\n\tworktree = /a#/../b\n"[..], "/a"),
            (b"[core]\n\tworktree = /a ;/../b\n", "/a"),
            (b"[core]\n\tworktree = \"/a#b\" # c\n", "/a#b"),
            (b"[core]\n\tworktree = a  b   \n", "a  b"),
            (b"[core]\r\n\tworktree = a\\\r\n b\r\n", "a b"),
            (b"[core]\n\tworktree = a\\tb\\\"c\\\\\n", "a\tb\"c\\"),
            (b"\xEF\xBB\xBF[core] worktree = x\n", "x"),
            (b"[core]\n\tworktree = x\0y\n", "x"),
            (b"[Core \"sub\"]\n\tWorkTree=x", "x"),
            (b"[core.sub]\nworktree = x\n", "x"),
        ] {
            assert_eq!(
                values(text, "core.worktree"),
                vec![Some(want.to_owned())],
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        assert_eq!(values(b"[core]\n\tbare\n", "core.bare"), vec![None]);
        // A continued line is one value: it can hide no key.
        assert_eq!(
            values(b"[core]\n\tbare = false \\\n\tfsmonitor = x\n", "core.bare"),
            vec![Some("false  fsmonitor = x".to_owned())]
        );
    }

    #[test]
    fn what_git_refuses_is_refused() {
        for bad in [
            &b"[core]\n\tworktree = \"x\n"[..],
            b"[core]\n\tworktree = a\\q\n",
            b"[core\n",
            b"[core \"x]\n",
            b"[core]\n\t1key = x\n",
            b"[core]\n\tkey # x\n",
            b"[co re]\n",
            b"[core \n\"x\"]\n",
        ] {
            assert_eq!(parse_config(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_config_is_safe_only_with_keys_that_name_no_program() {
        assert!(config_is_safe(b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = /x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[user]\n\temail = a@b\n"));
        for bad in [
            &b"[core]\n\tfsmonitor = x\n"[..],
            b"[core]\n\thooksPath = x\n",
            b"[core]\n\tpager = x\n",
            b"[alias]\n\tst = !x\n",
            b"[filter \"x\"]\n\tclean = x\n",
            b"[include]\n\tpath = x\n",
            b"[core] fsmonitor = x\n",
            b"[core.x]\n\teditor = x\n",
            b"[core]\n\tbare = \"unterminated\n",
        ] {
            assert!(!config_is_safe(bad), "{}", String::from_utf8_lossy(bad));
        }
    }
}
