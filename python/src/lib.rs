//! `nokv._nokv` — the CPython extension module of NoKV's Python SDK.
//!
//! The Python package `nokv` (in `python/nokv/`) is the public surface; this module holds its
//! native half: [`core::Core`] wraps one open store (`backend.rs`) — an embedded one in-process
//! (the Rust SDK `nokv::Client` and the Workbench facade, `nokv.open`) or a running `nokv serve`
//! reached through the Rust remote client `nokv_remote::RemoteClient` (`nokv.connect`) — with
//! the GIL released around every storage, object and network I/O call.
//! Built as an abi3 wheel for CPython ≥ 3.9 by maturin (`pip install ./python`).

mod backend;
mod convert;
mod core;
mod errors;
mod io;
mod types;

use pyo3::prelude::*;

/// The native module `nokv._nokv`.
#[pymodule]
fn _nokv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<core::Core>()?;
    m.add_class::<core::ChangeIter>()?;
    m.add_class::<io::RangeReader>()?;
    m.add_class::<types::Stat>()?;
    m.add_class::<types::PutResult>()?;
    m.add_class::<types::AppendResult>()?;
    m.add_class::<types::Change>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::add_codes(m)?;
    Ok(())
}
