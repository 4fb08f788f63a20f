//! Fuzz the RecoveryOutbox codecs (`meta::outbox`): the logical record (value version 2), the
//! header and chunk framing (value version 1) and the row keys. Arbitrary bytes never panic, and
//! whatever decodes re-encodes to exactly the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meta::outbox::{
    chunk_key, decode_chunk, decode_chunk_key, decode_header_key, decode_record, encode_chunk,
    encode_record, header_key, OutboxHeader,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = decode_record(data) {
        assert_eq!(
            encode_record(r.recovery_lsn, r.commit_version, &r.entry, &r.mutations),
            data
        );
    }
    if let Ok(h) = OutboxHeader::decode(data) {
        assert_eq!(h.encode(), data);
    }
    if let Ok(p) = decode_chunk(data) {
        assert_eq!(encode_chunk(p), data);
    }
    if let Ok(l) = decode_header_key(data) {
        assert_eq!(header_key(l), data);
    }
    if let Ok((l, i)) = decode_chunk_key(data) {
        assert_eq!(chunk_key(l, i), data);
    }
});
