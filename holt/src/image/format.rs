//! Byte-level constants and helpers of the image format (see `docs/holt-format.md` for the
//! tables): block geometry, footer layout, record tags and flags, and the unsigned LEB128
//! varint every length and counter uses.

/// Bytes per data block: the unit of the per-block CRC and of page alignment.
pub(crate) const BLOCK: usize = 4096;
/// `log2(BLOCK)`.
pub(crate) const BLOCK_SHIFT: u32 = 12;
/// Block CRCs per page of the CRC table (one `u32` each), i.e. blocks one directory entry covers.
pub(crate) const CRCS_PER_PAGE: u64 = (BLOCK / 4) as u64;

/// First bytes of the footer.
pub(crate) const MAGIC: &[u8; 8] = b"HOLTIMG1";
/// Format number in the footer of the images this version writes: 2, "written by a format-2
/// store" (see `store_format`: the WAL segment after its last LSN was created before it). The
/// layout is the same as format 1 ([`FORMAT_1`]), which is still read.
pub(crate) const FORMAT: u32 = 2;
/// Images written before the WAL segment header existed (same layout).
pub(crate) const FORMAT_1: u32 = 1;
/// Size of the fixed footer that ends every image file.
pub(crate) const FOOTER_LEN: usize = 64;

/// Record type in bits 0–1 of a record's first byte: a leaf (one key's slot).
pub(crate) const T_LEAF: u8 = 0;
/// Record type: an inner node whose edge bytes are a sorted list (at most [`SORTED_MAX`]).
pub(crate) const T_SORTED: u8 = 1;
/// Record type: an inner node whose edge bytes are a 256-bit bitmap.
pub(crate) const T_BITMAP: u8 = 2;
/// Record type: the meta record (registry, roots).
pub(crate) const T_META: u8 = 3;
/// Mask of the record type bits.
pub(crate) const TYPE_MASK: u8 = 0b11;

/// Leaf flag: the slot is a tombstone (no value bytes follow).
pub(crate) const F_TOMBSTONE: u8 = 1 << 2;
/// Leaf flag: a varint commit version follows the lengths.
pub(crate) const F_VERSION: u8 = 1 << 3;
/// Inner flag: the node has a terminal leaf (a key ending exactly at the node's edge position).
pub(crate) const F_TERMINAL: u8 = 1 << 2;
/// Inner flag: the node stores its subtree summary (live, dead, max commit version).
pub(crate) const F_SUMMARY: u8 = 1 << 3;
/// Inner: bits 4–6 hold `ref width - 1` (child references are 1..=8-byte little-endian file
/// offsets).
pub(crate) const WIDTH_SHIFT: u32 = 4;

/// Inner nodes with more children than this use the bitmap form.
pub(crate) const SORTED_MAX: usize = 16;
/// Bytes of the edge bitmap of a [`T_BITMAP`] node.
pub(crate) const BITMAP_BYTES: usize = 32;

/// Appends `v` as an unsigned LEB128 varint (1..=10 bytes).
pub(crate) fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Reads an unsigned LEB128 varint at `*pos`, advancing it. `None` on truncation or on a varint
/// that does not fit in 64 bits.
#[inline]
pub(crate) fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *b.get(*pos)?;
    *pos += 1;
    if first < 0x80 {
        return Some(u64::from(first));
    }
    let mut v = u64::from(first & 0x7f);
    let mut shift = 7u32;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Bytes a child reference needs to hold `max_off` (1..=8).
pub(crate) fn ref_width(max_off: u64) -> usize {
    let bits = 64 - max_off.leading_zeros() as usize;
    bits.div_ceil(8).max(1)
}

/// Little-endian integer of 1..=8 bytes.
#[inline]
pub(crate) fn read_ref(s: &[u8]) -> u64 {
    match *s {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_le_bytes([a, b])),
        [a, b, c] => u64::from(a) | u64::from(b) << 8 | u64::from(c) << 16,
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        _ => {
            let mut x = [0u8; 8];
            let n = s.len().min(8);
            x[..n].copy_from_slice(&s[..n]);
            u64::from_le_bytes(x)
        }
    }
}

/// Appends the low `width` bytes of `v`, little-endian.
pub(crate) fn put_ref(buf: &mut Vec<u8>, v: u64, width: usize) {
    buf.extend_from_slice(&v.to_le_bytes()[..width.min(8)]);
}

/// Little-endian `u32` at `off` of `b` (`None` if out of range).
#[inline]
pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Little-endian `u64` at `off` of `b` (`None` if out of range).
#[inline]
pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// Bloom filter bits per key (blocked filter: one 512-bit block per key, [`BLOOM_PROBES`] bits
/// set in it; about 1% false positives).
pub(crate) const BLOOM_BITS_PER_KEY: u64 = 10;
/// Bits set per key in its bloom block.
pub(crate) const BLOOM_PROBES: u32 = 7;
/// Bytes per bloom block (one cache line).
pub(crate) const BLOOM_BLOCK: usize = 64;

/// A stable 64-bit hash of a key (the image format depends on it: bloom filters).
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    const M: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (key.len() as u64).wrapping_mul(M) ^ 0x243F_6A88_85A3_08D3;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(a)).wrapping_mul(M);
        h ^= h >> 29;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut a = [0u8; 8];
        a[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(a)).wrapping_mul(M);
        h ^= h >> 29;
    }
    mix(h)
}

/// splitmix64's finalizer.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The bloom block of hash `h` among `blocks`, and the bit positions (0..512) it sets there.
#[inline]
pub(crate) fn bloom_probe(h: u64, blocks: u64) -> (u64, [u16; BLOOM_PROBES as usize]) {
    let block = ((h >> 32) * blocks) >> 32;
    let g = mix(h);
    let mut bits = [0u16; BLOOM_PROBES as usize];
    for (i, b) in bits.iter_mut().enumerate() {
        *b = ((g >> (i * 9)) & 511) as u16;
    }
    (block, bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        let values = [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ];
        for v in values {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(get_varint(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
        }
        // Truncated and overlong encodings are refused.
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80], &mut pos), None);
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut pos), None);
    }

    #[test]
    fn refs_round_trip_at_their_width() {
        for v in [0u64, 1, 255, 256, 65_535, 1 << 24, 1 << 40, u64::MAX] {
            let w = ref_width(v);
            let mut b = Vec::new();
            put_ref(&mut b, v, w);
            assert_eq!(b.len(), w);
            assert_eq!(read_ref(&b), v);
        }
    }
}
