//! Publication benchmarks (issue 5): `put_file` of 4 KiB, 1 MiB and 64 MiB bodies on the local
//! directory store (`LocalDir` under `<store>/objects`, holt metadata with the default
//! `Durability::Sync`, i.e. every metadata command is an fdatasync'd group commit), with the time
//! split into its object half and its metadata half.
//!
//! The SDK takes its object provider from the store configuration (`ClientOptions` has no hook
//! for a wrapped `ObjectStore`), so the split is measured as three benchmarks over the same
//! bodies, each on a fresh store with default 4 MiB blocks:
//!
//! * `put_file/end_to_end/<size>` — `nokv::Client::put` to a new path (create-only): pre-checks,
//!   the Publish operation and its StagedObject ledger (begin, staging, finalize — several
//!   metadata commands), block split, SHA-256 per block and over the whole body, one durable
//!   `put_if_absent` per block, and the publishing metadata command.
//! * `put_file/objects/<size>` — the object half alone, done the way the SDK does it: split into
//!   4 MiB blocks, SHA-256 per block and over the whole body, `put_if_absent` of each block under
//!   a fresh revision's key on the store's own provider (`Client::objects`, a `LocalDir`: temp
//!   file, fsync, hard link, directory fsyncs).
//! * `put_file/publish_command/<size>` — the final metadata command alone: one
//!   `MetaShard::publish` of a create-only PublishRequest carrying the body's manifest rows (1, 1
//!   and 16 rows), which writes ArtifactRevision, ArtifactManifest, RevisionRef, PathCurrent, the
//!   workspace revision, index rows and the event in one fdatasync'd commit. No object bytes and
//!   no ledger commands.
//!
//! The metadata half of `end_to_end` is `end_to_end − objects` (ledger commands + final
//! command); `publish_command` shows how much of it the final command is.
//!
//! Every iteration publishes a new path; a store is replaced (outside the timed region) once it
//! holds 256 MiB of blocks, so disk use stays bounded.
//!
//! Run: `cargo bench -p nokv-benches --bench publication` (filter e.g. `-- put_file/objects`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use meta::{normalize, ArtifactRevisionId, ManifestRow, PathCondition, PublishRequest, RequestId};
use nokv::{Client, PutOptions};
use objstore::ObjectStore;

/// Block size the SDK uses by default (docs/metadata-format.md: 4 MiB).
const BLOCK: usize = nokv::client::DEFAULT_BLOCK_SIZE;
/// Replace the store once this many body bytes were written to it.
const RECYCLE_BYTES: u64 = 256 * 1024 * 1024;
const SIZES: [(usize, &str); 3] = [
    (4 * 1024, "4KiB"),
    (1024 * 1024, "1MiB"),
    (64 * 1024 * 1024, "64MiB"),
];

/// Deterministic incompressible-looking bytes.
fn body(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A temporary store with one workbench, replaced after [`RECYCLE_BYTES`].
struct Store {
    _dir: tempfile::TempDir,
    client: Client,
    written: u64,
    next_path: u64,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().expect("tempdir");
        let client = Client::open(dir.path().join("store")).expect("open store");
        client.create_workbench("wb").expect("workbench");
        Store {
            _dir: dir,
            client,
            written: 0,
            next_path: 0,
        }
    }

    /// A fresh path name; recycles the store first when it is full.
    fn next(slot: &mut Option<Store>, bytes: usize) -> (&Client, String) {
        let full = slot
            .as_ref()
            .is_none_or(|s| s.written + bytes as u64 > RECYCLE_BYTES);
        if full {
            *slot = None; // drop (and delete) the old store before creating the next
            *slot = Some(Store::new());
        }
        let store = slot.as_mut().expect("store just ensured");
        store.written += bytes as u64;
        store.next_path += 1;
        (
            &store.client,
            format!("outputs/f{:08}.bin", store.next_path),
        )
    }
}

/// The object half of a publication, as `Client::put_reader` does it.
fn upload_blocks(client: &Client, objects: &Arc<dyn ObjectStore>, body: &[u8]) -> String {
    let meta = client.meta();
    let revision = ArtifactRevisionId::random().expect("revision id");
    let mut whole = objstore::Sha256Stream::new();
    for (index, block) in body.chunks(BLOCK).enumerate() {
        whole.update(block);
        let key = objstore::block_key(
            meta.logical_shard_id().as_bytes(),
            meta.root_id().as_bytes(),
            revision.as_bytes(),
            index as u64,
        );
        black_box(objstore::sha256_uri(block));
        objects.put_if_absent(&key, block).expect("put block");
    }
    whole.finish()
}

/// A create-only PublishRequest for `body` at `path` with its manifest rows (no objects).
fn publish_request(
    client: &Client,
    path: &str,
    body_len: usize,
    block_digests: &[String],
    body_digest: &str,
) -> PublishRequest {
    let meta = client.meta();
    let revision = ArtifactRevisionId::random().expect("revision id");
    let mut manifest = Vec::with_capacity(block_digests.len());
    for (i, digest) in block_digests.iter().enumerate() {
        let offset = (i * BLOCK) as u64;
        let length = (body_len - i * BLOCK).min(BLOCK) as u64;
        manifest.push(ManifestRow {
            object_index: i as u64,
            physical_owner_revision: revision,
            physical_object_index: i as u64,
            object_key: objstore::block_key(
                meta.logical_shard_id().as_bytes(),
                meta.root_id().as_bytes(),
                revision.as_bytes(),
                i as u64,
            ),
            logical_offset: offset,
            object_offset: 0,
            length,
            digest_uri: digest.clone(),
            append_segment: None,
        });
    }
    PublishRequest {
        request_id: RequestId::random().expect("request id"),
        workbench_id: "wb".into(),
        path: normalize(path).expect("path"),
        condition: PathCondition::Create,
        revision_id: revision,
        logical_size: body_len as u64,
        body_digest_uri: body_digest.to_string(),
        content_type: "application/octet-stream".into(),
        producer: "bench".into(),
        manifest_id: None,
        manifest,
        dependency_depth: 0,
        index_fields: Default::default(),
    }
}

fn put_file(c: &mut Criterion) {
    let mut group = c.benchmark_group("put_file");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sampling_mode(criterion::SamplingMode::Flat);
    let options = PutOptions::create("application/octet-stream", "bench");
    for (size, label) in SIZES {
        let data = body(size);
        let block_digests: Vec<String> = data.chunks(BLOCK).map(objstore::sha256_uri).collect();
        let body_digest = objstore::sha256_uri(&data);
        group.throughput(Throughput::Bytes(size as u64));

        let mut slot: Option<Store> = None;
        group.bench_function(BenchmarkId::new("end_to_end", label), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (client, path) = Store::next(&mut slot, size);
                    let start = Instant::now();
                    let receipt = client.put("wb", &path, &data, &options).expect("put");
                    total += start.elapsed();
                    assert_eq!(receipt.digest_uri, body_digest);
                }
                total
            })
        });

        let mut slot: Option<Store> = None;
        group.bench_function(BenchmarkId::new("objects", label), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (client, _) = Store::next(&mut slot, size);
                    let objects = client.objects().clone();
                    let start = Instant::now();
                    let digest = upload_blocks(client, &objects, &data);
                    total += start.elapsed();
                    assert_eq!(digest, body_digest);
                }
                total
            })
        });

        let mut slot: Option<Store> = None;
        group.bench_function(BenchmarkId::new("publish_command", label), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Metadata only: the store's byte budget counts manifest rows, not bodies.
                    let (client, path) = Store::next(&mut slot, 0);
                    let request =
                        publish_request(client, &path, size, &block_digests, &body_digest);
                    let start = Instant::now();
                    let receipt = client.meta().publish(request).expect("publish");
                    total += start.elapsed();
                    black_box(receipt.generation);
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, put_file);
criterion_main!(benches);
