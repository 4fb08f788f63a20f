//! [`Workbench`], the facade over one [`Client`]: the client and the key that makes its
//! cursors tamper-evident. The tools take it by name; `dispatch.rs` routes a call to them.

use super::cursor;
use crate::client::Client;

/// The facade over one [`Client`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Workbench {
    client: Client,
    cursor_key: cursor::CursorKey,
}

impl Workbench {
    /// Wraps a client.
    pub fn new(client: Client) -> Self {
        // Cursors are tamper-evident, bound to this store: the MAC key is derived from the root
        // id, which never leaves the store (no storage ids appear in results).
        let key = cursor::scope_digest(&[
            b"nokv.workbench.cursor_key.v1",
            client.meta().root_id().as_bytes(),
        ]);
        Self {
            client,
            cursor_key: cursor::CursorKey::new(key),
        }
    }

    /// The client behind the facade.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn cursor_key(&self) -> &cursor::CursorKey {
        &self.cursor_key
    }
}
