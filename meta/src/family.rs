//! The metadata keyspaces: every shard-local family and reserved engine tree with its holt tree
//! name, tag and versioned flag (docs/metadata-format.md, "Shard-Local Families"). The schema gate
//! ([`crate::schema`]) checks a store against this registry.

/// One metadata keyspace: a metadata family or a reserved engine tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// `root_fence`, 0x01.
    RootFence,
    /// `workspace_current`, 0x02.
    WorkspaceCurrent,
    /// `path_current`, 0x03.
    PathCurrent,
    /// `artifact_revision`, 0x04.
    ArtifactRevision,
    /// `artifact_manifest`, 0x05.
    ArtifactManifest,
    /// `revision_ref`, 0x06.
    RevisionRef,
    /// `commit`, 0x07.
    Commit,
    /// `commit_member`, 0x08.
    CommitMember,
    /// `workbench_commit_head`, 0x09.
    WorkbenchCommitHead,
    /// `tag`, 0x0a.
    Tag,
    /// `snapshot_ref`, 0x0b.
    SnapshotRef,
    /// `snapshot_alias`, 0x0c.
    SnapshotAlias,
    /// `history_hold`, 0x0d.
    HistoryHold,
    /// `commit_consumer`, 0x0e.
    CommitConsumer,
    /// `secondary_index`, 0x0f.
    SecondaryIndex,
    /// `change_event`, 0x10.
    ChangeEvent,
    /// `operation`, 0x11.
    Operation,
    /// `restore_member`, 0x12.
    RestoreMember,
    /// `staged_object`, 0x13.
    StagedObject,
    /// `command_dedupe`, 0x14.
    CommandDedupe,
    /// `gc_candidate`, 0x15.
    GcCandidate,
    /// `gc_barrier`, 0x16.
    GcBarrier,
    /// `workspace_incarnation_claim`, 0x17.
    WorkspaceIncarnationClaim,
    /// Reserved engine tree `system`, 0xF0, unversioned.
    System,
    /// Reserved engine tree `recovery_outbox`, 0xF1, unversioned (see [`crate::outbox`]).
    RecoveryOutbox,
}

/// Name of holt's own MVCC history tree (tag 0x00), created by holt itself.
pub const HISTORY_TREE: &str = "history";
/// Tag of holt's history tree.
pub const HISTORY_TAG: u8 = 0x00;

impl Family {
    /// Every keyspace `meta` creates, in tag order.
    pub const ALL: [Family; 25] = [
        Family::RootFence,
        Family::WorkspaceCurrent,
        Family::PathCurrent,
        Family::ArtifactRevision,
        Family::ArtifactManifest,
        Family::RevisionRef,
        Family::Commit,
        Family::CommitMember,
        Family::WorkbenchCommitHead,
        Family::Tag,
        Family::SnapshotRef,
        Family::SnapshotAlias,
        Family::HistoryHold,
        Family::CommitConsumer,
        Family::SecondaryIndex,
        Family::ChangeEvent,
        Family::Operation,
        Family::RestoreMember,
        Family::StagedObject,
        Family::CommandDedupe,
        Family::GcCandidate,
        Family::GcBarrier,
        Family::WorkspaceIncarnationClaim,
        Family::System,
        Family::RecoveryOutbox,
    ];

    /// Exact holt tree name (docs/metadata-format.md).
    pub fn name(self) -> &'static str {
        match self {
            Family::RootFence => "root_fence",
            Family::WorkspaceCurrent => "workspace_current",
            Family::PathCurrent => "path_current",
            Family::ArtifactRevision => "artifact_revision",
            Family::ArtifactManifest => "artifact_manifest",
            Family::RevisionRef => "revision_ref",
            Family::Commit => "commit",
            Family::CommitMember => "commit_member",
            Family::WorkbenchCommitHead => "workbench_commit_head",
            Family::Tag => "tag",
            Family::SnapshotRef => "snapshot_ref",
            Family::SnapshotAlias => "snapshot_alias",
            Family::HistoryHold => "history_hold",
            Family::CommitConsumer => "commit_consumer",
            Family::SecondaryIndex => "secondary_index",
            Family::ChangeEvent => "change_event",
            Family::Operation => "operation",
            Family::RestoreMember => "restore_member",
            Family::StagedObject => "staged_object",
            Family::CommandDedupe => "command_dedupe",
            Family::GcCandidate => "gc_candidate",
            Family::GcBarrier => "gc_barrier",
            Family::WorkspaceIncarnationClaim => "workspace_incarnation_claim",
            Family::System => "system",
            Family::RecoveryOutbox => "recovery_outbox",
        }
    }

    /// Stable one-byte tree tag (docs/metadata-format.md History source-family tag for the 23 families).
    pub fn tag(self) -> u8 {
        match self {
            Family::System => 0xF0,
            Family::RecoveryOutbox => 0xF1,
            // The 23 families are declared in tag order starting at 0x01.
            f => (f as u8) + 1,
        }
    }

    /// Whether holt keeps MVCC history for the tree (true for the 23 families).
    pub fn versioned(self) -> bool {
        !matches!(self, Family::System | Family::RecoveryOutbox)
    }

    /// Index into [`Family::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The family registered under a tree name.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The family with tree tag `tag` (`None` for holt's `history` tag 0x00 and unknown tags).
    pub fn from_tag(tag: u8) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.tag() == tag)
    }
}
