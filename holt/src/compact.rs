//! Writing the next image from layers: a **flush** writes the frozen in-memory delta, a
//! **merge** rewrites consecutive images as one, a **checkpoint** writes the frozen delta and
//! every image as a new base. All three are one k-way merge of sorted layers (newest slot per
//! key wins) into the streaming image writer, run without any engine lock while commits go on.
//!
//! What an image leaves out ([`mvcc::drop_in_image`]): history rows at or below the floor
//! (garbage everywhere), and — only in a base, which has no older layer to hide — tombstones of
//! unversioned trees and tombstones of versioned trees at or below the floor.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::image::{set, BlockSink, Image, Meta, ProgressFn, TreeEntry, TrieBuilder};
use crate::layers::{Head, Layer, Merged};
use crate::mvcc;
use crate::registry::HISTORY_TAG;
use crate::state::Frozen;
use crate::vfs::WalFs;

/// What the next image holds: the frozen delta (if any) over consecutive images (newest first),
/// covering the WAL records `first..=last`, with the header fields of its newest input.
pub(crate) struct Job<'a> {
    pub(crate) frozen: Option<&'a Frozen>,
    pub(crate) inputs: &'a [Arc<Image>],
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) version: u64,
    /// The history floor recorded in the image (the floor after record `last`).
    pub(crate) floor: u64,
    pub(crate) trees: Vec<TreeEntry>,
    /// The durable floor garbage is judged against (at least `floor`).
    pub(crate) drop_floor: u64,
}

/// Writes the image of `job` to `dir/<tmp name>` through `fs` and fdatasyncs it; returns the
/// `.tmp` path and the file's size. A stale file of that name is replaced. `progress` runs when
/// the file exists and after every batch of blocks; an error from it aborts the write. A write
/// that fails removes its `.tmp` file (best effort: one it cannot remove is a stale `.tmp` that
/// recovery ignores and the next flush or merge deletes).
/// Errors: `Io`, `Corrupt` (a bad block of an input image), or what `progress` returns.
pub(crate) fn write(
    fs: &dyn WalFs,
    dir: &Path,
    job: &Job<'_>,
    progress: &mut ProgressFn<'_>,
) -> Result<(PathBuf, u64)> {
    let tmp = dir.join(set::tmp_name(job.first, job.last));
    match fs.remove(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("unlink", &tmp, e)),
    }
    match write_tmp(fs, &tmp, job, progress) {
        Ok(bytes) => Ok((tmp, bytes)),
        Err(e) => {
            discard_tmp(fs, &tmp);
            Err(e)
        }
    }
}

/// Removes the `.tmp` file of an image write that will not be installed. Best effort: the
/// error being reported is the write's; a `.tmp` that stays is ignored by recovery and deleted
/// by the next flush or merge.
pub(crate) fn discard_tmp(fs: &dyn WalFs, tmp: &Path) {
    let _ = fs.remove(tmp);
}

/// The body of [`write`]: creates `tmp` (which must not exist) and writes the image into it;
/// returns the file's size. The sink (and its file handle) is dropped before it returns.
fn write_tmp(
    fs: &dyn WalFs,
    tmp: &Path,
    job: &Job<'_>,
    progress: &mut ProgressFn<'_>,
) -> Result<u64> {
    let mut sink = BlockSink::create(fs, tmp, progress)?;
    let bottom = job.first == 1;
    let mut roots = Vec::new();
    let mut tags: Vec<(u8, bool)> = vec![(HISTORY_TAG, false)];
    tags.extend(job.trees.iter().map(|t| (t.tag, t.versioned)));
    tags.sort_unstable();
    for (tag, versioned) in tags {
        let mut layers: Vec<Layer<'_>> = Vec::new();
        if let Some(f) = job.frozen {
            let t = &f.trees[usize::from(tag)];
            if !t.is_empty() {
                layers.push(Layer::Mem(t));
            }
        }
        for img in job.inputs {
            if let Some(root) = img.root(tag) {
                layers.push(Layer::Img(img, root));
            }
        }
        if layers.is_empty() {
            continue;
        }
        let cursors = layers
            .iter()
            .map(|l| l.list(&[], None, None, None))
            .collect::<Result<Vec<_>>>()?;
        let mut merged = Merged::new(cursors)?;
        let mut builder = TrieBuilder::new(versioned || tag == HISTORY_TAG, !bottom);
        while let Some(head) = merged.head() {
            if let Head::Key { key, slot, .. } = head {
                if !mvcc::drop_in_image(tag, versioned, slot, job.drop_floor, bottom) {
                    builder.push(&mut sink, key, slot.value, slot.version)?;
                }
            }
            merged.advance()?;
        }
        if let Some(root) = builder.finish(&mut sink, tag)? {
            roots.push(root);
        }
    }
    let meta = Meta {
        first_lsn: job.first,
        last_lsn: job.last,
        version: job.version,
        floor: job.floor,
        trees: job.trees.clone(),
        roots,
    };
    sink.finish(&meta)
}

/// Installs the written and synced image `tmp` as `dir/image-<first>-<last>.holt` (`rename`,
/// then `fsync` of `dir`, after which it survives power loss) and maps it.
/// Errors: `Io` (`rename`, `fsync`, opening the map), `Corrupt` if it does not read back.
pub(crate) fn install(
    fs: &dyn WalFs,
    dir: &Path,
    first: u64,
    last: u64,
    tmp: &Path,
) -> Result<Arc<Image>> {
    let path = dir.join(set::file_name(first, last));
    fs.rename(tmp, &path)
        .map_err(|e| Error::io("rename", tmp, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io("fsync", dir, e))?;
    Ok(Arc::new(Image::open(&path)?))
}
