//! DSL expression text -> parser -> evaluator, and the same text as a
//! `{{...}}` template string rendered against the same scope.
#![no_main]

use std::collections::HashMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use scanfleet_engine::dsl::{Expr, TemplateString, Value};

/// A response-shaped scope, as matchers see one.
fn scope() -> &'static HashMap<String, Value> {
    static SCOPE: OnceLock<HashMap<String, Value>> = OnceLock::new();
    SCOPE.get_or_init(|| {
        let headers = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: a=b\r\n\r\n";
        let body = "<html><title>Admin</title>{\"version\":\"1.2.3\"}</html>";
        HashMap::from([
            ("body".to_string(), Value::str(body)),
            ("body_1".to_string(), Value::str(body)),
            ("header".to_string(), Value::str(headers)),
            ("all_headers".to_string(), Value::str(headers)),
            ("content_type".to_string(), Value::str("text/html")),
            ("status_code".to_string(), Value::Int(200)),
            ("status_code_1".to_string(), Value::Int(200)),
            ("content_length".to_string(), Value::Int(body.len() as i64)),
            ("duration".to_string(), Value::Float(0.25)),
            ("host".to_string(), Value::str("example.com")),
            ("BaseURL".to_string(), Value::str("http://example.com/app")),
            ("version".to_string(), Value::str("5.4.1")),
            ("ok".to_string(), Value::Bool(true)),
        ])
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(expr) = Expr::parse(text) {
        let _ = expr.problems();
        let _ = expr.variables();
        let _ = expr.functions();
        let _ = expr.eval(scope());
        let _ = expr.eval_bool(scope());
    }
    let _ = Expr::parse_strict(text);
    if let Ok(string) = TemplateString::parse(text) {
        let _ = string.render(scope());
    }
});
