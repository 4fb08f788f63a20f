//! `nokv token create|list|revoke`: the store's access tokens (docs/server.md, "Tokens").
//!
//! Every action prints one JSON object: `create` the new token's record with its secret in
//! `token` (shown this once, never stored), `list` `{"status":"success","tokens":[…]}` (no
//! secrets, no hashes), `revoke` the revoked record; a failure prints the error envelope and
//! exits 1. On the embedded store the registry file is changed directly (no store lock is
//! needed, so it works while a server runs and the server sees the change at its next request);
//! with `--server` the server changes it (an `admin` token is required).

use std::io::Write;
use std::time::SystemTime;

use clap::Subcommand;
use nokv::access::{AccessError, TokenRegistry};
use serde_json::{json, Value};

use crate::{print_json, EXIT_OK, EXIT_TOOL_ERROR};

/// `nokv token` actions.
#[derive(Debug, Clone, Subcommand, serde::Serialize, serde::Deserialize)]
pub enum TokenCommand {
    /// Create a token; prints one JSON object whose `token` field is the secret (shown once).
    Create {
        /// Unique name of the token (the actor the audit trail records).
        name: String,
        /// A scope `ACTION[:RESOURCE]` (repeatable): read, write, lifecycle or admin, on
        /// everything, `root=NAME`, or a workbench id or glob such as `run-*`.
        #[arg(long = "scope", value_name = "SCOPE", required = true)]
        scopes: Vec<String>,
        /// Lifetime, e.g. `90m`, `12h`, `30d` (default: no expiry).
        #[arg(long, value_name = "DURATION")]
        expires: Option<String>,
    },
    /// List every token (active, expired, revoked) without secrets.
    List,
    /// Revoke the token named NAME, effective at a running server's next request.
    Revoke {
        /// The token's name.
        name: String,
    },
}

impl TokenCommand {
    /// Whether the action changes the registry.
    pub fn mutates(&self) -> bool {
        !matches!(self, TokenCommand::List)
    }
}

/// The wall clock in Unix milliseconds (token creation, expiry and revocation times).
pub fn wall_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Runs one action on `registry` at `now_ms`, printing its JSON object on `out`; returns the
/// exit code.
pub fn run_token_with(
    registry: &TokenRegistry,
    cmd: TokenCommand,
    now_ms: u64,
    out: &mut dyn Write,
) -> u8 {
    let result: Result<Value, AccessError> = match cmd {
        TokenCommand::Create {
            name,
            scopes,
            expires,
        } => expires
            .as_deref()
            .map(nokv::expiry::parse_duration)
            .transpose()
            .map_err(|e| AccessError::BadDuration(e.to_string()))
            .and_then(|d| registry.create(&name, &scopes, d, now_ms))
            .map(|t| t.envelope(now_ms)),
        TokenCommand::List => registry.list().map(|tokens| {
            json!({
                "status": "success",
                "tokens": tokens.iter().map(|t| t.info(now_ms)).collect::<Vec<_>>(),
            })
        }),
        TokenCommand::Revoke { name } => registry.revoke(&name, now_ms).map(|t| {
            let mut out = serde_json::Map::new();
            out.insert("status".into(), Value::from("success"));
            if let Value::Object(info) = t.info(now_ms) {
                out.extend(info);
            }
            Value::Object(out)
        }),
    };
    match result {
        Ok(v) => {
            print_json(out, &v);
            EXIT_OK
        }
        Err(e) => {
            print_json(out, &e.tool_error().envelope());
            EXIT_TOOL_ERROR
        }
    }
}
