#!/usr/bin/env python3
"""The reference research workflow of `nokv demo`, written against the Python SDK only.

    python examples/penguins.py [STORE_DIR]      # default: $NOKV_STORE, else ./.nokv

Steps (docs/design.md, "Reference Research Workflow"), each through `nokv` in-process:

1. workbench `penguins` receives `input/penguins.csv` (Palmer penguins, 344 rows) and
   `scripts/summarize.sh` (POSIX sh + awk);
2. one run workbench per species gets the input and the script copied in;
3. each run is materialized into a temporary sandbox (digests verified), the script runs there
   with `sh`, and the declared outputs are collected back: `outputs/summary.json` (with its
   top-level scalars as typed index fields), `logs/run.log`, `metadata/params.json`;
4. the summaries are read back (structured) and printed as a table;
5. `penguins` is committed and tagged `penguins-v1`; every run is committed with the input commit
   as its parent; `run-gentoo` is snapshotted and the snapshot restored into
   `run-gentoo-restored` (no body copied); `find` lists the committed runs;
6. a root-wide search (`mean_body_mass_g > 4000`) and an aggregate (average body mass by
   species).

It prints the same values as `nokv demo` on a fresh store (commit ids, generations, snapshot id,
read version, object counts, query results), and re-running it publishes and creates nothing.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import nokv

HERE = pathlib.Path(__file__).resolve().parent
PENGUINS_CSV = (HERE / "penguins" / "penguins.csv").read_bytes()
SUMMARIZE_SH = (HERE / "penguins" / "summarize.sh").read_bytes()
SPECIES = ("Adelie", "Chinstrap", "Gentoo")
INPUT_WORKBENCH = "penguins"
INPUT_TAG = "penguins-v1"
SNAPSHOT_SOURCE = "run-gentoo"
SNAPSHOT_NAME = "gentoo-baseline"
SNAPSHOT_TTL_DAYS = 7
RESTORED_WORKBENCH = "run-gentoo-restored"
CSV_TYPE = "text/csv; charset=utf-8"
SH_TYPE = "text/x-shellscript; charset=utf-8"


def short(commit_id: str) -> str:
    return commit_id[:12]


def json_fields(body: bytes) -> Dict[str, Any]:
    """The top-level scalars of a JSON object (what `index_json` indexes)."""
    value = json.loads(body)
    return {k: v for k, v in value.items() if not isinstance(v, (dict, list))}


def put_if_changed(
    wb: nokv.Workbench, path: str, body: bytes, content_type: str, index_json: bool = False
) -> bool:
    """Publishes unless the file already holds these bytes, type and index fields: creates when
    absent, replaces under a generation CAS when different. True when something was published."""
    digest = "sha256:" + __import__("hashlib").sha256(body).hexdigest()
    fields = json_fields(body) if index_json else {}
    try:
        st = wb.stat(path)
    except nokv.NotFound:
        wb.put(path, body, content_type=content_type, index_json=index_json)
        return True
    if st.digest_uri == digest and st.content_type == content_type and (st.fields or {}) == fields:
        return False
    wb.put(
        path,
        body,
        replace=True,
        expected_generation=st.generation,
        content_type=content_type,
        index_json=index_json,
    )
    return True


def commit_workbench(
    store: nokv.Store, workbench_id: str, manifest: Dict[str, Any], parents: List[str]
) -> Tuple[Dict[str, Any], str]:
    """Commits the live tree; an unchanged tree replays the same commit. A head of other content
    is replaced. Returns the result and the outcome label."""
    try:
        result = store.commit(workbench_id, manifest, parents=parents)
        replaced = False
    except (nokv.WorkbenchCommitConflict, nokv.WorkbenchCommitProtocolMismatch):
        result = store.commit(workbench_id, manifest, parents=parents, replace=True)
        replaced = True
    if result["idempotent_replay"]:
        label = "idempotent replay"
    elif replaced:
        label = "new, replaced the previous head"
    else:
        label = "new"
    return result, label


def run_species(store: nokv.Store, species: str, sandbox_parent: str) -> int:
    """Steps 2–3 for one species; returns how many files were published."""
    published = 0
    run_id = f"run-{species.lower()}"
    wb = store.create_workbench(run_id)
    source = store.workbench(INPUT_WORKBENCH)
    for path, ct in (("input/penguins.csv", CSV_TYPE), ("scripts/summarize.sh", SH_TYPE)):
        published += put_if_changed(wb, path, source.read_bytes(path), ct)
    with tempfile.TemporaryDirectory(prefix="sandbox-", dir=sandbox_parent) as root_dir:
        root = pathlib.Path(root_dir)
        files = wb.materialize(root, prefix="input") + wb.materialize(root, prefix="scripts")
        digests = {f["key"]: f["digest_uri"] for f in files}
        for d in ("outputs", "logs", "metadata"):
            (root / d).mkdir(parents=True, exist_ok=True)
        params = {
            "species": species,
            "input": "input/penguins.csv",
            "input_digest_uri": digests["input/penguins.csv"],
            "script": "scripts/summarize.sh",
            "script_digest_uri": digests["scripts/summarize.sh"],
            "command": ["sh", "scripts/summarize.sh", species, "input/penguins.csv", "outputs"],
        }
        (root / "metadata" / "params.json").write_bytes(json.dumps(params, indent=2).encode())
        proc = subprocess.run(
            ["sh", "scripts/summarize.sh", species, "input/penguins.csv", "outputs"],
            cwd=root,
            capture_output=True,
        )
        (root / "logs" / "run.log").write_bytes(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise SystemExit(f"summarize.sh failed for {species}: {proc.stderr.decode().strip()}")
        for path, ct, index_json in (
            ("outputs/summary.json", "application/json", True),
            ("logs/run.log", "text/plain; charset=utf-8", False),
            ("metadata/params.json", "application/json", False),
        ):
            published += put_if_changed(wb, path, (root / path).read_bytes(), ct, index_json)
    print(f"run {run_id}: materialized, verified, executed, collected 3 outputs")
    return published


def ensure_snapshot(store: nokv.Store) -> Tuple[int, int, bool]:
    """Reuses the alive snapshot named SNAPSHOT_NAME when it covers the current commit, else
    mints a new one under that name. Returns (id, read version, reused)."""
    head = store.commit_head(SNAPSHOT_SOURCE)
    head_version = head["created_version"] if head else 0
    named = [s for s in store.snapshots(SNAPSHOT_SOURCE) if s.get("name") == SNAPSHOT_NAME]
    if named:
        newest = max(named, key=lambda s: s["snapshot_id"])  # the latest mint holds the name
        if newest["state"] == "alive" and newest["read_version"] >= head_version:
            return newest["snapshot_id"], newest["read_version"], True
    snap = store.snapshot(
        SNAPSHOT_SOURCE,
        name=SNAPSHOT_NAME,
        reason="nokv demo: the Gentoo run before any re-run",
        ttl_days=SNAPSHOT_TTL_DAYS,
    )
    return snap["snapshot_id"], snap["read_version"], False


def lifecycle_step(store: nokv.Store) -> List[str]:
    """Step 5; returns the outcome labels of the four commits."""
    input_manifest = {
        "kind": "input",
        "dataset": "palmer-penguins",
        "files": ["input/penguins.csv", "scripts/summarize.sh"],
    }
    input_commit, input_label = commit_workbench(store, INPUT_WORKBENCH, input_manifest, [])
    input_id = input_commit["commit_identity"]
    tag = store.get_tag(INPUT_WORKBENCH, INPUT_TAG)
    if tag is None:
        store.set_tag(INPUT_WORKBENCH, INPUT_TAG, input_id, create_only=True)
        tag_line = f"tag {INPUT_TAG} created"
    elif tag["commit_id"] == input_id:
        tag_line = f"tag {INPUT_TAG} unchanged"
    else:
        tag_line = f"tag {INPUT_TAG} kept at {short(tag['commit_id'])} (not moved)"
    print(f"commit {INPUT_WORKBENCH:<20} {short(input_id)}  ({input_label}; {tag_line})")
    labels = [input_label]
    for species in SPECIES:
        run_id = f"run-{species.lower()}"
        manifest = {
            "kind": "run",
            "species": species,
            "input_commit": input_id,
            "command": ["sh", "scripts/summarize.sh", species, "input/penguins.csv", "outputs"],
            "outputs": ["outputs/summary.json", "logs/run.log", "metadata/params.json"],
        }
        result, label = commit_workbench(store, run_id, manifest, [input_id])
        print(f"commit {run_id:<20} {short(result['commit_identity'])}  parent {short(input_id)}  ({label})")
        labels.append(label)

    snapshot_id, read_version, reused = ensure_snapshot(store)
    print(
        f'snapshot {SNAPSHOT_SOURCE} "{SNAPSHOT_NAME}": id {snapshot_id} at read version '
        f"{read_version}, alive, {SNAPSHOT_TTL_DAYS} days lease ({'reused' if reused else 'minted'})"
    )

    objects_before = store.object_count()
    try:
        restored = store.restore(SNAPSHOT_SOURCE, RESTORED_WORKBENCH, at_snapshot=snapshot_id)
        if restored["idempotent_replay"]:
            restore_line = "already restored: exact replay of the completed restore"
        else:
            objects_after = store.object_count()
            paths = sum(
                1
                for s in store.workbench(RESTORED_WORKBENCH).walk()
                if s.key != "metadata/restore_manifest.json"
            )
            note = (
                " (+1 = restore_manifest.json; no body copied)"
                if objects_after == objects_before + 1
                else ""
            )
            restore_line = f"restored {paths} paths; objects in store {objects_before} -> {objects_after}{note}"
    except (nokv.AlreadyExists, nokv.RestoreProtocolMismatch):
        restore_line = f"skipped: {RESTORED_WORKBENCH} already exists from another restore; left as it is"
    print(f"restore {SNAPSHOT_SOURCE}@{SNAPSHOT_NAME} -> {RESTORED_WORKBENCH}: {restore_line}")

    source_bytes = store.workbench(SNAPSHOT_SOURCE).read_bytes("outputs/summary.json")
    restored_wb = store.workbench(RESTORED_WORKBENCH)
    restored_summary = restored_wb.read_json("outputs/summary.json")
    restored_bytes = restored_wb.read_bytes("outputs/summary.json")
    same = "identical to" if restored_bytes == source_bytes else "DIFFERENT from"
    print(
        f"read {RESTORED_WORKBENCH}/outputs/summary.json: {restored_summary['species']} "
        f"mean_body_mass_g {restored_summary['mean_body_mass_g']:.2f}, {len(restored_bytes)} "
        f"bytes, {same} {SNAPSHOT_SOURCE}'s"
    )

    find_args = {"committed": True, "manifest_pattern": '"kind":"run"', "include_manifest": True}
    found = store.find(**find_args)
    print(f"workbench_find {json.dumps(find_args, separators=(',', ':'))}")
    print(f"  {'workbench':<14} {'species':<10} {'commit':<12}  {'parent':<12}  {'generation':>10}  verified")
    for m in sorted(found["matches"], key=lambda m: m["workbench_id"]):
        commit = m["commit_identity"]
        info = store.commit_info(commit)
        parent = info["parents"][0] if info and info["parents"] else "-"
        print(
            f"  {m['workbench_id']:<14} {m['manifest']['manifest']['species']:<10} {short(commit):<12}  "
            f"{short(parent):<12}  {m['manifest_generation']:>10}  "
            f"{'true' if m['commit_identity_verified'] else 'false'}"
        )
    return labels


def query_step(store: nokv.Store) -> None:
    """Step 6."""
    search = {
        "predicates": [{"field": "mean_body_mass_g", "op": "gt", "value": 4000}],
        "fields": ["species", "mean_body_mass_g"],
    }
    print(f"workbench_search {json.dumps(search, separators=(',', ':'))}")
    for m in store.search(**search)["matches"]:
        print(f"  -> {m['path']}  {json.dumps(m['values'], separators=(',', ':'))}")
    aggregate = {
        "measures": [{"name": "avg_mean_body_mass_g", "op": "avg", "field": "mean_body_mass_g"}],
        "group_by": ["species"],
        "predicates": [{"field": "mean_body_mass_g", "op": "exists"}],
    }
    print(f"workbench_aggregate {json.dumps(aggregate, separators=(',', ':'))}")
    for g in store.aggregate(**aggregate)["groups"]:
        print(f"  -> {g['key']['species']:<10} {g['values']['avg_mean_body_mass_g']:>10.2f}")


def main(argv: List[str]) -> int:
    store_dir = argv[1] if len(argv) > 1 else os.environ.get("NOKV_STORE", ".nokv")
    with nokv.open(store_dir) as store:
        print(f"store: {store_dir}")
        published = 0
        inputs = store.create_workbench(INPUT_WORKBENCH)
        published += put_if_changed(inputs, "input/penguins.csv", PENGUINS_CSV, CSV_TYPE)
        published += put_if_changed(inputs, "scripts/summarize.sh", SUMMARIZE_SH, SH_TYPE)
        print(f"workbench {INPUT_WORKBENCH}: input/penguins.csv ({len(PENGUINS_CSV)} bytes), scripts/summarize.sh")
        with tempfile.TemporaryDirectory(prefix="nokv-penguins-") as sandboxes:
            for species in SPECIES:
                published += run_species(store, species, sandboxes)

        print()
        print(
            f"{'species':<10} {'count':>6} {'mean_body_mass_g':>17} {'mean_flipper_length_mm':>23}  "
            f"{'workbench':<14} {'generation':>10}"
        )
        for species in SPECIES:
            run_id = f"run-{species.lower()}"
            wb = store.workbench(run_id)
            s = wb.read_json("outputs/summary.json")
            gen = wb.stat("outputs/summary.json").generation
            print(
                f"{s['species']:<10} {s['count']:>6} {s['mean_body_mass_g']:>17.2f} "
                f"{s['mean_flipper_length_mm']:>23.2f}  {run_id:<14} {gen:>10}"
            )
        print()
        labels = lifecycle_step(store)
        print()
        query_step(store)
        print()
        print(f"{published} artifacts published in this run (0 = re-run with identical results)")
        created = sum(1 for label in labels if label != "idempotent replay")
        print(f"{created} commits created, {len(labels) - created} replayed (idempotent_replay) in this run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
