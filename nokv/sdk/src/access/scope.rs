//! The scope model: what a token may do (docs/server.md, "Scopes").
//!
//! A scope is written `ACTION[:RESOURCE]`:
//!
//! * `ACTION` is one class of calls — `read` (every reading tool and route), `write` (create,
//!   put, append, edit, remove, move), `lifecycle` (commit, snapshot and its renew/retire,
//!   restore, expire) or `admin` (gc, fsck, index repair, config, tokens, audit).
//! * `RESOURCE` is what the action applies to: absent or `*` for everything, `root=NAME` for
//!   every workbench of one root, or a workbench id or glob (`run-*`, `eval-?`; `*` any run of
//!   characters, `?` one).
//!
//! Implication: `admin` grants every action on its resource; `write` and `lifecycle` grant `read`
//! on theirs (a caller that may replace a file may also see it). Store-wide actions (gc, fsck,
//! config, tokens, audit) need `admin` on every resource (`admin` or `admin:*`).

use std::fmt;

/// Longest scope string accepted, in bytes.
pub const MAX_SCOPE_BYTES: usize = 160;

/// One class of calls (docs/server.md, "Scopes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Every call that changes nothing.
    Read,
    /// Create a workbench, put, append, edit, remove, move.
    Write,
    /// Commit, tag, snapshot (mint, renew, retire), restore, expire.
    Lifecycle,
    /// Store-wide maintenance: gc, fsck, index repair, config, tokens, audit.
    Admin,
}

impl Action {
    /// Every action, weakest first.
    pub const ALL: [Action; 4] = [
        Action::Read,
        Action::Write,
        Action::Lifecycle,
        Action::Admin,
    ];

    /// The written form: `read`, `write`, `lifecycle`, `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Write => "write",
            Action::Lifecycle => "lifecycle",
            Action::Admin => "admin",
        }
    }

    /// Parses the written form; `None` for anything else.
    pub fn parse(text: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == text)
    }

    /// Whether holding `self` grants `needed` (see the module docs).
    pub fn grants(self, needed: Action) -> bool {
        self == needed
            || self == Action::Admin
            || (needed == Action::Read && matches!(self, Action::Write | Action::Lifecycle))
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a scope's action applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resource {
    /// Everything (the resource omitted, or `*`).
    All,
    /// Every workbench of one root (`root=NAME`).
    Root(String),
    /// The workbenches whose id matches a glob (`run-*`); an id without `*`/`?` is exact.
    Workbench(String),
}

impl Resource {
    /// Whether this resource covers `target`.
    pub fn covers(&self, target: &Target<'_>) -> bool {
        match self {
            Resource::All => true,
            Resource::Root(root) => target.root == Some(root.as_str()),
            Resource::Workbench(glob) => target.workbench.is_some_and(|id| glob_matches(glob, id)),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::All => f.write_str("*"),
            Resource::Root(r) => write!(f, "root={r}"),
            Resource::Workbench(g) => f.write_str(g),
        }
    }
}

/// What one call touches: the root it is served under (`None` on a single-store server) and
/// the workbench (`None` for a store-wide call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Target<'a> {
    /// The root (`/roots/NAME/…` behind `nokv serve --control`).
    pub root: Option<&'a str>,
    /// The workbench id.
    pub workbench: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// A store-wide target.
    pub fn store() -> Self {
        Target::default()
    }

    /// The target of workbench `id`.
    pub fn workbench(id: &'a str) -> Self {
        Target {
            root: None,
            workbench: Some(id),
        }
    }

    /// The same target under `root`.
    pub fn under(self, root: Option<&'a str>) -> Self {
        Target { root, ..self }
    }
}

/// One parsed scope: an action on a resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The action class.
    pub action: Action,
    /// What it applies to.
    pub resource: Resource,
}

/// Why a scope string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// Empty, or longer than [`MAX_SCOPE_BYTES`].
    #[error("a scope is 1 to {MAX_SCOPE_BYTES} bytes, written ACTION[:RESOURCE]")]
    Length,
    /// The action is not `read`, `write`, `lifecycle` or `admin`.
    #[error("unknown action {0:?}: use read, write, lifecycle or admin")]
    UnknownAction(String),
    /// The resource is neither `*`, `root=NAME` nor a workbench id or glob.
    #[error(
        "invalid resource {0:?}: use *, root=NAME, or a workbench id or glob (letters, digits, \
         `_`, `-`, `*`, `?`; at most 128 bytes)"
    )]
    BadResource(String),
}

impl Scope {
    /// Parses `ACTION[:RESOURCE]` (see the module docs). Errors: [`ScopeError`].
    pub fn parse(text: &str) -> Result<Scope, ScopeError> {
        let text = text.trim();
        if text.is_empty() || text.len() > MAX_SCOPE_BYTES {
            return Err(ScopeError::Length);
        }
        let (action, resource) = match text.split_once(':') {
            Some((a, r)) => (a, Some(r)),
            None => (text, None),
        };
        let action =
            Action::parse(action).ok_or_else(|| ScopeError::UnknownAction(action.to_string()))?;
        let resource = match resource {
            None | Some("*") => Resource::All,
            Some(r) => match r.strip_prefix("root=") {
                Some(root) if valid_name(root, false) => Resource::Root(root.to_string()),
                None if valid_name(r, true) => Resource::Workbench(r.to_string()),
                _ => return Err(ScopeError::BadResource(r.to_string())),
            },
        };
        Ok(Scope { action, resource })
    }

    /// Whether this scope grants `action` on `target`.
    pub fn grants(&self, action: Action, target: &Target<'_>) -> bool {
        self.action.grants(action) && self.resource.covers(target)
    }

    /// The scope a call needs: `action` on the exact workbench, or on everything for a
    /// store-wide call. Its written form is what a `Forbidden` answer names.
    pub fn needed(action: Action, target: &Target<'_>) -> Scope {
        let resource = match target.workbench {
            Some(id) => Resource::Workbench(id.to_string()),
            None => Resource::All,
        };
        Scope { action, resource }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.resource {
            Resource::All => f.write_str(self.action.as_str()),
            r => write!(f, "{}:{r}", self.action),
        }
    }
}

/// The scopes one caller holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopeSet {
    scopes: Vec<Scope>,
}

impl ScopeSet {
    /// A set of the given scopes.
    pub fn new(scopes: Vec<Scope>) -> Self {
        ScopeSet { scopes }
    }

    /// Every action on everything (the server's `--token-file` token, an open loopback server,
    /// the embedded CLI).
    pub fn admin() -> Self {
        ScopeSet::new(vec![Scope {
            action: Action::Admin,
            resource: Resource::All,
        }])
    }

    /// `read` on everything (the read-only profile).
    pub fn read_only() -> Self {
        ScopeSet::new(vec![Scope {
            action: Action::Read,
            resource: Resource::All,
        }])
    }

    /// Parses scope strings (see [`Scope::parse`]); the first bad one is the error.
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Self, ScopeError> {
        texts
            .iter()
            .map(|t| Scope::parse(t.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(ScopeSet::new)
    }

    /// The scopes, in the order given.
    pub fn scopes(&self) -> &[Scope] {
        &self.scopes
    }

    /// Whether some scope grants `action` on `target`.
    pub fn allows(&self, action: Action, target: &Target<'_>) -> bool {
        self.scopes.iter().any(|s| s.grants(action, target))
    }

    /// `Ok` when allowed, else the scope that is missing (see [`Scope::needed`]).
    pub fn check(&self, action: Action, target: &Target<'_>) -> Result<(), Scope> {
        if self.allows(action, target) {
            Ok(())
        } else {
            Err(Scope::needed(action, target))
        }
    }

    /// Whether `read` is granted on every workbench under `root` (listings need no filter).
    pub fn reads_everything(&self, root: Option<&str>) -> bool {
        self.scopes.iter().any(|s| {
            s.action.grants(Action::Read)
                && match &s.resource {
                    Resource::All => true,
                    Resource::Root(r) => root == Some(r.as_str()),
                    Resource::Workbench(_) => false,
                }
        })
    }

    /// Whether the caller may read workbench `id` under `root` (the filter of listings, search,
    /// aggregate, catalog, find and the change feed).
    pub fn may_read(&self, root: Option<&str>, id: &str) -> bool {
        self.allows(
            Action::Read,
            &Target {
                root,
                workbench: Some(id),
            },
        )
    }

    /// Whether any scope grants more than `read` (a read-only caller holds none).
    pub fn writes_anything(&self) -> bool {
        self.scopes.iter().any(|s| s.action != Action::Read)
    }
}

/// A workbench id (`[A-Za-z0-9][A-Za-z0-9_-]*`, ≤ 128 bytes), or with `glob` also `*` and `?`
/// anywhere. Root names take the same characters plus `.`.
fn valid_name(text: &str, glob: bool) -> bool {
    !text.is_empty()
        && text.len() <= 128
        && text.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || b == b'_'
                || b == b'-'
                || (glob && (b == b'*' || b == b'?'))
                || (!glob && b == b'.')
        })
}

/// Whether `text` matches `glob` (`*` any run of bytes, `?` one byte; everything else literal).
/// Iterative with one backtrack point: linear in practice, never recursive.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    let (g, t) = (glob.as_bytes(), text.as_bytes());
    let (mut gi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match g.get(gi) {
            Some(b'*') => {
                star = Some((gi, ti));
                gi += 1;
            }
            Some(&c) if c == b'?' || c == t[ti] => {
                gi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sg, st)) => {
                    gi = sg + 1;
                    ti = st + 1;
                    star = Some((sg, st + 1));
                }
                None => return false,
            },
        }
    }
    g.get(gi..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_into_actions_and_resources() {
        let s = Scope::parse("write:run-*").unwrap();
        assert_eq!(s.action, Action::Write);
        assert_eq!(s.resource, Resource::Workbench("run-*".into()));
        assert_eq!(s.to_string(), "write:run-*");
        assert_eq!(Scope::parse("read").unwrap().resource, Resource::All);
        assert_eq!(Scope::parse("admin:*").unwrap().to_string(), "admin");
        assert_eq!(
            Scope::parse("lifecycle:root=team.a").unwrap().resource,
            Resource::Root("team.a".into())
        );
    }

    #[test]
    fn bad_scopes_are_typed_errors() {
        assert_eq!(Scope::parse(""), Err(ScopeError::Length));
        assert!(matches!(
            Scope::parse("delete:x"),
            Err(ScopeError::UnknownAction(_))
        ));
        for bad in ["read:", "read:a/b", "read:root=", "read:a b", "write:ü"] {
            assert!(
                matches!(Scope::parse(bad), Err(ScopeError::BadResource(_))),
                "{bad}"
            );
        }
        assert_eq!(
            Scope::parse(&"r".repeat(MAX_SCOPE_BYTES + 1)),
            Err(ScopeError::Length)
        );
    }

    #[test]
    fn write_implies_read_but_not_lifecycle_and_admin_implies_all() {
        let set = ScopeSet::parse(&["write:run-*"]).unwrap();
        let run = Target::workbench("run-7");
        let other = Target::workbench("inputs");
        assert!(set.allows(Action::Read, &run));
        assert!(set.allows(Action::Write, &run));
        assert!(!set.allows(Action::Lifecycle, &run));
        assert!(!set.allows(Action::Read, &other));
        assert!(!set.allows(Action::Admin, &Target::store()));
        assert_eq!(
            set.check(Action::Write, &other).unwrap_err().to_string(),
            "write:inputs"
        );
        let admin = ScopeSet::admin();
        for a in Action::ALL {
            assert!(admin.allows(a, &Target::store()));
            assert!(admin.allows(a, &run));
        }
        // A workbench-scoped admin grants nothing store-wide.
        let local = ScopeSet::parse(&["admin:run-*"]).unwrap();
        assert!(local.allows(Action::Lifecycle, &run));
        assert!(!local.allows(Action::Admin, &Target::store()));
    }

    #[test]
    fn root_scopes_cover_only_their_root() {
        let set = ScopeSet::parse(&["read:root=a"]).unwrap();
        assert!(set.may_read(Some("a"), "x"));
        assert!(!set.may_read(Some("b"), "x"));
        assert!(!set.may_read(None, "x"));
        assert!(set.reads_everything(Some("a")));
        assert!(!set.reads_everything(None));
    }

    #[test]
    fn globs_match_whole_ids() {
        assert!(glob_matches("run-*", "run-"));
        assert!(glob_matches("run-*", "run-12"));
        assert!(!glob_matches("run-*", "xrun-1"));
        assert!(glob_matches("*-eval", "a-eval"));
        assert!(glob_matches("a?c", "abc"));
        assert!(!glob_matches("a?c", "ac"));
        assert!(glob_matches("*a*b*", "xxaxxbxx"));
        assert!(!glob_matches("*a*b", "xxaxxbxx"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exact2"));
    }
}
