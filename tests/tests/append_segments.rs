//! Append as immutable segments (issue 5 acceptance; docs/metadata-format.md "Upload And Append"): 100 appends
//! of 1 KiB to one log, once through `nokv::Client::append` and once through the Workbench facade
//! (`workbench_append`), produce a readable body whose digest equals the SHA-256 of the
//! concatenation. After every append the published ArtifactRevision and its ArtifactManifest rows
//! (read through `meta::Reader`) obey the limits of docs/metadata-format.md — sealed `dependency_depth` ≤ 8 and at most
//! 64 distinct physical owner revisions — the body is rematerialised (depth back to 0, zero
//! dependencies) exactly when the next append would exceed depth 8, and every manifest row points
//! at its direct physical owner's own block.

use std::collections::{BTreeMap, BTreeSet};

use meta::{ArtifactRevision, ArtifactRevisionId, ManifestRow, RevisionState};
use nokv::workbench::Workbench;
use nokv::{Client, ClientOptions, Error};
use nokv_tests::ok;
use serde_json::json;

/// The limits of docs/metadata-format.md, "Upload And Append", restated so the test does not
/// trust the SDK's constants.
const MAX_DEPTH: u32 = 8;
const MAX_OWNERS: usize = 64;
const APPENDS: usize = 100;
const CHUNK: usize = 1024;

/// The `i`-th 1 KiB chunk: printable ASCII, distinct per `i`, ends with a newline.
fn chunk(i: usize) -> Vec<u8> {
    let mut line = format!("append {i:03} ").into_bytes();
    let mut x = (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    while line.len() < CHUNK - 1 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        line.push(b'a' + (x % 26) as u8);
    }
    line.push(b'\n');
    line
}

fn open(dir: &std::path::Path, block_size: usize) -> Client {
    let client = Client::open_with(
        dir.join("store"),
        ClientOptions {
            block_size,
            ..Default::default()
        },
    )
    .expect("open store");
    client.create_workbench("wb").expect("workbench");
    client
}

/// What one published revision looked like.
#[derive(Debug)]
struct Observed {
    revision: ArtifactRevisionId,
    depth: u32,
    /// Distinct physical owners other than the revision itself.
    dependency_owners: usize,
    rows: Vec<ManifestRow>,
}

/// Reads the live revision of `path` through `meta::Reader` and checks every invariant of a
/// published (possibly appended) body against `expected`.
fn check_live_revision(client: &Client, path: &str, expected: &[u8], step: usize) -> Observed {
    let entry = client.stat("wb", path).expect("stat");
    let reader = client.meta().read();
    let rev_id = entry.artifact_revision_id;
    let rev: ArtifactRevision = reader
        .revision(&rev_id)
        .expect("read revision")
        .expect("revision row exists");
    let rows = reader.manifest(&rev_id).expect("manifest rows");
    let digest = objstore::sha256_uri(expected);

    // Body identity on the path entry and the revision.
    assert_eq!(entry.logical_size, expected.len() as u64, "step {step}");
    assert_eq!(
        entry.body_digest_uri, digest,
        "step {step}: PathEntry digest"
    );
    assert_eq!(rev.body_digest_uri, digest, "step {step}: revision digest");
    assert_eq!(rev.logical_size, expected.len() as u64, "step {step}");
    assert_eq!(rev.state, RevisionState::Available, "step {step}");
    assert_eq!(rev.block_count, rows.len() as u64, "step {step}");

    // Rows tile the body contiguously, object_index 0..n.
    let mut offset = 0u64;
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.object_index, i as u64, "step {step}");
        assert_eq!(row.logical_offset, offset, "step {step}: row {i} offset");
        assert!(row.length > 0, "step {step}: empty row {i}");
        offset += row.length;
    }
    assert_eq!(
        offset,
        expected.len() as u64,
        "step {step}: rows cover the body"
    );

    // Distinct owners other than this revision = dependency_count; both within those limits.
    let owners: BTreeSet<ArtifactRevisionId> = rows
        .iter()
        .map(|r| r.physical_owner_revision)
        .filter(|o| *o != rev_id)
        .collect();
    assert_eq!(rev.dependency_count as usize, owners.len(), "step {step}");
    assert_eq!(entry.dependency_count, rev.dependency_count, "step {step}");
    assert_eq!(entry.dependency_depth, rev.dependency_depth, "step {step}");
    assert!(
        owners.len() <= MAX_OWNERS,
        "step {step}: {} owners",
        owners.len()
    );
    assert!(
        rev.dependency_depth <= MAX_DEPTH,
        "step {step}: depth {}",
        rev.dependency_depth
    );

    // The dependency digest is SHA-256 over the sorted 16-byte owner ids (docs/metadata-format.md).
    let mut concat = Vec::new();
    for o in &owners {
        concat.extend_from_slice(o.as_bytes());
    }
    assert_eq!(
        format!("sha256:{}", objstore::hex_lower(&rev.dependency_digest)),
        objstore::sha256_uri(&concat),
        "step {step}: dependency digest"
    );

    // Sealed depth: 0 without dependencies, else 1 + the deepest owner's sealed depth.
    let mut owner_revisions: BTreeMap<ArtifactRevisionId, ArtifactRevision> = BTreeMap::new();
    for o in &owners {
        let owner = reader
            .revision(o)
            .expect("read owner")
            .expect("owner revision exists");
        assert_eq!(owner.state, RevisionState::Available, "step {step}: owner");
        assert!(
            owner.dependency_depth <= MAX_DEPTH,
            "step {step}: owner depth"
        );
        assert!(
            owner.strong_reference_count >= 1,
            "step {step}: a dependency owner is strongly referenced"
        );
        owner_revisions.insert(*o, owner);
    }
    let expected_depth = owner_revisions
        .values()
        .map(|o| o.dependency_depth + 1)
        .max()
        .unwrap_or(0);
    assert_eq!(
        rev.dependency_depth, expected_depth,
        "step {step}: sealed depth"
    );

    // Reads follow direct physical owners: each row's object is the owner's own block
    // (revision-owned key layout) and the owner's manifest holds that block as its own.
    let shard = client.meta().logical_shard_id();
    let root = client.meta().root_id();
    let mut owner_manifests: BTreeMap<ArtifactRevisionId, Vec<ManifestRow>> = BTreeMap::new();
    for row in &rows {
        let owner = row.physical_owner_revision;
        assert_eq!(
            row.object_key,
            objstore::block_key(
                shard.as_bytes(),
                root.as_bytes(),
                owner.as_bytes(),
                row.physical_object_index
            ),
            "step {step}: row {} key is its owner's block",
            row.object_index
        );
        assert_eq!(row.object_offset, 0, "step {step}");
        if owner == rev_id {
            assert_eq!(row.physical_object_index, row.object_index, "step {step}");
            continue;
        }
        let owner_rows = owner_manifests
            .entry(owner)
            .or_insert_with(|| reader.manifest(&owner).expect("owner manifest"));
        let own = owner_rows
            .iter()
            .find(|r| r.object_index == row.physical_object_index)
            .expect("owner has the block in its manifest");
        assert_eq!(
            own.physical_owner_revision, owner,
            "step {step}: the owner owns the block itself (no chained indirection)"
        );
        assert_eq!(own.object_key, row.object_key, "step {step}");
        assert_eq!(own.digest_uri, row.digest_uri, "step {step}");
        assert_eq!(own.length, row.length, "step {step}");
    }

    Observed {
        revision: rev_id,
        depth: rev.dependency_depth,
        dependency_owners: owners.len(),
        rows,
    }
}

#[test]
fn hundred_sdk_appends_read_back_the_concatenation_within_dependency_limits() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // 4 KiB blocks: a rematerialised body is re-blocked into several full blocks.
    let client = open(tmp.path(), 4096);
    let path = "logs/run.log";
    let mut expected = Vec::new();
    let mut depths = Vec::new();
    let mut rematerialised_at = Vec::new();
    let mut last_generation = 0;
    for i in 0..APPENDS {
        let delta = chunk(i);
        expected.extend_from_slice(&delta);
        let r = client
            .append("wb", path, &delta, None, "append-test")
            .expect("append");
        assert_eq!(r.created, i == 0, "step {i}");
        assert_eq!(r.appended_bytes, CHUNK as u64);
        assert_eq!(r.size_bytes, expected.len() as u64);
        assert_eq!(r.delta_digest_uri, objstore::sha256_uri(&delta), "step {i}");
        assert_eq!(
            r.body_digest_uri,
            objstore::sha256_uri(&expected),
            "step {i}"
        );
        assert!(r.generation > last_generation, "generation moves forward");
        last_generation = r.generation;

        let seen = check_live_revision(&client, path, &expected, i);
        assert_eq!(r.dependency_depth, seen.depth, "step {i}: receipt depth");
        assert_eq!(
            r.dependency_count as usize, seen.dependency_owners,
            "step {i}"
        );
        if i > 0 && seen.depth == 0 {
            rematerialised_at.push(i);
            // Rematerialised: every row is owned by the new revision, re-blocked at 4 KiB.
            assert!(seen
                .rows
                .iter()
                .all(|r| r.physical_owner_revision == seen.revision));
            let full = expected.len() / 4096;
            assert_eq!(
                seen.rows.len(),
                full + usize::from(expected.len() % 4096 != 0)
            );
            assert!(seen.rows[..full].iter().all(|r| r.length == 4096));
        }
        depths.push(seen.depth);
        // Readable at every step, whole and at the newest segment.
        assert_eq!(
            client.read_all("wb", path).expect("read"),
            expected,
            "step {i}"
        );
        let tail = client
            .read_range("wb", path, (expected.len() - CHUNK) as u64, CHUNK as u64)
            .expect("tail");
        assert_eq!(tail, delta, "step {i}");
    }
    // Each append adds one segment owned by a new revision, so the depth climbs by one per
    // append until the next one would reach 9; that append rematerialises (depth 0).
    let want: Vec<u32> = (0..APPENDS).map(|i| (i % 9) as u32).collect();
    assert_eq!(depths, want);
    assert_eq!(*depths.iter().max().expect("depths"), MAX_DEPTH);
    assert_eq!(
        rematerialised_at,
        (1..=11).map(|k| 9 * k).collect::<Vec<_>>()
    );
    assert_eq!(expected.len(), APPENDS * CHUNK);
    let entry = client.stat("wb", path).expect("stat");
    assert_eq!(entry.body_digest_uri, objstore::sha256_uri(&expected));
    assert_eq!(entry.content_type, "text/plain; charset=utf-8");
}

#[test]
fn hundred_facade_appends_read_back_the_concatenation_within_dependency_limits() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let wb = Workbench::new(open(tmp.path(), nokv::client::DEFAULT_BLOCK_SIZE));
    let mut expected = Vec::new();
    let mut rematerialisations = 0;
    let mut last_generation = 0u64;
    for i in 0..APPENDS {
        let delta = chunk(i);
        expected.extend_from_slice(&delta);
        let text = String::from_utf8(delta.clone()).expect("ascii chunk");
        let r = ok(wb.call(
            "workbench_append",
            &json!({"id": "wb", "section": "logs", "path": "agent.log", "text": text}),
        ));
        assert_eq!(r["created"], i == 0, "step {i}");
        assert_eq!(r["appended_bytes"], CHUNK as u64, "step {i}");
        assert_eq!(r["size_bytes"], expected.len() as u64, "step {i}");
        assert_eq!(
            r["digest"],
            objstore::sha256_uri(&delta),
            "step {i}: delta digest"
        );
        let generation = r["generation"].as_u64().expect("generation");
        assert!(generation > last_generation, "step {i}");
        last_generation = generation;
        let seen = check_live_revision(wb.client(), "logs/agent.log", &expected, i);
        assert_eq!(seen.depth, (i % 9) as u32, "step {i}");
        if i > 0 && seen.depth == 0 {
            rematerialisations += 1;
            // 4 MiB blocks: the rematerialised ≤100 KiB body is one block of its own.
            assert_eq!(seen.rows.len(), 1);
            assert_eq!(seen.rows[0].physical_owner_revision, seen.revision);
        } else if i > 0 {
            // One new 1 KiB segment, owned by the new revision, at the end.
            let last = seen.rows.last().expect("rows");
            assert_eq!(last.physical_owner_revision, seen.revision);
            assert_eq!(last.length, CHUNK as u64);
            assert_eq!(
                seen.rows
                    .iter()
                    .filter(|r| r.physical_owner_revision == seen.revision)
                    .count(),
                1
            );
        }
    }
    assert_eq!(rematerialisations, 11);
    let stat = ok(wb.call(
        "workbench_stat",
        &json!({"id": "wb", "section": "logs", "path": "agent.log"}),
    ));
    assert_eq!(stat["card"]["digest_uri"], objstore::sha256_uri(&expected));
    assert_eq!(stat["card"]["size_bytes"], (APPENDS * CHUNK) as u64);
    assert_eq!(stat["card"]["content_type"], "text/plain; charset=utf-8");
    assert_eq!(
        wb.client().read_all("wb", "logs/agent.log").expect("read"),
        expected
    );
    // The structured read sees one text line per append.
    let lines = ok(wb.call(
        "workbench_read",
        &json!({"id": "wb", "section": "logs", "path": "agent.log", "limit": 300}),
    ));
    assert_eq!(lines["record_count"], APPENDS as u64);
    assert_eq!(
        lines["items"][99]["value"],
        String::from_utf8(chunk(99)[..CHUNK - 1].to_vec()).expect("ascii")
    );
}

/// The object files of `rows` under `<store>/objects/`.
fn object_files(client: &Client, rows: &[ManifestRow]) -> Vec<std::path::PathBuf> {
    let local = objstore::LocalDir::open(client.dir().join("objects")).expect("objects");
    rows.iter()
        .map(|r| local.object_path(&r.object_key).expect("path"))
        .collect()
}

#[test]
fn appended_body_reads_its_owners_blocks_and_rematerialised_body_does_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let client = open(tmp.path(), 4096);
    let path = "logs/seg.log";
    let mut expected = Vec::new();
    let mut chain = Vec::new();
    for i in 0..9 {
        expected.extend_from_slice(&chunk(i));
        client
            .append("wb", path, &chunk(i), None, "t")
            .expect("append");
        chain.push(check_live_revision(&client, path, &expected, i));
    }
    // Depth 8: the body's first segment is still physically owned by the first revision.
    let at_eight = &chain[8];
    assert_eq!(at_eight.depth, 8);
    assert_eq!(at_eight.dependency_owners, 8);
    assert_eq!(at_eight.rows[0].physical_owner_revision, chain[0].revision);
    // Damaging that owner's block breaks the appended body's read of the first segment
    // (typed error, never data) but not of its newest segment.
    let first_block = object_files(&client, &chain[0].rows[..1]).remove(0);
    let good = std::fs::read(&first_block).expect("read block");
    let mut bad = good.clone();
    bad[0] ^= 0x80;
    std::fs::write(&first_block, &bad).expect("corrupt");
    assert!(matches!(
        client.read_range("wb", path, 0, 1),
        Err(Error::ObjectUnavailable(_))
    ));
    assert_eq!(
        client
            .read_range("wb", path, (8 * CHUNK) as u64, CHUNK as u64)
            .expect("newest segment"),
        chunk(8)
    );
    std::fs::write(&first_block, &good).expect("repair");

    // The 10th append rematerialises; afterwards the old chain's blocks are not needed.
    expected.extend_from_slice(&chunk(9));
    let r = client
        .append("wb", path, &chunk(9), None, "t")
        .expect("append");
    assert_eq!((r.dependency_depth, r.dependency_count), (0, 0));
    let remat = check_live_revision(&client, path, &expected, 9);
    for old in &chain {
        for file in object_files(&client, &old.rows) {
            if file.exists() {
                std::fs::remove_file(&file).expect("remove old block");
            }
        }
    }
    assert_eq!(client.read_all("wb", path).expect("read"), expected);
    // The next append reuses only the rematerialised revision's blocks.
    expected.extend_from_slice(&chunk(10));
    let r = client
        .append("wb", path, &chunk(10), None, "t")
        .expect("append after remat");
    assert_eq!((r.dependency_depth, r.dependency_count), (1, 1));
    let after = check_live_revision(&client, path, &expected, 10);
    let owners: BTreeSet<_> = after
        .rows
        .iter()
        .map(|r| r.physical_owner_revision)
        .collect();
    assert_eq!(owners, BTreeSet::from([remat.revision, after.revision]));
    assert_eq!(client.read_all("wb", path).expect("read"), expected);
}
