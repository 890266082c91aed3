//! Runnability: whether the engine can run a loaded template, and if not,
//! why, as short stable reasons that group well in a report.
//!
//! The engine runs path and raw (also unsafe) requests, every matcher and
//! extractor type, the DSL, payloads with the three attack types, multi-step
//! blocks with extracted values and `_N` history, variables, redirects and
//! cookies, and `flow:` (boolean expressions natively, JavaScript in the
//! embedded engine of [`crate::flowjs`]). Anything else a template needs is
//! named here: another protocol, a flow script that does not parse,
//! out-of-band interactions, self-contained requests, and
//! each unsupported request feature, matcher type or DSL helper by name.

use std::collections::BTreeSet;
use std::fmt;

use super::flow::FlowExpr;
use super::model::{HttpBlock, PayloadDef, Template};
use crate::dsl;
use crate::operators::{ExtractorDef, MatcherDef, OperatorError, Operators};

/// One reason a template cannot run. The variants are listed from the most
/// to the least fundamental; a template's first reason is the one reports
/// group it under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The file did not parse (reported by the loader, not by [`check`]).
    ParseError,
    /// A DNS, TCP, headless, ... section.
    UnsupportedProtocol(String),
    /// No `http` block at all.
    NoHttpRequests,
    /// A `flow:` that is neither a boolean over blocks nor JavaScript that
    /// parses.
    Flow,
    /// Requests that ignore the target (`self-contained: true`).
    SelfContained,
    /// A path that is an absolute URL to a fixed host (`https://api.example/...`):
    /// traffic to a third party, refused like self-contained requests.
    FixedHost,
    /// Needs an interactsh server to catch out-of-band callbacks.
    Interactsh,
    UnsupportedMatcherType(String),
    UnsupportedExtractorType(String),
    /// A request feature the engine does not implement, by name.
    UnsupportedFeature(String),
    /// An `attack` other than batteringram, pitchfork or clusterbomb.
    UnsupportedAttack(String),
    /// A payload word-list file that could not be found.
    MissingPayloadFile,
    /// A payload with no values (Nuclei refuses these too).
    EmptyPayload,
    /// A block with neither `path` nor `raw`.
    NoRequestInBlock,
    /// A DSL helper function the engine does not provide.
    UnsupportedDslHelper(String),
    /// A DSL expression the engine's parser rejects.
    UnsupportedDslExpression,
    /// A matcher or extractor that does not compile: a bad regex, XPath,
    /// JSON path, hex string or condition, or no values at all.
    InvalidOperator(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::ParseError => f.write_str("parse error"),
            Reason::UnsupportedProtocol(p) => write!(f, "unsupported protocol: {p}"),
            Reason::NoHttpRequests => f.write_str("no http requests"),
            Reason::Flow => f.write_str("flow script does not parse"),
            Reason::SelfContained => f.write_str("self-contained request"),
            Reason::FixedHost => f.write_str("request to a fixed third-party host"),
            Reason::Interactsh => f.write_str("needs interactsh (out-of-band)"),
            Reason::UnsupportedFeature(x) => write!(f, "unsupported feature: {x}"),
            Reason::UnsupportedAttack(a) => write!(f, "unsupported attack type: {a}"),
            Reason::MissingPayloadFile => f.write_str("missing payload file"),
            Reason::EmptyPayload => f.write_str("empty payload list"),
            Reason::NoRequestInBlock => f.write_str("http block without path or raw"),
            Reason::UnsupportedMatcherType(t) => write!(f, "unsupported matcher type: {t}"),
            Reason::UnsupportedExtractorType(t) => write!(f, "unsupported extractor type: {t}"),
            Reason::UnsupportedDslHelper(h) => write!(f, "unsupported DSL helper: {h}"),
            Reason::UnsupportedDslExpression => f.write_str("unsupported DSL expression"),
            Reason::InvalidOperator(what) => write!(f, "invalid operator: {what}"),
        }
    }
}

/// Why a template cannot run: at least one reason, most fundamental first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unrunnable {
    reasons: Vec<Reason>,
}

impl Unrunnable {
    /// A single reason (the loader uses this for parse errors).
    pub fn new(reason: Reason) -> Unrunnable {
        Unrunnable {
            reasons: vec![reason],
        }
    }

    /// The reason to group this template under.
    pub fn primary(&self) -> &Reason {
        // Never empty: built from a non-empty set only.
        &self.reasons[0]
    }

    /// All reasons, most fundamental first, without repeats.
    pub fn reasons(&self) -> &[Reason] {
        &self.reasons
    }
}

impl fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Unrunnable {}

/// What the run a template is checked for offers beyond plain requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// An interactsh server is configured, so out-of-band templates
    /// (`{{interactsh-url}}`, `interactsh_*` parts) can run.
    pub interactsh: bool,
}

/// Decides whether the engine can run `template` with no interactsh server.
pub fn check(template: &Template) -> Result<(), Unrunnable> {
    check_for(template, CheckOptions::default())
}

/// Decides whether the engine can run `template` under `options`.
pub fn check_for(template: &Template, options: CheckOptions) -> Result<(), Unrunnable> {
    check_with(template, OperatorCheck::Compile, options)
}

/// [`check_for`] without compiling the matchers and extractors, for a
/// caller that compiles them next and reports their errors itself (the
/// engine's loader), so that they are compiled once.
pub fn check_before_compiling(
    template: &Template,
    options: CheckOptions,
) -> Result<(), Unrunnable> {
    check_with(template, OperatorCheck::LeaveToCaller, options)
}

/// Whether [`check_with`] compiles the operators to find their reasons.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OperatorCheck {
    Compile,
    LeaveToCaller,
}

fn check_with(
    template: &Template,
    operators: OperatorCheck,
    options: CheckOptions,
) -> Result<(), Unrunnable> {
    let mut reasons = BTreeSet::new();
    for p in &template.other_protocols {
        reasons.insert(Reason::UnsupportedProtocol(p.clone()));
    }
    if template.http.is_empty() && template.other_protocols.is_empty() {
        reasons.insert(Reason::NoHttpRequests);
    }
    if let Some(flow) = template.flow.as_deref().filter(|f| !f.trim().is_empty()) {
        if FlowExpr::parse(flow, template.http.len()).is_err()
            && crate::flowjs::check_syntax(flow).is_err()
        {
            reasons.insert(Reason::Flow);
        }
    }
    if template.self_contained || template.http.iter().any(|b| b.self_contained) {
        reasons.insert(Reason::SelfContained);
    }
    if template
        .signature
        .as_deref()
        .is_some_and(|s| !s.trim().is_empty())
    {
        reasons.insert(Reason::UnsupportedFeature("signature".into()));
    }
    for field in &template.unknown_fields {
        if let Some(name) = unknown_field_feature(field) {
            reasons.insert(Reason::UnsupportedFeature(name));
        }
    }
    for (_, value) in &template.variables {
        check_request_text(value, &mut reasons);
    }
    for block in &template.http {
        check_block(block, &template.variables, operators, &mut reasons);
    }
    if options.interactsh {
        reasons.remove(&Reason::Interactsh);
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(Unrunnable {
            reasons: reasons.into_iter().collect(),
        })
    }
}

/// The feature name for an unknown key, or `None` when the key cannot
/// affect execution (anything under `info`).
fn unknown_field_feature(path: &str) -> Option<String> {
    let mut segments = path.split('.').filter(|s| !s.is_empty());
    let first = segments.next()?;
    if first == "info" {
        return None;
    }
    // `http.0.analyzer` names `analyzer`; a top-level key names itself.
    let name = path
        .split('.')
        .rfind(|s| !s.is_empty() && !s.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or(first);
    Some(name.to_string())
}

fn check_block(
    block: &HttpBlock,
    variables: &[(String, String)],
    operators: OperatorCheck,
    reasons: &mut BTreeSet<Reason>,
) {
    check_block_features(block, reasons);
    check_block_requests(block, reasons);
    for raw in &block.raw {
        check_annotations(raw, variables, reasons);
    }
    check_block_texts(block, reasons);
    check_block_operators(block, operators, reasons);
}

/// Nuclei features of a block that the engine does not implement.
fn check_block_features(block: &HttpBlock, reasons: &mut BTreeSet<Reason>) {
    let mut feature = |name: &str| {
        reasons.insert(Reason::UnsupportedFeature(name.to_string()));
    };
    if block.fuzzing.is_some() || block.pre_condition.is_some() {
        feature("fuzzing");
    }
    // `race_count` alone does nothing in Nuclei; `race` turns it on.
    if block.race {
        feature("race");
    }
    if block.pipeline {
        feature("pipeline");
    }
    if block
        .signature
        .as_deref()
        .is_some_and(|s| !s.trim().is_empty())
    {
        feature("signature");
    }
    if block.global_matchers {
        feature("global-matchers");
    }
    if block.disable_path_automerge {
        feature("disable-path-automerge");
    }
}

/// Whether the block has requests to send to the target, and payloads to
/// send them with.
fn check_block_requests(block: &HttpBlock, reasons: &mut BTreeSet<Reason>) {
    if block.path.iter().any(|p| names_a_fixed_host(p)) {
        reasons.insert(Reason::FixedHost);
    }
    if block.path.is_empty() && block.raw.is_empty() {
        reasons.insert(Reason::NoRequestInBlock);
    }
    if let Some(attack) = block.attack.as_deref() {
        let a = attack.trim().to_ascii_lowercase();
        if !matches!(
            a.as_str(),
            "" | "batteringram" | "pitchfork" | "clusterbomb"
        ) {
            reasons.insert(Reason::UnsupportedAttack(attack.trim().to_string()));
        }
    }
    if block.payload_files.iter().any(|f| f.resolved.is_none()) {
        reasons.insert(Reason::MissingPayloadFile);
    }
    if block.payloads.iter().any(|(_, values)| values.is_empty()) {
        reasons.insert(Reason::EmptyPayload);
    }
}

/// The `@name:` annotations of a raw request.
fn check_annotations(raw: &str, variables: &[(String, String)], reasons: &mut BTreeSet<Reason>) {
    for (name, value) in annotations(raw) {
        match name {
            // `@timeout` only lengthens the wait; the engine's own
            // timeout applies instead. `@once` is run.
            "timeout" | "once" => {}
            // Only to the target itself under another port or scheme: a
            // fixed host would be traffic to a third party.
            "Host" if names_the_target(value, variables) => {}
            "Host" => {
                reasons.insert(Reason::UnsupportedFeature(
                    "@Host annotation to another host".to_string(),
                ));
            }
            // The TLS name of the handshake: the target's own name only
            // (which the client sends anyway), never a third party's.
            "tls-sni" if names_the_target(value, variables) => {}
            "tls-sni" => {
                reasons.insert(Reason::UnsupportedFeature(
                    "@tls-sni annotation naming another host".to_string(),
                ));
            }
            _ => {
                reasons.insert(Reason::UnsupportedFeature(format!("@{name} annotation")));
            }
        }
    }
}

/// Every text of the block that goes into a request.
fn check_block_texts(block: &HttpBlock, reasons: &mut BTreeSet<Reason>) {
    for text in block.request_texts() {
        check_request_text(text, reasons);
    }
    for (name, value) in &block.headers {
        check_request_text(name, reasons);
        check_request_text(value, reasons);
    }
    if let Some(body) = &block.body {
        check_request_text(body, reasons);
    }
    if let Some(method) = &block.method {
        check_request_text(method, reasons);
    }
    for (_, def) in &block.payload_defs {
        if let PayloadDef::List(values) = def {
            for v in values {
                check_request_text(v, reasons);
            }
        }
    }
}

/// The matchers and extractors, compiled too unless the caller does that.
fn check_block_operators(
    block: &HttpBlock,
    operators: OperatorCheck,
    reasons: &mut BTreeSet<Reason>,
) {
    for m in &block.matchers {
        check_matcher(m, reasons);
    }
    for x in &block.extractors {
        check_extractor(x, reasons);
    }
    if operators == OperatorCheck::LeaveToCaller {
        return;
    }
    // The operators module is the judge of what compiles; it stops at the
    // first problem, which is enough for a reason.
    let compiled = Operators::compile(
        &block.matchers,
        &block.extractors,
        block.matchers_condition.as_deref(),
    );
    if let Err(e) = compiled {
        if let Some(reason) = operator_reason(e) {
            reasons.insert(reason);
        }
    }
}

/// The reason for an operator that does not compile; `None` when the
/// problem is already named by the checks above (types, DSL helpers).
fn operator_reason(e: OperatorError) -> Option<Reason> {
    let what = match e {
        OperatorError::UnknownMatcherType(t) => return Some(Reason::UnsupportedMatcherType(t)),
        OperatorError::UnknownExtractorType(t) => return Some(Reason::UnsupportedExtractorType(t)),
        OperatorError::BadDsl { .. } => return Some(Reason::UnsupportedDslExpression),
        OperatorError::UnknownCondition(_) => "condition",
        OperatorError::UnknownEncoding(_) => "encoding",
        OperatorError::MissingValues { .. } => "no values",
        OperatorError::BadRegex(_) => "regex",
        OperatorError::BadHex { .. } => "hex",
        OperatorError::BadXPath { .. } => "xpath",
        OperatorError::BadJsonPath { .. } => "json path",
        #[allow(unreachable_patterns)]
        _ => "other",
    };
    Some(Reason::InvalidOperator(what.to_string()))
}

/// Names and values of the `@name: value` lines in front of a raw
/// request's request line.
fn annotations(raw: &str) -> Vec<(&str, &str)> {
    raw.lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| l.starts_with('@'))
        .map(|l| {
            let name = &l[1..];
            let end = name
                .find(|c: char| c == ':' || c.is_whitespace())
                .unwrap_or(name.len());
            let value = name[end..].trim_start().trim_start_matches(':').trim();
            (&name[..end], value)
        })
        .collect()
}

/// A path written as an absolute URL whose host is not the target's
/// (`https://www.rdap.net/domain/{{Host}}`).
fn names_a_fixed_host(path: &str) -> bool {
    let lower = path.trim().to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        return false;
    };
    !["{{hostname}}", "{{host}}", "{{fqdn}}"]
        .iter()
        .any(|name| rest.starts_with(name))
}

/// Whether an annotation value names the target: directly (see
/// [`host_annotation_stays_on_target`]) or through template variables whose
/// values do (`@tls-sni: {{sni}}` with `sni: "{{Host}}"`), optionally with
/// a port after the variable. The engine checks the rendered value again,
/// since a `--var` may replace a variable.
fn names_the_target(value: &str, variables: &[(String, String)]) -> bool {
    fn resolve(value: &str, variables: &[(String, String)], depth: usize) -> bool {
        if host_annotation_stays_on_target(value) {
            return true;
        }
        if depth == 0 {
            return false;
        }
        let lower = value.trim();
        let rest = lower
            .strip_prefix("https://")
            .or_else(|| lower.strip_prefix("http://"))
            .unwrap_or(lower);
        let Some(inner) = rest.strip_prefix("{{") else {
            return false;
        };
        let Some((name, after)) = inner.split_once("}}") else {
            return false;
        };
        let port_ok = after.is_empty()
            || after
                .strip_prefix(':')
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        port_ok
            && variables
                .iter()
                .find(|(n, _)| n == name.trim())
                .is_some_and(|(_, v)| resolve(v, variables, depth - 1))
    }
    resolve(value, variables, 4)
}

/// `@Host: {{Hostname}}:9780`, `http://{{Host}}:43800`: the target's own
/// name, optionally with a scheme and a port.
fn host_annotation_stays_on_target(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .unwrap_or(&lower);
    ["{{hostname}}", "{{host}}", "{{fqdn}}"].iter().any(|name| {
        rest.strip_prefix(name).is_some_and(|port| {
            port.is_empty()
                || port
                    .strip_prefix(':')
                    .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}

fn check_matcher(m: &MatcherDef, reasons: &mut BTreeSet<Reason>) {
    let kind = m.kind.trim().to_ascii_lowercase();
    if !matches!(
        kind.as_str(),
        "word" | "regex" | "status" | "size" | "binary" | "dsl" | "xpath"
    ) {
        reasons.insert(Reason::UnsupportedMatcherType(m.kind.trim().to_string()));
    }
    for key in m.extra.keys() {
        reasons.insert(Reason::UnsupportedFeature(key.clone()));
    }
    if let Some(enc) = m.encoding.as_deref() {
        if !enc.trim().eq_ignore_ascii_case("hex") && !enc.trim().is_empty() {
            reasons.insert(Reason::UnsupportedFeature(format!(
                "encoding: {}",
                enc.trim()
            )));
        }
    }
    check_part(m.part.as_deref(), reasons);
    if let Some(words) = &m.words {
        for w in words.to_vec() {
            check_request_text(&w, reasons);
        }
    }
    if let Some(dsl) = &m.dsl {
        for e in dsl.to_vec() {
            check_dsl(&e, reasons);
        }
    }
}

fn check_extractor(x: &ExtractorDef, reasons: &mut BTreeSet<Reason>) {
    let kind = x.kind.trim().to_ascii_lowercase();
    if !matches!(kind.as_str(), "regex" | "kval" | "json" | "xpath" | "dsl") {
        reasons.insert(Reason::UnsupportedExtractorType(x.kind.trim().to_string()));
    }
    for key in x.extra.keys() {
        reasons.insert(Reason::UnsupportedFeature(key.clone()));
    }
    check_part(x.part.as_deref(), reasons);
    if let Some(dsl) = &x.dsl {
        for e in dsl.to_vec() {
            check_dsl(&e, reasons);
        }
    }
}

/// Parts named after interactsh data only exist with an interactsh server.
fn check_part(part: Option<&str>, reasons: &mut BTreeSet<Reason>) {
    if part.is_some_and(|p| p.contains("interactsh")) {
        reasons.insert(Reason::Interactsh);
    }
}

/// Text that is interpolated before sending (paths, raw requests, headers,
/// bodies, variables, payload values, matcher words).
///
/// A marker that does not parse as an expression, or calls a function
/// Nuclei does not have, is sent as written (SSTI probes such as `{{7*7}}`
/// or `{{phpinfo()}}` rely on that), so only helpers the DSL knows but
/// cannot run make a reason.
fn check_request_text(text: &str, reasons: &mut BTreeSet<Reason>) {
    if text.contains("interactsh") {
        reasons.insert(Reason::Interactsh);
    }
    if !text.contains("{{") {
        return;
    }
    // Parsing never fails on odd markers; they stay text.
    if let Ok(parsed) = dsl::TemplateString::parse(text) {
        for name in parsed.functions() {
            if !dsl::is_supported_helper(&name) {
                reasons.insert(Reason::UnsupportedDslHelper(name));
            }
        }
    }
}

/// A DSL matcher or extractor expression: it must parse, and every helper
/// it calls must run here.
fn check_dsl(expr: &str, reasons: &mut BTreeSet<Reason>) {
    if expr.contains("interactsh") {
        reasons.insert(Reason::Interactsh);
    }
    match dsl::Expr::parse(expr) {
        Ok(parsed) => {
            for name in parsed.functions() {
                if !dsl::is_supported_helper(&name) {
                    reasons.insert(Reason::UnsupportedDslHelper(name));
                } else if matches!(name.as_str(), "wait_for" | "waitfor") {
                    // It waits before a request is sent; judging a response
                    // there is nothing to wait for.
                    reasons.insert(Reason::UnsupportedDslHelper(format!("{name} in a matcher")));
                }
            }
        }
        Err(dsl::DslError::UnknownFunction(name)) => {
            reasons.insert(Reason::UnsupportedDslHelper(name));
        }
        Err(_) => {
            reasons.insert(Reason::UnsupportedDslExpression);
        }
    }
}
