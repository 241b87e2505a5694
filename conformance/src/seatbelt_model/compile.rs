//! A profile compiled for judging: its rules in order, each with its action, operations and
//! filters, parameters already substituted.

use std::collections::BTreeMap;

use super::sbpl::{self, Sexp};
use super::{Action, ModelError, OPERATIONS, Request, Vnode, covers};

/// A filter of one rule, parameters substituted.
#[derive(Clone, Debug)]
pub enum Filter {
    /// `(literal S)`: the path is exactly `S`.
    Literal(Vec<u8>),
    /// `(subpath S)`: the path is `S` or lies beneath it.
    Subpath(Vec<u8>),
    /// `(prefix S)`: the path starts with the bytes of `S`.
    Prefix(Vec<u8>),
    /// `(regex R)`: the path matches `R` (case-sensitive, anchored only as written).
    Regex(regex::bytes::Regex),
    /// `(require-all F...)`.
    All(Vec<Filter>),
    /// `(require-any F...)`, and several filters in one rule.
    Any(Vec<Filter>),
    /// `(require-not F)`.
    Not(Box<Filter>),
    /// `(target same-sandbox)`.
    SameSandbox,
    /// `(global-name S)`.
    GlobalName(String),
    /// `(vnode-type T)`.
    VnodeType(Vnode),
    /// `(extension S)`.
    Extension(String),
    /// `(socket-domain D)`.
    SocketDomain(String),
    /// `(remote ip "*:*")`.
    RemoteIp,
    /// `(local ip "*:*")`.
    LocalIp,
}

impl Filter {
    /// Whether `request` matches this filter; a filter about something the request does not
    /// carry does not match.
    pub fn matches(&self, request: &Request) -> bool {
        let path = request.path.as_deref();
        match self {
            Filter::Literal(s) => path == Some(s.as_slice()),
            Filter::Subpath(s) => path.is_some_and(|p| is_beneath(p, s)),
            Filter::Prefix(s) => path.is_some_and(|p| p.starts_with(s)),
            Filter::Regex(re) => path.is_some_and(|p| re.is_match(p)),
            Filter::All(all) => all.iter().all(|f| f.matches(request)),
            Filter::Any(any) => any.iter().any(|f| f.matches(request)),
            Filter::Not(f) => !f.matches(request),
            Filter::SameSandbox => request.same_sandbox == Some(true),
            Filter::GlobalName(name) => request.global_name.as_deref() == Some(name.as_str()),
            Filter::VnodeType(t) => request.vnode == Some(*t),
            Filter::Extension(e) => request.extensions.iter().any(|x| x == e),
            Filter::SocketDomain(d) => request.socket_domain.as_deref() == Some(d.as_str()),
            Filter::RemoteIp => request.remote_ip,
            Filter::LocalIp => request.local_ip,
        }
    }
}

/// `path` is `root` or lies beneath it (`subpath "/"` covers every path).
fn is_beneath(path: &[u8], root: &[u8]) -> bool {
    let root = match root {
        [rest @ .., b'/'] if !rest.is_empty() => rest,
        other => other,
    };
    path == root
        || (path.starts_with(root) && (root == b"/" || path.get(root.len()) == Some(&b'/')))
}

/// One rule: its action, the operations it names, and its filter (`None`: every request).
#[derive(Clone, Debug)]
struct Rule {
    action: Action,
    ops: Vec<String>,
    filter: Option<Filter>,
}

/// A compiled profile.
#[derive(Clone, Debug)]
pub struct Profile {
    rules: Vec<Rule>,
}

impl Profile {
    /// Compiles `text` with `params` (`-D NAME=VALUE`). Refuses what the model does not know.
    pub fn compile(text: &str, params: &BTreeMap<String, Vec<u8>>) -> Result<Profile, ModelError> {
        let mut rules = Vec::new();
        for form in sbpl::read(text)? {
            let Sexp::List(items) = form else {
                return Err(ModelError::Unknown(format!("top-level {form:?}")));
            };
            let (head, rest) = items
                .split_first()
                .ok_or_else(|| ModelError::Syntax("empty form".into()))?;
            let action = match head {
                Sexp::Sym(s) if s == "version" => continue,
                Sexp::Sym(s) if s == "allow" => Action::Allow,
                Sexp::Sym(s) if s == "deny" => Action::Deny,
                other => return Err(ModelError::Unknown(format!("form {other:?}"))),
            };
            rules.push(rule(action, rest, params)?);
        }
        Ok(Profile { rules })
    }

    /// The verdict on `request`: the action of the last rule that names its operation and
    /// whose filter matches; `Deny` when none does.
    pub fn decide(&self, request: &Request) -> Action {
        self.rules
            .iter()
            .rev()
            .find(|r| {
                r.ops.iter().any(|op| covers(op, &request.op))
                    && r.filter.as_ref().is_none_or(|f| f.matches(request))
            })
            .map_or(Action::Deny, |r| r.action)
    }

    /// True when any rule is `(allow default)`.
    pub fn allows_by_default(&self) -> bool {
        self.rules
            .iter()
            .any(|r| r.action == Action::Allow && r.ops.iter().any(|o| o == "default"))
    }
}

fn rule(
    action: Action,
    rest: &[Sexp],
    params: &BTreeMap<String, Vec<u8>>,
) -> Result<Rule, ModelError> {
    let mut ops = Vec::new();
    let mut filters = Vec::new();
    for item in rest {
        match item {
            Sexp::Sym(op) if OPERATIONS.contains(&op.as_str()) => ops.push(op.clone()),
            Sexp::Sym(op) => return Err(ModelError::Unknown(format!("operation {op}"))),
            Sexp::List(list) if is_modifier(list) => {}
            Sexp::List(_) => filters.push(filter(item, params)?),
            other => return Err(ModelError::Unknown(format!("rule item {other:?}"))),
        }
    }
    if ops.is_empty() {
        return Err(ModelError::Syntax("a rule with no operation".into()));
    }
    let filter = match filters.len() {
        0 => None,
        1 => filters.pop(),
        _ => Some(Filter::Any(filters)),
    };
    Ok(Rule {
        action,
        ops,
        filter,
    })
}

/// `(with message "...")`, `(with no-report)`: modifiers that change no verdict.
fn is_modifier(list: &[Sexp]) -> bool {
    matches!(list.first(), Some(Sexp::Sym(s)) if s == "with")
}

/// A string argument: a string, or `(param "NAME")`.
fn string(item: &Sexp, params: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, ModelError> {
    match item {
        Sexp::Str(s) => Ok(s.clone()),
        Sexp::List(list) => match list.as_slice() {
            [Sexp::Sym(p), Sexp::Str(name)] if p == "param" => {
                let name = String::from_utf8_lossy(name).into_owned();
                params.get(&name).cloned().ok_or(ModelError::Unbound(name))
            }
            _ => Err(ModelError::Unknown(format!("string {item:?}"))),
        },
        other => Err(ModelError::Unknown(format!("string {other:?}"))),
    }
}

fn symbol(item: Option<&Sexp>) -> Result<String, ModelError> {
    match item {
        Some(Sexp::Sym(s)) => Ok(s.clone()),
        other => Err(ModelError::Unknown(format!("symbol {other:?}"))),
    }
}

fn filter(item: &Sexp, params: &BTreeMap<String, Vec<u8>>) -> Result<Filter, ModelError> {
    let Sexp::List(list) = item else {
        return Err(ModelError::Unknown(format!("filter {item:?}")));
    };
    let (head, args) = list
        .split_first()
        .ok_or_else(|| ModelError::Syntax("empty filter".into()))?;
    let head = symbol(Some(head))?;
    let one = || -> Result<Vec<u8>, ModelError> {
        match args {
            [arg] => string(arg, params),
            _ => Err(ModelError::Unknown(format!(
                "({head} ...) with {} arguments",
                args.len()
            ))),
        }
    };
    let many =
        || -> Result<Vec<Filter>, ModelError> { args.iter().map(|a| filter(a, params)).collect() };
    Ok(match head.as_str() {
        "literal" => Filter::Literal(one()?),
        "subpath" => Filter::Subpath(one()?),
        "prefix" => Filter::Prefix(one()?),
        "regex" => Filter::Regex(regex(&one()?)?),
        "require-all" => Filter::All(many()?),
        "require-any" => Filter::Any(many()?),
        "require-not" => match many()?.as_slice() {
            [f] => Filter::Not(Box::new(f.clone())),
            _ => return Err(ModelError::Unknown("require-not takes one filter".into())),
        },
        "target" if symbol(args.first())? == "same-sandbox" && args.len() == 1 => {
            Filter::SameSandbox
        }
        "global-name" => Filter::GlobalName(String::from_utf8_lossy(&one()?).into_owned()),
        "extension" => Filter::Extension(String::from_utf8_lossy(&one()?).into_owned()),
        "vnode-type" => {
            let name = symbol(args.first())?;
            Filter::VnodeType(
                Vnode::named(&name)
                    .ok_or_else(|| ModelError::Unknown(format!("vnode-type {name}")))?,
            )
        }
        "socket-domain" => {
            let domain = symbol(args.first())?;
            if !["AF_UNIX", "AF_INET", "AF_INET6", "AF_SYSTEM", "AF_ROUTE"]
                .contains(&domain.as_str())
            {
                return Err(ModelError::Unknown(format!("socket-domain {domain}")));
            }
            Filter::SocketDomain(domain)
        }
        "remote" | "local" => match args {
            [Sexp::Sym(kind), Sexp::Str(addr)] if kind == "ip" && addr == b"*:*" => {
                if head == "remote" {
                    Filter::RemoteIp
                } else {
                    Filter::LocalIp
                }
            }
            _ => {
                return Err(ModelError::Unknown(format!(
                    "({head} ...) other than ip \"*:*\""
                )));
            }
        },
        other => return Err(ModelError::Unknown(format!("filter {other}"))),
    })
}

/// An SBPL regex as a byte regex: the same POSIX-extended syntax the profile uses (bracket
/// classes, groups, `?`, `*`, `+`, `^`, `$`, backslash escapes), over bytes, case-sensitive.
fn regex(pattern: &[u8]) -> Result<regex::bytes::Regex, ModelError> {
    let mut rust = String::from("(?-u)");
    for &b in pattern {
        if b.is_ascii() {
            rust.push(char::from(b));
        } else {
            rust.push_str(&format!("\\x{b:02x}"));
        }
    }
    regex::bytes::Regex::new(&rust).map_err(|e| ModelError::Unknown(format!("regex: {e}")))
}
