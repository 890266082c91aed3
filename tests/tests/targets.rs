//! Targets against the real app, Postgres and Redis: domain parsing,
//! ownership, tier limits, import, and deletion with its cascade.

use fred::interfaces::KeysInterface;
use reqwest::Method;
use scanfleet_common::events::FindingEvent;
use scanfleet_common::Severity;
use scanfleet_tests::{spawn_app, Reply, TestApp, TestUser};
use serde_json::{json, Value};
use uuid::Uuid;

async fn create_target(app: &TestApp, user: &TestUser, domain: &str) -> Reply {
    app.post(
        "/api/v1/targets",
        Some(&user.access_token),
        json!({ "domain": domain }),
    )
    .await
}

async fn import(app: &TestApp, user: &TestUser, domains: Vec<String>) -> Reply {
    app.post(
        "/api/v1/targets/import",
        Some(&user.access_token),
        json!({ "domains": domains }),
    )
    .await
}

fn id_of(r: &Reply) -> Uuid {
    r.body["id"].as_str().expect("id").parse().expect("uuid")
}

#[tokio::test]
async fn creating_a_target_normalises_the_domain_and_returns_201() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let r = app
        .post(
            "/api/v1/targets",
            Some(&user.access_token),
            json!({"domain": "  Bücher.Example.COM ", "organization": "Acme"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["domain"], "xn--bcher-kva.example.com");
    assert_eq!(r.body["organization"], "Acme");
    let created = chrono::DateTime::parse_from_rfc3339(r.body["created_at"].as_str().unwrap());
    assert_eq!(created.expect("RFC 3339").offset().local_minus_utc(), 0);
    id_of(&r);
}

#[tokio::test]
async fn organization_is_optional_and_defaults_to_empty() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let r = create_target(&app, &user, "example.com").await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["organization"], "");
}

#[tokio::test]
async fn every_kind_of_invalid_domain_is_a_422_naming_the_domain_field() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let long_label = format!("{}.com", "a".repeat(64));
    let long_name = format!("{}.com", vec!["a".repeat(60); 5].join("."));
    for bad in [
        "",
        "   ",
        "https://example.com",
        "example.com/path",
        "example.com:8443",
        "user@example.com",
        "192.168.1.10",
        "2001:db8::1",
        "[2001:db8::1]",
        "*.example.com",
        long_label.as_str(),
        long_name.as_str(),
        "exa mple.com",
        "under_score.example.com",
        "localhost",
        "-bad.example.com",
    ] {
        let r = create_target(&app, &user, bad).await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["domain"], "{bad:?}: {}", r.text);
    }
    let r = app.get("/api/v1/targets", &user.access_token).await;
    assert_eq!(r.body.as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn an_overlong_organization_is_a_422_naming_the_field() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let r = app
        .post(
            "/api/v1/targets",
            Some(&user.access_token),
            json!({"domain": "example.com", "organization": "x".repeat(201)}),
        )
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["organization"]);
}

#[tokio::test]
async fn a_domain_the_user_already_has_is_a_409_but_other_users_may_add_it() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    assert_eq!(create_target(&app, &alice, "example.com").await.status, 201);
    let r = create_target(&app, &alice, "EXAMPLE.com").await;
    assert_eq!(r.assert_problem(409)["code"], "target_exists");
    assert_eq!(create_target(&app, &bob, "example.com").await.status, 201);
}

#[tokio::test]
async fn targets_are_listed_newest_first_with_a_total_count_and_paging() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    for d in ["a.example.com", "b.example.com", "c.example.com"] {
        assert_eq!(create_target(&app, &alice, d).await.status, 201);
    }
    create_target(&app, &bob, "bob.example.com").await;
    let r = app.get("/api/v1/targets", &alice.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("3"));
    let domains: Vec<&str> = r
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["domain"].as_str().unwrap())
        .collect();
    assert_eq!(domains, ["c.example.com", "b.example.com", "a.example.com"]);
    let r = app
        .get("/api/v1/targets?limit=1&offset=1", &alice.access_token)
        .await;
    assert_eq!(r.header("x-total-count"), Some("3"));
    assert_eq!(r.body[0]["domain"], "b.example.com");
    let r = app
        .get("/api/v1/targets?limit=0", &alice.access_token)
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["limit"]);
}

#[tokio::test]
async fn target_operations_need_authentication() {
    let app = spawn_app().await;
    let r = app.call(Method::GET, "/api/v1/targets", None, None).await;
    r.assert_problem(401);
    let r = app
        .post("/api/v1/targets", None, json!({"domain": "example.com"}))
        .await;
    r.assert_problem(401);
}

#[tokio::test]
async fn the_demo_tier_holds_five_targets_then_answers_403_with_an_upgrade_prompt() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    for i in 0..5 {
        let r = create_target(&app, &user, &format!("t{i}.example.com")).await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let r = create_target(&app, &user, "t5.example.com").await;
    let body = r.assert_problem(403);
    assert_eq!(body["code"], "target_limit_reached");
    assert_eq!(body["upgrade"]["tier_slug"], "monthly");
    assert!(body["upgrade"]["url"]
        .as_str()
        .unwrap()
        .ends_with("/api/v1/subscriptions/checkout"));
    assert!(body["upgrade"]["tiers_url"]
        .as_str()
        .unwrap()
        .ends_with("/api/v1/subscriptions/tiers"));
    assert!(!body["upgrade"]["message"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn the_monthly_tier_holds_one_hundred_targets_and_admins_are_unlimited() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let domains: Vec<String> = (0..100).map(|i| format!("m{i}.example.com")).collect();
    let r = import(&app, &user, domains).await;
    assert_eq!(r.body["imported"], 100, "{}", r.text);
    let r = create_target(&app, &user, "one-more.example.com").await;
    let body = r.assert_problem(403);
    assert_eq!(body["code"], "target_limit_reached");
    assert_eq!(body["upgrade"]["tier_slug"], "yearly");

    let admin = app.new_user().await;
    app.make_admin(admin.id).await;
    let domains: Vec<String> = (0..500).map(|i| format!("a{i}.example.com")).collect();
    assert_eq!(import(&app, &admin, domains).await.body["imported"], 500);
    assert_eq!(
        create_target(&app, &admin, "a500.example.com").await.status,
        201
    );
}

#[tokio::test]
async fn import_counts_invalid_duplicate_existing_and_over_limit_domains_as_failed() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    // Demo: 5 targets; one exists already, so 4 more fit.
    assert_eq!(
        create_target(&app, &user, "old.example.com").await.status,
        201
    );
    let domains = vec![
        "one.example.com".to_string(),    // imported
        "https://bad.example.com".into(), // invalid
        "ONE.example.com".into(),         // duplicate within the list
        "old.example.com".into(),         // exists
        "two.example.com".into(),         // imported
        "Bücher.example".into(),          // imported (punycode)
        "three.example.com".into(),       // imported: the 5th target
        "four.example.com".into(),        // over the limit
        "10.0.0.1".into(),                // invalid
    ];
    let r = import(&app, &user, domains).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["imported"], 4);
    assert_eq!(r.body["failed"], 5);
    let created: Vec<&str> = r.body["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(t["id"].as_str().unwrap().parse::<Uuid>().is_ok());
            t["domain"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        created,
        [
            "one.example.com",
            "two.example.com",
            "xn--bcher-kva.example",
            "three.example.com"
        ]
    );
    let failures: Vec<(String, String)> = r.body["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap().to_string(),
                f["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("domains[1]", "invalid"),
        ("domains[2]", "duplicate"),
        ("domains[3]", "exists"),
        ("domains[7]", "limit_reached"),
        ("domains[8]", "invalid"),
    ];
    assert_eq!(
        failures,
        expected
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    let r = app.get("/api/v1/targets", &user.access_token).await;
    assert_eq!(r.header("x-total-count"), Some("5"));
}

#[tokio::test]
async fn importing_more_than_500_domains_is_a_422_naming_domains() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let domains: Vec<String> = (0..501).map(|i| format!("d{i}.example.com")).collect();
    let r = import(&app, &user, domains).await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["domains"]);
    let r = app.get("/api/v1/targets", &user.access_token).await;
    assert_eq!(r.header("x-total-count"), Some("0"));
}

#[tokio::test]
async fn another_users_target_is_a_404_on_delete() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let id = id_of(&create_target(&app, &alice, "example.com").await);
    let r = app
        .call(
            Method::DELETE,
            &format!("/api/v1/targets/{id}"),
            Some(&bob.access_token),
            None,
        )
        .await;
    r.assert_problem(404);
    let r = app
        .call(
            Method::DELETE,
            &format!("/api/v1/targets/{}", Uuid::now_v7()),
            Some(&alice.access_token),
            None,
        )
        .await;
    r.assert_problem(404);
    let r = app.get("/api/v1/targets", &alice.access_token).await;
    assert_eq!(r.header("x-total-count"), Some("1"));
}

#[tokio::test]
async fn deleting_a_target_stops_its_active_scans_and_removes_its_scan_data() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let target = id_of(&create_target(&app, &user, "example.com").await);
    let r = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({"target_id": target}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let scan = id_of(&r);
    let db = app.state.db.get().await.unwrap();
    let finding = FindingEvent {
        template_id: "git-config".into(),
        name: "Exposed .git/config".into(),
        severity: Severity::High,
        host: "example.com".into(),
        matched_at: "https://example.com/.git/config".into(),
        description: String::new(),
        remediation: String::new(),
        extracted_results: vec![],
        matcher_name: None,
        classification: Default::default(),
        evidence: None,
    };
    scanfleet_core::store::findings::insert_findings(&db, scan, user.id, &[finding])
        .await
        .unwrap();
    db.execute(
        "INSERT INTO schedules (id, user_id, target_id, engine, cron_expression, next_run)
         VALUES ($1, $2, $3, 'full', '0 9 * * 1', now())",
        &[&Uuid::now_v7(), &user.id, &target],
    )
    .await
    .unwrap();

    let r = app
        .call(
            Method::DELETE,
            &format!("/api/v1/targets/{target}"),
            Some(&user.access_token),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert!(r.text.is_empty());

    let marker: Option<String> = app
        .state
        .redis
        .get(app.state.keys.scan_closed(scan))
        .await
        .unwrap();
    assert_eq!(
        marker.as_deref(),
        Some("1"),
        "the active scan was not stopped"
    );
    for table in ["targets", "scans", "findings", "schedules"] {
        let n: i64 = db
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table} still has rows");
    }
    let r = app.get("/api/v1/targets", &user.access_token).await;
    assert_eq!(r.body, Value::Array(vec![]));
}

/// Issue 35: a new target without `max_rps_per_host` gets its tier's
/// default (as the tier list says), an import too; its owner changes it
/// with `PATCH /targets/{id}`; a value outside 1 to 1000 is a 422 naming
/// the field, a wrong type a 400, and someone else's target a 404.
#[tokio::test]
async fn max_rps_per_host_defaults_from_the_tier_and_its_owner_can_change_it() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let tiers = app
        .call(Method::GET, "/api/v1/subscriptions/tiers", None, None)
        .await;
    assert_eq!(tiers.status, 200, "{}", tiers.text);
    let default_of = |slug: &str| -> Value {
        tiers.body["tiers"]
            .as_array()
            .or(tiers.body.as_array())
            .expect("tiers")
            .iter()
            .find(|t| t["slug"] == slug)
            .map(|t| t["default_max_rps_per_host"].clone())
            .expect("tier")
    };
    assert_eq!(default_of("demo"), 50, "{}", tiers.text);
    assert_eq!(default_of("yearly"), 100, "{}", tiers.text);

    let r = create_target(&app, &user, "demo-rps.example.com").await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["max_rps_per_host"], 50);
    app.set_tier(user.id, "yearly").await;
    let r = create_target(&app, &user, "yearly-rps.example.com").await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["max_rps_per_host"], 100);
    let target = id_of(&r);
    let r = app
        .post(
            "/api/v1/targets",
            Some(&user.access_token),
            json!({"domain": "own-rps.example.com", "max_rps_per_host": 7}),
        )
        .await;
    assert_eq!(r.body["max_rps_per_host"], 7, "{}", r.text);
    let r = import(&app, &user, vec!["imported-rps.example.com".into()]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let imported = r.body["targets"][0]["id"].as_str().expect("imported id");
    let r = app
        .get(&format!("/api/v1/targets/{imported}"), &user.access_token)
        .await;
    assert_eq!(r.body["max_rps_per_host"], 100, "{}", r.text);

    let patch = |id: String, body: Value| {
        let app = &app;
        let token = user.access_token.clone();
        async move {
            app.call(
                Method::PATCH,
                &format!("/api/v1/targets/{id}"),
                Some(&token),
                Some(body),
            )
            .await
        }
    };
    let r = patch(target.to_string(), json!({"max_rps_per_host": 10})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["max_rps_per_host"], 10);
    assert_eq!(r.body["id"], target.to_string());
    let r = app
        .get(&format!("/api/v1/targets/{target}"), &user.access_token)
        .await;
    assert_eq!(r.body["max_rps_per_host"], 10);
    // An empty change changes nothing.
    let r = patch(target.to_string(), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["max_rps_per_host"], 10);

    for bad in [json!(0), json!(1001), json!(-5), json!(5_000_000_000_i64)] {
        let r = patch(target.to_string(), json!({"max_rps_per_host": bad})).await;
        r.assert_problem(422);
        assert_eq!(
            r.error_fields(),
            vec!["max_rps_per_host"],
            "{bad}: {}",
            r.text
        );
        let r = app
            .post(
                "/api/v1/targets",
                Some(&user.access_token),
                json!({"domain": "bad-rps.example.com", "max_rps_per_host": bad}),
            )
            .await;
        r.assert_problem(422);
        assert_eq!(
            r.error_fields(),
            vec!["max_rps_per_host"],
            "{bad}: {}",
            r.text
        );
    }
    let r = patch(target.to_string(), json!({"max_rps_per_host": "fast"})).await;
    r.assert_problem(400);
    assert_eq!(r.error_fields(), vec!["max_rps_per_host"], "{}", r.text);
    let r = app
        .get(&format!("/api/v1/targets/{target}"), &user.access_token)
        .await;
    assert_eq!(
        r.body["max_rps_per_host"], 10,
        "unchanged by refused changes"
    );

    let other = app.new_user().await;
    let r = app
        .call(
            Method::PATCH,
            &format!("/api/v1/targets/{target}"),
            Some(&other.access_token),
            Some(json!({"max_rps_per_host": 20})),
        )
        .await;
    r.assert_problem(404);
    let r = patch(Uuid::now_v7().to_string(), json!({"max_rps_per_host": 20})).await;
    r.assert_problem(404);
}
