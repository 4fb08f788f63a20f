//! A workbench path with a component longer than the local file system allows for one file name
//! (the store accepts it) cannot be materialized: the call fails with a typed error naming the
//! store path — never the local one — before anything is written; a name that fits, even when
//! its partial file's name would not, materializes normally.

use std::path::Path;
use std::process::Command;

use nokv::{Client, Error, PutOptions};

/// A 300-byte file name: over the 255-byte limit of the usual local file systems.
fn too_long() -> String {
    format!("{}.txt", "n".repeat(296))
}

fn store_with_a_long_name(store: &Path) -> Client {
    let client = Client::open(store).unwrap();
    client.create_workbench("wb").unwrap();
    for (path, body) in [
        ("input/a-first.txt".to_string(), "first"),
        (format!("input/{}", too_long()), "long"),
        ("input/z-last.txt".to_string(), "last"),
    ] {
        client
            .put(
                "wb",
                &path,
                body.as_bytes(),
                &PutOptions::create("text/plain", "test"),
            )
            .unwrap();
    }
    client
}

#[test]
fn a_name_over_the_local_limit_is_a_typed_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let client = store_with_a_long_name(&dir.path().join("s"));
    let long_path = format!("input/{}", too_long());

    // A destination that does not exist yet is not even created.
    let dest = dir.path().join("sandbox");
    let err = nokv::materialize::materialize(&client, "wb", None, &dest).unwrap_err();
    match &err {
        Error::LocalNameTooLong {
            path,
            name_bytes,
            limit_bytes,
        } => {
            assert_eq!(path, &long_path);
            assert_eq!(*name_bytes, 300);
            assert!(*limit_bytes < 300, "{limit_bytes}");
        }
        other => panic!("expected LocalNameTooLong, got {other:?}"),
    }
    assert!(!dest.exists(), "nothing may be created");

    // An existing destination stays as it was.
    std::fs::create_dir_all(&dest).unwrap();
    std::fs::write(dest.join("keep.txt"), b"mine").unwrap();
    assert!(nokv::materialize::materialize(&client, "wb", None, &dest).is_err());
    let left: Vec<_> = std::fs::read_dir(&dest)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("keep.txt")]);

    // The facade's typed error: InvalidArguments, details.reason, the store path, no local path.
    let tool = nokv::workbench::tool_error(&client, "wb", err);
    let v = tool.envelope();
    assert_eq!(v["code"], "InvalidArguments", "{v}");
    assert_eq!(v["retryable"], false, "{v}");
    assert_eq!(v["details"]["reason"], "local_name_too_long", "{v}");
    assert_eq!(
        v["details"]["path"],
        format!("{}/{long_path}", client.workbench_path("wb")),
        "{v}"
    );
    assert_eq!(v["details"]["name_bytes"], 300, "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(!message.contains(&dir.path().display().to_string()), "{v}");
    assert!(message.contains("nothing was written"), "{v}");

    // Narrowing the prefix past it works.
    let files =
        nokv::materialize::materialize(&client, "wb", Some("input/z-last.txt"), &dest).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(
        std::fs::read(dest.join("input/z-last.txt")).unwrap(),
        b"last"
    );
}

#[test]
fn the_cli_refuses_the_materialize_before_writing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    drop(store_with_a_long_name(&store));
    let dest = dir.path().join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&store)
        .arg("--quiet")
        .args(["materialize", "wb"])
        .arg(&dest)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot be written to the local destination"),
        "{stderr}"
    );
    assert!(!stderr.contains("File name too long"), "{stderr}");
    assert!(!dest.exists());
}

#[test]
fn a_name_that_fits_materializes_even_when_its_partial_name_would_not() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::open(dir.path().join("s")).unwrap();
    client.create_workbench("wb").unwrap();
    // 250 bytes: fits in 255, but `.<name>.nokv-partial` would be 264.
    let name = format!("{}.csv", "f".repeat(246));
    let path = format!("input/{name}");
    client
        .put(
            "wb",
            &path,
            b"x,y\n1,2\n",
            &PutOptions::create("text/csv", "test"),
        )
        .unwrap();
    let dest = dir.path().join("out");
    let files = nokv::materialize::materialize(&client, "wb", None, &dest).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, path);
    assert_eq!(
        std::fs::read(dest.join("input").join(&name)).unwrap(),
        b"x,y\n1,2\n"
    );
    let names: Vec<_> = std::fs::read_dir(dest.join("input"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from(&name)],
        "no partial file left"
    );
}

#[test]
fn a_local_path_over_path_max_is_a_typed_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::open(dir.path().join("s")).unwrap();
    client.create_workbench("wb").unwrap();
    // Every name fits (250 bytes) but the whole path is ~3,800 bytes: below a short destination
    // it fits, below a 400-byte destination it would be over PATH_MAX.
    let deep = (0..15)
        .map(|i| format!("{i:02}{}", "d".repeat(248)))
        .collect::<Vec<_>>()
        .join("/");
    let long_path = format!("input/{deep}/f.txt");
    for (path, body) in [("input/a-first.txt", "first"), (long_path.as_str(), "deep")] {
        client
            .put(
                "wb",
                path,
                body.as_bytes(),
                &PutOptions::create("text/plain", "test"),
            )
            .unwrap();
    }
    // 400 bytes of destination in two names of 199 bytes.
    let dest = dir
        .path()
        .join("p".repeat(199))
        .join("q".repeat(199))
        .join("dest");
    let err = nokv::materialize::materialize(&client, "wb", None, &dest).unwrap_err();
    match &err {
        Error::LocalPathTooLong {
            path,
            path_bytes,
            limit_bytes,
        } => {
            assert_eq!(path, &long_path);
            assert!(*path_bytes >= *limit_bytes, "{path_bytes} {limit_bytes}");
            assert_eq!(*limit_bytes, 4096);
        }
        other => panic!("expected LocalPathTooLong, got {other:?}"),
    }
    assert!(!dest.exists(), "nothing may be created");
    let v = nokv::workbench::tool_error(&client, "wb", err).envelope();
    assert_eq!(v["code"], "InvalidArguments", "{v}");
    assert_eq!(v["details"]["reason"], "local_path_too_long", "{v}");
    assert!(
        !v.to_string().contains(&dir.path().display().to_string()),
        "no local path: {v}"
    );
    // A short destination holds it.
    let short = dir.path().join("d");
    let written = nokv::materialize::materialize(&client, "wb", None, &short).unwrap();
    assert_eq!(written.len(), 2);
    assert_eq!(std::fs::read(short.join(&long_path)).unwrap(), b"deep");
}
