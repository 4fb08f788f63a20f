//! The legacy checkpoint format (format 1, from before images), kept so that stores written by
//! earlier versions still open: at open, when a store has no image, its newest valid
//! `checkpoint-<20-digit lsn>.ckpt` is loaded into the in-memory delta (O(keys), once) and the
//! first flush writes it as the base image, after which the old file is deleted. holt no longer
//! writes this format (the writer below exists in test builds only, to make fixtures).
//!
//! The file is a sequence of blocks, each `u32le len | u32le crc32(body) | body`, body
//! starting with a block type:
//!
//! ```text
//! 1 header   magic "HOLTCKP1" | u32 format (1) | u64 lsn | u64 version | u64 history_floor
//!            | u16 n | n × (u8 tag | u8 versioned | u32 nlen name)
//! 2 entries  u32 n | n × (u8 tag | u32 klen key | u64 slot_version | u8 kind (0 tombstone, 1 value)
//!            | [u32 vlen value])      — trees in tag order, keys in byte order
//! 3 footer   u64 total_entries | u64 entry_blocks
//! ```
//!
//! A file with a bad CRC, bad framing or no footer is rejected with `Error::Corrupt`.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::codec::Dec;
#[cfg(test)]
use crate::codec::{put_bytes, put_u16, put_u32, put_u64, put_u8};
use crate::error::{Error, Result};
#[cfg(test)]
use crate::mvcc;
use crate::registry::{TreeMeta, HISTORY_NAME, HISTORY_TAG};
use crate::slot::{Slot, TreeMap, Value};
use crate::state::State;
use crate::vfs::WalFs;
#[cfg(test)]
use crate::vfs::{self as wfs, WalFile};

const MAGIC: &[u8; 8] = b"HOLTCKP1";
const FORMAT: u32 = 1;
const BLOCK_HEADER: u8 = 1;
const BLOCK_ENTRIES: u8 = 2;
const BLOCK_FOOTER: u8 = 3;
/// Entry blocks are flushed once they reach this many bytes.
#[cfg(test)]
const BLOCK_TARGET: usize = 1 << 20;

/// `checkpoint-<20-digit lsn>.ckpt`.
#[cfg(test)]
pub(crate) fn file_name(lsn: u64) -> String {
    format!("checkpoint-{lsn:020}.ckpt")
}

fn parse_name(name: &str) -> Option<(u64, bool)> {
    let rest = name.strip_prefix("checkpoint-")?;
    let (digits, done) = if let Some(d) = rest.strip_suffix(".ckpt") {
        (d, true)
    } else {
        (rest.strip_suffix(".tmp")?, false)
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, done))
}

/// Checkpoint files found in a database directory.
pub(crate) struct Listing {
    /// Installed checkpoints `(lsn, path)`, newest first.
    pub(crate) installed: Vec<(u64, PathBuf)>,
    /// Leftover `.tmp` files of interrupted checkpoints.
    pub(crate) stale_tmp: Vec<PathBuf>,
}

/// Lists the checkpoint files in `dir` (through `fs`, so tests see the simulated directory).
/// Errors: `Io` (`read_dir`).
pub(crate) fn list(fs: &dyn WalFs, dir: &Path) -> Result<Listing> {
    let mut done = Vec::new();
    let mut tmp = Vec::new();
    for path in fs.list(dir).map_err(|e| Error::io("read_dir", dir, e))? {
        match path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_name)
        {
            Some((lsn, true)) => done.push((lsn, path)),
            Some((_, false)) => tmp.push(path),
            None => {}
        }
    }
    done.sort_by(|a, b| b.cmp(a));
    Ok(Listing {
        installed: done,
        stale_tmp: tmp,
    })
}

#[cfg(test)]
/// Progress points of [`write`], reported to its `progress` callback (which may abort the write
/// by returning an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteStep {
    /// The `.tmp` file exists and its header block is written.
    Header,
    /// One more entry block is written.
    Block,
}

#[cfg(test)]
/// Buffers blocks and writes them to the `.tmp` file in large positioned writes.
struct BlockWriter<'a> {
    file: Box<dyn WalFile>,
    path: &'a Path,
    buf: Vec<u8>,
    off: u64,
}

#[cfg(test)]
impl BlockWriter<'_> {
    fn block(&mut self, body: &[u8]) -> Result<()> {
        let len = u32::try_from(body.len())
            .map_err(|_| Error::InvalidArgument("checkpoint block exceeds 4 GiB".into()))?;
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf
            .extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        self.buf.extend_from_slice(body);
        if self.buf.len() >= BLOCK_TARGET {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        wfs::write_all_at(&mut *self.file, &self.buf, self.off)
            .map_err(|e| Error::io("pwrite", self.path, e))?;
        self.off += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

/// The `.tmp` name a checkpoint at `lsn` is written under before [`install`].
#[cfg(test)]
pub(crate) fn tmp_name(lsn: u64) -> String {
    format!("checkpoint-{lsn:020}.tmp")
}

#[cfg(test)]
/// Writes `state` to `dir/checkpoint-<state.lsn>.tmp` through `fs` and `fdatasync`s it; returns
/// the `.tmp` path ([`install`] gives it its final name). Any stale file of that name is
/// replaced. `progress` runs after the header and after every entry block; an error from it
/// aborts the write (the `.tmp` file stays; the next checkpoint removes it).
/// Errors: `Io` (`create`, `pwrite`, `fdatasync`), or what `progress` returned.
pub(crate) fn write(
    fs: &dyn WalFs,
    dir: &Path,
    state: &State,
    progress: &mut dyn FnMut(WriteStep) -> Result<()>,
) -> Result<PathBuf> {
    let tmp_path = dir.join(tmp_name(state.lsn));
    match fs.remove(&tmp_path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("unlink", &tmp_path, e)),
    }
    let file = fs
        .create_new(&tmp_path)
        .map_err(|e| Error::io("create", &tmp_path, e))?;
    let mut w = BlockWriter {
        file,
        path: &tmp_path,
        buf: Vec::with_capacity(BLOCK_TARGET + (BLOCK_TARGET >> 2)),
        off: 0,
    };

    let mut head = vec![BLOCK_HEADER];
    head.extend_from_slice(MAGIC);
    put_u32(&mut head, FORMAT);
    put_u64(&mut head, state.lsn);
    put_u64(&mut head, state.version);
    put_u64(&mut head, state.floor);
    put_u16(&mut head, state.registry.len() as u16);
    for m in state.registry.iter() {
        put_u8(&mut head, m.tag);
        put_u8(&mut head, u8::from(m.versioned));
        put_bytes(&mut head, m.name.as_bytes());
    }
    w.block(&head)?;
    w.flush()?;
    progress(WriteStep::Header)?;

    let mut total = 0u64;
    let mut blocks = 0u64;
    let mut body = Vec::with_capacity(BLOCK_TARGET + 64);
    let mut count = 0u32;
    let start_block = |body: &mut Vec<u8>| {
        body.clear();
        body.push(BLOCK_ENTRIES);
        body.extend_from_slice(&[0; 4]);
    };
    start_block(&mut body);
    for m in state.registry.iter() {
        for (k, s) in state.tree(m.tag).iter() {
            // MVCC garbage below the history floor is invisible to every allowed read; it is not
            // written, so a checkpoint never carries it forward (see `mvcc`).
            if mvcc::drop_in_image(
                m.tag,
                m.versioned,
                crate::layers::SlotRef::of(s),
                state.floor,
                true,
            ) {
                continue;
            }
            put_u8(&mut body, m.tag);
            put_bytes(&mut body, k);
            put_u64(&mut body, s.version);
            match s.value.as_deref() {
                Some(v) => {
                    put_u8(&mut body, 1);
                    put_bytes(&mut body, v);
                }
                None => put_u8(&mut body, 0),
            }
            count += 1;
            total += 1;
            if body.len() >= BLOCK_TARGET {
                body[1..5].copy_from_slice(&count.to_le_bytes());
                w.block(&body)?;
                blocks += 1;
                count = 0;
                start_block(&mut body);
                progress(WriteStep::Block)?;
            }
        }
    }
    if count > 0 {
        body[1..5].copy_from_slice(&count.to_le_bytes());
        w.block(&body)?;
        blocks += 1;
    }
    let mut foot = vec![BLOCK_FOOTER];
    put_u64(&mut foot, total);
    put_u64(&mut foot, blocks);
    w.block(&foot)?;
    w.flush()?;
    wfs::sync_data(&mut *w.file).map_err(|e| Error::io("fdatasync", &tmp_path, e))?;
    Ok(tmp_path)
}

#[cfg(test)]
/// Installs the fully written and synced checkpoint `tmp` (from [`write`]) as
/// `dir/checkpoint-<lsn>.ckpt`: `rename`, then `fsync` of `dir`, after which the checkpoint
/// survives power loss. Returns the installed path. Errors: `Io` (`rename`, `fsync`).
pub(crate) fn install(fs: &dyn WalFs, dir: &Path, lsn: u64, tmp: &Path) -> Result<PathBuf> {
    let final_path = dir.join(file_name(lsn));
    fs.rename(tmp, &final_path)
        .map_err(|e| Error::io("rename", tmp, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io("fsync", dir, e))?;
    Ok(final_path)
}

/// Loads and validates a checkpoint file (memory-mapped).
#[allow(unsafe_code)] // memmap2::Mmap::map is unsafe; see the SAFETY note below.
pub(crate) fn load(path: &Path) -> Result<State> {
    let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    if len == 0 {
        return Err(Error::corrupt(path, 0, "empty checkpoint file"));
    }
    // SAFETY: the mapping is read-only and nothing modifies an installed checkpoint in place:
    // checkpoints are immutable after their rename, the one writer (under the exclusive LOCK)
    // only unlinks them (a read-only process's mapping keeps the unlinked inode alive) or renames
    // a new file over the same name (a new inode), and no one truncates or rewrites one. All
    // reads are bounds-checked.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("mmap", path, e))?;
    parse(path, &map)
}

fn parse(path: &Path, data: &[u8]) -> Result<State> {
    let mut off = 0usize;
    let next_block = |off: &mut usize| -> Result<(u64, &[u8])> {
        let at = *off as u64;
        let head = data
            .get(*off..*off + 8)
            .ok_or_else(|| Error::corrupt(path, at, "truncated block header (no footer)"))?;
        let blen = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let body = data
            .get(*off + 8..*off + 8 + blen)
            .ok_or_else(|| Error::corrupt(path, at, "block runs past end of file"))?;
        if crc32fast::hash(body) != crc {
            return Err(Error::corrupt(path, at, "block CRC mismatch"));
        }
        *off += 8 + blen;
        Ok((at, body))
    };
    let bad = |at: u64| move |reason: String| Error::corrupt(path, at, reason);

    let (at, head) = next_block(&mut off)?;
    let mut d = Dec::new(head);
    let mut state = State::new();
    (|| -> std::result::Result<(), String> {
        if d.u8()? != BLOCK_HEADER || d.take(8)? != MAGIC {
            return Err("not a holt checkpoint (bad magic)".into());
        }
        let format = d.u32()?;
        if format != FORMAT {
            return Err(format!("unknown checkpoint format {format}"));
        }
        state.lsn = d.u64()?;
        state.version = d.u64()?;
        state.floor = d.u64()?;
        for _ in 0..d.u16()? {
            let tag = d.u8()?;
            let versioned = d.u8()? == 1;
            let name = String::from_utf8(d.bytes()?.to_vec())
                .map_err(|_| "tree name is not UTF-8".to_string())?;
            if tag == HISTORY_TAG {
                if name != HISTORY_NAME || versioned {
                    return Err("tag 0x00 is not the history tree".into());
                }
                continue;
            }
            state
                .registry
                .check_new(&name, tag)
                .map_err(|e| e.to_string())?;
            state.registry = state.registry.with(TreeMeta {
                name,
                tag,
                versioned,
            });
        }
        if !d.is_done() {
            return Err("trailing bytes in header block".into());
        }
        Ok(())
    })()
    .map_err(bad(at))?;

    let mut maps: Vec<TreeMap> = vec![TreeMap::new(); 256];
    let mut total = 0u64;
    let mut blocks = 0u64;
    loop {
        let (at, body) = next_block(&mut off)?;
        let mut d = Dec::new(body);
        let kind = d.u8().map_err(bad(at))?;
        match kind {
            BLOCK_ENTRIES => {
                (|| -> std::result::Result<(), String> {
                    for _ in 0..d.u32()? {
                        let tag = d.u8()?;
                        let meta = state
                            .registry
                            .get(tag)
                            .ok_or_else(|| format!("entry for unregistered tag {tag:#04x}"))?;
                        let key = d.bytes()?;
                        let version = d.u64()?;
                        let value = match d.u8()? {
                            0 if meta.versioned => None,
                            1 => Some(d.bytes()?),
                            other => return Err(format!("bad slot kind {other}")),
                        };
                        let value = Value::from_bytes(value);
                        maps[usize::from(tag)].insert(key, Slot { value, version });
                        total += 1;
                    }
                    if !d.is_done() {
                        return Err("trailing bytes in entry block".into());
                    }
                    Ok(())
                })()
                .map_err(bad(at))?;
                blocks += 1;
            }
            BLOCK_FOOTER => {
                let (want_total, want_blocks) =
                    (|| -> std::result::Result<(u64, u64), String> { Ok((d.u64()?, d.u64()?)) })()
                        .map_err(bad(at))?;
                if want_total != total || want_blocks != blocks {
                    return Err(Error::corrupt(
                        path,
                        at,
                        format!(
                            "footer counts {want_total} entries in {want_blocks} blocks, \
                             found {total} in {blocks}"
                        ),
                    ));
                }
                if off != data.len() {
                    return Err(Error::corrupt(path, off as u64, "bytes after footer"));
                }
                break;
            }
            other => {
                return Err(Error::corrupt(
                    path,
                    at,
                    format!("unknown block type {other}"),
                ));
            }
        }
    }
    state.trees = maps;
    Ok(state)
}
