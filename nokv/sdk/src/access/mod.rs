//! Who may do what (docs/server.md, "Scopes"): the scope model ([`scope`]), what each tool
//! needs ([`tool_access`]), token secrets ([`token`]), the store's token registry
//! ([`registry`]) and its audit trail ([`audit`]). The front doors check a caller's [`ScopeSet`] here before a call
//! runs; nothing below this module knows about callers.

pub mod audit;
pub mod registry;
pub mod scope;
pub mod token;
pub mod tool_access;

pub use audit::{AuditCounters, AuditEntry, AuditFilter, AuditLog, AuditRecord};
pub use registry::{
    AccessError, AuthFailure, Caller, CreatedToken, Lookup, TokenRecord, TokenRegistry,
};
pub use scope::{glob_matches, Action, Resource, Scope, ScopeError, ScopeSet, Target};
pub use tool_access::{check_tool, forbidden, is_reading_tool, tool_action, tool_needs, ToolNeeds};
