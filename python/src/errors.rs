//! Workbench errors as Python exceptions.
//!
//! Every failure reaches Python as an instance of the class in `nokv.errors` named after its
//! Workbench error code (docs/workbench.md, "Error codes"): `nokv.errors.NotFound`,
//! `nokv.errors.Conflict`, … — all subclasses of `nokv.NoKVError` carrying `.code`, `.message`,
//! `.retryable` and `.details`. SDK errors are first mapped to a code by the facade's own mapping
//! (`nokv::workbench::tool_error` / `commit_error`), so the Python SDK, the CLI and the tools
//! report one failure with one code.

use nokv::workbench::errors::{ErrorCode, ToolError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule, PyTuple};
use serde_json::Value;

/// Adds the Workbench error codes to the native module, so `nokv.errors` derives its mapping
/// from the Rust list instead of restating it: `ERROR_CODES`, the string of every code of
/// [`ErrorCode::ALL`] in its order, and `RETRYABLE_ERROR_CODES`, those of them a caller may retry
/// unchanged ([`ErrorCode::retryable`]).
pub fn add_codes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let codes = ErrorCode::ALL.map(ErrorCode::as_str);
    m.add("ERROR_CODES", PyTuple::new(m.py(), codes)?)?;
    let retryable: Vec<&str> = ErrorCode::ALL
        .into_iter()
        .filter(|code| code.retryable())
        .map(ErrorCode::as_str)
        .collect();
    m.add("RETRYABLE_ERROR_CODES", PyTuple::new(m.py(), retryable)?)?;
    Ok(())
}

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS_MODULE
        .get_or_try_init(py, || Ok(py.import("nokv.errors")?.unbind()))
        .map(|m| m.bind(py))
}

/// The Python exception for a tool error: `nokv.errors.<code>(message, code=…, retryable=…,
/// details=…)`. If the Python side cannot build it (the package is damaged), a `RuntimeError`
/// naming the code and message is returned instead.
pub fn to_pyerr(py: Python<'_>, err: &ToolError) -> PyErr {
    match build(py, err) {
        Ok(e) => e,
        Err(e) => pyo3::exceptions::PyRuntimeError::new_err(format!(
            "{}: {} (the nokv.errors module failed: {e})",
            err.code.as_str(),
            err.message
        )),
    }
}

fn build(py: Python<'_>, err: &ToolError) -> PyResult<PyErr> {
    let module = errors_module(py)?;
    let class = module
        .getattr(err.code.as_str())
        .or_else(|_| module.getattr("NoKVError"))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("code", err.code.as_str())?;
    kwargs.set_item("retryable", err.retryable())?;
    kwargs.set_item(
        "details",
        crate::convert::to_py(py, &Value::Object(err.details.clone()), None)?,
    )?;
    let exc = class.call((err.message.as_str(),), Some(&kwargs))?;
    Ok(PyErr::from_value(exc))
}

/// `InvalidArguments` with `message`.
pub fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_pyerr(py, &ToolError::invalid_arguments(message))
}

/// `InvalidState`: the store was closed.
pub fn closed(py: Python<'_>) -> PyErr {
    to_pyerr(
        py,
        &ToolError::new(
            ErrorCode::InvalidState,
            "the store is closed; open it again with nokv.open()",
        ),
    )
}

/// Maps an SDK error concerning `workbench_id` through the facade's mapping (snapshot codes
/// first, then the shared one).
pub fn sdk(py: Python<'_>, client: &nokv::Client, workbench_id: &str, err: nokv::Error) -> PyErr {
    to_pyerr(
        py,
        &nokv::workbench::snapshot_error(client, workbench_id, err),
    )
}

/// Maps an SDK error of the commit/tag path through the facade's commit mapping.
pub fn commit(
    py: Python<'_>,
    client: &nokv::Client,
    workbench_id: &str,
    err: nokv::Error,
) -> PyErr {
    to_pyerr(
        py,
        &nokv::workbench::commit_error(client, workbench_id, err),
    )
}

/// Maps an error about the store as a whole (opening it, its configuration).
pub fn store(py: Python<'_>, err: nokv::Error) -> PyErr {
    let tool = match err {
        nokv::Error::StoreConfig { reason } => ToolError::new(
            ErrorCode::InvalidArguments,
            format!("store configuration: {reason}"),
        ),
        nokv::Error::NamespaceMismatch { reason } => ToolError::new(
            ErrorCode::InvalidState,
            format!("object namespace mismatch: {reason}"),
        ),
        other => nokv::workbench::store_error(other),
    };
    to_pyerr(py, &tool)
}

/// The exception of an error envelope `{"status": "error", "code", "message", "retryable",
/// "details"}` (a tool error answered by a server, or the CLI's output of a command run there),
/// built by `nokv.errors.from_envelope`: the class of its code, `.details` kept whole.
pub fn from_envelope(py: Python<'_>, envelope: &Value) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let env = crate::convert::to_py(py, envelope, None)?;
        let exc = errors_module(py)?.call_method1("from_envelope", (env,))?;
        Ok(PyErr::from_value(exc))
    })();
    built.unwrap_or_else(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!(
            "{envelope} (the nokv.errors module failed: {e})"
        ))
    })
}

/// `Unsupported`: `operation` is not offered by a connected store (`details.backend:
/// "remote"`, `details.operation`).
pub fn unsupported(py: Python<'_>, operation: &str, why: &str) -> PyErr {
    from_envelope(
        py,
        &serde_json::json!({
            "status": "error",
            "code": "Unsupported",
            "message": format!("{operation} is not available on a connected store: {why}"),
            "retryable": false,
            "details": {"backend": "remote", "operation": operation},
        }),
    )
}

/// Maps an error of the remote client ([`nokv_remote::RemoteClient`]): an operation error keeps
/// its Workbench code; a connection failure is `Unavailable` (retryable, `details.url` and
/// `details.reason`); a refusal of the server keeps the server's code and retryability
/// (`Unauthorized`, `Timeout`, …; the server's `details` plus `details.http_status`); anything
/// else maps like an embedded SDK error of the same kind.
pub fn remote(py: Python<'_>, err: nokv::Error) -> PyErr {
    from_envelope(py, &remote_envelope(err))
}

/// The error envelope of a remote client error (see [`remote`]): what `store.tool(…)` returns
/// when the call did not reach a tool ([`nokv_remote::error_envelope`]).
pub fn remote_envelope(err: nokv::Error) -> Value {
    nokv_remote::error_envelope(err)
}
