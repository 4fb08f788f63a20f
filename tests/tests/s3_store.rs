//! Stores on S3 (s3s-fs): `nokv init --objects s3://…`, the namespace marker checked at open,
//! publication and verified reads through the S3 provider and block cache. Feature `s3-tests`.
#![cfg(feature = "s3-tests")]

mod s3_support;

use std::ffi::OsString;
use std::path::Path;

use nokv::store_config::{init_store, InitOptions, ObjectsConfig, StoreConfig, CONFIG_FILE};
use nokv::{Client, Error, PutOptions};
use objstore::{ObjectStore, S3Config, S3};

/// A fresh bucket, returned with its config (prefix `base`).
fn bucket(name: &str, base: &str) -> S3Config {
    let c = s3_support::config(name, base);
    s3_support::open(c.clone());
    c
}

fn init(dir: &Path, c: &S3Config, cache_bytes: Option<u64>) -> StoreConfig {
    let outcome = init_store(
        dir,
        &InitOptions {
            objects: Some(c.url()),
            endpoint: c.endpoint.clone(),
            cache_bytes,
            ..Default::default()
        },
    )
    .expect("init");
    assert!(outcome.created);
    outcome.config
}

#[test]
fn init_then_reopen_against_the_same_namespace_works() {
    let c = bucket("init", "team/a");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let config = init(&store, &c, None);
    assert!(matches!(
        config.objects,
        ObjectsConfig::S3 {
            path_style: true,
            ..
        }
    ));
    assert!(
        !store.join("objects").exists(),
        "an S3 store keeps no local objects dir"
    );
    // The marker object carries the store uuid.
    let marker = S3::open(c.clone())
        .expect("s3")
        .get("nokv/namespace.json")
        .expect("marker");
    let text = String::from_utf8(marker).expect("utf8");
    assert!(text.contains(&config.store_uuid), "{text}");

    let client = Client::open(&store).expect("open");
    client.create_workbench("wb").expect("workbench");
    let body = s3_support::bytes(9 * 1024 * 1024 + 5, 1); // three 4 MiB blocks
    let receipt = client
        .put(
            "wb",
            "outputs/model.bin",
            &body,
            &PutOptions::create("application/octet-stream", "test"),
        )
        .expect("publish");
    assert_eq!(receipt.size_bytes, body.len() as u64);
    assert_eq!(client.objects().provider_name(), "s3");
    drop(client);

    let client = Client::open(&store).expect("reopen");
    assert_eq!(
        client.read_all("wb", "outputs/model.bin").expect("read"),
        body
    );
    let cut = 4 * 1024 * 1024;
    assert_eq!(
        client
            .read_range("wb", "outputs/model.bin", cut as u64 - 3, 6)
            .expect("straddle"),
        &body[cut - 3..cut + 3]
    );
    // Blocks are in the bucket under the prefix, with the revision-owned layout.
    let listed = S3::open(c.clone())
        .expect("s3")
        .list("nokv/artifacts/")
        .expect("list");
    assert_eq!(listed.len(), 3);
    drop(client);
    // Re-running init with the same settings is idempotent.
    let again = init_store(
        &store,
        &InitOptions {
            objects: Some(c.url()),
            endpoint: c.endpoint.clone(),
            ..Default::default()
        },
    )
    .expect("rerun");
    assert!(!again.created);
    assert_eq!(again.config.store_uuid, config.store_uuid);
}

#[test]
fn store_pointed_at_another_prefix_is_refused() {
    let c = bucket("prefix", "team/a");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let config = init(&store, &c, None);
    // Rewrite the configuration to another prefix of the same bucket (no marker there).
    let mut moved = config.clone();
    if let ObjectsConfig::S3 { prefix, .. } = &mut moved.objects {
        *prefix = "team/b".into();
    }
    std::fs::remove_file(store.join(CONFIG_FILE)).expect("rm config");
    moved.write_new(&store).expect("write moved config");
    assert!(matches!(
        Client::open(&store),
        Err(Error::NamespaceMismatch { .. })
    ));

    // A second store initialised on the first one's namespace is refused at init…
    let other = tmp.path().join("other");
    let err = init_store(
        &other,
        &InitOptions {
            objects: Some(c.url()),
            endpoint: c.endpoint.clone(),
            ..Default::default()
        },
    )
    .expect_err("namespace taken");
    assert!(matches!(err, Error::NamespaceMismatch { .. }), "{err:?}");
    // …and a store whose uuid does not match the marker is refused at open.
    let mut foreign = config.clone();
    foreign.store_uuid = "ab".repeat(16);
    std::fs::remove_file(store.join(CONFIG_FILE)).expect("rm config");
    foreign.write_new(&store).expect("write foreign config");
    assert!(matches!(
        Client::open(&store),
        Err(Error::NamespaceMismatch { .. })
    ));
    // Restoring the right configuration opens again.
    std::fs::remove_file(store.join(CONFIG_FILE)).expect("rm config");
    config.write_new(&store).expect("restore");
    Client::open(&store).expect("own namespace opens");
}

#[test]
fn init_refuses_changed_settings_and_bad_urls() {
    let c = bucket("settings", "x");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    init(&store, &c, Some(1 << 20));
    let err = init_store(
        &store,
        &InitOptions {
            objects: Some(format!("s3://{}/y", c.bucket)),
            endpoint: c.endpoint.clone(),
            ..Default::default()
        },
    )
    .expect_err("different settings");
    assert!(matches!(err, Error::StoreConfig { .. }));
    let err = init_store(
        &tmp.path().join("s2"),
        &InitOptions {
            objects: Some("ftp://x".into()),
            ..Default::default()
        },
    )
    .expect_err("bad url");
    assert!(matches!(err, Error::StoreConfig { .. }));
}

#[test]
fn corrupted_block_in_the_bucket_is_object_unavailable() {
    let c = bucket("bad-block", "p");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    init(&store, &c, Some(0)); // no cache: every read goes to the bucket
    let client = Client::open(&store).expect("open");
    client.create_workbench("wb").expect("wb");
    let body = s3_support::bytes(10_000, 2);
    client
        .put(
            "wb",
            "input/data.bin",
            &body,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .expect("put");
    let s3 = S3::open(c).expect("s3");
    let keys = s3.list("nokv/artifacts/").expect("list");
    assert_eq!(keys.len(), 1);
    let mut evil = s3.get(&keys[0]).expect("get");
    evil[0] ^= 1;
    s3.put(&keys[0], &evil).expect("corrupt in bucket");
    let err = client
        .read_all("wb", "input/data.bin")
        .expect_err("corrupt");
    assert!(matches!(err, Error::ObjectUnavailable(_)), "{err:?}");
}

#[test]
fn cli_init_collect_materialize_round_trip_through_s3() {
    let c = bucket("cli", "cli/store");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let run = |args: &[&str]| {
        let mut argv: Vec<OsString> = vec!["nokv".into(), "--store".into(), store.clone().into()];
        argv.extend(args.iter().map(OsString::from));
        nokv_cli::main_with_args(argv)
    };
    let url = c.url();
    let ep = c.endpoint.clone().expect("endpoint");
    assert_eq!(
        run(&[
            "init",
            "--objects",
            &url,
            "--endpoint",
            &ep,
            "--cache-bytes",
            "8388608"
        ]),
        std::process::ExitCode::SUCCESS
    );
    let src = tmp.path().join("big.bin");
    let body = s3_support::bytes(13 * 1024 * 1024, 3);
    std::fs::write(&src, &body).expect("write src");
    let src_s = src.to_string_lossy().to_string();
    assert_eq!(
        run(&["--quiet", "collect", "wb", &src_s, "outputs/big.bin"]),
        std::process::ExitCode::SUCCESS
    );
    let out = tmp.path().join("out");
    // Remove the cache: materialize must still work from the bucket alone.
    let _ = std::fs::remove_dir_all(store.join("cache"));
    let out_s = out.to_string_lossy().to_string();
    assert_eq!(
        run(&["materialize", "wb", &out_s, "--prefix", "outputs"]),
        std::process::ExitCode::SUCCESS
    );
    assert_eq!(
        std::fs::read(out.join("outputs/big.bin")).expect("materialized"),
        body
    );
}

#[test]
fn collect_and_materialize_report_progress_up_to_the_body_size() {
    use nokv::materialize::{collect_with_progress, materialize_with_progress, ProgressEvent};
    let c = bucket("progress", "p");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    init(&store, &c, None);
    let client = Client::open(&store).expect("open");
    client.create_workbench("wb").expect("wb");
    let src = tmp.path().join("f.bin");
    let size = 9 * 1024 * 1024 + 1;
    std::fs::write(&src, s3_support::bytes(size, 4)).expect("src");
    // (phase, total, last done) per phase.
    let mut phases: Vec<(String, u64, u64)> = Vec::new();
    let mut record = |e: ProgressEvent<'_>| match e {
        ProgressEvent::Begin { phase, total, .. } => phases.push((phase.to_string(), total, 0)),
        ProgressEvent::Advance { done } => {
            let current = phases.last_mut().expect("Begin comes first");
            assert!(done >= current.2, "progress is monotonic");
            assert!(done <= current.1, "progress never exceeds the total");
            current.2 = done;
        }
    };
    collect_with_progress(
        &client,
        "wb",
        &src,
        "input/f.bin",
        "application/octet-stream",
        false,
        &mut record,
    )
    .expect("collect");
    materialize_with_progress(&client, "wb", None, &tmp.path().join("out"), &mut record)
        .expect("materialize");
    let names: Vec<&str> = phases.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(names, ["hashing", "uploading", "materializing"]);
    for (name, total, done) in &phases {
        assert_eq!((*total, *done), (size as u64, size as u64), "{name}");
    }
}

#[test]
fn ranged_reads_on_s3_detect_a_corrupted_block_and_still_read_the_others() {
    use nokv::workbench::payload::decode_payload;
    use nokv::workbench::Workbench;
    use nokv::ClientOptions;

    const BLOCK: u64 = 4096;
    const SIZE: u64 = 5 * BLOCK + BLOCK / 2;
    let c = bucket("ranges", "r");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    init(&store, &c, Some(0)); // no block cache: every read goes to the bucket
    let client = Client::open_with(
        &store,
        ClientOptions {
            block_size: BLOCK as usize,
            ..Default::default()
        },
    )
    .expect("open");
    client.create_workbench("wb").expect("wb");
    let body = s3_support::bytes(SIZE as usize, 5);
    client
        .put(
            "wb",
            "outputs/body.bin",
            &body,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .expect("put");
    let read = |offset: u64, len: u64| client.read_range("wb", "outputs/body.bin", offset, len);
    let src = |offset: u64, len: u64| &body[offset as usize..(offset + len) as usize];
    for (offset, len) in [
        (0, 1),
        (SIZE - 1, 1),
        (BLOCK - 3, 6),
        (BLOCK - 3, BLOCK + 6),
        (SIZE, 0),
        (SIZE - 10, 10),
    ] {
        assert_eq!(read(offset, len).expect("range"), src(offset, len));
    }
    assert!(matches!(
        read(SIZE, 1),
        Err(Error::RangeOutOfBounds { offset, len: 1, size }) if offset == SIZE && size == SIZE
    ));

    // Overwrite block 2 in the bucket with one flipped byte (same length), via PUT.
    let entry = client.stat("wb", "outputs/body.bin").expect("stat");
    let rows = client
        .meta()
        .read()
        .manifest(&entry.artifact_revision_id)
        .expect("manifest");
    assert_eq!(rows.len(), 6);
    let s3 = S3::open(c).expect("s3");
    let mut evil = s3.get(&rows[2].object_key).expect("get block 2");
    assert_eq!(evil.len() as u64, BLOCK);
    evil[BLOCK as usize / 2] ^= 0x10;
    s3.put(&rows[2].object_key, &evil)
        .expect("corrupt in bucket");

    for (offset, len) in [
        (2 * BLOCK, 1),
        (2 * BLOCK - 1, 2),
        (3 * BLOCK - 1, 2),
        (0, SIZE),
    ] {
        let got = read(offset, len);
        assert!(
            matches!(got, Err(Error::ObjectUnavailable(_))),
            "offset {offset} len {len}: {got:?}"
        );
    }
    for (offset, len) in [
        (0, 2 * BLOCK),
        (3 * BLOCK, SIZE - 3 * BLOCK),
        (BLOCK - 3, 6),
    ] {
        assert_eq!(read(offset, len).expect("clear range"), src(offset, len));
    }

    // The facade reports ObjectUnavailable (retryable) and never the bytes.
    let wb = Workbench::new(client.clone());
    let facade = |offset: u64, limit: u64| {
        wb.call(
            "workbench_read",
            &serde_json::json!({"id": "wb", "section": "outputs", "path": "body.bin",
                                "format": "bytes", "offset": offset, "limit": limit}),
        )
    };
    let e = facade(2 * BLOCK + 10, 100);
    assert_eq!(e["status"], "error", "{e:#}");
    assert_eq!(e["code"], "ObjectUnavailable", "{e:#}");
    assert_eq!(e["retryable"], true);
    assert!(!e.to_string().contains("nokv/artifacts"), "{e:#}");
    let fine = facade(BLOCK - 150, 300);
    assert_eq!(fine["status"], "success", "{fine:#}");
    let bytes = decode_payload(None, fine["bytes"].as_str())
        .expect("base64")
        .0;
    assert_eq!(bytes, src(BLOCK - 150, 300));

    // A truncated block (shorter object) is detected the same way.
    s3.put(&rows[4].object_key, &evil[..100])
        .expect("truncate in bucket");
    assert!(matches!(
        read(4 * BLOCK, 1),
        Err(Error::ObjectUnavailable(_))
    ));
    assert_eq!(
        read(5 * BLOCK, BLOCK / 2).expect("last block"),
        src(5 * BLOCK, BLOCK / 2)
    );
}
