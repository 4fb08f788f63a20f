//! Workbench errors as Python exceptions.
//!
//! Every failure reaches Python as an instance of the class in `nokv.errors` named after its
//! Workbench error code (WORKBENCH.md, "Error codes"): `nokv.errors.NotFound`,
//! `nokv.errors.Conflict`, … — all subclasses of `nokv.NoKVError` carrying `.code`, `.message`,
//! `.retryable` and `.details`. SDK errors are first mapped to a code by the facade's own mapping
//! (`nokv::workbench::tool_error` / `commit_error`), so the Python SDK, the CLI and the tools
//! report one failure with one code.

use nokv::workbench::errors::{ErrorCode, ToolError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};
use serde_json::Value;

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
