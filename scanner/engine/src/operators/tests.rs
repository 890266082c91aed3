//! Behaviour of matchers, extractors and operators on response contexts
//! shaped like the ones the engine builds (`body`, `all_headers`, headers as
//! lower_snake names, `_N` history).

use std::collections::HashMap;

use super::*;
use crate::dsl::Value;

fn response(status: i64, headers: &[(&str, &str)], body: &str) -> HashMap<String, Value> {
    let mut raw_headers = format!("HTTP/1.1 {status} X\r\n");
    let mut ctx = HashMap::new();
    for (name, value) in headers {
        raw_headers.push_str(&format!("{name}: {value}\r\n"));
        ctx.insert(name.to_lowercase().replace('-', "_"), Value::str(value));
    }
    raw_headers.push_str("\r\n");
    ctx.insert("status_code".to_string(), Value::Int(status));
    ctx.insert("body".to_string(), Value::str(body));
    ctx.insert("content_length".to_string(), Value::Int(body.len() as i64));
    ctx.insert("all_headers".to_string(), Value::str(&raw_headers));
    ctx.insert("header".to_string(), Value::str(&raw_headers));
    ctx.insert(
        "response".to_string(),
        Value::str(format!("{raw_headers}{body}")),
    );
    ctx
}

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_saphyr::from_str(text).expect("test YAML parses")
}

fn matcher(text: &str) -> Matcher {
    Matcher::compile(&yaml::<MatcherDef>(text)).expect("matcher compiles")
}

fn extractor(text: &str) -> Extractor {
    Extractor::compile(&yaml::<ExtractorDef>(text)).expect("extractor compiles")
}

fn operators(matchers: &str, extractors: &str, condition: Option<&str>) -> Operators {
    let m: Vec<MatcherDef> = if matchers.is_empty() {
        Vec::new()
    } else {
        yaml(matchers)
    };
    let e: Vec<ExtractorDef> = if extractors.is_empty() {
        Vec::new()
    } else {
        yaml(extractors)
    };
    Operators::compile(&m, &e, condition).expect("operators compile")
}

const PAGE: &str = "<html><head><title>Admin Console</title></head><body>\
<table><tr><td><input name=\"csrf\" value=\"tok-123\"></td></tr></table>\
<a href=\"/login\">Login</a><a href=\"/help\">Help</a></body></html>";

// ---- word ----

#[test]
fn word_matcher_with_or_matches_when_any_word_is_present() {
    let m = matcher("type: word\nwords: [nothing-here, Console]");
    let out = m.matches(&response(200, &[], PAGE));
    assert!(out.matched);
    assert_eq!(out.snippets, vec!["Console"]);
}

#[test]
fn word_matcher_with_and_fails_when_one_word_is_missing() {
    let m = matcher("type: word\ncondition: and\nwords: [Admin, Console, missing-word]");
    assert!(!m.matches(&response(200, &[], PAGE)).matched);
    let m = matcher("type: word\ncondition: and\nwords: [Admin, Console]");
    assert!(m.matches(&response(200, &[], PAGE)).matched);
}

#[test]
fn negative_word_matcher_matches_only_when_the_word_is_absent() {
    let m = matcher("type: word\nnegative: true\nwords: [Admin]");
    assert!(!m.matches(&response(200, &[], PAGE)).matched);
    let out = m.matches(&response(200, &[], "plain page"));
    assert!(out.matched);
    assert!(out.snippets.is_empty());
}

#[test]
fn negative_matcher_on_a_part_the_response_lacks_does_not_match() {
    let m = matcher("type: word\nnegative: true\npart: x_missing_header\nwords: [a]");
    assert!(!m.matches(&response(200, &[], PAGE)).matched);
}

#[test]
fn case_insensitive_word_matcher_ignores_case() {
    let m = matcher("type: word\ncase-insensitive: true\nwords: [ADMIN console]");
    let out = m.matches(&response(200, &[], PAGE));
    assert!(out.matched);
    assert_eq!(out.snippets, vec!["admin console"]);
    let sensitive = matcher("type: word\nwords: [ADMIN console]");
    assert!(!sensitive.matches(&response(200, &[], PAGE)).matched);
}

#[test]
fn case_insensitive_word_matcher_folds_non_ascii_letters() {
    let m = matcher("type: word\ncase-insensitive: true\nwords: [ÉCOLE]");
    assert!(
        m.matches(&response(200, &[], "bienvenue à l'école"))
            .matched
    );
    assert!(!m.matches(&response(200, &[], "ecole")).matched);
}

#[test]
fn match_all_collects_every_matching_word() {
    let m = matcher("type: word\nmatch-all: true\nwords: [Login, absent, Help]");
    let out = m.matches(&response(200, &[], PAGE));
    assert!(out.matched);
    assert_eq!(out.snippets, vec!["Login", "Help"]);
    let first_only = matcher("type: word\nwords: [Login, absent, Help]");
    assert_eq!(
        first_only.matches(&response(200, &[], PAGE)).snippets,
        vec!["Login"]
    );
}

#[test]
fn hex_encoded_words_are_decoded_before_matching() {
    // "Admin" in hex.
    let m = matcher("type: word\nencoding: hex\nwords: ['41646d696e']");
    assert!(m.matches(&response(200, &[], PAGE)).matched);
    assert!(!m.matches(&response(200, &[], "41646d696e")).matched);
}

#[test]
fn word_markers_are_rendered_from_the_context() {
    let m = matcher("type: word\nwords: ['token={{csrf_token}}']");
    let mut ctx = response(200, &[], "ok token=abc123 done");
    assert!(
        !m.matches(&ctx).matched,
        "an unresolved marker searches for the word as written"
    );
    ctx.insert("csrf_token".to_string(), Value::str("abc123"));
    let out = m.matches(&ctx);
    assert!(out.matched);
    assert_eq!(out.snippets, vec!["token=abc123"]);
}

#[test]
fn header_part_reads_the_status_line_and_headers() {
    let m = matcher(
        "type: word\npart: header\nwords: ['HTTP/1.1 302', 'Location: /admin']\ncondition: and",
    );
    let ctx = response(302, &[("Location", "/admin")], "body");
    assert!(m.matches(&ctx).matched);
    let body_only = matcher("type: word\nwords: ['Location: /admin']");
    assert!(!body_only.matches(&ctx).matched);
}

#[test]
fn all_part_spans_headers_and_body_even_without_an_all_variable() {
    let m = matcher(
        "type: word\npart: all\ncondition: and\nwords: ['X-Powered-By: PHP', 'Admin Console']",
    );
    assert!(
        m.matches(&response(200, &[("X-Powered-By", "PHP")], PAGE))
            .matched
    );
}

#[test]
fn all_part_is_built_from_headers_and_body_when_no_raw_response_is_given() {
    let m = matcher("type: regex\npart: all\nregex: ['(?s)X-Powered-By: PHP.*Admin Console']");
    let mut ctx = response(200, &[("X-Powered-By", "PHP")], PAGE);
    ctx.remove("response");
    assert!(m.matches(&ctx).matched);
    ctx.remove("body");
    assert!(!m.matches(&ctx).matched);
}

#[test]
fn case_insensitive_regex_matcher_adds_the_i_flag() {
    let m = matcher("type: regex\ncase-insensitive: true\nregex: ['admin console']");
    assert!(m.matches(&response(200, &[], PAGE)).matched);
    let strict = matcher("type: regex\nregex: ['admin console']");
    assert!(!strict.matches(&response(200, &[], PAGE)).matched);
}

#[test]
fn response_header_parts_use_lower_snake_names() {
    let m = matcher("type: word\npart: x_powered_by\nwords: ['PHP/8']");
    assert!(
        m.matches(&response(200, &[("X-Powered-By", "PHP/8.1")], ""))
            .matched
    );
}

#[test]
fn an_unknown_part_is_a_miss_not_an_error() {
    let m = matcher("type: regex\npart: no_such_part\nregex: ['.*']");
    assert_eq!(
        m.matches(&response(200, &[], PAGE)),
        MatchOutcome::default()
    );
}

// ---- regex ----

#[test]
fn regex_matcher_matches_with_go_syntax_and_reports_the_match() {
    let m = matcher(
        r#"type: regex
regex: ['value="(tok-\d+)"']"#,
    );
    let out = m.matches(&response(200, &[], PAGE));
    assert!(out.matched);
    assert_eq!(out.snippets, vec![r#"value="tok-123""#]);
}

#[test]
fn regex_matcher_with_and_fails_when_one_regex_misses() {
    let m = matcher("type: regex\ncondition: and\nregex: ['Admin', 'Nope\\d+']");
    assert!(!m.matches(&response(200, &[], PAGE)).matched);
}

#[test]
fn regex_match_all_reports_every_match_of_every_regex() {
    let m = matcher("type: regex\nmatch-all: true\nregex: ['href=\"[^\"]+\"', 'title']");
    let out = m.matches(&response(200, &[], PAGE));
    assert_eq!(
        out.snippets,
        vec!["href=\"/login\"", "href=\"/help\"", "title", "title"]
    );
}

#[test]
fn regex_case_insensitive_flag_is_honoured() {
    let m = matcher("type: regex\npart: header\nregex: ['(?i)server: nginx']");
    assert!(
        m.matches(&response(200, &[("SERVER", "NGINX")], ""))
            .matched
    );
}

#[test]
fn go_regex_classes_are_ascii_like_in_go() {
    // Arabic-Indic digits are \d in Rust's Unicode mode but not in Go.
    let m = matcher(
        r"type: regex
regex: ['^\d+$']",
    );
    assert!(m.matches(&response(200, &[], "123")).matched);
    assert!(!m.matches(&response(200, &[], "١٢٣")).matched);
}

#[test]
fn go_regex_literal_braces_and_brackets_compile() {
    let m = matcher(
        r#"type: regex
regex: ['{"version":"[0-9.]+"}', '[[]x]']"#,
    );
    assert!(
        m.matches(&response(200, &[], r#"{"version":"1.2"}"#))
            .matched
    );
    assert!(m.matches(&response(200, &[], "[x]")).matched);
}

#[test]
fn whitespace_except_newline_class_keeps_its_meaning() {
    let m = matcher("type: regex\nregex: ['key[^\\S\\r\\n]*=[^\\S\\r\\n]*v']");
    assert!(m.matches(&response(200, &[], "key \t= v")).matched);
    assert!(!m.matches(&response(200, &[], "key\n= v")).matched);
}

#[test]
fn a_bad_regex_is_a_compile_error_naming_the_pattern() {
    let def: MatcherDef = yaml("type: regex\nregex: ['(unclosed']");
    let err = Matcher::compile(&def).expect_err("must fail");
    assert!(matches!(err, OperatorError::BadRegex(_)));
    assert!(err.to_string().contains("(unclosed"));
}

// ---- status, size, binary ----

#[test]
fn status_matcher_matches_a_302() {
    let m = matcher("type: status\nstatus: [301, 302]");
    let out = m.matches(&response(302, &[("Location", "/x")], ""));
    assert!(out.matched);
    assert_eq!(out.snippets, vec!["302"]);
    assert!(!m.matches(&response(200, &[], "")).matched);
}

#[test]
fn negative_status_matcher_rejects_listed_codes() {
    let m = matcher("type: status\nnegative: true\nstatus: [404]");
    assert!(m.matches(&response(200, &[], "")).matched);
    assert!(!m.matches(&response(404, &[], "")).matched);
}

#[test]
fn size_matcher_compares_the_body_length() {
    let m = matcher("type: size\nsize: [5]");
    assert!(m.matches(&response(200, &[], "hello")).matched);
    assert!(!m.matches(&response(200, &[], "hello!")).matched);
}

#[test]
fn binary_matcher_finds_hex_bytes_in_a_binary_body() {
    let m = matcher("type: binary\nbinary: ['1f8b0800', 'ffd8ff']\ncondition: or");
    let mut ctx = response(200, &[], "");
    ctx.insert(
        "body".to_string(),
        Value::str([0u8, 0x1f, 0x8b, 0x08, 0x00, 0xff]),
    );
    let out = m.matches(&ctx);
    assert!(out.matched);
    assert_eq!(out.snippets, vec!["1f8b0800"]);
    let both = matcher("type: binary\nbinary: ['1f8b0800', 'ffd8ff']\ncondition: and");
    assert!(!both.matches(&ctx).matched);
}

#[test]
fn binary_matcher_with_bad_hex_is_a_compile_error() {
    let def: MatcherDef = yaml("type: binary\nbinary: ['zz']");
    assert!(matches!(
        Matcher::compile(&def),
        Err(OperatorError::BadHex { .. })
    ));
}

// ---- dsl ----

#[test]
fn dsl_matcher_reads_history_variables() {
    let m =
        matcher("type: dsl\ndsl:\n  - 'status_code_1 == 302 && contains(body_2, \"dashboard\")'\n");
    let mut ctx = response(200, &[], "");
    ctx.insert("status_code_1".to_string(), Value::Int(302));
    ctx.insert("body_2".to_string(), Value::str("welcome to the dashboard"));
    assert!(m.matches(&ctx).matched);
    ctx.insert("status_code_1".to_string(), Value::Int(200));
    assert!(!m.matches(&ctx).matched);
}

#[test]
fn dsl_matcher_with_and_needs_every_expression_true() {
    let m = matcher("type: dsl\ncondition: and\ndsl: ['status_code == 200', 'len(body) > 100']");
    assert!(!m.matches(&response(200, &[], "short")).matched);
    assert!(m.matches(&response(200, &[], &"x".repeat(101))).matched);
}

#[test]
fn dsl_matcher_with_or_skips_expressions_that_cannot_be_evaluated() {
    let m = matcher("type: dsl\ndsl: ['missing_variable == 1', 'status_code == 200']");
    assert!(m.matches(&response(200, &[], "")).matched);
    let and =
        matcher("type: dsl\ncondition: and\ndsl: ['missing_variable == 1', 'status_code == 200']");
    assert!(!and.matches(&response(200, &[], "")).matched);
}

#[test]
fn a_dsl_expression_that_does_not_parse_is_a_compile_error() {
    let def: MatcherDef = yaml("type: dsl\ndsl: ['status_code == (']");
    assert!(matches!(
        Matcher::compile(&def),
        Err(OperatorError::BadDsl { .. })
    ));
}

// ---- xpath ----

#[test]
fn xpath_matcher_queries_html() {
    let m = matcher("type: xpath\nxpath: [\"/html/head/title[contains(text(), 'Admin')]\"]");
    assert!(m.matches(&response(200, &[], PAGE)).matched);
    assert!(
        !m.matches(&response(200, &[], "<html><title>Blog</title></html>"))
            .matched
    );
}

#[test]
fn xpath_sees_the_tbody_an_html5_parser_inserts() {
    let m = matcher("type: xpath\nxpath: ['/html/body/table/tbody/tr/td/input']");
    assert!(m.matches(&response(200, &[], PAGE)).matched);
}

#[test]
fn xpath_matcher_with_and_fails_when_one_query_selects_nothing() {
    let m = matcher("type: xpath\ncondition: and\nxpath: ['//title', '//form']");
    assert!(!m.matches(&response(200, &[], PAGE)).matched);
}

#[test]
fn xpath_supports_the_matches_function_used_by_sri_templates() {
    let m = matcher(
        "type: xpath\nxpath: [\"//script[contains(@src, '//') and not(matches(@integrity, '^sha(256|384|512)-'))]\"]",
    );
    let unsafe_page = "<html><body><script src='https://cdn.example/a.js'></script></body></html>";
    let safe_page = "<html><body><script src='https://cdn.example/a.js' integrity='sha384-abc'></script></body></html>";
    assert!(m.matches(&response(200, &[], unsafe_page)).matched);
    assert!(!m.matches(&response(200, &[], safe_page)).matched);
}

#[test]
fn xpath_on_xml_matches_prefixed_names_as_written() {
    let xml =
        "<?xml version=\"1.0\"?>\n<wfs:WFS_Capabilities xmlns=\"http://www.opengis.net/wfs\" \
xmlns:wfs=\"http://www.opengis.net/wfs\"><FeatureTypeList><FeatureType><Name>roads</Name>\
</FeatureType></FeatureTypeList></wfs:WFS_Capabilities>";
    let e = extractor(
        "type: xpath\nxpath: ['/wfs:WFS_Capabilities/FeatureTypeList/FeatureType[1]/Name']",
    );
    assert_eq!(e.extract(&response(200, &[], xml)), vec!["roads"]);
}

#[test]
fn xpath_prefixes_are_read_as_the_xpath_tokenizer_reads_names() {
    // Found by the operators fuzz target: a prefix starting with a
    // non-ASCII name character (U+FFFD) was bound without it, and the
    // evaluator panicked on the unbound prefix. Such names select nothing.
    for query in [
        "/html/body/\u{FFFD}pe:div[2]/main",
        "//\u{00E9}t\u{00E9}:item",
        "//a4b:item",
        "//x:y/z\u{00B7}q:w",
    ] {
        let e = extractor(&format!("type: xpath\nxpath: ['{query}']"));
        assert!(e.extract(&response(200, &[], PAGE)).is_empty(), "{query}");
    }
}

#[test]
fn a_bad_xpath_is_a_compile_error() {
    let def: MatcherDef = yaml("type: xpath\nxpath: ['//a[']");
    assert!(matches!(
        Matcher::compile(&def),
        Err(OperatorError::BadXPath { .. })
    ));
}

#[test]
fn an_unknown_matcher_type_is_a_compile_error() {
    let def: MatcherDef = yaml("type: telepathy\nwords: [a]");
    assert!(
        matches!(Matcher::compile(&def), Err(OperatorError::UnknownMatcherType(t)) if t == "telepathy")
    );
}

#[test]
fn a_matcher_without_its_values_is_a_compile_error() {
    let def: MatcherDef = yaml("type: word\npart: body");
    assert!(matches!(
        Matcher::compile(&def),
        Err(OperatorError::MissingValues { .. })
    ));
}

// ---- extractors ----

#[test]
fn regex_extractor_returns_the_requested_group_of_every_match_without_repeats() {
    let e = extractor("type: regex\ngroup: 1\nregex: ['href=\"([^\"]+)\"']");
    let body = format!("{PAGE}<a href=\"/login\">again</a>");
    assert_eq!(
        e.extract(&response(200, &[], &body)),
        vec!["/login", "/help"]
    );
}

#[test]
fn regex_extractor_defaults_to_the_whole_match() {
    let e = extractor("type: regex\nregex: ['tok-[0-9]+']");
    assert_eq!(e.extract(&response(200, &[], PAGE)), vec!["tok-123"]);
}

#[test]
fn regex_extractor_with_a_group_the_regex_lacks_extracts_nothing() {
    let e = extractor("type: regex\ngroup: 3\nregex: ['tok-([0-9]+)']");
    assert!(e.extract(&response(200, &[], PAGE)).is_empty());
}

#[test]
fn kval_extractor_reads_headers_by_normalised_name() {
    let e = extractor("type: kval\nkval: [Content-Type, x_missing, server]");
    let ctx = response(
        200,
        &[("Content-Type", "text/html"), ("Server", "nginx/1.25")],
        "",
    );
    assert_eq!(e.extract(&ctx), vec!["text/html", "nginx/1.25"]);
}

#[test]
fn kval_extractor_reads_cookies_by_their_own_name() {
    let e = extractor("type: kval\nkval: [csrf-token]");
    let mut ctx = response(200, &[], "");
    ctx.insert("csrf-token".to_string(), Value::str("c00kie"));
    assert_eq!(e.extract(&ctx), vec!["c00kie"]);
}

#[test]
fn kval_extractor_case_insensitive_lowercases_values() {
    let e = extractor("type: kval\ncase-insensitive: true\nkval: [server]");
    let ctx = response(200, &[("Server", "NGINX")], "");
    assert_eq!(e.extract(&ctx), vec!["nginx"]);
}

#[test]
fn json_extractor_runs_jq_paths_and_prints_like_nuclei() {
    let body = r#"{"version":"2.4.1","id":7,"users":[{"name":"ann","admin":true},{"name":"bob","admin":false}],"meta":{"a":1}}"#;
    let ctx = response(200, &[], body);
    let e = extractor(
        "type: json\njson: ['.version', '.id', '.users[].name', '.meta', '.users[0].admin']",
    );
    assert_eq!(
        e.extract(&ctx),
        vec!["2.4.1", "7", "ann", "bob", "{\"a\":1}", "true"]
    );
    let filtered = extractor(
        "type: json\njson: ['.users[] | select(.admin == true) | .name', '\"v: \" + .version']",
    );
    assert_eq!(filtered.extract(&ctx), vec!["ann", "v: 2.4.1"]);
}

#[test]
fn json_extractor_prints_objects_as_go_does() {
    let body = r#"{"cfg":{"b":2,"a":1.50,"c":[1,"x\"y"],"big":1e21,"n":null}}"#;
    let e = extractor("type: json\njson: ['.cfg', '.cfg.a', '.cfg.n']");
    assert_eq!(
        e.extract(&response(200, &[], body)),
        vec![
            r#"{"a":1.5,"b":2,"big":1e+21,"c":[1,"x\"y"],"n":null}"#,
            "1.5",
            "null"
        ]
    );
}

#[test]
fn json_extractor_on_a_body_that_is_not_json_extracts_nothing() {
    let e = extractor("type: json\njson: ['.version']");
    assert!(e.extract(&response(200, &[], "<html>")).is_empty());
}

#[test]
fn a_json_path_that_does_not_parse_is_a_compile_error() {
    let def: ExtractorDef = yaml("type: json\njson: ['.a[']");
    assert!(matches!(
        Extractor::compile(&def),
        Err(OperatorError::BadJsonPath { .. })
    ));
}

#[test]
fn xpath_extractor_reads_attributes_and_text() {
    let ctx = response(200, &[], PAGE);
    let attr = extractor("type: xpath\nattribute: value\nxpath: [\"//input[@name='csrf']\"]");
    assert_eq!(attr.extract(&ctx), vec!["tok-123"]);
    let text = extractor("type: xpath\nxpath: ['/html/head/title', '//a']");
    assert_eq!(text.extract(&ctx), vec!["Admin Console", "Login", "Help"]);
}

#[test]
fn dsl_extractor_returns_the_expression_value_as_text() {
    let e = extractor("type: dsl\ndsl: ['to_upper(server)', 'status_code * 2', 'missing_var']");
    let ctx = response(201, &[("Server", "caddy")], "");
    assert_eq!(e.extract(&ctx), vec!["CADDY", "402"]);
}

#[test]
fn an_unknown_extractor_type_is_a_compile_error() {
    let def: ExtractorDef = yaml("type: guess\nregex: [a]");
    assert!(matches!(
        Extractor::compile(&def),
        Err(OperatorError::UnknownExtractorType(_))
    ));
}

// ---- operators ----

#[test]
fn matchers_condition_and_fails_when_one_matcher_fails() {
    let ops = operators(
        "- type: status\n  status: [200]\n- type: word\n  words: [absent-word]\n",
        "",
        Some("and"),
    );
    let result = ops.evaluate(&response(200, &[], PAGE));
    assert!(result.has_matchers);
    assert!(!result.matched);
    let ops = operators(
        "- type: status\n  status: [200]\n- type: word\n  words: [Admin]\n",
        "",
        Some("and"),
    );
    assert!(ops.evaluate(&response(200, &[], PAGE)).matched);
}

#[test]
fn matchers_under_and_report_snippets_in_template_order() {
    let ops = operators(
        "- type: regex\n  regex: ['Adm[a-z]+']\n- type: word\n  words: [Console]\n- type: status\n  status: [200]\n",
        "",
        Some("and"),
    );
    let result = ops.evaluate(&response(200, &[], PAGE));
    assert!(result.matched);
    let snippets: Vec<Vec<String>> = result
        .matcher_snippets
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    assert_eq!(snippets, vec![vec!["Admin"], vec!["Console"], vec!["200"]]);
    assert!(!ops.evaluate(&response(500, &[], PAGE)).matched);
}

#[test]
fn matchers_condition_or_reports_each_named_matcher_that_matched() {
    let ops = operators(
        "- type: word\n  name: admin\n  words: [Admin]\n\
         - type: word\n  name: wordpress\n  words: [wp-content]\n\
         - type: word\n  name: login\n  words: [Login]\n\
         - type: status\n  name: hidden\n  internal: true\n  status: [200]\n",
        "",
        None,
    );
    let result = ops.evaluate(&response(200, &[], PAGE));
    assert!(result.matched);
    assert_eq!(result.matched_names, vec!["admin", "login"]);
}

#[test]
fn named_matchers_are_not_listed_under_and() {
    let ops = operators(
        "- type: word\n  name: admin\n  words: [Admin]\n",
        "",
        Some("and"),
    );
    let result = ops.evaluate(&response(200, &[], PAGE));
    assert!(result.matched);
    assert!(result.matched_names.is_empty());
}

#[test]
fn internal_matcher_decides_but_is_not_reported() {
    let ops = operators(
        "- type: status\n  name: gate\n  internal: true\n  status: [200]\n- type: word\n  words: [Admin]\n",
        "",
        Some("and"),
    );
    let result = ops.evaluate(&response(200, &[], PAGE));
    assert!(result.matched);
    assert!(result.matched_names.is_empty());
    assert!(!ops.evaluate(&response(403, &[], PAGE)).matched);
}

#[test]
fn internal_extractors_feed_internal_values_but_are_not_reported() {
    let ops = operators(
        "",
        "- type: regex\n  name: csrf\n  internal: true\n  group: 1\n  regex: ['value=\"([^\"]+)\"']\n\
         - type: kval\n  name: server\n  kval: [server]\n\
         - type: regex\n  regex: ['Admin \\w+']\n",
        None,
    );
    let result = ops.evaluate(&response(200, &[("Server", "nginx")], PAGE));
    assert!(!result.has_matchers);
    assert!(!result.matched);
    assert_eq!(
        result.extracts,
        vec![
            (Some("server".to_string()), vec!["nginx".to_string()]),
            (None, vec!["Admin Console".to_string()]),
        ]
    );
    assert_eq!(
        result.internal.get("csrf"),
        Some(&vec!["tok-123".to_string()])
    );
    assert_eq!(
        result.internal.get("server"),
        Some(&vec!["nginx".to_string()])
    );
    assert_eq!(result.extracted_results(), vec!["nginx", "Admin Console"]);
}

#[test]
fn extracted_values_are_visible_to_matchers_of_the_same_response() {
    let ops = operators(
        "- type: dsl\n  dsl: ['compare_versions(version, \"< 3.0.0\")']\n",
        "- type: regex\n  name: version\n  internal: true\n  group: 1\n  regex: ['Version ([0-9.]+)']\n",
        None,
    );
    assert!(ops.evaluate(&response(200, &[], "Version 2.4.1")).matched);
    assert!(!ops.evaluate(&response(200, &[], "Version 3.1.0")).matched);
}

#[test]
fn a_later_extractor_reads_the_values_of_an_earlier_named_one() {
    let ops = operators(
        "",
        "- type: regex\n  name: version\n  internal: true\n  group: 1\n  regex: ['Version ([0-9.]+)']\n\
         - type: dsl\n  dsl: ['concat(\"v\", version)']\n",
        None,
    );
    let result = ops.evaluate(&response(200, &[], "Version 2.4.1"));
    assert_eq!(result.extracted_results(), vec!["v2.4.1"]);
}

#[test]
fn without_a_match_only_named_and_internal_extractors_produce_values() {
    let ops = operators(
        "- type: status\n  status: [200]\n",
        "- type: regex\n  name: csrf\n  internal: true\n  regex: ['tok-[0-9]+']\n\
         - type: regex\n  regex: ['Admin [A-Za-z]+']\n",
        None,
    );
    let missed = ops.evaluate(&response(404, &[], PAGE));
    assert!(!missed.matched);
    assert!(missed.extracts.is_empty());
    assert_eq!(
        missed.internal.get("csrf"),
        Some(&vec!["tok-123".to_string()])
    );
    let hit = ops.evaluate(&response(200, &[], PAGE));
    assert_eq!(
        hit.extracts,
        vec![(None, vec!["Admin Console".to_string()])]
    );
}

#[test]
fn matched_snippets_come_with_the_matcher_name() {
    let ops = operators(
        "- type: word\n  name: tech\n  match-all: true\n  words: [Login, Help]\n",
        "",
        None,
    );
    let result = ops.evaluate(&response(200, &[], PAGE));
    assert_eq!(
        result.matcher_snippets,
        vec![(
            Some("tech".to_string()),
            vec!["Login".to_string(), "Help".to_string()]
        )]
    );
}

#[test]
fn an_unknown_matchers_condition_is_a_compile_error() {
    let err = Operators::compile(&[], &[], Some("xor")).expect_err("must fail");
    assert!(matches!(err, OperatorError::UnknownCondition(c) if c == "xor"));
}

#[test]
fn compiled_operators_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Operators>();
    assert_send_sync::<Matcher>();
    assert_send_sync::<Extractor>();

    let ops = operators(
        "- type: word\n  words: [Admin]\n",
        "- type: json\n  json: ['.a']\n",
        None,
    );
    let ctx_page = response(200, &[], PAGE);
    let matched: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| ops.evaluate(&ctx_page).matched))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .collect()
    });
    assert_eq!(matched, vec![true; 4]);
}

// ---- on real responses ----

/// Serves two fixed responses on a local port: a redirect and an HTML page.
async fn lab_server() -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let body = if seen.starts_with(b"GET /old ") {
                    "HTTP/1.1 302 Found\r\nLocation: /admin/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\nServer: Lab/1.0\r\nContent-Type: text/html\r\nSet-Cookie: sessionid=s3cr3t; Path=/\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                        PAGE.len()
                    )
                };
                let _ = stream.write_all(body.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    addr
}

async fn fetch(addr: std::net::SocketAddr, path: &str) -> crate::engine::response::ResponseVars {
    use scanfleet_http::{ClientConfig, HttpClient, Request, SendOptions, TargetUrl};
    let client = HttpClient::new(ClientConfig {
        allow_private: true,
        ..ClientConfig::default()
    })
    .expect("client");
    let url = TargetUrl::parse(&format!("http://{addr}{path}")).expect("url");
    let response = client
        .send(&Request::get(&url), &SendOptions::default())
        .await
        .expect("response");
    let names = crate::engine::response::RunNames::new(&url.to_string(), "operators-test");
    crate::engine::response::ResponseVars::new(
        std::sync::Arc::new(response),
        &crate::dsl::Bytes::new(),
        &names,
    )
}

#[tokio::test]
async fn a_302_is_matched_on_a_real_response_when_redirects_are_off() {
    let addr = lab_server().await;
    let ctx = fetch(addr, "/old").await;
    let ops = operators(
        "- type: status\n  status: [302]\n- type: word\n  part: header\n  words: ['HTTP/1.1 302', 'Location: /admin/']\n  condition: and\n",
        "- type: kval\n  kval: [location]\n",
        Some("and"),
    );
    let result = ops.evaluate(&ctx);
    assert!(result.matched);
    assert_eq!(result.extracted_results(), vec!["/admin/"]);
}

#[tokio::test]
async fn operators_read_headers_cookies_and_html_of_a_real_response() {
    let addr = lab_server().await;
    let ctx = fetch(addr, "/").await;
    let ops = operators(
        "- type: dsl\n  name: lab\n  dsl: ['status_code == 200 && contains(server, \"Lab\") && content_length == len(body)']\n\
         - type: regex\n  name: never\n  part: header\n  regex: ['(?m)^X-Missing:']\n",
        "- type: xpath\n  name: csrf\n  internal: true\n  attribute: value\n  xpath: [\"//input[@name='csrf']\"]\n\
         - type: kval\n  kval: [sessionid, content_type]\n",
        None,
    );
    let result = ops.evaluate(&ctx);
    assert!(result.matched);
    assert_eq!(result.matched_names, vec!["lab"]);
    assert_eq!(
        result.internal.get("csrf"),
        Some(&vec!["tok-123".to_string()])
    );
    assert_eq!(result.extracted_results(), vec!["s3cr3t", "text/html"]);
}

const VERSION_PAGE: &str = "<title>Admin Console</title> Version 2.4.1";

/// [`operators`], then [`Operators::defer_unread_extractors`].
fn deferring(matchers: &str, extractors: &str, read_elsewhere: fn(&str) -> bool) -> Operators {
    let mut ops = operators(matchers, extractors, None);
    let m: Vec<MatcherDef> = if matchers.is_empty() {
        Vec::new()
    } else {
        yaml(matchers)
    };
    let e: Vec<ExtractorDef> = yaml(extractors);
    ops.defer_unread_extractors(&m, &e, read_elsewhere);
    ops
}

#[test]
fn a_deferred_extractor_runs_only_on_a_match_and_reports_what_it_did_before() {
    let (matchers, extractors) = (
        "- type: status\n  status: [200]\n",
        "- type: regex\n  name: version\n  group: 1\n  regex: ['Version ([0-9.]+)']\n\
         - type: regex\n  regex: ['Admin [A-Za-z]+']\n",
    );
    let eager = operators(matchers, extractors, None);
    let deferred = deferring(matchers, extractors, |_| false);
    assert_eq!(deferred.deferred_extractors(), 1);

    // No match: the deferred extractor did not run, so it left no value.
    let missed = deferred.evaluate(&response(404, &[], VERSION_PAGE));
    assert!(!missed.matched);
    assert!(missed.extracts.is_empty());
    assert!(missed.internal.is_empty());
    assert_eq!(
        eager
            .evaluate(&response(404, &[], VERSION_PAGE))
            .internal
            .get("version"),
        Some(&vec!["2.4.1".to_string()])
    );

    // A match: the same output, in template order, as when run eagerly.
    let hit = deferred.evaluate(&response(200, &[], VERSION_PAGE));
    assert_eq!(hit, eager.evaluate(&response(200, &[], VERSION_PAGE)));
    assert_eq!(
        hit.extracts,
        vec![
            (Some("version".to_string()), vec!["2.4.1".to_string()]),
            (None, vec!["Admin Console".to_string()]),
        ]
    );
}

#[test]
fn an_extractor_whose_values_something_may_read_is_not_deferred() {
    let version = "- type: regex\n  name: version\n  group: 1\n  regex: ['Version ([0-9.]+)']\n";
    let status = "- type: status\n  status: [200]\n";
    let cases: [(&str, String, &str); 7] = [
        // A matcher reads it.
        (
            "read by a matcher",
            version.to_string(),
            "- type: dsl\n  dsl: ['compare_versions(version, \"< 3\")']\n",
        ),
        // Spelled otherwise, still read.
        (
            "read as Ver-sion",
            version.replace("name: version", "name: ver-sion"),
            "- type: word\n  words: ['{{VER_SION}}']\n",
        ),
        // A later extractor reads it.
        (
            "read by a later extractor",
            format!("{version}- type: dsl\n  dsl: ['concat(\"v\", version)']\n"),
            status,
        ),
        // Its name shadows a part the matchers read without naming it.
        (
            "named body",
            version.replace("name: version", "name: body"),
            "- type: word\n  words: ['Admin']\n",
        ),
        // It reads a later extractor's name, whose value it would see if
        // it ran after it (and the later one is read, so it stays too).
        (
            "reads a later name",
            "- type: dsl\n  name: both\n  dsl: ['concat(\"x\", build)']\n\
             - type: regex\n  name: build\n  internal: true\n  regex: ['Version']\n"
                .to_string(),
            status,
        ),
        // Two extractors share the name: their values merge in order.
        ("shared name", format!("{version}{version}"), status),
        // No matchers: every extractor runs anyway.
        ("no matchers", version.to_string(), ""),
    ];
    for (what, extractors, matchers) in cases {
        let eager = operators(matchers, &extractors, None);
        let ops = deferring(matchers, &extractors, |_| false);
        assert_eq!(ops.deferred_extractors(), 0, "{what}");
        for status in [200, 404] {
            let page = response(status, &[], VERSION_PAGE);
            assert_eq!(ops.evaluate(&page), eager.evaluate(&page), "{what}");
        }
    }
    // Read outside these operators (a later request, another block).
    let ops = deferring(status, version, |name| name == "version");
    assert_eq!(ops.deferred_extractors(), 0);
}
