//! [`Workbench`], the facade over one [`Client`]: the client and the key that makes its
//! cursors tamper-evident. The tools take it by name; `dispatch.rs` routes a call to them.

use std::sync::Arc;

use super::cursor;
use crate::client::Client;

/// Which workbench ids a restricted facade may show ([`Workbench::restricted`]).
pub type Visibility = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The facade over one [`Client`]. Cheap to clone.
#[derive(Clone)]
pub struct Workbench {
    client: Client,
    cursor_key: cursor::CursorKey,
    visible: Option<Visibility>,
}

impl std::fmt::Debug for Workbench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workbench")
            .field("client", &self.client)
            .field("restricted", &self.visible.is_some())
            .finish()
    }
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
            visible: None,
        }
    }

    /// The same facade, restricted to the workbenches `visible` accepts in the one tool that
    /// walks workbenches itself, `workbench_find` (docs/server.md, "Scopes"): a hidden
    /// workbench is skipped before it is examined, so it counts in neither `match_count` nor
    /// `entry_count`, and a cursor never names it. Every other tool is unchanged (the server
    /// checks them against the caller's scopes before they run).
    pub fn restricted(&self, visible: Visibility) -> Workbench {
        Workbench {
            visible: Some(visible),
            ..self.clone()
        }
    }

    /// Whether workbench `id` may be shown (always, unless [`Workbench::restricted`]).
    pub(crate) fn may_see(&self, id: &str) -> bool {
        self.visible.as_ref().is_none_or(|v| v(id))
    }

    /// Whether the facade hides some workbenches ([`Workbench::restricted`]).
    pub(crate) fn is_restricted(&self) -> bool {
        self.visible.is_some()
    }

    /// The client behind the facade.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn cursor_key(&self) -> &cursor::CursorKey {
        &self.cursor_key
    }
}
