//! JSON ↔ Python conversion (one implementation for every method and `Store.tool`).
//!
//! JSON → Python: `null` → `None`, booleans → `bool`, strings → `str`, arrays → `list`, objects →
//! `dict` (member order kept), integers of any size → `int` (exact, also above 64 bits when
//! `serde_json`'s `arbitrary_precision` is enabled), other numbers → `float` — or, when the caller
//! passes `parse_float`, the result of `parse_float(text)` on the number's JSON text (e.g.
//! `decimal.Decimal` for exact decimals, as with `json.loads`).
//!
//! Python → JSON: `None`, `bool`, `int` (any size that JSON can carry exactly: ±2^64 without
//! `arbitrary_precision`, any size with it), finite `float`, `decimal.Decimal` (finite), `str`,
//! `list`/`tuple`, `dict` with `str` keys. Anything else, non-finite numbers and nesting deeper than
//! [`MAX_DEPTH`] are refused with a message naming the offending value's type.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deepest nesting converted in either direction (guards the recursion on hostile input).
pub const MAX_DEPTH: usize = 256;

/// Converts a JSON value to a Python object (see the module docs).
///
/// Errors: a Python exception raised by `parse_float`; `ValueError` for nesting deeper than
/// [`MAX_DEPTH`].
pub fn to_py<'py>(
    py: Python<'py>,
    value: &Value,
    parse_float: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    to_py_at(py, value, parse_float, 0)
}

fn to_py_at<'py>(
    py: Python<'py>,
    value: &Value,
    parse_float: Option<&Bound<'py, PyAny>>,
    depth: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if depth > MAX_DEPTH {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "JSON nesting is deeper than 256 levels",
        ));
    }
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Number(n) => number_to_py(py, n, parse_float)?,
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py_at(py, item, parse_float, depth + 1)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py_at(py, v, parse_float, depth + 1)?)?;
            }
            dict.into_any()
        }
    })
}

/// True when `text` is a JSON integer literal (no fraction, no exponent).
fn is_integer_literal(text: &str) -> bool {
    !text.is_empty() && !text.contains(['.', 'e', 'E'])
}

fn number_to_py<'py>(
    py: Python<'py>,
    n: &Number,
    parse_float: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    if let Some(u) = n.as_u64() {
        return Ok(u.into_pyobject(py)?.into_any());
    }
    // Either a decimal, or (with `arbitrary_precision`) an integer beyond 64 bits: the number's
    // own text is exact in both configurations.
    let text = n.to_string();
    if is_integer_literal(&text) {
        return py.get_type::<PyInt>().call1((text,));
    }
    if let Some(parse) = parse_float {
        return parse.call1((text,));
    }
    let f = n
        .as_f64()
        .or_else(|| text.parse::<f64>().ok())
        .ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!("number {text} is not representable"))
        })?;
    Ok(PyFloat::new(py, f).into_any())
}

/// Converts a Python object to JSON (see the module docs). The error is a human message naming
/// what could not be converted (callers wrap it as `InvalidArguments`).
pub fn from_py(obj: &Bound<'_, PyAny>) -> Result<Value, String> {
    from_py_at(obj, 0)
}

fn from_py_at(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err("the value is nested deeper than 256 levels (or contains itself)".into());
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(v) = i.extract::<i64>() {
            return Ok(Value::from(v));
        }
        if let Ok(v) = i.extract::<u64>() {
            return Ok(Value::from(v));
        }
        let text = i.str().map_err(|e| e.to_string())?.to_string();
        return exact_number(&text).ok_or_else(|| {
            format!("integer {text} does not fit in a JSON number of this build (at most 64 bits)")
        });
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let v = f.value();
        return Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| format!("float {v} is not finite; JSON has no NaN or infinity"));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(
            s.to_cow().map_err(|e| e.to_string())?.into_owned(),
        ));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| {
                    format!(
                        "object keys must be str, not {}",
                        type_name(&k).unwrap_or_default()
                    )
                })?
                .to_cow()
                .map_err(|e| e.to_string())?
                .into_owned();
            map.insert(key, from_py_at(&v, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        let mut out = Vec::with_capacity(l.len());
        for item in l.iter() {
            out.push(from_py_at(&item, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        let mut out = Vec::with_capacity(t.len());
        for item in t.iter() {
            out.push(from_py_at(&item, depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    let kind = type_name(obj).unwrap_or_default();
    if kind == "Decimal" {
        let text = obj.str().map_err(|e| e.to_string())?.to_string();
        return serde_json::from_str::<Number>(&text)
            .map(Value::Number)
            .map_err(|_| format!("Decimal {text} is not a finite JSON number"));
    }
    Err(format!("a value of type {kind} is not JSON-serializable"))
}

/// An integer literal as an exact JSON number, or `None` when this build's `serde_json` would
/// round it (without `arbitrary_precision` integers beyond 64 bits become floats).
fn exact_number(text: &str) -> Option<Value> {
    let n: Number = serde_json::from_str(text).ok()?;
    (n.to_string() == text).then_some(Value::Number(n))
}

fn type_name(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(obj.get_type().name()?.to_string())
}
