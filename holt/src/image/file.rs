//! One mapped image file: footer and directory checked at open, every data block checked
//! against its CRC the first time a read touches it (a bad block fails that read with
//! `Error::Corrupt` naming the file and the block), the meta record decoded at open.
//!
//! This is the crate's only `unsafe` for images: mapping the file. See [`Image::open`].

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::Mmap;

use crate::art::Summary;
use crate::error::{Error, Result};
use crate::registry::validate_name;
use crate::registry::HISTORY_TAG;

use super::format::{
    get_varint, u32_at, u64_at, BLOCK, BLOCK_SHIFT, CRCS_PER_PAGE, FOOTER_LEN, FORMAT, FORMAT_1,
    MAGIC, T_META,
};
use super::node::{self, ParseError, Rec};
use super::writer::{Meta, RootEntry, TreeEntry};

/// A tree's root in an image, with its whole-tree summary.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Root {
    pub(crate) off: u64,
    pub(crate) summary: Summary,
    /// The tree's bloom filter `(offset, bytes)`, if the image has one.
    pub(crate) bloom: Option<(u64, u64)>,
}

/// One immutable, mapped image file (see the module docs).
pub(crate) struct Image {
    path: PathBuf,
    map: Mmap,
    /// Data blocks (`BLOCK` bytes each) at the start of the file.
    nblocks: u64,
    /// Byte offset of the CRC table (right after the data blocks).
    table_off: usize,
    /// CRC of each page of the CRC table (checked at open).
    dir: Box<[u32]>,
    /// One bit per data block: its CRC was checked.
    block_ok: Box<[AtomicU64]>,
    /// One bit per page of the CRC table: checked against the directory.
    page_ok: Box<[AtomicU64]>,
    meta: Meta,
    /// Roots by tag (`None`: the tree is empty or not registered in this image).
    roots: Box<[Option<Root>]>,
    bytes: u64,
    /// Footer format number (1 or 2).
    format: u32,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("path", &self.path)
            .field("lsn", &(self.meta.first_lsn..=self.meta.last_lsn))
            .field("bytes", &self.bytes)
            .finish()
    }
}

fn bits(n: u64) -> Box<[AtomicU64]> {
    (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect()
}

#[inline]
fn test_bit(b: &[AtomicU64], i: u64) -> bool {
    b.get((i >> 6) as usize)
        .is_some_and(|w| w.load(Ordering::Relaxed) >> (i & 63) & 1 == 1)
}

fn set_bit(b: &[AtomicU64], i: u64) {
    if let Some(w) = b.get((i >> 6) as usize) {
        w.fetch_or(1 << (i & 63), Ordering::Relaxed);
    }
}

impl Image {
    /// Maps `path` and checks its footer, CRC directory and meta record. Cost: O(1) in the
    /// number of keys (the directory has one entry per 4 MiB of data).
    ///
    /// Errors: `Io` (`open`, `stat`, `mmap`; a vanished file is `Io` with kind `NotFound`),
    /// `Corrupt` naming the file for a bad footer, directory or meta record.
    #[allow(unsafe_code)] // memmap2::Mmap::map is unsafe; see the SAFETY note.
    pub(crate) fn open(path: &Path) -> Result<Image> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        let bad = |off: u64, reason: &str| Error::corrupt(path, off, reason.to_string());
        if len < FOOTER_LEN as u64 {
            return Err(bad(0, "image file shorter than its footer"));
        }
        // SAFETY: the map is read-only and image files are immutable once renamed into place:
        // holt writes an image completely (under a `.tmp` name), fdatasyncs it and renames it,
        // and afterwards only ever unlinks it, which leaves an existing mapping valid. Nothing
        // in holt truncates or rewrites a mapped file; an outside process doing so is outside
        // the store's contract. Every read through the map is bounds-checked.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io("mmap", path, e))?;
        let len = map.len();
        let foot_off = len - FOOTER_LEN;
        let footer = &map[foot_off..];
        if &footer[..8] != MAGIC {
            return Err(bad(foot_off as u64, "not a holt image (bad footer magic)"));
        }
        let field32 = |o: usize| u32_at(footer, o).unwrap_or(0);
        let field64 = |o: usize| u64_at(footer, o).unwrap_or(0);
        let format = field32(8);
        if format != FORMAT && format != FORMAT_1 {
            return Err(bad(foot_off as u64, "unknown image format"));
        }
        if field32(12) != BLOCK as u32 {
            return Err(bad(foot_off as u64, "unsupported image block size"));
        }
        let nblocks = field64(16);
        let (meta_off, meta_len) = (field64(24), field64(32));
        let (first_lsn, last_lsn) = (field64(40), field64(48));
        let dir_entries = u64::from(field32(56));
        let stored_crc = field32(60);
        let layout = (|| -> Option<(usize, usize)> {
            let table_off = usize::try_from(nblocks.checked_mul(BLOCK as u64)?).ok()?;
            let dir_off = table_off.checked_add(usize::try_from(nblocks.checked_mul(4)?).ok()?)?;
            let end = dir_off.checked_add(usize::try_from(dir_entries * 4).ok()?)?;
            (end == foot_off && dir_entries == nblocks.div_ceil(CRCS_PER_PAGE))
                .then_some((table_off, dir_off))
        })();
        let Some((table_off, dir_off)) = layout else {
            return Err(bad(
                foot_off as u64,
                "footer geometry does not match the file length",
            ));
        };
        let mut h = crc32fast::Hasher::new();
        h.update(&map[dir_off..len - 4]);
        if h.finalize() != stored_crc {
            return Err(bad(dir_off as u64, "footer or CRC directory CRC mismatch"));
        }
        let dir: Box<[u32]> = map[dir_off..foot_off]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let mut img = Image {
            path: path.to_path_buf(),
            block_ok: bits(nblocks),
            page_ok: bits(dir_entries),
            map,
            nblocks,
            table_off,
            dir,
            meta: Meta {
                first_lsn,
                last_lsn,
                version: 0,
                floor: 0,
                trees: Vec::new(),
                roots: Vec::new(),
            },
            roots: vec![None; 256].into_boxed_slice(),
            bytes: len as u64,
            format,
        };
        let meta_len =
            usize::try_from(meta_len).map_err(|_| bad(meta_off, "meta record too large"))?;
        let rec = img.bytes_at(meta_off, meta_len)?;
        let meta = parse_meta(rec).map_err(|r| bad(meta_off, r))?;
        if meta.first_lsn != first_lsn || meta.last_lsn != last_lsn || first_lsn > last_lsn {
            return Err(bad(
                meta_off,
                "meta record LSN range does not match the footer",
            ));
        }
        let mut roots = vec![None; 256];
        for r in &meta.roots {
            if r.off >= nblocks << BLOCK_SHIFT {
                return Err(bad(meta_off, "a root lies outside the data blocks"));
            }
            let bloom = (r.bloom.1 > 0).then_some(r.bloom);
            if let Some((boff, blen)) = bloom {
                let fits = boff
                    .checked_add(blen)
                    .is_some_and(|e| e <= nblocks << BLOCK_SHIFT);
                if !fits || blen % super::format::BLOOM_BLOCK as u64 != 0 {
                    return Err(bad(meta_off, "a bloom filter lies outside the data blocks"));
                }
            }
            roots[usize::from(r.tag)] = Some(Root {
                off: r.off,
                summary: r.summary,
                bloom,
            });
        }
        img.roots = roots.into_boxed_slice();
        img.meta = meta;
        Ok(img)
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the image was written by a format-2 store (footer format 2; see
    /// `store_format`).
    pub(crate) fn written_by_format_2_store(&self) -> bool {
        self.format == FORMAT
    }

    /// The file's length in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// What the image holds and as of which WAL position.
    pub(crate) fn meta(&self) -> &Meta {
        &self.meta
    }

    /// First WAL record whose effect the image holds.
    pub(crate) fn first_lsn(&self) -> u64 {
        self.meta.first_lsn
    }

    /// Last WAL record whose effect the image holds.
    pub(crate) fn last_lsn(&self) -> u64 {
        self.meta.last_lsn
    }

    /// The root of tree `tag`, `None` when the image holds no slot of it.
    #[inline]
    pub(crate) fn root(&self, tag: u8) -> Option<Root> {
        self.roots.get(usize::from(tag)).copied().flatten()
    }

    /// An error naming this file.
    pub(crate) fn corrupt(&self, off: u64, reason: impl Into<String>) -> Error {
        Error::corrupt(&self.path, off, reason)
    }

    #[cold]
    fn verify_page(&self, page: u64) -> Result<()> {
        let start = self.table_off + (page * CRCS_PER_PAGE * 4) as usize;
        let end = (start + BLOCK).min(self.table_off + (self.nblocks * 4) as usize);
        let want = self.dir.get(page as usize).copied();
        let data = self.map.get(start..end);
        match (want, data) {
            (Some(w), Some(d)) if crc32fast::hash(d) == w => {
                set_bit(&self.page_ok, page);
                Ok(())
            }
            _ => Err(self.corrupt(start as u64, format!("CRC table page {page} CRC mismatch"))),
        }
    }

    #[cold]
    fn verify_block(&self, block: u64) -> Result<()> {
        let page = block / CRCS_PER_PAGE;
        if !test_bit(&self.page_ok, page) {
            self.verify_page(page)?;
        }
        let want = u32_at(&self.map, self.table_off + (block * 4) as usize);
        let start = (block << BLOCK_SHIFT) as usize;
        let data = self.map.get(start..start + BLOCK);
        match (want, data) {
            (Some(w), Some(d)) if crc32fast::hash(d) == w => {
                set_bit(&self.block_ok, block);
                Ok(())
            }
            _ => Err(self.corrupt(start as u64, format!("image block {block} CRC mismatch"))),
        }
    }

    /// Checks the CRC of every data block not checked yet (and the CRC table pages they need),
    /// calling `bad` with the `Corrupt` error of each block that fails, in block order. Returns
    /// the number of data blocks. Cost: one read of the whole file (the first time).
    pub(crate) fn scrub(&self, bad: &mut dyn FnMut(Error)) -> u64 {
        let mut block = 0;
        while block < self.nblocks {
            let page = block / CRCS_PER_PAGE;
            if !test_bit(&self.page_ok, page) {
                if let Err(e) = self.verify_page(page) {
                    // One report for the page; its blocks cannot be checked.
                    bad(e);
                    block = (page + 1) * CRCS_PER_PAGE;
                    continue;
                }
            }
            if !test_bit(&self.block_ok, block) {
                if let Err(e) = self.verify_block(block) {
                    bad(e);
                }
            }
            block += 1;
        }
        self.nblocks
    }

    /// `len` bytes at data offset `off`, after checking every block they touch.
    /// Errors: `Corrupt` for a range outside the data blocks or a block with a bad CRC.
    #[inline]
    pub(crate) fn bytes_at(&self, off: u64, len: usize) -> Result<&[u8]> {
        let end = off.checked_add(len as u64);
        let data_end = self.nblocks << BLOCK_SHIFT;
        let Some(end) = end.filter(|&e| e <= data_end) else {
            return Err(self.corrupt(off, "record runs past the data blocks"));
        };
        if len > 0 {
            let (first, last) = (off >> BLOCK_SHIFT, (end - 1) >> BLOCK_SHIFT);
            for b in first..=last {
                if !test_bit(&self.block_ok, b) {
                    self.verify_block(b)?;
                }
            }
        }
        Ok(&self.map[off as usize..end as usize])
    }

    /// The first byte at data offset `off`, read without any check: a cache warm-up hint only
    /// (the value must not be used; 0 past the end).
    #[inline]
    pub(crate) fn peek(&self, off: u64) -> u8 {
        self.map.get(off as usize).copied().unwrap_or(0)
    }

    /// The record (leaf or inner node) at data offset `off`.
    /// Errors: `Corrupt` for a bad block or bytes that are not a valid record.
    #[inline]
    pub(crate) fn record(&self, off: u64) -> Result<Rec<'_>> {
        let data_end = self.nblocks << BLOCK_SHIFT;
        if off >= data_end {
            return Err(self.corrupt(off, "reference past the data blocks"));
        }
        let block_end = ((off >> BLOCK_SHIFT) + 1) << BLOCK_SHIFT;
        let head = self.bytes_at(off, (block_end - off) as usize)?;
        match node::parse(head) {
            Ok(r) => Ok(r),
            Err(ParseError::Short(total)) => {
                let full = self.bytes_at(off, total)?;
                node::parse(full).map_err(|e| self.corrupt(off, format!("bad record: {e:?}")))
            }
            Err(ParseError::Bad(reason)) => Err(self.corrupt(off, format!("bad record: {reason}"))),
        }
    }
}

/// Decodes a meta record (see [`Meta::encode`]).
fn parse_meta(rec: &[u8]) -> std::result::Result<Meta, &'static str> {
    if rec.first() != Some(&T_META) {
        return Err("not a meta record");
    }
    let mut pos = 1usize;
    let v = |pos: &mut usize| get_varint(rec, pos).ok_or("truncated meta record");
    let body_len = v(&mut pos)?;
    if (rec.len() - pos) as u64 != body_len {
        return Err("meta record length mismatch");
    }
    let version = v(&mut pos)?;
    let floor = v(&mut pos)?;
    let first_lsn = v(&mut pos)?;
    let last_lsn = v(&mut pos)?;
    let ntrees = v(&mut pos)?;
    if ntrees > 255 {
        return Err("too many trees in the registry");
    }
    let mut trees: Vec<TreeEntry> = Vec::with_capacity(ntrees as usize);
    for _ in 0..ntrees {
        let tag = *rec.get(pos).ok_or("truncated meta record")?;
        let flags = *rec.get(pos + 1).ok_or("truncated meta record")?;
        pos += 2;
        let nlen = usize::try_from(v(&mut pos)?).map_err(|_| "bad tree name length")?;
        let name = rec
            .get(pos..pos.saturating_add(nlen))
            .ok_or("truncated meta record")?;
        pos += nlen;
        let name = String::from_utf8(name.to_vec()).map_err(|_| "tree name is not UTF-8")?;
        if tag == HISTORY_TAG || flags > 1 || validate_name(&name).is_err() {
            return Err("bad registry entry");
        }
        if trees.iter().any(|t| t.tag == tag || t.name == name) {
            return Err("duplicate registry entry");
        }
        trees.push(TreeEntry {
            tag,
            versioned: flags == 1,
            name,
        });
    }
    let nroots = v(&mut pos)?;
    if nroots > 256 {
        return Err("too many roots");
    }
    let mut roots: Vec<RootEntry> = Vec::with_capacity(nroots as usize);
    for _ in 0..nroots {
        let tag = *rec.get(pos).ok_or("truncated meta record")?;
        pos += 1;
        let off = v(&mut pos)?;
        let count = v(&mut pos)?;
        let summary = Summary {
            live: v(&mut pos)?,
            dead: v(&mut pos)?,
            max_stamp: v(&mut pos)?,
        };
        let bloom = (v(&mut pos)?, v(&mut pos)?);
        if tag != HISTORY_TAG && !trees.iter().any(|t| t.tag == tag) {
            return Err("root of an unregistered tree");
        }
        if roots.iter().any(|r| r.tag == tag) {
            return Err("duplicate root");
        }
        roots.push(RootEntry {
            tag,
            off,
            count,
            summary,
            bloom,
        });
    }
    if pos != rec.len() {
        return Err("trailing bytes in meta record");
    }
    Ok(Meta {
        first_lsn,
        last_lsn,
        version,
        floor,
        trees,
        roots,
    })
}
