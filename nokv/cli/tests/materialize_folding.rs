//! Materialize onto a file system that folds case (docs/design.md, "Materialize onto a folding
//! file system"): a real vfat image mounted through `fusefat` (FUSE; the kernel needs no vfat
//! driver). Two workbench paths that differ only in case are refused before anything is written,
//! naming both paths — embedded, through the SDK and through `nokv serve` — while a materialize
//! without such a pair works on the same mount.
//!
//! Needs `mkfs.vfat` (dosfstools), `fusefat`, `fusermount` and `/dev/fuse`. `.ci/run` installs
//! them and sets `NOKV_REQUIRE_FUSE=1`, which makes a missing piece fail the test; without it
//! the test says why on stderr and returns.

mod cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::{nokv, server};
use nokv::client::{Client, PutOptions};

/// A vfat image mounted through fusefat; unmounted on drop.
struct VfatMount {
    mountpoint: PathBuf,
}

impl Drop for VfatMount {
    fn drop(&mut self) {
        let _ = Command::new("fusermount")
            .arg("-u")
            .arg(&self.mountpoint)
            .status();
    }
}

fn tool(name: &str) -> Option<PathBuf> {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/bin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

/// Mounts a fresh 16 MiB vfat image under `dir`, or says why it cannot (`Err`).
fn mount_vfat(dir: &Path) -> Result<VfatMount, String> {
    let mkfs = tool("mkfs.vfat").ok_or("mkfs.vfat (dosfstools) is not installed")?;
    let fusefat = tool("fusefat").ok_or("fusefat is not installed")?;
    tool("fusermount").ok_or("fusermount (fuse) is not installed")?;
    if !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse does not exist".into());
    }
    let image = dir.join("fat.img");
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(16 << 20))
        .map_err(|e| format!("creating the image: {e}"))?;
    let made = Command::new(mkfs)
        .arg(&image)
        .output()
        .map_err(|e| format!("mkfs.vfat: {e}"))?;
    if !made.status.success() {
        return Err(format!("mkfs.vfat failed: {made:?}"));
    }
    let mountpoint = dir.join("mnt");
    std::fs::create_dir_all(&mountpoint).map_err(|e| e.to_string())?;
    let mounted = Command::new(fusefat)
        .arg("-o")
        .arg("rw+")
        .arg(&image)
        .arg(&mountpoint)
        .output()
        .map_err(|e| format!("fusefat: {e}"))?;
    if !mounted.status.success() {
        return Err(format!("fusefat could not mount the image: {mounted:?}"));
    }
    let mount = VfatMount { mountpoint };
    // The mount answers as vfat does: a case-swapped name finds the file.
    let probe = mount.mountpoint.join("Probe.TXT");
    std::fs::write(&probe, b"x").map_err(|e| format!("writing to the mount: {e}"))?;
    if !mount.mountpoint.join("probe.txt").exists() {
        return Err("the fusefat mount does not fold case".into());
    }
    std::fs::remove_file(&probe).map_err(|e| e.to_string())?;
    Ok(mount)
}

fn mount_or_skip(dir: &Path) -> Option<VfatMount> {
    match mount_vfat(dir) {
        Ok(m) => Some(m),
        Err(why) if std::env::var_os("NOKV_REQUIRE_FUSE").is_some_and(|v| v == "1") => {
            panic!("NOKV_REQUIRE_FUSE=1 but a vfat mount through fusefat is unavailable: {why}")
        }
        Err(why) => {
            eprintln!("skipped: a vfat mount through fusefat is unavailable: {why}");
            None
        }
    }
}

/// Everything under `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

fn populate(client: &Client) {
    client.create_workbench("wb").unwrap();
    let text = PutOptions::create("text/plain", "test");
    for (path, body) in [
        ("input/data.csv", &b"a,b\n"[..]),
        ("outputs/Report.txt", b"the upper-case report"),
        ("outputs/notes.txt", b"notes"),
        ("outputs/report.txt", b"the lower-case report"),
    ] {
        client.put("wb", path, body, &text).unwrap();
    }
    client.create_workbench("dirs").unwrap();
    client
        .put("dirs", "outputs/Plots", b"a file", &text)
        .unwrap();
    client
        .put(
            "dirs",
            "outputs/plots/mass.png",
            b"a file below a directory",
            &text,
        )
        .unwrap();
}

#[test]
fn a_case_folding_destination_refuses_two_paths_that_differ_only_in_case() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mount) = mount_or_skip(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    {
        let client = Client::open(&store).unwrap();
        populate(&client);
    }
    let dest = mount.mountpoint.join("sandbox");
    let s = store.to_str().unwrap();
    let d = dest.to_str().unwrap();

    // CLI, embedded: exit 1, both paths named, nothing written (no directory, no probe left).
    let out = nokv(&["--store", s], &["materialize", "wb", d]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`outputs/Report.txt` and `outputs/report.txt` would be the same file"),
        "{err}"
    );
    assert!(
        listing(&mount.mountpoint).is_empty(),
        "{:?}",
        listing(&mount.mountpoint)
    );

    // The SDK: the typed error.
    let client = Client::open(&store).unwrap();
    match nokv::materialize::materialize(&client, "wb", None, &dest) {
        Err(nokv::Error::LocalNameCollision {
            path,
            other_path,
            folding,
        }) => {
            assert_eq!(path, "outputs/Report.txt");
            assert_eq!(other_path, "outputs/report.txt");
            assert_eq!(folding, "case");
        }
        other => panic!("expected LocalNameCollision, got {other:?}"),
    }
    // A file and a directory of the same folded name are refused too.
    match nokv::materialize::materialize(&client, "dirs", None, &dest) {
        Err(nokv::Error::LocalNameCollision {
            path, other_path, ..
        }) => {
            assert_eq!(path, "outputs/Plots");
            assert_eq!(other_path, "outputs/plots/mass.png");
        }
        other => panic!("expected LocalNameCollision, got {other:?}"),
    }
    // The facade's mapping, for the tools and Python.
    let e = nokv::workbench::tool_error(
        &client,
        "wb",
        nokv::Error::LocalNameCollision {
            path: "outputs/Report.txt".into(),
            other_path: "outputs/report.txt".into(),
            folding: "case".into(),
        },
    );
    assert_eq!(e.code.as_str(), "InvalidArguments");
    assert_eq!(e.details["reason"], "local_name_collision");
    assert_eq!(e.details["folding"], "case");
    assert!(listing(&mount.mountpoint).is_empty());

    // Without a colliding pair the same mount takes a materialize (the probe leaves nothing).
    let files = nokv::materialize::materialize(&client, "wb", Some("input"), &dest).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(
        std::fs::read(dest.join("input").join("data.csv")).unwrap(),
        b"a,b\n"
    );
    assert_eq!(
        listing(&mount.mountpoint),
        vec!["sandbox", "sandbox/input", "sandbox/input/data.csv"]
    );
    drop(client);

    // Through `nokv serve`: the check runs where the files are written, with the same words.
    let srv = server(&store);
    let url = srv.url();
    let remote_dest = mount.mountpoint.join("remote");
    let out = nokv(
        &["--server", url.as_str()],
        &[
            "materialize",
            "wb",
            remote_dest.to_str().unwrap(),
            "--prefix",
            "outputs",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("`outputs/Report.txt` and `outputs/report.txt` would be the same file"));
    assert!(!remote_dest.exists());
    srv.shutdown().unwrap();
}
