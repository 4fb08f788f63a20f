//! The store behind a `Core` and the objects derived from it: an embedded store (the Rust SDK
//! and the Workbench facade, `nokv.open`) or a running `nokv serve` (the Rust remote client,
//! `nokv.connect`), and the shared, closable handle on it.

use std::sync::Arc;

use nokv::{Client, Store};
use nokv_remote::RemoteClient;
use parking_lot::RwLock;
use pyo3::prelude::*;

use crate::errors;

/// The open store shared by a `Core` and every object derived from it (file readers, change
/// iterators); `None` once closed.
pub struct Shared {
    inner: RwLock<Option<Arc<Inner>>>,
}

/// Where a `Core`'s calls go: the one switch between an embedded store (`nokv.open`) and a
/// `nokv serve` server (`nokv.connect`). Every `Core` method matches on it once; the Python
/// classes above it have one implementation of each operation.
pub enum Inner {
    /// The store opened in this process.
    Embedded(Embedded),
    /// A running `nokv serve`, reached through the Rust remote client.
    Remote(Remote),
}

/// The embedded store: the SDK client and the facade over it.
pub struct Embedded {
    /// The Rust SDK.
    pub client: Client,
    /// The Workbench facade (the 18 tools).
    pub facade: nokv::workbench::Workbench,
}

/// A connected store: the remote client and the server's presentation root.
pub struct Remote {
    /// The Rust SDK's remote client.
    pub client: RemoteClient,
    /// The server store's presentation root (e.g. `/agents/local/wb`), read at connect.
    pub root: String,
}

impl Inner {
    /// The store behind either client, for the operations both have.
    pub fn store(&self) -> &dyn Store {
        match self {
            Inner::Embedded(e) => &e.client,
            Inner::Remote(r) => &r.client,
        }
    }

    /// The presentation path of a workbench, `{root}/{workbench_id}`.
    pub fn workbench_path(&self, workbench_id: &str) -> String {
        match self {
            Inner::Embedded(e) => e.client.workbench_path(workbench_id),
            Inner::Remote(r) => format!("{}/{workbench_id}", r.root),
        }
    }

    /// The embedded store, or `Unsupported` naming `operation` on a connected one.
    pub fn embedded(&self, py: Python<'_>, operation: &str, why: &str) -> PyResult<&Embedded> {
        match self {
            Inner::Embedded(e) => Ok(e),
            Inner::Remote(_) => Err(errors::unsupported(py, operation, why)),
        }
    }
}

impl Shared {
    /// A handle on a freshly opened store.
    pub fn new(inner: Inner) -> Shared {
        Shared {
            inner: RwLock::new(Some(Arc::new(inner))),
        }
    }

    /// Takes the store away from new calls (`close()`); `None` when already closed.
    pub fn take(&self) -> Option<Arc<Inner>> {
        self.inner.write().take()
    }

    /// True once the store was taken away.
    pub fn is_closed(&self) -> bool {
        self.inner.read().is_none()
    }

    /// The open store, or `InvalidState` once closed.
    pub fn get(&self, py: Python<'_>) -> PyResult<Arc<Inner>> {
        self.inner.read().clone().ok_or_else(|| errors::closed(py))
    }
}
