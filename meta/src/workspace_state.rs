//! The workspace visibility state, declared below the error type that names it
//! ([`crate::Error::WorkspaceUnavailable`]); its durable codec is in
//! [`crate::codec::workspace_current`] (docs/metadata-format.md, "WorkspaceCurrent").

/// Workspace visibility state (discriminants: docs/metadata-format.md, "WorkspaceCurrent").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkspaceState {
    /// Restore staging: invisible.
    Staging = 1,
    /// Published: terminal with respect to visibility.
    Visible = 2,
    /// Failed staging incarnation.
    Retired = 3,
    /// A `Visible` workbench whose expiry deadline passed, as recorded by the first writer that
    /// observed it (docs/metadata-format.md, "Workbench Expiry"): invisible, terminal, its name
    /// never reused.
    Expired = 4,
}
