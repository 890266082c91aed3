//! Request values whose contract is stricter than their JSON type.
//!
//! The handlers check these values and answer 422 naming the field (see
//! `validate` and the parsers in `routes`); the types here only make the
//! OpenAPI document say the same thing (an `enum`, a length, a range), so a
//! client or a fuzzer generating "valid" requests from the contract sends
//! values the service accepts. Parsing stays as lenient as the plain type's
//! (any JSON scalar as text, any integer), so a bad value still reaches the
//! handler and gets its 422 with the field at fault rather than poem's 400.

use std::borrow::Cow;
use std::ops::Deref;

use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{ParseFromJSON, ParseFromParameter, ParseResult, ToJSON, Type};
use serde_json::Value;

/// A string request value described by `schema` in the contract.
macro_rules! contract_string {
    ($(#[$doc:meta])* $name:ident, $schema:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(pub String);

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Type for $name {
            const IS_REQUIRED: bool = true;
            type RawValueType = String;
            type RawElementValueType = String;

            fn name() -> Cow<'static, str> {
                "string".into()
            }

            fn schema_ref() -> MetaSchemaRef {
                let build: fn() -> MetaSchema = $schema;
                MetaSchemaRef::Inline(Box::new(build()))
            }

            fn as_raw_value(&self) -> Option<&String> {
                Some(&self.0)
            }

            fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
                Box::new(std::iter::once(&self.0))
            }
        }

        impl ParseFromJSON for $name {
            fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
                String::parse_from_json(value)
                    .map($name)
                    .map_err(|e| e.propagate())
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
    /// `full`, `quick` or `recon`.
    EngineName,
    || one_of(&["full", "quick", "recon"])
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
    || one_of(&["user", "admin"])
);
contract_string!(
    /// Any tier, as an administrator assigns it.
    TierSlug,
    || one_of(&["demo", "monthly", "yearly", "admin"])
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

/// The raw value of an optional bounded query value, for `routes::page`.
pub fn raw<const MIN: i64, const MAX: i64>(value: Option<Bounded<MIN, MAX>>) -> Option<i64> {
    value.map(|v| v.0)
}
