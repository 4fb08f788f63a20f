//! Acceptance of the typed metadata index through the Workbench facade: `workbench_search`,
//! `workbench_aggregate` and `workbench_catalog` per docs/workbench.md (issue 6).

use nokv::workbench::Workbench;
use nokv::{Client, FieldId, IndexValue, PutOptions, WriteCondition};
use nokv_tests::{err, fresh_store, ok};
use serde_json::{json, Value};

fn put(client: &Client, wb: &str, path: &str, fields: &[(&str, IndexValue)]) -> u64 {
    client.create_workbench(wb).unwrap();
    let mut options = PutOptions::create("application/json", "test");
    options.index_fields = fields
        .iter()
        .map(|(k, v)| (FieldId::new(*k).unwrap(), v.clone()))
        .collect();
    client
        .put(
            wb,
            path,
            format!("{{\"p\":\"{path}\"}}").as_bytes(),
            &options,
        )
        .unwrap()
        .generation
}

fn s(v: &str) -> IndexValue {
    IndexValue::String(v.into())
}

fn f(v: f64) -> IndexValue {
    IndexValue::float(v).unwrap()
}

/// `workbench_id/relative path` of every match.
fn ids(result: &Value) -> Vec<String> {
    result["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let section = m["section"]
                .as_str()
                .map(|s| format!("{s}/"))
                .unwrap_or_default();
            format!(
                "{}/{}{}",
                m["workbench_id"].as_str().unwrap(),
                section,
                m["relative_path"].as_str().unwrap()
            )
        })
        .collect()
}

fn search(wb: &Workbench, input: Value) -> Value {
    ok(wb.call("workbench_search", &input))
}

/// Four runs over two species plus an unrelated log in each.
fn runs(client: &Client) {
    for (wb, species, mass, island) in [
        ("run-1", "Adelie", 3700.66, "Torgersen"),
        ("run-2", "Gentoo", 5076.02, "Biscoe"),
        ("run-3", "Gentoo", 4950.5, "Biscoe"),
        ("run-4", "Chinstrap", 3733.09, "Dream"),
    ] {
        put(
            client,
            wb,
            "outputs/summary.json",
            &[
                ("species", s(species)),
                ("mean_body_mass_g", f(mass)),
                ("island", s(island)),
            ],
        );
        put(client, wb, "logs/run.log", &[]);
    }
}

#[test]
fn search_gt_4000_across_the_root_returns_exactly_the_gentoo_run_and_its_restored_copy() {
    let (_tmp, client) = fresh_store();
    let mut out = Vec::new();
    let report = nokv_commands::demo::run_demo(&client, &mut out).unwrap();
    // The demo restores run-gentoo into run-gentoo-restored before its query step; the restore
    // carries the summary's index fields along.
    assert_eq!(report.heavy_runs, ["run-gentoo", "run-gentoo-restored"]);
    assert_eq!(
        report.mass_by_species,
        [
            ("Adelie".to_string(), 3700.66),
            ("Chinstrap".to_string(), 3733.09),
            ("Gentoo".to_string(), 5076.02)
        ]
    );
    let printed = String::from_utf8(out).unwrap();
    assert!(
        printed.contains("/agents/local/wb/run-gentoo/outputs/summary.json"),
        "{printed}"
    );
    let wb = Workbench::new(client);
    let r = search(
        &wb,
        json!({"predicates":[{"field":"mean_body_mass_g","op":"gt","value":4000}]}),
    );
    assert_eq!(r["path"], "/agents/local/wb");
    assert_eq!(r["match_count"], 2);
    assert_eq!(r["truncated"], false);
    assert_eq!(r["next_cursor"], Value::Null);
    let m = &r["matches"][0];
    assert_eq!(m["workbench_id"], "run-gentoo");
    assert_eq!(
        m["path"],
        "/agents/local/wb/run-gentoo/outputs/summary.json"
    );
    assert_eq!(m["section"], "outputs");
    assert_eq!(m["relative_path"], "summary.json");
    assert_eq!(m["values"]["species"], "Gentoo");
    assert_eq!(m["values"]["count"], 123);
    assert_eq!(m["values"]["mean_body_mass_g"], 5076.02);
    assert_eq!(m["values"]["content_type"], "application/json");
    let copy = &r["matches"][1];
    assert_eq!(copy["workbench_id"], "run-gentoo-restored");
    assert_eq!(copy["values"]["mean_body_mass_g"], 5076.02);
    assert_eq!(
        copy["values"]["body_digest_uri"],
        m["values"]["body_digest_uri"]
    );
}

#[test]
fn in_prefix_exists_not_exists_sort_desc_and_facets_follow_the_contract() {
    let (_tmp, client) = fresh_store();
    runs(&client);
    let wb = Workbench::new(client);
    let r = search(
        &wb,
        json!({"predicates":[{"field":"species","op":"in","value":["Adelie","Chinstrap","Emperor"]}]}),
    );
    assert_eq!(
        ids(&r),
        ["run-1/outputs/summary.json", "run-4/outputs/summary.json"]
    );
    let r = search(
        &wb,
        json!({"predicates":[{"field":"island","op":"prefix","value":"Bis"}]}),
    );
    assert_eq!(r["match_count"], 2);
    let r = search(
        &wb,
        json!({"predicates":[{"field":"species","op":"exists"}], "limit": 10}),
    );
    assert_eq!(r["match_count"], 4);
    let r = search(
        &wb,
        json!({"predicates":[{"field":"species","op":"not_exists"}], "section":"logs"}),
    );
    assert_eq!(
        ids(&r),
        [
            "run-1/logs/run.log",
            "run-2/logs/run.log",
            "run-3/logs/run.log",
            "run-4/logs/run.log"
        ]
    );
    // Sort desc by a number, projection, and facets over every match (not just the page).
    let r = search(
        &wb,
        json!({
            "predicates":[{"field":"mean_body_mass_g","op":"gte","value":3700}],
            "sort":[{"field":"mean_body_mass_g","direction":"desc"}],
            "fields":["species","mean_body_mass_g"],
            "facets":["species","island"],
            "limit": 2
        }),
    );
    assert_eq!(r["match_count"], 4);
    assert_eq!(
        ids(&r),
        ["run-2/outputs/summary.json", "run-3/outputs/summary.json"]
    );
    assert_eq!(
        r["matches"][0]["values"],
        json!({"mean_body_mass_g": 5076.02, "species": "Gentoo"})
    );
    assert_eq!(
        r["facets"][0],
        json!({"field":"species","values":[
            {"value":"Gentoo","count":2},{"value":"Adelie","count":1},{"value":"Chinstrap","count":1}
        ],"distinct_count":3,"truncated":false})
    );
    assert_eq!(r["facets"][1]["field"], "island");
    assert_eq!(r["truncated"], true);
    assert!(r["next_cursor"].is_string());
    // An id scope limits matches to one workbench.
    let r = search(
        &wb,
        json!({"id":"run-3","predicates":[{"field":"species","op":"eq","value":"Gentoo"}]}),
    );
    assert_eq!(ids(&r), ["run-3/outputs/summary.json"]);
    assert_eq!(r["path"], "/agents/local/wb/run-3");
}

#[test]
fn replacing_an_artifact_removes_its_old_index_rows_in_the_same_command() {
    let (_tmp, client) = fresh_store();
    let g1 = put(&client, "wb", "outputs/m.json", &[("acc", f(0.5))]);
    let before = client.meta().read().version();
    let mut options = PutOptions::create("application/json", "test");
    options.condition = WriteCondition::Replace {
        expected_generation: Some(g1),
    };
    options.index_fields = [(FieldId::new("acc").unwrap(), f(0.9))]
        .into_iter()
        .collect();
    client.put("wb", "outputs/m.json", b"{}", &options).unwrap();
    // Two metadata commands (the Publish operation's Begin with its StagedObject row, then the
    // sealed publication that also swaps the index rows and moves the operation from Uploading
    // to Published — docs/metadata-format.md, "Sealed publication"): the version moved by
    // exactly two. (This handle holds no reserved revision yet: this put's command carries the
    // first refill.)
    assert_eq!(client.meta().read().version(), before + 2);
    let wb = Workbench::new(client.clone());
    let old = json!({"predicates":[{"field":"acc","op":"eq","value":0.5}]});
    assert_eq!(search(&wb, old.clone())["match_count"], 0);
    assert_eq!(
        search(
            &wb,
            json!({"predicates":[{"field":"acc","op":"gt","value":0.8}]})
        )["match_count"],
        1
    );
    // The frozen value is still visible at the earlier version (snapshots will pin exactly
    // such a version; the metadata layer serves it from MVCC history).
    let req = meta::index::query::SearchRequest {
        scope: Default::default(),
        predicates: vec![meta::index::query::Predicate {
            field: FieldId::new("acc").unwrap(),
            op: meta::index::query::Op::Eq,
            operands: vec![f(0.5)],
        }],
        fields: None,
        sort: vec![],
        facets: vec![],
        limit: 10,
        resume: None,
    };
    let frozen =
        meta::index::query::search_at(client.meta(), before, &req, Default::default()).unwrap();
    assert_eq!(frozen.match_count, 1);
    // A replacement through put_file declares no custom fields: the old ones disappear.
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"outputs","path":"m.json","text":"{}","replace":true}),
    ));
    assert_eq!(
        search(&wb, json!({"predicates":[{"field":"acc","op":"exists"}]}))["match_count"],
        0
    );
}

#[test]
fn twenty_five_matches_with_limit_ten_page_as_ten_ten_five_without_duplicates() {
    let (_tmp, client) = fresh_store();
    for i in 0..25 {
        put(
            &client,
            "wb",
            &format!("outputs/r{i:02}.json"),
            &[("score", IndexValue::Int(i))],
        );
    }
    put(&client, "wb", "outputs/unscored.json", &[]);
    let wb = Workbench::new(client);
    let query = json!({"predicates":[{"field":"score","op":"exists"}],"limit":10});
    let mut input = query.clone();
    let mut sizes = Vec::new();
    let mut seen = Vec::new();
    loop {
        let r = search(&wb, input.clone());
        assert_eq!(r["match_count"], 25);
        sizes.push(r["matches"].as_array().unwrap().len());
        seen.extend(ids(&r));
        assert_eq!(r["truncated"], r["next_cursor"].is_string());
        match r["next_cursor"].as_str() {
            Some(c) => {
                input = query.clone();
                input["cursor"] = json!(c);
            }
            None => break,
        }
    }
    assert_eq!(sizes, [10, 10, 5]);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 25, "no duplicates");
}

#[test]
fn a_cursor_replayed_after_the_data_changed_is_read_fence_changed() {
    let (_tmp, client) = fresh_store();
    for i in 0..3 {
        put(
            &client,
            "wb",
            &format!("f{i}"),
            &[("n", IndexValue::Int(i))],
        );
    }
    let wb = Workbench::new(client.clone());
    for id in [json!("wb"), Value::Null] {
        let query = json!({"id": id, "predicates":[{"field":"n","op":"exists"}],"limit":1});
        let first = search(&wb, query.clone());
        let mut next = query.clone();
        next["cursor"] = first["next_cursor"].clone();
        // Unchanged data: the cursor continues.
        assert_eq!(
            search(&wb, next.clone())["matches"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        put(&client, "wb", &format!("g-{}", id.is_null()), &[]);
        let e = err(wb.call("workbench_search", &next), "ReadFenceChanged");
        assert_eq!(e["retryable"], true);
    }
    // A cursor of another query, or a tampered one, is InvalidArguments.
    let first = search(
        &wb,
        json!({"predicates":[{"field":"n","op":"exists"}],"limit":1}),
    );
    let cursor = first["next_cursor"].as_str().unwrap().to_string();
    err(
        wb.call(
            "workbench_search",
            &json!({"predicates":[{"field":"n","op":"gte","value":0}],"limit":1,"cursor":cursor}),
        ),
        "InvalidArguments",
    );
    let mut tampered = cursor.into_bytes();
    tampered[5] = if tampered[5] == b'A' { b'B' } else { b'A' };
    err(
        wb.call(
            "workbench_search",
            &json!({"predicates":[{"field":"n","op":"exists"}],"limit":1,
                    "cursor":String::from_utf8(tampered).unwrap()}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn invalid_query_arguments_are_refused_before_any_storage_access() {
    let (_tmp, client) = fresh_store();
    runs(&client);
    let wb = Workbench::new(client.clone());
    let version = client.meta().read().version();
    let many = |n: usize, item: Value| Value::Array(vec![item; n]);
    let p = json!({"field":"species","op":"exists"});
    for (tool, input) in [
        ("workbench_search", json!({"limit": 11})),
        (
            "workbench_search",
            json!({"predicates": many(65, p.clone())}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"in","value": many(65, json!(1))}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"a b","op":"exists"}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x".repeat(129),"op":"exists"}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"exists","value":1}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"in","value":1}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"eq","value":[1]}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"eq"}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"prefix","value":1}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"eq","value":{"a":1}}]}),
        ),
        (
            "workbench_search",
            json!({"predicates":[{"field":"x","op":"like","value":"a"}]}),
        ),
        ("workbench_search", json!({"fields": many(65, json!("f"))})),
        (
            "workbench_search",
            json!({"sort": many(9, json!({"field":"f"}))}),
        ),
        (
            "workbench_search",
            json!({"facets": (0..17).map(|i| format!("f{i}")).collect::<Vec<_>>()}),
        ),
        ("workbench_search", json!({"cursor": "x".repeat(8193)})),
        ("workbench_search", json!({"cursor": "not-a-cursor"})),
        ("workbench_search", json!({"unknown": 1})),
        ("workbench_aggregate", json!({})),
        (
            "workbench_aggregate",
            json!({"measures":[{"name":"s","op":"sum"}]}),
        ),
        (
            "workbench_aggregate",
            json!({"measures":[{"name":"n","op":"count"},{"name":"n","op":"count"}]}),
        ),
        (
            "workbench_aggregate",
            json!({"measures":[{"name":"n","op":"count"}],"sort":[{"field":"zzz"}]}),
        ),
        (
            "workbench_aggregate",
            json!({"measures":[{"name":"n","op":"count"}],"group_by": many(9, json!("g"))}),
        ),
        (
            "workbench_aggregate",
            json!({"measures": many(17, json!({"name":"n","op":"count"}))}),
        ),
        (
            "workbench_aggregate",
            json!({"measures":[{"name":"n","op":"count"}],"limit":101}),
        ),
        ("workbench_catalog", json!({"field_prefix":"a b"})),
        ("workbench_catalog", json!({"field_prefix":"x".repeat(129)})),
    ] {
        let e = err(wb.call(tool, &input), "InvalidArguments");
        assert_eq!(e["retryable"], false, "{tool} {input}");
    }
    assert_eq!(
        client.meta().read().version(),
        version,
        "nothing was written"
    );
    // An unknown workbench is NotFound with its presentation path.
    for tool in ["workbench_search", "workbench_catalog"] {
        let e = err(wb.call(tool, &json!({"id":"nope"})), "NotFound");
        assert_eq!(e["details"]["path"], "/agents/local/wb/nope");
    }
    let e = err(
        wb.call(
            "workbench_aggregate",
            &json!({"id":"nope","measures":[{"name":"n","op":"count"}]}),
        ),
        "NotFound",
    );
    assert_eq!(e["details"]["path"], "/agents/local/wb/nope");
}

#[test]
fn aggregate_groups_average_body_mass_by_species() {
    let (_tmp, client) = fresh_store();
    runs(&client);
    let wb = Workbench::new(client);
    let r = ok(wb.call(
        "workbench_aggregate",
        &json!({
            "measures":[
                {"name":"avg_mass","op":"avg","field":"mean_body_mass_g"},
                {"name":"runs","op":"count"},
                {"name":"heaviest","op":"max","field":"mean_body_mass_g"}
            ],
            "group_by":["species"],
            "predicates":[{"field":"species","op":"exists"}],
            "sort":[{"field":"avg_mass","direction":"desc"}],
            "limit": 2
        }),
    ));
    assert_eq!(r["path"], "/agents/local/wb");
    assert_eq!(r["input_match_count"], 4);
    assert_eq!(r["group_count"], 3);
    assert_eq!(r["row_count"], 2);
    assert_eq!(r["truncated"], true);
    assert_eq!(
        r["groups"][0],
        json!({"key":{"species":"Gentoo"},
               "values":{"avg_mass": (5076.02 + 4950.5) / 2.0, "runs": 2, "heaviest": 5076.02}})
    );
    assert_eq!(r["groups"][1]["key"]["species"], "Chinstrap");
    // Without group_by: one group over everything in scope.
    let r = ok(wb.call(
        "workbench_aggregate",
        &json!({"id":"run-1","measures":[{"name":"n","op":"count"},
                {"name":"total","op":"sum","field":"mean_body_mass_g"}]}),
    ));
    assert_eq!(
        r["groups"],
        json!([{"key":{},"values":{"n":2,"total":3700.66}}])
    );
}

#[test]
fn catalog_lists_fields_operators_capabilities_and_children() {
    let (_tmp, client) = fresh_store();
    runs(&client);
    let wb = Workbench::new(client);
    let r = ok(wb.call("workbench_catalog", &json!({})));
    assert_eq!(r["catalog_empty"], false);
    let cat = &r["catalog"];
    assert_eq!(
        cat["filterable"][0]["operators"],
        json!([
            "eq",
            "ne",
            "in",
            "lt",
            "lte",
            "gt",
            "gte",
            "exists",
            "not_exists"
        ])
    );
    assert_eq!(
        cat["filterable"][0]["fields"],
        json!(["generation", "logical_size", "mean_body_mass_g"])
    );
    assert_eq!(
        cat["filterable"][1]["operators"],
        json!([
            "eq",
            "ne",
            "in",
            "lt",
            "lte",
            "gt",
            "gte",
            "exists",
            "not_exists",
            "prefix",
            "suffix",
            "contains"
        ])
    );
    assert!(cat["filterable"][1]["fields"]
        .as_array()
        .unwrap()
        .contains(&json!("species")));
    assert!(cat["sortable"]
        .as_array()
        .unwrap()
        .contains(&json!("mean_body_mass_g")));
    assert!(!cat["facetable"]
        .as_array()
        .unwrap()
        .contains(&json!("path")));
    assert_eq!(
        cat["aggregatable"],
        json!(["generation", "logical_size", "mean_body_mass_g"])
    );
    assert_eq!(cat["field_types"]["mean_body_mass_g"], json!(["float"]));
    assert_eq!(cat["facets"], json!([]));
    let children = r["child_catalogs"].as_array().unwrap();
    assert_eq!(children.len(), 4);
    assert_eq!(children[0]["name"], "run-1");
    assert_eq!(children[0]["path"], "/agents/local/wb/run-1");
    assert_eq!(children[0]["artifact_count"], 2);
    // A workbench scope with facets and a field prefix.
    let r = ok(wb.call(
        "workbench_catalog",
        &json!({"id":"run-2","field_prefix":"sp","include_facets":true}),
    ));
    assert_eq!(r["path"], "/agents/local/wb/run-2");
    assert_eq!(r["catalog"]["filterable"][0]["fields"], json!(["species"]));
    assert_eq!(
        r["catalog"]["facets"],
        json!([{"field":"species","values":[{"value":"Gentoo","count":1}],"distinct_count":1,"truncated":false}])
    );
    let sections: Vec<&str> = r["child_catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(sections, ["logs", "outputs"]);
    // An empty workbench has an empty catalog.
    ok(wb.call("workbench_create", &json!({"id":"empty"})));
    let r = ok(wb.call("workbench_catalog", &json!({"id":"empty"})));
    assert_eq!(r["catalog_empty"], true);
    assert_eq!(r["child_catalogs"], json!([]));
}

#[test]
fn append_keeps_custom_fields_and_edit_publishes_none() {
    let (_tmp, client) = fresh_store();
    put(&client, "wb", "logs/run.log", &[("run", s("r1"))]);
    client
        .append("wb", "logs/run.log", b"more\n", None, "test")
        .unwrap();
    let wb = Workbench::new(client.clone());
    let q = json!({"predicates":[{"field":"run","op":"eq","value":"r1"}]});
    assert_eq!(search(&wb, q.clone())["match_count"], 1);
    ok(wb.call(
        "workbench_edit",
        &json!({"id":"wb","section":"logs","path":"run.log","old_string":"more","new_string":"less"}),
    ));
    assert_eq!(search(&wb, q)["match_count"], 0);
}

#[test]
fn index_json_projects_top_level_scalars_and_timestamps_are_queryable() {
    let (_tmp, client) = fresh_store();
    client.create_workbench("wb").unwrap();
    let mut options = PutOptions::create("application/json", "test");
    options.index_json = true;
    options.index_fields = [(
        FieldId::new("finished_at").unwrap(),
        IndexValue::Timestamp(nokv::Timestamp::parse_rfc3339("2024-05-01T12:00:00Z").unwrap()),
    )]
    .into_iter()
    .collect();
    client
        .put(
            "wb",
            "outputs/metrics.json",
            br#"{"accuracy":0.93,"model":"vit","nested":{"x":1},"tags":["a"]}"#,
            &options,
        )
        .unwrap();
    let wb = Workbench::new(client.clone());
    let r = search(
        &wb,
        json!({"predicates":[{"field":"accuracy","op":"gt","value":0.9},
                             {"field":"finished_at","op":"gte","value":"2024-05-01T00:00:00Z"}]}),
    );
    assert_eq!(r["match_count"], 1);
    let values = &r["matches"][0]["values"];
    assert_eq!(values["model"], "vit");
    assert_eq!(values["finished_at"], "2024-05-01T12:00:00Z");
    assert!(values.get("nested").is_none() && values.get("tags").is_none());
    // A non-object body with index_json is refused before anything is published.
    let mut bad = PutOptions::create("application/json", "test");
    bad.index_json = true;
    let e = client
        .put("wb", "outputs/list.json", b"[1,2]", &bad)
        .unwrap_err();
    assert!(matches!(e, nokv::Error::InvalidArgument(_)), "{e:?}");
    assert!(client.stat("wb", "outputs/list.json").is_err());
}
