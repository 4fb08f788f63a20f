//! Wire helpers of the remote client: request ids, percent-encoding of URL parts, response
//! headers, and the mapping of the server's JSON answers (envelopes, refusals, path entries,
//! index fields) to the SDK's types. A leaf: it imports nothing of this crate.

use serde_json::Value;

use nokv::error::{Error, Result};

/// A fresh request id: 32 lowercase hex characters from the OS random source.
pub fn new_request_id() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::InvalidArgument(format!("no randomness: {e}")))?;
    Ok(objstore::hex_lower(&b))
}

/// The request id a write sends: the caller's 16 bytes as 32 lowercase hex characters, else a
/// fresh one ([`new_request_id`]).
pub(crate) fn request_id_or_new(caller: Option<&[u8; 16]>) -> Result<String> {
    match caller {
        Some(id) => Ok(objstore::hex_lower(id)),
        None => new_request_id(),
    }
}

pub use nokv_protocol::url::encode_component;
pub(crate) use nokv_protocol::url::encode_path;

/// The value of response header `name`, when present and visible ASCII.
pub(crate) fn header<'a>(
    resp: &'a ureq::http::Response<ureq::Body>,
    name: &str,
) -> Option<&'a str> {
    resp.headers().get(name)?.to_str().ok()
}

/// The exclusive end of the range a `206` answers (`Content-Range: bytes a-b/size` → `b + 1`).
pub(crate) fn content_range_end(resp: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let v = header(resp, "content-range")?;
    let (_, span) = v.split_once(' ')?;
    let (range, _) = span.split_once('/')?;
    let (_, last) = range.split_once('-')?;
    last.parse::<u64>().ok()?.checked_add(1)
}

/// Whether an error code is a transport refusal of the server (not a Workbench code).
pub(crate) fn is_transport_code(code: &Value) -> bool {
    matches!(
        code.as_str(),
        Some(
            "Unauthorized"
                | "Timeout"
                | "Unavailable"
                | "RequestInFlight"
                | "RequestIdReused"
                | "OutcomeUnknown"
                | "Internal"
                | "NotOwner"
                | "LeaseLost"
                | "UnknownRoot"
        )
    )
}

pub(crate) fn server_error(status: u16, v: &Value) -> Error {
    Error::Server {
        status,
        code: v
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("Internal")
            .to_string(),
        message: v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the server refused the request")
            .to_string(),
        retryable: v.get("retryable").and_then(Value::as_bool).unwrap_or(false) || status == 503,
        details: Box::new(
            v.get("details")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        ),
    }
}

/// A success envelope as is; an error envelope as [`Error::OperationFailed`] with its code.
pub fn envelope_result(v: Value) -> Result<Value> {
    if v.get("status").and_then(Value::as_str) == Some("success") {
        return Ok(v);
    }
    Err(Error::OperationFailed {
        code: v
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("Internal")
            .to_string(),
        message: v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the operation failed")
            .to_string(),
    })
}

/// A [`meta::PathEntry`] from its JSON card (`server::routes::entry_json`).
pub(crate) fn entry_from_json(v: &Value) -> Result<meta::PathEntry> {
    use base64::Engine as _;
    let bad = |what: &str| Error::Connection {
        url: String::new(),
        reason: format!("the server's path entry lacks a valid {what}"),
    };
    let s = |k: &str| -> Result<String> {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad(k))
    };
    let n = |k: &str| -> Result<u64> { v.get(k).and_then(Value::as_u64).ok_or_else(|| bad(k)) };
    let mut projection = Vec::new();
    for pair in v
        .get("index_projection")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = pair
            .get(0)
            .and_then(Value::as_str)
            .ok_or_else(|| bad("index_projection"))?;
        let bytes = pair
            .get(1)
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .ok_or_else(|| bad("index_projection"))?;
        projection.push((name.to_string(), bytes));
    }
    Ok(meta::PathEntry {
        generation: n("generation")?,
        artifact_revision_id: meta::ArtifactRevisionId::from_hex(&s("artifact_revision_id")?)
            .map_err(|_| bad("artifact_revision_id"))?,
        logical_size: n("logical_size")?,
        body_digest_uri: s("body_digest_uri")?,
        manifest_digest_uri: s("manifest_digest_uri")?,
        dependency_count: u32::try_from(n("dependency_count")?)
            .map_err(|_| bad("dependency_count"))?,
        dependency_depth: u32::try_from(n("dependency_depth")?)
            .map_err(|_| bad("dependency_depth"))?,
        content_type: s("content_type")?,
        producer: s("producer")?,
        manifest_id: v
            .get("manifest_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        created_version: n("created_version")?,
        modified_version: n("modified_version")?,
        index_projection: projection,
    })
}

/// One typed index field as the `name:TYPE=value` spec the server parses with
/// [`nokv::index_fields::parse_field_arg`] (the CLI's `--field` syntax).
///
/// Errors: [`Error::InvalidArgument`] for a byte-string value (no `--field` type carries one).
pub(crate) fn field_arg(name: &str, value: &nokv::IndexValue) -> Result<String> {
    use nokv::IndexValue as V;
    Ok(match value {
        V::Null => format!("{name}=null"),
        V::Bool(b) => format!("{name}:bool={b}"),
        V::Int(i) => format!("{name}:int={i}"),
        V::UInt(u) => format!("{name}:uint={u}"),
        V::Float(f) => format!("{name}:float={:?}", f.get()),
        V::Timestamp(t) => format!("{name}:ts={}", t.to_rfc3339()),
        V::String(s) => format!("{name}:str={s}"),
        V::Bytes(_) => {
            return Err(Error::InvalidArgument(format!(
                "index field `{name}`: byte-string values cannot be sent to a server"
            )))
        }
    })
}
