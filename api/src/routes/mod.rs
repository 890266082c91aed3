//! The REST surface: one file per endpoint group, all mounted under
//! `/api/v1` and collected into one OpenAPI document.

pub mod admin;
pub mod api_keys;
pub mod auth;
pub mod coverage;
pub mod dashboard;
pub mod findings;
pub mod health;
pub mod links;
pub mod notifications;
pub mod reports;
pub mod scans;
pub mod schedules;
pub mod subscriptions;
pub mod targets;
pub mod webhooks;

use poem_openapi::{OpenApiService, Tags};
use serde_json::{json, Map, Value};

use crate::error::Error;
use scanfleet_core::store::Page;

#[derive(Tags)]
pub enum ApiTags {
    /// Registration, login, tokens and the caller's profile.
    Auth,
    /// Domains the caller owns and scans.
    Targets,
    /// Scans, their findings and reports.
    Scans,
    /// Triage of individual findings.
    Findings,
    /// Summaries of targets, scans and findings.
    Dashboard,
    /// Recurring scans with cron expressions.
    Schedules,
    /// Scan completion and failure notices.
    Notifications,
    /// Keys for machine access.
    #[oai(rename = "API keys")]
    ApiKeys,
    /// Tiers, the current subscription, usage and payment.
    Subscriptions,
    /// User administration and target ownership overrides (admin role).
    Admin,
    /// Outbound webhooks and Slack: signed event deliveries.
    Webhooks,
}

pub type Apis = (
    auth::AuthApi,
    targets::TargetsApi,
    scans::ScansApi,
    coverage::CoverageApi,
    reports::ReportsApi,
    findings::FindingsApi,
    dashboard::DashboardApi,
    schedules::SchedulesApi,
    notifications::NotificationsApi,
    api_keys::ApiKeysApi,
    subscriptions::SubscriptionsApi,
    admin::AdminApi,
    webhooks::WebhooksApi,
);

/// The OpenAPI service of the whole contract. Building it needs no state, so
/// the document can be generated without Postgres or Redis.
pub fn openapi_service() -> OpenApiService<Apis, ()> {
    OpenApiService::new(
        (
            auth::AuthApi,
            targets::TargetsApi,
            scans::ScansApi,
            coverage::CoverageApi,
            reports::ReportsApi,
            findings::FindingsApi,
            dashboard::DashboardApi,
            schedules::SchedulesApi,
            notifications::NotificationsApi,
            api_keys::ApiKeysApi,
            subscriptions::SubscriptionsApi,
            admin::AdminApi,
            webhooks::WebhooksApi,
        ),
        "scanfleet",
        env!("CARGO_PKG_VERSION"),
    )
    .description(
        "Vulnerability scanning service: targets, scans, findings, schedules, \
         notifications, API keys and subscriptions. Errors are RFC 9457 problem \
         details (application/problem+json). Every response carries \
         X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset.",
    )
}

/// The generated contract, as committed at `openapi/openapi.json` and
/// served at `/api/v1/openapi.json`.
pub fn openapi_json() -> String {
    let text = openapi_service().spec();
    let mut text = match serde_json::from_str::<Value>(&text) {
        Ok(mut spec) => {
            optional_properties_are_nullable(&mut spec);
            links::add_links(&mut spec);
            reports::any_format_answers_are_untyped(&mut spec);
            serde_json::to_string_pretty(&spec).unwrap_or(text)
        }
        Err(_) => text,
    };
    text.push('\n');
    text
}

/// poem-openapi reads `null` for an optional (`Option`) property as absent,
/// and writes an absent one as `null`; the document says so by marking every
/// optional property `nullable`. An enum is stated once, as a component
/// (see `contract_string!`), never inline with `null` among its values
/// (which generators turn into three classes per property).
fn optional_properties_are_nullable(spec: &mut Value) {
    let Some(schemas) = spec["components"]["schemas"].as_object_mut() else {
        return;
    };
    for schema in schemas.values_mut() {
        let required: Vec<String> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (name, property) in properties.iter_mut() {
            let Some(property) = property.as_object_mut() else {
                continue;
            };
            lone_reference(property);
            if !required.contains(name) {
                if let Some(reference) = property.remove("$ref") {
                    property.insert("allOf".to_string(), json!([{ "$ref": reference }]));
                }
                property.insert("nullable".to_string(), Value::Bool(true));
            }
        }
    }
}

/// A property that names a component with a description: poem-openapi
/// writes an `allOf` of the component and of its description. The
/// description is dropped from the `allOf` (it stays beside it), so that
/// the `allOf` is the component alone: generators read a two-part `allOf`
/// as a new shape, a second class of an object (openapi-python-client's
/// `ScanDetailChangesType1` beside `ScanChanges`, `SarifRuleHelp` beside
/// `SarifMessage`, issue 37, item 9) and a union it cannot build of an
/// enum (it then leaves the schema out). An optional property's bare
/// `$ref` becomes such an `allOf` too, since OpenAPI 3.0 ignores a
/// `$ref`'s siblings such as `nullable`.
fn lone_reference(property: &mut Map<String, Value>) {
    let Some(all_of) = property.get_mut("allOf").and_then(Value::as_array_mut) else {
        return;
    };
    if all_of.iter().any(|s| s.get("$ref").is_some()) {
        all_of.retain(|s| s.get("$ref").is_some());
    }
}

/// The operation object with this `operationId`, if the document has one.
pub fn operation_mut<'a>(spec: &'a mut Value, operation_id: &str) -> Option<&'a mut Value> {
    spec.get_mut("paths")?
        .as_object_mut()?
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
        .find(|op| op["operationId"] == operation_id)
}

pub use crate::contract::bounds::{DEFAULT_LIMIT, MAX_LIMIT};

/// Validates `limit` and `offset` query parameters.
pub fn page(limit: Option<i64>, offset: Option<i64>) -> Result<Page, Error> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "limit",
            format!("must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let offset = offset.unwrap_or(0);
    if offset < 0 {
        return Err(Error::invalid("offset", "must not be negative"));
    }
    Ok(Page { limit, offset })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_bounds_name_the_parameter() {
        assert_eq!(page(None, None).unwrap().limit, DEFAULT_LIMIT);
        assert!(matches!(page(Some(0), None), Err(Error::Validation(e)) if e[0].field == "limit"));
        assert!(
            matches!(page(Some(501), None), Err(Error::Validation(e)) if e[0].field == "limit")
        );
        assert!(
            matches!(page(None, Some(-1)), Err(Error::Validation(e)) if e[0].field == "offset")
        );
        assert_eq!(page(Some(500), Some(10)).unwrap().offset, 10);
    }

    /// Generators make one class per inline enum, and three when `null` is
    /// among its values (issue: layers, item 8).
    #[test]
    fn an_optional_enum_is_a_nullable_reference_to_one_component() {
        let spec: serde_json::Value = serde_json::from_str(&openapi_json()).unwrap();
        let text = spec.to_string();
        assert!(!text.contains("null]"), "no enum lists null");
        let schemas = spec["components"]["schemas"].as_object().unwrap();
        for (name, schema) in schemas {
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            for (field, property) in schema["properties"].as_object().into_iter().flatten() {
                if required.contains(&serde_json::Value::from(field.as_str())) {
                    continue;
                }
                assert!(
                    property.get("enum").is_none(),
                    "{name}.{field}: inline enum"
                );
                assert!(property.get("$ref").is_none(), "{name}.{field}: bare $ref");
                assert_eq!(property["nullable"], true, "{name}.{field}");
            }
        }
        let engine = &spec["components"]["schemas"]["ScanCreate"]["properties"]["engine"];
        assert_eq!(
            engine["allOf"][0]["$ref"],
            "#/components/schemas/EngineName"
        );
        assert_eq!(
            spec["components"]["schemas"]["EngineName"]["enum"],
            serde_json::json!(["full", "quick", "recon", "auto"])
        );
    }

    /// Issue 37, item 9: a property that names a component names it alone
    /// (an `allOf` of one `$ref`), so generators make no second class of
    /// it, nullable or not.
    #[test]
    fn a_property_naming_a_component_names_it_alone() {
        let spec: serde_json::Value = serde_json::from_str(&openapi_json()).unwrap();
        let schemas = spec["components"]["schemas"].as_object().unwrap();
        for (name, schema) in schemas {
            for (field, property) in schema["properties"].as_object().into_iter().flatten() {
                if let Some(all_of) = property["allOf"].as_array() {
                    assert_eq!(all_of.len(), 1, "{name}.{field}: {property}");
                    assert!(all_of[0]["$ref"].is_string(), "{name}.{field}");
                }
            }
        }
        let changes = &schemas["ScanDetail"]["properties"]["changes"];
        assert_eq!(
            changes["allOf"],
            serde_json::json!([{"$ref": "#/components/schemas/ScanChanges"}])
        );
        assert_eq!(changes["nullable"], true);
        let status = &schemas["FindingUpdate"]["properties"]["status"];
        assert_eq!(
            status["allOf"],
            serde_json::json!([{"$ref": "#/components/schemas/FindingStatusName"}])
        );
    }
}
