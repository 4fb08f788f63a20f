//! Helpers shared by the NoKV integration tests in `tests/tests/`.

use meta::codec::{
    artifact_revision, path_current, revision_ref, ArtifactRevision, CommandResult, RefOwner,
    RevisionRef,
};
use meta::command::{Mutation, Predicate};
use meta::schema::Family;
use meta::RequestId;
use nokv::Client;
use serde_json::Value;

/// Opens a fresh embedded store in a new temporary directory. Keep the `TempDir` alive.
///
/// The engine switch: with `NOKV_TEST_ENGINE=etcd` the store keeps its metadata on an
/// etcd-backed logical shard (`nokv init --metadata-etcd`, a root of its own in a fresh
/// namespace) in the three-member loopback cluster `testkit` starts once per test process;
/// otherwise in holt.
pub fn fresh_store() -> (tempfile::TempDir, nokv::Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    if test_engine_is_etcd() {
        init_etcd_store(&store);
    }
    let client = nokv::Client::open(&store).expect("open store");
    (dir, client)
}

/// True when `NOKV_TEST_ENGINE=etcd` (see [`fresh_store`]).
pub fn test_engine_is_etcd() -> bool {
    std::env::var("NOKV_TEST_ENGINE").is_ok_and(|v| v == "etcd")
}

/// Initializes `store` with its metadata on a new root in the shared loopback etcd cluster.
pub fn init_etcd_store(store: &std::path::Path) {
    let cluster = testkit::etcd::shared().expect("a three-member etcd cluster on loopback");
    let ns = format!("/t-{}/", meta::RootId::random().expect("random"));
    nokv::store_config::init_store(
        store,
        &nokv::store_config::InitOptions {
            metadata_etcd: Some(cluster.endpoints().join(",")),
            etcd_namespace: Some(ns),
            root_name: Some("test".into()),
            ..Default::default()
        },
    )
    .expect("init an etcd-backed store");
}

/// Asserts a facade envelope is a success and returns it.
pub fn ok(result: Value) -> Value {
    assert_eq!(
        result.get("status").and_then(Value::as_str),
        Some("success"),
        "expected success, got {result:#}"
    );
    result
}

/// Asserts a facade envelope is an error with `code` and returns it.
pub fn err(result: Value, code: &str) -> Value {
    assert_eq!(
        result.get("status").and_then(Value::as_str),
        Some("error"),
        "expected error {code}, got {result:#}"
    );
    assert_eq!(
        result.get("code").and_then(Value::as_str),
        Some(code),
        "wrong error code in {result:#}"
    );
    result
}

/// Deterministic body of the crash writer's `i`-th file: between 1 byte and ~9 KiB, spanning
/// several 4 KiB blocks when the store uses small blocks.
pub fn crash_body(i: u64) -> Vec<u8> {
    let len = 1 + (i.wrapping_mul(2_654_435_761) % 9_000) as usize;
    (0..len)
        .map(|j| (i as usize).wrapping_mul(31).wrapping_add(j) as u8)
        .collect()
}

/// The deterministic body `shared_writer` publishes as its `i`-th file under `name`: at most
/// 4,096 bytes repeating `name:i:`, so a body found under another name or index is detected.
pub fn shared_body(name: &str, i: u64) -> Vec<u8> {
    let head = format!("{name}:{i}:");
    let len = 1 + (i.wrapping_mul(2_654_435_761) % 4_096) as usize;
    head.bytes().cycle().take(len.max(head.len())).collect()
}

/// Writes a PathCurrent row for `file` that shares the revision of the existing file `from`, with
/// its reference bookkeeping — what an older NoKV could publish next to `file/…` descendants.
pub fn fabricate_clash(client: &Client, id: &str, file: &str, from: &str) {
    let shard = client.meta();
    let read = shard.read();
    let ws = read.visible_workspace(id).unwrap();
    let root = shard.root_id();
    let (file, from) = (
        meta::normalize(file).unwrap(),
        meta::normalize(from).unwrap(),
    );
    let mut entry = read.path_entry(&ws.incarnation, &from).unwrap().unwrap();
    let rev = entry.artifact_revision_id;
    let rev_key = artifact_revision::key(&root, &rev);
    let rev_bytes = shard
        .holt_db()
        .expect("a holt-backed shard")
        .tree("artifact_revision")
        .unwrap()
        .get(&rev_key)
        .unwrap()
        .unwrap();
    let mut row = ArtifactRevision::decode(&rev_bytes).unwrap();
    row.strong_reference_count += 1;
    row.reference_epoch += 1;
    let cv = read.version() + 1;
    entry.generation = cv;
    entry.created_version = cv;
    entry.modified_version = cv;
    let mut cmd = shard.command_header(
        RequestId::random().unwrap(),
        [9; 32],
        read.version(),
        CommandResult::Applied { value: 0 },
    );
    let path_key = path_current::key(&root, &ws.incarnation, &file);
    cmd.predicates = vec![
        Predicate::absent(Family::PathCurrent, path_key.clone()),
        Predicate::equals(Family::ArtifactRevision, rev_key.clone(), rev_bytes),
    ];
    cmd.mutations = vec![
        Mutation::put(Family::PathCurrent, path_key, entry.encode()),
        Mutation::put(
            Family::RevisionRef,
            revision_ref::key(
                &root,
                &RefOwner::Path {
                    incarnation: ws.incarnation,
                    path: file,
                },
                &rev,
            ),
            RevisionRef {
                reference_epoch_at_add: row.reference_epoch,
                created_version: cv,
            }
            .encode(),
        ),
        Mutation::put(Family::ArtifactRevision, rev_key, row.encode()),
    ];
    drop(read);
    shard.execute(cmd).unwrap();
}

/// An object-store adapter that stores every key under a short fixed-length name
/// (`k/` + 32 hex characters of the key's SHA-256), forwarding every call — multipart observation,
/// upload aborts and upload listing included — to the wrapped provider. The S3 tests use it in
/// front of s3s-fs, whose on-disk names for multipart uploads embed the base64 object key and
/// exceed the file-name limit for NoKV's full block keys; real S3 services have no such limit.
/// Listing is not supported (keys cannot be mapped back): it answers an empty list.
#[derive(Debug)]
pub struct ShortKeys<S> {
    /// The wrapped provider.
    pub inner: S,
}

impl<S> ShortKeys<S> {
    /// The short name of `key`.
    pub fn short(key: &str) -> String {
        let digest = objstore::sha256_uri(key.as_bytes());
        let hex = digest.trim_start_matches("sha256:");
        format!("k/{}", &hex[..32])
    }
}

impl<S: objstore::ObjectStore> objstore::ObjectStore for ShortKeys<S> {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), objstore::Error> {
        objstore::validate_key(key)?;
        self.inner.put(&Self::short(key), bytes)
    }
    fn put_if_absent(
        &self,
        key: &str,
        bytes: &[u8],
    ) -> Result<objstore::PutOutcome, objstore::Error> {
        objstore::validate_key(key)?;
        self.inner.put_if_absent(&Self::short(key), bytes)
    }
    fn get(&self, key: &str) -> Result<Vec<u8>, objstore::Error> {
        self.inner.get(&Self::short(key))
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, objstore::Error> {
        self.inner.get_range(&Self::short(key), offset, len)
    }
    fn head(&self, key: &str) -> Result<Option<objstore::ObjectMeta>, objstore::Error> {
        self.inner.head(&Self::short(key))
    }
    fn delete(&self, key: &str) -> Result<(), objstore::Error> {
        self.inner.delete(&Self::short(key))
    }
    fn list(&self, _prefix: &str) -> Result<Vec<String>, objstore::Error> {
        Ok(Vec::new())
    }
    fn provider_name(&self) -> &'static str {
        self.inner.provider_name()
    }
    fn put_if_absent_observed(
        &self,
        key: &str,
        bytes: &[u8],
        observer: &mut dyn objstore::UploadObserver,
    ) -> Result<objstore::PutOutcome, objstore::Error> {
        objstore::validate_key(key)?;
        self.inner
            .put_if_absent_observed(&Self::short(key), bytes, observer)
    }
    fn abort_upload(&self, key: &str, upload_id: &str) -> Result<(), objstore::Error> {
        self.inner.abort_upload(&Self::short(key), upload_id)
    }
    fn list_uploads(&self, prefix: &str) -> Result<Vec<objstore::OpenUpload>, objstore::Error> {
        self.inner.list_uploads(prefix)
    }
}

/// A running `crash_writer` child (tests/src/bin/crash_writer.rs) and its stream of
/// acknowledgements (`ACK <i> <generation>` after each `put_file` returned).
pub struct CrashWriter {
    child: std::process::Child,
    acks: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl CrashWriter {
    /// Starts `bin` (the integration test's `env!("CARGO_BIN_EXE_crash_writer")`) on `store`,
    /// publishing `outputs/file-<i>.bin` from `i = start` on.
    pub fn spawn(bin: &str, store: &std::path::Path, start: u64) -> CrashWriter {
        use std::io::BufRead;
        let mut child = std::process::Command::new(bin)
            .arg(store)
            .arg(start.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn crash_writer");
        let stdout = child.stdout.take().expect("stdout");
        CrashWriter {
            child,
            acks: std::io::BufReader::new(stdout).lines(),
        }
    }

    /// The next acknowledgement `(i, generation)`; `None` when the writer's output ended.
    pub fn next_ack(&mut self) -> Option<(u64, u64)> {
        let line = self.acks.next()?.expect("read ack");
        let mut parts = line.split_whitespace();
        assert_eq!(parts.next(), Some("ACK"), "unexpected line {line}");
        let i: u64 = parts.next().unwrap().parse().unwrap();
        let g: u64 = parts.next().unwrap().parse().unwrap();
        Some((i, g))
    }

    /// SIGKILLs the writer and waits for it; panics unless it died of the kill.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let status = self.child.wait().expect("wait");
        assert!(
            !status.success(),
            "writer must have been killed, got {status:?}"
        );
    }
}

/// The client of a child binary's open, or its message on stderr and exit code 1.
pub fn open_or_exit(opened: nokv::Result<Client>) -> Client {
    opened.unwrap_or_else(|e| {
        eprintln!("open: {e}");
        std::process::exit(1);
    })
}

/// The body of a crash child binary, the other side of [`CrashWriter`]: takes `STORE [START]`
/// from the command line, opens the store, runs `setup` once, then `step(client, i)` for
/// `i = START, START+1, …`, printing (and flushing) `ACK <i> <generation>` after each step that
/// returned a generation, until `step` answers `None`. A usage error exits 2; a failed open, setup
/// or step prints its message on stderr and exits 1.
pub fn run_crash_child(
    name: &str,
    setup: impl FnOnce(&Client) -> Result<(), String>,
    mut step: impl FnMut(&Client, u64) -> Option<Result<u64, String>>,
) {
    use std::io::Write;
    let mut args = std::env::args().skip(1);
    let Some(store) = args.next() else {
        eprintln!("usage: {name} STORE [START]");
        std::process::exit(2);
    };
    let start: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let client = open_or_exit(Client::open(&store));
    if let Err(e) = setup(&client) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let stdout = std::io::stdout();
    for i in start.. {
        match step(&client, i) {
            None => break,
            Some(Ok(generation)) => {
                let mut out = stdout.lock();
                let _ = writeln!(out, "ACK {i} {generation}");
                let _ = out.flush();
            }
            Some(Err(e)) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
}

/// Runs a [`CrashWriter`] from `start` and SIGKILLs it right after its `acks`-th
/// acknowledgement (while the next put is in flight); returns the acknowledgements.
pub fn crash_writer_killed_after(
    bin: &str,
    store: &std::path::Path,
    start: u64,
    acks: u64,
) -> Vec<(u64, u64)> {
    let mut writer = CrashWriter::spawn(bin, store, start);
    let mut acked = Vec::new();
    while let Some(ack) = writer.next_ack() {
        acked.push(ack);
        if acked.len() as u64 >= acks {
            break;
        }
    }
    writer.kill();
    acked
}
