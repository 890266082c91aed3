use std::time::{Duration, Instant};

use serde_json::{json, Map, Value as Json};
use tokio::sync::mpsc;

use super::*;

/// What the fake engine was asked, in order.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Http(Vec<String>),
    Set(String, Json),
    Log(String),
}

fn object(v: Json) -> Map<String, Json> {
    match v {
        Json::Object(m) => m,
        _ => panic!("not an object"),
    }
}

/// Runs `source` on its own thread against a fake engine that answers
/// every `http(...)` with `answer(selectors)`.
fn drive(
    source: &str,
    template: Json,
    budget: Budget,
    mut answer: impl FnMut(&[String]) -> HttpReply,
) -> (Result<(), FlowError>, Vec<Seen>) {
    let (tx, mut rx) = mpsc::channel(4);
    let source = source.to_string();
    let template = object(template);
    let script = std::thread::spawn(move || run(&source, template, tx, budget));
    let mut seen = Vec::new();
    while let Some(call) = rx.blocking_recv() {
        match call {
            HostCall::Http { selectors, reply } => {
                let _ = reply.send(answer(&selectors));
                seen.push(Seen::Http(selectors));
            }
            HostCall::Set { name, value } => seen.push(Seen::Set(name, value)),
            HostCall::Log(text) => seen.push(Seen::Log(text)),
        }
    }
    (script.join().expect("script thread"), seen)
}

fn reply(matched: bool, template: Json) -> HttpReply {
    HttpReply {
        matched,
        template: object(template),
    }
}

fn logs(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Log(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn http_answers_whether_the_block_matched_and_refreshes_template() {
    let source = r#"
        if (http(1)) {
            set("name", template.typename[0]);
            http(2);
        }
        if (!http(3)) { log("third did not match"); }
    "#;
    let (outcome, seen) = drive(source, json!({}), Budget::default(), |sel| {
        if sel == ["1"] {
            reply(true, json!({"typename": ["Widget", "Other"]}))
        } else {
            reply(false, json!({}))
        }
    });
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        seen,
        vec![
            Seen::Http(vec!["1".into()]),
            Seen::Set("name".into(), json!("Widget")),
            Seen::Http(vec!["2".into()]),
            Seen::Http(vec!["3".into()]),
            Seen::Log("third did not match".into()),
        ]
    );
}

#[test]
fn selectors_are_numbers_or_ids_and_none_means_every_block() {
    let source = r#"http("login", 2); http(); http(1.5)"#;
    let (outcome, seen) = drive(source, json!({}), Budget::default(), |_| {
        reply(false, json!({}))
    });
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        seen,
        vec![
            Seen::Http(vec!["login".into(), "2".into()]),
            Seen::Http(vec![]),
            Seen::Http(vec!["1.5".into()]),
        ]
    );
}

#[test]
fn the_initial_template_holds_the_variables_and_set_shows_after_the_next_step() {
    let source = r#"
        log(template.user);
        log(String(template.hasOwnProperty("password")));
        set("a", 7);
        log(String(template.a));
        http(1);
        log(String(template.a));
    "#;
    let (outcome, seen) = drive(source, json!({"user": "admin"}), Budget::default(), |_| {
        reply(false, json!({"user": "admin", "a": 7}))
    });
    assert_eq!(outcome, Ok(()));
    assert_eq!(logs(&seen), vec!["admin", "false", "undefined", "7"]);
    assert!(seen.contains(&Seen::Set("a".into(), json!(7))));
}

#[test]
fn iterate_flattens_arrays_and_skips_null_and_undefined() {
    let source = r#"
        for (let v of iterate(template.list, null, undefined, "z", template.missing)) {
            set("v", v);
        }
        log(String(iterate().length));
    "#;
    let (outcome, seen) = drive(
        source,
        json!({"list": ["a", "b"]}),
        Budget::default(),
        |_| reply(false, json!({})),
    );
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        seen,
        vec![
            Seen::Set("v".into(), json!("a")),
            Seen::Set("v".into(), json!("b")),
            Seen::Set("v".into(), json!("z")),
            Seen::Log("0".into()),
        ]
    );
}

#[test]
fn dedupe_keeps_the_first_of_equal_values() {
    let source = r#"
        let d = new Dedupe();
        d.Add(["a", "b"], "a");
        d.Add("c", ["b"]);
        log(d.Values());
    "#;
    let (outcome, seen) = drive(source, json!({}), Budget::default(), |_| {
        reply(false, json!({}))
    });
    assert_eq!(outcome, Ok(()));
    assert_eq!(logs(&seen), vec![r#"["a","b","c"]"#]);
}

#[test]
fn an_endless_loop_hits_the_step_budget_and_cannot_be_caught() {
    let source = r#"
        try { while (true) {} } catch (e) { log("caught"); }
        http(1);
    "#;
    let (outcome, seen) = drive(source, json!({}), Budget::default(), |_| {
        reply(true, json!({}))
    });
    assert!(
        matches!(outcome, Err(FlowError::StepBudget(_))),
        "{outcome:?}"
    );
    assert!(seen.is_empty(), "{seen:?}");
}

#[test]
fn unbounded_recursion_hits_the_step_budget() {
    let (outcome, _) = drive(
        "function f(n) { return f(n + 1); } f(0);",
        json!({}),
        Budget::default(),
        |_| reply(true, json!({})),
    );
    assert!(
        matches!(outcome, Err(FlowError::StepBudget(_))),
        "{outcome:?}"
    );
}

#[test]
fn a_script_that_runs_past_its_wall_time_is_abandoned() {
    let budget = Budget {
        wall: Duration::from_millis(200),
        loop_iterations: u64::MAX,
        ..Budget::default()
    };
    let started = Instant::now();
    let (outcome, seen) = drive("while (true) {} http(1);", json!({}), budget, |_| {
        reply(true, json!({}))
    });
    assert_eq!(outcome, Err(FlowError::TimedOut(budget.wall)));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(seen.is_empty());
}

#[test]
fn the_engine_going_away_stops_the_script() {
    let (tx, rx) = mpsc::channel(1);
    drop(rx);
    let outcome = run(
        "try { http(1) } catch (e) {} log('after')",
        Map::new(),
        tx,
        Budget::default(),
    );
    assert_eq!(outcome, Err(FlowError::Stopped));
}

#[test]
fn exceptions_are_reported_as_script_failures() {
    let (outcome, _) = drive(
        "let x = template.nothing.length;",
        json!({}),
        Budget::default(),
        |_| reply(true, json!({})),
    );
    assert!(
        matches!(&outcome, Err(FlowError::Script(m)) if m.contains("TypeError")),
        "{outcome:?}"
    );
}

#[test]
fn the_sandbox_has_no_file_network_process_or_timer_access() {
    let source = r#"
        for (const name of ["require", "process", "fetch", "XMLHttpRequest",
                            "Deno", "setTimeout", "setInterval", "console", "load", "readFile"]) {
            log(name + ":" + typeof globalThis[name]);
        }
    "#;
    let (outcome, seen) = drive(source, json!({}), Budget::default(), |_| {
        reply(false, json!({}))
    });
    assert_eq!(outcome, Ok(()));
    let logs = logs(&seen);
    assert_eq!(logs.len(), 10);
    for line in logs {
        assert!(line.ends_with(":undefined"), "{line}");
    }
}

#[test]
fn syntax_errors_are_found_without_running() {
    assert_eq!(check_syntax("http(1); if (template.a) { http(2) }"), Ok(()));
    assert!(matches!(
        check_syntax("http(1) &&& {"),
        Err(FlowError::Syntax(_))
    ));
}
