//! `workbench_commit` and `workbench_find` (docs/workbench.md "commit", "find").
//!
//! `workbench_commit` is a thin shaping layer over [`Client::commit`], which owns the canonical
//! manifest, the commit identity, the `run_manifest.json` envelope and the durable BuildCommit
//! operation. `workbench_find` pages over the root's visible workbenches at one read version
//! (a snapshot-fenced cursor), reads each published `metadata/run_manifest.json` and matches
//! `manifest_pattern` as an ASCII case-insensitive literal substring of its canonical bytes.
//! Each match carries `manifest_path`, `manifest_size_bytes`, `manifest_generation`, the
//! envelope's digests and identity, `commit_identity_verified`, `manifest_summary` (see the
//! `summary` function) and, with `include_manifest`, `manifest` = the whole run-manifest envelope
//! (`null` otherwise).

use serde_json::{Map, Value};

use super::cursor::{decode_cursor, encode_cursor, scope_digest, CursorState, Fence};
use super::error_map::{meta_tool_error, tool_error};
use super::facade::Workbench;
use super::scope::{opt_bool, opt_str, opt_u64, req_str};
use crate::client::Client;
use crate::commit::CommitRequest;
use crate::json::canonical;
use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};

const FIND_TOOL: &str = "workbench_find";
/// Workbenches one `workbench_find` call examines at most before returning a cursor.
const FIND_SCAN_BUDGET: usize = 1000;
/// Largest run manifest `workbench_find` reads (bytes): the commit-time bound on the canonical
/// manifest ([`crate::json::payload::MAX_PAYLOAD_BYTES`]) plus 64 KiB for the envelope, so
/// every committed manifest is read; larger files are reported unmatched.
const MAX_FIND_MANIFEST_BYTES: u64 = crate::json::payload::MAX_PAYLOAD_BYTES + 64 * 1024;

/// Maps commit- and tag-path errors to the contract's codes (`WorkbenchCommitConflict`,
/// `WorkbenchCommitProtocolMismatch`, `NotFound`, `InvalidState`, `Conflict/CommitHead`, …);
/// everything else goes through [`tool_error`].
pub fn commit_error(client: &Client, workbench_id: &str, err: crate::error::Error) -> ToolError {
    commit_error_naming(client, workbench_id, err, "replace=true")
}

/// [`commit_error`] whose `WorkbenchCommitConflict` hint names `replace` as the caller spells it
/// (`replace=true` for the tool's JSON field, `--replace` for `nokv commit`).
pub fn commit_error_naming(
    client: &Client,
    workbench_id: &str,
    err: crate::error::Error,
    replace: &str,
) -> ToolError {
    use crate::error::Error as E;
    let wb_path = client.workbench_path(workbench_id);
    match err {
        E::Meta(meta::Error::WorkbenchCommitConflict { head }) => ToolError::new(
            ErrorCode::WorkbenchCommitConflict,
            format!(
                "workbench `{workbench_id}` is already committed with a different identity; \
                 pass {replace} to move its head to this commit"
            ),
        )
        .with_detail("path", wb_path)
        .with_detail("current_commit_identity", head),
        E::Meta(meta::Error::OperationInputMismatch { reason }) => ToolError::new(
            ErrorCode::WorkbenchCommitProtocolMismatch,
            format!("this commit identity was already requested with other inputs: {reason}"),
        )
        .with_detail("path", wb_path),
        // docs/workbench.md: `NotFound {path}` — the workbench the commit was named for.
        E::Meta(meta::Error::CommitNotFound { commit_id }) => {
            ToolError::new(ErrorCode::NotFound, "the named commit does not exist")
                .with_detail("path", wb_path)
                .with_detail("commit_id", commit_id)
        }
        // Caller input refused by meta (tag names, commit ids, …) is the caller's error.
        E::Meta(meta::Error::InvalidArgument(msg)) => ToolError::invalid_arguments(msg),
        E::Meta(meta::Error::CommitLifecycle { reason }) => {
            ToolError::new(ErrorCode::InvalidState, reason).with_detail("path", wb_path)
        }
        E::Meta(meta::Error::TagConflict { expected, actual }) => ToolError::new(
            ErrorCode::Conflict,
            "the tag is not at the expected generation (it exists, is absent, or moved); \
             read it again and retry",
        )
        .with_detail("conflict", "CommitHead")
        .with_detail("expected_generation", expected)
        .with_detail("actual_generation", actual),
        E::OperationFailed { code, message } => match ErrorCode::parse(&code) {
            Some(ErrorCode::Conflict) => {
                ToolError::conflict("CommitHead").with_detail("path", wb_path)
            }
            Some(c) => ToolError::new(c, message).with_detail("path", wb_path),
            None => ToolError::internal(message),
        },
        other => tool_error(client, workbench_id, other),
    }
}

pub(super) fn commit(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let content_digest_uri = req_str(args, "content_digest_uri")?;
    let manifest = args
        .get("manifest")
        .cloned()
        .ok_or_else(|| ToolError::invalid_arguments("manifest is required"))?;
    // Canonical encoding problems are reported with their own code before any storage access.
    canonical::canonical_json(&manifest)?;
    let replace = opt_bool(args, "replace", false);
    let client = wb.client();
    let receipt = client
        .commit(&CommitRequest {
            workbench_id: id.to_owned(),
            manifest,
            content_digest_uri: content_digest_uri.to_owned(),
            replace,
            parents: Vec::new(),
        })
        .map_err(|e| commit_error(client, id, e))?;
    let mut out = Map::new();
    out.insert("workbench_id".into(), Value::from(receipt.workbench_id));
    out.insert("workbench_path".into(), Value::from(receipt.workbench_path));
    out.insert("path".into(), Value::from(receipt.path));
    out.insert("size_bytes".into(), Value::from(receipt.size_bytes));
    out.insert("generation".into(), Value::from(receipt.generation));
    out.insert(
        "content_digest_uri".into(),
        Value::from(receipt.content_digest_uri),
    );
    out.insert(
        "manifest_digest_uri".into(),
        Value::from(receipt.manifest_digest_uri),
    );
    out.insert(
        "commit_identity".into(),
        Value::from(receipt.commit_identity),
    );
    out.insert(
        "envelope_digest_uri".into(),
        Value::from(receipt.envelope_digest_uri),
    );
    out.insert(
        "tree_digest_uri".into(),
        Value::from(receipt.tree_digest_uri),
    );
    out.insert("replace".into(), Value::from(receipt.replace));
    out.insert(
        "idempotent_replay".into(),
        Value::from(receipt.idempotent_replay),
    );
    Ok(out)
}

/// ASCII case-insensitive literal substring search.
fn contains_ascii_ci(haystack: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

fn str_field(env: &Value, key: &str) -> Value {
    env.get(key)
        .and_then(Value::as_str)
        .map_or(Value::Null, Value::from)
}

/// Whether the envelope's identity recomputes from its own fields and names the head commit.
fn identity_verified(env: &Value, workbench_id: &str, head_hex: Option<&str>) -> bool {
    let (Some(content), Some(md), Some(identity), Some(manifest)) = (
        env.get("content_digest_uri").and_then(Value::as_str),
        env.get("manifest_digest_uri").and_then(Value::as_str),
        env.get("commit_identity").and_then(Value::as_str),
        env.get("manifest"),
    ) else {
        return false;
    };
    let Ok(recomputed_md) = canonical::manifest_digest_uri(manifest) else {
        return false;
    };
    let recomputed = objstore::hex_lower(&canonical::commit_identity(workbench_id, content, md));
    recomputed_md == md && recomputed == identity && head_hex == Some(identity)
}

/// `manifest_summary` (docs/workbench.md "find"): `schema`, `workbench_id`, `commit_identity`,
/// `content_digest_uri`, `manifest_digest_uri`, `committed_at_unix_seconds` of the envelope,
/// `manifest_keys` (the user manifest's top-level keys sorted by their UTF-8 bytes) and
/// `manifest_task` (its `task` member when that is a string, else null).
fn summary(env: &Value) -> Value {
    let mut s = Map::new();
    for key in [
        "schema",
        "workbench_id",
        "commit_identity",
        "content_digest_uri",
        "manifest_digest_uri",
    ] {
        s.insert(key.into(), str_field(env, key));
    }
    s.insert(
        "committed_at_unix_seconds".into(),
        env.get("committed_at_unix_seconds")
            .filter(|v| v.is_number())
            .cloned()
            .unwrap_or(Value::Null),
    );
    let user = env.get("manifest").and_then(Value::as_object);
    let mut keys: Vec<&str> = user
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    s.insert("manifest_keys".into(), Value::from(keys));
    s.insert(
        "manifest_task".into(),
        user.and_then(|m| m.get("task"))
            .and_then(Value::as_str)
            .map_or(Value::Null, Value::from),
    );
    Value::Object(s)
}

/// One page of the root's workbenches at `read_version` (the latest when `None`), after
/// `after`, as the tool's errors (`ReadFenceChanged` when the version's history was pruned).
fn find_page(
    wb: &Workbench,
    read_version: Option<u64>,
    after: Option<&str>,
    limit: usize,
) -> ToolResult<meta::ops::find::FindPage> {
    match meta::ops::find::find_page(wb.client().meta(), read_version, after, limit) {
        Ok(p) => Ok(p),
        Err(meta::Error::Storage(holt::Error::HistoryPruned { .. })) => {
            Err(ToolError::read_fence_changed())
        }
        Err(e) => Err(meta_tool_error(&e)),
    }
}

/// Whether a workbench the facade may see follows `after` at `read_version`. An unrestricted
/// facade sees every workbench, so it answers true without reading; a restricted one looks
/// ahead past the hidden workbenches, so its cursor never leads to a page that is empty only
/// because hidden workbenches follow (docs/server.md, "Scopes": a cursor reveals nothing the
/// caller may not read).
fn visible_follows(wb: &Workbench, read_version: u64, after: &str) -> ToolResult<bool> {
    if !wb.is_restricted() {
        return Ok(true);
    }
    let mut after = after.to_string();
    loop {
        let page = find_page(wb, Some(read_version), Some(&after), 254)?;
        if page.candidates.iter().any(|c| wb.may_see(&c.workbench_id)) {
            return Ok(true);
        }
        match page.candidates.last() {
            Some(last) if page.more => after = last.workbench_id.clone(),
            _ => return Ok(false),
        }
    }
}

pub(super) fn find(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let committed = args.get("committed").and_then(Value::as_bool);
    let pattern = opt_str(args, "manifest_pattern");
    let include_manifest = opt_bool(args, "include_manifest", false);
    let limit = opt_u64(args, "limit")?.unwrap_or(50).clamp(1, 100) as usize;
    let client = wb.client();
    let shard = client.meta();
    let committed_tag: &[u8] = match committed {
        None => b"any",
        Some(true) => b"committed",
        Some(false) => b"uncommitted",
    };
    let scope = scope_digest(&[
        FIND_TOOL.as_bytes(),
        committed_tag,
        pattern.unwrap_or("").as_bytes(),
        &[u8::from(pattern.is_some()), u8::from(include_manifest)],
    ]);
    let (read_version, mut after) = match opt_str(args, "cursor") {
        None => (None, None),
        Some(c) => {
            let state: CursorState = decode_cursor(wb.cursor_key(), FIND_TOOL, &scope, c)?;
            let Fence::Snapshot { read_version } = state.fence else {
                return Err(ToolError::invalid_arguments("cursor is invalid")
                    .with_detail("field", "cursor"));
            };
            (Some(read_version), Some(state.anchor))
        }
    };
    let mut matches = Vec::new();
    let mut examined = 0usize;
    let mut pinned = read_version;
    let mut more = true;
    // Where the scan continues (past hidden workbenches too); `after` is the cursor's anchor,
    // the last workbench the caller may see.
    let mut scan_after = after.clone();
    'pages: while more && examined < FIND_SCAN_BUDGET && matches.len() < limit {
        let page = find_page(
            wb,
            pinned,
            scan_after.as_deref(),
            (FIND_SCAN_BUDGET - examined).min(254),
        )?;
        pinned = Some(page.read_version);
        more = page.more;
        let reader = shard
            .read_at(page.read_version)
            .map_err(|e| meta_tool_error(&e))?;
        let page_len = page.candidates.len();
        for (i, cand) in page.candidates.into_iter().enumerate() {
            // Whether any workbench follows this candidate (in this page or a later one).
            let followed = i + 1 < page_len || page.more;
            scan_after = Some(cand.workbench_id.clone());
            if !wb.may_see(&cand.workbench_id) {
                continue;
            }
            examined += 1;
            after = Some(cand.workbench_id.clone());
            let is_committed = cand.head.is_some();
            if committed.is_some_and(|want| want != is_committed) {
                if examined >= FIND_SCAN_BUDGET {
                    more = followed && visible_follows(wb, page.read_version, &cand.workbench_id)?;
                    break 'pages;
                }
                continue;
            }
            let bytes = match &cand.manifest {
                Some(e) if e.logical_size <= MAX_FIND_MANIFEST_BYTES => Some(
                    client
                        .read_entry(&reader, e)
                        .map_err(|err| tool_error(client, &cand.workbench_id, err))?,
                ),
                _ => None,
            };
            let matched = match pattern {
                None => true,
                Some(p) => bytes
                    .as_deref()
                    .is_some_and(|b| contains_ascii_ci(b, p.as_bytes())),
            };
            if matched {
                let wb_path = client.workbench_path(&cand.workbench_id);
                let env: Value = bytes
                    .as_deref()
                    .and_then(|b| serde_json::from_slice(b).ok())
                    .unwrap_or(Value::Null);
                let head_hex = cand.head.map(|h| h.commit_id.to_hex());
                let mut m = Map::new();
                m.insert(
                    "workbench_id".into(),
                    Value::from(cand.workbench_id.clone()),
                );
                m.insert("path".into(), Value::from(wb_path.clone()));
                m.insert("committed".into(), Value::from(is_committed));
                let entry = cand.manifest.as_ref();
                m.insert(
                    "manifest_path".into(),
                    entry.map_or(Value::Null, |_| {
                        Value::from(format!(
                            "{wb_path}/{}",
                            meta::ops::commit::RUN_MANIFEST_PATH
                        ))
                    }),
                );
                m.insert(
                    "manifest_size_bytes".into(),
                    entry.map_or(Value::Null, |e| Value::from(e.logical_size)),
                );
                m.insert(
                    "manifest_generation".into(),
                    entry.map_or(Value::Null, |e| Value::from(e.generation)),
                );
                m.insert(
                    "content_digest_uri".into(),
                    str_field(&env, "content_digest_uri"),
                );
                m.insert(
                    "manifest_digest_uri".into(),
                    str_field(&env, "manifest_digest_uri"),
                );
                m.insert("commit_identity".into(), str_field(&env, "commit_identity"));
                m.insert(
                    "commit_identity_verified".into(),
                    Value::from(identity_verified(
                        &env,
                        &cand.workbench_id,
                        head_hex.as_deref(),
                    )),
                );
                m.insert(
                    "envelope_digest_uri".into(),
                    entry.map_or(Value::Null, |e| Value::from(e.body_digest_uri.clone())),
                );
                m.insert(
                    "manifest_summary".into(),
                    if env.is_null() {
                        Value::Null
                    } else {
                        summary(&env)
                    },
                );
                // The whole run-manifest envelope (its eight keys, the user manifest under
                // `manifest`), when asked for.
                m.insert(
                    "manifest".into(),
                    if include_manifest && env.is_object() {
                        env.clone()
                    } else {
                        Value::Null
                    },
                );
                matches.push(Value::Object(m));
            }
            if matches.len() >= limit || examined >= FIND_SCAN_BUDGET {
                more = followed && visible_follows(wb, page.read_version, &cand.workbench_id)?;
                break 'pages;
            }
        }
    }
    let next_cursor = match (more, &after, pinned) {
        (true, Some(anchor), Some(rv)) => Value::from(encode_cursor(
            wb.cursor_key(),
            &CursorState {
                tool: FIND_TOOL.into(),
                scope_digest: scope,
                fence: Fence::Snapshot { read_version: rv },
                anchor: anchor.clone(),
                extra: Value::Null,
            },
        )),
        _ => Value::Null,
    };
    let mut out = Map::new();
    out.insert(
        "path".into(),
        Value::from(client.presentation_root().to_string()),
    );
    out.insert("match_count".into(), Value::from(matches.len()));
    out.insert("entry_count".into(), Value::from(examined));
    out.insert("truncated".into(), Value::from(!next_cursor.is_null()));
    out.insert("next_cursor".into(), next_cursor);
    out.insert("matches".into(), Value::from(matches));
    Ok(out)
}
