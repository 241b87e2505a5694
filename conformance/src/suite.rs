//! The suite compiled into the crate, so an installed `certify` needs no clone: every file of
//! the workspace's `scenarios/` ([`SCENARIOS`]), `fixtures/expectations/` ([`EXPECTATIONS`]) and
//! `fixtures/fake-runners/` ([`FAKE_RUNNERS`], with their modes), embedded by `build.rs`.
//! [`Materialised`] writes the first two into a private directory for the loader, [`FakeRunners`]
//! the fakes the selection steps point the local chain at;
//! [`hash_dir`] names a scenario set (the report carries it, and `certify merge` refuses reports
//! of different sets).

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/suite_files.rs"));

/// Why the embedded suite could not be written out.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// No private directory could be made.
    #[error("cannot make a private directory for the embedded suite: {0}")]
    PrivateDir(String),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// This user's cache directory: `$XDG_CACHE_HOME`, or `~/.cache`.
pub(crate) fn cache_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
}

/// Where the harness and the reference backends keep their own state across calls, in this
/// user's cache: certify's private directories ([`private_dir`]) and `sandbox-local`'s probe
/// cache, staging and temp areas. The run-level check of the shared places passes over
/// everything in them when the cache lies in one (CI points `XDG_CACHE_HOME` into `/var/tmp`),
/// what a run tidied of another's included.
pub fn own_state() -> Vec<PathBuf> {
    cache_home()
        .map(|home| {
            vec![
                home.join("sandbox-certify"),
                home.join("sandbox-conformance"),
            ]
        })
        .unwrap_or_default()
}

/// A private directory this process owns (mode 0700), removed on drop, outside every temp root
/// a confined call may write (`/tmp`, `/dev/shm`, `$TMPDIR`) and private to this user
/// ([`sandbox::check_state_dir`]): under
/// `$XDG_CACHE_HOME` or `~/.cache`. What certify puts there (the suite, the launcher it runs) is
/// therefore out of reach of a payload given `workspace-write`.
pub fn private_dir(tag: &str) -> Result<tempfile::TempDir, SuiteError> {
    let base = cache_home()
        .ok_or_else(|| SuiteError::PrivateDir("neither XDG_CACHE_HOME nor HOME is set".into()))?;
    let base = base.join("sandbox-certify");
    std::fs::create_dir_all(&base)
        .map_err(|e| SuiteError::PrivateDir(format!("{}: {e}", base.display())))?;
    // Where state no payload may reach lives is decided in one place (`/tmp` and anything others
    // may write are refused); `$TMPDIR` and `/dev/shm`, which a confined call may also get, too.
    let refused = |why: String| {
        SuiteError::PrivateDir(format!(
            "{why}: a directory which a confined call may write cannot hold what certify runs; set XDG_CACHE_HOME elsewhere"
        ))
    };
    let canonical = sandbox::check_state_dir("certify's private directory", &base, &[])
        .map_err(|e| refused(e.to_string()))?;
    let temp_roots = ["/dev/shm".into()]
        .into_iter()
        .chain(std::env::var_os("TMPDIR").map(PathBuf::from));
    if let Some(root) = temp_roots
        .filter_map(|r: PathBuf| r.canonicalize().ok())
        .find(|r| canonical.starts_with(r))
    {
        return Err(refused(format!(
            "{} is under {}",
            canonical.display(),
            root.display()
        )));
    }
    tempfile::Builder::new()
        .prefix(&format!("{tag}-"))
        .tempdir_in(&canonical)
        .map_err(|e| SuiteError::PrivateDir(format!("{}: {e}", canonical.display())))
}

/// The embedded suite written out: `scenarios/` and `expectations/` in a private directory,
/// removed when this is dropped.
pub struct Materialised {
    dir: tempfile::TempDir,
}

impl Materialised {
    /// Writes [`SCENARIOS`] and [`EXPECTATIONS`] into a fresh [`private_dir`].
    pub fn new() -> Result<Materialised, SuiteError> {
        let dir = private_dir("suite")?;
        for (sub, files) in [("scenarios", SCENARIOS), ("expectations", EXPECTATIONS)] {
            write_all(&dir.path().join(sub), files)?;
        }
        Ok(Materialised { dir })
    }

    /// The scenario root.
    pub fn scenarios(&self) -> PathBuf {
        self.dir.path().join("scenarios")
    }

    /// The reference backends' expectation files.
    pub fn expectations(&self) -> PathBuf {
        self.dir.path().join("expectations")
    }
}

/// The embedded fake runners ([`FAKE_RUNNERS`]) written out with their modes into a fresh
/// [`private_dir`], removed when this is dropped: what a `select` step's `@fakes/<name>` names.
pub struct FakeRunners {
    dir: tempfile::TempDir,
}

impl FakeRunners {
    /// Writes every fake runner, each with the mode it has in the workspace.
    pub fn new() -> Result<FakeRunners, SuiteError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = private_dir("fakes")?;
        for (rel, mode, bytes) in FAKE_RUNNERS {
            write_all(dir.path(), &[(rel, bytes)])?;
            let path = dir.path().join(rel);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
                .map_err(|source| SuiteError::Write { path, source })?;
        }
        Ok(FakeRunners { dir })
    }

    /// The directory holding them.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn write_all(root: &Path, files: &[(&str, &[u8])]) -> Result<(), SuiteError> {
    for (rel, bytes) in files {
        let rel = Path::new(rel);
        // The table is the build's own listing; still, nothing is written outside `root`.
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        let path = root.join(rel);
        let write = |path: &Path| -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::File::create_new(path)?.write_all(bytes)
        };
        write(&path).map_err(|source| SuiteError::Write {
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

/// The embedded scenario set's hash ([`hash_dir`]'s, computed over [`SCENARIOS`]).
pub fn embedded_hash() -> String {
    hash_files(SCENARIOS.iter().map(|(p, b)| (p.to_string(), b.to_vec())))
}

/// The hash of the scenario set under `root`: SHA-256 over every file (sorted by relative path;
/// each its path, a NUL, its length as 8 bytes big-endian, its bytes), as `sha256:<hex>`. The
/// same set gives the same hash embedded or on disk.
pub fn hash_dir(root: &Path) -> std::io::Result<String> {
    let mut found = Vec::new();
    collect(root, root, &mut found)?;
    Ok(hash_files(found.into_iter()))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        // Hidden entries are never part of a suite (the build leaves them out too).
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            collect(root, &path, out)?;
        } else if meta.is_file() {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            out.push((rel.to_string_lossy().into_owned(), std::fs::read(&path)?));
        }
    }
    Ok(())
}

fn hash_files(files: impl Iterator<Item = (String, Vec<u8>)>) -> String {
    let mut files: Vec<(String, Vec<u8>)> = files.collect();
    files.sort();
    let mut data = Vec::new();
    for (path, bytes) in &files {
        data.extend_from_slice(path.as_bytes());
        data.push(0);
        data.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        data.extend_from_slice(bytes);
    }
    let digest = sha256(&data);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// SHA-256 of `data`, from the RustCrypto `sha2` crate.
fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: [u8; 32]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            hex(sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(sha256(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    #[test]
    fn the_embedded_suite_is_the_workspace_s_and_hashes_the_same_on_disk() {
        let on_disk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        assert!(SCENARIOS.iter().any(|(p, _)| p.ends_with(".yaml")));
        assert!(EXPECTATIONS.iter().any(|(p, _)| *p == "bwrap.yaml"));
        let fakes = FakeRunners::new().expect("write the fake runners");
        use std::os::unix::fs::PermissionsExt;
        let mode = |name: &str| {
            std::fs::metadata(fakes.dir().join(name))
                .expect("a fake")
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("bwrap-refuses"), 0o755);
        assert_eq!(mode("runner-not-executable") & 0o111, 0);
        let disk = hash_dir(&on_disk).expect("hash the workspace's scenarios");
        assert_eq!(embedded_hash(), disk);
        let out = Materialised::new().expect("materialise");
        assert_eq!(hash_dir(&out.scenarios()).expect("hash"), disk);
        let mut changed = out.scenarios();
        changed.push("README.md");
        std::fs::write(&changed, "changed").expect("change one file");
        assert_ne!(hash_dir(&out.scenarios()).expect("hash"), disk);
    }
}
