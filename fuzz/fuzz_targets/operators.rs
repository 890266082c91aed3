//! Matchers and extractors on an arbitrary response.
//!
//! The input is YAML operators, a NUL byte, then the response body: the
//! operators are compiled and evaluated against a response context built
//! from that body.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use scanfleet_engine::dsl::Value;
use scanfleet_engine::operators::{ExtractorDef, MatcherDef, Operators};
use serde::Deserialize;

#[derive(Deserialize)]
struct Defs {
    #[serde(default)]
    matchers: Vec<MatcherDef>,
    #[serde(default)]
    extractors: Vec<ExtractorDef>,
    #[serde(default, rename = "matchers-condition")]
    condition: Option<String>,
}

fn response(body: &[u8]) -> HashMap<String, Value> {
    let headers = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nServer: fuzz\r\n\r\n";
    let mut all = headers.as_bytes().to_vec();
    all.extend_from_slice(body);
    HashMap::from([
        ("status_code".to_string(), Value::Int(200)),
        ("body".to_string(), Value::str(body)),
        ("content_length".to_string(), Value::Int(body.len() as i64)),
        ("content_type".to_string(), Value::str("text/html")),
        ("server".to_string(), Value::str("fuzz")),
        ("all_headers".to_string(), Value::str(headers)),
        ("header".to_string(), Value::str(headers)),
        ("response".to_string(), Value::str(&all)),
    ])
}

fuzz_target!(|data: &[u8]| {
    let (defs, body) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    let Ok(defs) = std::str::from_utf8(defs) else {
        return;
    };
    let Ok(defs) = serde_saphyr::from_str::<Defs>(defs) else {
        return;
    };
    let Ok(operators) =
        Operators::compile(&defs.matchers, &defs.extractors, defs.condition.as_deref())
    else {
        return;
    };
    let result = operators.evaluate(&response(body));
    let _ = result.extracted_results();
});
