//! Artifact publication: create, replace and append as one metadata command.
//!
//! One command (docs/metadata-format.md, "Artifact Revisions And Strong References", "Upload And Append"):
//! - predicates: WorkspaceCurrent Equals the bytes read (same incarnation, `Visible`);
//!   PathCurrent Absent / Equals the bytes read, per [`PathCondition`]; the new ArtifactRevision
//!   Absent (revision ids are never reused); every dependency owner's ArtifactRevision Equals the
//!   bytes read (it must be `Available`); the replaced revision's row Equals the bytes read;
//! - mutations: the new ArtifactRevision (`Available`, strong_reference_count 1, reference_epoch
//!   1, manifest digest, dependency count/digest), its ArtifactManifest rows, RevisionRef(Path)
//!   for it, one RevisionRef(RevisionDependency, child = new revision) per distinct physical
//!   owner with that owner's count +1 / epoch +1, PathCurrent (generation = commit version =
//!   read_version + 1, created_version kept across replacements), WorkspaceCurrent
//!   workspace_revision +1 / modified_version; when a path existed: its RevisionRef(Path) is
//!   deleted and the old revision's count −1 / epoch +1 (at zero: last_zero_ref_version = commit
//!   version and a GcCandidate keyed by the new epoch); a ChangeEvent; CommandDedupe;
//! - index projection (see [`crate::command::projection`]): the SecondaryIndex rows of the new
//!   PathEntry (built-in fields plus the request's `index_fields`, which PathCurrent also stores
//!   in `index_projection`) are put and the replaced entry's rows whose keys changed are
//!   deleted, in this same command — there is no second index mutation path;
//! - namespace rule (docs/workbench.md, "Files and directories": a path is a file or an implicit
//!   directory, never both), checked by [`namespace_check`] whenever the command creates the
//!   path: every proper prefix of the path must be absent (one PathCurrent point read each,
//!   re-asserted as `Absent` predicates) and the path must have no descendants (one limit-1 scan
//!   of its subtree prefix). The scan has no predicate form; the command's read-version fence
//!   (commit version = read version + 1, see [`crate::command::executor`]) guarantees that no row
//!   entered the subtree between the probe and the commit, so two racing writers of `d` and
//!   `d/x` cannot both succeed. Replacing or appending to an existing file skips the check: the
//!   file's position was checked when it was created. This is the one bounded prefix probe of an
//!   ordinary publication (docs/metadata-format.md otherwise asks for point reads only).

mod command;
mod invariants;
mod request;

pub use command::*;
pub(crate) use invariants::*;
pub use request::*;

pub mod operation;

#[cfg(test)]
mod namespace_tests;
