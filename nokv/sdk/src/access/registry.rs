//! The token registry of a store: `<store>/access/tokens.json` (docs/server.md, "Tokens").
//!
//! A small JSON file beside the metadata, not metadata rows: tokens must be managed while a
//! server owns the store (the store lock is not needed to change this file), they are not
//! versioned state of any workbench, and a running server notices a change with one `stat`
//! per request. Every change is written whole to a temporary file, fsynced, renamed over the
//! old file and the directory fsynced, under an exclusive lock of `tokens.lock`, so a reader
//! sees the old or the new registry and two writers never lose each other's change. Readers
//! keep the parsed file and re-read it when its identity (device, inode, length, modification
//! time) changes, so a revocation is effective for the next request without a restart.
//!
//! Format (`format` = `nokv.tokens.v1`): `{"format", "tokens": [{"id", "name", "scopes",
//! "salt", "hash", "created_unix_ms", "expires_unix_ms", "revoked_unix_ms"}]}`; `salt` and `hash`
//! are hex ([`super::token`]); the two optional times are null when unset.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::scope::{ScopeError, ScopeSet};
use super::token::{self, unhex};
use crate::workbench::errors::{ErrorCode, ToolError};

/// The registry's format tag.
pub const FORMAT: &str = "nokv.tokens.v1";
/// Most records a registry holds (revoked ones included).
pub const MAX_TOKENS: usize = 10_000;
/// Most scopes of one token.
pub const MAX_SCOPES: usize = 64;

/// Who made a call, as the access checks and the audit trail see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The actor's name: a token's name, `admin` for a server's `--token-file` token,
    /// `anonymous` on an open loopback server, `local:<user>` for the embedded CLI.
    pub name: String,
    /// What the caller may do.
    pub scopes: ScopeSet,
}

impl Caller {
    /// A caller holding every scope.
    pub fn admin(name: impl Into<String>) -> Self {
        Caller {
            name: name.into(),
            scopes: ScopeSet::admin(),
        }
    }
}

/// One stored token record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// 16 hex digits, the id inside the token text.
    pub id: String,
    /// Unique name (the audit trail's actor).
    pub name: String,
    /// The scopes as written (`ACTION[:RESOURCE]`).
    pub scopes: Vec<String>,
    /// Salt, hex.
    pub salt: String,
    /// `HMAC-SHA256(salt, token)`, hex.
    pub hash: String,
    /// When it was created (Unix ms).
    pub created_unix_ms: u64,
    /// When it stops working (Unix ms), if ever.
    pub expires_unix_ms: Option<u64>,
    /// When it was revoked (Unix ms), if it was.
    pub revoked_unix_ms: Option<u64>,
}

impl TokenRecord {
    /// `active`, `expired` or `revoked` at `now_ms`.
    pub fn state(&self, now_ms: u64) -> &'static str {
        if self.revoked_unix_ms.is_some() {
            "revoked"
        } else if self.expires_unix_ms.is_some_and(|t| t <= now_ms) {
            "expired"
        } else {
            "active"
        }
    }

    /// The listing form: everything but the salt and the hash.
    pub fn info(&self, now_ms: u64) -> Value {
        let time =
            |t: Option<u64>| t.map_or(Value::Null, |t| Value::from(crate::expiry::format_time(t)));
        json!({
            "name": self.name,
            "id": self.id,
            "scopes": self.scopes,
            "state": self.state(now_ms),
            "created_at": crate::expiry::format_time(self.created_unix_ms),
            "expires_at": time(self.expires_unix_ms),
            "revoked_at": time(self.revoked_unix_ms),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RegistryFile {
    format: String,
    tokens: Vec<TokenRecord>,
}

/// Why a presented token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No record matches it (also: not a token's shape, a wrong secret).
    Unknown,
    /// Its record expired.
    Expired,
    /// Its record was revoked.
    Revoked,
    /// The registry could not be read (refused, never let through).
    Unreadable,
}

/// A failed registry change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// A token name is 1–64 bytes of letters, digits, `_`, `-`, `.`, starting with a letter or
    /// digit.
    #[error("invalid token name {0:?}: use 1 to 64 letters, digits, `_`, `-` or `.`, starting with a letter or digit")]
    BadName(String),
    /// A scope did not parse.
    #[error("{0}")]
    BadScope(#[from] ScopeError),
    /// No scope was given, or more than [`MAX_SCOPES`].
    #[error("give 1 to {MAX_SCOPES} scopes (--scope ACTION[:RESOURCE])")]
    ScopeCount,
    /// A bad `--expires` duration.
    #[error("{0}")]
    BadDuration(String),
    /// An active token already has this name.
    #[error("a token named {0:?} already exists; revoke it first or choose another name")]
    NameTaken(String),
    /// No active token has this name.
    #[error("no active token is named {0:?}; `nokv token list` shows them")]
    NotFound(String),
    /// The registry is full ([`MAX_TOKENS`]).
    #[error("the token registry holds its maximum of {MAX_TOKENS} records")]
    Full,
    /// The registry file could not be read, parsed or written.
    #[error("the token registry could not be used: {0}")]
    Io(String),
}

impl AccessError {
    /// The Workbench error this failure is reported as: `InvalidArguments` for bad input,
    /// `AlreadyExists`, `NotFound`, `ResourceExhausted` for a full registry, `Internal` for I/O.
    pub fn tool_error(&self) -> ToolError {
        let code = match self {
            AccessError::BadName(_)
            | AccessError::BadScope(_)
            | AccessError::ScopeCount
            | AccessError::BadDuration(_) => ErrorCode::InvalidArguments,
            AccessError::NameTaken(_) => ErrorCode::AlreadyExists,
            AccessError::NotFound(_) => ErrorCode::NotFound,
            AccessError::Full => ErrorCode::ResourceExhausted,
            AccessError::Io(_) => ErrorCode::Internal,
        };
        ToolError::new(code, self.to_string())
    }
}

/// A token as `create` returns it: its text (shown once) and its record's listing form.
#[derive(Debug, Clone)]
pub struct CreatedToken {
    /// The secret token text.
    pub token: String,
    /// The record.
    pub record: TokenRecord,
}

impl CreatedToken {
    /// The one JSON object `nokv token create` prints: the listing fields plus `token`.
    pub fn envelope(&self, now_ms: u64) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("status".into(), Value::from("success"));
        if let Value::Object(info) = self.record.info(now_ms) {
            out.extend(info);
        }
        out.insert("token".into(), Value::from(self.token.clone()));
        Value::Object(out)
    }
}

/// Identity of the file a parse came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

#[derive(Debug, Default)]
struct Parsed {
    /// `None`: no registry file.
    stamp: Option<Stamp>,
    by_id: HashMap<String, (TokenRecord, ScopeSet, Vec<u8>, Vec<u8>)>,
    records: usize,
    /// Token texts this parse has verified by their HMAC, by id: a later request with the same
    /// text is compared with it in constant time instead of computing the HMAC again. Dropped
    /// with the parse, so a changed registry verifies afresh.
    verified: Mutex<HashMap<String, String>>,
}

/// What a presented token (or its absence) means to the registry ([`TokenRegistry::lookup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The registry holds no record at all (a server without a `--token-file` is then open).
    Empty,
    /// No token was presented, and the registry holds records.
    Missing,
    /// The token's caller.
    Caller(Caller),
    /// The token was refused.
    Refused(AuthFailure),
}

/// The token registry of one store (see the module docs). Cheap to share: readers hold the
/// parsed file behind a mutex and re-read it only when it changed.
#[derive(Debug)]
pub struct TokenRegistry {
    dir: PathBuf,
    cache: Mutex<Option<Arc<Parsed>>>,
}

impl TokenRegistry {
    /// The registry of the store in `store` (`<store>/access/tokens.json`). Reads nothing yet.
    pub fn at_store(store: &Path) -> Self {
        TokenRegistry {
            dir: store.join("access"),
            cache: Mutex::new(None),
        }
    }

    /// The registry file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join("tokens.json")
    }

    /// Whether the registry holds any record (revoked and expired ones included). A server
    /// requires a token on every request once this is true. An unreadable registry counts as
    /// holding records (fail closed).
    pub fn has_records(&self) -> bool {
        self.current().is_none_or(|p| p.records > 0)
    }

    /// The caller a presented token text stands for at `now_ms`. Errors: [`AuthFailure`].
    pub fn authenticate(&self, text: &str, now_ms: u64) -> Result<Caller, AuthFailure> {
        let parsed = self.current().ok_or(AuthFailure::Unreadable)?;
        verify_in(&parsed, text, now_ms)
    }

    /// One read of the registry for one request: whether it is empty, and the caller of
    /// `presented` (the bearer token, if any) at `now_ms`. An unreadable registry refuses
    /// ([`AuthFailure::Unreadable`]).
    pub fn lookup(&self, presented: Option<&str>, now_ms: u64) -> Lookup {
        let Some(parsed) = self.current() else {
            return Lookup::Refused(AuthFailure::Unreadable);
        };
        if parsed.records == 0 {
            return Lookup::Empty;
        }
        match presented {
            None => Lookup::Missing,
            Some(text) => match verify_in(&parsed, text, now_ms) {
                Ok(c) => Lookup::Caller(c),
                Err(f) => Lookup::Refused(f),
            },
        }
    }

    /// The record id of a presented token text (`None` when it has no token shape).
    pub fn token_id(text: &str) -> Option<&str> {
        token::token_id(text.trim())
    }

    /// The caller of the record with id `id` at `now_ms` (a web-view session remembers the id
    /// of the token that logged in). Errors: [`AuthFailure`].
    pub fn caller_by_id(&self, id: &str, now_ms: u64) -> Result<Caller, AuthFailure> {
        let parsed = self.current().ok_or(AuthFailure::Unreadable)?;
        let (record, scopes, _, _) = parsed.by_id.get(id).ok_or(AuthFailure::Unknown)?;
        caller_of(record, scopes, now_ms)
    }

    /// Every record (the listing form is [`TokenRecord::info`]). Errors: [`AccessError::Io`].
    pub fn list(&self) -> Result<Vec<TokenRecord>, AccessError> {
        Ok(read_file(&self.path())?.tokens)
    }

    /// Creates a token named `name` with `scopes`, valid for `expires` from `now_ms` (forever
    /// when `None`). Errors: a bad name, scope or count; [`AccessError::NameTaken`] when an
    /// active or expired, unrevoked token has the name; [`AccessError::Io`]. Nothing is written
    /// on an error.
    pub fn create(
        &self,
        name: &str,
        scopes: &[String],
        expires: Option<Duration>,
        now_ms: u64,
    ) -> Result<CreatedToken, AccessError> {
        if !valid_token_name(name) {
            return Err(AccessError::BadName(name.to_string()));
        }
        if scopes.is_empty() || scopes.len() > MAX_SCOPES {
            return Err(AccessError::ScopeCount);
        }
        let parsed = ScopeSet::parse(scopes)?;
        let written: Vec<String> = parsed.scopes().iter().map(ToString::to_string).collect();
        let expires_unix_ms = match expires {
            None => None,
            Some(d) => Some(
                u64::try_from(d.as_millis())
                    .ok()
                    .and_then(|ms| now_ms.checked_add(ms))
                    .ok_or_else(|| AccessError::BadDuration("the expiry is too far away".into()))?,
            ),
        };
        let minted = token::mint().map_err(|e| AccessError::Io(e.to_string()))?;
        let record = TokenRecord {
            id: minted.id,
            name: name.to_string(),
            scopes: written,
            salt: minted.salt_hex,
            hash: minted.hash_hex,
            created_unix_ms: now_ms,
            expires_unix_ms,
            revoked_unix_ms: None,
        };
        let stored = record.clone();
        self.change(|file| {
            if file
                .tokens
                .iter()
                .any(|t| t.name == name && t.revoked_unix_ms.is_none())
            {
                return Err(AccessError::NameTaken(name.to_string()));
            }
            if file.tokens.len() >= MAX_TOKENS {
                return Err(AccessError::Full);
            }
            file.tokens.push(stored.clone());
            Ok(())
        })?;
        Ok(CreatedToken {
            token: minted.text,
            record,
        })
    }

    /// Revokes the unrevoked token named `name` at `now_ms`; the record stays (the audit trail
    /// names it). Errors: [`AccessError::NotFound`], [`AccessError::Io`].
    pub fn revoke(&self, name: &str, now_ms: u64) -> Result<TokenRecord, AccessError> {
        let mut revoked = None;
        self.change(|file| {
            let Some(t) = file
                .tokens
                .iter_mut()
                .find(|t| t.name == name && t.revoked_unix_ms.is_none())
            else {
                return Err(AccessError::NotFound(name.to_string()));
            };
            t.revoked_unix_ms = Some(now_ms);
            revoked = Some(t.clone());
            Ok(())
        })?;
        revoked.ok_or_else(|| AccessError::NotFound(name.to_string()))
    }

    /// Applies `edit` to the registry under its lock and writes the result durably.
    fn change(
        &self,
        edit: impl FnOnce(&mut RegistryFile) -> Result<(), AccessError>,
    ) -> Result<(), AccessError> {
        let io = |what: &str, e: std::io::Error| AccessError::Io(format!("{what}: {e}"));
        fs::create_dir_all(&self.dir).map_err(|e| io("create the access directory", e))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join("tokens.lock"))
            .map_err(|e| io("open the registry lock", e))?;
        lock.lock().map_err(|e| io("lock the registry", e))?;
        let path = self.path();
        let mut file = read_file(&path)?;
        edit(&mut file)?;
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| AccessError::Io(e.to_string()))?;
        let tmp = self.dir.join("tokens.json.tmp");
        {
            // Owner-only: the file holds no secret, but its hashes are nobody else's business.
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| io("write the registry", e))?;
            f.write_all(&bytes)
                .map_err(|e| io("write the registry", e))?;
            f.sync_all().map_err(|e| io("sync the registry", e))?;
        }
        fs::rename(&tmp, &path).map_err(|e| io("replace the registry", e))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync the access directory", e))?;
        drop(lock);
        *lock_cache(&self.cache) = None;
        Ok(())
    }

    /// The parsed registry, re-read when the file changed; `None` when it cannot be read.
    fn current(&self) -> Option<Arc<Parsed>> {
        let path = self.path();
        let stamp = match fs::metadata(&path) {
            Ok(m) => Some(Stamp {
                dev: m.dev(),
                ino: m.ino(),
                len: m.len(),
                mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => return None,
        };
        let mut cache = lock_cache(&self.cache);
        if let Some(p) = cache.as_ref() {
            if p.stamp == stamp {
                return Some(Arc::clone(p));
            }
        }
        let file = match stamp {
            None => RegistryFile {
                format: FORMAT.into(),
                tokens: Vec::new(),
            },
            Some(_) => read_file(&path).ok()?,
        };
        let mut by_id = HashMap::new();
        for t in &file.tokens {
            // A record whose scopes, salt or hash do not parse can never authenticate.
            let (Ok(scopes), Some(salt), Some(hash)) =
                (ScopeSet::parse(&t.scopes), unhex(&t.salt), unhex(&t.hash))
            else {
                continue;
            };
            by_id.insert(t.id.clone(), (t.clone(), scopes, salt, hash));
        }
        let parsed = Arc::new(Parsed {
            stamp,
            by_id,
            records: file.tokens.len(),
            verified: Mutex::new(HashMap::new()),
        });
        *cache = Some(Arc::clone(&parsed));
        Some(parsed)
    }
}

/// The caller of `text` in `parsed` at `now_ms`: the record by id, the text verified by its
/// HMAC (or, when this parse verified the same id before, compared in constant time with the
/// text verified then), then the record's state.
fn verify_in(parsed: &Parsed, text: &str, now_ms: u64) -> Result<Caller, AuthFailure> {
    let text = text.trim();
    let id = token::token_id(text).ok_or(AuthFailure::Unknown)?;
    let (record, scopes, salt, hash) = parsed.by_id.get(id).ok_or(AuthFailure::Unknown)?;
    let known = lock_cache(&parsed.verified)
        .get(id)
        .is_some_and(|seen| token::same_text(seen, text));
    if !known {
        if !token::verify(salt, hash, text) {
            return Err(AuthFailure::Unknown);
        }
        lock_cache(&parsed.verified).insert(id.to_string(), text.to_string());
    }
    caller_of(record, scopes, now_ms)
}

/// The caller a token record stands for at `now_ms`: refused when it is revoked or expired.
fn caller_of(record: &TokenRecord, scopes: &ScopeSet, now_ms: u64) -> Result<Caller, AuthFailure> {
    match record.state(now_ms) {
        "revoked" => Err(AuthFailure::Revoked),
        "expired" => Err(AuthFailure::Expired),
        _ => Ok(Caller {
            name: record.name.clone(),
            scopes: scopes.clone(),
        }),
    }
}

/// Reads and checks the registry file; a missing file is an empty registry.
fn read_file(path: &Path) -> Result<RegistryFile, AccessError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(RegistryFile {
                format: FORMAT.into(),
                tokens: Vec::new(),
            })
        }
        Err(e) => return Err(AccessError::Io(format!("read the registry: {e}"))),
    };
    let file: RegistryFile = serde_json::from_slice(&bytes)
        .map_err(|e| AccessError::Io(format!("the registry file does not parse: {e}")))?;
    if file.format != FORMAT {
        return Err(AccessError::Io(format!(
            "the registry file has format {:?}, expected {FORMAT}",
            file.format
        )));
    }
    Ok(file)
}

/// A token name: 1–64 bytes of `[A-Za-z0-9_.-]`, starting with a letter or digit.
pub fn valid_token_name(name: &str) -> bool {
    name.len() <= 64
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn lock_cache<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::scope::{Action, Target};

    #[test]
    fn created_tokens_authenticate_until_revoked_or_expired() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TokenRegistry::at_store(dir.path());
        assert!(!reg.has_records());
        assert_eq!(reg.lookup(Some("nokv_x"), 0), Lookup::Empty);
        let ci = reg
            .create("ci", &["write:run-*".into()], None, 1_000)
            .unwrap();
        let short = reg
            .create(
                "short",
                &["read".into()],
                Some(Duration::from_secs(60)),
                1_000,
            )
            .unwrap();
        assert!(reg.has_records());
        let caller = reg.authenticate(&ci.token, 2_000).unwrap();
        assert_eq!(caller.name, "ci");
        assert!(caller
            .scopes
            .allows(Action::Write, &Target::workbench("run-1")));
        assert_eq!(
            reg.authenticate(&short.token, 61_000),
            Err(AuthFailure::Expired)
        );
        // Verified once, compared afterwards; a text with the same id but another secret is
        // still refused.
        assert_eq!(reg.authenticate(&ci.token, 2_001).unwrap().name, "ci");
        let mut forged = ci.token.clone();
        let last = forged.pop().unwrap();
        forged.push(if last == '0' { '1' } else { '0' });
        assert_eq!(reg.authenticate(&forged, 2_002), Err(AuthFailure::Unknown));
        assert_eq!(reg.lookup(None, 2_003), Lookup::Missing);
        assert_eq!(
            reg.authenticate("nokv_nope", 2_000),
            Err(AuthFailure::Unknown)
        );
        // A second registry handle (another process) revokes; the first sees it at once.
        TokenRegistry::at_store(dir.path())
            .revoke("ci", 3_000)
            .unwrap();
        assert_eq!(
            reg.authenticate(&ci.token, 3_001),
            Err(AuthFailure::Revoked)
        );
        // The file holds no secret.
        let text = fs::read_to_string(reg.path()).unwrap();
        assert!(!text.contains(&ci.token) && !text.contains(&ci.token[20..]));
        // A revoked name can be reused.
        reg.create("ci", &["read".into()], None, 4_000).unwrap();
    }

    #[test]
    fn bad_input_is_typed_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TokenRegistry::at_store(dir.path());
        assert!(matches!(
            reg.create("", &["read".into()], None, 0),
            Err(AccessError::BadName(_))
        ));
        assert!(matches!(
            reg.create("a", &["fly:x".into()], None, 0),
            Err(AccessError::BadScope(_))
        ));
        assert_eq!(
            reg.create("a", &[], None, 0).unwrap_err(),
            AccessError::ScopeCount
        );
        assert!(!reg.path().exists());
        reg.create("a", &["read".into()], None, 0).unwrap();
        assert!(matches!(
            reg.create("a", &["read".into()], None, 0),
            Err(AccessError::NameTaken(_))
        ));
        assert!(matches!(reg.revoke("b", 0), Err(AccessError::NotFound(_))));
        assert_eq!(reg.list().unwrap().len(), 1);
    }

    #[test]
    fn a_corrupt_registry_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TokenRegistry::at_store(dir.path());
        fs::create_dir_all(dir.path().join("access")).unwrap();
        fs::write(reg.path(), b"{not json").unwrap();
        assert!(reg.has_records());
        assert_eq!(reg.authenticate("nokv_x", 0), Err(AuthFailure::Unreadable));
        assert!(matches!(reg.list(), Err(AccessError::Io(_))));
    }
}
