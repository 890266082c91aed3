//! Issue 34, item 4: many WebSocket listeners of one scan share what the
//! ingester recorded. A hundred listeners get the same messages, and the
//! api runs as many Postgres statements per finding with a hundred
//! listeners as with one (counted by a proxy in front of Postgres).

use std::time::{Duration, Instant};

use futures::StreamExt;
use scanfleet_tests::fleet::{fleet_with_lab, Fleet};
use scanfleet_tests::lab::{lab_hosts, Lab, DOMAIN};
use scanfleet_tests::pgcount::QueryCounter;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// What one round measured.
struct Round {
    findings: i64,
    statements: u64,
    /// Every listener's messages.
    messages: Vec<Vec<Value>>,
}

/// One scan followed by `listeners` WebSockets from before it starts to its
/// close; the statements the api ran in between.
async fn round(
    fleet: &Fleet,
    counter: &QueryCounter,
    token: &str,
    target: &str,
    listeners: usize,
) -> Round {
    let scan = fleet.scan(token, target, "full").await;
    let mut sockets = Vec::new();
    for _ in 0..listeners {
        let mut ws = fleet.websocket(token, &scan).await;
        let first = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("the snapshot within 10 s")
            .expect("a message")
            .expect("not an error");
        let Message::Text(text) = first else {
            panic!("not the snapshot: {first:?}")
        };
        let snapshot: Value = serde_json::from_str(&text).expect("json");
        sockets.push((ws, vec![snapshot]));
    }
    let before = counter.statements();
    // Every listener is in place before a node takes the scan.
    let mut node = fleet.node(&format!("listeners-{listeners}"), &[]);
    let followed =
        futures::future::join_all(sockets.into_iter().map(|(mut ws, mut got)| async move {
            while let Some(m) = ws.next().await {
                match m {
                    Ok(Message::Text(t)) => got.push(serde_json::from_str(&t).expect("json")),
                    Ok(Message::Close(_)) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            got
        }));
    let messages = tokio::time::timeout(Duration::from_secs(120), followed)
        .await
        .expect("every listener closed within 120 s");
    // The ingester's last commit: read directly, not through the counter.
    let db = fleet.db().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let findings = loop {
        let row = db
            .query_one(
                "SELECT status, findings_count FROM scans WHERE id = $1::text::uuid",
                &[&scan],
            )
            .await
            .expect("scan row");
        let status: String = row.get(0);
        if status == "completed" {
            break i64::from(row.get::<_, i32>(1));
        }
        assert!(Instant::now() < deadline, "scan {scan} is {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let statements = counter.statements() - before;
    assert!(node.terminate(Duration::from_secs(30)), "the node stops");
    Round {
        findings,
        statements,
        messages,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_listeners_get_the_same_messages_and_cost_no_more_statements_per_finding() {
    let counter = QueryCounter::start().await;
    let lab = Lab::start(Duration::from_millis(20)).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let through_counter = counter.url(&fleet.db_name);
    let _api = fleet.api(&[("DATABASE_URL", &through_counter)]).await;
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;

    let one = round(&fleet, &counter, &token, &target, 1).await;
    let hundred = round(&fleet, &counter, &token, &target, 100).await;
    let per_finding = |r: &Round| r.statements as f64 / r.findings.max(1) as f64;
    println!(
        "statements per finding: 1 listener {:.2} ({} over {} findings), 100 listeners {:.2} ({} over {} findings)",
        per_finding(&one),
        one.statements,
        one.findings,
        per_finding(&hundred),
        hundred.statements,
        hundred.findings
    );
    assert_eq!(one.findings, 12);
    assert_eq!(hundred.findings, 12);

    // The same messages to each, findings with their identity.
    for r in [&one, &hundred] {
        let first = &r.messages[0];
        for other in &r.messages {
            assert_eq!(other, first, "listeners got different messages");
        }
        let findings: Vec<&Value> = first.iter().filter(|m| m["type"] == "finding").collect();
        assert_eq!(findings.len() as i64, r.findings, "{first:#?}");
        for f in &findings {
            assert!(f["finding"]["first_seen_at"].is_string(), "{f}");
            assert!(f["finding"]["change"].is_string(), "{f}");
        }
        assert_eq!(first.last().expect("messages")["status"], "completed");
    }
    let changes = |r: &Round, change: &str| {
        r.messages[0]
            .iter()
            .filter(|m| m["type"] == "finding" && m["finding"]["change"] == change)
            .count()
    };
    assert_eq!(changes(&one, "new"), 12);
    assert_eq!(changes(&hundred, "recurring"), 12);

    // A hundred listeners cost Postgres nothing more per finding than one
    // (reading each finding per listener would add a hundred).
    assert!(
        per_finding(&hundred) <= per_finding(&one) * 1.5 + 2.0,
        "1 listener: {:.2} per finding, 100 listeners: {:.2}",
        per_finding(&one),
        per_finding(&hundred)
    );
}
