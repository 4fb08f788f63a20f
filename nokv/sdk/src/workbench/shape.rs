//! Result shaping for `workbench_read` (docs/workbench.md, "read"): structured decoding of JSON, YAML
//! and text bodies into records, record paging (`r:<n>` cursors) and byte ranges (`b:<end>`
//! cursors).
//!
//! Record types (the `record_type` field of a read result):
//! - `json_array`: a JSON body whose top-level value is an array; one record per element.
//! - `json_object`: any other JSON body (object or scalar); one record, the value.
//! - `yaml_mapping`: any YAML body. docs/workbench.md names only this record type for YAML and says a
//!   top-level sequence is split per element: a sequence gives one record per element, any other
//!   document (mapping, scalar, empty document = `null`) one record.
//! - `text_lines`: everything else; one JSON string record per line.

use nokv_protocol::errors::{ToolError, ToolResult};
use serde_json::{Map, Value};

/// Largest body a structured read decodes: 16 MiB. Larger bodies → `ResourceExhausted`
/// (docs/workbench.md, "read"); read them with `format: bytes`.
pub const MAX_STRUCTURED_BYTES: u64 = 16 * 1024 * 1024;

/// How a body is decoded by a structured read (see [`structured_format`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON (content type contains `json`, or path ends `.json`).
    Json,
    /// YAML (content type contains `yaml`, or path ends `.yaml` / `.yml`).
    Yaml,
    /// UTF-8 text lines (anything else).
    Text,
}

impl Format {
    /// `"json"`, `"yaml"` or `"text"`: the `details.format` of `StructuredDecodeFailed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Yaml => "yaml",
            Format::Text => "text",
        }
    }
}

/// The shape of a decoded body; [`StructuredKind::record_type`] is the read result's
/// `record_type` string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StructuredKind {
    /// `json_object`: a non-array JSON value, one record.
    JsonObject,
    /// `json_array`: a top-level JSON array, one record per element.
    JsonArray,
    /// `yaml_mapping`: a YAML document (a top-level sequence is split per element).
    YamlMapping,
    /// `text_lines`: one JSON string per line.
    TextLines,
}

impl StructuredKind {
    /// The `record_type` string (`json_object`, `json_array`, `yaml_mapping`, `text_lines`).
    pub fn record_type(self) -> &'static str {
        match self {
            StructuredKind::JsonObject => "json_object",
            StructuredKind::JsonArray => "json_array",
            StructuredKind::YamlMapping => "yaml_mapping",
            StructuredKind::TextLines => "text_lines",
        }
    }
}

/// A decoded body: its record type and its records (JSON values, in body order).
#[derive(Clone, Debug, PartialEq)]
pub struct Structured {
    /// The `record_type` string (see [`StructuredKind::record_type`]).
    pub record_type: &'static str,
    /// The records; `record_count` = `records.len()`.
    pub records: Vec<Value>,
}

/// Picks the structured decoding of a body: JSON when `content_type` contains `json` or `path`
/// ends `.json`; else YAML when `content_type` contains `yaml` or `path` ends `.yaml` / `.yml`;
/// else text. Both checks are ASCII case-insensitive. JSON wins over YAML.
pub fn structured_format(path: &str, content_type: &str) -> Format {
    let ct = content_type.to_ascii_lowercase();
    let p = path.to_ascii_lowercase();
    if ct.contains("json") || p.ends_with(".json") {
        Format::Json
    } else if ct.contains("yaml") || p.ends_with(".yaml") || p.ends_with(".yml") {
        Format::Yaml
    } else {
        Format::Text
    }
}

/// Splits text into lines the way the Workbench counts them: `\n` and `\r\n` end a line (the
/// terminator is not part of the line; a lone `\r` is an ordinary character), and a final
/// terminator does not create an empty last line. Empty text has no lines.
pub fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let empty = text.is_empty();
    body.split('\n')
        .filter(move |_| !empty)
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
}

/// Decodes a body for a structured read (see the module docs for the record types).
///
/// `path` is the presentation path (used for the format choice and in error details).
/// Errors: `ResourceExhausted {operation: "read", resource: "structured_bytes", maximum}` for a
/// body over [`MAX_STRUCTURED_BYTES`]; `InvalidUtf8 {path}` when the body is not UTF-8 (all three
/// formats); `StructuredDecodeFailed {path, format}` for malformed JSON or YAML (including a YAML
/// stream with more than one document). YAML is converted to JSON values: tags are dropped (the
/// tagged value is kept), non-string mapping keys are stringified (`1` → `"1"`, `null` → `"null"`,
/// complex keys → their compact JSON), and non-finite floats become the strings `.nan`, `.inf`,
/// `-.inf`.
pub fn decode_structured(path: &str, content_type: &str, bytes: &[u8]) -> ToolResult<Structured> {
    if bytes.len() as u64 > MAX_STRUCTURED_BYTES {
        return Err(ToolError::resource_exhausted(
            "read",
            "structured_bytes",
            MAX_STRUCTURED_BYTES,
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| ToolError::invalid_utf8(path))?;
    // A leading UTF-8 byte-order mark is not content.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match structured_format(path, content_type) {
        Format::Json => {
            let value: Value = serde_json::from_str(text).map_err(|e| {
                ToolError::structured_decode_failed(path, "json", &short_reason(&e.to_string()))
            })?;
            Ok(match value {
                Value::Array(items) => Structured {
                    record_type: StructuredKind::JsonArray.record_type(),
                    records: items,
                },
                other => Structured {
                    record_type: StructuredKind::JsonObject.record_type(),
                    records: vec![other],
                },
            })
        }
        Format::Yaml => {
            let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| {
                ToolError::structured_decode_failed(path, "yaml", &short_reason(&e.to_string()))
            })?;
            Ok(match yaml_to_json(value) {
                Value::Array(items) => Structured {
                    record_type: StructuredKind::YamlMapping.record_type(),
                    records: items,
                },
                other => Structured {
                    record_type: StructuredKind::YamlMapping.record_type(),
                    records: vec![other],
                },
            })
        }
        Format::Text => Ok(Structured {
            record_type: StructuredKind::TextLines.record_type(),
            records: split_lines(text)
                .map(|l| Value::String(l.to_string()))
                .collect(),
        }),
    }
}

fn short_reason(reason: &str) -> String {
    const MAX: usize = 200;
    if reason.chars().count() <= MAX {
        reason.to_string()
    } else {
        let mut s: String = reason.chars().take(MAX).collect();
        s.push('…');
        s
    }
}

fn yaml_number_to_json(n: &serde_yaml_ng::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::from(i)
    } else if let Some(u) = n.as_u64() {
        Value::from(u)
    } else if let Some(f) = n.as_f64() {
        match serde_json::Number::from_f64(f) {
            Some(num) => Value::Number(num),
            None if f.is_nan() => Value::from(".nan"),
            None if f > 0.0 => Value::from(".inf"),
            None => Value::from("-.inf"),
        }
    } else {
        Value::from(n.to_string())
    }
}

fn yaml_key_to_string(key: serde_yaml_ng::Value) -> String {
    match key {
        serde_yaml_ng::Value::String(s) => s,
        serde_yaml_ng::Value::Null => "null".to_string(),
        serde_yaml_ng::Value::Bool(b) => b.to_string(),
        serde_yaml_ng::Value::Number(n) => match yaml_number_to_json(&n) {
            Value::String(s) => s,
            other => other.to_string(),
        },
        serde_yaml_ng::Value::Tagged(t) => yaml_key_to_string(t.value),
        complex => yaml_to_json(complex).to_string(),
    }
}

/// Converts a YAML value to a JSON value (see [`decode_structured`] for the rules).
fn yaml_to_json(value: serde_yaml_ng::Value) -> Value {
    match value {
        serde_yaml_ng::Value::Null => Value::Null,
        serde_yaml_ng::Value::Bool(b) => Value::Bool(b),
        serde_yaml_ng::Value::Number(n) => yaml_number_to_json(&n),
        serde_yaml_ng::Value::String(s) => Value::String(s),
        serde_yaml_ng::Value::Sequence(seq) => {
            Value::Array(seq.into_iter().map(yaml_to_json).collect())
        }
        serde_yaml_ng::Value::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                out.insert(yaml_key_to_string(k), yaml_to_json(v));
            }
            Value::Object(out)
        }
        serde_yaml_ng::Value::Tagged(t) => yaml_to_json(t.value),
    }
}

fn parse_cursor(cursor: &str, prefix: &str) -> ToolResult<u64> {
    let bad = || {
        ToolError::invalid_arguments(format!(
            "cursor {cursor:?} is not valid here; pass the `next_cursor` of the previous read \
             unchanged (record cursors look like `r:100`, byte cursors like `b:4096`)"
        ))
        .with_detail("field", "cursor")
    };
    let digits = cursor.strip_prefix(prefix).ok_or_else(bad)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical {
        return Err(bad());
    }
    digits.parse::<u64>().map_err(|_| bad())
}

/// Pages records for a structured read: returns `[{index, value}]` for records
/// `[start, start + limit)` and the next cursor `r:<start + limit>` when records remain.
///
/// `cursor` is `r:<n>` (decimal, no sign or leading zeros) with `n ≤ records.len()`; `None`
/// starts at record 0. `limit` is the tool's `limit` (1–300). Errors: `InvalidArguments` for a
/// malformed cursor, one pointing past the last record, or `limit == 0`.
pub fn page_records(
    records: &[Value],
    cursor: Option<&str>,
    limit: u64,
) -> ToolResult<(Vec<Value>, Option<String>)> {
    if limit == 0 {
        return Err(ToolError::invalid_arguments("limit must be at least 1"));
    }
    let total = records.len();
    let start = match cursor {
        None => 0,
        Some(c) => {
            let n = parse_cursor(c, "r:")?;
            if n > total as u64 {
                return Err(ToolError::invalid_arguments(format!(
                    "cursor {c:?} points past the last of {total} records; the file may have \
                     changed, so restart the read without a cursor"
                ))
                .with_detail("field", "cursor"));
            }
            n as usize
        }
    };
    let end = start
        .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
        .min(total);
    let items = records[start..end]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut item = Map::new();
            item.insert("index".into(), Value::from(start + i));
            item.insert("value".into(), v.clone());
            Value::Object(item)
        })
        .collect();
    let next = (end < total).then(|| format!("r:{end}"));
    Ok((items, next))
}

/// Computes the byte range of a `format: bytes` read: `[start, end)` with
/// `end = min(start + limit, total)` and the next cursor `b:<end>` when bytes remain.
///
/// Per docs/workbench.md ("Bytes: range `[offset, offset+limit)`") `limit` is the page length in
/// bytes, i.e. the tool's `limit` (1–300) is passed unchanged. `start` is `offset`, else the
/// cursor's `<n>`, else 0; `offset` and `cursor` together are rejected. `start == total` is
/// allowed and returns an empty range with no next cursor; `start > total` is rejected. All
/// errors are `InvalidArguments` (also a malformed cursor or `limit == 0`).
pub fn byte_range(
    total: u64,
    offset: Option<u64>,
    cursor: Option<&str>,
    limit: u64,
) -> ToolResult<(u64, u64, Option<String>)> {
    if limit == 0 {
        return Err(ToolError::invalid_arguments("limit must be at least 1"));
    }
    let start = match (offset, cursor) {
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid_arguments(
                "give either `offset` or `cursor`, not both; a cursor already carries its position",
            ))
        }
        (Some(off), None) => {
            if off > total {
                return Err(ToolError::invalid_arguments(format!(
                    "offset {off} is past the end of the {total}-byte body; use an offset of at most {total}"
                ))
                .with_detail("field", "offset"));
            }
            off
        }
        (None, Some(c)) => {
            let n = parse_cursor(c, "b:")?;
            if n > total {
                return Err(ToolError::invalid_arguments(format!(
                    "cursor {c:?} points past the end of the {total}-byte body; the file may \
                     have changed, so restart the read without a cursor"
                ))
                .with_detail("field", "cursor"));
            }
            n
        }
        (None, None) => 0,
    };
    let end = start.saturating_add(limit).min(total);
    let next = (end < total).then(|| format!("b:{end}"));
    Ok((start, end, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nokv_protocol::errors::ErrorCode;
    use serde_json::json;

    #[test]
    fn format_follows_content_type_then_extension() {
        assert_eq!(structured_format("a.txt", "application/json"), Format::Json);
        assert_eq!(
            structured_format("a.txt", "application/ld+json"),
            Format::Json
        );
        assert_eq!(structured_format("data.JSON", "text/plain"), Format::Json);
        assert_eq!(structured_format("a.yml", "text/plain"), Format::Yaml);
        assert_eq!(structured_format("a.yaml", ""), Format::Yaml);
        assert_eq!(structured_format("a", "application/x-yaml"), Format::Yaml);
        assert_eq!(
            structured_format("a.yaml", "application/json"),
            Format::Json
        );
        assert_eq!(structured_format("a.csv", "text/csv"), Format::Text);
    }

    #[test]
    fn json_array_splits_per_element() {
        let s = decode_structured("x.json", "text/plain", br#"[1, {"a": 2}, "s"]"#).unwrap();
        assert_eq!(s.record_type, "json_array");
        assert_eq!(s.records, vec![json!(1), json!({"a": 2}), json!("s")]);
    }

    #[test]
    fn json_object_is_one_record_preserving_key_order() {
        let s = decode_structured("x", "application/json", br#"{"z":1,"a":[1,2]}"#).unwrap();
        assert_eq!(s.record_type, "json_object");
        assert_eq!(s.records.len(), 1);
        let keys: Vec<&String> = s.records[0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "a"]);
    }

    #[test]
    fn yaml_sequence_splits_per_element() {
        let s =
            decode_structured("runs.yaml", "", b"- name: a\n  n: 1\n- name: b\n  n: 2\n").unwrap();
        assert_eq!(s.record_type, "yaml_mapping");
        assert_eq!(
            s.records,
            vec![json!({"name": "a", "n": 1}), json!({"name": "b", "n": 2})]
        );
    }

    #[test]
    fn yaml_mapping_is_one_record_with_stringified_keys() {
        let s = decode_structured(
            "c.yml",
            "",
            b"model: viking\n1: one\ntrue: yes\nnan: .nan\nx: !custom 5\n",
        )
        .unwrap();
        assert_eq!(s.record_type, "yaml_mapping");
        assert_eq!(
            s.records,
            vec![json!({"model": "viking", "1": "one", "true": "yes", "nan": ".nan", "x": 5})]
        );
    }

    #[test]
    fn text_lines_split_on_lf_and_crlf_without_trailing_empty_record() {
        let s = decode_structured("a.txt", "text/plain", b"one\r\ntwo\nthree\n").unwrap();
        assert_eq!(s.record_type, "text_lines");
        assert_eq!(s.records, vec![json!("one"), json!("two"), json!("three")]);
        let s = decode_structured("a.txt", "text/plain", b"a\n\nb").unwrap();
        assert_eq!(s.records, vec![json!("a"), json!(""), json!("b")]);
        let s = decode_structured("a.txt", "text/plain", b"").unwrap();
        assert!(s.records.is_empty());
        let s = decode_structured("a.txt", "text/plain", b"\n").unwrap();
        assert_eq!(s.records, vec![json!("")]);
        let s = decode_structured("a.txt", "text/plain", b"x\ry").unwrap();
        assert_eq!(s.records, vec![json!("x\ry")]);
    }

    #[test]
    fn non_utf8_body_is_invalid_utf8() {
        for path in ["a.txt", "a.json", "a.yaml"] {
            let e = decode_structured(path, "", &[0x61, 0xff, 0x62]).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidUtf8, "{path}");
        }
    }

    #[test]
    fn malformed_json_and_yaml_are_structured_decode_failed() {
        let e = decode_structured("/wb/x/outputs/a.json", "", b"{\"a\":").unwrap_err();
        assert_eq!(e.code, ErrorCode::StructuredDecodeFailed);
        assert_eq!(e.details["format"], "json");
        assert_eq!(e.details["path"], "/wb/x/outputs/a.json");
        let e = decode_structured("a.yaml", "", b"a: [1, 2\n").unwrap_err();
        assert_eq!(e.code, ErrorCode::StructuredDecodeFailed);
        assert_eq!(e.details["format"], "yaml");
        let e = decode_structured("a.yaml", "", b"a: 1\n---\nb: 2\n").unwrap_err();
        assert_eq!(e.code, ErrorCode::StructuredDecodeFailed);
    }

    #[test]
    fn page_records_walks_with_r_cursors() {
        let records: Vec<Value> = (0..5).map(Value::from).collect();
        let (items, next) = page_records(&records, None, 2).unwrap();
        assert_eq!(
            items,
            vec![json!({"index":0,"value":0}), json!({"index":1,"value":1})]
        );
        assert_eq!(next.as_deref(), Some("r:2"));
        let (items, next) = page_records(&records, Some("r:4"), 2).unwrap();
        assert_eq!(items, vec![json!({"index":4,"value":4})]);
        assert_eq!(next, None);
        let (items, next) = page_records(&records, Some("r:5"), 2).unwrap();
        assert!(items.is_empty());
        assert_eq!(next, None);
    }

    #[test]
    fn bad_record_cursor_is_invalid_arguments() {
        let records: Vec<Value> = (0..5).map(Value::from).collect();
        for bad in [
            "r:6",
            "r:",
            "r:-1",
            "r:01",
            "b:1",
            "r:1x",
            "x",
            "r:99999999999999999999",
        ] {
            let e = page_records(&records, Some(bad), 2).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArguments, "{bad}");
        }
        assert_eq!(
            page_records(&records, None, 0).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
    }

    #[test]
    fn byte_range_pages_with_b_cursors() {
        assert_eq!(
            byte_range(10, None, None, 4).unwrap(),
            (0, 4, Some("b:4".to_string()))
        );
        assert_eq!(byte_range(10, None, Some("b:8"), 4).unwrap(), (8, 10, None));
        assert_eq!(
            byte_range(10, Some(3), None, 4).unwrap(),
            (3, 7, Some("b:7".to_string()))
        );
        assert_eq!(byte_range(10, Some(10), None, 4).unwrap(), (10, 10, None));
        assert_eq!(byte_range(0, None, None, 4).unwrap(), (0, 0, None));
    }

    #[test]
    fn byte_range_rejects_offset_with_cursor_and_out_of_range() {
        let e = byte_range(10, Some(0), Some("b:4"), 4).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(
            byte_range(10, Some(11), None, 4).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            byte_range(10, None, Some("b:11"), 4).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            byte_range(10, None, Some("r:1"), 4).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            byte_range(u64::MAX, Some(u64::MAX - 1), None, 300).unwrap(),
            (u64::MAX - 1, u64::MAX, None)
        );
    }

    #[test]
    fn oversize_structured_body_is_resource_exhausted() {
        let big = vec![b'a'; MAX_STRUCTURED_BYTES as usize + 1];
        let e = decode_structured("a.txt", "", &big).unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
    }
}
