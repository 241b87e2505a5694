//! The metamorphic check: every `confine` request a case makes is asked a second time about a twin
//! world (the same layout at another random place, every path renamed). A backend that confines
//! by what a request looks like (the harness's paths, every other request) answers the two
//! differently; the answers must be the same argv up to the renaming, or the case is
//! `INCONSISTENT`, with both argvs in its message.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sandbox::{
    ConfinedArgv, ExtraRoot, PinnedDir, ProviderPolicy, SandboxProvider, SandboxUnavailable,
};

use crate::steps::StepError;
use crate::world::World;

/// The word that starts the message of a case whose backend answered a renamed request
/// differently (the certify report's status `INCONSISTENT`).
pub const INCONSISTENT: &str = "INCONSISTENT";

/// A provider that asks its backend every request twice, about the world and about its twin.
pub struct Twin {
    inner: Arc<dyn SandboxProvider>,
    /// (the world's path, the twin's path), longest first.
    renaming: Vec<(PathBuf, PathBuf)>,
    /// (the world's root, the twin's root), to mirror what a request names into the twin.
    roots: Vec<(PathBuf, PathBuf)>,
    /// The twin world (kept alive as long as requests may name it).
    _twin: World,
    /// Why the twin could not be made as a request needed it (not an inconsistency).
    trouble: Mutex<Option<String>>,
    /// Whether an answer and a refusal count as different (a fresh world and its twin are the
    /// same; a world a case has changed since is not).
    strict: bool,
    findings: Mutex<Vec<String>>,
}

impl Twin {
    /// Wraps `inner` for requests about `world`, with a fresh twin drawn from the case's draws.
    /// `strict`: the world is as fresh as its twin, so one answer and one refusal are different.
    pub fn new(
        inner: Arc<dyn SandboxProvider>,
        world: &World,
        strict: bool,
    ) -> Result<Arc<Twin>, StepError> {
        let twin = World::twin_of(world)
            .map_err(|e| StepError::Harness(format!("cannot build the twin world: {e}")))?;
        Ok(Arc::new(Twin {
            inner,
            renaming: world.renaming(&twin),
            roots: world.root_pairs(&twin),
            _twin: twin,
            trouble: Mutex::new(None),
            strict,
            findings: Mutex::new(Vec::new()),
        }))
    }

    /// `Err` with every inconsistency found so far ([`StepError::Inconsistent`]), or with why
    /// the twin could not be made.
    pub fn verdict(&self) -> Result<(), StepError> {
        if let Some(trouble) = self.trouble.lock().ok().and_then(|t| t.clone()) {
            return Err(StepError::Harness(format!(
                "cannot build the twin world: {trouble}"
            )));
        }
        let findings = self.findings.lock().map(|f| f.clone()).unwrap_or_default();
        if findings.is_empty() {
            Ok(())
        } else {
            Err(StepError::Inconsistent(findings))
        }
    }

    fn record(&self, finding: String) {
        if let Ok(mut f) = self.findings.lock() {
            f.push(finding);
        }
    }

    fn forth(&self, text: &OsStr) -> OsString {
        rename(text, self.renaming.iter().map(|(a, b)| (a, b)))
    }

    /// `(device:inode of a world path, device:inode of its twin)` for every renamed pair that
    /// exists in both.
    fn identities(&self) -> Vec<(PathBuf, PathBuf)> {
        use std::os::unix::fs::MetadataExt;
        let id = |p: &PathBuf| {
            std::fs::symlink_metadata(p)
                .ok()
                .map(|m| PathBuf::from(format!("{}:{}", m.dev(), m.ino())))
        };
        self.renaming
            .iter()
            .filter_map(|(a, b)| Some((id(a)?, id(b)?)))
            .collect()
    }

    fn back(&self, text: &OsStr) -> OsString {
        let mut pairs: Vec<(&PathBuf, &PathBuf)> =
            self.renaming.iter().map(|(a, b)| (b, a)).collect();
        pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.as_os_str().len()));
        rename(text, pairs.into_iter())
    }
}

/// `text` with every occurrence of a `from` replaced by its `to`, in one pass (a replacement is
/// never replaced again), the first matching pair winning at each position.
fn rename<'a>(text: &OsStr, pairs: impl Iterator<Item = (&'a PathBuf, &'a PathBuf)>) -> OsString {
    let pairs: Vec<(&[u8], &[u8])> = pairs
        .map(|(a, b)| (a.as_os_str().as_bytes(), b.as_os_str().as_bytes()))
        .filter(|(a, _)| !a.is_empty())
        .collect();
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    'scan: while i < bytes.len() {
        for (from, to) in &pairs {
            if bytes[i..].starts_with(from) {
                out.extend_from_slice(to);
                i += from.len();
                continue 'scan;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    OsString::from_vec(out)
}

fn shown(argv: &[OsString]) -> String {
    format!(
        "{:?}",
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    )
}

impl SandboxProvider for Twin {
    fn call_guard(&self, policy: &ProviderPolicy) -> Option<Box<dyn sandbox::CallGuard>> {
        self.inner.call_guard(policy)
    }

    fn temp_area_at_tmp(&self, policy: &ProviderPolicy) -> bool {
        self.inner.temp_area_at_tmp(policy)
    }

    fn confine(
        &self,
        argv: &[OsString],
        policy: &ProviderPolicy,
    ) -> Result<ConfinedArgv, SandboxUnavailable> {
        // A call whose policy names no temp area gets one here, the same for both questions: an
        // area is the trusted side's place, not the world's, so the two answers name the same
        // one. Held by both launches, removed when the last is dropped.
        let mut area = None;
        let own;
        let policy = if policy.roots.temp_area.is_shared() {
            let made = sandbox_local::temp_area::TempAreaDir::create().map_err(|e| {
                SandboxUnavailable {
                    mode: policy.mode,
                    backend: None,
                    detail: format!("the harness cannot make the call's temp area: {e}"),
                }
            })?;
            own = policy
                .clone()
                .with_roots(|r| r.with_temp_area(made.temp_area()));
            area = Some(std::sync::Arc::new(made));
            &own
        } else {
            policy
        };
        let hold = |answer: Result<ConfinedArgv, SandboxUnavailable>| {
            answer.map(|mut launch| {
                if let Some(a) = &area {
                    launch.fds.hold(a.clone());
                }
                launch
            })
        };
        let first = hold(self.inner.confine(argv, policy));
        // The twin holds only what this request names, made as it is in the world now: the
        // workspace, the temp dir, the extra roots, and each protected path in each writable
        // root (a protected-path plan depends on what exists there, a repository's `.git`).
        let renaming = |text: &OsStr| self.forth(text);
        let roots: Vec<&PathBuf> = std::iter::once(&policy.roots.workspace_root)
            .chain(policy.roots.extra_roots.iter().map(|r| &r.path))
            .collect();
        let protected: Vec<PathBuf> = roots
            .iter()
            .flat_map(|root| {
                policy
                    .roots
                    .protected_paths
                    .iter()
                    .map(move |p| root.join(p.as_path()))
            })
            .collect();
        let named = roots
            .iter()
            .copied()
            .chain(policy.roots.temp_dir.as_ref())
            .chain(protected.iter());
        for path in named {
            if let Err(e) = crate::world::mirror(&self.roots, path, &renaming)
                && let Ok(mut trouble) = self.trouble.lock()
            {
                trouble.get_or_insert(format!("{}: {e}", path.display()));
            }
        }
        let renamed: Vec<OsString> = argv.iter().map(|a| self.forth(a)).collect();
        let mut twin_policy = policy.clone();
        twin_policy.roots.workspace_root =
            self.forth(policy.roots.workspace_root.as_os_str()).into();
        twin_policy.roots.temp_dir = policy
            .roots
            .temp_dir
            .as_ref()
            .map(|t| self.forth(t.as_os_str()).into());
        twin_policy.cwd = policy
            .cwd
            .as_ref()
            .map(|c| self.forth(c.as_os_str()).into());
        let repin = |pin: &Option<PinnedDir>| {
            pin.as_ref()
                .and_then(|p| PinnedDir::pin(&PathBuf::from(self.forth(p.path.as_os_str()))).ok())
        };
        twin_policy.roots.workspace_pin = repin(&policy.roots.workspace_pin);
        twin_policy.roots.extra_roots = policy
            .roots
            .extra_roots
            .iter()
            .map(|root| {
                let renamed = ExtraRoot::new(PathBuf::from(self.forth(root.path.as_os_str())));
                match root.pin {
                    Some(_) => renamed.clone().pinned().unwrap_or(renamed),
                    None => renamed,
                }
            })
            .collect();
        twin_policy.roots.temp_dir_pin = repin(&policy.roots.temp_dir_pin);
        let second = hold(self.inner.confine(&renamed, &twin_policy));
        match (&first, &second) {
            (Ok(a), Ok(b)) => {
                // An answer may name a root by its identity (device:inode, as the reference bwrap
                // backend tells its launcher which directory each root must be): the twin's
                // roots are other directories, so their identities are renamed back too.
                let ids = self.identities();
                let back: Vec<OsString> = b
                    .argv
                    .iter()
                    .map(|x| {
                        let x = self.back(x);
                        rename(&x, ids.iter().map(|(a, b)| (b, a)))
                    })
                    .collect();
                if back != a.argv || a.enforcement != b.enforcement {
                    self.record(format!(
                        "the same request about another place was answered differently: argv {} ({}) for {:?}, but argv {} ({}) for {:?}",
                        shown(&a.argv),
                        a.enforcement.as_str(),
                        policy.roots.workspace_root,
                        shown(&b.argv),
                        b.enforcement.as_str(),
                        twin_policy.roots.workspace_root,
                    ));
                }
            }
            (Ok(a), Err(e)) if self.strict => self.record(format!(
                "confined {} for {:?}, but refused the same request for {:?}: {e}",
                shown(&a.argv),
                policy.roots.workspace_root,
                twin_policy.roots.workspace_root
            )),
            (Err(e), Ok(b)) if self.strict => self.record(format!(
                "refused for {:?} ({e}), but confined the same request for {:?} as {}",
                policy.roots.workspace_root,
                twin_policy.roots.workspace_root,
                shown(&b.argv)
            )),
            _ => {}
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renaming_is_one_pass_and_longest_first() {
        let pairs = [
            (PathBuf::from("/a/b c"), PathBuf::from("/x")),
            (PathBuf::from("/a"), PathBuf::from("/a/b c")),
        ];
        let out = rename(
            OsStr::new("cd '/a/b c/d' && ls /a/e"),
            pairs.iter().map(|(a, b)| (a, b)),
        );
        assert_eq!(out, OsString::from("cd '/x/d' && ls /a/b c/e"));
    }
}
