//! Requests as ordinary clients make them. A payload the harness runs reads a few variables
//! (the workspace, a target path, a port); were their names and the shell's invocation fixed, a
//! backend could confine exactly the requests that carry them (`$OUTSIDE`, `bash -c`) and pass
//! every real one through. So each case draws, from its seed, a name for every variable from
//! the names build scripts use, one of the ways clients invoke a shell, and (for half of them)
//! a first line as ordinary scripts have (`export NODE_ENV=test`, `# npm run build`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use crate::world::{draw_hex, draw_one};

/// Variable names as build and CI scripts have them.
const NAMES: &[&str] = &[
    "PROJECT_DIR",
    "BUILD_DIR",
    "OUT_DIR",
    "DEST",
    "SRC_ROOT",
    "CACHE_DIR",
    "LOG_FILE",
    "STAGE_DIR",
    "JOB_DIR",
    "ARTIFACTS",
    "WORKDIR",
    "DATA_DIR",
    "CONF_FILE",
    "BASE",
    "INPUT",
    "OUTPUT",
    "SCRATCH",
    "REPORT",
    "TARGET_PATH",
    "release_dir",
    "outfile",
    "dest_dir",
    "target",
    "work",
];

/// First lines of ordinary scripts, none of which prints, starts a process or changes what the
/// rest does: a request that names `npm` or `cargo` is as likely from the harness as any.
const PRELUDES: &[&str] = &[
    "export NODE_ENV=test",
    "export CARGO_TERM_COLOR=never",
    "export PIP_DISABLE_PIP_VERSION_CHECK=1",
    "export CI=1",
    "# npm run build && npm test",
    "# make -j4 all",
    ": cargo build --release",
    "command -v npm >/dev/null || true",
    "command -v make >/dev/null || true",
    "command -v python3 >/dev/null || true",
    "# git pull --rebase && pip install -r requirements.txt",
    "# curl -fsSL https://example.com/install.sh | sh",
];

/// A payload dressed as an ordinary request: the argv to confine and the environment to run it
/// with.
#[derive(Clone, Debug)]
pub struct Dressed {
    /// The shell and its script, as a client would spell them.
    pub argv: Vec<OsString>,
    /// Each variable under its drawn name.
    pub env: Vec<(OsString, OsString)>,
    /// The drawn name of each variable.
    aliases: BTreeMap<String, String>,
}

impl Dressed {
    /// A program run directly, without a shell and without variables.
    pub fn direct(argv: Vec<OsString>) -> Dressed {
        Dressed {
            argv,
            env: Vec::new(),
            aliases: BTreeMap::new(),
        }
    }

    /// The name variable `name` is read under in this case (`name` itself when not dressed).
    pub fn alias(&self, name: &str) -> OsString {
        OsString::from(self.aliases.get(name).map_or(name, String::as_str))
    }
}

/// Dresses `script`, which reads the variables `vars` (`$NAME`, `${NAME...}` in the shell,
/// `$ENV{NAME}` in Perl), as an ordinary request: each variable gets a name drawn for this case
/// (distinct, none a name the environment already uses), the script reads it under that name,
/// and the shell is invoked in one of the ways clients invoke it.
pub fn dress(script: &str, vars: Vec<(&str, OsString)>) -> Dressed {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut env = Vec::with_capacity(vars.len());
    for (name, value) in vars {
        let alias = loop {
            let drawn = match draw_one(&["plain", "plain", "suffixed"]) {
                "plain" => draw_one(NAMES).to_owned(),
                _ => format!("{}_{}", draw_one(NAMES), draw_hex(2)),
            };
            let taken = names.values().any(|a| *a == drawn) || std::env::var_os(&drawn).is_some();
            if !taken {
                break drawn;
            }
        };
        env.push((OsString::from(&alias), value));
        names.insert(name.to_owned(), alias);
    }
    let mut script = rename_variables(script, &names);
    if draw_one(&["prelude", "none"]) == "prelude" {
        script = format!("{}\n{script}", draw_one(PRELUDES));
    }
    Dressed {
        argv: shell(script),
        env,
        aliases: names,
    }
}

/// One of the ways clients run a script: `bash -c`, bash by its absolute path, without startup
/// files, or through `env`.
fn shell(script: String) -> Vec<OsString> {
    // Where this host keeps bash, looked up once per process.
    static ABSOLUTE: std::sync::OnceLock<&str> = std::sync::OnceLock::new();
    let absolute = *ABSOLUTE.get_or_init(|| {
        ["/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .unwrap_or("bash")
    });
    let prefix: &[&str] = match draw_one(&["plain", "absolute", "norc", "env"]) {
        "absolute" => &[absolute, "-c"],
        "norc" => &["bash", "--noprofile", "--norc", "-c"],
        "env" => &["env", "bash", "-c"],
        _ => &["bash", "-c"],
    };
    let mut argv: Vec<OsString> = prefix.iter().map(OsString::from).collect();
    argv.push(script.into());
    argv
}

/// `script` with every read of a variable in `names` (`$X`, `${X`, `$ENV{X}`) made a read of
/// its new name; everything else, other variables included, is left as it is.
fn rename_variables(script: &str, names: &BTreeMap<String, String>) -> String {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(script.len());
    let mut rest = script;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at + 1]);
        rest = &rest[at + 1..];
        // `${X`, `$ENV{X}` (Perl) or `$X`.
        let (opener, after) = if let Some(r) = rest.strip_prefix("ENV{") {
            ("ENV{", r)
        } else if let Some(r) = rest.strip_prefix('{') {
            ("{", r)
        } else {
            ("", rest)
        };
        let len = after.find(|c: char| !ident(c)).unwrap_or(after.len());
        let word = &after[..len];
        if let Some(alias) = names.get(word) {
            out.push_str(opener);
            out.push_str(alias);
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_of_a_renamed_variable_follows_and_nothing_else_changes() {
        let names: BTreeMap<String, String> = [("WS", "BUILD_DIR"), ("T", "DEST"), ("MSG", "m")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        let script =
            r#"cd "$WS" && printf x > "${T}" "$TMPDIR" $WSX ${WS:-/} $ENV{MSG} $ENV{PATH} $$ $"#;
        assert_eq!(
            rename_variables(script, &names),
            r#"cd "$BUILD_DIR" && printf x > "${DEST}" "$TMPDIR" $WSX ${BUILD_DIR:-/} $ENV{m} $ENV{PATH} $$ $"#
        );
    }

    #[test]
    fn a_dressed_payload_reads_its_variables_under_their_new_names() {
        let dressed = crate::world::with_case(3, "request::dress", || {
            dress(
                r#"printf '%s|%s' "$WS" "${T}""#,
                vec![("WS", "/a b".into()), ("T", "/c".into())],
            )
        });
        assert!(dressed.env.iter().all(|(k, _)| k != "WS" && k != "T"));
        let out = std::process::Command::new(&dressed.argv[0])
            .args(&dressed.argv[1..])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(dressed.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("shell");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "/a b|/c");
    }

    #[test]
    fn cases_draw_different_shells_and_names() {
        let drawn: std::collections::BTreeSet<(OsString, OsString)> = (0..40u64)
            .map(|n| {
                crate::world::with_case(n, "request::vary", || {
                    let d = dress("echo \"$WS\"", vec![("WS", "/x".into())]);
                    (d.argv[0].clone(), d.env[0].0.clone())
                })
            })
            .collect();
        let shells: std::collections::BTreeSet<_> = drawn.iter().map(|(s, _)| s).collect();
        let names: std::collections::BTreeSet<_> = drawn.iter().map(|(_, n)| n).collect();
        assert!(shells.len() >= 3, "{shells:?}");
        assert!(names.len() >= 10, "{names:?}");
    }
}
