//! Range reads across block boundaries (issue 5 acceptance): a body of 5.5 blocks published with
//! 4 KiB blocks is read back through the SDK (`Client::read_range`) and the Workbench facade
//! (`workbench_read` with `format: "bytes"`, `offset`, `limit`, `b:` cursors) at the first byte,
//! the last byte, ranges straddling one and two block boundaries, zero-length ranges, ranges
//! ending exactly at the end, and past the end (typed errors). A block damaged on disk (flipped
//! byte, truncated, deleted) under `<store>/objects/` is reported as `ObjectUnavailable` and its
//! bytes are never returned, while reads that do not touch it still succeed.

use std::path::PathBuf;

use nokv::workbench::payload::decode_payload;
use nokv::workbench::Workbench;
use nokv::{Client, ClientOptions, Error, PutOptions};
use nokv_tests::{err, ok};
use serde_json::{json, Value};

/// Block size of the stores in this file.
const BLOCK: u64 = 4096;
/// Body size: five full blocks and half of a sixth.
const SIZE: u64 = 5 * BLOCK + BLOCK / 2;
/// Workbench-relative path of the body.
const PATH: &str = "outputs/body.bin";

/// Deterministic, non-periodic bytes (xorshift), so a misplaced block cannot compare equal.
fn body(len: u64, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A fresh store with 4 KiB blocks, workbench `wb`, and the 5.5-block body at [`PATH`].
fn store_with_body() -> (tempfile::TempDir, Client, Vec<u8>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let client = Client::open_with(
        tmp.path().join("store"),
        ClientOptions {
            block_size: BLOCK as usize,
            ..Default::default()
        },
    )
    .expect("open store");
    client.create_workbench("wb").expect("workbench");
    let bytes = body(SIZE, 7);
    let receipt = client
        .put(
            "wb",
            PATH,
            &bytes,
            &PutOptions::create("application/octet-stream", "range-test"),
        )
        .expect("put");
    assert_eq!(receipt.size_bytes, SIZE);
    assert_eq!(receipt.digest_uri, objstore::sha256_uri(&bytes));
    (tmp, client, bytes)
}

/// The object files of the body's blocks, in logical order (`<store>/objects/<key>`).
fn block_files(client: &Client) -> Vec<PathBuf> {
    let entry = client.stat("wb", PATH).expect("stat");
    let rows = client
        .meta()
        .read()
        .manifest(&entry.artifact_revision_id)
        .expect("manifest");
    let local = objstore::LocalDir::open(client.dir().join("objects")).expect("objects dir");
    rows.iter()
        .map(|row| local.object_path(&row.object_key).expect("object path"))
        .collect()
}

/// One `workbench_read` in bytes format; returns the envelope.
fn facade_read(wb: &Workbench, extra: Value) -> Value {
    let mut input =
        json!({"id": "wb", "section": "outputs", "path": "body.bin", "format": "bytes"});
    if let (Some(obj), Some(add)) = (input.as_object_mut(), extra.as_object()) {
        for (k, v) in add {
            obj.insert(k.clone(), v.clone());
        }
    }
    wb.call("workbench_read", &input)
}

/// Decodes the `bytes` field of a successful bytes-format read.
fn decoded(result: &Value) -> Vec<u8> {
    assert_eq!(result["bytes_encoding"], "base64", "{result:#}");
    let b64 = result["bytes"].as_str().expect("bytes is a string");
    decode_payload(None, Some(b64)).expect("valid base64").0
}

/// Asserts a facade error envelope carries no object keys, host paths or revision ids.
fn assert_leaks_nothing(envelope: &Value, client: &Client) {
    let text = envelope.to_string();
    assert!(
        !text.contains("nokv/artifacts"),
        "object key leaked: {text}"
    );
    assert!(!text.contains("blocks/"), "object key leaked: {text}");
    let dir = client.dir().to_string_lossy().to_string();
    assert!(!text.contains(&dir), "host path leaked: {text}");
}

#[test]
fn body_of_five_and_a_half_blocks_is_stored_as_six_blocks() {
    let (_t, client, _) = store_with_body();
    let entry = client.stat("wb", PATH).expect("stat");
    let rows = client
        .meta()
        .read()
        .manifest(&entry.artifact_revision_id)
        .expect("manifest");
    let lengths: Vec<u64> = rows.iter().map(|r| r.length).collect();
    assert_eq!(lengths, [BLOCK, BLOCK, BLOCK, BLOCK, BLOCK, BLOCK / 2]);
    let offsets: Vec<u64> = rows.iter().map(|r| r.logical_offset).collect();
    assert_eq!(
        offsets,
        [0, BLOCK, 2 * BLOCK, 3 * BLOCK, 4 * BLOCK, 5 * BLOCK]
    );
}

#[test]
fn sdk_range_reads_across_block_boundaries_match_the_source() {
    let (_t, client, src) = store_with_body();
    let cases: [(&str, u64, u64); 14] = [
        ("first byte", 0, 1),
        ("last byte", SIZE - 1, 1),
        ("first block exactly", 0, BLOCK),
        ("last (partial) block exactly", 5 * BLOCK, BLOCK / 2),
        ("straddles one boundary", BLOCK - 3, 6),
        ("byte before a boundary", BLOCK - 1, 1),
        ("byte after a boundary", BLOCK, 1),
        ("straddles two boundaries", BLOCK - 3, BLOCK + 6),
        ("straddles four boundaries", BLOCK / 2, 4 * BLOCK),
        ("ends exactly at the end", SIZE - 100, 100),
        (
            "straddles into the partial block up to the end",
            5 * BLOCK - 1,
            BLOCK / 2 + 1,
        ),
        ("zero-length at the start", 0, 0),
        ("zero-length on a boundary", 2 * BLOCK, 0),
        ("zero-length exactly at the end", SIZE, 0),
    ];
    for (name, offset, len) in cases {
        let got = client
            .read_range("wb", PATH, offset, len)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(
            got,
            &src[offset as usize..(offset + len) as usize],
            "{name} (offset {offset}, len {len})"
        );
    }
    assert_eq!(client.read_range("wb", PATH, 0, SIZE).expect("whole"), src);
    assert_eq!(client.read_all("wb", PATH).expect("read_all"), src);
}

#[test]
fn sdk_range_past_the_end_is_range_out_of_bounds() {
    let (_t, client, _) = store_with_body();
    let cases: [(u64, u64); 5] = [
        (SIZE, 1),     // starts exactly at the end, wants one byte
        (SIZE - 1, 2), // last byte plus one past the end
        (SIZE + 1, 0), // zero-length but starting past the end
        (0, SIZE + 1), // whole body plus one
        (u64::MAX, 1), // offset + len overflows u64
    ];
    for (offset, len) in cases {
        match client.read_range("wb", PATH, offset, len) {
            Err(Error::RangeOutOfBounds {
                offset: o,
                len: l,
                size,
            }) => assert_eq!(
                (o, l, size),
                (offset, len, SIZE),
                "offset {offset} len {len}"
            ),
            other => panic!("offset {offset} len {len}: expected RangeOutOfBounds, got {other:?}"),
        }
    }
}

#[test]
fn facade_byte_reads_across_block_boundaries_match_the_source() {
    let (_t, client, src) = store_with_body();
    let wb = Workbench::new(client);
    // (name, offset, limit, expected end). A facade call reads at most 300 bytes (docs/workbench.md
    // `limit` 1–300) and blocks are at least 1 KiB, so one call straddles at most one boundary.
    let cases: [(&str, u64, u64, u64); 7] = [
        ("first byte", 0, 1, 1),
        ("last byte", SIZE - 1, 1, SIZE),
        (
            "straddles the first boundary",
            BLOCK - 150,
            300,
            BLOCK + 150,
        ),
        (
            "straddles the fifth boundary",
            5 * BLOCK - 1,
            2,
            5 * BLOCK + 1,
        ),
        ("ends exactly at the end", SIZE - 300, 300, SIZE),
        ("limit clipped at the end", SIZE - 10, 300, SIZE),
        ("offset exactly at the end reads nothing", SIZE, 300, SIZE),
    ];
    for (name, offset, limit, end) in cases {
        let r = ok(facade_read(&wb, json!({"offset": offset, "limit": limit})));
        assert_eq!(r["total_size_bytes"], SIZE, "{name}");
        assert_eq!(
            decoded(&r),
            &src[offset as usize..end as usize],
            "{name} (offset {offset}, limit {limit})"
        );
        assert_eq!(r["cursor"], format!("b:{offset}"), "{name}");
        if end < SIZE {
            assert_eq!(r["next_cursor"], format!("b:{end}"), "{name}");
            assert_eq!(r["truncated"], true, "{name}");
        } else {
            assert_eq!(r["next_cursor"], Value::Null, "{name}");
            assert_eq!(r["truncated"], false, "{name}");
        }
        assert_eq!(r["items"], json!([]), "{name}");
    }
    // Paging the whole body with `b:` cursors crosses every boundary and reassembles the source.
    let mut assembled = Vec::new();
    let mut next: Option<String> = None;
    let mut calls = 0;
    loop {
        let extra = match &next {
            None => json!({"limit": 300}),
            Some(c) => json!({"limit": 300, "cursor": c}),
        };
        let r = ok(facade_read(&wb, extra));
        assembled.extend(decoded(&r));
        calls += 1;
        match r["next_cursor"].as_str() {
            Some(c) => next = Some(c.to_string()),
            None => break,
        }
        assert!(calls <= SIZE / 300 + 1, "paging does not terminate");
    }
    assert_eq!(calls, SIZE.div_ceil(300));
    assert_eq!(assembled, src);
}

#[test]
fn facade_offset_past_the_end_is_invalid_arguments() {
    let (_t, client, _) = store_with_body();
    let wb = Workbench::new(client);
    let e = err(
        facade_read(&wb, json!({"offset": SIZE + 1, "limit": 1})),
        "InvalidArguments",
    );
    assert_eq!(e["retryable"], false);
    assert_eq!(e["details"]["field"], "offset");
    let e = err(
        facade_read(&wb, json!({"cursor": format!("b:{}", SIZE + 1)})),
        "InvalidArguments",
    );
    assert_eq!(e["details"]["field"], "cursor");
    // limit 0 and limit 301 fail the input schema; offset and cursor together are refused.
    err(
        facade_read(&wb, json!({"offset": 0, "limit": 0})),
        "InvalidArguments",
    );
    err(
        facade_read(&wb, json!({"offset": 0, "limit": 301})),
        "InvalidArguments",
    );
    err(
        facade_read(&wb, json!({"offset": 0, "cursor": "b:0"})),
        "InvalidArguments",
    );
}

#[test]
fn flipped_byte_in_a_block_is_object_unavailable_and_other_blocks_still_read() {
    let (_t, client, src) = store_with_body();
    let files = block_files(&client);
    assert_eq!(files.len(), 6);
    // Flip one byte in the middle of block 2 (bytes [8192, 12288)).
    let mut raw = std::fs::read(&files[2]).expect("read block file");
    assert_eq!(raw.len() as u64, BLOCK);
    raw[100] ^= 0x01;
    std::fs::write(&files[2], &raw).expect("corrupt block file");

    // SDK: every range touching block 2 fails with the typed error, none returns bytes.
    let touching: [(u64, u64); 5] = [
        (2 * BLOCK, 1),       // first byte of the block
        (2 * BLOCK + 100, 1), // the flipped byte itself
        (3 * BLOCK - 1, 2),   // straddles its upper boundary
        (2 * BLOCK - 1, 2),   // straddles its lower boundary
        (0, SIZE),            // the whole body
    ];
    for (offset, len) in touching {
        match client.read_range("wb", PATH, offset, len) {
            Err(Error::ObjectUnavailable(msg)) => {
                assert!(!msg.contains("nokv/artifacts"), "key leaked: {msg}")
            }
            other => panic!("offset {offset} len {len}: expected ObjectUnavailable, got {other:?}"),
        }
    }
    assert!(matches!(
        client.read_all("wb", PATH),
        Err(Error::ObjectUnavailable(_))
    ));
    // Ranges that stay clear of block 2 still succeed and match the source.
    let clear: [(u64, u64); 4] = [
        (0, 1),
        (BLOCK - 3, 6),                     // straddles boundary 1 (blocks 0 and 1)
        (3 * BLOCK, 2 * BLOCK + BLOCK / 2), // blocks 3, 4 and 5 up to the end
        (SIZE - 1, 1),
    ];
    for (offset, len) in clear {
        assert_eq!(
            client
                .read_range("wb", PATH, offset, len)
                .expect("clear range"),
            &src[offset as usize..(offset + len) as usize],
            "offset {offset} len {len}"
        );
    }
    // Streaming reads stop at the damaged block with the same typed error.
    let entry = client.stat("wb", PATH).expect("stat");
    let mut sink = Vec::new();
    let streamed = client.read_to_writer(&client.meta().read(), &entry, &mut sink, &mut |_| {});
    assert!(
        matches!(streamed, Err(Error::ObjectUnavailable(_))),
        "{streamed:?}"
    );
    assert_eq!(
        sink,
        &src[..2 * BLOCK as usize],
        "only the verified blocks before the damage were written"
    );

    // Facade: ObjectUnavailable (retryable), no key or host path in the envelope.
    let wb = Workbench::new(client.clone());
    for (offset, limit) in [
        (2 * BLOCK + 50, 100),
        (2 * BLOCK - 150, 300),
        (3 * BLOCK - 1, 2),
    ] {
        let e = err(
            facade_read(&wb, json!({"offset": offset, "limit": limit})),
            "ObjectUnavailable",
        );
        assert_eq!(e["retryable"], true);
        assert!(e.get("bytes").is_none(), "no data in an error: {e:#}");
        assert_leaks_nothing(&e, &client);
    }
    // A structured read needs the whole body, so it fails too.
    err(
        wb.call(
            "workbench_read",
            &json!({"id": "wb", "section": "outputs", "path": "body.bin"}),
        ),
        "ObjectUnavailable",
    );
    // Facade reads clear of block 2 succeed.
    let r = ok(facade_read(
        &wb,
        json!({"offset": BLOCK - 150, "limit": 300}),
    ));
    assert_eq!(
        decoded(&r),
        &src[(BLOCK - 150) as usize..(BLOCK + 150) as usize]
    );
    let r = ok(facade_read(
        &wb,
        json!({"offset": SIZE - 300, "limit": 300}),
    ));
    assert_eq!(decoded(&r), &src[(SIZE - 300) as usize..]);

    // Restoring the original bytes makes the block readable again (nothing was cached as bad).
    raw[100] ^= 0x01;
    std::fs::write(&files[2], &raw).expect("restore block file");
    assert_eq!(client.read_all("wb", PATH).expect("repaired"), src);
}

#[test]
fn truncated_or_missing_block_is_object_unavailable() {
    let (_t, client, src) = store_with_body();
    let files = block_files(&client);
    // Truncate block 1 by one byte.
    let raw = std::fs::read(&files[1]).expect("read block");
    std::fs::write(&files[1], &raw[..raw.len() - 1]).expect("truncate");
    assert!(matches!(
        client.read_range("wb", PATH, BLOCK, 1),
        Err(Error::ObjectUnavailable(_))
    ));
    // Delete the last (partial) block.
    std::fs::remove_file(&files[5]).expect("delete block");
    assert!(matches!(
        client.read_range("wb", PATH, SIZE - 1, 1),
        Err(Error::ObjectUnavailable(_))
    ));
    // Blocks 0, 2, 3, 4 are intact.
    assert_eq!(
        client
            .read_range("wb", PATH, 2 * BLOCK, 3 * BLOCK)
            .expect("blocks 2-4"),
        &src[2 * BLOCK as usize..5 * BLOCK as usize]
    );
    let wb = Workbench::new(client.clone());
    let e = err(
        facade_read(&wb, json!({"offset": SIZE - 1, "limit": 1})),
        "ObjectUnavailable",
    );
    assert_leaks_nothing(&e, &client);
    let e = err(
        facade_read(&wb, json!({"offset": BLOCK + 10, "limit": 10})),
        "ObjectUnavailable",
    );
    assert_leaks_nothing(&e, &client);
    let r = ok(facade_read(&wb, json!({"offset": 0, "limit": 300})));
    assert_eq!(decoded(&r), &src[..300]);
}
