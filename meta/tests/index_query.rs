//! The typed secondary index end to end on a real store: publication writes and removes index
//! rows in the same command; search / aggregate / catalog see exactly the visible artifacts at
//! one read version, choose selective plans, page without duplicates and fence continuations.

use std::path::Path;

#[path = "fixtures/engine.rs"]
mod engine;

use meta::codec::{
    path_current, workspace_current, workspace_incarnation_claim, CommandResult, PathEntry,
    WorkspaceCurrent, WorkspaceIncarnationClaim, WorkspaceState,
};
use meta::command::Mutation;
use meta::index::aggregate::{
    aggregate, AggregateRequest, AggregateSort, Measure, MeasureOp, MeasureValue,
};
use meta::index::catalog::{catalog, CatalogRequest};
use meta::index::projection::{encode_projection, index_mutations, IndexFields};
use meta::index::query::{
    search, search_at, Direction, Op, Predicate, QueryLimits, QueryScope, Resume, SearchPage,
    SearchRequest, SortKey,
};
use meta::index::{FieldId, IndexValue};
use meta::schema::Family;
use meta::{
    normalize, ArtifactRevisionId, Error, MetaShard, PathCondition, PublishReceipt, PublishRequest,
    RequestId, WorkspaceIncarnationId,
};

fn open(dir: &Path) -> MetaShard {
    engine::open(dir)
}

fn digest(tag: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(tag.as_bytes());
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn fid(name: &str) -> FieldId {
    FieldId::new(name).unwrap()
}

fn fields(pairs: &[(&str, IndexValue)]) -> IndexFields {
    pairs.iter().map(|(k, v)| (fid(k), v.clone())).collect()
}

fn s(v: &str) -> IndexValue {
    IndexValue::String(v.into())
}

fn f(v: f64) -> IndexValue {
    IndexValue::float(v).unwrap()
}

fn publish_with(
    shard: &MetaShard,
    wb: &str,
    path: &str,
    index_fields: IndexFields,
    condition: PathCondition,
) -> PublishReceipt {
    shard
        .publish(PublishRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: wb.into(),
            path: normalize(path).unwrap(),
            condition,
            revision_id: ArtifactRevisionId::random().unwrap(),
            logical_size: 0,
            body_digest_uri: digest(&format!("{wb}/{path}")),
            content_type: "application/json".into(),
            producer: "test".into(),
            manifest_id: None,
            manifest: vec![],
            dependency_depth: 0,
            index_fields,
        })
        .expect("publish")
}

fn put(shard: &MetaShard, wb: &str, path: &str, pairs: &[(&str, IndexValue)]) -> PublishReceipt {
    publish_with(shard, wb, path, fields(pairs), PathCondition::Create)
}

fn pred(field: &str, op: Op, operands: Vec<IndexValue>) -> Predicate {
    Predicate {
        field: fid(field),
        op,
        operands,
    }
}

fn request(scope: Option<&str>, predicates: Vec<Predicate>) -> SearchRequest {
    SearchRequest {
        scope: QueryScope {
            workbench_id: scope.map(str::to_owned),
            path: None,
        },
        predicates,
        fields: None,
        sort: vec![],
        facets: vec![],
        limit: 100,
        resume: None,
    }
}

fn run(shard: &MetaShard, req: &SearchRequest) -> SearchPage {
    search(shard, req, QueryLimits::default()).expect("search")
}

fn hits(page: &SearchPage) -> Vec<String> {
    page.matches
        .iter()
        .map(|m| format!("{}:{}", m.workbench_id, m.path))
        .collect()
}

/// Three run workbenches with the demo's summary fields plus unrelated files.
fn penguins(shard: &MetaShard) {
    for (wb, species, mass, count) in [
        ("run-adelie", "Adelie", 3700.66, 151u64),
        ("run-chinstrap", "Chinstrap", 3733.09, 68),
        ("run-gentoo", "Gentoo", 5076.02, 123),
    ] {
        shard.create_workspace(wb).unwrap();
        put(
            shard,
            wb,
            "outputs/summary.json",
            &[
                ("species", s(species)),
                ("mean_body_mass_g", f(mass)),
                ("count", IndexValue::UInt(count)),
            ],
        );
        put(shard, wb, "logs/run.log", &[]);
    }
}

#[test]
fn range_search_across_the_root_returns_exactly_the_gentoo_run() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    penguins(&shard);
    let page = run(
        &shard,
        &request(
            None,
            vec![pred(
                "mean_body_mass_g",
                Op::Gt,
                vec![IndexValue::Int(4000)],
            )],
        ),
    );
    assert_eq!(hits(&page), ["run-gentoo:outputs/summary.json"]);
    assert_eq!(page.match_count, 1);
    // One ordered scan over the field: only the matching row is examined.
    assert_eq!(page.stats.rows_examined, 1);
    assert!(
        page.stats.plan.contains("mean_body_mass_g"),
        "{}",
        page.stats.plan
    );
    let values: Vec<(&str, &IndexValue)> = page.matches[0]
        .values
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    assert!(values.contains(&("species", &s("Gentoo"))));
    assert!(values.contains(&("workbench_id", &s("run-gentoo"))));
    assert!(values.contains(&("path", &s("outputs/summary.json"))));
}

#[test]
fn in_prefix_exists_and_not_exists_select_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    penguins(&shard);
    let q = |p: Predicate| hits(&run(&shard, &request(None, vec![p])));
    assert_eq!(
        q(pred(
            "species",
            Op::In,
            vec![s("Adelie"), s("Gentoo"), s("Emperor")]
        )),
        [
            "run-adelie:outputs/summary.json",
            "run-gentoo:outputs/summary.json"
        ]
    );
    assert_eq!(
        q(pred("species", Op::Prefix, vec![s("Chin")])),
        ["run-chinstrap:outputs/summary.json"]
    );
    assert_eq!(q(pred("count", Op::Exists, vec![])).len(), 3);
    assert_eq!(
        q(pred("count", Op::NotExists, vec![])),
        [
            "run-adelie:logs/run.log",
            "run-chinstrap:logs/run.log",
            "run-gentoo:logs/run.log"
        ]
    );
    assert_eq!(q(pred("species", Op::Suffix, vec![s("too")])).len(), 1);
    assert_eq!(q(pred("species", Op::Ne, vec![s("Gentoo")])).len(), 2);
    // Built-in fields are always projected.
    assert_eq!(q(pred("path", Op::Eq, vec![s("logs/run.log")])).len(), 3);
    assert_eq!(
        q(pred("workbench_id", Op::Prefix, vec![s("run-g")])).len(),
        2
    );
    // One numeric domain: integer and float operands find the same values.
    assert_eq!(q(pred("count", Op::Eq, vec![f(123.0)])).len(), 1);
    assert_eq!(
        q(pred("count", Op::Gte, vec![IndexValue::UInt(123)])).len(),
        2
    );
}

#[test]
fn sort_desc_facets_and_projection_follow_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    penguins(&shard);
    let mut req = request(None, vec![pred("species", Op::Exists, vec![])]);
    req.sort = vec![SortKey {
        field: fid("mean_body_mass_g"),
        direction: Direction::Desc,
    }];
    req.fields = Some(vec![fid("species"), fid("missing")]);
    req.facets = vec![fid("species"), fid("content_type")];
    let page = run(&shard, &req);
    assert_eq!(
        hits(&page),
        [
            "run-gentoo:outputs/summary.json",
            "run-chinstrap:outputs/summary.json",
            "run-adelie:outputs/summary.json"
        ]
    );
    assert_eq!(page.matches[0].values, vec![(fid("species"), s("Gentoo"))]);
    assert_eq!(page.facets[0].distinct_count, 3);
    assert_eq!(page.facets[0].values[0], (s("Adelie"), 1));
    assert_eq!(
        page.facets[1].values,
        vec![(s("application/json"), 3)],
        "facets count every match"
    );
    assert!(!page.facets[1].truncated);
}

#[test]
fn replacing_an_artifact_removes_its_old_index_rows_in_the_same_command() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let first = put(
        &shard,
        "wb",
        "outputs/m.json",
        &[("acc", f(0.5)), ("tag", s("old"))],
    );
    let second = publish_with(
        &shard,
        "wb",
        "outputs/m.json",
        fields(&[("acc", f(0.9))]),
        PathCondition::Replace {
            expected_generation: first.generation,
        },
    );
    // The replacement is one commit: nothing else happened between the two versions.
    assert_eq!(second.commit_version, first.commit_version + 1);
    let old_value = request(None, vec![pred("acc", Op::Eq, vec![f(0.5)])]);
    let old_tag = request(None, vec![pred("tag", Op::Exists, vec![])]);
    let new_value = request(None, vec![pred("acc", Op::Gt, vec![f(0.8)])]);
    assert!(run(&shard, &old_value).matches.is_empty());
    assert!(run(&shard, &old_tag).matches.is_empty());
    assert_eq!(run(&shard, &new_value).matches.len(), 1);
    // The old generation's built-in row is gone too.
    let old_gen = request(
        None,
        vec![pred(
            "generation",
            Op::Eq,
            vec![IndexValue::UInt(first.generation)],
        )],
    );
    assert!(run(&shard, &old_gen).matches.is_empty());
    // At the version before the replacement (MVCC history, as a snapshot will pin it) the
    // frozen value is still found, and the new one is not.
    let before = first.commit_version;
    let at = |r: &SearchRequest| search_at(&shard, before, r, QueryLimits::default()).unwrap();
    assert_eq!(at(&old_value).matches.len(), 1);
    assert_eq!(at(&old_tag).matches.len(), 1);
    assert!(at(&new_value).matches.is_empty());
}

#[test]
fn twenty_five_matches_page_as_ten_ten_five_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    for i in 0..25 {
        put(
            &shard,
            "wb",
            &format!("outputs/r{i:02}.json"),
            &[("score", IndexValue::Int(i))],
        );
    }
    put(&shard, "wb", "outputs/other.json", &[]);
    let mut req = request(
        Some("wb"),
        vec![pred("score", Op::Gte, vec![IndexValue::Int(0)])],
    );
    req.limit = 10;
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let page = run(&shard, &req);
        assert_eq!(page.match_count, 25);
        sizes.push(page.matches.len());
        seen.extend(hits(&page));
        match page.next {
            Some(next) => req.resume = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, [10, 10, 5]);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 25);
    assert_eq!(seen, unique, "default order is by path");
}

#[test]
fn a_continuation_after_a_change_in_scope_is_read_fence_changed() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    shard.create_workspace("other").unwrap();
    for i in 0..5 {
        put(
            &shard,
            "wb",
            &format!("outputs/r{i}.json"),
            &[("score", IndexValue::Int(i))],
        );
    }
    let mut scoped = request(Some("wb"), vec![pred("score", Op::Exists, vec![])]);
    scoped.limit = 2;
    let mut rooted = scoped.clone();
    rooted.scope.workbench_id = None;
    let scoped_next = run(&shard, &scoped).next.unwrap();
    let rooted_next = run(&shard, &rooted).next.unwrap();
    // A change in another workbench: the workbench-scoped cursor continues, the root-wide one
    // is fenced.
    put(&shard, "other", "outputs/x.json", &[]);
    scoped.resume = Some(scoped_next);
    rooted.resume = Some(rooted_next);
    assert_eq!(run(&shard, &scoped).matches.len(), 2);
    assert!(matches!(
        search(&shard, &rooted, QueryLimits::default()),
        Err(Error::ReadFenceChanged { .. })
    ));
    // A change inside the workbench fences its cursor too.
    put(
        &shard,
        "wb",
        "outputs/r9.json",
        &[("score", IndexValue::Int(9))],
    );
    assert!(matches!(
        search(&shard, &scoped, QueryLimits::default()),
        Err(Error::ReadFenceChanged { .. })
    ));
    // A continuation from the future is refused.
    scoped.resume = Some(Resume {
        read_version: u64::MAX,
        offset: 2,
    });
    assert!(matches!(
        search(&shard, &scoped, QueryLimits::default()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_cursor_survives_reopen_while_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(None, vec![pred("n", Op::Exists, vec![])]);
    req.limit = 1;
    let next = {
        let shard = open(dir.path());
        shard.create_workspace("wb").unwrap();
        put(&shard, "wb", "a", &[("n", IndexValue::Int(1))]);
        put(&shard, "wb", "b", &[("n", IndexValue::Int(2))]);
        run(&shard, &req).next.unwrap()
    };
    // The reopened writer's owner-epoch advance is a commit without a change event.
    let shard = open(dir.path());
    shard.prepare_write().unwrap();
    req.resume = Some(next);
    assert_eq!(hits(&run(&shard, &req)), ["wb:b"]);
}

/// Writes, through one raw metadata command, a workbench marker in `state` plus one artifact
/// (PathCurrent and index rows) under a fresh incarnation claimed for `name`.
fn plant(shard: &MetaShard, name: &str, state: WorkspaceState, marker: bool) {
    let root = shard.root_id();
    let inc = WorkspaceIncarnationId::random().unwrap();
    let read_version = shard.read().version();
    let cv = read_version + 1;
    let path = normalize("outputs/summary.json").unwrap();
    let entry = PathEntry {
        generation: cv,
        artifact_revision_id: ArtifactRevisionId::random().unwrap(),
        logical_size: 0,
        body_digest_uri: digest("planted"),
        manifest_digest_uri: digest("m"),
        dependency_count: 0,
        dependency_depth: 0,
        content_type: "application/json".into(),
        producer: "planted".into(),
        manifest_id: None,
        created_version: cv,
        modified_version: cv,
        index_projection: encode_projection(&fields(&[("mean_body_mass_g", f(9999.0))])).unwrap(),
    };
    let ws = WorkspaceCurrent {
        incarnation: inc,
        workspace_revision: 1,
        state,
        owning_operation: None,
        created_version: cv,
        modified_version: cv,
        expires_at_unix_ms: None,
    };
    let mut mutations = vec![
        Mutation::put(
            Family::WorkspaceIncarnationClaim,
            workspace_incarnation_claim::key(&root, &inc),
            WorkspaceIncarnationClaim {
                workbench_id: name.into(),
            }
            .encode(),
        ),
        Mutation::put(
            Family::PathCurrent,
            path_current::key(&root, &inc, &path),
            entry.encode(),
        ),
    ];
    if marker {
        mutations.push(Mutation::put(
            Family::WorkspaceCurrent,
            workspace_current::key(&root, name),
            ws.encode(),
        ));
    }
    mutations.extend(index_mutations(&root, &inc, name, &path, None, Some(&entry)).unwrap());
    let mut cmd = shard.command_header(
        RequestId::random().unwrap(),
        [7; 32],
        read_version,
        CommandResult::WorkspaceCreated { workspace: ws },
    );
    cmd.mutations = mutations;
    shard.execute(cmd).expect("plant");
}

#[test]
fn staging_retired_and_superseded_incarnations_never_appear() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    penguins(&shard);
    plant(&shard, "staged", WorkspaceState::Staging, true);
    plant(&shard, "retired", WorkspaceState::Retired, true);
    // An incarnation claimed for a visible name whose marker holds another incarnation.
    plant(&shard, "run-gentoo", WorkspaceState::Visible, false);
    let heavy = request(
        None,
        vec![pred(
            "mean_body_mass_g",
            Op::Gt,
            vec![IndexValue::Int(4000)],
        )],
    );
    let page = run(&shard, &heavy);
    assert_eq!(hits(&page), ["run-gentoo:outputs/summary.json"]);
    // The invisible rows were examined and rejected by the visibility recheck.
    assert_eq!(page.stats.rows_examined, 4);
    let everything = run(&shard, &request(None, vec![]));
    assert_eq!(everything.match_count, 6);
    assert!(matches!(
        search(
            &shard,
            &request(Some("staged"), vec![]),
            QueryLimits::default()
        ),
        Err(Error::WorkspaceNotFound { .. })
    ));
    let cat = catalog(&shard, &CatalogRequest::default(), QueryLimits::default()).unwrap();
    assert_eq!(cat.artifact_count, 6);
    assert_eq!(cat.children.len(), 3);
}

#[test]
fn the_most_selective_predicate_drives_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("a").unwrap();
    shard.create_workspace("b").unwrap();
    for i in 0..150i64 {
        let wb = if i % 2 == 0 { "a" } else { "b" };
        put(
            &shard,
            wb,
            &format!("outputs/f{i:03}"),
            &[
                ("kind", s(if i % 49 == 0 { "rare" } else { "common" })),
                ("i", IndexValue::Int(i)),
            ],
        );
    }
    // eq on a rare value beats `exists` and a wide range; only its rows are examined.
    let page = run(
        &shard,
        &request(
            None,
            vec![
                pred("i", Op::Exists, vec![]),
                pred("i", Op::Gte, vec![IndexValue::Int(0)]),
                pred("kind", Op::Eq, vec![s("rare")]),
            ],
        ),
    );
    assert_eq!(page.match_count, 4);
    assert_eq!(page.stats.rows_examined, 4);
    assert_eq!(page.stats.plan, "index eq kind");
    // Range predicates on one field intersect into one ordered scan.
    let page = run(
        &shard,
        &request(
            None,
            vec![
                pred("i", Op::Gte, vec![IndexValue::Int(10)]),
                pred("i", Op::Lt, vec![f(14.5)]),
            ],
        ),
    );
    assert_eq!(page.match_count, 5);
    assert_eq!(page.stats.rows_examined, 5);
    // With an id scope an eq range also fixes the incarnation: other workbenches' rows with
    // the same value are never examined.
    let page = run(
        &shard,
        &request(Some("a"), vec![pred("kind", Op::Eq, vec![s("rare")])]),
    );
    assert_eq!(page.match_count, 2);
    assert_eq!(page.stats.rows_examined, 2);
    // A section/path scope narrows the workbench scan.
    let mut req = request(Some("a"), vec![pred("kind", Op::Suffix, vec![s("mon")])]);
    req.scope.path = Some(normalize("outputs/f00").unwrap());
    let page = run(&shard, &req);
    assert_eq!(
        page.match_count, 0,
        "outputs/f00 is neither a file nor a directory"
    );
    req.scope.path = Some(normalize("outputs").unwrap());
    assert_eq!(run(&shard, &req).match_count, 73);
}

#[test]
fn the_row_budget_is_resource_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    for i in 0..20 {
        put(&shard, "wb", &format!("f{i}"), &[("i", IndexValue::Int(i))]);
    }
    let limits = QueryLimits {
        max_rows_examined: 10,
        ..QueryLimits::default()
    };
    let err = search(&shard, &request(None, vec![]), limits).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ResourceExhausted {
                resource: "rows examined",
                maximum: 10
            }
        ),
        "{err:?}"
    );
    // A selective predicate stays within the same budget.
    let ok = search(
        &shard,
        &request(None, vec![pred("i", Op::Lt, vec![IndexValue::Int(3)])]),
        limits,
    )
    .unwrap();
    assert_eq!(ok.match_count, 3);
}

#[test]
fn aggregate_groups_measures_and_sorts() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    penguins(&shard);
    put(
        &shard,
        "run-gentoo",
        "outputs/extra.json",
        &[
            ("species", s("Gentoo")),
            ("mean_body_mass_g", IndexValue::Int(5000)),
        ],
    );
    let req = AggregateRequest {
        scope: QueryScope::default(),
        predicates: vec![pred("mean_body_mass_g", Op::Exists, vec![])],
        measures: vec![
            Measure {
                name: "avg_mass".into(),
                op: MeasureOp::Avg,
                field: Some(fid("mean_body_mass_g")),
            },
            Measure {
                name: "n".into(),
                op: MeasureOp::Count,
                field: None,
            },
            Measure {
                name: "total".into(),
                op: MeasureOp::Sum,
                field: Some(fid("count")),
            },
        ],
        group_by: vec![fid("species")],
        sort: vec![AggregateSort {
            key: "avg_mass".into(),
            direction: Direction::Desc,
        }],
        limit: 2,
    };
    let res = aggregate(&shard, &req, QueryLimits::default()).unwrap();
    assert_eq!(res.input_match_count, 4);
    assert_eq!(res.group_count, 3);
    assert!(res.truncated);
    assert_eq!(res.groups.len(), 2);
    assert_eq!(res.groups[0].key, vec![(fid("species"), Some(s("Gentoo")))]);
    assert_eq!(
        res.groups[0].values,
        vec![
            (
                "avg_mass".to_owned(),
                MeasureValue::Float((5076.02 + 5000.0) / 2.0)
            ),
            ("n".to_owned(), MeasureValue::Int(2)),
            ("total".to_owned(), MeasureValue::Int(123)),
        ]
    );
    assert_eq!(res.groups[1].key[0].1, Some(s("Chinstrap")));
    // Too many groups is ResourceExhausted (three distinct paths, two groups allowed).
    let mut wide = req.clone();
    wide.group_by = vec![fid("path")];
    wide.predicates.clear();
    wide.sort.clear();
    let err = aggregate(
        &shard,
        &wide,
        QueryLimits {
            max_groups: 2,
            ..QueryLimits::default()
        },
    )
    .unwrap_err();
    assert!(matches!(
        err,
        Error::ResourceExhausted {
            resource: "groups",
            ..
        }
    ));
}

#[test]
fn catalog_reports_fields_types_facets_and_children() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    penguins(&shard);
    put(
        &shard,
        "run-adelie",
        "outputs/deep/x.json",
        &[("count", f(1.5))],
    );
    let cat = catalog(
        &shard,
        &CatalogRequest {
            scope: QueryScope {
                workbench_id: Some("run-adelie".into()),
                path: None,
            },
            field_prefix: Some("c".into()),
            include_facets: true,
        },
        QueryLimits::default(),
    )
    .unwrap();
    assert_eq!(cat.artifact_count, 3);
    let names: Vec<&str> = cat.fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(names, ["content_type", "count"]);
    assert_eq!(cat.fields[1].types, ["uint", "float"]);
    assert!(cat.fields[1].aggregatable());
    assert_eq!(cat.facets.len(), 2);
    assert_eq!(cat.facets[1].distinct_count, 2);
    let children: Vec<String> = cat
        .children
        .iter()
        .map(|c| format!("{}:{}", c.path.as_ref().unwrap(), c.artifact_count))
        .collect();
    assert_eq!(children, ["logs:1", "outputs:2"]);
    // A section scope lists its subdirectories.
    let cat = catalog(
        &shard,
        &CatalogRequest {
            scope: QueryScope {
                workbench_id: Some("run-adelie".into()),
                path: Some(normalize("outputs").unwrap()),
            },
            field_prefix: None,
            include_facets: false,
        },
        QueryLimits::default(),
    )
    .unwrap();
    assert_eq!(cat.artifact_count, 2);
    assert_eq!(cat.children.len(), 1);
    assert_eq!(
        cat.children[0].path.as_ref().unwrap().as_str(),
        "outputs/deep"
    );
    assert!(cat.facets.is_empty());
}

#[test]
fn sixty_four_custom_fields_publish_and_replace_within_the_command_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let many = |offset: i64, n: i64| -> IndexFields {
        (0..n)
            .map(|i| (fid(&format!("f{i:02}")), IndexValue::Int(i + offset)))
            .collect()
    };
    let first = publish_with(&shard, "wb", "m.json", many(0, 64), PathCondition::Create);
    // 71 puts (7 built-in + 64 custom) and 65 deletes (every custom value and the generation
    // changed) in one command, counted against their own bound, not the ordinary mutations'.
    publish_with(
        &shard,
        "wb",
        "m.json",
        many(100, 64),
        PathCondition::Replace {
            expected_generation: first.generation,
        },
    );
    let q = |v: i64| {
        run(
            &shard,
            &request(None, vec![pred("f63", Op::Eq, vec![IndexValue::Int(v)])]),
        )
        .match_count
    };
    assert_eq!((q(63), q(163)), (0, 1));
    let err = shard
        .publish(PublishRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: "wb".into(),
            path: normalize("n.json").unwrap(),
            condition: PathCondition::Create,
            revision_id: ArtifactRevisionId::random().unwrap(),
            logical_size: 0,
            body_digest_uri: digest("n"),
            content_type: "application/json".into(),
            producer: "test".into(),
            manifest_id: None,
            manifest: vec![],
            dependency_depth: 0,
            index_fields: many(0, 65),
        })
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}
