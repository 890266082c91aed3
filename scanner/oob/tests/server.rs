//! The OOB server against an interactsh client written in the test: the
//! API, HTTP, HTTPS, DNS, SMTP and LDAP callbacks, the token, shared
//! Redis state across instances and restarts, and the DNS zone limits.

// Tests may unwrap: a panic there is the failure report.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::Ipv4Addr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};
use serde_json::Value;
use support::{dns_query, http_callback, settings, spawn, unique_prefix, RawClient, DOMAIN};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Bytes an answer may add to its question (the question is echoed):
/// one SOA, or a couple of address records. A fixed small sum, so a
/// spoofed query gains no amplification worth having.
const MAX_GROWTH: usize = 64;

fn assert_rfc3339(interaction: &Value) {
    let ts = interaction["timestamp"].as_str().unwrap();
    chrono::DateTime::parse_from_rfc3339(ts).expect("timestamp is RFC 3339");
}

#[tokio::test]
async fn an_http_and_a_dns_callback_are_captured_and_a_poll_decrypts_them() {
    let server = spawn(settings(&unique_prefix())).await;
    let client = RawClient::new(&server.base());
    assert_eq!(
        client.register().await,
        (200, "{\"message\":\"registration successful\"}\n".into())
    );

    let http_host = client.host();
    let (status, body) = http_callback(
        server.http,
        &format!("www.{}", http_host.to_uppercase()),
        "/x",
    )
    .await;
    assert_eq!(status, 200);
    let label = &http_host[..33];
    assert_eq!(
        body,
        format!(
            "<html><head></head><body>{}</body></html>",
            label.chars().rev().collect::<String>().to_uppercase()
        )
    );
    let dns_host = client.host();
    let (answer, _, _) = dns_query(server.dns, &format!("{dns_host}."), RecordType::A).await;
    assert_eq!(answer.response_code(), ResponseCode::NoError);

    let polled = client.poll().await;
    assert_eq!(polled.len(), 2, "{polled:?}");
    let http = polled
        .iter()
        .find(|i| i["protocol"] == "http")
        .expect("an http interaction");
    assert_eq!(http["unique-id"], label);
    assert_eq!(http["full-id"], format!("www.{}", label.to_uppercase()));
    assert_eq!(http["remote-address"], "127.0.0.1");
    let raw = http["raw-request"].as_str().unwrap();
    assert!(raw.starts_with("GET /x HTTP/1.1\r\n"), "{raw}");
    assert!(raw.contains("User-Agent: oob-test\r\n"), "{raw}");
    assert!(http["raw-response"]
        .as_str()
        .unwrap()
        .starts_with("HTTP/1.1 200 OK"));
    assert_rfc3339(http);

    let dns = polled
        .iter()
        .find(|i| i["protocol"] == "dns")
        .expect("a dns interaction");
    assert_eq!(dns["unique-id"], &dns_host[..33]);
    assert_eq!(dns["full-id"], &dns_host[..33]);
    assert_eq!(dns["q-type"], "A");
    assert_eq!(dns["remote-address"], "127.0.0.1");
    assert!(dns["raw-request"].as_str().unwrap().contains(&dns_host));
    assert_rfc3339(dns);
    server.stop().await;
}

#[tokio::test]
async fn a_second_poll_is_empty_because_polled_interactions_are_gone() {
    let server = spawn(settings(&unique_prefix())).await;
    let client = RawClient::new(&server.base());
    client.register().await;
    http_callback(server.http, &client.host(), "/").await;
    assert_eq!(client.poll().await.len(), 1);
    assert!(client.poll().await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn a_poll_with_the_wrong_secret_is_refused_and_leaves_the_interactions() {
    let server = spawn(settings(&unique_prefix())).await;
    let client = RawClient::new(&server.base());
    client.register().await;
    http_callback(server.http, &client.host(), "/").await;
    let (status, body) = client.poll_raw("not-the-secret").await;
    assert_eq!(status, 400);
    assert!(body.contains("invalid secret key"), "{body}");
    assert_eq!(client.poll().await.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn polling_an_unknown_id_says_could_not_get_correlation_id_from_cache() {
    let server = spawn(settings(&unique_prefix())).await;
    let client = RawClient::new(&server.base());
    let (status, body) = client.poll_raw(&client.secret).await;
    assert_eq!(status, 400);
    assert!(
        body.contains("could not get correlation-id from cache"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn registering_an_id_twice_is_refused_and_deregistering_forgets_it() {
    let server = spawn(settings(&unique_prefix())).await;
    let client = RawClient::new(&server.base());
    assert_eq!(client.register().await.0, 200);
    let (status, body) = client.register().await;
    assert_eq!(status, 400);
    assert!(body.contains("already exists"), "{body}");
    assert_eq!(client.deregister().await.0, 200);
    let (status, body) = client.poll_raw(&client.secret).await;
    assert_eq!(status, 400);
    assert!(
        body.contains("could not get correlation-id from cache"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_callback_before_registration_is_answered_but_not_stored() {
    let server = spawn(settings(&unique_prefix())).await;
    let client = RawClient::new(&server.base());
    assert_eq!(http_callback(server.http, &client.host(), "/").await.0, 200);
    client.register().await;
    assert!(client.poll().await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn with_a_token_the_api_needs_it_as_the_raw_authorization_header() {
    let mut settings = settings(&unique_prefix());
    settings.token = Some(scanfleet_common::Secret::new("s3cret-token"));
    let server = spawn(settings).await;
    let mut client = RawClient::new(&server.base());
    assert_eq!(client.register().await, (401, String::new()));
    client.token = Some("Bearer s3cret-token".into());
    assert_eq!(client.register().await.0, 401);
    client.token = Some("s3cret-token".into());
    assert_eq!(client.register().await.0, 200);
    http_callback(server.http, &client.host(), "/").await;
    let mut stranger = RawClient::new(&server.base());
    stranger.id = client.id.clone();
    stranger.secret = client.secret.clone();
    assert_eq!(stranger.poll_raw(&client.secret).await.0, 401);
    assert_eq!(
        client.poll().await.len(),
        1,
        "callbacks themselves need no token"
    );
    server.stop().await;
}

#[tokio::test]
async fn two_servers_on_one_redis_serve_one_session() {
    let prefix = unique_prefix();
    let a = spawn(settings(&prefix)).await;
    let b = spawn(settings(&prefix)).await;
    let mut client = RawClient::new(&a.base());
    client.register().await;
    http_callback(b.http, &client.host(), "/").await;
    dns_query(a.dns, &client.host(), RecordType::AAAA).await;
    client.base = b.base();
    let polled = client.poll().await;
    let mut protocols: Vec<_> = polled
        .iter()
        .map(|i| i["protocol"].as_str().unwrap())
        .collect();
    protocols.sort_unstable();
    assert_eq!(protocols, ["dns", "http"]);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_restart_between_callback_and_poll_loses_nothing() {
    let prefix = unique_prefix();
    let first = spawn(settings(&prefix)).await;
    let mut client = RawClient::new(&first.base());
    client.register().await;
    http_callback(first.http, &client.host(), "/").await;
    first.stop().await;
    let second = spawn(settings(&prefix)).await;
    client.base = second.base();
    let polled = client.poll().await;
    assert_eq!(polled.len(), 1);
    assert_eq!(polled[0]["protocol"], "http");
    second.stop().await;
}

#[tokio::test]
async fn dns_answers_a_for_the_zone_and_refuses_names_outside_it() {
    let server = spawn(settings(&unique_prefix())).await;
    for name in [format!("{DOMAIN}."), format!("anything.below.{DOMAIN}.")] {
        let (answer, query_len, answer_len) = dns_query(server.dns, &name, RecordType::A).await;
        assert_eq!(answer.response_code(), ResponseCode::NoError);
        assert!(answer.authoritative() && !answer.recursion_available());
        let ips: Vec<_> = answer.answers().iter().map(|r| r.data().clone()).collect();
        assert_eq!(ips, [RData::A(Ipv4Addr::LOCALHOST.into())]);
        assert!(
            answer_len <= query_len + MAX_GROWTH,
            "{answer_len} bytes answer {query_len}"
        );
    }
    let (ns, _, _) = dns_query(server.dns, &format!("{DOMAIN}."), RecordType::NS).await;
    assert_eq!(ns.answers()[0].record_type(), RecordType::NS);
    for outside in ["example.com.", "oob.test.evil.example.", "xoob.test."] {
        let (answer, _, _) = dns_query(server.dns, outside, RecordType::A).await;
        assert_eq!(answer.response_code(), ResponseCode::Refused, "{outside}");
        assert!(answer.answers().is_empty());
    }
    server.stop().await;
}

#[tokio::test]
async fn dns_over_tcp_answers_like_udp() {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::Name;
    let server = spawn(settings(&unique_prefix())).await;
    let mut query = Message::new();
    query.set_id(7);
    query.add_query(Query::query(
        Name::from_ascii(format!("tcp.{DOMAIN}.")).unwrap(),
        RecordType::A,
    ));
    let bytes = query.to_vec().unwrap();
    let mut stream = TcpStream::connect(server.dns).await.unwrap();
    stream
        .write_all(&(bytes.len() as u16).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(&bytes).await.unwrap();
    let len = stream.read_u16().await.unwrap();
    let mut answer = vec![0u8; usize::from(len)];
    stream.read_exact(&mut answer).await.unwrap();
    let answer = Message::from_vec(&answer).unwrap();
    assert_eq!(answer.id(), 7);
    assert_eq!(
        answer.answers()[0].data(),
        &RData::A(Ipv4Addr::LOCALHOST.into())
    );
    server.stop().await;
}

#[tokio::test]
async fn dns_answers_any_and_txt_minimally() {
    let server = spawn(settings(&unique_prefix())).await;
    let name = format!("x.{DOMAIN}.");
    let (any, query_len, any_len) = dns_query(server.dns, &name, RecordType::ANY).await;
    assert_eq!(any.answers().len(), 1);
    assert!(any_len <= query_len + MAX_GROWTH);
    let (txt, query_len, txt_len) = dns_query(server.dns, &name, RecordType::TXT).await;
    assert_eq!(txt.response_code(), ResponseCode::NoError);
    assert!(txt.answers().is_empty(), "NODATA");
    assert_eq!(txt.name_servers()[0].record_type(), RecordType::SOA);
    assert!(
        txt_len <= query_len + MAX_GROWTH,
        "{txt_len} bytes answer {query_len}"
    );
    server.stop().await;
}

#[tokio::test]
async fn smtp_and_ldap_callbacks_are_recorded() {
    let mut settings = settings(&unique_prefix());
    settings.smtp = Some("127.0.0.1:0".parse().unwrap());
    settings.ldap = Some("127.0.0.1:0".parse().unwrap());
    let server = spawn(settings).await;
    let client = RawClient::new(&server.base());
    client.register().await;

    let rcpt = client.host();
    smtp_conversation(server.smtp.unwrap(), &rcpt).await;
    let base = client.host();
    ldap_bind_and_search(server.ldap.unwrap(), &base).await;

    let polled = client.poll().await;
    let smtp = polled
        .iter()
        .find(|i| i["protocol"] == "smtp")
        .expect("an smtp interaction");
    assert_eq!(smtp["unique-id"], &rcpt[..33]);
    assert_eq!(smtp["smtp-from"], "<a@sender.example>");
    assert!(smtp["raw-request"]
        .as_str()
        .unwrap()
        .contains("Subject: hi"));
    let ldap = polled
        .iter()
        .find(|i| i["protocol"] == "ldap")
        .expect("an ldap interaction");
    assert_eq!(ldap["unique-id"], &base[..33]);
    server.stop().await;
}

#[tokio::test]
async fn https_callbacks_are_recorded_as_https() {
    let dir = std::env::temp_dir().join(format!("oob-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec![format!("*.{DOMAIN}")]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem()).unwrap();
    let mut settings = settings(&unique_prefix());
    settings.https = Some("127.0.0.1:0".parse().unwrap());
    settings.cert = Some(dir.join("cert.pem"));
    settings.key = Some(dir.join("key.pem"));
    let server = spawn(settings).await;
    let client = RawClient::new(&server.base());
    client.register().await;
    let host = client.host();
    let https = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .resolve(&host, server.https.unwrap())
        .build()
        .unwrap();
    let port = server.https.unwrap().port();
    let status = https
        .get(format!("https://{host}:{port}/"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    let polled = client.poll().await;
    assert_eq!(polled.len(), 1);
    assert_eq!(polled[0]["protocol"], "https");
    server.stop().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn an_idle_session_is_evicted_after_the_eviction_time() {
    let mut settings = settings(&unique_prefix());
    settings.eviction_secs = 1;
    let server = spawn(settings).await;
    let client = RawClient::new(&server.base());
    client.register().await;
    // Real time has to pass for a Redis expiry; 1 s is the shortest.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, body) = client.poll_raw(&client.secret).await;
    assert_eq!(status, 400);
    assert!(
        body.contains("could not get correlation-id from cache"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn metrics_count_registrations_interactions_and_dns_queries() {
    let mut settings = settings(&unique_prefix());
    settings.metrics = Some("127.0.0.1:0".parse().unwrap());
    let server = spawn(settings).await;
    let client = RawClient::new(&server.base());
    client.register().await;
    http_callback(server.http, &client.host(), "/").await;
    dns_query(server.dns, "outside.example.", RecordType::A).await;
    client.poll().await;
    let text = reqwest::get(format!("http://{}/metrics", server.metrics.unwrap()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "oob_registrations_total",
        "oob_polls_total",
        "oob_interactions_stored_total{protocol=\"http\"}",
        "oob_dns_queries_total{result=\"refused\"}",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    server.stop().await;
}

#[tokio::test]
async fn the_engine_client_library_works_against_our_server() {
    let server = spawn(settings(&unique_prefix())).await;
    let config = scanfleet_interactsh::SessionConfig {
        server_url: server.base(),
        payload_domain: Some(DOMAIN.into()),
        ..Default::default()
    };
    let session = scanfleet_interactsh::Session::register_with(config)
        .await
        .unwrap();
    let host = session.payload_host();
    dns_query(server.dns, &host, RecordType::TXT).await;
    let polled = session.poll().await.unwrap();
    assert_eq!(polled.len(), 1);
    assert_eq!(
        (polled[0].protocol.as_str(), polled[0].q_type.as_str()),
        ("dns", "TXT")
    );
    assert_eq!(polled[0].unique_id, host[..33]);
    session.deregister().await.unwrap();
    server.stop().await;
}

/// A whole SMTP transaction to `user@<rcpt>`, checking each reply code.
async fn smtp_conversation(addr: std::net::SocketAddr, rcpt: &str) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    assert!(lines
        .next_line()
        .await
        .unwrap()
        .unwrap()
        .starts_with("220 "));
    for (command, reply) in [
        ("EHLO tester".to_string(), "250"),
        ("MAIL FROM:<a@sender.example>".to_string(), "250"),
        (format!("RCPT TO:<user@{rcpt}>"), "250"),
        ("DATA".to_string(), "354"),
        ("Subject: hi\r\n\r\nbody\r\n.".to_string(), "250"),
        ("QUIT".to_string(), "221"),
    ] {
        write
            .write_all(format!("{command}\r\n").as_bytes())
            .await
            .unwrap();
        let line = lines.next_line().await.unwrap().unwrap();
        assert!(line.starts_with(reply), "{command} -> {line}");
    }
}

/// A bind, then a search whose base DN is `base`, as a JNDI lookup sends.
async fn ldap_bind_and_search(addr: std::net::SocketAddr, base: &str) {
    let mut ldap = TcpStream::connect(addr).await.unwrap();
    let bind = [
        0x30, 0x0c, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00,
    ];
    ldap.write_all(&bind).await.unwrap();
    let mut reply = [0u8; 14];
    ldap.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply[5..11], [0x61, 0x07, 0x0a, 0x01, 0x00, 0x04]);
    // searchRequest: base DN = payload label, scope, deref, limits, typesOnly, filter (objectClass=*), no attributes.
    let mut search = vec![0x04, base.len() as u8];
    search.extend_from_slice(base.as_bytes());
    search.extend_from_slice(&[
        0x0a, 0x01, 0x00, 0x0a, 0x01, 0x00, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00, 0x01, 0x01, 0x00,
    ]);
    search.extend_from_slice(&[0x87, 0x0b]);
    search.extend_from_slice(b"objectClass");
    search.extend_from_slice(&[0x30, 0x00]);
    let mut message = vec![0x02, 0x01, 0x02, 0x63, search.len() as u8];
    message.extend_from_slice(&search);
    let mut framed = vec![0x30, message.len() as u8];
    framed.extend_from_slice(&message);
    ldap.write_all(&framed).await.unwrap();
    let mut done = [0u8; 14];
    ldap.read_exact(&mut done).await.unwrap();
    assert_eq!(done[5], 0x65, "searchResultDone");
}

#[tokio::test]
async fn a_poll_takes_at_most_ten_thousand_interactions_and_the_rest_wait() {
    use scanfleet_oob::store::{Store, MAX_PER_POLL};
    let prefix = unique_prefix();
    let settings = settings(&prefix);
    let store = Store::connect(settings.redis_url.expose(), &prefix, 600)
        .await
        .unwrap();
    let server = spawn(settings).await;
    let client = RawClient::new(&server.base());
    client.register().await;
    // Straight into the store, many at once: fred pipelines them.
    let json = serde_json::json!({"protocol": "http", "unique-id": "u", "full-id": "u",
        "remote-address": "127.0.0.1", "timestamp": "2024-05-01T10:00:00Z"});
    let records = (0..=MAX_PER_POLL).map(|_| store.record(&client.id, json.to_string()));
    let stored = futures::future::join_all(records).await;
    assert!(stored.into_iter().all(|r| r.unwrap()));
    assert_eq!(client.poll().await.len() as u64, MAX_PER_POLL);
    assert_eq!(client.poll().await.len(), 1);
    assert!(client.poll().await.is_empty());
    store.quit().await;
    server.stop().await;
}
