//! The variables one HTTP response offers to matchers, extractors and later
//! requests, named as Nuclei names them.

use std::sync::Arc;

use super::vars::{float_value, int_value, string_value, VarMap};
use crate::dsl::{Bytes, Value};
use crate::http::Response;

/// Builds the response's variable map: `status_code`, `body`, `header` and
/// `all_headers` (status line plus headers), `response` (header plus body),
/// `content_length`, `duration` (seconds), `host`, `matched`, `request`,
/// every header as a lower_snake name (repeated headers joined by a space)
/// and every cookie set by the response under its lower-cased name.
///
/// Done for every response, so the values share buffers: `header`,
/// `all_headers` and `body` are views of the one `response` buffer, and
/// `host`, `request` and `template-id` are the caller's shared values.
pub fn response_vars(resp: &Response, request_dump: &Bytes, names: &RunNames) -> VarMap {
    let mut vars = VarMap::with_capacity_and_hasher(16 + resp.headers.len(), Default::default());
    // Cookies first: a header of the same snake name wins, as in Nuclei.
    for (name, value) in resp.headers.iter() {
        if name.eq_ignore_ascii_case("set-cookie") {
            if let Some((cname, cvalue)) = cookie_pair(value) {
                vars.insert(cname.to_ascii_lowercase(), string_value(cvalue.to_string()));
            }
        }
    }
    let mut joined: Vec<(String, String)> = Vec::with_capacity(resp.headers.len());
    for (name, value) in resp.headers.iter() {
        let key = name.trim().replace('-', "_").to_ascii_lowercase();
        match joined.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => {
                v.push(' ');
                v.push_str(value);
            }
            None => joined.push((key, value.to_string())),
        }
    }
    for (k, v) in joined {
        vars.insert(k, string_value(v));
    }
    let header = resp.raw_header();
    let mut full = Vec::with_capacity(header.len() + resp.body.len());
    full.extend_from_slice(header.as_bytes());
    full.extend_from_slice(&resp.body);
    let full = Bytes::from(full);
    let body = Value::Str(full.slice(header.len()..));
    let header = Value::Str(full.slice(..header.len()));
    let content_length = resp
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<i64>().ok())
        .unwrap_or(resp.body.len() as i64);
    vars.insert("host".into(), names.host.clone());
    vars.insert("matched".into(), string_value(resp.final_url.clone()));
    vars.insert("request".into(), Value::Str(request_dump.clone()));
    vars.insert("response".into(), Value::Str(full));
    vars.insert("status_code".into(), int_value(i64::from(resp.status)));
    vars.insert("body".into(), body);
    vars.insert("all_headers".into(), header.clone());
    vars.insert("header".into(), header);
    vars.insert("duration".into(), float_value(resp.duration.as_secs_f64()));
    vars.insert("content_length".into(), int_value(content_length));
    vars.insert("template-id".into(), names.template_id.clone());
    vars.insert("type".into(), Value::Str(Bytes::from_static(b"http")));
    vars
}

/// The `host` and `template-id` values of every response of one template
/// execution, made once.
#[derive(Clone)]
pub struct RunNames {
    pub host: Value,
    pub template_id: Value,
}

impl RunNames {
    pub fn new(host: &str, template_id: &str) -> RunNames {
        RunNames {
            host: Value::from(host),
            template_id: Value::from(template_id),
        }
    }
}

/// `name=value` of a Set-Cookie header.
fn cookie_pair(header: &str) -> Option<(&str, &str)> {
    let first = header.split(';').next()?;
    let (name, value) = first.split_once('=')?;
    let name = name.trim();
    (!name.is_empty()).then_some((name, value.trim()))
}

/// The `_N` history copy of a response's variables (`body_1`, `status_code_2`).
pub fn numbered(vars: &VarMap, n: usize) -> VarMap {
    vars.iter()
        .map(|(k, v)| (format!("{k}_{n}"), v.clone()))
        .collect()
}

/// The block-id copy of a response's variables (`login_body`).
pub fn prefixed(vars: &VarMap, id: &str) -> VarMap {
    vars.iter()
        .map(|(k, v)| (format!("{id}_{k}"), v.clone()))
        .collect()
}

/// Shares a map as a scope layer.
pub fn shared(vars: VarMap) -> Arc<VarMap> {
    Arc::new(vars)
}
