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
}
