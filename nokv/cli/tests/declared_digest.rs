//! `PutOptions::expected_digest_uri`: a body whose SHA-256 differs from the declared digest is
//! refused before the publication is sealed — nothing is published and its staged blocks are
//! deleted; a matching body publishes as usual. (`nokv serve` uploads with
//! `x-nokv-content-sha256` and `collect` go through this check.)

use nokv::{Client, Error, PutOptions, WriteCondition};

fn declared(digest: &str) -> PutOptions {
    PutOptions {
        expected_digest_uri: Some(digest.to_string()),
        ..PutOptions::create("application/octet-stream", "test")
    }
}

#[test]
fn a_body_that_differs_from_its_declared_digest_is_never_published() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::open(dir.path().join("s")).unwrap();
    client.create_workbench("wb").unwrap();
    let sha = |b: &[u8]| objstore::sha256_uri(b);

    // A matching body, streamed and from memory, publishes.
    let r = client
        .put_reader(
            "wb",
            "outputs/a.txt",
            &mut &b"hello"[..],
            &declared(&sha(b"hello")),
        )
        .unwrap();
    assert_eq!(r.digest_uri, sha(b"hello"));
    client
        .put("wb", "outputs/b.txt", b"hello", &declared(&sha(b"hello")))
        .unwrap();

    // A differing body (streamed, in memory, empty, several blocks) is refused with both digests.
    let big = vec![5u8; (5 << 20) + 3];
    for (path, body) in [
        ("outputs/c.txt", &b"world"[..]),
        ("outputs/empty.txt", &b""[..]),
        ("outputs/big.bin", big.as_slice()),
    ] {
        let err = client
            .put_reader("wb", path, &mut &body[..], &declared(&sha(b"hello")))
            .unwrap_err();
        match err {
            Error::DigestMismatch {
                expected, actual, ..
            } => {
                assert_eq!(expected, sha(b"hello"));
                assert_eq!(actual, sha(body));
            }
            other => panic!("{path}: expected DigestMismatch, got {other:?}"),
        }
        assert!(matches!(
            client.read_all("wb", path),
            Err(Error::NotFound { .. })
        ));
    }
    let err = client
        .put("wb", "outputs/d.txt", b"world", &declared(&sha(b"hello")))
        .unwrap_err();
    assert!(matches!(err, Error::DigestMismatch { .. }), "{err:?}");

    // A replacement with a differing body keeps the old bytes.
    let replace = PutOptions {
        condition: WriteCondition::Replace {
            expected_generation: None,
        },
        ..declared(&sha(b"good"))
    };
    assert!(client
        .put("wb", "outputs/a.txt", b"CORRUPT", &replace)
        .is_err());
    assert_eq!(client.read_all("wb", "outputs/a.txt").unwrap(), b"hello");

    // Nothing half-done is left: fsck is clean and no object is unowned.
    let outcome = client.fsck().unwrap();
    assert!(outcome.report.findings.is_empty(), "{:?}", outcome.report);
    assert!(
        outcome.unowned_objects.is_empty(),
        "{:?}",
        outcome.unowned_objects
    );
}
