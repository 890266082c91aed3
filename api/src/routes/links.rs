//! OpenAPI links from each operation that creates something to the
//! operations that take its id, so that a client (or a stateful fuzzer)
//! reading the contract can follow real ids: a new target's `id` is the
//! `target_id` of its scans and schedules, a new scan's `id` the `scan_id`
//! of its detail, report and stop. poem-openapi has no way to declare links,
//! so [`add_links`] writes them into the generated document, once, for both
//! the served `/api/v1/openapi.json` and the committed `openapi/openapi.json`.

use serde_json::{json, Map, Value};

use super::operation_mut;

/// How the target operation takes the id.
#[derive(Debug, Clone, Copy)]
pub enum Takes {
    /// As the path or query parameter of that name.
    Parameter(&'static str),
    /// As the request body's property of that name (the rest of the body
    /// is the client's; schemathesis merges it with what it generates).
    BodyProperty(&'static str),
}

/// An operation answering `status` with a new id at `id` (a runtime
/// expression), and the operations that take it.
pub struct Source {
    pub operation_id: &'static str,
    pub status: &'static str,
    pub id: &'static str,
    pub targets: &'static [(&'static str, Takes)],
}

use Takes::{BodyProperty, Parameter};

const SCAN_USES: &[(&str, Takes)] = &[
    ("get_scan", Parameter("scan_id")),
    ("stop_scan", Parameter("scan_id")),
    ("get_scan_intel", Parameter("scan_id")),
    ("get_scan_report", Parameter("scan_id")),
    ("get_scan_report_html", Parameter("scan_id")),
    ("get_scan_report_json", Parameter("scan_id")),
    ("get_scan_report_sarif", Parameter("scan_id")),
    ("get_scan_report_csv", Parameter("scan_id")),
    ("get_scan_report_pdf", Parameter("scan_id")),
];

/// Every link of the contract.
pub const SOURCES: &[Source] = &[
    Source {
        operation_id: "register",
        status: "201",
        id: "$response.body#/id",
        targets: &[("admin_update_user", Parameter("user_id"))],
    },
    Source {
        operation_id: "create_target",
        status: "201",
        id: "$response.body#/id",
        targets: &[
            ("get_target", Parameter("target_id")),
            ("update_target", Parameter("target_id")),
            ("delete_target", Parameter("target_id")),
            ("verify_target", Parameter("target_id")),
            ("admin_update_target", Parameter("target_id")),
            ("list_scans", Parameter("target_id")),
            ("create_scan", BodyProperty("target_id")),
            ("create_schedule", BodyProperty("target_id")),
        ],
    },
    Source {
        operation_id: "create_scan",
        status: "201",
        id: "$response.body#/id",
        targets: SCAN_USES,
    },
    Source {
        operation_id: "run_schedule_now",
        status: "202",
        id: "$response.body#/scan_id",
        targets: SCAN_USES,
    },
    Source {
        operation_id: "create_schedule",
        status: "201",
        id: "$response.body#/id",
        targets: &[
            ("update_schedule", Parameter("schedule_id")),
            ("delete_schedule", Parameter("schedule_id")),
            ("run_schedule_now", Parameter("schedule_id")),
        ],
    },
    Source {
        operation_id: "create_api_key",
        status: "201",
        id: "$response.body#/id",
        targets: &[("delete_api_key", Parameter("key_id"))],
    },
];

fn link(target: &str, takes: Takes, id: &str) -> Value {
    match takes {
        Parameter(name) => json!({ "operationId": target, "parameters": { name: id } }),
        BodyProperty(name) => json!({ "operationId": target, "requestBody": { name: id } }),
    }
}

/// Writes [`SOURCES`] into `spec` as the `links` of each source's response.
pub fn add_links(spec: &mut Value) {
    for source in SOURCES {
        let Some(response) = operation_mut(spec, source.operation_id)
            .and_then(|op| op.get_mut("responses"))
            .and_then(|responses| responses.get_mut(source.status))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let links: Map<String, Value> = source
            .targets
            .iter()
            .map(|(target, takes)| (target.to_string(), link(target, *takes, source.id)))
            .collect();
        response.insert("links".to_string(), Value::Object(links));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn takes_parameter(op: &Value, name: &str) -> bool {
        op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == name)
    }

    fn takes_body_property(spec: &Value, op: &Value, name: &str) -> bool {
        let content = &op["requestBody"]["content"];
        let Some(schema) = content.as_object().and_then(|c| c.values().next()) else {
            return false;
        };
        let reference = schema["schema"]["$ref"].as_str().unwrap_or_default();
        let component = reference.rsplit('/').next().unwrap_or_default();
        spec["components"]["schemas"][component]["properties"][name].is_object()
    }

    #[test]
    fn every_link_joins_operations_of_the_contract_by_a_name_they_take() {
        let mut spec: Value = serde_json::from_str(&crate::routes::openapi_json()).unwrap();
        for source in SOURCES {
            let op = operation_mut(&mut spec, source.operation_id)
                .unwrap_or_else(|| panic!("no operation {}", source.operation_id))
                .clone();
            let links = &op["responses"][source.status]["links"];
            assert_eq!(
                links.as_object().map(Map::len),
                Some(source.targets.len()),
                "{}",
                source.operation_id
            );
            let id_field = source.id.rsplit('/').next().unwrap();
            let schema = &op["responses"][source.status]["content"]
                ["application/json; charset=utf-8"]["schema"]["$ref"];
            let component = schema.as_str().unwrap().rsplit('/').next().unwrap();
            assert!(
                spec["components"]["schemas"][component]["properties"][id_field].is_object(),
                "{} answers no `{id_field}`",
                source.operation_id
            );
            for (target, takes) in source.targets {
                let target_op = operation_mut(&mut spec, target)
                    .unwrap_or_else(|| panic!("no operation {target}"))
                    .clone();
                let ok = match takes {
                    Parameter(name) => takes_parameter(&target_op, name),
                    BodyProperty(name) => takes_body_property(&spec, &target_op, name),
                };
                assert!(ok, "{target} does not take {takes:?}");
            }
        }
    }
}
