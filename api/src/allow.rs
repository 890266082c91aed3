//! The `Allow` header of a 405, as RFC 9110 asks: the methods the contract
//! declares for the path that was requested.

use std::sync::Arc;

use poem::http::{header, HeaderValue, StatusCode};
use poem::{Endpoint, IntoResponse, Request, Response};

/// Path templates of the contract (`/api/v1/scans/{scan_id}`) split into
/// segments, each with its declared methods as an `Allow` value.
#[derive(Debug, Default)]
pub struct AllowTable {
    routes: Vec<(Vec<String>, HeaderValue)>,
}

impl AllowTable {
    /// Reads the `paths` of an OpenAPI document.
    pub fn from_spec(spec: &serde_json::Value) -> AllowTable {
        let mut routes = Vec::new();
        for (path, item) in spec["paths"].as_object().into_iter().flatten() {
            let methods: Vec<String> = item
                .as_object()
                .into_iter()
                .flatten()
                .map(|(method, _)| method.to_ascii_uppercase())
                .collect();
            if let Ok(value) = HeaderValue::from_str(&methods.join(", ")) {
                routes.push((segments(path).map(str::to_string).collect(), value));
            }
        }
        AllowTable { routes }
    }

    /// The `Allow` value for a request path, when the contract has the path.
    pub fn allowed(&self, path: &str) -> Option<&HeaderValue> {
        let wanted: Vec<&str> = segments(path).collect();
        self.routes
            .iter()
            .find(|(template, _)| {
                template.len() == wanted.len()
                    && template.iter().zip(&wanted).all(|(t, w)| {
                        (t.starts_with('{') && t.ends_with('}') && !w.is_empty()) || t == w
                    })
            })
            .map(|(_, value)| value)
    }
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.trim_end_matches('/').split('/').skip(1)
}

/// Middleware: adds `Allow` to every 405 whose path the contract knows.
pub async fn allow_header<E: Endpoint>(
    ep: Arc<E>,
    table: Arc<AllowTable>,
    req: Request,
) -> poem::Result<Response> {
    let path = req.uri().path().to_string();
    let mut resp = ep.call(req).await?.into_response();
    if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
        if let Some(value) = table.allowed(&path) {
            resp.headers_mut().insert(header::ALLOW, value.clone());
        }
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_parameters_gets_the_methods_declared_for_its_template() {
        let spec = serde_json::json!({"paths": {
            "/api/v1/scans": {"get": {}, "post": {}},
            "/api/v1/scans/{scan_id}": {"get": {}},
        }});
        let table = AllowTable::from_spec(&spec);
        assert_eq!(table.allowed("/api/v1/scans").unwrap(), "GET, POST");
        assert_eq!(table.allowed("/api/v1/scans/abc").unwrap(), "GET");
        assert!(table.allowed("/api/v1/scans/abc/stop").is_none());
        assert!(table.allowed("/api/v1/other").is_none());
    }
}
