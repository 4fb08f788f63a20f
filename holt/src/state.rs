//! The immutable state every reader pins: version, LSN, floor, registry and, per tree, the
//! **layers** that hold its slots (see `crate::layers`).
//!
//! A `State` is never mutated once published: each commit clones the tip (cheap: the in-memory
//! delta of every tree is a persistent, `Arc`-shared `Art`, the frozen delta and the image
//! list are `Arc`s, so a clone copies one root pointer per tree plus two pointers), applies its
//! physical operations to the delta — which path-copies only the nodes on the written keys'
//! paths — and is wrapped in a new `Arc`. Readers and views pin an `Arc<State>`, so they never
//! wait for a writer or an fdatasync; the mapped images a state refers to stay readable as long
//! as the state lives, even after a merge deleted their files.

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::Result;
use crate::image::{self, Image};
use crate::layers::{Layer, SlotRef};
use crate::registry::{Registry, TreeMeta, HISTORY_TAG};
use crate::slot::{Slot, TreeMap, Value};

/// The in-memory delta being written to an image by a flush or checkpoint: the writes of the
/// WAL records up to `lsn`, read as a layer between the active delta and the images until the
/// image is installed.
pub(crate) struct Frozen {
    pub(crate) trees: Vec<TreeMap>,
    /// The last WAL record the frozen delta reflects, and the version, floor and registry
    /// after it (the header of the image it becomes).
    pub(crate) lsn: u64,
    pub(crate) version: u64,
    pub(crate) floor: u64,
    pub(crate) registry: Registry,
}

/// Every tree at one version.
#[derive(Clone)]
pub(crate) struct State {
    /// Last committed version (0 before the first commit).
    pub(crate) version: u64,
    /// LSN of the last WAL record reflected in this state (0 = none).
    pub(crate) lsn: u64,
    /// MVCC history floor: the lowest version `view_at` accepts.
    pub(crate) floor: u64,
    pub(crate) registry: Registry,
    /// The active in-memory delta, indexed by tag (unregistered tags hold empty trees): the
    /// writes since the frozen delta, or since the newest image.
    pub(crate) trees: Vec<TreeMap>,
    /// The delta being written to an image, if a flush or checkpoint is in progress.
    pub(crate) frozen: Option<Arc<Frozen>>,
    /// The image runs, newest first; together they hold the records `1..=images[0].last_lsn()`.
    pub(crate) images: Arc<[Arc<Image>]>,
    /// The incremental prune sweep in progress, if any (see `mvcc`). Not persisted: it only
    /// tracks the removal of rows that no read version at or above `floor` can reach.
    pub(crate) prune: Option<PruneCursor>,
}

/// Progress of the incremental prune sweep (see `mvcc`, which runs it). Lives in the in-memory
/// state only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PruneCursor {
    /// The tree being swept: the `history` tree first, then versioned trees by ascending tag.
    pub(crate) tag: u8,
    /// Last key examined in that tree (the sweep resumes after it); `None` = from its start.
    pub(crate) after: Option<Vec<u8>>,
    /// The floor rose after this sweep started: run it once more from the start when done.
    pub(crate) again: bool,
}

impl PruneCursor {
    /// A sweep from the start of the `history` tree.
    pub(crate) fn start() -> Self {
        PruneCursor {
            tag: HISTORY_TAG,
            after: None,
            again: false,
        }
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("version", &self.version)
            .field("lsn", &self.lsn)
            .field("floor", &self.floor)
            .field("trees", &self.registry.len())
            .field("frozen", &self.frozen.as_ref().map(|f| f.lsn))
            .field("images", &self.images.len())
            .field("prune", &self.prune)
            .finish()
    }
}

impl State {
    /// The state of a brand-new database: only the `history` tree, version 0.
    pub(crate) fn new() -> Self {
        State {
            version: 0,
            lsn: 0,
            floor: 0,
            registry: Registry::with_history(),
            trees: vec![TreeMap::new(); 256],
            frozen: None,
            images: Arc::from(Vec::new()),
            prune: None,
        }
    }

    /// The state held by `images` (newest first, a tiling of `1..=images[0].last_lsn()`):
    /// version, floor and registry from the newest image's meta record, empty deltas.
    /// Errors: `Corrupt` (naming the newest image) for a registry that does not validate.
    pub(crate) fn from_images(images: Vec<Arc<Image>>) -> Result<Self> {
        let mut st = State::new();
        if let Some(newest) = images.first() {
            let meta = newest.meta();
            st.version = meta.version;
            st.floor = meta.floor;
            st.lsn = meta.last_lsn;
            for t in &meta.trees {
                st.registry
                    .check_new(&t.name, t.tag)
                    .map_err(|e| newest.corrupt(0, format!("meta record registry: {e}")))?;
                st.registry = st.registry.with(TreeMeta {
                    name: t.name.clone(),
                    tag: t.tag,
                    versioned: t.versioned,
                });
            }
        }
        st.images = Arc::from(images);
        Ok(st)
    }

    /// The active delta of tree `tag`.
    #[inline]
    pub(crate) fn tree(&self, tag: u8) -> &TreeMap {
        &self.trees[usize::from(tag)]
    }

    pub(crate) fn tree_mut(&mut self, tag: u8) -> &mut TreeMap {
        &mut self.trees[usize::from(tag)]
    }

    /// The non-empty layers of tree `tag`, newest first.
    pub(crate) fn layers(&self, tag: u8) -> Vec<Layer<'_>> {
        let mut v = Vec::with_capacity(2 + self.images.len());
        let d = self.tree(tag);
        if !d.is_empty() {
            v.push(Layer::Mem(d));
        }
        if let Some(f) = &self.frozen {
            let t = &f.trees[usize::from(tag)];
            if !t.is_empty() {
                v.push(Layer::Mem(t));
            }
        }
        for img in self.images.iter() {
            if let Some(root) = img.root(tag) {
                v.push(Layer::Img(img, root));
            }
        }
        v
    }

    /// The slot of `key` in tree `tag`: from the newest layer that holds it (a tombstone
    /// included). Errors: `Corrupt` for a bad image block on the way.
    #[inline]
    pub(crate) fn slot(&self, tag: u8, key: &[u8]) -> Result<Option<SlotRef<'_>>> {
        if let Some(s) = self.tree(tag).get(key) {
            return Ok(Some(SlotRef::of(s)));
        }
        self.lower_slot(tag, key)
    }

    /// The slot of `key` below the active delta (frozen delta, then images).
    fn lower_slot(&self, tag: u8, key: &[u8]) -> Result<Option<SlotRef<'_>>> {
        if let Some(f) = &self.frozen {
            if let Some(s) = f.trees[usize::from(tag)].get(key) {
                return Ok(Some(SlotRef::of(s)));
            }
        }
        for img in self.images.iter() {
            if let Some(root) = img.root(tag) {
                // Images above the base carry a bloom filter: skip those that lack the key.
                if !image::may_contain(img, &root, key)? {
                    continue;
                }
                if let Some(l) = image::get(img, root.off, key)? {
                    return Ok(Some(SlotRef::of_leaf(l)));
                }
            }
        }
        Ok(None)
    }

    /// Whether a layer below the active delta holds a slot for `key` (so deleting `key` needs a
    /// tombstone in the delta). Errors: `Corrupt`.
    pub(crate) fn lower_has(&self, tag: u8, key: &[u8]) -> Result<bool> {
        Ok(self.lower_slot(tag, key)?.is_some())
    }

    /// Latest value of `key` (tombstones read as absent). Errors: `Corrupt`.
    pub(crate) fn latest(&self, tag: u8, key: &[u8]) -> Result<Option<&[u8]>> {
        Ok(self.slot(tag, key)?.and_then(|s| s.value))
    }

    /// The `history` row with the greatest key strictly below `bound`, over every layer
    /// (history rows are never deleted by writes, so no layer hides another's rows).
    /// Errors: `Corrupt`.
    pub(crate) fn history_last_below(
        &self,
        bound: &[u8],
    ) -> Result<Option<(Cow<'_, [u8]>, SlotRef<'_>)>> {
        let mut best: Option<(Cow<'_, [u8]>, SlotRef<'_>)> = None;
        for layer in self.layers(HISTORY_TAG) {
            if let Some((k, s)) = layer.last_below(bound)? {
                if best.as_ref().is_none_or(|(bk, _)| k.as_ref() > bk.as_ref()) {
                    best = Some((k, s));
                }
            }
        }
        Ok(best)
    }

    /// Applies one physical write at commit `version` to the active delta: a put of `value`
    /// under `key` in `meta`'s tree, or a delete (`Value::Tombstone`). Deletes leave a tombstone
    /// in versioned trees; elsewhere they remove the key from the delta, leaving a tombstone
    /// only when an older layer holds the key. Errors: `Corrupt` (reading images).
    pub(crate) fn apply(
        &mut self,
        meta: &TreeMeta,
        key: &[u8],
        value: Value,
        version: u64,
    ) -> Result<()> {
        let tag = meta.tag;
        if value.is_some() {
            self.tree_mut(tag).insert(key, Slot { value, version });
            return Ok(());
        }
        if meta.versioned || self.lower_has(tag, key)? {
            self.tree_mut(tag).insert(
                key,
                Slot {
                    value: Value::Tombstone,
                    version,
                },
            );
        } else {
            self.tree_mut(tag).remove(key);
        }
        Ok(())
    }

    /// Raises the history floor and schedules the incremental prune sweep (see `mvcc`): starts
    /// one, or marks the running one to be repeated from the start.
    pub(crate) fn raise_floor(&mut self, floor: u64) {
        debug_assert!(floor >= self.floor, "the history floor is monotonic");
        debug_assert!(
            floor <= self.version,
            "the history floor is above the last version"
        );
        self.floor = floor;
        match &mut self.prune {
            Some(cur) => cur.again = true,
            None => self.prune = Some(PruneCursor::start()),
        }
    }
}

/// Wakes [`Db::wait_visible`](crate::Db::wait_visible) callers when a newer state is published.
///
/// Notifiers call [`Visibility::notify`] after the publication they announce (the committer
/// whose record became durable, once its `wait_durable` returned); waiters re-check their
/// condition under the same mutex, so no wake-up is lost between a check and the wait.
#[derive(Default)]
pub(crate) struct Visibility {
    lock: parking_lot::Mutex<()>,
    cond: parking_lot::Condvar,
}

impl Visibility {
    /// Wakes every waiter so it re-checks its condition.
    pub(crate) fn notify(&self) {
        let _guard = self.lock.lock();
        self.cond.notify_all();
    }

    /// Blocks until `ready` returns `Ok(true)` (→ `Ok(true)`), returns an error (→ that error),
    /// or `deadline` passes (→ the last check, normally `Ok(false)`). `None` waits without limit.
    pub(crate) fn wait_until(
        &self,
        mut ready: impl FnMut() -> crate::error::Result<bool>,
        deadline: Option<std::time::Instant>,
    ) -> crate::error::Result<bool> {
        let mut guard = self.lock.lock();
        loop {
            if ready()? {
                return Ok(true);
            }
            match deadline {
                Some(d) => {
                    if self.cond.wait_until(&mut guard, d).timed_out() {
                        return ready();
                    }
                }
                None => self.cond.wait(&mut guard),
            }
        }
    }
}
