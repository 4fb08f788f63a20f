//! WAL recovery: scan segments, validate headers, framing, CRCs and LSN continuity, replay
//! records.
//!
//! Rules:
//! - segments are read in LSN order starting with the last one whose first LSN is at or below
//!   the checkpoint LSN + 1 (older segments are fully covered by the checkpoint and skipped);
//! - a segment's records follow its header (`record::SEGMENT_HEADER_LEN` bytes; the header's
//!   first LSN must match the file name); in a format-2 store (see `store_format`) a segment
//!   without a valid header, or a missing segment starting right after the checkpoint LSN, fails
//!   the open with `Error::Corrupt` — such a segment was emptied, cut short, overwritten or
//!   deleted, and the records it held were acknowledged. Format-1 segments have no header;
//!   records start at offset 0;
//! - every record's LSN must be exactly one more than the previous one, and each segment must
//!   start where the previous one ended; otherwise the open fails with `Error::Corrupt`;
//! - a damaged **final** record of the **last** segment (short header, payload past end of file,
//!   or bad CRC on a record that ends exactly at end of file, or an all-zero remainder) is a torn
//!   write: it and everything after it is ignored, and the writer truncates it away before its
//!   first append (never during open). A damaged record anywhere else — including one followed
//!   by a later record that still validates — fails the open with `Error::Corrupt`.
//!
//! What recovery cannot see: a last segment cut short anywhere after its header reads as a
//! shorter log (a cut inside a record looks like the torn write of a crash). Detecting that
//! would need the durable LSN recorded outside the segment on every commit.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::state::State;
use crate::store_format::StoreFormat;
use crate::vfs::WalFs;
use crate::wal::record::{
    parse_segment_name, record_crc, segment_file_name, segment_start, RecordRef, SegmentStart,
    HEADER_LEN, SEGMENT_HEADER_LEN,
};

/// What recovery learned about the last segment, handed to the writer.
#[derive(Debug, Clone)]
pub(crate) struct TailSegment {
    pub(crate) path: PathBuf,
    /// Offset of the first record: the header length, or 0 for a format-1 segment.
    pub(crate) body_start: u64,
    /// Byte offset just past the last valid record.
    pub(crate) valid_end: u64,
    /// File length found at open (greater than `valid_end` when there is a torn tail).
    pub(crate) file_len: u64,
    /// LSN the next record appended to this segment would need.
    pub(crate) next_lsn: u64,
}

/// Result of replaying the WAL on top of a checkpoint.
pub(crate) struct Recovered {
    pub(crate) state: State,
    pub(crate) tail: Option<TailSegment>,
    /// Bytes of replayed records (counts toward the next automatic checkpoint).
    pub(crate) replayed_bytes: u64,
}

/// Segment files in `wal_dir`, sorted by first LSN. Other files are ignored.
/// Errors: `Io` (`read_dir`).
pub(crate) fn list_segments(fs: &dyn WalFs, wal_dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let entries = fs
        .list(wal_dir)
        .map_err(|e| Error::io("read_dir", wal_dir, e))?;
    let mut segs: Vec<(u64, PathBuf)> = entries
        .into_iter()
        .filter_map(|p| {
            let lsn = p.file_name()?.to_str().and_then(parse_segment_name)?;
            Some((lsn, p))
        })
        .collect();
    segs.sort();
    Ok(segs)
}

/// Replays every record after `state.lsn` (the checkpoint LSN, 0 without checkpoint) under
/// the rules of `format` (see the module docs). Segment files are listed and read through `fs`.
/// Errors: `Corrupt` naming the segment (missing, headerless in format 2, damaged, gapped);
/// `Io`.
pub(crate) fn recover(
    fs: &dyn WalFs,
    wal_dir: &Path,
    state: State,
    format: StoreFormat,
) -> Result<Recovered> {
    replay(fs, wal_dir, state, format, true)
}

/// Replays every record after `state.lsn` onto `state`, which need not end at a segment
/// boundary: the catch-up of a writer that takes a shared lock again (its state ends wherever
/// its last record did). The same rules as [`recover`] otherwise; `Recovered::replayed_bytes`
/// counts only the records replayed here. Errors: as [`recover`].
pub(crate) fn replay_after(
    fs: &dyn WalFs,
    wal_dir: &Path,
    state: State,
    format: StoreFormat,
) -> Result<Recovered> {
    replay(fs, wal_dir, state, format, false)
}

/// [`recover`] (`at_image`: `state` ends where an image does, so a format-2 store must have a
/// segment starting right after it) and [`replay_after`].
fn replay(
    fs: &dyn WalFs,
    wal_dir: &Path,
    mut state: State,
    format: StoreFormat,
    at_image: bool,
) -> Result<Recovered> {
    let segs = list_segments(fs, wal_dir)?;
    let mut expected = state.lsn + 1;
    let first = segs.iter().rposition(|(start, _)| *start <= expected);
    if !at_image && first.is_none() {
        return Err(Error::corrupt(
            wal_dir,
            0,
            format!("no WAL segment holds LSN {expected}"),
        ));
    }
    if at_image && format == StoreFormat::V2 && first.is_none_or(|i| segs[i].0 != expected) {
        // The segment after the checkpoint is created before the checkpoint is written and is
        // never removed while that checkpoint is the newest.
        return Err(Error::corrupt(
            wal_dir.join(segment_file_name(expected)),
            0,
            format!(
                "missing WAL segment: the log after LSN {} (the checkpoint) must start here",
                expected - 1
            ),
        ));
    }
    let first_idx = first.unwrap_or(0);
    let mut tail = None;
    let mut replayed_bytes = 0u64;
    for (i, (start, path)) in segs.iter().enumerate().skip(first_idx) {
        let is_last = i + 1 == segs.len();
        if *start > expected {
            return Err(Error::corrupt(
                path,
                0,
                format!("missing WAL records: expected LSN {expected}, segment starts at {start}"),
            ));
        }
        if i > first_idx && *start != expected {
            return Err(Error::corrupt(
                path,
                0,
                format!("segment starts at LSN {start}, previous segment ended before {expected}"),
            ));
        }
        let data = fs.read(path).map_err(|e| Error::io("read", path, e))?;
        let body_start = match segment_start(&data) {
            SegmentStart::Header(lsn) if lsn == *start => SEGMENT_HEADER_LEN,
            SegmentStart::Header(lsn) => {
                return Err(Error::corrupt(
                    path,
                    0,
                    format!("segment header says first LSN {lsn}, the file name says {start}"),
                ))
            }
            SegmentStart::DamagedHeader => {
                return Err(Error::corrupt(path, 0, "damaged WAL segment header"))
            }
            SegmentStart::NoHeader if format == StoreFormat::V2 => {
                return Err(Error::corrupt(
                    path,
                    0,
                    format!(
                        "WAL segment has no header ({} bytes): it was emptied, cut short or \
                         overwritten",
                        data.len()
                    ),
                ))
            }
            SegmentStart::NoHeader => 0,
        };
        let (valid_end, next_lsn) = scan_segment(
            path,
            &data,
            body_start,
            *start,
            is_last,
            |lsn, rec, len, off| {
                if lsn < expected {
                    return Ok(());
                }
                state
                    .apply_record_ref(rec, lsn)?
                    .map_err(|reason| Error::corrupt(path, off, format!("bad record: {reason}")))?;
                expected = lsn + 1;
                replayed_bytes += len;
                Ok(())
            },
        )?;
        if is_last {
            tail = Some(TailSegment {
                path: path.clone(),
                body_start: body_start as u64,
                valid_end,
                file_len: data.len() as u64,
                next_lsn,
            });
        }
    }
    Ok(Recovered {
        state,
        tail,
        replayed_bytes,
    })
}

fn header(data: &[u8], off: usize) -> Option<(usize, u64, u32)> {
    let h = data.get(off..off.checked_add(HEADER_LEN)?)?;
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let mut l = [0u8; 8];
    l.copy_from_slice(&h[4..12]);
    let crc = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    Some((len, u64::from_le_bytes(l), crc))
}

/// Is there a CRC-valid record with an LSN at or after `min_lsn` starting after `off`? If so,
/// the damage at `off` is not a torn tail.
fn later_valid_record(data: &[u8], off: usize, min_lsn: u64) -> bool {
    (off + 1..data.len().saturating_sub(HEADER_LEN - 1)).any(|o| {
        let Some((len, lsn, crc)) = header(data, o) else {
            return false;
        };
        let end = o + HEADER_LEN + len;
        lsn >= min_lsn
            && lsn - min_lsn < (1 << 32)
            && end <= data.len()
            && record_crc(lsn, &data[o + HEADER_LEN..end]) == crc
    })
}

/// Scans one segment from its first record at `body_start`, calling
/// `f(lsn, record, framed_len, offset)` for every valid record. Returns `(valid_end, next_lsn)`.
fn scan_segment(
    path: &Path,
    data: &[u8],
    body_start: usize,
    start_lsn: u64,
    is_last: bool,
    mut f: impl FnMut(u64, RecordRef<'_>, u64, u64) -> Result<()>,
) -> Result<(u64, u64)> {
    let mut off = body_start;
    let mut next_lsn = start_lsn;
    while off < data.len() {
        let rest = &data[off..];
        let damaged = |reason: String, torn_shape: bool| -> Result<(u64, u64)> {
            let zero_tail = rest.iter().all(|&b| b == 0);
            if is_last && (zero_tail || (torn_shape && !later_valid_record(data, off, next_lsn))) {
                Ok((off as u64, next_lsn))
            } else {
                Err(Error::corrupt(path, off as u64, reason))
            }
        };
        let Some((len, lsn, crc)) = header(data, off) else {
            return damaged(
                format!("truncated record header ({} bytes)", rest.len()),
                true,
            );
        };
        let end = off + HEADER_LEN + len;
        if end > data.len() {
            return damaged(
                format!(
                    "record payload of {len} bytes runs past end of file ({} bytes left)",
                    rest.len() - HEADER_LEN
                ),
                true,
            );
        }
        let payload = &data[off + HEADER_LEN..end];
        if record_crc(lsn, payload) != crc {
            return damaged("record CRC mismatch".to_string(), end == data.len());
        }
        if lsn != next_lsn {
            return Err(Error::corrupt(
                path,
                off as u64,
                format!("LSN gap: expected LSN {next_lsn}, found {lsn}"),
            ));
        }
        let rec = RecordRef::parse(payload)
            .map_err(|reason| Error::corrupt(path, off as u64, format!("bad record: {reason}")))?;
        f(lsn, rec, (end - off) as u64, off as u64)?;
        next_lsn = lsn + 1;
        off = end;
    }
    Ok((off as u64, next_lsn))
}
