//! Writing an image: a streaming ART builder over sorted keys ([`TrieBuilder`]) on top of a
//! block allocator with two streams ([`BlockSink`]) that writes CRC'd 4 KiB blocks through the
//! [`WalFs`] layer (so the power-loss simulation covers image writes), then the tail: the CRC
//! table, its directory and the footer.
//!
//! **Layout.** Records are appended to one of two streams: inner nodes with an inner child to
//! the *node* stream, leaves — and, right after them, the inner nodes whose children are all
//! leaves — to the *leaf* stream. Each stream fills one block at a time; a record that does not
//! fit in the rest of the stream's block goes to a fresh block (the rest is zero padding), so a
//! record never straddles blocks unless it is larger than a block, in which case it gets its own
//! contiguous run of blocks. Node blocks thus hold only the upper levels of the tree (written
//! in post-order: a node after its children), which keeps the paths of lookups and the groups
//! of delimiter listings dense in a small part of the file, while the leaves (key suffix,
//! version, value) sit in key order in the leaf blocks next to their parent node.
//!
//! **Building.** [`TrieBuilder::push`] takes keys in strictly ascending order. A key's leaf can
//! be written once the next key is known: its parent is the node at the deeper of the two
//! branch points with its neighbours (longest common prefix with the previous and with the next
//! key). Open nodes along the current key's path live on a stack; when the next key diverges at
//! depth `l`, every open node deeper than `l` is complete and written, its parent being the next
//! open node or a new node at depth `l`. Memory is O(key length × 256), independent of the
//! number of keys.

use std::path::{Path, PathBuf};

use crate::art::Summary;
use crate::error::{Error, Result};
use crate::vfs::{self as wfs, WalFile, WalFs};

use super::format::{
    bloom_probe, key_hash, put_ref, put_varint, ref_width, BITMAP_BYTES, BLOCK, BLOOM_BITS_PER_KEY,
    BLOOM_BLOCK, CRCS_PER_PAGE, FOOTER_LEN, FORMAT, F_SUMMARY, F_TERMINAL, F_TOMBSTONE, F_VERSION,
    MAGIC, SORTED_MAX, T_BITMAP, T_LEAF, T_META, T_SORTED, WIDTH_SHIFT,
};

/// The inner-node stream.
const NODE: usize = 0;
/// The leaf stream.
const LEAF: usize = 1;
/// Completed blocks are written once this many bytes are pending (in coalesced runs).
const FLUSH_BYTES: usize = 1 << 20;

/// Encodes a leaf record (see [`super::node`]).
pub(crate) fn encode_leaf(
    buf: &mut Vec<u8>,
    suffix: &[u8],
    value: Option<&[u8]>,
    version: Option<u64>,
) {
    let mut tag = T_LEAF;
    if value.is_none() {
        tag |= F_TOMBSTONE;
    }
    if version.is_some() {
        tag |= F_VERSION;
    }
    buf.push(tag);
    put_varint(buf, suffix.len() as u64);
    if let Some(v) = value {
        put_varint(buf, v.len() as u64);
    }
    if let Some(v) = version {
        put_varint(buf, v);
    }
    buf.extend_from_slice(suffix);
    if let Some(v) = value {
        buf.extend_from_slice(v);
    }
}

/// Encodes an inner-node record (see [`super::node`]). `children` is non-empty, at most 256
/// entries, in ascending edge order.
pub(crate) fn encode_inner(
    buf: &mut Vec<u8>,
    prefix: &[u8],
    children: &[(u8, u64)],
    terminal: Option<u64>,
    summary: Option<Summary>,
) {
    let count = children.len();
    debug_assert!((1..=256).contains(&count));
    let max_off = children
        .iter()
        .map(|c| c.1)
        .chain(terminal)
        .max()
        .unwrap_or(0);
    let width = ref_width(max_off);
    let bitmap = count > SORTED_MAX;
    let mut tag = if bitmap { T_BITMAP } else { T_SORTED };
    if terminal.is_some() {
        tag |= F_TERMINAL;
    }
    if summary.is_some() {
        tag |= F_SUMMARY;
    }
    tag |= ((width - 1) as u8) << WIDTH_SHIFT;
    buf.push(tag);
    buf.push((count.clamp(1, 256) - 1) as u8);
    put_varint(buf, prefix.len() as u64);
    if let Some(s) = summary {
        put_varint(buf, s.live);
        put_varint(buf, s.dead);
        put_varint(buf, s.max_stamp);
    }
    if let Some(t) = terminal {
        put_ref(buf, t, width);
    }
    buf.extend_from_slice(prefix);
    if bitmap {
        let mut bits = [0u8; BITMAP_BYTES];
        for &(b, _) in children {
            bits[usize::from(b >> 3)] |= 1 << (b & 7);
        }
        buf.extend_from_slice(&bits);
    } else {
        buf.extend(children.iter().map(|c| c.0));
    }
    for &(_, off) in children {
        put_ref(buf, off, width);
    }
}

/// Where the writer stands, reported to its progress callback (which may abort the write by
/// returning an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// The `.tmp` file exists; nothing is written yet.
    Started,
    /// Another batch of blocks is written.
    Blocks,
}

/// The progress callback of a write.
pub(crate) type ProgressFn<'a> = dyn FnMut(Progress) -> Result<()> + 'a;

struct Stream {
    open: bool,
    block: u64,
    buf: Vec<u8>,
}

/// The block allocator and file writer of one image (see the module docs).
pub(crate) struct BlockSink<'a> {
    file: Box<dyn WalFile>,
    path: PathBuf,
    next_block: u64,
    streams: [Stream; 2],
    crcs: Vec<u32>,
    pending: Vec<(u64, Vec<u8>)>,
    pending_bytes: usize,
    spare: Vec<Vec<u8>>,
    progress: &'a mut ProgressFn<'a>,
}

impl<'a> BlockSink<'a> {
    /// Creates `path` (which must not exist) through `fs`.
    /// Errors: `Io` (`create`), or what `progress` returns.
    pub(crate) fn create(
        fs: &dyn WalFs,
        path: &Path,
        progress: &'a mut ProgressFn<'a>,
    ) -> Result<Self> {
        let file = fs
            .create_new(path)
            .map_err(|e| Error::io("create", path, e))?;
        let sink = BlockSink {
            file,
            path: path.to_path_buf(),
            next_block: 0,
            streams: [
                Stream {
                    open: false,
                    block: 0,
                    buf: Vec::with_capacity(BLOCK),
                },
                Stream {
                    open: false,
                    block: 0,
                    buf: Vec::with_capacity(BLOCK),
                },
            ],
            crcs: Vec::new(),
            pending: Vec::new(),
            pending_bytes: 0,
            spare: Vec::new(),
            progress,
        };
        (sink.progress)(Progress::Started)?;
        Ok(sink)
    }

    fn alloc(&mut self, n: u64) -> u64 {
        let b = self.next_block;
        self.next_block += n;
        self.crcs.resize(self.next_block as usize, 0);
        b
    }

    /// Appends `rec` to stream `s`; returns its file offset.
    fn append(&mut self, s: usize, rec: &[u8]) -> Result<u64> {
        if rec.len() > BLOCK {
            let nb = rec.len().div_ceil(BLOCK);
            let first = self.alloc(nb as u64);
            let mut data = self.spare.pop().unwrap_or_default();
            data.clear();
            data.extend_from_slice(rec);
            data.resize(nb * BLOCK, 0);
            for (i, chunk) in data.chunks(BLOCK).enumerate() {
                self.crcs[first as usize + i] = crc32fast::hash(chunk);
            }
            self.queue(first, data)?;
            return Ok(first << super::format::BLOCK_SHIFT);
        }
        if !self.streams[s].open || self.streams[s].buf.len() + rec.len() > BLOCK {
            self.close_stream(s)?;
            let b = self.alloc(1);
            let st = &mut self.streams[s];
            st.block = b;
            st.open = true;
            st.buf.clear();
        }
        let st = &mut self.streams[s];
        let off = (st.block << super::format::BLOCK_SHIFT) + st.buf.len() as u64;
        st.buf.extend_from_slice(rec);
        Ok(off)
    }

    fn close_stream(&mut self, s: usize) -> Result<()> {
        if !self.streams[s].open {
            return Ok(());
        }
        let mut fresh = self.spare.pop().unwrap_or_default();
        fresh.clear();
        let st = &mut self.streams[s];
        st.open = false;
        st.buf.resize(BLOCK, 0);
        let block = st.block;
        let data = std::mem::replace(&mut st.buf, fresh);
        self.crcs[block as usize] = crc32fast::hash(&data);
        self.queue(block, data)
    }

    fn queue(&mut self, block: u64, data: Vec<u8>) -> Result<()> {
        self.pending_bytes += data.len();
        self.pending.push((block, data));
        if self.pending_bytes >= FLUSH_BYTES {
            self.flush_pending()?;
        }
        Ok(())
    }

    /// Writes every completed block, coalescing adjacent ones into one positioned write.
    fn flush_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.pending.sort_unstable_by_key(|p| p.0);
        let mut run: Vec<u8> = Vec::with_capacity(self.pending_bytes);
        let mut run_start = 0u64;
        let mut run_end = 0u64;
        let pending = std::mem::take(&mut self.pending);
        for (block, data) in pending {
            let off = block << super::format::BLOCK_SHIFT;
            if !run.is_empty() && off != run_end {
                wfs::write_all_at(&mut *self.file, &run, run_start)
                    .map_err(|e| Error::io("pwrite", &self.path, e))?;
                run.clear();
            }
            if run.is_empty() {
                run_start = off;
            }
            run.extend_from_slice(&data);
            run_end = run_start + run.len() as u64;
            if self.spare.len() < 8 && data.capacity() <= 4 * BLOCK {
                self.spare.push(data);
            }
        }
        if !run.is_empty() {
            wfs::write_all_at(&mut *self.file, &run, run_start)
                .map_err(|e| Error::io("pwrite", &self.path, e))?;
        }
        self.pending_bytes = 0;
        (self.progress)(Progress::Blocks)
    }

    /// Writes the meta record, every pending block and the tail (CRC table, directory,
    /// footer), then fdatasyncs the file. Returns the file's length in bytes.
    /// Errors: `Io` (`pwrite`, `fdatasync`), or what the progress callback returns.
    pub(crate) fn finish(mut self, meta: &Meta) -> Result<u64> {
        let mut rec = Vec::new();
        meta.encode(&mut rec);
        let meta_off = self.append(NODE, &rec)?;
        self.close_stream(NODE)?;
        self.close_stream(LEAF)?;
        self.flush_pending()?;
        let nblocks = self.next_block;
        let mut tail = Vec::with_capacity(self.crcs.len() * 4 + 128);
        for c in &self.crcs {
            tail.extend_from_slice(&c.to_le_bytes());
        }
        let dir_entries = nblocks.div_ceil(CRCS_PER_PAGE);
        let mut dir = Vec::with_capacity(dir_entries as usize * 4);
        for page in tail.chunks(BLOCK) {
            dir.extend_from_slice(&crc32fast::hash(page).to_le_bytes());
        }
        tail.extend_from_slice(&dir);
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        footer.extend_from_slice(MAGIC);
        footer.extend_from_slice(&FORMAT.to_le_bytes());
        footer.extend_from_slice(&(BLOCK as u32).to_le_bytes());
        footer.extend_from_slice(&nblocks.to_le_bytes());
        footer.extend_from_slice(&meta_off.to_le_bytes());
        footer.extend_from_slice(&(rec.len() as u64).to_le_bytes());
        footer.extend_from_slice(&meta.first_lsn.to_le_bytes());
        footer.extend_from_slice(&meta.last_lsn.to_le_bytes());
        footer.extend_from_slice(&(dir_entries as u32).to_le_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(&dir);
        h.update(&footer);
        footer.extend_from_slice(&h.finalize().to_le_bytes());
        debug_assert_eq!(footer.len(), FOOTER_LEN);
        tail.extend_from_slice(&footer);
        let tail_off = nblocks << super::format::BLOCK_SHIFT;
        wfs::write_all_at(&mut *self.file, &tail, tail_off)
            .map_err(|e| Error::io("pwrite", &self.path, e))?;
        wfs::sync_data(&mut *self.file).map_err(|e| Error::io("fdatasync", &self.path, e))?;
        Ok(tail_off + tail.len() as u64)
    }
}

/// A registered tree as recorded in an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    pub(crate) tag: u8,
    pub(crate) versioned: bool,
    pub(crate) name: String,
}

/// A non-empty tree's root in an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RootEntry {
    pub(crate) tag: u8,
    /// File offset of the root record (a leaf or an inner node).
    pub(crate) off: u64,
    /// Slots in the tree (tombstones included).
    pub(crate) count: u64,
    /// Live and dead slots and the largest commit version (0 for trees that keep no versions).
    pub(crate) summary: Summary,
    /// The tree's bloom filter `(offset, bytes)` — `(0, 0)`: none (base images have none).
    pub(crate) bloom: (u64, u64),
}

/// The meta record: what an image holds and as of which WAL position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The image holds the effect of the WAL records `first_lsn..=last_lsn`.
    pub(crate) first_lsn: u64,
    pub(crate) last_lsn: u64,
    /// Commit version and history floor after record `last_lsn`.
    pub(crate) version: u64,
    pub(crate) floor: u64,
    /// The registry after record `last_lsn` (the `history` tree is implicit).
    pub(crate) trees: Vec<TreeEntry>,
    /// Roots of the non-empty trees, in tag order.
    pub(crate) roots: Vec<RootEntry>,
}

impl Meta {
    /// `T_META | varint body_len | body`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let mut body = Vec::new();
        put_varint(&mut body, self.version);
        put_varint(&mut body, self.floor);
        put_varint(&mut body, self.first_lsn);
        put_varint(&mut body, self.last_lsn);
        put_varint(&mut body, self.trees.len() as u64);
        for t in &self.trees {
            body.push(t.tag);
            body.push(u8::from(t.versioned));
            put_varint(&mut body, t.name.len() as u64);
            body.extend_from_slice(t.name.as_bytes());
        }
        put_varint(&mut body, self.roots.len() as u64);
        for r in &self.roots {
            body.push(r.tag);
            put_varint(&mut body, r.off);
            put_varint(&mut body, r.count);
            put_varint(&mut body, r.summary.live);
            put_varint(&mut body, r.summary.dead);
            put_varint(&mut body, r.summary.max_stamp);
            put_varint(&mut body, r.bloom.0);
            put_varint(&mut body, r.bloom.1);
        }
        out.push(T_META);
        put_varint(out, body.len() as u64);
        out.extend_from_slice(&body);
    }
}

/// An inner node under construction.
struct Open {
    /// Key offset of the node's edge byte (all its keys share `key[..edge]`).
    edge: usize,
    children: Vec<(u8, u64)>,
    /// Some child is an inner node (not only leaves).
    inner_children: bool,
    terminal: Option<u64>,
    summary: Summary,
}

/// Builds one tree's ART from keys in strictly ascending order (see the module docs).
pub(crate) struct TrieBuilder {
    /// Leaves carry versions and nodes carry summaries (versioned trees, the history tree).
    versions: bool,
    /// The pending key (its leaf is written when the next key arrives).
    prev: Vec<u8>,
    has_pending: bool,
    pend_value: Vec<u8>,
    pend_live: bool,
    pend_version: u64,
    /// Longest common prefix of the pending key with the key before it.
    lcp_prev: usize,
    stack: Vec<Open>,
    spare: Vec<Vec<(u8, u64)>>,
    count: u64,
    rec: Vec<u8>,
    /// Key hashes for the bloom filter (`None`: no filter).
    hashes: Option<Vec<u64>>,
}

fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl TrieBuilder {
    /// A builder for a tree whose leaves carry commit versions (and nodes summaries) when
    /// `versions` is set, with a bloom filter of its keys when `bloom` is set.
    pub(crate) fn new(versions: bool, bloom: bool) -> Self {
        TrieBuilder {
            versions,
            prev: Vec::new(),
            has_pending: false,
            pend_value: Vec::new(),
            pend_live: false,
            pend_version: 0,
            lcp_prev: 0,
            stack: Vec::new(),
            spare: Vec::new(),
            count: 0,
            rec: Vec::new(),
            hashes: bloom.then(Vec::new),
        }
    }

    /// Adds the next key (strictly greater than the previous one) with its value (`None`: a
    /// tombstone) written by commit `version`.
    /// Errors: `InvalidArgument` for a key out of order (an engine bug), `Io` from the sink.
    pub(crate) fn push(
        &mut self,
        sink: &mut BlockSink<'_>,
        key: &[u8],
        value: Option<&[u8]>,
        version: u64,
    ) -> Result<()> {
        if self.has_pending {
            let l = lcp(&self.prev, key);
            let ascending = l < key.len() && (l == self.prev.len() || self.prev[l] < key[l]);
            if !ascending {
                return Err(Error::InvalidArgument(
                    "image keys must be written in strictly ascending order".into(),
                ));
            }
            self.place_pending(sink, l)?;
            self.close_above(sink, l)?;
            self.lcp_prev = l;
        }
        self.prev.clear();
        self.prev.extend_from_slice(key);
        self.pend_value.clear();
        if let Some(v) = value {
            self.pend_value.extend_from_slice(v);
        }
        self.pend_live = value.is_some();
        self.pend_version = version;
        self.has_pending = true;
        self.count += 1;
        if let Some(h) = &mut self.hashes {
            h.push(key_hash(key));
        }
        Ok(())
    }

    fn leaf_summary(&self) -> Summary {
        Summary {
            live: u64::from(self.pend_live),
            dead: u64::from(!self.pend_live),
            max_stamp: if self.versions { self.pend_version } else { 0 },
        }
    }

    fn write_pending_leaf(&mut self, sink: &mut BlockSink<'_>, suffix_from: usize) -> Result<u64> {
        self.rec.clear();
        let value = self.pend_live.then_some(self.pend_value.as_slice());
        let suffix = self.prev.get(suffix_from..).unwrap_or_default();
        encode_leaf(
            &mut self.rec,
            suffix,
            value,
            self.versions.then_some(self.pend_version),
        );
        sink.append(LEAF, &self.rec)
    }

    fn push_open(&mut self, edge: usize) {
        let mut children = self.spare.pop().unwrap_or_default();
        children.clear();
        self.stack.push(Open {
            edge,
            children,
            inner_children: false,
            terminal: None,
            summary: Summary::default(),
        });
    }

    /// Writes the pending leaf into the open node at the deeper of its two branch points
    /// (`lcp_prev` with the key before, `l` with the key after).
    fn place_pending(&mut self, sink: &mut BlockSink<'_>, l: usize) -> Result<()> {
        let d = self.lcp_prev.max(l);
        if self.stack.last().is_none_or(|t| t.edge < d) {
            self.push_open(d);
        }
        let s = self.leaf_summary();
        let (edge, off, terminal) = if self.prev.len() == d {
            (0, self.write_pending_leaf(sink, d)?, true)
        } else {
            (self.prev[d], self.write_pending_leaf(sink, d + 1)?, false)
        };
        let Some(top) = self.stack.last_mut() else {
            return Err(Error::InvalidArgument(
                "image builder lost its open node".into(),
            ));
        };
        if terminal {
            top.terminal = Some(off);
        } else {
            top.children.push((edge, off));
        }
        top.summary.add(s);
        Ok(())
    }

    fn write_node(
        &mut self,
        sink: &mut BlockSink<'_>,
        node: &Open,
        prefix_from: usize,
    ) -> Result<u64> {
        self.rec.clear();
        let prefix = self.prev.get(prefix_from..node.edge).unwrap_or_default();
        encode_inner(
            &mut self.rec,
            prefix,
            &node.children,
            node.terminal,
            self.versions.then_some(node.summary),
        );
        // A node whose children are all leaves goes right after them, into the leaf stream:
        // a lookup's last node and its leaf then share a block (one page, one TLB entry), and
        // the node stream keeps only the upper levels, which stay dense.
        let stream = if node.inner_children { NODE } else { LEAF };
        sink.append(stream, &self.rec)
    }

    /// Writes every open node deeper than `l` and attaches it to its parent (creating the
    /// parent at depth `l` when no open node is there).
    fn close_above(&mut self, sink: &mut BlockSink<'_>, l: usize) -> Result<()> {
        while self.stack.last().is_some_and(|t| t.edge > l) {
            let Some(node) = self.stack.pop() else { break };
            let parent_edge = match self.stack.last() {
                Some(t) if t.edge >= l => t.edge,
                _ => l,
            };
            let off = self.write_node(sink, &node, parent_edge + 1)?;
            if self.stack.last().is_none_or(|t| t.edge < l) {
                self.push_open(l);
            }
            let edge = self.prev[parent_edge];
            if let Some(parent) = self.stack.last_mut() {
                parent.children.push((edge, off));
                parent.inner_children = true;
                parent.summary.add(node.summary);
            }
            self.spare.push(node.children);
        }
        Ok(())
    }

    /// Writes the bloom filter of the keys pushed (if enabled): `(offset, bytes)`.
    fn write_bloom(&mut self, sink: &mut BlockSink<'_>) -> Result<(u64, u64)> {
        let Some(hashes) = self.hashes.take() else {
            return Ok((0, 0));
        };
        let bits = (hashes.len() as u64 * BLOOM_BITS_PER_KEY).max(1);
        let blocks = bits.div_ceil((BLOOM_BLOCK * 8) as u64);
        let mut filter = vec![0u8; blocks as usize * BLOOM_BLOCK];
        for h in hashes {
            let (block, probes) = bloom_probe(h, blocks);
            let base = block as usize * BLOOM_BLOCK;
            for p in probes {
                filter[base + usize::from(p >> 3)] |= 1 << (p & 7);
            }
        }
        let off = sink.append(NODE, &filter)?;
        Ok((off, filter.len() as u64))
    }

    /// Writes what is left; returns the tree's root (`None` for an empty tree).
    /// Errors: `Io` from the sink.
    pub(crate) fn finish(mut self, sink: &mut BlockSink<'_>, tag: u8) -> Result<Option<RootEntry>> {
        if !self.has_pending {
            return Ok(None);
        }
        if self.stack.is_empty() {
            let summary = self.leaf_summary();
            let off = self.write_pending_leaf(sink, 0)?;
            let bloom = self.write_bloom(sink)?;
            return Ok(Some(RootEntry {
                tag,
                off,
                count: self.count,
                summary,
                bloom,
            }));
        }
        self.place_pending(sink, 0)?;
        while self.stack.len() > 1 {
            let Some(node) = self.stack.pop() else { break };
            let parent_edge = self.stack.last().map_or(0, |t| t.edge);
            let off = self.write_node(sink, &node, parent_edge + 1)?;
            let edge = self.prev[parent_edge];
            if let Some(parent) = self.stack.last_mut() {
                parent.children.push((edge, off));
                parent.inner_children = true;
                parent.summary.add(node.summary);
            }
        }
        let Some(root) = self.stack.pop() else {
            return Ok(None);
        };
        let off = self.write_node(sink, &root, 0)?;
        let bloom = self.write_bloom(sink)?;
        Ok(Some(RootEntry {
            tag,
            off,
            count: self.count,
            summary: root.summary,
            bloom,
        }))
    }
}
