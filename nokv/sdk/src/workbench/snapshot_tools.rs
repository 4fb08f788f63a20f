//! `workbench_snapshot`, `workbench_snapshot_renew`, `workbench_snapshot_retire`,
//! `workbench_snapshot_list`, and the `at_snapshot` selector of list/stat/read (docs/workbench.md;
//! docs/metadata-format.md, "Snapshot Lifecycle And History Holds").
//!
//! Snapshot results carry `snapshot_id`, `name`, `read_version`, `lease_expires_at` (RFC 3339,
//! UTC, milliseconds), `lease_expires_unix_ms`, `annotation {reason, metadata}`, `state`
//! (`alive`/`expired`/`retired`/`reaped`), `workbench_id` and `path`; `snapshot_list` rows and
//! `snapshot_retire` add `retire_annotation {metadata, reason}` — the *first* retirement's,
//! stored durably in the SnapshotRef row and never replaced by a retry (`null` unless retired).

use meta::ops::snapshot::{SnapshotInfo, SnapshotSelector};
use meta::Reader;
use serde_json::{Map, Value};

use super::error_map::tool_error;
use super::facade::Workbench;
use super::scope::{opt_str, opt_u64, req_str};
use crate::client::Client;
use crate::json::canonical::canonical_json;
use crate::snapshot::{SnapshotOptions, DAY_MS};
use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};

/// Default lease in days (docs/workbench.md).
const DEFAULT_TTL_DAYS: u64 = 7;
/// Largest canonical annotation in bytes (docs/workbench.md).
const MAX_ANNOTATION_BYTES: usize = 4096;
/// Deepest annotation nesting (docs/workbench.md).
const MAX_ANNOTATION_DEPTH: usize = 8;

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Maps SDK errors of snapshot operations and snapshot reads to tool errors (snapshot codes
/// first — `SnapshotNotFound`, `SnapshotExpired`, `ForkRetentionActive`, … — then the shared
/// mapping of [`crate::workbench::tool_error`]). Messages carry no storage identities.
pub fn snapshot_error(client: &Client, workbench_id: &str, err: crate::error::Error) -> ToolError {
    match err {
        crate::error::Error::Meta(meta::Error::SnapshotNotFound) => ToolError::new(
            ErrorCode::SnapshotNotFound,
            format!(
                "no such snapshot in workbench `{workbench_id}`; list them with workbench_snapshot_list"
            ),
        ),
        crate::error::Error::Meta(meta::Error::SnapshotExpired {
            snapshot_id,
            status,
        }) => ToolError::new(
            ErrorCode::SnapshotExpired,
            format!(
                "snapshot {snapshot_id} is {status}; its frozen state is no longer held (an expired, unreaped snapshot can be renewed)"
            ),
        )
        .with_detail("snapshot_id", Value::from(snapshot_id))
        .with_detail("state", Value::from(status)),
        crate::error::Error::Meta(meta::Error::ForkRetentionActive {
            snapshot_id,
            consumer_count,
        }) => ToolError::new(
            ErrorCode::ForkRetentionActive,
            format!(
                "snapshot {snapshot_id} is still being restored from ({consumer_count} consumer(s)); retry after the restore finishes"
            ),
        )
        .with_detail("snapshot_id", Value::from(snapshot_id))
        .with_detail("consumer_count", Value::from(consumer_count)),
        crate::error::Error::Meta(meta::Error::SnapshotLifecycle { reason }) => {
            ToolError::new(ErrorCode::InvalidState, reason)
                .with_detail("conflict", Value::from("SnapshotLifecycle"))
        }
        other => tool_error(client, workbench_id, other),
    }
}

/// The selector of an `at_snapshot` value: integer ≥ 0 → id, non-empty string → name,
/// absent/null → `None`.
///
/// Errors: `InvalidArguments` for any other value.
pub(crate) fn selector_of(value: Option<&Value>) -> ToolResult<Option<SnapshotSelector>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(|id| Some(SnapshotSelector::Id(meta::ids::SnapshotId(id))))
            .ok_or_else(|| ToolError::invalid_arguments("at_snapshot must be an integer >= 0")),
        Some(Value::String(s)) => crate::snapshot::name_selector(s)
            .map(Some)
            .map_err(|e| ToolError::invalid_arguments(e.to_string())),
        Some(_) => Err(ToolError::invalid_arguments(
            "at_snapshot must be a snapshot id (integer) or name (string)",
        )),
    }
}

/// Opens a frozen reader for `at_snapshot` (when given) of workbench `id`.
///
/// Errors: `SnapshotNotFound`, `SnapshotExpired` (expired, retired, reaped), `NotFound` for the
/// workbench, `InvalidArguments`.
pub(crate) fn open_snapshot(
    wb: &Workbench,
    id: &str,
    at_snapshot: Option<&Value>,
) -> ToolResult<Option<(SnapshotInfo, Reader)>> {
    let Some(sel) = selector_of(at_snapshot)? else {
        return Ok(None);
    };
    wb.client()
        .snapshot_reader(id, &sel)
        .map(Some)
        .map_err(|e| snapshot_error(wb.client(), id, e))
}

fn rfc3339_ms(unix_ms: u64) -> String {
    let ms = i64::try_from(unix_ms).unwrap_or(i64::MAX);
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The `retire_annotation` of a snapshot: the first retirement's stored `{metadata, reason}`
/// for a retired snapshot (`{"metadata": null, "reason": null}` when it carried none), `null`
/// otherwise.
fn retire_annotation_json(info: &SnapshotInfo) -> Value {
    if info.record.state != meta::codec::SnapshotState::Retired {
        return Value::Null;
    }
    info.record
        .retire_annotation
        .as_deref()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .unwrap_or_else(|| serde_json::json!({"metadata": null, "reason": null}))
}

/// The JSON of one snapshot (shared by every snapshot tool).
fn snapshot_json(client: &Client, info: &SnapshotInfo) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("snapshot_id".into(), Value::from(info.snapshot_id.get()));
    m.insert(
        "name".into(),
        info.record
            .alias
            .as_ref()
            .map_or(Value::Null, |a| Value::from(a.as_str())),
    );
    m.insert("read_version".into(), Value::from(info.record.read_version));
    m.insert(
        "lease_expires_at".into(),
        Value::from(rfc3339_ms(info.record.lease_deadline_unix_ms)),
    );
    m.insert(
        "lease_expires_unix_ms".into(),
        Value::from(info.record.lease_deadline_unix_ms),
    );
    let annotation = serde_json::from_slice::<Value>(&info.record.annotation)
        .unwrap_or_else(|_| serde_json::json!({"reason": null, "metadata": {}}));
    m.insert("annotation".into(), annotation);
    m.insert("state".into(), Value::from(info.status.as_str()));
    m.insert(
        "workbench_id".into(),
        Value::from(info.workbench_id.clone()),
    );
    m.insert(
        "path".into(),
        Value::from(client.workbench_path(&info.workbench_id)),
    );
    m
}

fn ttl_days(args: &Map<String, Value>) -> ToolResult<(u64, bool)> {
    match opt_u64(args, "ttl_days")? {
        None => Ok((DEFAULT_TTL_DAYS, true)),
        Some(d) if (1..=90).contains(&d) => Ok((d, false)),
        Some(_) => Err(ToolError::invalid_arguments("ttl_days must be 1..=90")),
    }
}

/// Exactly one of `snapshot_id` / `name` (null counts as absent).
fn id_or_name(args: &Map<String, Value>) -> ToolResult<SnapshotSelector> {
    let id =
        match args.get("snapshot_id") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                ToolError::invalid_arguments("snapshot_id must be an integer >= 0")
            })?),
        };
    match (id, opt_str(args, "name")) {
        (Some(id), None) => Ok(SnapshotSelector::Id(meta::ids::SnapshotId(id))),
        (None, Some(name)) => crate::snapshot::name_selector(name)
            .map_err(|e| ToolError::invalid_arguments(e.to_string())),
        _ => Err(ToolError::invalid_arguments(
            "give exactly one of snapshot_id or name",
        )),
    }
}

pub(super) fn snapshot(
    wb: &Workbench,
    args: &Map<String, Value>,
) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let (days, default_ttl) = ttl_days(args)?;
    let metadata = match args.get("metadata") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v) => v.clone(),
    };
    let annotation = serde_json::json!({
        "reason": opt_str(args, "reason").map_or(Value::Null, Value::from),
        "metadata": metadata,
    });
    if depth(&annotation) > MAX_ANNOTATION_DEPTH {
        return Err(ToolError::invalid_arguments(format!(
            "the snapshot annotation is nested deeper than {MAX_ANNOTATION_DEPTH} levels"
        )));
    }
    let bytes = canonical_json(&annotation)?;
    if bytes.len() > MAX_ANNOTATION_BYTES {
        return Err(ToolError::invalid_arguments(format!(
            "the snapshot annotation is {} bytes of canonical JSON; at most {MAX_ANNOTATION_BYTES} allowed",
            bytes.len()
        )));
    }
    let client = wb.client();
    let options = SnapshotOptions {
        name: opt_str(args, "name").map(str::to_string),
        ttl_ms: days * DAY_MS,
        annotation: bytes,
        require_commit: true,
    };
    let info = client
        .create_snapshot(id, &options)
        .map_err(|e| snapshot_error(client, id, e))?;
    let mut out = snapshot_json(client, &info);
    out.insert("ttl_days".into(), Value::from(days));
    if default_ttl {
        out.insert(
            "expiry_warning".into(),
            Value::from(format!(
                "this snapshot uses the default {DEFAULT_TTL_DAYS}-day lease and expires at {}; renew it with workbench_snapshot_renew to keep it longer",
                rfc3339_ms(info.record.lease_deadline_unix_ms)
            )),
        );
    }
    Ok(out)
}

pub(super) fn renew(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let selector = id_or_name(args)?;
    let (days, _) = ttl_days(args)?;
    let client = wb.client();
    let info = client
        .renew_snapshot(id, &selector, days * DAY_MS)
        .map_err(|e| snapshot_error(client, id, e))?;
    let mut out = snapshot_json(client, &info);
    out.insert("ttl_days".into(), Value::from(days));
    out.insert("renewed".into(), Value::from(true));
    Ok(out)
}

pub(super) fn retire(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let selector = id_or_name(args)?;
    // The annotation of this retirement; stored only if this call retires the snapshot (the
    // first retirement's annotation is durable and never replaced).
    let annotation = match opt_str(args, "reason") {
        None => None,
        Some(reason) => Some(canonical_json(
            &serde_json::json!({"metadata": null, "reason": reason}),
        )?),
    };
    let client = wb.client();
    let (info, retired) = client
        .retire_snapshot_annotated(id, &selector, annotation)
        .map_err(|e| snapshot_error(client, id, e))?;
    let mut out = Map::new();
    out.insert("workbench_id".into(), Value::from(id));
    out.insert("path".into(), Value::from(client.workbench_path(id)));
    out.insert("snapshot_id".into(), Value::from(info.snapshot_id.get()));
    out.insert(
        "name".into(),
        info.record
            .alias
            .as_ref()
            .map_or(Value::Null, |a| Value::from(a.as_str())),
    );
    out.insert("retired".into(), Value::from(retired));
    out.insert("state".into(), Value::from(info.status.as_str()));
    out.insert("retire_annotation".into(), retire_annotation_json(&info));
    Ok(out)
}

pub(super) fn list(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let client = wb.client();
    let all = client
        .list_snapshots(id)
        .map_err(|e| snapshot_error(client, id, e))?;
    let mut out = Map::new();
    out.insert("workbench_id".into(), Value::from(id));
    out.insert("path".into(), Value::from(client.workbench_path(id)));
    out.insert("snapshot_count".into(), Value::from(all.len() as u64));
    out.insert(
        "snapshots".into(),
        Value::Array(
            all.iter()
                .map(|i| {
                    let mut row = snapshot_json(client, i);
                    row.insert("retire_annotation".into(), retire_annotation_json(i));
                    Value::Object(row)
                })
                .collect(),
        ),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_timestamps_render_as_rfc3339_utc_milliseconds() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn at_snapshot_selector_accepts_ids_and_names_only() {
        assert_eq!(selector_of(None).unwrap(), None);
        assert_eq!(selector_of(Some(&Value::Null)).unwrap(), None);
        assert_eq!(
            selector_of(Some(&Value::from(7))).unwrap(),
            Some(SnapshotSelector::Id(meta::ids::SnapshotId(7)))
        );
        assert!(matches!(
            selector_of(Some(&Value::from("nightly"))).unwrap(),
            Some(SnapshotSelector::Name(_))
        ));
        assert!(selector_of(Some(&Value::from(-1))).is_err());
        assert!(selector_of(Some(&Value::from(true))).is_err());
    }
}
