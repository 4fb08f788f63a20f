//! WAL record framing and payload encoding.
//!
//! Framing (all little-endian):
//!
//! ```text
//! u32 payload_len | u64 lsn | u32 crc32(lsn bytes ++ payload) | payload
//! ```
//!
//! Payload (first byte = kind):
//!
//! ```text
//! 1 Commit      u64 commit_version | u32 n | n × (u8 tag | u8 has_value | u32 klen key | [u32 vlen value])
//! 2 CreateTree  u8 tag | u8 versioned | u32 nlen name
//! 3 SetFloor    u64 history_floor
//! ```
//!
//! A Commit lists the *physical* writes, including the MVCC history rows (puts into tag 0x00),
//! so replay never re-derives them. Deletes in versioned trees replay as tombstones.

use std::sync::Arc;

use crate::codec::{put_bytes, put_u32, put_u64, put_u8, Dec};
use crate::error::{Error, Result};

/// Bytes of framing before each payload.
pub(crate) const HEADER_LEN: usize = 16;

const KIND_COMMIT: u8 = 1;
const KIND_CREATE_TREE: u8 = 2;
const KIND_SET_FLOOR: u8 = 3;

/// One physical write, as logged in the WAL and replayed on open: a put (`value = Some`) or a
/// delete (`None`) of `key` in the tree with `tag`. History rows are ordinary puts into tag 0x00.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PhysOp {
    pub(crate) tag: u8,
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Arc<[u8]>>,
}

/// One logical WAL record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    Commit {
        version: u64,
        ops: Vec<PhysOp>,
    },
    CreateTree {
        tag: u8,
        versioned: bool,
        name: String,
    },
    SetFloor {
        floor: u64,
    },
}

/// CRC32 over the LSN bytes and the payload.
pub(crate) fn record_crc(lsn: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&lsn.to_le_bytes());
    h.update(payload);
    h.finalize()
}

impl Record {
    /// Encodes the record framed with `lsn`. Errors with `InvalidArgument` if the payload would
    /// exceed the 4 GiB framing limit.
    pub(crate) fn frame(&self, lsn: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; HEADER_LEN];
        match self {
            Record::Commit { version, ops } => {
                put_u8(&mut buf, KIND_COMMIT);
                put_u64(&mut buf, *version);
                put_u32(&mut buf, ops.len() as u32);
                for op in ops {
                    put_u8(&mut buf, op.tag);
                    put_u8(&mut buf, u8::from(op.value.is_some()));
                    put_bytes(&mut buf, &op.key);
                    if let Some(v) = &op.value {
                        put_bytes(&mut buf, v);
                    }
                }
            }
            Record::CreateTree {
                tag,
                versioned,
                name,
            } => {
                put_u8(&mut buf, KIND_CREATE_TREE);
                put_u8(&mut buf, *tag);
                put_u8(&mut buf, u8::from(*versioned));
                put_bytes(&mut buf, name.as_bytes());
            }
            Record::SetFloor { floor } => {
                put_u8(&mut buf, KIND_SET_FLOOR);
                put_u64(&mut buf, *floor);
            }
        }
        let payload_len = u32::try_from(buf.len() - HEADER_LEN).map_err(|_| {
            Error::InvalidArgument("batch too large: WAL record payload exceeds 4 GiB".into())
        })?;
        let crc = record_crc(lsn, &buf[HEADER_LEN..]);
        buf[0..4].copy_from_slice(&payload_len.to_le_bytes());
        buf[4..12].copy_from_slice(&lsn.to_le_bytes());
        buf[12..16].copy_from_slice(&crc.to_le_bytes());
        Ok(buf)
    }

    /// Decodes a payload whose CRC already matched into an owned record: [`RecordRef::parse`]
    /// with every op copied (replay uses the borrowed form).
    #[cfg(test)]
    pub(crate) fn decode(payload: &[u8]) -> std::result::Result<Record, String> {
        Ok(match RecordRef::parse(payload)? {
            RecordRef::Commit { version, ops } => Record::Commit {
                version,
                ops: ops
                    .map(|op| {
                        op.map(|(tag, key, value)| PhysOp {
                            tag,
                            key: key.to_vec(),
                            value: value.map(Arc::from),
                        })
                    })
                    .collect::<std::result::Result<_, String>>()?,
            },
            RecordRef::CreateTree {
                tag,
                versioned,
                name,
            } => Record::CreateTree {
                tag,
                versioned,
                name: name.to_string(),
            },
            RecordRef::SetFloor { floor } => Record::SetFloor { floor },
        })
    }
}

/// A record borrowed from its payload (replay): the ops of a commit are decoded one at a time,
/// so replay copies only what ends up in the in-memory delta.
pub(crate) enum RecordRef<'a> {
    Commit {
        version: u64,
        ops: OpsRef<'a>,
    },
    CreateTree {
        tag: u8,
        versioned: bool,
        name: &'a str,
    },
    SetFloor {
        floor: u64,
    },
}

/// The ops of a borrowed commit record: `(tag, key, value)` (`None`: a delete). The last item
/// is an error if the payload has trailing bytes.
pub(crate) struct OpsRef<'a> {
    d: Dec<'a>,
    left: u32,
    done: bool,
}

impl<'a> Iterator for OpsRef<'a> {
    type Item = std::result::Result<(u8, &'a [u8], Option<&'a [u8]>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            self.done = true;
            return (!self.d.is_done()).then(|| Err("trailing bytes after record".to_string()));
        }
        self.left -= 1;
        let op = (|| {
            let tag = self.d.u8()?;
            let has_value = match self.d.u8()? {
                0 => false,
                1 => true,
                other => return Err(format!("bad op flag {other}")),
            };
            let key = self.d.bytes()?;
            let value = if has_value {
                Some(self.d.bytes()?)
            } else {
                None
            };
            Ok((tag, key, value))
        })();
        if op.is_err() {
            self.done = true;
        }
        Some(op)
    }
}

impl<'a> RecordRef<'a> {
    /// Parses a payload whose CRC already matched (commit ops are checked as they are read).
    pub(crate) fn parse(payload: &'a [u8]) -> std::result::Result<Self, String> {
        let mut d = Dec::new(payload);
        let rec = match d.u8()? {
            KIND_COMMIT => {
                let version = d.u64()?;
                let left = d.u32()?;
                return Ok(RecordRef::Commit {
                    version,
                    ops: OpsRef {
                        d,
                        left,
                        done: false,
                    },
                });
            }
            KIND_CREATE_TREE => {
                let tag = d.u8()?;
                let versioned = match d.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(format!("bad versioned flag {other}")),
                };
                let name = std::str::from_utf8(d.bytes()?)
                    .map_err(|_| "tree name is not UTF-8".to_string())?;
                RecordRef::CreateTree {
                    tag,
                    versioned,
                    name,
                }
            }
            KIND_SET_FLOOR => RecordRef::SetFloor { floor: d.u64()? },
            other => return Err(format!("unknown record kind {other}")),
        };
        if !d.is_done() {
            return Err(format!(
                "{} trailing bytes after record",
                payload.len() - d.pos()
            ));
        }
        Ok(rec)
    }
}

/// Magic at the start of every segment header.
pub(crate) const SEGMENT_MAGIC: &[u8; 8] = b"HOLTWAL2";

/// Bytes of the segment header: `magic "HOLTWAL2" | u64 first_lsn | u32 reserved (0) |
/// u32 crc32(first 20 bytes)`. Segments written before the header existed (store format 1)
/// start directly with their first record.
pub(crate) const SEGMENT_HEADER_LEN: usize = 24;

/// The header of a segment whose first record has LSN `first_lsn`.
pub(crate) fn segment_header(first_lsn: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..16].copy_from_slice(&first_lsn.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What the first bytes of a segment file say about its layout.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SegmentStart {
    /// A valid header naming this first LSN; records start at [`SEGMENT_HEADER_LEN`].
    Header(u64),
    /// The magic is there but the header is cut short or fails its CRC.
    DamagedHeader,
    /// No (complete) magic: a format-1 segment (records from offset 0), or an emptied,
    /// truncated or overwritten one.
    NoHeader,
}

/// Classifies the start of segment file `data`.
pub(crate) fn segment_start(data: &[u8]) -> SegmentStart {
    if !data.starts_with(SEGMENT_MAGIC) {
        return SegmentStart::NoHeader;
    }
    let Some(h) = data.get(..SEGMENT_HEADER_LEN) else {
        return SegmentStart::DamagedHeader;
    };
    let crc = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
    if crc32fast::hash(&h[..20]) != crc || h[16..20] != [0; 4] {
        return SegmentStart::DamagedHeader;
    }
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&h[8..16]);
    SegmentStart::Header(u64::from_le_bytes(lsn))
}

/// `NNNNNNNNNNNNNNNNNNNN.wal`: the segment's first LSN, 20 decimal digits.
pub(crate) fn segment_file_name(first_lsn: u64) -> String {
    format!("{first_lsn:020}.wal")
}

/// Parses a segment file name; `None` for any other file.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".wal")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_framing() {
        let recs = vec![
            Record::Commit {
                version: 7,
                ops: vec![
                    PhysOp {
                        tag: 3,
                        key: b"k".to_vec(),
                        value: Some(Arc::from(&b"v"[..])),
                    },
                    PhysOp {
                        tag: 0,
                        key: vec![],
                        value: None,
                    },
                ],
            },
            Record::CreateTree {
                tag: 9,
                versioned: true,
                name: "path_current".into(),
            },
            Record::SetFloor { floor: 42 },
        ];
        for (i, r) in recs.into_iter().enumerate() {
            let framed = r.frame(i as u64 + 1).unwrap();
            let len = u32::from_le_bytes(framed[0..4].try_into().unwrap()) as usize;
            assert_eq!(len, framed.len() - HEADER_LEN);
            let crc = u32::from_le_bytes(framed[12..16].try_into().unwrap());
            assert_eq!(crc, record_crc(i as u64 + 1, &framed[HEADER_LEN..]));
            assert_eq!(Record::decode(&framed[HEADER_LEN..]).unwrap(), r);
        }
    }

    #[test]
    fn segment_headers_round_trip_and_damage_is_classified() {
        let h = segment_header(42);
        assert_eq!(segment_start(&h), SegmentStart::Header(42));
        let mut with_records = h.to_vec();
        with_records.extend_from_slice(&[7; 40]);
        assert_eq!(segment_start(&with_records), SegmentStart::Header(42));
        assert_eq!(segment_start(&[]), SegmentStart::NoHeader);
        assert_eq!(segment_start(&[0; 64]), SegmentStart::NoHeader);
        assert_eq!(segment_start(&h[..5]), SegmentStart::NoHeader);
        assert_eq!(segment_start(&h[..20]), SegmentStart::DamagedHeader);
        assert_eq!(segment_start(b"HOLX"), SegmentStart::NoHeader);
        for i in 8..SEGMENT_HEADER_LEN {
            let mut bad = h;
            bad[i] ^= 0x10;
            assert_eq!(segment_start(&bad), SegmentStart::DamagedHeader, "byte {i}");
        }
        // A format-1 segment starts with a record header, never with the magic.
        let framed = Record::SetFloor { floor: 1 }.frame(1).unwrap();
        assert_eq!(segment_start(&framed), SegmentStart::NoHeader);
    }

    #[test]
    fn segment_names_are_twenty_digit_lsns() {
        assert_eq!(segment_file_name(12), "00000000000000000012.wal");
        assert_eq!(parse_segment_name("00000000000000000012.wal"), Some(12));
        assert_eq!(parse_segment_name("12.wal"), None);
        assert_eq!(parse_segment_name("00000000000000000012.tmp"), None);
    }
}
