//! Preparing a loaded template for execution: every `{{...}}` string parsed
//! once, operators compiled, payload lists checked, clustering key computed.

use std::sync::Arc;

use super::error::{CompileError, EngineError};
use super::payloads::PayloadSet;
use super::result::ResultHead;
use super::vars::{string_value, VarMap};
use crate::dsl::TemplateString;
use crate::operators::defs::mentions;
use crate::operators::Operators;
use crate::template::{FlowExpr, HttpBlock, Template};

/// A template ready to run against any number of targets.
pub struct CompiledTemplate {
    pub template: Arc<Template>,
    pub head: ResultHead,
    /// Template `variables`, in order (later ones may use earlier ones).
    pub variables: Vec<(String, TemplateString)>,
    pub blocks: Vec<CompiledBlock>,
    /// A boolean `flow:` deciding which blocks run; `None` runs them in order.
    pub flow: Option<FlowExpr>,
    /// A `flow:` that is JavaScript proper (not a boolean over blocks), run
    /// by [`crate::flowjs`] instead; `flow` is then `None`.
    pub script_flow: Option<Arc<str>>,
    /// Set when the template is one plain request that other templates may
    /// share (see the engine's clustering).
    pub cluster_key: Option<String>,
    /// Nuclei's per-template constants: `{{randstr}}`, `{{randstr_1}}`, ...
    /// each a random string fixed for the life of the compiled template, so a
    /// value sent in one request can be looked for in a later response.
    pub constants: Arc<VarMap>,
}

impl std::fmt::Debug for CompiledTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledTemplate")
            .field("id", &self.head.template_id)
            .field("blocks", &self.blocks.len())
            .finish()
    }
}

/// One `http:` block.
pub struct CompiledBlock {
    /// Block `id`: its responses are visible to later blocks as `{id}_{name}`.
    pub id: Option<String>,
    pub requests: Vec<RequestSpec>,
    /// Per request: `@once`, sent with the first payload combination only.
    pub once: Vec<bool>,
    pub method: TemplateString,
    pub headers: Vec<(String, TemplateString)>,
    pub body: Option<TemplateString>,
    pub payloads: PayloadSet,
    pub operators: Operators,
    /// Matchers combine with `or` (the default) rather than `and`.
    pub or_condition: bool,
    /// `req-condition: true`: matchers run once, after every request, on the
    /// whole history.
    pub req_condition: bool,
    /// Operators refer to `_N` history (`body_2`), so it must be kept.
    pub needs_history: bool,
    pub stop_at_first_match: bool,
    /// The operators read interactsh parts (`interactsh_protocol`, ...):
    /// a request carrying payload hosts is judged when they are called.
    pub uses_interactsh: bool,
    pub redirects: bool,
    pub max_redirects: u32,
    pub host_redirects: bool,
    /// Keep cookies between the requests of this template on one target.
    pub cookie_jar: bool,
    /// `unsafe: true`: raw requests go out byte for byte.
    pub unsafe_raw: bool,
    /// `skip-variables-check: true`: send requests with unresolved markers.
    pub skip_variables_check: bool,
    /// `iterate-all: true`: later requests go once per extracted value.
    pub iterate_all: bool,
    /// `digest-username` / `digest-password`: answer a Digest challenge.
    pub digest: Option<Arc<DigestCredentials>>,
}

/// HTTP Digest credentials of a block, used as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestCredentials {
    pub username: String,
    pub password: String,
}

/// One entry of `path:` or `raw:`.
pub enum RequestSpec {
    Path(PathSpec),
    Raw(TemplateString),
}

/// One `path:` entry, with what its leading variable implies.
pub struct PathSpec {
    pub template: TemplateString,
    /// `{{BaseURL}}:8080/...` sends to port 8080.
    pub port_override: Option<String>,
    /// `{{BaseURL}}/...`: the input path's trailing slash is dropped.
    pub trailing_slash: bool,
    /// The path as written, for the clustering key.
    pub source: String,
}

/// Nuclei follows at most 10 redirects unless told otherwise.
const DEFAULT_MAX_REDIRECTS: u32 = 10;

impl CompiledTemplate {
    pub fn compile(template: Template) -> Result<CompiledTemplate, EngineError> {
        Self::compile_arc(Arc::new(template))
    }

    pub fn compile_arc(template: Arc<Template>) -> Result<CompiledTemplate, EngineError> {
        let id = template.id.clone();
        let err = |cause: CompileError| EngineError::Compile {
            template_id: id.clone(),
            cause,
        };
        let parse = |s: &str| {
            TemplateString::parse(s).map_err(|source| {
                err(CompileError::Text {
                    text: s.to_string(),
                    source,
                })
            })
        };
        let mut variables = Vec::new();
        for (name, value) in template_variables(&template) {
            variables.push((name, parse(&value)?));
        }
        let mut blocks = Vec::new();
        for block in &template.http {
            blocks.push(compile_block(
                &id,
                block,
                template.stop_at_first_match,
                &parse,
                &err,
            )?);
        }
        let (flow, script_flow) = match template.flow.as_deref().filter(|f| !f.trim().is_empty()) {
            Some(text) => match FlowExpr::parse(text, blocks.len()) {
                Ok(expr) => (Some(expr), None),
                // Not a boolean flow: JavaScript, checked for syntax here so
                // a broken script is refused at load, not on every target.
                Err(_) => {
                    crate::flowjs::check_syntax(text).map_err(|e| err(e.into()))?;
                    (None, Some(Arc::from(text)))
                }
            },
            None => (None, None),
        };
        if flow.is_none() && script_flow.is_none() {
            for (index, (block, def)) in blocks.iter_mut().zip(&template.http).enumerate() {
                block
                    .operators
                    .defer_unread_extractors(&def.matchers, &def.extractors, |name| {
                        read_outside_block(&template, index, name)
                    });
            }
        }
        let info = &template.info;
        let head = ResultHead {
            template_id: id.clone(),
            name: info.name.clone(),
            severity: info.severity,
            host: String::new(),
            description: info.description.clone().unwrap_or_default(),
            remediation: info.remediation.clone().unwrap_or_default(),
            classification: classification_of(info),
        };
        let constants = Arc::new(random_constants(&template));
        // A template with its own random values must send them itself.
        let cluster_key = cluster_key(&template, &blocks)
            .filter(|_| constants.is_empty() && flow.is_none() && script_flow.is_none());
        Ok(CompiledTemplate {
            constants,
            template,
            head,
            variables,
            blocks,
            flow,
            script_flow,
            cluster_key,
        })
    }
}

/// Whether anything of `template` outside block `index`'s own operators
/// may read the extracted value `name`: a request of any block (so also a
/// later request of the same block), a payload value, the template's
/// variables, another block's operators. A block with `iterate-all`, or
/// with payloads the loader has not read, counts as reading every name. A
/// flow is decided by the caller: a script may read any name.
fn read_outside_block(template: &Template, index: usize, name: &str) -> bool {
    let text = |t: &str| mentions(t, name);
    let opt = |t: &Option<String>| t.as_deref().is_some_and(text);
    template.variables.iter().any(|(n, v)| text(n) || text(v))
        || template.http.iter().enumerate().any(|(i, block)| {
            (!block.payload_defs.is_empty() && block.payloads.is_empty())
                || block
                    .payloads
                    .iter()
                    .any(|(n, values)| text(n) || values.iter().any(|v| text(v)))
                || block.iterate_all
                || block.request_texts().any(text)
                || block.headers.iter().any(|(n, v)| text(n) || text(v))
                || [
                    &block.method,
                    &block.body,
                    &block.digest_username,
                    &block.digest_password,
                ]
                .into_iter()
                .any(opt)
                || (i != index
                    && (block.matchers.iter().any(|m| m.mentions(name))
                        || block
                            .extractors
                            .iter()
                            .any(|x| x.mentions(name) || x.name.as_deref().is_some_and(text))))
        })
}

fn compile_block(
    id: &str,
    block: &HttpBlock,
    template_stop: bool,
    parse: &dyn Fn(&str) -> Result<TemplateString, EngineError>,
    err: &dyn Fn(CompileError) -> EngineError,
) -> Result<CompiledBlock, EngineError> {
    let mut requests = Vec::new();
    for p in &block.path {
        requests.push(RequestSpec::Path(path_spec(p, parse)?));
    }
    let mut once = vec![false; requests.len()];
    for r in &block.raw {
        requests.push(RequestSpec::Raw(parse(r)?));
        once.push(has_once_annotation(r));
    }
    let mut headers = Vec::new();
    for (name, value) in block.headers.iter() {
        headers.push((name.clone(), parse(value)?));
    }
    let body = match &block.body {
        Some(b) if !b.is_empty() => Some(parse(b)?),
        _ => None,
    };
    let payloads = PayloadSet::new(id, block.attack.as_deref(), block_payloads(block))?;
    let operators = Operators::compile(
        &block.matchers,
        &block.extractors,
        block.matchers_condition.as_deref(),
    )
    .map_err(|e| err(e.into()))?;
    let or_condition = !block
        .matchers_condition
        .as_deref()
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("and"));
    let needs_history = block.req_condition || refers_to_history(block);
    Ok(CompiledBlock {
        id: block.id.clone().filter(|s| !s.is_empty()),
        requests,
        once,
        method: parse(block.method.as_deref().unwrap_or("GET"))?,
        headers,
        body,
        payloads,
        operators,
        or_condition,
        req_condition: block.req_condition,
        needs_history,
        stop_at_first_match: block.stop_at_first_match || template_stop,
        uses_interactsh: reads_interactsh(block),
        redirects: block.redirects || block.host_redirects,
        max_redirects: block.max_redirects.unwrap_or(DEFAULT_MAX_REDIRECTS),
        host_redirects: block.host_redirects,
        cookie_jar: !block.disable_cookie,
        unsafe_raw: block.unsafe_,
        skip_variables_check: block.skip_variables_check,
        iterate_all: block.iterate_all,
        digest: (block.digest_username.is_some() || block.digest_password.is_some()).then(|| {
            Arc::new(DigestCredentials {
                username: block.digest_username.clone().unwrap_or_default(),
                password: block.digest_password.clone().unwrap_or_default(),
            })
        }),
    })
}

/// An `@once` line before the request line.
fn has_once_annotation(raw: &str) -> bool {
    raw.lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| l.starts_with('@'))
        .any(|l| l == "@once")
}

fn path_spec(
    path: &str,
    parse: &dyn Fn(&str) -> Result<TemplateString, EngineError>,
) -> Result<PathSpec, EngineError> {
    let mut text = path.trim_start().to_string();
    let mut port_override = None;
    for var in ["{{BaseURL}}:", "{{RootURL}}:"] {
        if let Some(rest) = text.strip_prefix(var) {
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if !digits.is_empty() {
                text = format!("{}{}", &var[..var.len() - 1], &rest[digits.len()..]);
                port_override = Some(digits);
            }
            break;
        }
    }
    let trailing_slash = starts_with_variable_then_slash(&text);
    Ok(PathSpec {
        template: parse(&text)?,
        port_override,
        trailing_slash,
        source: path.to_string(),
    })
}

/// `{{Name}}/...` (Nuclei's `^{{[a-zA-Z]+}}/`).
fn starts_with_variable_then_slash(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("{{") else {
        return false;
    };
    let name_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
    name_len > 0 && rest[name_len..].starts_with("}}/")
}

/// Any `_<digits>` in a DSL expression or part name (Nuclei's test for
/// whether a block needs the numbered history).
fn refers_to_history(block: &HttpBlock) -> bool {
    let has = |s: &str| {
        let b = s.as_bytes();
        b.windows(2).any(|w| w[0] == b'_' && w[1].is_ascii_digit())
    };
    block.matchers.iter().any(|m| {
        m.part.as_deref().is_some_and(has)
            || m.dsl
                .as_ref()
                .is_some_and(|d| d.to_vec().iter().any(|e| has(e)))
    }) || block.extractors.iter().any(|x| {
        x.part.as_deref().is_some_and(has)
            || x.dsl
                .as_ref()
                .is_some_and(|d| d.to_vec().iter().any(|e| has(e)))
    })
}

/// The template's `variables` as (name, text), in order.
fn template_variables(template: &Template) -> Vec<(String, String)> {
    template
        .variables
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The block's payload lists as (name, values), in order.
fn block_payloads(block: &HttpBlock) -> Vec<(String, Vec<String>)> {
    block
        .payloads
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Length of a `randstr` value (Nuclei uses 27-character KSUIDs).
const RANDSTR_LEN: usize = 27;

/// A `randstr` value for every `randstr` / `randstr_<suffix>` name the
/// template mentions anywhere (requests, variables, matchers, extractors).
fn random_constants(template: &Template) -> VarMap {
    use rand::Rng;
    let mut texts: Vec<&str> = template.variables.iter().map(|(_, v)| v.as_str()).collect();
    let mut owned: Vec<String> = Vec::new();
    for block in &template.http {
        texts.extend(block.request_texts());
        texts.extend(block.headers.iter().map(|(_, v)| v.as_str()));
        texts.extend(block.body.as_deref());
        for m in &block.matchers {
            for list in [&m.words, &m.regex, &m.dsl].into_iter().flatten() {
                owned.extend(list.to_vec());
            }
        }
        for x in &block.extractors {
            for list in [&x.regex, &x.dsl].into_iter().flatten() {
                owned.extend(list.to_vec());
            }
        }
    }
    texts.extend(owned.iter().map(String::as_str));
    let mut out = VarMap::default();
    let mut rng = rand::rng();
    for text in texts {
        let mut rest = text;
        while let Some(at) = rest.find("randstr") {
            let after = &rest[at + "randstr".len()..];
            let suffix_len = after
                .strip_prefix('_')
                .map(|s| 1 + s.chars().take_while(|c| c.is_ascii_alphanumeric()).count())
                .unwrap_or(0);
            let name = &rest[at..at + "randstr".len() + suffix_len];
            let preceded_ok = rest[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
            if preceded_ok && !out.contains_key(name) {
                let value: String = (&mut rng)
                    .sample_iter(&rand::distr::Alphanumeric)
                    .take(RANDSTR_LEN)
                    .map(char::from)
                    .collect();
                out.insert(name.to_string(), string_value(value));
            }
            rest = &rest[at + name.len()..];
        }
    }
    out
}

/// Nuclei's `HasMatchers`: a matcher or extractor reads an interactsh part,
/// or a DSL matcher names one.
fn reads_interactsh(block: &HttpBlock) -> bool {
    let part = |p: &Option<String>| {
        p.as_deref()
            .is_some_and(|p| p.trim().to_ascii_lowercase().starts_with("interactsh"))
    };
    block.matchers.iter().any(|m| {
        part(&m.part)
            || m.dsl
                .as_ref()
                .is_some_and(|d| d.to_vec().iter().any(|e| e.contains("interactsh")))
    }) || block.extractors.iter().any(|x| part(&x.part))
}

/// Templates with the same key send the same single request and can share
/// its response. Only a lone path request without payloads, template
/// variables or history qualifies: anything else could differ per template.
fn cluster_key(template: &Template, blocks: &[CompiledBlock]) -> Option<String> {
    if blocks.len() != 1 || !template.variables.is_empty() {
        return None;
    }
    let block = &template.http[0];
    let compiled = &blocks[0];
    if compiled.requests.len() != 1
        || !compiled.payloads.is_empty()
        || compiled.needs_history
        || compiled.digest.is_some()
    {
        return None;
    }
    let RequestSpec::Path(path) = &compiled.requests[0] else {
        return None;
    };
    let method = block.method.as_deref().unwrap_or("GET").trim();
    if !method.eq_ignore_ascii_case("GET") {
        return None;
    }
    // Payload hosts are made per request: never one request for many.
    let oob = |t: &str| t.contains("interactsh");
    if oob(&path.source) || block.headers.iter().any(|(k, v)| oob(k) || oob(v)) {
        return None;
    }
    let mut headers: Vec<String> = block
        .headers
        .iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    headers.sort();
    Some(format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
        block
            .method
            .as_deref()
            .unwrap_or("GET")
            .to_ascii_uppercase(),
        path.source,
        headers.join("\u{1}"),
        block.body.as_deref().unwrap_or(""),
        compiled.redirects,
        compiled.max_redirects,
        compiled.host_redirects,
    ))
}

/// The template's references and classification as findings carry them.
fn classification_of(info: &crate::template::Info) -> scanfleet_common::events::Classification {
    let class = info.classification.as_ref();
    let ids = |v: Option<&Vec<String>>| -> Vec<String> {
        v.map(|v| {
            v.iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
    };
    scanfleet_common::events::Classification {
        references: info
            .reference
            .iter()
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect(),
        cve_ids: ids(class.map(|c| &c.cve_id)),
        cwe_ids: ids(class.map(|c| &c.cwe_id)),
        cvss_score: class.and_then(|c| c.cvss_score),
        cvss_metrics: class
            .and_then(|c| c.cvss_metrics.clone())
            .filter(|m| !m.trim().is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deferred(yaml: &str) -> Vec<usize> {
        let template = crate::template::parse_str(yaml, std::path::Path::new("t.yaml"))
            .expect("template parses");
        CompiledTemplate::compile(template)
            .expect("template compiles")
            .blocks
            .iter()
            .map(|b| b.operators.deferred_extractors())
            .collect()
    }

    const HEAD: &str = "id: t\ninfo:\n  name: t\n  severity: info\n";
    const VERSION: &str = "    extractors:\n      - type: regex\n        name: version\n        regex: ['Version [0-9.]+']\n    matchers:\n      - type: status\n        status: [200]\n";

    #[test]
    fn an_extractor_waits_for_the_verdict_only_when_no_later_request_can_read_it() {
        let one = format!("{HEAD}http:\n  - path: ['{{{{BaseURL}}}}/a']\n{VERSION}");
        assert_eq!(deferred(&one), vec![1]);
        // The next request of the block sends the value.
        let next = format!("{HEAD}http:\n  - path: ['{{{{BaseURL}}}}/a', '{{{{BaseURL}}}}/{{{{version}}}}']\n{VERSION}");
        assert_eq!(deferred(&next), vec![0]);
        // A later block's matcher reads it.
        let later = format!(
            "{HEAD}http:\n  - path: ['{{{{BaseURL}}}}/a']\n{VERSION}  - path: ['{{{{BaseURL}}}}/b']\n    matchers:\n      - type: dsl\n        dsl: ['len(version) > 0']\n"
        );
        assert_eq!(deferred(&later), vec![0, 0]);
        // Payload requests repeat; one whose value sends the name reads it.
        let payloads = |values: &str| {
            format!("{HEAD}http:\n  - path: ['{{{{BaseURL}}}}/{{{{p}}}}']\n    payloads:\n      p: [{values}]\n{VERSION}")
        };
        assert_eq!(deferred(&payloads("a, b")), vec![1]);
        assert_eq!(deferred(&payloads("a, '{{{{version}}}}'")), vec![0]);
        // A flow may read anything.
        let flow =
            format!("{HEAD}flow: http(1)\nhttp:\n  - path: ['{{{{BaseURL}}}}/a']\n{VERSION}");
        assert_eq!(deferred(&flow), vec![0]);
    }

    #[test]
    fn trailing_slash_rule_needs_a_variable_then_a_slash() {
        assert!(starts_with_variable_then_slash("{{BaseURL}}/x"));
        assert!(!starts_with_variable_then_slash("{{BaseURL}}?x"));
        assert!(!starts_with_variable_then_slash("/x"));
    }
}
