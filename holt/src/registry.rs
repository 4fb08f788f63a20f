//! The tree registry: name ↔ stable one-byte tag ↔ versioned flag, persisted through the WAL
//! (`CreateTree` records) and in every checkpoint.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Tag of the engine-owned `history` tree (MVCC history rows, see `mvcc`).
pub const HISTORY_TAG: u8 = 0x00;
/// Name of the engine-owned `history` tree.
pub const HISTORY_NAME: &str = "history";

/// Maximum tree-name length in bytes.
pub const MAX_TREE_NAME_LEN: usize = 64;

/// Public description of one registered tree, as listed by `Db::trees`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TreeInfo {
    /// Tree name, 1..=64 bytes of `[a-z0-9_]`.
    pub name: String,
    /// Stable one-byte tag (docs/metadata-format.md, "Durable Format Registry"); also the first
    /// byte of this tree's rows in the `history` tree.
    pub tag: u8,
    /// Whether overwrites and deletes keep MVCC history (readable through `Db::view_at`).
    pub versioned: bool,
}

/// Internal registry entry (shared by `Tree` handles and the state).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TreeMeta {
    pub(crate) name: String,
    pub(crate) tag: u8,
    pub(crate) versioned: bool,
}

/// Immutable registry snapshot; cloned cheaply (one `Arc`) into every `State`. Indexed
/// directly by tag, so the lookup on every read is one array access.
#[derive(Clone, Debug)]
pub(crate) struct Registry {
    /// 256 entries, one per tag.
    by_tag: Arc<Vec<Option<Arc<TreeMeta>>>>,
}

impl Registry {
    /// A registry holding only the engine-owned `history` tree (tag 0x00, unversioned).
    pub(crate) fn with_history() -> Self {
        let mut m: Vec<Option<Arc<TreeMeta>>> = vec![None; 256];
        m[usize::from(HISTORY_TAG)] = Some(Arc::new(TreeMeta {
            name: HISTORY_NAME.to_string(),
            tag: HISTORY_TAG,
            versioned: false,
        }));
        Registry {
            by_tag: Arc::new(m),
        }
    }

    #[inline]
    pub(crate) fn get(&self, tag: u8) -> Option<&Arc<TreeMeta>> {
        self.by_tag.get(usize::from(tag)).and_then(Option::as_ref)
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<&Arc<TreeMeta>> {
        self.iter().find(|m| m.name == name)
    }

    /// Registered trees in tag order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<TreeMeta>> {
        self.by_tag.iter().flatten()
    }

    pub(crate) fn len(&self) -> usize {
        self.iter().count()
    }

    /// Checks that `(name, tag)` may be registered.
    pub(crate) fn check_new(&self, name: &str, tag: u8) -> Result<()> {
        validate_name(name)?;
        if self.by_name(name).is_some() {
            return Err(Error::TreeExists {
                name: name.to_string(),
            });
        }
        if self.get(tag).is_some() {
            return Err(Error::TagInUse { tag });
        }
        Ok(())
    }

    /// Returns a new registry with the entry added (caller ran `check_new`).
    pub(crate) fn with(&self, meta: TreeMeta) -> Self {
        let mut m = (*self.by_tag).clone();
        let tag = usize::from(meta.tag);
        m[tag] = Some(Arc::new(meta));
        Registry {
            by_tag: Arc::new(m),
        }
    }
}

/// Tree names are 1..=64 bytes of `[a-z0-9_]`.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    let ok_len = !name.is_empty() && name.len() <= MAX_TREE_NAME_LEN;
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok_len && ok_chars {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "tree name {name:?} must be 1..={MAX_TREE_NAME_LEN} bytes of [a-z0-9_]"
        )))
    }
}
