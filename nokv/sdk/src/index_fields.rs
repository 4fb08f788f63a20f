//! Typed index fields at the SDK and CLI boundary (docs/metadata-format.md: "Clients attach queryable fields to
//! ArtifactDescriptor.index_fields on the artifact publication request").
//!
//! A publication may carry up to 64 custom fields — a [`FieldId`] (`[A-Za-z0-9_.-]`, 1..=128
//! bytes, not a built-in name) mapped to a typed scalar [`IndexValue`] (null, bool, i64, u64,
//! finite f64, timestamp, string ≤4096 bytes, bytes ≤4096 bytes). The store always adds the
//! built-in fields (`body_digest_uri`, `content_type`, `generation`, `logical_size`,
//! `manifest_id`, `path`, `producer`, `workbench_id`). Three ways to produce custom fields:
//!
//! - the SDK: [`crate::client::PutOptions::index_fields`], a typed map;
//! - the CLI: `nokv collect … --field name=value`, parsed by [`parse_field_arg`];
//! - JSON artifacts: [`crate::client::PutOptions::index_json`] projects the body's top-level scalar
//!   members ([`json_object_fields`]).
//!
//! JSON presentation ([`index_value_to_json`]): numbers as JSON numbers, timestamps as RFC 3339
//! UTC strings, bytes as standard padded base64 strings.

use base64::Engine as _;
use serde_json::{Number, Value};

use crate::error::{Error, Result};

pub use meta::index::projection::{IndexFields, BUILTIN_FIELDS, MAX_CUSTOM_FIELDS};
pub use meta::index::{FieldId, IndexValue, Timestamp};

/// Largest body [`crate::client::PutOptions::index_json`] parses (16 MiB); larger bodies are refused
/// with [`Error::InvalidArgument`] before anything is uploaded.
pub const MAX_INDEX_JSON_BYTES: usize = 16 * 1024 * 1024;

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// The bare message of an [`Error::InvalidArgument`] (other errors as displayed), for wrapping
/// into a more specific one.
fn reason(e: Error) -> String {
    match e {
        Error::InvalidArgument(msg) => msg,
        other => other.to_string(),
    }
}

/// Validates a field id. Errors: [`Error::InvalidArgument`] naming the rule.
pub fn field_id(name: &str) -> Result<FieldId> {
    FieldId::new(name).map_err(|e| invalid(format!("index field `{name}`: {e}")))
}

/// The typed value of a JSON scalar: `null`, `true`/`false`, integer literals as `Int` (or `UInt`
/// above `i64::MAX`), other numbers as `Float`, strings as `String`. `Ok(None)` for arrays and
/// objects.
///
/// Numbers are taken exactly or not at all (docs/workbench.md, "Numbers"): an integer beyond 64 bits,
/// a decimal that an `f64` would round (`0.1000000000000000000001`) or a value beyond the `f64`
/// range is [`Error::InvalidArgument`] naming the number — an index never stores a rounded
/// value (see [`crate::json::numbers::exact_index_number`]).
pub fn json_scalar_to_index_value(value: &Value) -> Result<Option<IndexValue>> {
    Ok(Some(match value {
        Value::Null => IndexValue::Null,
        Value::Bool(b) => IndexValue::Bool(*b),
        Value::Number(n) => crate::json::numbers::exact_index_number(n).map_err(invalid)?,
        Value::String(s) => IndexValue::String(s.clone()),
        Value::Array(_) | Value::Object(_) => return Ok(None),
    }))
}

/// [`json_scalar_to_index_value`] without the reason: `None` for arrays, objects and numbers an
/// index cannot hold exactly.
pub fn json_to_index_value(value: &Value) -> Option<IndexValue> {
    json_scalar_to_index_value(value).ok().flatten()
}

/// The JSON presentation of an index value (see the module docs).
pub fn index_value_to_json(value: &IndexValue) -> Value {
    match value {
        IndexValue::Null => Value::Null,
        IndexValue::Bool(b) => Value::Bool(*b),
        IndexValue::Int(i) => Value::from(*i),
        IndexValue::UInt(u) => Value::from(*u),
        IndexValue::Float(f) => Number::from_f64(f.get()).map_or(Value::Null, Value::Number),
        IndexValue::Timestamp(t) => Value::String(t.to_rfc3339()),
        IndexValue::String(s) => Value::String(s.clone()),
        IndexValue::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
    }
}

/// Parses one CLI `--field` argument: `name=value` or `name:type=value`.
///
/// Types: `int` (i64; a larger non-negative integer becomes u64), `uint`, `float` (finite),
/// `bool` (`true`/`false`), `ts` (RFC 3339, e.g. `2024-05-01T12:00:00Z`), `str` (the raw text).
/// Without a type the value is parsed as JSON when it is a JSON scalar (`count=123` → integer,
/// `ok=true` → bool, `x=null` → null, `name="123"` → the string `123`) and taken as a plain
/// string otherwise (`species=Gentoo`); a JSON array or object is refused.
///
/// Errors: [`Error::InvalidArgument`]: no `=`, an invalid field id, an unknown type, or a value
/// that does not parse as its type.
pub fn parse_field_arg(spec: &str) -> Result<(FieldId, IndexValue)> {
    let (lhs, raw) = spec.split_once('=').ok_or_else(|| {
        invalid(format!(
            "--field `{spec}`: expected name=value or name:type=value"
        ))
    })?;
    let (name, ty) = match lhs.split_once(':') {
        Some((n, t)) => (n, Some(t)),
        None => (lhs, None),
    };
    let id = field_id(name)?;
    let bad = |what: &str| invalid(format!("--field `{spec}`: `{raw}` is not {what}"));
    let value = match ty {
        Some("int") => match raw.parse::<i64>() {
            Ok(i) => IndexValue::Int(i),
            Err(_) => IndexValue::UInt(raw.parse::<u64>().map_err(|_| bad("an integer"))?),
        },
        Some("uint") => {
            IndexValue::UInt(raw.parse::<u64>().map_err(|_| bad("an unsigned integer"))?)
        }
        Some("float") => {
            let n = raw
                .strip_prefix('+')
                .unwrap_or(raw)
                .parse::<Number>()
                .map_err(|_| bad("a number"))?;
            let f = crate::json::numbers::exact_f64(&n).ok_or_else(|| {
                bad("a number that 64-bit floating point holds exactly (it would be rounded)")
            })?;
            IndexValue::float(f).map_err(|_| bad("a finite number"))?
        }
        Some("bool") => match raw {
            "true" => IndexValue::Bool(true),
            "false" => IndexValue::Bool(false),
            _ => return Err(bad("true or false")),
        },
        Some("ts") => IndexValue::Timestamp(
            Timestamp::parse_rfc3339(raw).ok_or_else(|| bad("an RFC 3339 timestamp"))?,
        ),
        Some("str") => IndexValue::String(raw.to_owned()),
        Some(other) => {
            return Err(invalid(format!(
                "--field `{spec}`: unknown type `{other}`; use int, uint, float, bool, ts or str"
            )))
        }
        None => match serde_json::from_str::<Value>(raw) {
            Ok(v @ (Value::Array(_) | Value::Object(_))) => {
                return Err(invalid(format!(
                    "--field `{spec}`: index fields are scalars, not {}",
                    if v.is_array() { "arrays" } else { "objects" }
                )))
            }
            Ok(v) => json_scalar_to_index_value(&v)
                .map_err(|e| invalid(format!("--field `{spec}`: {}", reason(e))))?
                .ok_or_else(|| bad("a scalar"))?,
            Err(_) => IndexValue::String(raw.to_owned()),
        },
    };
    Ok((id, value))
}

/// The custom fields `index_json` projects from a JSON body: every **top-level** member whose
/// value is a scalar (null, bool, number, string), typed as by [`json_to_index_value`]. Nested
/// objects and arrays are skipped. Member names must be valid field ids and not built-in names;
/// the usual limits apply (≤64 fields, strings ≤4096 bytes).
///
/// Errors: [`Error::InvalidArgument`] when the body is not a JSON object, a projected member's
/// name is not a valid field id or is built in, a member's number cannot be held exactly
/// (see [`json_scalar_to_index_value`]; nothing is rounded), or the limits are exceeded.
pub fn json_object_fields(body: &[u8]) -> Result<IndexFields> {
    let parsed: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(format!("index_json: the body is not valid JSON ({e})")))?;
    let Value::Object(members) = parsed else {
        return Err(invalid("index_json: the body must be a JSON object"));
    };
    let mut out = IndexFields::new();
    for (name, value) in &members {
        let Some(v) = json_scalar_to_index_value(value)
            .map_err(|e| invalid(format!("index_json: member `{name}`: {}", reason(e))))?
        else {
            continue;
        };
        let id = field_id(name).map_err(|e| invalid(format!("index_json: {e}")))?;
        out.insert(id, v);
    }
    meta::index::projection::validate_index_fields(&out)
        .map_err(|e| invalid(format!("index_json: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(spec: &str) -> IndexValue {
        parse_field_arg(spec).unwrap().1
    }

    #[test]
    fn field_args_are_typed_by_suffix_or_json() {
        assert_eq!(parsed("count:int=123"), IndexValue::Int(123));
        assert_eq!(
            parsed("big:int=18446744073709551615"),
            IndexValue::UInt(u64::MAX)
        );
        assert_eq!(parsed("n:uint=7"), IndexValue::UInt(7));
        assert_eq!(parsed("acc:float=0.5"), IndexValue::float(0.5).unwrap());
        assert_eq!(parsed("ok:bool=true"), IndexValue::Bool(true));
        assert_eq!(
            parsed("at:ts=2024-05-01T12:00:00Z"),
            IndexValue::Timestamp(Timestamp::new(1_714_564_800, 0).unwrap())
        );
        assert_eq!(parsed("id:str=123"), IndexValue::String("123".into()));
        assert_eq!(parsed("count=123"), IndexValue::Int(123));
        assert_eq!(parsed("mass=4076.5"), IndexValue::float(4076.5).unwrap());
        assert_eq!(parsed("ok=false"), IndexValue::Bool(false));
        assert_eq!(parsed("x=null"), IndexValue::Null);
        assert_eq!(parsed(r#"name="123""#), IndexValue::String("123".into()));
        assert_eq!(
            parsed("species=Gentoo"),
            IndexValue::String("Gentoo".into())
        );
        assert_eq!(parsed("eq=a=b"), IndexValue::String("a=b".into()));
        assert_eq!(parsed("empty="), IndexValue::String(String::new()));
        for bad in [
            "noequals",
            "bad name=1",
            "x:int=1.5",
            "x:float=nan",
            "x:bool=yes",
            "x:ts=yesterday",
            "x:weird=1",
            "x=[1,2]",
            r#"x={"a":1}"#,
        ] {
            assert!(
                matches!(parse_field_arg(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn index_json_projects_top_level_scalars_only() {
        let body = br#"{"species":"Gentoo","count":123,"mean_body_mass_g":5076.02,
            "ok":true,"none":null,"nested":{"a":1},"list":[1,2]}"#;
        let f = json_object_fields(body).unwrap();
        let names: Vec<&str> = f.keys().map(FieldId::as_str).collect();
        assert_eq!(
            names,
            ["count", "mean_body_mass_g", "none", "ok", "species"]
        );
        assert_eq!(f[&field_id("count").unwrap()], IndexValue::Int(123));
        for bad in [
            &b"[1,2]"[..],
            b"not json",
            br#"{"bad name":1}"#,
            br#"{"generation":1}"#,
        ] {
            assert!(
                json_object_fields(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // A nested member with an invalid name is skipped, not refused.
        assert!(json_object_fields(br#"{"bad name":{"x":1},"a":1}"#).is_ok());
    }

    #[test]
    fn numbers_an_index_cannot_hold_exactly_are_refused_never_rounded() {
        for body in [
            &br#"{"big":12345678901234567890123}"#[..],
            br#"{"neg_big":-99999999999999999999}"#,
            br#"{"long":0.1000000000000000000001}"#,
            br#"{"huge":1e400}"#,
        ] {
            let e = json_object_fields(body).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        let f = json_object_fields(br#"{"x":1.50,"y":2e3}"#).unwrap();
        assert_eq!(f[&field_id("x").unwrap()], IndexValue::float(1.5).unwrap());
        assert_eq!(
            f[&field_id("y").unwrap()],
            IndexValue::float(2000.0).unwrap()
        );
        for bad in [
            "x=12345678901234567890123",
            "x:float=0.1000000000000000000001",
        ] {
            assert!(
                matches!(parse_field_arg(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn json_presentation_round_trips_scalars() {
        for v in [
            serde_json::json!(null),
            serde_json::json!(true),
            serde_json::json!(-5),
            serde_json::json!(u64::MAX),
            serde_json::json!(2.5),
            serde_json::json!("x"),
        ] {
            assert_eq!(index_value_to_json(&json_to_index_value(&v).unwrap()), v);
        }
        assert_eq!(
            index_value_to_json(&IndexValue::Timestamp(Timestamp::new(0, 0).unwrap())),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(index_value_to_json(&IndexValue::Bytes(vec![0, 1])), "AAE=");
    }
}
