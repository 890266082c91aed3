//! A scan's progress events as a node writes them (`EventSink`), on the
//! machine's Redis under a prefix of the test's own: progress within a
//! stage is written at most every `PROGRESS_EVERY`, a value that comes
//! sooner goes out with the next write or once it is due, and a new stage
//! goes out with the next write, at most `STEP_HOLD` after it began.

use std::time::Duration;

use scanfleet_bus::events;
use scanfleet_common::events::{CoverageEvent, FindingEvent, ScanEventKind, ScanStatus, Stage};
use scanfleet_common::Severity;
use scanfleet_scanner::node::sink::{EventSink, PROGRESS_EVERY, STEP_HOLD};
use scanfleet_tests::fleet::Fleet;
use uuid::Uuid;

/// A scan's sink on a fleet's Redis (the fleet kept for its lifetime).
struct Scan {
    _fleet: Fleet,
    redis: fred::clients::Client,
    keys: scanfleet_common::keys::Keys,
    scan: Uuid,
    sink: EventSink,
}

impl Scan {
    async fn new() -> Scan {
        let fleet = Fleet::new(&[]).await;
        let redis = fleet.redis().await;
        let keys = fleet.keys();
        let scan = Uuid::now_v7();
        let sink = EventSink::new(redis.clone(), &keys, scan, 0);
        Scan {
            _fleet: fleet,
            redis,
            keys,
            scan,
            sink,
        }
    }

    /// The scan's stream as `(entry ms, kind, stage, progress)`.
    async fn written(&self) -> Vec<(u64, String, Option<Stage>, Option<u8>)> {
        events::range(
            &self.redis,
            &self.keys.scan_events_stream(self.scan),
            "-",
            "+",
            1000,
        )
        .await
        .expect("XRANGE")
        .iter()
        .map(|(id, fields)| {
            let ms = id.split('-').next().unwrap().parse().unwrap();
            let event = events::decode(fields).expect("a scan event");
            match event.kind {
                ScanEventKind::Progress {
                    stage, progress, ..
                } => (ms, "progress".into(), Some(stage), Some(progress)),
                ScanEventKind::Finding(_) => (ms, "finding".into(), None, None),
                ScanEventKind::Status { status, .. } => (ms, status.as_str().into(), None, None),
                other => (ms, format!("{other:?}"), None, None),
            }
        })
        .collect()
    }
}

fn finding() -> FindingEvent {
    FindingEvent {
        template_id: "git-config".into(),
        name: "Git config exposed".into(),
        severity: Severity::Medium,
        host: "a.test".into(),
        matched_at: "http://a.test/.git/config".into(),
        description: String::new(),
        remediation: String::new(),
        extracted_results: vec![],
        matcher_name: None,
        classification: Default::default(),
        evidence: None,
    }
}

/// Entries of the ingest index written so far (one per write).
async fn writes(s: &Scan) -> usize {
    events::range(&s.redis, &s.keys.scan_events_index(), "-", "+", 1000)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_new_stage_waits_for_the_next_write_at_most_the_step_hold() {
    let s = Scan::new().await;
    let sink = &s.sink;

    // The start: both statuses in one write.
    sink.started().await.unwrap();
    assert_eq!(writes(&s).await, 1);

    // A stage that ends within the hold, the next one's start and its
    // first finding: one write, every stage in order, each with its last
    // value. A held new stage's later values do not make it due.
    sink.progress(Stage::Resolve, 0, "dns").await.unwrap();
    sink.progress(Stage::Resolve, 5, "dns").await.unwrap();
    sink.progress(Stage::Probe, 10, "http-probe").await.unwrap();
    assert_eq!(s.written().await.len(), 2, "nothing written yet");
    sink.progress_with(Stage::Probe, 20, "http-probe", vec![finding()])
        .await
        .unwrap();
    let kinds: Vec<(String, Option<Stage>, Option<u8>)> = s
        .written()
        .await
        .into_iter()
        .map(|e| (e.1, e.2, e.3))
        .collect();
    assert_eq!(
        kinds,
        [
            ("pending".to_string(), None, None),
            ("running".to_string(), None, None),
            ("progress".to_string(), Some(Stage::Resolve), Some(5)),
            ("progress".to_string(), Some(Stage::Probe), Some(20)),
            ("finding".to_string(), None, None),
        ]
    );
    assert_eq!(writes(&s).await, 2);

    // A new stage with nothing after it: written once the hold is over,
    // while the stage waits.
    sink.progress(Stage::Validate, 30, "templates")
        .await
        .unwrap();
    sink.meanwhile(tokio::time::sleep(STEP_HOLD / 2))
        .await
        .unwrap();
    assert_eq!(writes(&s).await, 2, "held for the step hold");
    sink.meanwhile(tokio::time::sleep(STEP_HOLD)).await.unwrap();
    let written = s.written().await;
    assert_eq!(writes(&s).await, 3);
    assert_eq!(
        (written[5].1.as_str(), written[5].2, written[5].3),
        ("progress", Some(Stage::Validate), Some(30))
    );
    // Not before the hold was over: the stage began just after the
    // finding's write.
    assert!(written[5].0 >= written[4].0 + STEP_HOLD.as_millis() as u64 - 5);
}

#[tokio::test]
async fn progress_within_a_stage_is_written_at_most_every_interval_and_never_lost() {
    let s = Scan::new().await;
    let sink = &s.sink;

    // A stage's start goes with the next write; the values that follow
    // within the interval are held.
    sink.progress(Stage::Validate, 10, "templates")
        .await
        .unwrap();
    sink.flush().await.unwrap();
    for value in [20, 30, 40, 50, 60] {
        sink.progress(Stage::Validate, value, "templates")
            .await
            .unwrap();
    }
    let written = s.written().await;
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].3, Some(10));

    // Findings go at once, with the progress held so far, in one write.
    sink.progress_with(Stage::Validate, 70, "templates", vec![finding()])
        .await
        .unwrap();
    let written = s.written().await;
    let kinds: Vec<(&str, Option<u8>)> = written.iter().map(|e| (e.1.as_str(), e.3)).collect();
    assert_eq!(
        kinds,
        [
            ("progress", Some(10)),
            ("progress", Some(70)),
            ("finding", None)
        ]
    );
    // One index entry per write: two writes so far.
    let index = events::range(&s.redis, &s.keys.scan_events_index(), "-", "+", 1000)
        .await
        .unwrap();
    assert_eq!(events::scans_named(&index), [s.scan]);
    assert_eq!(index.len(), 2);

    // A value held while the stage waits is written once it is due.
    sink.progress(Stage::Validate, 80, "templates")
        .await
        .unwrap();
    assert_eq!(s.written().await.len(), 3);
    sink.meanwhile(tokio::time::sleep(
        PROGRESS_EVERY + Duration::from_millis(300),
    ))
    .await
    .unwrap();
    let written = s.written().await;
    assert_eq!(written.len(), 4, "{written:?}");
    assert_eq!(
        (written[3].1.as_str(), written[3].3),
        ("progress", Some(80))
    );
    // Not before it was due: the last write was the findings' one.
    assert!(written[3].0 >= written[2].0 + PROGRESS_EVERY.as_millis() as u64 - 5);

    // Progress never goes back; the last stage goes out with the status
    // that ends the scan, before it.
    sink.progress(Stage::Validate, 50, "templates")
        .await
        .unwrap();
    sink.progress(Stage::Report, 99, "report").await.unwrap();
    assert_eq!(s.written().await.len(), 4);
    sink.status(ScanStatus::Completed, None).await.unwrap();
    let written = s.written().await;
    let kinds: Vec<(&str, Option<Stage>, Option<u8>)> = written[4..]
        .iter()
        .map(|e| (e.1.as_str(), e.2, e.3))
        .collect();
    assert_eq!(
        kinds,
        [
            ("progress", Some(Stage::Report), Some(99)),
            ("completed", None, None)
        ]
    );
}

#[tokio::test]
async fn a_held_value_goes_out_with_the_next_status() {
    let s = Scan::new().await;
    let sink = &s.sink;
    sink.progress(Stage::Probe, 5, "http-probe").await.unwrap();
    sink.flush().await.unwrap();
    sink.progress(Stage::Probe, 15, "http-probe").await.unwrap();
    sink.status(ScanStatus::Failed, Some("stopped short".into()))
        .await
        .unwrap();
    let kinds: Vec<(String, Option<u8>)> =
        s.written().await.into_iter().map(|e| (e.1, e.3)).collect();
    assert_eq!(
        kinds,
        [
            ("progress".to_string(), Some(5)),
            ("progress".to_string(), Some(15)),
            ("failed".to_string(), None)
        ]
    );
}

#[tokio::test]
async fn every_hosts_coverage_goes_out_with_the_end_of_the_scan_in_one_write() {
    let s = Scan::new().await;
    let sink = &s.sink;
    sink.progress(Stage::Validate, 40, "templates")
        .await
        .unwrap();
    sink.flush().await.unwrap();
    let coverage = |host: &str| CoverageEvent {
        host: host.into(),
        technologies: vec![],
        total: 10,
        run: 8,
        skipped: Default::default(),
        requests: 12,
    };
    sink.coverage(coverage("a.test"));
    sink.coverage(coverage("b.test"));
    // A later value of the same stage does not take a coverage's place.
    sink.progress(Stage::Validate, 90, "templates")
        .await
        .unwrap();
    sink.progress(Stage::Report, 99, "report").await.unwrap();
    assert_eq!(writes(&s).await, 1, "held until the end");
    sink.status(ScanStatus::Completed, None).await.unwrap();
    assert_eq!(writes(&s).await, 2);
    let kinds: Vec<(String, Option<Stage>, Option<u8>)> = s
        .written()
        .await
        .into_iter()
        .skip(1)
        .map(|e| (e.1, e.2, e.3))
        .collect();
    let coverage_kind = |host: &str| format!("{:?}", ScanEventKind::Coverage(coverage(host)));
    assert_eq!(
        kinds,
        [
            (coverage_kind("a.test"), None, None),
            (coverage_kind("b.test"), None, None),
            ("progress".to_string(), Some(Stage::Validate), Some(90)),
            ("progress".to_string(), Some(Stage::Report), Some(99)),
            ("completed".to_string(), None, None),
        ]
    );
}
