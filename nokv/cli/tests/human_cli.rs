//! The human commands beside the JSON tools: `nokv ls`, `cat`, `tree`, `log` print readable text
//! (and one JSON object with `--json`), the same embedded and through `nokv serve`;
//! `nokv completions` and `nokv man` are generated from the command tree; clap's usage errors of
//! every subcommand answer a program with the JSON usage-error envelope.

mod cli_support;

use std::path::Path;
use std::process::Output;

use cli_support::{nokv, server};
use serde_json::Value;

fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A workbench with files in two sections, a nested directory, a binary file, two commits (the
/// second naming the first as its parent) and two tags.
fn populate(target: &[&str], local: &Path) -> (String, String) {
    let put = |section: &str, path: &str, text: &str| {
        let input = format!(
            r#"{{"id":"wb","section":"{section}","path":"{path}","text":{}}}"#,
            serde_json::to_string(text).unwrap()
        );
        ok(&nokv(target, &["workbench", "put_file", &input]));
    };
    ok(&nokv(target, &["workbench", "create", r#"{"id":"wb"}"#]));
    put("input", "data.csv", "species,mass\nGentoo,5076\n");
    put("outputs", "summary.json", "{\"count\": 123}\n");
    put("outputs", "plots/mass.txt", "histogram\n");
    let bin = local.join("blob.bin");
    let bytes: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    std::fs::write(&bin, &bytes).unwrap();
    ok(&nokv(
        target,
        &["collect", "wb", bin.to_str().unwrap(), "outputs/blob.bin"],
    ));
    let commit = |extra: &[&str]| {
        let mut args = vec!["commit", "wb"];
        args.extend_from_slice(extra);
        json(&nokv(target, &args))["commit_identity"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = commit(&["--message", "first"]);
    put("logs", "run.log", "step 2\n");
    let second = commit(&["--message", "second", "--parent", &first, "--replace"]);
    for (tag, c) in [("v1", &first), ("best", &second)] {
        ok(&nokv(target, &["tag", "set", "wb", tag, c, "--create"]));
    }
    (first, second)
}

#[test]
fn ls_cat_tree_log_print_readable_text() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let target = ["--store", store.to_str().unwrap()];
    let (first, second) = populate(&target, tmp.path());

    assert_eq!(
        ok(&nokv(&target, &["ls", "wb"])),
        "input/\nlogs/\nmetadata/\noutputs/\nscripts/\n"
    );
    assert_eq!(
        ok(&nokv(&target, &["ls", "wb", "outputs"])),
        "blob.bin\nplots/\nsummary.json\n"
    );
    let long = ok(&nokv(&target, &["ls", "wb", "outputs", "-l"]));
    assert!(long.contains("file           512  blob.bin\n"), "{long}");
    assert!(long.contains("dir              -  plots/\n"), "{long}");
    let listed = json(&nokv(&target, &["ls", "wb", "outputs", "--json"]));
    assert_eq!(listed["status"], "success");
    assert_eq!(listed["entry_count"], 3);
    assert_eq!(listed["entries"][2]["size_bytes"], 15);

    // cat: the exact bytes, binary included.
    assert_eq!(
        ok(&nokv(&target, &["cat", "wb", "input/data.csv"])),
        "species,mass\nGentoo,5076\n"
    );
    let blob = nokv(&target, &["cat", "wb", "outputs/blob.bin"]);
    assert_eq!(blob.status.code(), Some(0));
    let expected: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    assert_eq!(blob.stdout, expected);
    let dir = nokv(&target, &["cat", "wb", "outputs/plots"]);
    assert_eq!(dir.status.code(), Some(1));
    assert!(dir.stdout.is_empty());
    assert!(String::from_utf8_lossy(&dir.stderr).contains("is a directory (1 file below it)"));
    let missing = nokv(&target, &["cat", "wb", "outputs/none.txt"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).starts_with("nokv: "));

    let tree = ok(&nokv(&target, &["tree", "wb"]));
    let expected_tree = "\
wb
├── input/
│   └── data.csv  (25 bytes)
├── logs/
│   └── run.log  (7 bytes)
├── metadata/
│   └── run_manifest.json  (";
    assert!(tree.starts_with(expected_tree), "{tree}");
    assert!(
        tree.contains(
            "└── outputs/\n    ├── blob.bin  (512 bytes)\n    ├── plots/\n    │   └── mass.txt  (10 bytes)\n    └── summary.json  (15 bytes)\n"
        ),
        "{tree}"
    );
    assert!(
        tree.ends_with(" bytes\n") && tree.contains("\n6 files, "),
        "{tree}"
    );
    let sub = ok(&nokv(&target, &["tree", "wb", "outputs/plots"]));
    assert_eq!(
        sub,
        "wb/outputs/plots\n└── mass.txt  (10 bytes)\n\n1 file, 10 bytes\n"
    );
    let tree_json = json(&nokv(&target, &["tree", "wb", "--json"]));
    assert_eq!(tree_json["file_count"], 6);

    let log = ok(&nokv(&target, &["log", "wb"]));
    let expected_head = format!("commit {second} (HEAD, tag: best)\nParent:    {first}\n");
    assert!(log.starts_with(&expected_head), "{log}");
    assert!(
        log.contains(&format!("\ncommit {first} (tag: v1)\nParents:   (none)\n")),
        "{log}"
    );
    let log_json = json(&nokv(&target, &["log", "wb", "--json"]));
    assert_eq!(log_json["head"], second.as_str());
    assert_eq!(log_json["commit_count"], 2);
    assert_eq!(log_json["commits"][0]["parents"][0], first.as_str());
    assert_eq!(log_json["commits"][1]["tags"][0], "v1");
    let limited = json(&nokv(&target, &["log", "wb", "-n", "1", "--json"]));
    assert_eq!(limited["commit_count"], 1);

    // Errors: text on stderr, or the envelope with --json; exit 1.
    let none = nokv(&target, &["ls", "nope"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(none.stdout.is_empty());
    assert!(String::from_utf8_lossy(&none.stderr).contains("workbench `nope` does not exist"));
    let none = nokv(&target, &["log", "nope", "--json"]);
    assert_eq!(none.status.code(), Some(1));
    assert_eq!(json(&none)["code"], "NotFound");
}

#[test]
fn ls_cat_tree_log_print_the_same_through_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let embedded = ["--store", a.to_str().unwrap()];
    let srv = server(&b);
    let url = srv.url();
    let remote = ["--server", url.as_str()];
    let (a1, a2) = populate(&embedded, tmp.path());
    let (b1, b2) = populate(&remote, tmp.path());
    let cases: Vec<Vec<&str>> = vec![
        vec!["ls", "wb"],
        vec!["ls", "wb", "outputs", "-l"],
        vec!["ls", "wb", "outputs/plots", "--json"],
        vec!["ls", "nope"],
        vec!["ls", "nope", "--json"],
        vec!["cat", "wb", "outputs/blob.bin"],
        vec!["cat", "wb", "input/data.csv"],
        vec!["cat", "wb", "outputs"],
        vec!["cat", "wb", "outputs/missing"],
        vec!["tree", "wb", "outputs"],
        vec!["tree", "nope"],
        vec!["log", "wb"],
        vec!["log", "wb", "--json"],
        vec!["log", "nope"],
    ];
    // Commit ids differ between the stores (their commits hold different revisions); `ls
    // --json` carries nothing store-specific; the manifest size differs with the commit time.
    let same = |text: &[u8]| {
        String::from_utf8_lossy(text)
            .replace(&a1, "<first>")
            .replace(&b1, "<first>")
            .replace(&a2, "<second>")
            .replace(&b2, "<second>")
    };
    for args in cases {
        let ea = nokv(&embedded, &args);
        let eb = nokv(&remote, &args);
        assert_eq!(ea.status.code(), eb.status.code(), "{args:?}");
        if args[0] == "log" && args.contains(&"--json") {
            let (mut ja, mut jb) = (json(&ea), json(&eb));
            for j in [&mut ja, &mut jb] {
                for c in j["commits"].as_array_mut().unwrap() {
                    for k in ["created_version", "content_digest_uri", "tree_digest_uri"] {
                        c[k] = Value::Null;
                    }
                }
            }
            assert_eq!(
                same(ja.to_string().as_bytes()),
                same(jb.to_string().as_bytes())
            );
            continue;
        }
        if args[0] == "log" {
            let strip = |o: &Output| {
                same(&o.stdout)
                    .lines()
                    .filter(|l| !l.starts_with("State:") && !l.starts_with("Content:"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            assert_eq!(strip(&ea), strip(&eb), "{args:?}");
        } else {
            assert_eq!(ea.stdout, eb.stdout, "{args:?}");
        }
        assert_eq!(same(&ea.stderr), same(&eb.stderr), "{args:?}");
    }
    srv.shutdown().unwrap();
}

#[test]
fn completions_and_man_pages_come_from_the_command_tree() {
    let bash = ok(&nokv(&[], &["completions", "bash"]));
    assert!(bash.contains("_nokv()"), "{bash}");
    for sub in ["ls", "cat", "tree", "log", "workbench", "collect"] {
        assert!(
            bash.contains(&format!("nokv,{sub})")),
            "bash completes {sub}"
        );
    }
    let zsh = ok(&nokv(&[], &["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef nokv"), "{zsh}");
    let fish = ok(&nokv(&[], &["completions", "fish"]));
    assert!(fish.contains("complete -c nokv"));
    let bad = nokv(&[], &["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));

    let man = ok(&nokv(&[], &["man"]));
    assert!(man.contains(".TH nokv 1"), "{man}");
    for sub in ["ls", "cat", "tree", "log", "completions"] {
        assert!(man.contains(&format!("nokv\\-{sub}(1)")), "man lists {sub}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("man1");
    let listed = ok(&nokv(&[], &["man", "--dir", dir.to_str().unwrap()]));
    for page in ["nokv.1", "nokv-ls.1", "nokv-snapshot-create.1"] {
        let p = dir.join(page);
        assert!(listed.contains(p.to_str().unwrap()), "{listed}");
        assert!(std::fs::read_to_string(&p).unwrap().contains(".TH"));
    }
}

#[test]
fn usage_errors_of_every_subcommand_answer_a_program_with_the_envelope() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let target = ["--store", store.to_str().unwrap()];
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["ls"], "MissingRequiredArgument", "ls"),
        (vec!["cat", "wb"], "MissingRequiredArgument", "cat"),
        (vec!["tree", "wb", "--bogus"], "UnknownArgument", "tree"),
        (vec!["log", "wb", "-n", "x"], "ValueValidation", "log"),
        (
            vec!["snapshot", "create"],
            "MissingRequiredArgument",
            "snapshot create",
        ),
        (vec!["rm", "wb"], "MissingRequiredArgument", "rm"),
        (vec!["gc", "--no-such"], "UnknownArgument", "gc"),
        (vec!["frobnicate"], "InvalidSubcommand", ""),
    ];
    for (args, reason, command) in cases {
        let out = nokv(&target, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = json(&out);
        assert_eq!(e["status"], "error", "{args:?}");
        assert_eq!(e["code"], "InvalidArguments", "{args:?}");
        assert_eq!(e["retryable"], false);
        assert_eq!(e["details"]["reason"], reason, "{args:?}: {e}");
        assert_eq!(e["details"]["command"], command, "{args:?}");
        let usage = e["details"]["usage"].as_str().unwrap();
        assert!(usage.starts_with("nokv"), "{usage}");
        // clap's own text stays on stderr for the human.
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    }
    // --help is not an error.
    let help = nokv(&target, &["ls", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: nokv ls"));
}

#[test]
fn names_with_control_characters_print_escaped_and_json_keeps_them() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let target = ["--store", store.to_str().unwrap()];
    let hostile = "\u{1b}]0;PWNED\u{7}\u{1b}[2J.txt";
    let shown = "\\u{1b}]0;PWNED\\u{7}\\u{1b}[2J.txt";
    ok(&nokv(&target, &["workbench", "create", r#"{"id":"wb"}"#]));
    ok(&nokv(
        &target,
        &["workbench", "create", r#"{"id":"empty"}"#],
    ));
    let input = serde_json::json!({"id": "wb", "section": "input", "path": hostile, "text": "x"});
    ok(&nokv(
        &target,
        &["workbench", "put_file", &input.to_string()],
    ));
    let commit = json(&nokv(&target, &["commit", "wb"]))["commit_identity"]
        .as_str()
        .unwrap()
        .to_string();
    let tag = "t\u{1b}[31mred\u{202e}";
    ok(&nokv(
        &target,
        &["tag", "set", "wb", tag, &commit, "--create"],
    ));

    let ls = ok(&nokv(&target, &["ls", "wb", "input"]));
    assert_eq!(ls, format!("{shown}\n"));
    let tree = ok(&nokv(&target, &["tree", "wb", "input"]));
    assert_eq!(
        tree,
        format!("wb/input\n└── {shown}  (1 byte)\n\n1 file, 1 byte\n")
    );
    let log = ok(&nokv(&target, &["log", "wb"]));
    assert!(
        log.contains("tag: t\\u{1b}[31mred\\u{202e})"),
        "the tag is escaped: {log}"
    );
    let diff = ok(&nokv(
        &target,
        &["diff", "empty", "wb", "--format", "table"],
    ));
    assert!(diff.contains(&format!("input/{shown}")), "{diff}");
    let operations = ok(&nokv(&target, &["operation", "list"]));
    assert!(
        operations.contains(&format!("wb/input/{shown}")),
        "{operations}"
    );
    let explained = ok(&nokv(
        &target,
        &["gc", "--explain", "wb", &format!("input/{hostile}")],
    ));
    // The plain error line of a human command escapes the name it quotes.
    let missing = nokv(&target, &["cat", "wb", &format!("input/x{hostile}")]);
    assert_eq!(missing.status.code(), Some(1));
    let missing = String::from_utf8(missing.stderr).unwrap();
    assert!(
        missing.starts_with("nokv: ") && missing.contains(shown),
        "{missing}"
    );
    for printed in [&ls, &tree, &log, &diff, &operations, &explained, &missing] {
        assert!(
            !printed.contains('\u{1b}') && !printed.contains('\u{7}'),
            "no control character reaches the terminal: {printed:?}"
        );
    }
    // JSON keeps the exact name (escaped by JSON itself).
    let listed = json(&nokv(&target, &["ls", "wb", "input", "--json"]));
    assert_eq!(listed["entries"][0]["name"], hostile);
}

#[test]
fn refusals_name_the_right_workbench_and_are_typed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let target = ["--store", store.to_str().unwrap()];
    ok(&nokv(&target, &["workbench", "create", r#"{"id":"w"}"#]));
    // diff: the missing side is the one named, whichever side it is.
    for args in [["diff", "w", "nope"], ["diff", "nope", "w"]] {
        let out = nokv(&target, &args);
        assert_eq!(out.status.code(), Some(1));
        let v = json(&out);
        assert_eq!(v["code"], "NotFound", "{v}");
        assert_eq!(v["details"]["path"], "/agents/local/wb/nope", "{v}");
    }
    // log: a string that is no workbench id is InvalidArguments, as for mv and expire.
    let out = nokv(&target, &["log", "../x", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["code"], "InvalidArguments");
    // log -n 0 is a usage error (exit 2, the usage envelope).
    let out = nokv(&target, &["log", "w", "-n", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["details"]["reason"], "ValueValidation");
    // expire: a duration longer than any deadline is a usage error; a deadline past the last
    // RFC 3339 year is refused; nothing is recorded either way.
    let out = nokv(&target, &["expire", "w", "--after", "99999999999d"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["code"], "InvalidArguments");
    let out = nokv(&target, &["expire", "w", "--after", "417000w"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["code"], "InvalidArguments");
    let out = nokv(&target, &["expire", "w", "--after", "4170w"]);
    let v = json(&out);
    assert_eq!(
        v["previous_expires_at"],
        Value::Null,
        "nothing was recorded before: {v}"
    );
    // RFC 3339 with a four-digit year (the milliseconds, when not zero, drop trailing zeros).
    let at = v["expires_at"].as_str().unwrap();
    let year_ok = at.len() >= 20
        && at.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && at.as_bytes()[4] == b'-'
        && at.ends_with('Z');
    assert!(year_ok, "an RFC 3339 time with a four-digit year: {at}");
}
