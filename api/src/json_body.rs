//! [`JsonBody`]: a JSON request body, as poem-openapi's `Json` reads it
//! (same media types, schema and parsing), except that a body of the wrong
//! shape is refused with the property at fault ([`BodyShapeError`], a 400
//! whose `errors[].field` names it) instead of the framework's type names.

use std::ops::{Deref, DerefMut};

use poem::error::ResponseError;
use poem::http::StatusCode;
use poem::{FromRequest, Request, RequestBody};
use poem_openapi::error::ParseRequestPayloadError;
use poem_openapi::impl_apirequest_for_payload;
use poem_openapi::payload::{Json, ParsePayload, Payload};
use poem_openapi::registry::{MetaSchemaRef, Registry};
use poem_openapi::types::{ParseFromJSON, Type};
use serde_json::Value;

use crate::parse_errors::{self, BodyFault};

/// A JSON request body of type `T`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JsonBody<T>(pub T);

impl<T> Deref for JsonBody<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for JsonBody<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// A JSON body that does not fit the operation's schema: the property at
/// fault (none when the whole body is wrong) and what it must be.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe(&self.0))]
pub struct BodyShapeError(pub BodyFault);

fn describe(fault: &BodyFault) -> String {
    match &fault.field {
        Some(field) => format!("`{field}` {}", fault.message),
        None => format!("the body {}", fault.message),
    }
}

impl ResponseError for BodyShapeError {
    fn status(&self) -> StatusCode {
        StatusCode::BAD_REQUEST
    }
}

impl<T: Type> Payload for JsonBody<T> {
    const CONTENT_TYPE: &'static str = Json::<T>::CONTENT_TYPE;

    fn check_content_type(content_type: &str) -> bool {
        Json::<T>::check_content_type(content_type)
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

fn parse_json(data: &[u8]) -> Result<Value, ParseRequestPayloadError> {
    if data.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(data).map_err(|err| ParseRequestPayloadError {
        reason: err.to_string(),
    })
}

impl<T: ParseFromJSON + Type> ParsePayload for JsonBody<T> {
    const IS_REQUIRED: bool = T::IS_REQUIRED;

    async fn from_request(request: &Request, body: &mut RequestBody) -> poem::Result<Self> {
        let data = Vec::<u8>::from_request(request, body).await?;
        match T::parse_from_json(Some(parse_json(&data)?)) {
            Ok(value) => Ok(JsonBody(value)),
            // Parsing consumed the value; reading it again costs nothing on
            // the way that succeeds.
            Err(_) => {
                let value = parse_json(&data)?;
                let schema = serde_json::to_value(T::schema_ref()).unwrap_or_default();
                Err(BodyShapeError(parse_errors::body_fault(&schema, &value)).into())
            }
        }
    }
}

impl_apirequest_for_payload!(JsonBody<T>, T: ParseFromJSON + Type);

/// An optional JSON body of type `T` (the contract says `required:
/// false`): a request with no body and no `Content-Type` has none; one
/// with a body is read as [`JsonBody`] reads it. For operations that take
/// the same values as query parameters too (`PUT /auth/me`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OptionalJsonBody<T>(pub Option<T>);

impl<'a, T: ParseFromJSON + Type> poem_openapi::ApiExtractor<'a> for OptionalJsonBody<T> {
    const TYPES: &'static [poem_openapi::ApiExtractorType] =
        &[poem_openapi::ApiExtractorType::RequestObject];

    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn request_meta() -> Option<poem_openapi::registry::MetaRequest> {
        Some(poem_openapi::registry::MetaRequest {
            description: None,
            content: vec![poem_openapi::registry::MetaMediaType {
                content_type: Json::<T>::CONTENT_TYPE,
                schema: T::schema_ref(),
            }],
            required: false,
        })
    }

    async fn from_request(
        request: &'a Request,
        body: &mut RequestBody,
        _param_opts: poem_openapi::ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        match request.content_type() {
            Some(content_type) if Json::<T>::check_content_type(content_type) => {
                let JsonBody(value) =
                    <JsonBody<T> as ParsePayload>::from_request(request, body).await?;
                Ok(OptionalJsonBody(Some(value)))
            }
            Some(content_type) => Err(poem_openapi::error::ContentTypeError::NotSupported {
                content_type: content_type.to_string(),
            }
            .into()),
            None => {
                let data = <Vec<u8> as FromRequest>::from_request(request, body).await?;
                if data.iter().all(u8::is_ascii_whitespace) {
                    Ok(OptionalJsonBody(None))
                } else {
                    Err(poem_openapi::error::ContentTypeError::ExpectContentType.into())
                }
            }
        }
    }
}
