//! Recovery of a store's state from its files: the image tiling plus the WAL after it
//! ([`recover_store`], shared by `Db::open` and `Db::open_read_only`), the fingerprint of the
//! files a reader or a sharing writer compares before and after ([`Fingerprint`]), and the
//! catch-up of a writer that takes a shared lock again ([`catch_up`]: the WAL records other
//! writers committed since its last LSN, or a reload when their flushes changed the images; see
//! docs/holt-format.md, "Sharing the writer lock between processes").

use std::path::Path;

use crate::error::{Error, Result};
use crate::image::set;
use crate::legacy_checkpoint;
use crate::state::State;
use crate::store_format::{self, StoreFormat};
use crate::vfs::WalFs;
use crate::wal::reader::{list_segments, recover, replay_after, Recovered};

/// The newest valid checkpoint of the format before images (`checkpoint-<lsn>.ckpt`), loaded
/// into the in-memory delta; `None` when there is none. Errors: the first checkpoint's error
/// when none of them is valid.
fn load_legacy_checkpoint(fs: &dyn WalFs, dir: &Path) -> Result<Option<State>> {
    let ckpts = legacy_checkpoint::list(fs, dir)?.installed;
    let mut first_err = None;
    for (lsn, path) in &ckpts {
        match legacy_checkpoint::load(path) {
            Ok(st) if st.lsn == *lsn => return Ok(Some(st)),
            Ok(st) => {
                first_err.get_or_insert(Error::corrupt(
                    path,
                    0,
                    format!("file name says LSN {lsn}, header says {}", st.lsn),
                ));
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// Recovers the state of the store in `dir` without modifying any file: chooses the image
/// tiling (or loads a checkpoint of the format before images), replays the WAL after it, and
/// checks that nothing an installed image holds is missing. Returns the recovered state and
/// whether it came from a legacy checkpoint, and the store's format (`store_format`; a writer
/// upgrades format 1 at open). Shared by [`Db::open`] and [`Db::open_read_only`]: images and
/// leftovers the tiling does not use, and WAL segments it covers, are removed by a writer's
/// next flush or merge.
/// Errors: as [`Db::open`] (`Corrupt` naming the image or segment, `Unsupported` for a newer
/// store format, `Io`).
pub(crate) fn recover_store(
    fs: &dyn WalFs,
    dir: &Path,
) -> Result<(crate::wal::reader::Recovered, bool, StoreFormat)> {
    let wal_dir = dir.join("wal");
    let format = store_format::read(fs, dir)?;
    let listing = set::list(fs, dir)?;
    let tiling = set::open_tiling(&listing);
    // The newest image says whether a format-2 store wrote it (its successor segment was
    // created first): then the format-2 checks apply even if the marker file was lost.
    let rules = match tiling.images.first() {
        Some(newest) if newest.written_by_format_2_store() => StoreFormat::V2,
        _ => format,
    };
    let mut legacy = false;
    let base = if tiling.images.is_empty() {
        // A store written before images existed: load its newest valid checkpoint into the
        // in-memory delta once; the first flush writes it as the base image.
        let loaded = load_legacy_checkpoint(fs, dir)?;
        legacy = loaded.is_some();
        loaded.unwrap_or_else(State::new)
    } else {
        State::from_images(tiling.images)?
    };
    let recovered = match recover(fs, &wal_dir, base, rules) {
        Ok(r) => r,
        // The WAL cannot make up for images that failed their checks: report those.
        Err(e) => return Err(tiling.failure.unwrap_or(e)),
    };
    // Every installed image holds records the store acknowledged: if the chosen images and the
    // WAL end before one of them, that image (or one it depends on) is unusable.
    let listed = listing.images.iter().map(|i| i.1).max().unwrap_or(0);
    if recovered.state.lsn < listed {
        return Err(tiling.failure.unwrap_or_else(|| {
            Error::corrupt(
                dir,
                0,
                format!(
                    "an image holds records up to LSN {listed}, but the images and WAL found \
                     reach only LSN {}",
                    recovered.state.lsn
                ),
            )
        }));
    }
    Ok((recovered, legacy, format))
}

/// The files of a store at one moment: the installed images `(first, last)`, the newest
/// installed legacy checkpoint LSN and the first LSNs of the WAL segments. Two equal
/// fingerprints mean no image or checkpoint was installed or dropped and no segment was added
/// or dropped in between (records appended to a segment do not change it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    images: Vec<(u64, u64)>,
    newest_checkpoint: Option<u64>,
    segments: Vec<u64>,
}

/// The fingerprint of the store in `dir` (three directory listings). Errors: `Io`.
pub(crate) fn fingerprint(fs: &dyn WalFs, dir: &Path) -> Result<Fingerprint> {
    Ok(Fingerprint {
        images: set::list(fs, dir)?
            .images
            .into_iter()
            .map(|(first, last, _)| (first, last))
            .collect(),
        newest_checkpoint: legacy_checkpoint::list(fs, dir)?
            .installed
            .first()
            .map(|(lsn, _)| *lsn),
        segments: list_segments(fs, &dir.join("wal"))?
            .into_iter()
            .map(|(lsn, _)| lsn)
            .collect(),
    })
}

/// What [`catch_up`] found.
pub(crate) enum CatchUp {
    /// Nothing changed since the fingerprint was taken: no record, no file.
    Unchanged,
    /// Only records were appended: `Recovered::state` is the given state with them applied.
    Replayed(Recovered, u64),
    /// Images or segments changed: the state was recovered again from the files.
    Reloaded(Recovered),
}

/// Brings `current` — the state of a writer that released the shared lock with the store's
/// files as in `known` — up to date with what other writers committed since, with the lock held
/// again (so nothing changes under it). When the files are as they were, the WAL records after
/// `current.lsn` are replayed onto it (`Replayed`, with the number of records; `Unchanged` when
/// there are none). When another writer flushed, merged or checkpointed (an image or a segment
/// came or went), the images `current` maps may be gone and the WAL after it deleted: the state
/// is recovered from the files exactly as an open recovers it (`Reloaded`). Either way the cost
/// is bounded by the WAL since the newest image (the flush threshold), not by the store.
/// Errors: those of [`recover_store`] (`Corrupt`, `Io`); nothing is written.
pub(crate) fn catch_up(
    fs: &dyn WalFs,
    dir: &Path,
    current: &State,
    known: &Fingerprint,
) -> Result<CatchUp> {
    let now = fingerprint(fs, dir)?;
    if now == *known {
        let format = store_format::read(fs, dir)?;
        let rules = match current.images.first() {
            Some(newest) if newest.written_by_format_2_store() => StoreFormat::V2,
            _ => format,
        };
        let replayed = replay_after(fs, &dir.join("wal"), current.clone(), rules)?;
        let records = replayed.state.lsn - current.lsn;
        let torn = replayed
            .tail
            .as_ref()
            .is_some_and(|t| t.file_len > t.valid_end);
        // A writer that died in the middle of a record left a torn tail: the WAL writer must
        // continue from the recovered tail (which cuts it) rather than from where it stopped.
        if records == 0 && !torn {
            return Ok(CatchUp::Unchanged);
        }
        return Ok(CatchUp::Replayed(replayed, records));
    }
    let (recovered, _legacy, _format) = recover_store(fs, dir)?;
    if recovered.state.lsn < current.lsn {
        // Records this process had made durable are missing: the files were damaged or
        // replaced behind the lock.
        return Err(Error::corrupt(
            dir,
            0,
            format!(
                "the store's files reach only LSN {}, but this writer had made LSN {} durable",
                recovered.state.lsn, current.lsn
            ),
        ));
    }
    Ok(CatchUp::Reloaded(recovered))
}
