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

/// The contract's bounds, owned here: the handlers read them from here and
/// the schema types below state them, so the two cannot drift apart.
pub mod bounds {
    /// Password length, in characters.
    pub const PASSWORD_MIN_LEN: usize = 8;
    pub const PASSWORD_MAX_LEN: usize = 128;
    /// A user's full name, in characters.
    pub const FULL_NAME_MAX: usize = 200;
    /// Default and maximum page sizes of list endpoints.
    pub const DEFAULT_LIMIT: i64 = 50;
    pub const MAX_LIMIT: i64 = 500;
    /// The permissions an API key may carry.
    pub const KEY_PERMISSIONS: [&str; 3] = ["read", "scan", "write"];
    /// An API key's name, in characters.
    pub const KEY_NAME_MAX: usize = 100;
    /// An API key's lifetime, in days.
    pub const KEY_DEFAULT_EXPIRES_IN_DAYS: i64 = 90;
    pub const KEY_MAX_EXPIRES_IN_DAYS: i64 = 365;
    /// Most domains one import takes.
    pub const IMPORT_MAX: usize = 500;
    /// A webhook's URL and description, in characters.
    pub const WEBHOOK_URL_MAX: usize = 2048;
    pub const WEBHOOK_DESCRIPTION_MAX: usize = 500;
    /// A target's `max_rps_per_host`.
    pub const MAX_RPS_PER_HOST: i64 = 1000;
}

use std::borrow::Cow;
use std::ops::Deref;

use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{
    ParseError, ParseFromJSON, ParseFromParameter, ParseResult, ToJSON, Type,
};
use scanfleet_common::events::ScanStatus;
use scanfleet_common::jobs::Engine;
use scanfleet_core::fingerprint::FindingStatus;
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
    /// `full`, `quick`, `recon` or `auto` (technology detection, then
    /// each host's own templates plus a baseline).
    EngineName,
    component || one_of(&Engine::ALL.map(Engine::as_str))
);
contract_string!(
    /// A scan status.
    ScanStatusName,
    component || one_of(&ScanStatus::ALL.map(ScanStatus::as_str))
);
contract_string!(
    /// A finding status: one component, so that the body of `PATCH
    /// /findings/{finding_id}` and the filter of the target findings list
    /// generate one enum class (issue 37, item 9).
    FindingStatusName,
    component || one_of(&FindingStatus::names())
);
contract_string!(
    /// A fingerprint's state across scans: `open` or `fixed`.
    FindingStateName,
    || one_of(&["open", "fixed"])
);
contract_string!(
    /// How a finding relates to the target's earlier scans: `new`,
    /// `recurring`, `regressed` (open, so recorded by its last scan) or
    /// `fixed`.
    FindingChangeName,
    || one_of(&["new", "recurring", "regressed", "fixed"])
);
contract_string!(
    /// Text to look for: at most 200 characters, no control characters.
    SearchText,
    || MetaSchema {
        pattern: Some(r"^[^\x00-\x1f\x7f-\x9f]*$".to_string()),
        max_length: Some(200),
        ..MetaSchema::new("string")
    }
);
contract_string!(
    /// A calendar date, `YYYY-MM-DD` (checked by [`date`]).
    DateText,
    || MetaSchema::new_with_format("string", "date")
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
        bounds::PASSWORD_MIN_LEN,
        bounds::PASSWORD_MAX_LEN
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
        max_length: Some(bounds::FULL_NAME_MAX),
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
        ..length(1, bounds::KEY_NAME_MAX)
    }
);

/// The white space Rust's `str::trim` and `split_whitespace` skip (Unicode
/// `White_Space`), spelled out: `\s` differs between the regex dialects
/// that read the contract (ECMA-262 has U+FEFF and lacks U+0085, Python
/// has U+001C..U+001F), and a pattern must never refuse what the service
/// accepts.
const WHITE_SPACE: &str =
    r"[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";

/// What a pattern can say about a hostname, around the white space the
/// service trims: an ASCII name is two or more labels of letters, digits
/// and inner hyphens, at most 63 characters each, the last not all digits
/// (else it is an address), and an optional final dot; a name with any
/// non-ASCII character (internationalised, converted to punycode by the
/// service) is only said to hold no scheme, user, port, path or wildcard,
/// since the IDNA mapping decides the rest. The total length, reserved
/// names and the IDNA rules are checked by the handler (`Domain::parse`),
/// with a 422 naming the field. Strict for ASCII names so that a client or
/// a fuzzer generating from the contract mostly sends names that exist.
fn domain_schema() -> MetaSchema {
    let label = "[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?";
    let last_label = "[0-9]*[-A-Za-z][-A-Za-z0-9]*";
    let idn = "(?:[-.0-9A-Za-z]|[^\\x00-\\x7f])*[^\\x00-\\x7f](?:[-.0-9A-Za-z]|[^\\x00-\\x7f])*";
    MetaSchema {
        pattern: Some(format!(
            "^{ws}*(?:(?:{label}\\.)+{last_label}\\.?|{idn}){ws}*$",
            ws = WHITE_SPACE
        )),
        min_length: Some(1),
        ..MetaSchema::new("string")
    }
}

/// What a pattern can say about a cron expression: a shorthand, or five
/// fields of digits, names, `*`, `/`, `,`, `-` and `+` (the number parser's
/// sign), around the white space the service trims and splits on. The
/// fields' ranges and the five-minute minimum interval are checked by the
/// handler (`CronSpec::parse`), with a 422 naming the field.
fn cron_schema() -> MetaSchema {
    let field = "[-0-9A-Za-z*/,+]+";
    MetaSchema {
        pattern: Some(format!(
            "^{ws}*(?:@(?:hourly|daily|midnight|weekly|monthly|yearly|annually)\
             |{field}(?:{ws}+{field}){{4}}){ws}*$",
            ws = WHITE_SPACE
        )),
        min_length: Some(1),
        ..MetaSchema::new("string")
    }
}

contract_string!(
    /// A target's hostname as the client sends it (see [`domain_schema`]).
    DomainName,
    domain_schema
);
contract_string!(
    /// A five-field cron expression or a shorthand (see [`cron_schema`]).
    CronExpression,
    cron_schema
);

/// An integer query value within `MIN..=MAX` in the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded<const MIN: i64, const MAX: i64>(pub i64);

/// A page size: 1 to 500.
pub type PageLimit = Bounded<1, { bounds::MAX_LIMIT }>;
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

/// A target's ceiling on requests a second to any one of its hosts: 1 to
/// 1000.
pub type RpsPerHost = Bounded<1, { bounds::MAX_RPS_PER_HOST }>;

/// `value` of `max_rps_per_host` within its bounds; a 422 naming the field
/// otherwise.
pub fn rps_per_host(value: RpsPerHost) -> Result<u32, crate::error::Error> {
    u32::try_from(value.0)
        .ok()
        .filter(|v| (1..=bounds::MAX_RPS_PER_HOST as u32).contains(v))
        .ok_or_else(|| {
            crate::error::Error::invalid(
                "max_rps_per_host",
                format!("must be between 1 and {}", bounds::MAX_RPS_PER_HOST),
            )
        })
}

/// An API key's lifetime in days: 1 to 365.
pub type KeyLifetimeDays = Bounded<1, { bounds::KEY_MAX_EXPIRES_IN_DAYS }>;

/// The raw value of an optional bounded query value, for `routes::page`.
pub fn raw<const MIN: i64, const MAX: i64>(value: Option<Bounded<MIN, MAX>>) -> Option<i64> {
    value.map(|v| v.0)
}

/// `value` of `field` as a finding status; a 422 naming the field
/// otherwise.
pub fn finding_status(field: &str, value: &str) -> Result<FindingStatus, crate::error::Error> {
    FindingStatus::parse(value).ok_or_else(|| {
        crate::error::Error::invalid(
            field,
            format!("must be one of {}", FindingStatus::names().join(", ")),
        )
    })
}

/// `value` of `field` as a calendar date; a 422 naming the field otherwise.
pub fn date(field: &str, value: &str) -> Result<chrono::NaiveDate, crate::error::Error> {
    chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map_err(|_| crate::error::Error::invalid(field, "must be a date, YYYY-MM-DD"))
}

/// A JSON array whose schema says more than its JSON type (its items, size,
/// uniqueness): a newtype over the `Vec` that parses as the `Vec` and
/// states the given schema in the contract; `registers` names a component
/// type the schema refers to (its items).
macro_rules! contract_list {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $(registers $component:ty,)? || $schema:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(pub Vec<$elem>);

        impl Deref for $name {
            type Target = Vec<$elem>;
            fn deref(&self) -> &Vec<$elem> {
                &self.0
            }
        }

        impl Type for $name {
            const IS_REQUIRED: bool = true;
            type RawValueType = Vec<$elem>;
            type RawElementValueType = $elem;

            fn name() -> Cow<'static, str> {
                "[string]".into()
            }

            fn schema_ref() -> MetaSchemaRef {
                $schema
            }

            #[allow(unused_variables)]
            fn register(registry: &mut Registry) {
                $(<$component as Type>::register(registry);)?
            }

            fn as_raw_value(&self) -> Option<&Vec<$elem>> {
                Some(&self.0)
            }

            fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a $elem> + 'a> {
                Box::new(self.0.iter())
            }
        }

        impl ParseFromJSON for $name {
            fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
                Vec::<$elem>::parse_from_json(value)
                    .map($name)
                    .map_err(|e| e.propagate())
            }
        }

        impl ToJSON for $name {
            fn to_json(&self) -> Option<Value> {
                self.0.to_json()
            }
        }
    };
}

contract_list!(
    /// API key permissions: a non-empty list of `read`, `scan` and `write`.
    PermissionList,
    String,
    || MetaSchemaRef::Inline(Box::new(MetaSchema {
        items: Some(Box::new(MetaSchemaRef::Inline(Box::new(one_of(
            &bounds::KEY_PERMISSIONS,
        ))))),
        min_items: Some(1),
        ..MetaSchema::new("array")
    }))
);

contract_list!(
    /// The domains of an import: at most `bounds::IMPORT_MAX` (the
    /// handler refuses more with a 422 naming `domains`). Each is any string:
    /// an invalid one is reported back as `failed`, not refused.
    DomainList,
    Text,
    || MetaSchemaRef::Inline(Box::new(MetaSchema {
        items: Some(Box::new(Text::schema_ref())),
        max_items: Some(bounds::IMPORT_MAX),
        ..MetaSchema::new("array")
    }))
);

#[cfg(test)]
mod tests {
    use super::*;
    use scanfleet_core::cron::CronSpec;
    use scanfleet_core::domain::Domain;

    fn admits(schema: fn() -> MetaSchema, text: &str) -> bool {
        let schema = schema();
        let pattern = schema.pattern.unwrap();
        regex::Regex::new(&pattern).unwrap().is_match(text)
            && text.chars().count() >= schema.min_length.unwrap()
    }

    /// A pattern that refused an accepted value would make a client (and
    /// schemathesis) refuse what the service takes (issue: layers, item 7).
    #[test]
    fn the_domain_pattern_admits_every_name_the_service_accepts_and_refuses_urls() {
        for accepted in [
            "example.com",
            "  Example.COM ",
            "example.com.",
            "Bücher.example",
            "例え.テスト",
            "例え。テスト",
            "\u{3000}example.com\u{85}\t",
            "exa\u{feff}mple.com",
            "1password.com",
            "a.1-2",
            "xn--bcher-kva.example.",
        ] {
            assert!(Domain::try_parse(accepted).is_ok(), "{accepted:?}");
            assert!(admits(domain_schema, accepted), "{accepted:?}");
        }
        for refused in [
            "",
            "   ",
            "https://example.com",
            "user@example.com",
            "example.com:8443",
            "*.example.com",
            "example.com/admin",
            "exa mple.com",
            "localhost",
            "10.1",
            "-a.example.com",
        ] {
            assert!(Domain::try_parse(refused).is_err(), "{refused:?}");
            assert!(!admits(domain_schema, refused), "{refused:?}");
        }
    }

    /// Random texts over an alphabet of every kind of character the parser
    /// treats differently: whatever it accepts, the pattern admits.
    #[test]
    fn the_domain_pattern_admits_random_names_the_service_accepts() {
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "aZ09-..-x1 \t\u{3000}\u{feff}é例。:/@*_".chars().collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut accepted = 0;
        for _ in 0..50_000 {
            let len = rng.random_range(1..14);
            let text: String = (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            if Domain::try_parse(&text).is_ok() {
                accepted += 1;
                assert!(admits(domain_schema, &text), "{text:?}");
            }
        }
        assert!(accepted > 200, "{accepted}");
    }

    #[test]
    fn the_cron_pattern_admits_every_expression_the_service_accepts() {
        for accepted in [
            "0 9 * * 1",
            "*/5 * * * *",
            " 0 0 1 jan MON-fri ",
            "0\u{a0}9\t*\u{3000}* +1",
            "0,30 9-17/2 1-31 */3 0-7",
            "@hourly",
            " @annually\n",
        ] {
            assert!(CronSpec::parse(accepted).is_ok(), "{accepted:?}");
            assert!(admits(cron_schema, accepted), "{accepted:?}");
        }
        for refused in [
            "",
            "   ",
            "@reboot",
            "0 9 * *",
            "0 9 * * 1 2026",
            "0 9 * * 1;",
        ] {
            assert!(CronSpec::parse(refused).is_err(), "{refused:?}");
            assert!(!admits(cron_schema, refused), "{refused:?}");
        }
    }
}

contract_string!(
    /// A webhook's kind: `generic` (signed JSON) or `slack` (Block Kit).
    WebhookKindName,
    component || one_of(&["generic", "slack"])
);
contract_string!(
    /// An event a webhook can subscribe to: one component, so that the
    /// lists of creating and of changing a webhook generate one enum class.
    WebhookEventName,
    component || one_of(&scanfleet_core::outbox::SUBSCRIBABLE)
);
contract_string!(
    /// A finding severity.
    SeverityName,
    component || one_of(&["critical", "high", "medium", "low", "info"])
);
contract_string!(
    /// A webhook URL: `https` in production, at most 2,048 characters.
    WebhookUrl,
    || MetaSchema {
        max_length: Some(bounds::WEBHOOK_URL_MAX),
        ..MetaSchema::new_with_format("string", "uri")
    }
);
contract_string!(
    /// A webhook's description: at most 500 characters.
    WebhookDescription,
    || MetaSchema {
        pattern: Some(r"^[^\x00-\x1f\x7f-\x9f]*$".to_string()),
        max_length: Some(bounds::WEBHOOK_DESCRIPTION_MAX),
        ..MetaSchema::new("string")
    }
);

contract_list!(
    /// The events a webhook subscribes to: a non-empty list of distinct types
    /// (`ping` is always sent).
    WebhookEventList,
    String,
    registers WebhookEventName,
    || MetaSchemaRef::Inline(Box::new(MetaSchema {
        items: Some(Box::new(WebhookEventName::schema_ref())),
        min_items: Some(1),
        max_items: Some(scanfleet_core::outbox::SUBSCRIBABLE.len()),
        unique_items: Some(true),
        ..MetaSchema::new("array")
    }))
);
