//! Parse errors in the client's terms: which parameter or body property was
//! wrong, and what the contract says it should be (`scan_id` must be a
//! UUID), never the framework's names for its types (`string_uuid`,
//! `optional_integer_int64`) or for path parameters (`param0`).
//!
//! poem-openapi tells us too little to say that: a path parameter's error
//! carries its position, a query parameter's error a message built from
//! type names, and a body's error no field at all. So the answer is read
//! from the contract itself (the document the service serves, built once):
//! the operation of the request gives the parameter's name and schema, and
//! a body that did not parse is walked against its schema to find the first
//! property that does not fit.

use std::sync::OnceLock;

use chrono::DateTime;
use poem::http::Method;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::problem::FieldError;

/// The served contract, given once by the app that serves it
/// ([`know_contract`]); until then parse errors name no field.
static CONTRACT: OnceLock<Value> = OnceLock::new();

/// Gives the contract the service serves (its JSON text); the first call
/// wins, as every api process serves one contract.
pub fn know_contract(served: &str) {
    CONTRACT.get_or_init(|| serde_json::from_str(served).unwrap_or_default());
}

fn contract() -> &'static Value {
    static NONE: Value = Value::Null;
    CONTRACT.get().unwrap_or(&NONE)
}

/// The component a `$ref` names, or the schema itself; an `allOf` of one
/// reference (an optional property) is that reference.
fn resolve(schema: &Value) -> &Value {
    let reference = schema["$ref"]
        .as_str()
        .or_else(|| schema["allOf"][0]["$ref"].as_str());
    match reference.and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => &contract()["components"]["schemas"][name],
        None => schema,
    }
}

fn integer_expectation(schema: &Value) -> String {
    match (schema["minimum"].as_f64(), schema["maximum"].as_f64()) {
        (Some(min), Some(max)) => format!("must be an integer from {min} to {max}"),
        (Some(min), None) => format!("must be an integer of at least {min}"),
        (None, Some(max)) => format!("must be an integer of at most {max}"),
        (None, None) => "must be an integer".to_string(),
    }
}

/// What a value of `schema` must be, as the message of a field error.
pub fn expectation(schema: &Value) -> String {
    let schema = resolve(schema);
    match (schema["type"].as_str(), schema["format"].as_str()) {
        (Some("string"), Some("uuid")) => "must be a UUID".to_string(),
        (Some("string"), Some("date-time")) => "must be an RFC 3339 date and time".to_string(),
        (Some("string"), _) => "must be a string".to_string(),
        (Some("integer"), _) => integer_expectation(schema),
        (Some("number"), _) => "must be a number".to_string(),
        (Some("boolean"), _) => "must be true or false".to_string(),
        (Some("array"), _) => "must be an array".to_string(),
        (Some("object"), _) => "must be an object".to_string(),
        _ => "has a value that could not be parsed".to_string(),
    }
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.trim_end_matches('/').split('/').skip(1)
}

/// The contract's path template and operation for a request: of the
/// templates that match, the one with the most fixed segments, as the
/// router picks it.
fn operation(method: &Method, path: &str) -> Option<(&'static str, &'static Value)> {
    let wanted: Vec<&str> = segments(path).collect();
    let method = method.as_str().to_ascii_lowercase();
    let paths = contract()["paths"].as_object()?;
    paths
        .iter()
        .filter_map(|(template, item)| Some((template, item.get(method.as_str())?)))
        .filter_map(|(template, op)| {
            let parts: Vec<&str> = segments(template).collect();
            let fits = parts.len() == wanted.len()
                && parts
                    .iter()
                    .zip(&wanted)
                    .all(|(t, w)| t.starts_with('{') || t == w);
            let fixed = parts.iter().filter(|t| !t.starts_with('{')).count();
            fits.then_some((fixed, template.as_str(), op))
        })
        .max_by_key(|(fixed, _, _)| *fixed)
        .map(|(_, template, op)| (template, op))
}

/// How poem-openapi names a parameter that did not parse: by name, or (a
/// path parameter) by its position in the path (`param0`).
#[derive(Debug, Clone, Copy)]
pub enum ParamName<'a> {
    Named(&'a str),
    PathPosition(&'a str),
}

/// The field error of a parameter of the request `method path` that did
/// not parse.
pub fn parameter_error(method: &Method, path: &str, param: ParamName<'_>) -> FieldError {
    let op = operation(method, path);
    let name = match param {
        ParamName::Named(name) => Some(name.to_string()),
        ParamName::PathPosition(internal) => {
            let position = internal.strip_prefix("param").and_then(|n| n.parse().ok());
            op.zip(position).and_then(|((template, _), n): (_, usize)| {
                segments(template)
                    .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                    .nth(n)
                    .map(str::to_string)
            })
        }
    };
    let name = name.unwrap_or_else(|| "path".to_string());
    let schema = op.and_then(|(_, op)| {
        op["parameters"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == name.as_str())
            .map(|p| &p["schema"])
    });
    FieldError {
        message: schema.map_or_else(|| "could not be parsed".to_string(), expectation),
        field: name,
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

fn fits_integer(schema: &Value, value: &Value) -> bool {
    match schema["format"].as_str() {
        Some("int32") => value.as_i64().is_some_and(|v| i32::try_from(v).is_ok()),
        Some("int64") => value.is_i64(),
        _ => value.is_i64() || value.is_u64(),
    }
}

fn object_mismatch(schema: &Value, object: &Map<String, Value>, field: &str) -> Option<FieldError> {
    let required = schema["required"].as_array();
    let properties = schema["properties"].as_object();
    for (name, property) in properties.into_iter().flatten() {
        let path = join(field, name);
        match object.get(name) {
            None | Some(Value::Null) => {
                if required.is_some_and(|r| r.iter().any(|n| n == name.as_str())) {
                    return Some(FieldError {
                        field: path,
                        message: "is required".to_string(),
                    });
                }
            }
            Some(value) => {
                if let Some(e) = mismatch(property, value, &path) {
                    return Some(e);
                }
            }
        }
    }
    let extra = schema
        .get("additionalProperties")
        .filter(|s| s.is_object())?;
    object
        .iter()
        .filter(|(name, _)| !properties.is_some_and(|p| p.contains_key(name.as_str())))
        .find_map(|(name, value)| mismatch(extra, value, &join(field, name)))
}

/// The first place where `value` does not have the JSON type (or, for
/// UUIDs and dates, the format) that `schema` asks for: the checks that
/// parsing makes. Values (enums, lengths, patterns) are the handlers'.
fn mismatch(schema: &Value, value: &Value, field: &str) -> Option<FieldError> {
    let schema = resolve(schema);
    let wrong = || {
        Some(FieldError {
            field: field.to_string(),
            message: expectation(schema),
        })
    };
    let fits = match schema["type"].as_str() {
        Some("object") => {
            let Some(object) = value.as_object() else {
                return wrong();
            };
            return object_mismatch(schema, object, field);
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                return wrong();
            };
            return items
                .iter()
                .enumerate()
                .find_map(|(i, item)| mismatch(&schema["items"], item, &format!("{field}[{i}]")));
        }
        Some("string") => match (value.as_str(), schema["format"].as_str()) {
            (None, _) => false,
            (Some(text), Some("uuid")) => Uuid::parse_str(text).is_ok(),
            (Some(text), Some("date-time")) => DateTime::parse_from_rfc3339(text).is_ok(),
            (Some(_), _) => true,
        },
        Some("integer") => fits_integer(schema, value),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if fits {
        None
    } else {
        wrong()
    }
}

/// Why a request body did not parse into `schema`: the property at fault
/// and what it must be, or (no field) what the whole body must be.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyFault {
    pub field: Option<String>,
    pub message: String,
}

/// Finds what is wrong with a JSON body that did not parse into `schema`.
pub fn body_fault(schema: &Value, value: &Value) -> BodyFault {
    let resolved = resolve(schema);
    if resolved["type"] == "object" && !value.is_object() {
        return BodyFault {
            field: None,
            message: "must be a JSON object".to_string(),
        };
    }
    match mismatch(schema, value, "") {
        Some(e) if !e.field.is_empty() => BodyFault {
            field: Some(e.field),
            message: e.message,
        },
        Some(e) => BodyFault {
            field: None,
            message: e.message,
        },
        None => BodyFault {
            field: None,
            message: "does not match the operation's request schema".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The real served contract, as the app gives it.
    fn served() {
        know_contract(&crate::routes::openapi_json());
    }

    fn scan_create() -> Value {
        json!({ "$ref": "#/components/schemas/ScanCreate" })
    }

    #[test]
    fn a_path_parameter_is_named_as_in_the_path_template() {
        served();
        let e = parameter_error(
            &Method::GET,
            "/api/v1/scans/not-a-uuid/report/pdf",
            ParamName::PathPosition("param0"),
        );
        assert_eq!(e.field, "scan_id");
        assert_eq!(e.message, "must be a UUID");
    }

    #[test]
    fn a_query_parameter_says_what_it_must_be() {
        served();
        let e = parameter_error(&Method::GET, "/api/v1/scans", ParamName::Named("limit"));
        assert_eq!(e.field, "limit");
        assert_eq!(e.message, "must be an integer from 1 to 500");
        let e = parameter_error(
            &Method::GET,
            "/api/v1/notifications",
            ParamName::Named("unread"),
        );
        assert_eq!(e.message, "must be true or false");
    }

    #[test]
    fn a_body_names_the_first_property_that_does_not_fit() {
        served();
        let fault = |body: Value| body_fault(&scan_create(), &body);
        let at = |field: &str, message: &str| BodyFault {
            field: Some(field.to_string()),
            message: message.to_string(),
        };
        assert_eq!(
            fault(json!({ "target_id": "nope" })),
            at("target_id", "must be a UUID")
        );
        assert_eq!(
            fault(json!({ "target_id": 5 })),
            at("target_id", "must be a UUID")
        );
        assert_eq!(fault(json!({})), at("target_id", "is required"));
        assert_eq!(
            fault(json!({ "target_id": Uuid::nil(), "engine": 5 })),
            at("engine", "must be a string")
        );
        assert_eq!(fault(json!([])).field, None);
        let import = json!({ "$ref": "#/components/schemas/TargetImport" });
        assert_eq!(
            body_fault(&import, &json!({ "domains": ["a.example", 3] })),
            at("domains[1]", "must be a string")
        );
    }
}
