//! fsck (issue 12 acceptance): a clean store has no finding; a hand-corrupted reference count, a
//! missing index row and a broken RecoveryOutbox chain are each named precisely; `repair_index`
//! fixes the index case and fsck is then clean; a path that is both a file and a directory is
//! named; `nokv fsck` exits non-zero on findings and `--repair-index` repairs.

mod gc_support;

use std::path::Path;
use std::process::Command;

use gc_support::{all_rows, assert_fsck_clean, create, open_gc, revision_of};
use meta::codec::ArtifactRevision;
use nokv::lifetime::FindingKind;

fn store() -> (tempfile::TempDir, nokv::Client) {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    client.create_workbench("wb").unwrap();
    client
        .put("wb", "outputs/a.txt", b"alpha", &create())
        .unwrap();
    client
        .put("wb", "outputs/b.txt", b"beta", &create())
        .unwrap();
    client
        .append("wb", "logs/run.log", b"one\n", None, "t")
        .unwrap();
    client
        .append("wb", "logs/run.log", b"two\n", None, "t")
        .unwrap();
    (tmp, client)
}

/// Writes `value` under `key` of `tree` directly through the engine (no metadata command): the
/// "hand corruption" of the tests.
fn poke(client: &nokv::Client, tree: &str, key: &[u8], value: Option<&[u8]>) {
    let db = client.meta().holt_db().expect("a holt-backed shard");
    let t = db.tree(tree).expect("tree");
    let mut batch = holt::Batch::new();
    match value {
        Some(v) => batch.put(&t, key.to_vec(), v.to_vec()),
        None => batch.delete(&t, key.to_vec()),
    }
    db.commit(batch).expect("raw write");
}

#[test]
fn a_consistent_store_has_no_finding() {
    let (_tmp, client) = store();
    assert_fsck_clean(&client);
    let r = client.fsck().unwrap().report;
    assert!(r.stats.revisions >= 4 && r.stats.references >= 4 && r.stats.index_rows > 0);
}

#[test]
fn fsck_names_a_hand_corrupted_reference_count() {
    let (_tmp, client) = store();
    let rev = revision_of(&client, "wb", "outputs/a.txt");
    let key = [
        client.meta().root_id().as_bytes().as_slice(),
        &meta::ArtifactRevisionId::from_hex(&rev).unwrap().0,
    ]
    .concat();
    let (_, bytes) = all_rows(&client, "artifact_revision")
        .into_iter()
        .find(|(k, _)| *k == key)
        .unwrap();
    let mut row = ArtifactRevision::decode(&bytes).unwrap();
    row.strong_reference_count += 2;
    poke(&client, "artifact_revision", &key, Some(&row.encode()));
    let findings = client.fsck().unwrap().report.findings;
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].kind, FindingKind::ReferenceCountMismatch);
    assert_eq!(findings[0].subject, format!("revision {rev}"));
    assert!(
        findings[0]
            .detail
            .contains("strong_reference_count is 3 but 1 RevisionRef row(s) target it"),
        "{}",
        findings[0].detail
    );
}

#[test]
fn fsck_names_a_missing_index_row_and_repair_index_restores_it() {
    let (_tmp, client) = store();
    let (key, _) = all_rows(&client, "secondary_index")
        .into_iter()
        .find(|(k, _)| {
            let key = meta::codec::SecondaryIndexKey::decode(k).unwrap();
            key.path.as_str() == "outputs/b.txt" && key.index_id.as_str() == "content_type"
        })
        .expect("the content_type row of outputs/b.txt");
    poke(&client, "secondary_index", &key, None);
    let findings = client.fsck().unwrap().report.findings;
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].kind, FindingKind::IndexRowMissing);
    assert_eq!(findings[0].subject, "path wb/outputs/b.txt");
    assert!(
        findings[0].detail.contains("content_type"),
        "{}",
        findings[0].detail
    );
    // A stale row of a path that does not exist is named too, and repaired.
    let mut stale = key.clone();
    let len = stale.len();
    stale[len - 2] ^= 0x01; // another (non-existent) path of the same incarnation
    if let Ok(k) = meta::codec::SecondaryIndexKey::decode(&stale) {
        assert_ne!(k.path.as_str(), "outputs/b.txt");
        let value = meta::codec::SecondaryIndexEntry {
            path_generation: 1,
            projection: Vec::new(),
        }
        .encode();
        poke(&client, "secondary_index", &stale, Some(&value));
        let kinds: Vec<FindingKind> = client
            .fsck()
            .unwrap()
            .report
            .findings
            .iter()
            .map(|f| f.kind)
            .collect();
        assert!(kinds.contains(&FindingKind::IndexRowStale), "{kinds:?}");
    }
    let repaired = client.repair_index().unwrap();
    assert!(repaired.rows_put >= 1, "{repaired:?}");
    assert_fsck_clean(&client);
    // Search works again for the repaired row.
    assert!(all_rows(&client, "secondary_index")
        .iter()
        .any(|(k, _)| *k == key));
}

#[test]
fn fsck_names_a_broken_recovery_outbox_chain() {
    let (_tmp, client) = store();
    let rows = all_rows(&client, "recovery_outbox");
    // Damage a header in the middle of the chain: its digest no longer links.
    let headers: Vec<&(Vec<u8>, Vec<u8>)> = rows.iter().filter(|(k, _)| k[0] == 0x00).collect();
    let (key, value) = headers[headers.len() / 2];
    let lsn = u64::from_be_bytes(key[1..9].try_into().unwrap());
    let mut damaged = value.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    poke(&client, "recovery_outbox", key, Some(&damaged));
    let findings = client.fsck().unwrap().report.findings;
    let broken: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::RecoveryOutboxBroken)
        .collect();
    assert_eq!(broken.len(), 1, "{findings:#?}");
    assert_eq!(broken[0].subject, format!("lsn {lsn}"));
}

#[test]
fn fsck_names_a_path_that_is_both_a_file_and_a_directory() {
    let (_tmp, client) = store();
    // Writers refuse the clash; a store that already holds one (e.g. written by an older build)
    // is modelled by copying a PathCurrent row to a key under `outputs/a.txt/`.
    let rows = all_rows(&client, "path_current");
    let (key, value) = rows
        .iter()
        .find(|(k, _)| {
            meta::codec::PathCurrentKey::decode(k)
                .unwrap()
                .path
                .as_str()
                == "outputs/a.txt"
        })
        .unwrap();
    let inc = meta::codec::PathCurrentKey::decode(key)
        .unwrap()
        .incarnation;
    let child = nokv::Client::normalize("outputs/a.txt/inner").unwrap();
    let child_key = meta::codec::path_current::key(&client.meta().root_id(), &inc, &child);
    poke(&client, "path_current", &child_key, Some(value));
    let findings = client.fsck().unwrap().report.findings;
    let clash: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::FileDirectoryClash)
        .collect();
    assert_eq!(clash.len(), 1, "{findings:#?}");
    assert_eq!(clash[0].subject, "path wb/outputs/a.txt");
}

fn cli(store: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("NOKV_FAULT_POINT")
        .output()
        .expect("run nokv_cli");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn cli_fsck_exits_non_zero_on_findings_and_repairs_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let store_dir = tmp.path().join("store");
    {
        let client = open_gc(&store_dir);
        client.create_workbench("wb").unwrap();
        client
            .put("wb", "outputs/a.txt", b"alpha", &create())
            .unwrap();
    }
    let (code, out) = cli(&store_dir, &["fsck"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("fsck: clean"), "{out}");
    {
        let client = gc_support::reopen(&store_dir);
        let (key, _) = all_rows(&client, "secondary_index")
            .into_iter()
            .next()
            .unwrap();
        poke(&client, "secondary_index", &key, None);
    }
    let (code, out) = cli(&store_dir, &["fsck"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("IndexRowMissing  path wb/outputs/a.txt"),
        "{out}"
    );
    let (code, out) = cli(&store_dir, &["fsck", "--repair-index"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("repaired index: 1 row(s) put"), "{out}");
    assert!(out.contains("fsck: clean"), "{out}");
}

#[test]
fn fsck_names_a_published_block_that_is_missing_from_the_object_store() {
    let (tmp, client) = store();
    let rev = revision_of(&client, "wb", "outputs/a.txt");
    let keys = gc_support::own_keys(&client, &rev);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let lost = keys.into_iter().next().unwrap();
    // The block disappears behind the metadata's back (a lost disk, a bucket rule, a hand).
    client.objects().delete(&lost).unwrap();

    let outcome = client.fsck().unwrap();
    assert!(!outcome.is_clean());
    let findings = &outcome.report.findings;
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].kind, FindingKind::ObjectMissing);
    assert_eq!(findings[0].kind.as_str(), "ObjectMissing");
    assert_eq!(findings[0].subject, format!("revision {rev}"));
    assert!(findings[0].detail.contains(&lost), "{findings:?}");
    assert!(outcome.listing_error.is_none());
    // The finding says how to get from the revision to the paths that lost their bytes.
    let explain = format!("nokv gc --explain {rev}");
    assert!(findings[0].detail.contains(&explain), "{findings:?}");
    let (code, out) = cli(
        &tmp.path().join("store"),
        &["gc", "--explain", &rev.to_string()],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("outputs/a.txt"), "{out}");

    // The CLI (a read-only open beside this writer) reports it too and exits 1.
    let (code, out) = cli(&tmp.path().join("store"), &["fsck"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "ObjectMissing  revision {rev}: block object {lost}"
        )),
        "{out}"
    );
    let (code, out) = cli(&tmp.path().join("store"), &["fsck", "--json"]);
    assert_eq!(code, Some(1), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["clean"], false, "{v}");
    assert_eq!(v["findings"][0]["kind"], "ObjectMissing", "{v}");

    // Replacing the path makes the lost revision unreferenced; once garbage collection has
    // taken it (its remaining objects are gone on purpose) nothing is missing any more.
    client
        .put(
            "wb",
            "outputs/a.txt",
            b"alpha again",
            &gc_support::replace(),
        )
        .unwrap();
    gc_support::gc_until_quiet(&client, 8);
    assert_fsck_clean(&client);
}

#[test]
fn objects_collected_by_gc_are_not_reported_missing() {
    let (tmp, client) = store();
    let rev = revision_of(&client, "wb", "outputs/b.txt");
    let keys = gc_support::own_keys(&client, &rev);
    let revision_dirs: Vec<_> = keys
        .iter()
        .map(|k| {
            let dir = Path::new(k).parent().and_then(Path::parent).unwrap();
            tmp.path().join("store/objects").join(dir)
        })
        .collect();
    assert!(
        revision_dirs.iter().all(|d| d.is_dir()),
        "{revision_dirs:?}"
    );
    client
        .remove("wb", "outputs/b.txt", &Default::default())
        .unwrap();
    let reports = gc_support::gc_until_quiet(&client, 8);
    assert!(
        reports.iter().any(|r| !r.collected.is_empty()),
        "{reports:?}"
    );
    let listed = gc_support::provider_keys(&client);
    assert!(keys.iter().all(|k| !listed.contains(k)), "not collected");
    // The collected revision's directories went with its objects (no empty directories pile up
    // under the local provider as revisions come and go).
    for dir in &revision_dirs {
        assert!(!dir.exists(), "{dir:?} left behind");
    }
    assert_fsck_clean(&client);
}

#[test]
fn fsck_verify_bytes_names_a_damaged_or_truncated_block_that_plain_fsck_cannot_see() {
    let (tmp, client) = store();
    let store_dir = tmp.path().join("store");
    let damaged = |name: &str| {
        let rev = revision_of(&client, "wb", name);
        let keys = gc_support::own_keys(&client, &rev);
        assert_eq!(keys.len(), 1, "{keys:?}");
        let key = keys.into_iter().next().unwrap();
        (rev, key.clone(), store_dir.join("objects").join(key))
    };
    // One byte flipped in a's block, b's block cut short: both still listed by the provider.
    let (rev_a, key_a, file_a) = damaged("outputs/a.txt");
    let mut bytes = std::fs::read(&file_a).unwrap();
    bytes[0] ^= 0x20;
    std::fs::write(&file_a, &bytes).unwrap();
    let (rev_b, key_b, file_b) = damaged("outputs/b.txt");
    let bytes = std::fs::read(&file_b).unwrap();
    std::fs::write(&file_b, &bytes[..bytes.len() - 1]).unwrap();

    // fsck reads no bytes: clean.
    assert_fsck_clean(&client);
    let outcome = client.fsck_verifying_bytes().unwrap();
    let mut found: Vec<(FindingKind, String, String)> = outcome
        .report
        .findings
        .iter()
        .map(|f| (f.kind, f.subject.clone(), f.detail.clone()))
        .collect();
    found.sort_by(|x, y| x.1.cmp(&y.1));
    assert_eq!(found.len(), 2, "{found:?}");
    for (kind, subject, detail) in &found {
        assert_eq!(*kind, FindingKind::ObjectDamaged);
        let (rev, key, why) = if *subject == format!("revision {rev_a}") {
            (&rev_a, &key_a, "sha256:")
        } else {
            (&rev_b, &key_b, "bytes")
        };
        assert_eq!(*subject, format!("revision {rev}"));
        assert!(detail.contains(key.as_str()), "{detail}");
        assert!(detail.contains(why), "{detail}");
    }
    // The CLI (read-only beside this writer): exit 1 with both findings; plain fsck exit 0.
    let (code, out) = cli(&store_dir, &["fsck", "--verify-bytes"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "ObjectDamaged  revision {rev_a}: block object {key_a}"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "ObjectDamaged  revision {rev_b}: block object {key_b}"
        )),
        "{out}"
    );
    let (code, out) = cli(&store_dir, &["fsck"]);
    assert_eq!(code, Some(0), "{out}");

    // Publishing the files again and collecting the damaged revisions makes it clean.
    for (name, body) in [("outputs/a.txt", &b"alpha"[..]), ("outputs/b.txt", b"beta")] {
        client
            .put("wb", name, body, &gc_support::replace())
            .unwrap();
    }
    gc_support::gc_until_quiet(&client, 8);
    assert!(client.fsck_verifying_bytes().unwrap().is_clean());
}
