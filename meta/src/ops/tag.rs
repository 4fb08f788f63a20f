//! Durable tags: CAS-protected, mutable names for sealed commits (docs/metadata-format.md, Tag and
//! CommitConsumer families; docs/design.md, "Recovery Products").
//!
//! A tag lives in one workspace incarnation (`Tag` key `root | incarnation | u16 len | name`)
//! and names any `Sealed` commit of the root. Each tag owns exactly one
//! `CommitConsumer(commit, Tag, incarnation | u16 len | name)` row; setting, moving and deleting
//! a tag change that row and the commit's `consumer_count` / `consumer_epoch` in the same
//! command. Moving or deleting a tag never retires a commit (retirement is explicit, see
//! [`crate::ops::commit::retire`]).
//!
//! The CAS token is `tag_generation`, which equals the commit version of the command that last
//! set the tag. [`TagCondition`] states what the caller expects to find.
//!
//! Tag names follow docs/metadata-format.md exactly ("Snapshot aliases and tag names are case-sensitive UTF-8
//! without NUL, at most 128 bytes"): 1..=128 bytes, no NUL, no case folding or Unicode
//! normalization; `/`, `.` and other characters are ordinary name bytes because a tag name is a
//! length-prefixed key component, never a path. Every entry point here ([`set_tag`],
//! [`get_tag`], [`delete_tag`]) validates the name through [`TagName::new`] before touching
//! storage and refuses a bad one with [`Error::InvalidArgument`] (the Workbench facade and CLI
//! answer `InvalidArguments`).

use crate::codec::{
    workspace_current, CommandResult, Commit, CommitConsumer, CommitConsumerKey, CommitState,
    ConsumerOwner, Tag, TagKey, WorkspaceCurrent,
};
use crate::command::{MetadataCommand, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{CommitId, RequestId, RootId, TagName, WorkspaceIncarnationId};
use crate::shard::MetaShard;
use crate::store::{ShardSnapshot, Snapshot, TxnStore};

use super::Step;

/// What a tag mutation expects to find (compare-and-swap condition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagCondition {
    /// No expectation (last writer wins).
    Any,
    /// The tag must not exist.
    Absent,
    /// The tag must exist at exactly this generation.
    Generation(u64),
}

/// One tag as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagInfo {
    /// Tag name.
    pub name: String,
    /// Tagged commit.
    pub commit_id: CommitId,
    /// CAS token (commit version of the command that last set the tag).
    pub tag_generation: u64,
}

fn tag_key(root: &RootId, inc: &WorkspaceIncarnationId, tag: &TagName) -> Vec<u8> {
    TagKey {
        root: *root,
        incarnation: *inc,
        tag: tag.clone(),
    }
    .encode()
}

fn commit_key(root: &RootId, id: &CommitId) -> Vec<u8> {
    crate::codec::commit::CommitKey {
        root: *root,
        commit_id: *id,
    }
    .encode()
}

fn consumer_key(
    root: &RootId,
    commit: &CommitId,
    inc: &WorkspaceIncarnationId,
    tag: &TagName,
) -> Vec<u8> {
    CommitConsumerKey {
        root: *root,
        commit_id: *commit,
        owner: ConsumerOwner::Tag {
            incarnation: *inc,
            tag: tag.clone(),
        },
    }
    .encode()
}

/// Reads the Visible WorkspaceCurrent marker of `workbench_id`: `(key, bytes, value)`.
///
/// Errors: [`Error::WorkspaceNotFound`] when absent or not Visible; codec and storage errors.
pub(crate) fn visible_ws(
    snap: &impl Snapshot,
    root: &RootId,
    workbench_id: &str,
    wall_unix_ms: u64,
) -> Result<(Vec<u8>, Vec<u8>, WorkspaceCurrent)> {
    let key = workspace_current::key(root, workbench_id);
    let not_found = || Error::WorkspaceNotFound {
        workbench_id: workbench_id.to_owned(),
    };
    let bytes = snap
        .get(Family::WorkspaceCurrent, &key)?
        .ok_or_else(not_found)?;
    let ws = WorkspaceCurrent::decode(&bytes)?;
    if !crate::read::workspace_live(snap, &ws, wall_unix_ms)? {
        return Err(not_found());
    }
    Ok((key, bytes, ws))
}

fn check(cond: TagCondition, current: Option<&Tag>) -> Result<()> {
    let actual = current.map_or(0, |t| t.tag_generation);
    let ok = match cond {
        TagCondition::Any => true,
        TagCondition::Absent => current.is_none(),
        TagCondition::Generation(g) => current.is_some() && actual == g,
    };
    if ok {
        Ok(())
    } else {
        Err(Error::TagConflict {
            expected: match cond {
                TagCondition::Generation(g) => g,
                _ => 0,
            },
            actual,
        })
    }
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"nokv.tag.v1\0");
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// Runs `build` through [`super::run_step`] (`None`: nothing to write).
fn run<T>(
    shard: &MetaShard,
    mut build: impl FnMut(&ShardSnapshot) -> Result<(Option<MetadataCommand>, T)>,
) -> Result<T> {
    super::run_step(shard, |snap| {
        Ok(match build(snap)? {
            (Some(cmd), v) => Step::Command(Box::new(cmd), v),
            (None, v) => Step::Done(v),
        })
    })
}

/// Releases the tag's consumer on `commit` (row delete, count −1, epoch +1).
fn release(
    snap: &ShardSnapshot,
    root: &RootId,
    commit: &CommitId,
    inc: &WorkspaceIncarnationId,
    tag: &TagName,
    cv: u64,
    cmd: &mut MetadataCommand,
) -> Result<()> {
    let ck = commit_key(root, commit);
    let cbytes = snap
        .get(Family::Commit, &ck)?
        .ok_or_else(|| Error::codec("tag", "tag names a missing commit"))?;
    let mut c = Commit::decode(&cbytes)?;
    c.consumer_count = c
        .consumer_count
        .checked_sub(1)
        .ok_or_else(|| Error::codec("commit", "consumer count underflow"))?;
    c.consumer_epoch = c.consumer_epoch.saturating_add(1);
    if c.consumer_count == 0 {
        c.last_zero_consumer_version = Some(cv);
    }
    cmd.predicates
        .push(Predicate::equals(Family::Commit, ck.clone(), cbytes));
    cmd.mutations
        .push(Mutation::put(Family::Commit, ck, c.encode()));
    cmd.mutations.push(Mutation::Delete {
        family: Family::CommitConsumer,
        key: consumer_key(root, commit, inc, tag),
    });
    Ok(())
}

/// Sets (creates or moves) `tag` of `workbench_id` to the `Sealed` commit `commit_id` under
/// `cond`. Setting a tag to the commit it already names writes nothing and returns it
/// unchanged.
///
/// Errors: [`Error::InvalidArgument`] (tag name), [`Error::WorkspaceNotFound`],
/// [`Error::TagConflict`], [`Error::CommitNotFound`], [`Error::CommitLifecycle`] (commit not
/// `Sealed`), [`Error::ReadVersionConflict`], [`Error::Fenced`], codec and storage errors.
pub fn set_tag(
    shard: &MetaShard,
    workbench_id: &str,
    tag: &str,
    commit_id: &CommitId,
    cond: TagCondition,
) -> Result<TagInfo> {
    let tag = TagName::new(tag)?;
    let root = shard.root_id();
    run(shard, |snap| {
        let (ws_key, ws_bytes, ws) = visible_ws(snap, &root, workbench_id, shard.wall_unix_ms())?;
        let inc = ws.incarnation;
        let tk = tag_key(&root, &inc, &tag);
        let old_bytes = snap.get(Family::Tag, &tk)?;
        let old = old_bytes.as_deref().map(Tag::decode).transpose()?;
        check(cond, old.as_ref())?;
        if let Some(o) = &old {
            if o.commit_id == *commit_id {
                return Ok((
                    None,
                    TagInfo {
                        name: tag.as_str().to_owned(),
                        commit_id: o.commit_id,
                        tag_generation: o.tag_generation,
                    },
                ));
            }
        }
        let ck = commit_key(&root, commit_id);
        let cbytes = snap
            .get(Family::Commit, &ck)?
            .ok_or_else(|| Error::CommitNotFound {
                commit_id: commit_id.to_hex(),
            })?;
        let mut c = Commit::decode(&cbytes)?;
        if c.state != CommitState::Sealed {
            return Err(Error::CommitLifecycle {
                reason: format!("cannot tag a commit that is {:?}", c.state),
            });
        }
        let cv = snap
            .version()
            .checked_add(1)
            .ok_or_else(|| Error::invalid("commit version exhausted"))?;
        c.consumer_count = c.consumer_count.saturating_add(1);
        c.consumer_epoch = c.consumer_epoch.saturating_add(1);
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest(&[
                workbench_id.as_bytes(),
                tag.as_str().as_bytes(),
                commit_id.as_bytes(),
            ]),
            snap.version(),
            CommandResult::Applied { value: cv },
        );
        let new_ck = consumer_key(&root, commit_id, &inc, &tag);
        cmd.predicates = vec![
            Predicate::equals(Family::WorkspaceCurrent, ws_key, ws_bytes),
            match &old_bytes {
                None => Predicate::absent(Family::Tag, tk.clone()),
                Some(b) => Predicate::equals(Family::Tag, tk.clone(), b.clone()),
            },
            Predicate::equals(Family::Commit, ck.clone(), cbytes),
            Predicate::absent(Family::CommitConsumer, new_ck.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::Commit, ck, c.encode()),
            Mutation::put(
                Family::CommitConsumer,
                new_ck,
                CommitConsumer {
                    consumer_epoch_at_add: c.consumer_epoch,
                    created_version: cv,
                }
                .encode(),
            ),
            Mutation::put(
                Family::Tag,
                tk,
                Tag {
                    commit_id: *commit_id,
                    tag_generation: cv,
                }
                .encode(),
            ),
        ];
        if let Some(o) = &old {
            release(snap, &root, &o.commit_id, &inc, &tag, cv, &mut cmd)?;
        }
        Ok((
            Some(cmd),
            TagInfo {
                name: tag.as_str().to_owned(),
                commit_id: *commit_id,
                tag_generation: cv,
            },
        ))
    })
}

/// Reads one tag of a `Visible` workbench (`None`: no such tag).
///
/// Errors: [`Error::InvalidArgument`], [`Error::WorkspaceNotFound`], codec and storage errors.
pub fn get_tag(shard: &MetaShard, workbench_id: &str, tag: &str) -> Result<Option<TagInfo>> {
    let tag = TagName::new(tag)?;
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let (_, _, ws) = visible_ws(&snap, &root, workbench_id, shard.wall_unix_ms())?;
    Ok(snap
        .get(Family::Tag, &tag_key(&root, &ws.incarnation, &tag))?
        .map(|b| Tag::decode(&b))
        .transpose()?
        .map(|t| TagInfo {
            name: tag.as_str().to_owned(),
            commit_id: t.commit_id,
            tag_generation: t.tag_generation,
        }))
}

/// Deletes `tag` under `cond`; returns the removed tag (`None`: it did not exist and `cond`
/// allowed that). The commit it named keeps every other consumer and is never retired here.
///
/// Errors: [`Error::InvalidArgument`], [`Error::WorkspaceNotFound`], [`Error::TagConflict`],
/// [`Error::ReadVersionConflict`], [`Error::Fenced`], codec and storage errors.
pub fn delete_tag(
    shard: &MetaShard,
    workbench_id: &str,
    tag: &str,
    cond: TagCondition,
) -> Result<Option<TagInfo>> {
    let tag = TagName::new(tag)?;
    let root = shard.root_id();
    run(shard, |snap| {
        let (ws_key, ws_bytes, ws) = visible_ws(snap, &root, workbench_id, shard.wall_unix_ms())?;
        let inc = ws.incarnation;
        let tk = tag_key(&root, &inc, &tag);
        let old_bytes = snap.get(Family::Tag, &tk)?;
        let old = old_bytes.as_deref().map(Tag::decode).transpose()?;
        check(cond, old.as_ref())?;
        let (Some(o), Some(ob)) = (old, old_bytes) else {
            return Ok((None, None));
        };
        let cv = snap
            .version()
            .checked_add(1)
            .ok_or_else(|| Error::invalid("commit version exhausted"))?;
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest(&[workbench_id.as_bytes(), tag.as_str().as_bytes(), b"delete"]),
            snap.version(),
            CommandResult::Applied { value: cv },
        );
        cmd.predicates = vec![
            Predicate::equals(Family::WorkspaceCurrent, ws_key, ws_bytes),
            Predicate::equals(Family::Tag, tk.clone(), ob),
        ];
        cmd.mutations = vec![Mutation::Delete {
            family: Family::Tag,
            key: tk,
        }];
        release(snap, &root, &o.commit_id, &inc, &tag, cv, &mut cmd)?;
        Ok((
            Some(cmd),
            Some(TagInfo {
                name: tag.as_str().to_owned(),
                commit_id: o.commit_id,
                tag_generation: o.tag_generation,
            }),
        ))
    })
}

/// Every tag of a `Visible` workbench in name-byte order (length-prefixed keys: shorter names
/// first).
///
/// Errors: [`Error::WorkspaceNotFound`], codec and storage errors.
pub fn list_tags(shard: &MetaShard, workbench_id: &str) -> Result<Vec<TagInfo>> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let (_, _, ws) = visible_ws(&snap, &root, workbench_id, shard.wall_unix_ms())?;
    let prefix = crate::codec::tag::incarnation_prefix(&root, &ws.incarnation);
    let mut out = Vec::new();
    snap.for_each_row(Family::Tag, &prefix, "tag", |key, value| {
        let k = TagKey::decode(key)?;
        let t = Tag::decode(value)?;
        out.push(TagInfo {
            name: k.tag.as_str().to_owned(),
            commit_id: t.commit_id,
            tag_generation: t.tag_generation,
        });
        Ok(())
    })?;
    Ok(out)
}
