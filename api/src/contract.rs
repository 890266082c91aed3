//! Request values whose contract is stricter than their JSON type.
//!
//! The handlers check these values and answer 422 naming the field (see
//! `validate` and the parsers in `routes`); the types here only make the
//! OpenAPI document say the same thing (an `enum`, a length, a range), so a
//! client or a fuzzer generating "valid" requests from the contract sends
//! values the service accepts. Parsing checks only the JSON type (a string
//! must be a JSON string, not a number or `true`), so a value of the right
//! type but out of bounds still reaches the handler and gets its 422 with
//! the field at fault.

use std::borrow::Cow;
use std::ops::Deref;

use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{
    ParseError, ParseFromJSON, ParseFromParameter, ParseResult, ToJSON, Type,
};
use serde_json::Value;

/// A string request value described by `schema` in the contract: inline
/// where it is used, or (`component`) once under `components/schemas` with
/// the type's name, referenced where it is used. An enum that an optional
/// property takes is a component, so that the document can say `nullable`
/// beside one statement of its values (inline, OpenAPI 3.0 would need
/// `null` among the values, which generators turn into several classes).
macro_rules! contract_string {
    ($(#[$doc:meta])* $name:ident, component $schema:expr) => {
        contract_string!(@value $(#[$doc])* $name);

        impl Type for $name {
            contract_string!(@type_common);

            fn name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn schema_ref() -> MetaSchemaRef {
                MetaSchemaRef::Reference(stringify!($name).to_string())
            }

            fn register(registry: &mut Registry) {
                let build: fn() -> MetaSchema = $schema;
                registry.create_schema::<Self, _>(stringify!($name).to_string(), |_| build());
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, $schema:expr) => {
        contract_string!(@value $(#[$doc])* $name);

        impl Type for $name {
            contract_string!(@type_common);

            fn name() -> Cow<'static, str> {
                "string".into()
            }

            fn schema_ref() -> MetaSchemaRef {
                let build: fn() -> MetaSchema = $schema;
                MetaSchemaRef::Inline(Box::new(build()))
            }
        }
    };
    (@type_common) => {
        const IS_REQUIRED: bool = true;
        type RawValueType = String;
        type RawElementValueType = String;

        fn as_raw_value(&self) -> Option<&String> {
            Some(&self.0)
        }

        fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
            Box::new(std::iter::once(&self.0))
        }
    };
    (@value $(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $name(pub String);

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl ParseFromJSON for $name {
            fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
                match value {
                    Some(Value::String(text)) => Ok($name(text)),
                    Some(other) => Err(ParseError::expected_type(other)),
                    None => Err(ParseError::expected_input()),
                }
            }
        }

        impl ParseFromParameter for $name {
            fn parse_from_parameter(value: &str) -> ParseResult<Self> {
                Ok($name(value.to_string()))
            }
        }

        impl ToJSON for $name {
            fn to_json(&self) -> Option<Value> {
                Some(Value::String(self.0.clone()))
            }
        }
    };
}

fn one_of(values: &[&str]) -> MetaSchema {
    MetaSchema {
        enum_items: values.iter().map(|v| Value::from(*v)).collect(),
        ..MetaSchema::new("string")
    }
}

fn length(min: usize, max: usize) -> MetaSchema {
    MetaSchema {
        min_length: Some(min),
        max_length: Some(max),
        ..MetaSchema::new("string")
    }
}

contract_string!(
    /// A JSON string and nothing else: where a value is reported back per
    /// item (a target import), a number or `true` is refused rather than
    /// read as text.
    Text,
    || MetaSchema::new("string")
);
contract_string!(
    /// `full`, `quick` or `recon`.
    EngineName,
    component || one_of(&["full", "quick", "recon"])
);
contract_string!(
    /// A scan status.
    ScanStatusName,
    || one_of(&["queued", "pending", "running", "completed", "failed", "stopped"])
);
contract_string!(
    /// A finding status.
    FindingStatusName,
    || one_of(&["open", "confirmed", "false_positive", "accepted_risk", "fixed"])
);
contract_string!(
    /// A report format.
    ReportFormatName,
    || one_of(&["html", "json", "sarif", "csv", "pdf"])
);
contract_string!(
    /// A user role.
    RoleName,
    component || one_of(&["user", "admin"])
);
contract_string!(
    /// Any tier, as an administrator assigns it.
    TierSlug,
    component || one_of(&["demo", "monthly", "yearly", "admin"])
);
contract_string!(
    /// A tier that can be bought.
    PaidTierSlug,
    || one_of(&["monthly", "yearly"])
);
contract_string!(
    /// A new password: 8 to 128 characters.
    NewPassword,
    || length(
        crate::auth::password::MIN_LEN,
        crate::auth::password::MAX_LEN
    )
);
contract_string!(
    /// An email address (checked and lower-cased by `validate::normalize_email`).
    EmailAddress,
    || MetaSchema {
        max_length: Some(254),
        ..MetaSchema::new_with_format("string", "email")
    }
);
contract_string!(
    /// A display name: at most 200 characters, no control characters.
    FullName,
    || MetaSchema {
        pattern: Some(r"^[^\x00-\x1f\x7f-\x9f]*$".to_string()),
        max_length: Some(crate::validate::FULL_NAME_MAX),
        ..MetaSchema::new("string")
    }
);
contract_string!(
    /// An API key name: 1 to 100 characters, no control characters, not
    /// starting or ending with white space (the name is trimmed).
    KeyName,
    || MetaSchema {
        pattern: Some(
            r"^[^\s\x00-\x1f\x7f-\x9f]([^\x00-\x1f\x7f-\x9f]{0,98}[^\s\x00-\x1f\x7f-\x9f])?$"
                .to_string()
        ),
        ..length(1, crate::routes::api_keys::NAME_MAX)
    }
);

/// An integer query value within `MIN..=MAX` in the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded<const MIN: i64, const MAX: i64>(pub i64);

/// A page size: 1 to 500.
pub type PageLimit = Bounded<1, { crate::routes::MAX_LIMIT }>;
/// Items to skip: 0 or more.
pub type PageOffset = Bounded<0, { i64::MAX }>;

impl<const MIN: i64, const MAX: i64> Type for Bounded<MIN, MAX> {
    const IS_REQUIRED: bool = true;
    type RawValueType = i64;
    type RawElementValueType = i64;

    fn name() -> Cow<'static, str> {
        "integer_int64".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            minimum: Some(MIN as f64),
            maximum: (MAX != i64::MAX).then_some(MAX as f64),
            ..MetaSchema::new_with_format("integer", "int64")
        }))
    }

    fn as_raw_value(&self) -> Option<&i64> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a i64> + 'a> {
        Box::new(std::iter::once(&self.0))
    }
}

impl<const MIN: i64, const MAX: i64> ParseFromParameter for Bounded<MIN, MAX> {
    fn parse_from_parameter(value: &str) -> ParseResult<Self> {
        i64::parse_from_parameter(value)
            .map(Bounded)
            .map_err(|e| e.propagate())
    }
}

impl<const MIN: i64, const MAX: i64> ParseFromJSON for Bounded<MIN, MAX> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        i64::parse_from_json(value)
            .map(Bounded)
            .map_err(|e| e.propagate())
    }
}

impl<const MIN: i64, const MAX: i64> ToJSON for Bounded<MIN, MAX> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(self.0))
    }
}

/// An API key's lifetime in days: 1 to 365.
pub type KeyLifetimeDays = Bounded<1, { crate::routes::api_keys::MAX_EXPIRES_IN_DAYS }>;

/// The raw value of an optional bounded query value, for `routes::page`.
pub fn raw<const MIN: i64, const MAX: i64>(value: Option<Bounded<MIN, MAX>>) -> Option<i64> {
    value.map(|v| v.0)
}

/// API key permissions: a non-empty list of `read`, `scan` and `write`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionList(pub Vec<String>);

impl Deref for PermissionList {
    type Target = Vec<String>;
    fn deref(&self) -> &Vec<String> {
        &self.0
    }
}

impl Type for PermissionList {
    const IS_REQUIRED: bool = true;
    type RawValueType = Vec<String>;
    type RawElementValueType = String;

    fn name() -> Cow<'static, str> {
        "[string]".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            items: Some(Box::new(MetaSchemaRef::Inline(Box::new(one_of(
                &crate::routes::api_keys::PERMISSIONS,
            ))))),
            min_items: Some(1),
            ..MetaSchema::new("array")
        }))
    }

    fn as_raw_value(&self) -> Option<&Vec<String>> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        Box::new(self.0.iter())
    }
}

impl ParseFromJSON for PermissionList {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        Vec::<String>::parse_from_json(value)
            .map(PermissionList)
            .map_err(|e| e.propagate())
    }
}

impl ToJSON for PermissionList {
    fn to_json(&self) -> Option<Value> {
        self.0.to_json()
    }
}
