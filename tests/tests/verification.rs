//! Issue 12: ownership proof of targets. Verification by DNS TXT (on the
//! domain and on `_scanfleet.<domain>`) and by the well-known file, failed
//! checks naming what was found, the scan gate (direct, run-now and
//! scheduled), expiry and re-check, the admin override, subdomain coverage,
//! and the dev-mode default. DNS answers come from a local DNS server and
//! the proof file from a local web server, reached through the scanner's
//! network settings.

use chrono::Utc;
use reqwest::Method;
use scanfleet_tests::dns::DnsLab;
use scanfleet_tests::site::{Page, Site};
use scanfleet_tests::{spawn_app_with, TestApp, TestUser, JWT_SECRET};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use uuid::Uuid;

const PROOF_PATH: &str = "/.well-known/scanfleet-verification.txt";

struct ProofLab {
    app: TestApp,
    dns: DnsLab,
    site: Site,
}

/// An app whose scanner network settings point at a local DNS server and a
/// local web server, with `extra` settings on top.
async fn proof_lab(extra: &[(&str, &str)]) -> ProofLab {
    let dns = DnsLab::start().await;
    let site = Site::start().await;
    let mut env: Vec<(String, String)> = site.env();
    env.push(dns.env());
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    ProofLab {
        app: spawn_app_with(&pairs).await,
        dns,
        site,
    }
}

/// Proof required, as in production, without the rest of production mode.
async fn strict_lab() -> ProofLab {
    proof_lab(&[("SCANFLEET_TARGETS__REQUIRE_VERIFICATION", "true")]).await
}

fn domain() -> String {
    format!(
        "d{}.example.test",
        &Uuid::new_v4().simple().to_string()[..12]
    )
}

/// The target `t` as its detail answer shows it now.
async fn shown(app: &TestApp, user: &TestUser, t: &Value) -> Value {
    let path = format!("/api/v1/targets/{}", t["id"].as_str().unwrap());
    let r = app.get(&path, &user.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
}

fn proof(t: &Value) -> String {
    format!(
        "scanfleet-verification={}",
        t["verification"]["token"].as_str().expect("token")
    )
}

async fn verify(app: &TestApp, user: &TestUser, t: &Value) -> scanfleet_tests::Reply {
    app.call(
        Method::POST,
        &format!("/api/v1/targets/{}/verify", t["id"].as_str().unwrap()),
        Some(&user.access_token),
        None,
    )
    .await
}

async fn scan(app: &TestApp, user: &TestUser, t: &Value) -> scanfleet_tests::Reply {
    app.post(
        "/api/v1/scans",
        Some(&user.access_token),
        json!({ "target_id": t["id"], "engine": "quick" }),
    )
    .await
}

fn assert_unverified_refusal(r: &scanfleet_tests::Reply, t: &Value) {
    let body = r.assert_problem(403);
    assert_eq!(body["code"], "target_unverified", "{}", r.text);
    let help = &body["verification"];
    assert_eq!(help["value"], proof(t).as_str(), "{}", r.text);
    let domain = t["domain"].as_str().unwrap();
    assert_eq!(
        help["dns_txt_names"],
        json!([domain, format!("_scanfleet.{domain}")])
    );
    assert_eq!(
        help["file_url"],
        format!("https://{domain}{PROOF_PATH}").as_str()
    );
    assert!(help["instructions"].as_str().unwrap().contains(&proof(t)));
}

#[tokio::test]
async fn every_target_gets_its_own_token_shown_unverified_in_create_list_and_detail() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let a = lab.app.create_target(&u, &domain()).await;
    let b = lab.app.create_target(&u, &domain()).await;
    for t in [&a, &b] {
        let v = &t["verification"];
        assert_eq!(v["status"], "unverified");
        assert!(v["token"].as_str().unwrap().len() >= 32, "{v}");
        assert!(v["method"].is_null() && v["verified_at"].is_null() && v["expires_at"].is_null());
    }
    assert_ne!(a["verification"]["token"], b["verification"]["token"]);
    let list = lab.app.get("/api/v1/targets", &u.access_token).await;
    assert_eq!(list.status, 200);
    let listed: Vec<&Value> = list.body.as_array().unwrap().iter().collect();
    assert!(listed
        .iter()
        .any(|t| t["id"] == a["id"] && t["verification"] == a["verification"]));
    assert_eq!(
        shown(&lab.app, &u, &a).await["verification"],
        a["verification"]
    );
    // Imported targets get tokens too.
    let imported = lab
        .app
        .post(
            "/api/v1/targets/import",
            Some(&u.access_token),
            json!({ "domains": [domain()] }),
        )
        .await;
    let id = imported.body["targets"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let detail = lab
        .app
        .get(&format!("/api/v1/targets/{id}"), &u.access_token)
        .await;
    assert_eq!(detail.body["verification"]["status"], "unverified");
    assert!(detail.body["verification"]["token"].as_str().unwrap().len() >= 32);
}

#[tokio::test]
async fn a_txt_record_on_the_domain_proves_ownership() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    lab.dns.set_txt(&d, &["v=spf1 -all", &proof(&t)]);
    let r = verify(&lab.app, &u, &t).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = &r.body["verification"];
    assert_eq!(v["status"], "verified");
    assert_eq!(v["method"], "dns_txt");
    let verified: chrono::DateTime<Utc> = v["verified_at"].as_str().unwrap().parse().unwrap();
    let expires: chrono::DateTime<Utc> = v["expires_at"].as_str().unwrap().parse().unwrap();
    let days = (expires - verified).num_days();
    assert!(
        (29..=30).contains(&days),
        "default lifetime is 30 days: {days}"
    );
    assert_eq!(scan(&lab.app, &u, &t).await.status, 201);
}

#[tokio::test]
async fn a_txt_record_on_the_scanfleet_label_proves_ownership() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    lab.dns.set_txt(&format!("_scanfleet.{d}"), &[&proof(&t)]);
    let r = verify(&lab.app, &u, &t).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["verification"]["method"], "dns_txt");
}

#[tokio::test]
async fn a_line_of_the_well_known_file_proves_ownership() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    lab.site.put(
        &d,
        PROOF_PATH,
        Page::Body(format!(
            "# proofs\nscanfleet-verification=other\n{}\n",
            proof(&t)
        )),
    );
    let r = verify(&lab.app, &u, &t).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["verification"]["status"], "verified");
    assert_eq!(r.body["verification"]["method"], "http_file");
    assert_eq!(scan(&lab.app, &u, &t).await.status, 201);
}

#[tokio::test]
async fn redirects_are_followed_within_the_domain_only() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let inside = domain();
    let t = lab.app.create_target(&u, &inside).await;
    lab.site.put(
        &inside,
        PROOF_PATH,
        Page::Redirect(format!("http://www.{inside}/proof.txt")),
    );
    lab.site.put(
        &format!("www.{inside}"),
        "/proof.txt",
        Page::Body(proof(&t)),
    );
    let r = verify(&lab.app, &u, &t).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["verification"]["method"], "http_file");

    // The same proof served by another domain does not count.
    let outside = domain();
    let t = lab.app.create_target(&u, &outside).await;
    lab.site.put(
        &outside,
        PROOF_PATH,
        Page::Redirect("http://elsewhere.test/proof.txt".into()),
    );
    lab.site
        .put("elsewhere.test", "/proof.txt", Page::Body(proof(&t)));
    let r = verify(&lab.app, &u, &t).await;
    r.assert_problem(422);
    let file = &r.body["errors"][1];
    assert_eq!(file["field"], "http_file");
    assert!(
        file["message"]
            .as_str()
            .unwrap()
            .contains("redirects to elsewhere.test, outside"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn a_failed_verification_names_what_each_method_found() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    lab.dns
        .set_txt(&d, &["v=spf1 -all", "scanfleet-verification=stale-token"]);
    lab.site.put(
        &d,
        PROOF_PATH,
        Page::Body("scanfleet-verification=wrong\n".into()),
    );
    let r = verify(&lab.app, &u, &t).await;
    let body = r.assert_problem(422);
    assert_eq!(body["code"], "verification_failed");
    assert_eq!(r.error_fields(), vec!["dns_txt", "http_file"]);
    let dns = body["errors"][0]["message"].as_str().unwrap();
    assert!(
        dns.contains("stale-token") && dns.contains("v=spf1 -all"),
        "{dns}"
    );
    assert!(dns.contains(&format!("_scanfleet.{d}: ")), "{dns}");
    let file = body["errors"][1]["message"].as_str().unwrap();
    assert!(file.contains("https:"), "HTTPS was tried first: {file}");
    assert!(file.contains("scanfleet-verification=wrong"), "{file}");
    assert_eq!(body["verification"]["value"], proof(&t).as_str());

    // Nothing at all: NXDOMAIN-like answers and a 404.
    let bare = lab.app.create_target(&u, &domain()).await;
    let r = verify(&lab.app, &u, &bare).await;
    r.assert_problem(422);
    let file = r.body["errors"][1]["message"].as_str().unwrap();
    assert!(file.contains("answered 404"), "{file}");
    let still = shown(&lab.app, &u, &bare).await;
    assert_eq!(still["verification"]["status"], "unverified");
}

#[tokio::test]
async fn production_mode_refuses_scans_and_run_now_of_unverified_targets() {
    let lab = proof_lab(&[
        ("SCANFLEET_MODE", "production"),
        ("SCANFLEET_JWT_SECRET", JWT_SECRET),
        ("SCANFLEET_PAYMENTS__PROVIDER", "stripe"),
    ])
    .await;
    assert!(lab.app.state.settings.targets.require_verification);
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    let r = scan(&lab.app, &u, &t).await;
    assert_unverified_refusal(&r, &t);

    let s = lab
        .app
        .post(
            "/api/v1/schedules",
            Some(&u.access_token),
            json!({"target_id": t["id"], "engine": "quick", "cron_expression": "0 3 * * *"}),
        )
        .await;
    assert_eq!(s.status, 201, "{}", s.text);
    let run = lab
        .app
        .call(
            Method::POST,
            &format!(
                "/api/v1/schedules/{}/run-now",
                s.body["id"].as_str().unwrap()
            ),
            Some(&u.access_token),
            None,
        )
        .await;
    assert_unverified_refusal(&run, &t);
    let db = lab.app.state.db.get().await.unwrap();
    let scans: i64 = db
        .query_one("SELECT count(*) FROM scans", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(scans, 0, "refused scans leave no rows");

    lab.dns.set_txt(&d, &[&proof(&t)]);
    assert_eq!(verify(&lab.app, &u, &t).await.status, 200);
    assert_eq!(scan(&lab.app, &u, &t).await.status, 201);
}

#[tokio::test]
async fn dev_mode_scans_unverified_targets_by_default() {
    let lab = proof_lab(&[]).await;
    assert!(!lab.app.state.settings.targets.require_verification);
    let u = lab.app.new_user().await;
    let t = lab.app.create_target(&u, &domain()).await;
    assert_eq!(t["verification"]["status"], "unverified");
    let r = scan(&lab.app, &u, &t).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        lab.dns.txt_questions.load(Ordering::SeqCst),
        0,
        "no check is made when proof is not required"
    );
}

async fn expire(app: &TestApp, t: &Value) {
    let id: Uuid = t["id"].as_str().unwrap().parse().unwrap();
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE targets SET verified_at = now() - interval '31 days',
             verification_expires_at = now() - interval '1 day' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn an_expired_proof_is_checked_again_before_a_scan() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    lab.dns.set_txt(&d, &[&proof(&t)]);
    assert_eq!(verify(&lab.app, &u, &t).await.status, 200);
    expire(&lab.app, &t).await;
    let before = shown(&lab.app, &u, &t).await;
    assert_eq!(before["verification"]["status"], "expired");

    // Still published: the scan goes ahead and the proof is renewed.
    let asked = lab.dns.txt_questions.load(Ordering::SeqCst);
    let r = scan(&lab.app, &u, &t).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(
        lab.dns.txt_questions.load(Ordering::SeqCst) > asked,
        "checked again"
    );
    let renewed = shown(&lab.app, &u, &t).await;
    assert_eq!(renewed["verification"]["status"], "verified");
    let expires: chrono::DateTime<Utc> = renewed["verification"]["expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(expires > Utc::now() + chrono::Duration::days(29));

    // Withdrawn: once expired again, the scan is refused, saying why.
    lab.dns.set_txt(&d, &["v=spf1 -all"]);
    expire(&lab.app, &t).await;
    let r = scan(&lab.app, &u, &t).await;
    assert_unverified_refusal(&r, &t);
    assert!(
        r.body["detail"].as_str().unwrap().contains("expired"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn the_proof_lifetime_is_configurable() {
    let lab = proof_lab(&[
        ("SCANFLEET_TARGETS__REQUIRE_VERIFICATION", "true"),
        ("SCANFLEET_TARGETS__VERIFICATION_TTL_DAYS", "7"),
    ])
    .await;
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    lab.dns.set_txt(&d, &[&proof(&t)]);
    let r = verify(&lab.app, &u, &t).await;
    let expires: chrono::DateTime<Utc> = r.body["verification"]["expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let days = (expires - Utc::now()).num_hours();
    assert!((7 * 24 - 1..=7 * 24).contains(&days), "{days} hours");
}

#[tokio::test]
async fn an_admin_can_mark_a_target_verified_and_revoke_it() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let admin = lab.app.new_user().await;
    lab.app.make_admin(admin.id).await;
    let t = lab.app.create_target(&u, &domain()).await;
    let path = format!("/api/v1/admin/targets/{}", t["id"].as_str().unwrap());

    let by_owner = lab
        .app
        .call(
            Method::PATCH,
            &path,
            Some(&u.access_token),
            Some(json!({"verified": true})),
        )
        .await;
    by_owner.assert_problem(403);

    let r = lab
        .app
        .call(
            Method::PATCH,
            &path,
            Some(&admin.access_token),
            Some(json!({"verified": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["verification"]["status"], "verified");
    assert_eq!(r.body["verification"]["method"], "admin");
    assert!(r.body["verification"]["expires_at"].is_null());
    assert_eq!(scan(&lab.app, &u, &t).await.status, 201);

    let r = lab
        .app
        .call(
            Method::PATCH,
            &path,
            Some(&admin.access_token),
            Some(json!({"verified": false})),
        )
        .await;
    assert_eq!(r.body["verification"]["status"], "unverified");
    assert_unverified_refusal(&scan(&lab.app, &u, &t).await, &t);

    let missing = lab
        .app
        .call(
            Method::PATCH,
            &format!("/api/v1/admin/targets/{}", Uuid::now_v7()),
            Some(&admin.access_token),
            Some(json!({"verified": true})),
        )
        .await;
    missing.assert_problem(404);
}

#[tokio::test]
async fn a_verified_domain_covers_its_subdomains_only() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let parent = domain();
    let p = lab.app.create_target(&u, &parent).await;
    lab.dns.set_txt(&parent, &[&proof(&p)]);
    assert_eq!(verify(&lab.app, &u, &p).await.status, 200);
    let sub = lab.app.create_target(&u, &format!("shop.{parent}")).await;
    assert_eq!(scan(&lab.app, &u, &sub).await.status, 201);
    let unrelated = lab.app.create_target(&u, &domain()).await;
    assert_unverified_refusal(&scan(&lab.app, &u, &unrelated).await, &unrelated);

    // Another user's proof of the parent covers nothing of this user's.
    let other = lab.app.new_user().await;
    let their_sub = lab
        .app
        .create_target(&other, &format!("api.{parent}"))
        .await;
    assert_unverified_refusal(&scan(&lab.app, &other, &their_sub).await, &their_sub);
}

#[tokio::test]
async fn a_scheduled_run_of_an_unverified_target_is_skipped_and_the_owner_told() {
    let lab = strict_lab().await;
    let u = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&u, &d).await;
    let s = lab
        .app
        .post(
            "/api/v1/schedules",
            Some(&u.access_token),
            json!({"target_id": t["id"], "engine": "quick", "cron_expression": "*/15 * * * *"}),
        )
        .await;
    let schedule: Uuid = s.body["id"].as_str().unwrap().parse().unwrap();
    let db = lab.app.state.db.get().await.unwrap();
    let make_due = "UPDATE schedules SET next_run = now() - interval '1 minute' WHERE id = $1";
    db.execute(make_due, &[&schedule]).await.unwrap();

    let report = lab.app.scheduler().tick(Utc::now()).await.unwrap();
    assert_eq!((report.started, report.skipped), (0, 1), "{report:?}");
    let n = lab.app.get("/api/v1/notifications", &u.access_token).await;
    assert_eq!(n.body[0]["type"], "schedule_skipped", "{}", n.text);
    assert!(
        n.text.contains("not proven"),
        "the notice says why: {}",
        n.text
    );
    let shown = lab.app.get("/api/v1/schedules", &u.access_token).await;
    assert_eq!(shown.body[0]["enabled"], true, "the schedule stays enabled");

    // Once proven, the next firing starts a scan.
    lab.dns.set_txt(&d, &[&proof(&t)]);
    assert_eq!(verify(&lab.app, &u, &t).await.status, 200);
    db.execute(make_due, &[&schedule]).await.unwrap();
    let report = lab.app.scheduler().tick(Utc::now()).await.unwrap();
    assert_eq!(report.started, 1, "{report:?}");
}

#[tokio::test]
async fn verifying_another_users_target_is_404() {
    let lab = strict_lab().await;
    let owner = lab.app.new_user().await;
    let other = lab.app.new_user().await;
    let d = domain();
    let t = lab.app.create_target(&owner, &d).await;
    lab.dns.set_txt(&d, &[&proof(&t)]);
    verify(&lab.app, &other, &t).await.assert_problem(404);
    let still = shown(&lab.app, &owner, &t).await;
    assert_eq!(still["verification"]["status"], "unverified");
}

/// The DNS server setting answers the scanner's address questions too, not
/// only TXT, and the address policy still applies to its answers.
#[tokio::test]
async fn the_configured_dns_server_answers_addresses_under_the_address_policy() {
    use scanfleet_http::{ClientConfig, HttpClient};
    let dns = DnsLab::start().await;
    dns.set_a("app.example.test", std::net::Ipv4Addr::new(127, 0, 0, 7));
    dns.set_txt("app.example.test", &["hello"]);
    let config = |allow_private| ClientConfig {
        dns_server: Some(dns.addr),
        allow_private,
        ..ClientConfig::default()
    };
    let client = HttpClient::new(config(true)).unwrap();
    let ips = client.resolve_name("app.example.test").await.unwrap();
    assert_eq!(ips, vec!["127.0.0.7".parse::<std::net::IpAddr>().unwrap()]);
    assert_eq!(
        client.txt_records("app.example.test").await.unwrap(),
        vec!["hello"]
    );
    assert!(client
        .txt_records("none.example.test")
        .await
        .unwrap()
        .is_empty());
    assert!(client.resolve_name("none.example.test").await.is_err());
    let strict = HttpClient::new(config(false)).unwrap();
    let refused = strict.resolve_name("app.example.test").await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("private addresses are not allowed"),
        "{refused}"
    );
}
