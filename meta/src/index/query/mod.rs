//! The typed query executor over SecondaryIndex (docs/design.md, "Discovery And Provenance"; docs/metadata-format.md,
//! "SecondaryIndex", "Namespace And Workspace Visibility"): search with predicates, projection,
//! sort, facets and bounded pages, at ONE read version.
//!
//! # Plan
//!
//! Every predicate that can drive an ordered index scan becomes a *candidate source*: a sorted,
//! non-overlapping list of key ranges over one field's rows (`root | field | encoded value |
//! incarnation | ordered path`):
//!
//! | predicate | key ranges | rank |
//! |---|---|---|
//! | `eq v`, `in [v…]` | one exact range per value *variant* (`Int(5)`, `UInt(5)`, `Float(5.0)` are one number); with an `id` scope the range also fixes the incarnation and the path prefix | 0 |
//! | `prefix s` | the string encodings starting with `s` | 1 |
//! | `gt gte lt lte` | one range inside the operand's typed domain, bounded by the value codec's `order_prefix`; single-operand range predicates on one field and domain are intersected into ONE ordered scan | 2 |
//! | `exists` | every row of the field | 3 |
//!
//! `ne`, `not_exists`, `suffix` and `contains` cannot bound a scan; they are evaluated per row.
//! Without any candidate source the query scans PathCurrent of the workbench in scope (or of every
//! visible workbench for a root-wide query) under the section/path prefix. With several candidates
//! the executor *probes* each (it counts at most [`PROBE_ROWS`] keys of its ranges; the
//! workbench scan of an `id` scope competes too) and scans the one with the fewest rows, ties going
//! to the better rank. No predicate ever reads an object body.
//!
//! # Row check
//!
//! Every candidate row is rechecked at the same read version: the row's incarnation must be the
//! *visible* incarnation of its workbench (WorkspaceIncarnationClaim names the workbench,
//! WorkspaceCurrent must be `Visible` with that incarnation — two point reads, cached per
//! incarnation for the query, so staging or retired incarnations never appear), the path must lie
//! in the scope, the PathCurrent entry is point-read (one read per candidate: it carries every
//! field, so all predicates, sort keys, facets and projections are evaluated from it) and its
//! generation must equal the row's `path_generation`. Work is therefore proportional to the rows
//! of the chosen source, not to the artifacts in scope, and bounded by
//! [`QueryLimits::max_rows_examined`] ([`Error::ResourceExhausted`] beyond).
//!
//! # Semantics
//!
//! - A predicate's operands are *alternatives*: `eq`/`in` match a value equal to any operand;
//!   `ne` matches a present value equal to none; a range matches a present value of the same
//!   typed domain as some operand comparing as required (`gt 4000` never matches a string);
//!   `prefix`/`suffix`/`contains` match present string values (case-sensitive, by bytes).
//!   Missing fields match only `not_exists`.
//! - Numbers form one domain compared by exact value (see [`crate::index::value_codec`]).
//! - Results are ordered by the sort keys (rows lacking a sort field come after the rows that
//!   have it, in either direction), then by workbench id and path ascending — independent of the
//!   plan.
//! - `match_count` and facets cover every match, not just the page.
//!
//! # Continuations
//!
//! A page's [`Resume`] carries the read version it was produced at and the offset of the next
//! row. It continues only while the data in scope is unchanged since that version: for an `id`
//! scope the workbench's `modified_version` must not exceed it, root-wide no ChangeEvent may
//! exist after it (one limit-1 probe). Otherwise [`Error::ReadFenceChanged`]. With the data
//! unchanged, the row sequence at the current version is identical to the one at the cursor's
//! version, so pages never duplicate or skip a row. (Frozen continuation at an older version
//! needs a snapshot's history hold; [`search_at`] runs a query at an explicit retained version.)

mod engine;
mod ranges;
mod row;
mod search;
mod types;
mod validate;

pub(crate) use engine::*;
pub(crate) use row::*;
pub use search::*;
pub use types::*;
pub(crate) use validate::*;

#[cfg(test)]
mod tests;
