//! A JSON response body written straight from the value with serde.
//!
//! poem-openapi's `Json<T>` builds a `serde_json::Value` tree of the whole
//! answer (one allocation per string, key and object) and then serialises
//! that tree; on the read hot path (a scan with its findings in two shapes,
//! the scan list) that is most of a request's CPU. [`Direct`] has the same
//! contract (content type, schema, response metadata, so `openapi.json` does
//! not change) and writes the bytes in one pass. A type used with it derives
//! both `poem_openapi::Object` and `serde::Serialize`; [`same_json`] checks
//! in tests that both give the same document.

use std::marker::PhantomData;

use bytes::Bytes;
use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::payload::Payload;
use poem_openapi::registry::{MetaMediaType, MetaResponse, MetaResponses, MetaSchemaRef, Registry};
use poem_openapi::types::Type;
use poem_openapi::ApiResponse;
use serde::Serialize;

/// The content type poem-openapi's `Json` answers with.
const CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// A 200 JSON body serialised directly; see the module docs.
#[derive(Debug)]
pub struct Direct<T>(pub T);

impl<T: Type> Payload for Direct<T> {
    const CONTENT_TYPE: &'static str = CONTENT_TYPE;

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

impl<T: Serialize + Send> IntoResponse for Direct<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(body) => Response::builder().content_type(CONTENT_TYPE).body(body),
            // Only a map with non-string keys or a failing Serialize impl can
            // get here; neither is among the types this is used with.
            Err(e) => {
                tracing::error!(error = %e, "serialising a response body");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
}

/// What poem-openapi's `Json<T>` declares for a 200 answer.
fn ok_meta<T: Type>() -> MetaResponses {
    MetaResponses {
        responses: vec![MetaResponse {
            description: "",
            status: Some(200),
            status_range: None,
            content: vec![MetaMediaType {
                content_type: CONTENT_TYPE,
                schema: T::schema_ref(),
            }],
            headers: vec![],
        }],
    }
}

impl<T: Type + Serialize + Send> ApiResponse for Direct<T> {
    fn meta() -> MetaResponses {
        ok_meta::<T>()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

/// A 200 JSON body of a `T` already serialised (kept from an earlier
/// request, see [`crate::detail_cache`]); the contract is `T`'s.
pub struct Serialized<T> {
    body: Bytes,
    of: PhantomData<fn() -> T>,
}

impl<T: Serialize> Serialized<T> {
    pub fn new(value: &T) -> Result<Self, serde_json::Error> {
        Ok(Self::from_bytes(serde_json::to_vec(value)?.into()))
    }
}

impl<T> Serialized<T> {
    pub fn from_bytes(body: Bytes) -> Self {
        Serialized {
            body,
            of: PhantomData,
        }
    }

    pub fn bytes(&self) -> Bytes {
        self.body.clone()
    }
}

impl<T: Send> IntoResponse for Serialized<T> {
    fn into_response(self) -> Response {
        Response::builder()
            .content_type(CONTENT_TYPE)
            .body(self.body)
    }
}

impl<T: Type + Send> ApiResponse for Serialized<T> {
    fn meta() -> MetaResponses {
        ok_meta::<T>()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

/// Serialises a time as poem-openapi does (`to_rfc3339`: `+00:00`, not `Z`),
/// so both paths give the same text.
pub fn rfc3339<S: serde::Serializer>(
    t: &chrono::DateTime<chrono::Utc>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(&t.to_rfc3339())
}

/// [`rfc3339`] for an optional time (skip the field when `None`).
pub fn rfc3339_opt<S: serde::Serializer>(
    t: &Option<chrono::DateTime<chrono::Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339(t, s),
        None => s.serialize_none(),
    }
}

/// Whether serde and poem-openapi give `value` the same JSON document (key
/// order aside); for tests of types used with [`Direct`].
#[cfg(test)]
pub fn same_json<T: Serialize + poem_openapi::types::ToJSON>(value: &T) -> Result<(), String> {
    let direct = serde_json::to_value(value).map_err(|e| e.to_string())?;
    let contract = value.to_json().unwrap_or(serde_json::Value::Null);
    if direct == contract {
        Ok(())
    } else {
        Err(format!("serde: {direct}\npoem-openapi: {contract}"))
    }
}
