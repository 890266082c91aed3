//! Behaviour of the language as a whole: operators, typing, interpolation,
//! and the expressions real templates contain.

use std::collections::HashMap;
use std::path::Path;

use super::*;

fn scope(pairs: &[(&str, Value)]) -> HashMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn ev(src: &str) -> Value {
    evaluate(src, &NoVars).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn ev_err(src: &str, vars: &dyn Vars) -> DslError {
    match evaluate(src, vars) {
        Ok(v) => panic!("{src} should fail, got {v:?}"),
        Err(e) => e,
    }
}

#[test]
fn arithmetic_follows_usual_precedence() {
    assert_eq!(ev("1 + 2 * 3"), Value::Int(7));
    assert_eq!(ev("(1 + 2) * 3"), Value::Int(9));
    assert_eq!(ev("10 - 4 - 3"), Value::Int(3));
    // govaluate: `**` is left-associative and prefixes bind tighter.
    assert_eq!(ev("2 ** 3 ** 2"), Value::Int(64));
    assert_eq!(ev("-2 ** 2"), Value::Int(4));
    assert_eq!(ev("2 * 3 ** 2"), Value::Int(18));
    assert_eq!(ev("7 % 4"), Value::Int(3));
    assert_eq!(ev("10 / 4"), Value::Float(2.5));
    assert_eq!(ev("10 / 5"), Value::Int(2));
    assert_eq!(ev("1.5 + 1"), Value::Float(2.5));
    assert_eq!(ev("-(3)"), Value::Int(-3));
}

#[test]
fn logical_operators_bind_looser_than_comparisons() {
    assert_eq!(ev("1 < 2 && 3 > 2 || false"), Value::Bool(true));
    assert_eq!(ev("false && true || true"), Value::Bool(true));
    assert_eq!(ev("true || false && false"), Value::Bool(true));
    assert_eq!(ev("!(1 == 1)"), Value::Bool(false));
    assert_eq!(ev("!false && true"), Value::Bool(true));
}

#[test]
fn bitwise_operators_bind_tighter_than_comparisons_as_in_govaluate() {
    assert_eq!(ev("6 & 3 == 2"), Value::Bool(true));
    assert_eq!(ev("1 | 4"), Value::Int(5));
    assert_eq!(ev("5 ^ 1"), Value::Int(4));
    assert_eq!(ev("1 << 4"), Value::Int(16));
    assert_eq!(ev("256 >> 4"), Value::Int(16));
    assert_eq!(ev("~0"), Value::Int(-1));
}

#[test]
fn logical_operators_short_circuit() {
    // The right side would fail (undefined variable) if it were evaluated.
    assert_eq!(ev("false && missing_var"), Value::Bool(false));
    assert_eq!(ev("true || missing_var"), Value::Bool(true));
    assert!(matches!(
        ev_err("true && missing_var", &NoVars),
        DslError::UndefinedVariable(name) if name == "missing_var"
    ));
}

#[test]
fn logical_operators_require_booleans() {
    assert!(matches!(
        ev_err("'abc' && true", &NoVars),
        DslError::TypeMismatch { .. }
    ));
    assert!(matches!(
        ev_err("!'abc'", &NoVars),
        DslError::TypeMismatch { .. }
    ));
}

#[test]
fn ternary_and_coalesce_choose_values() {
    assert_eq!(ev("1 > 2 ? 'a' : 'b'").to_string_lossy(), "b");
    assert_eq!(ev("true ? 'x' : 'y'").to_string_lossy(), "x");
    assert_eq!(ev("false ? 1 : true ? 2 : 3"), Value::Int(2));
    let vars = scope(&[("n", Value::Null), ("s", Value::from("set"))]);
    assert_eq!(
        evaluate("n ?? 'fallback'", &vars),
        Ok(Value::from("fallback"))
    );
    assert_eq!(evaluate("s ?? 'fallback'", &vars), Ok(Value::from("set")));
}

#[test]
fn nested_ternaries_pair_each_else_with_its_own_condition() {
    assert_eq!(ev("true ? false ? 1 : 2 : 3"), Value::Int(2));
    assert_eq!(ev("false ? false ? 1 : 2 : 3"), Value::Int(3));
    assert_eq!(ev("false ? 1"), Value::Null);
}

#[test]
fn a_bare_colon_keeps_the_left_value_as_govaluate_does() {
    // From a public template: `"operator":"BashOperator"` inside a call is
    // govaluate's else-operator, so the call searches for "operator".
    let vars = scope(&[("body_4", Value::from("{\"operator\": 1}"))]);
    assert_eq!(
        evaluate("contains(body_4, \"operator\":\"BashOperator\")", &vars),
        Ok(Value::Bool(true))
    );
}

#[test]
fn plus_concatenates_when_either_side_is_a_string() {
    assert_eq!(ev("'a' + 'b'"), Value::from("ab"));
    assert_eq!(ev("'v' + 1"), Value::from("v1"));
    assert_eq!(ev("1 + 'v'"), Value::from("1v"));
    assert_eq!(ev("'x' + true"), Value::from("xtrue"));
    assert!(matches!(
        ev_err("true + 1", &NoVars),
        DslError::TypeMismatch { .. }
    ));
    assert!(matches!(
        ev_err("'a' - 1", &NoVars),
        DslError::TypeMismatch { .. }
    ));
}

#[test]
fn equality_compares_numbers_numerically_and_strings_bytewise() {
    assert_eq!(ev("200 == 200.0"), Value::Bool(true));
    assert_eq!(ev("'abc' == 'abc'"), Value::Bool(true));
    assert_eq!(ev("'abc' == 'ABC'"), Value::Bool(false));
    assert_eq!(ev("'abc' != 'abd'"), Value::Bool(true));
    assert_eq!(ev("true == true"), Value::Bool(true));
}

#[test]
fn a_numeric_looking_string_never_equals_a_number_as_in_nuclei() {
    let vars = scope(&[
        ("status_code", Value::Int(200)),
        ("code", Value::from("200")),
    ]);
    assert_eq!(evaluate("code == 200", &vars), Ok(Value::Bool(false)));
    assert_eq!(evaluate("code != 200", &vars), Ok(Value::Bool(true)));
    assert_eq!(evaluate("status_code == 200", &vars), Ok(Value::Bool(true)));
    assert_eq!(
        evaluate("to_number(code) == 200", &vars),
        Ok(Value::Bool(true))
    );
    // Ordering a string against a number is an error in govaluate.
    assert!(matches!(
        ev_err("code < 300", &vars),
        DslError::TypeMismatch { .. }
    ));
}

#[test]
fn strings_order_bytewise() {
    assert_eq!(ev("'abc' < 'abd'"), Value::Bool(true));
    assert_eq!(ev("'b' > 'abc'"), Value::Bool(true));
    assert_eq!(ev("'a' <= 'a'"), Value::Bool(true));
}

#[test]
fn regex_operators_match_and_negate() {
    let vars = scope(&[("server", Value::from("Apache/2.4.49 (Unix)"))]);
    assert_eq!(
        evaluate("server =~ 'Apache/2\\\\.4\\\\.4[89]'", &vars),
        Ok(Value::Bool(true))
    );
    assert_eq!(evaluate("server !~ 'nginx'", &vars), Ok(Value::Bool(true)));
    let dynamic = scope(&[("s", Value::from("abc")), ("p", Value::from("^a.c$"))]);
    assert_eq!(evaluate("s =~ p", &dynamic), Ok(Value::Bool(true)));
}

#[test]
fn regex_helpers_leave_a_pattern_unbuilt_when_the_subject_cannot_match_it() {
    use crate::goregex::compile_lazy;
    let page = scope(&[("body", Value::from("<html>404 Not Found</html>"))]);
    let hit = scope(&[("body", Value::from("<title>dsl-gate-probe 7</title>"))]);
    let pattern = r"<title>dsl-gate-probe (\d+)";
    let expr = Expr::parse(r"regex('<title>dsl-gate-probe (\\d+)', body)").expect("parses");
    assert_eq!(expr.eval(&page), Ok(Value::Bool(false)));
    assert!(
        !compile_lazy(pattern).expect("valid").is_built(),
        "a subject without the prefix builds nothing"
    );
    assert_eq!(expr.eval(&hit), Ok(Value::Bool(true)));
    assert!(compile_lazy(pattern).expect("valid").is_built());

    // replace_regex without a possible match gives the subject back as is.
    let suffix = r"[a-z]+-dsl-tail-probe";
    let replace =
        Expr::parse(r"replace_regex(body, '[a-z]+-dsl-tail-probe', 'X')").expect("parses");
    assert_eq!(
        replace.eval(&page),
        Ok(Value::from("<html>404 Not Found</html>"))
    );
    assert!(!compile_lazy(suffix).expect("valid").is_built());
    let tail = scope(&[("body", Value::from("a abc-dsl-tail-probe b"))]);
    assert_eq!(replace.eval(&tail), Ok(Value::from("a X b")));
}

#[test]
fn dsl_regexes_use_go_semantics_for_character_classes() {
    // Go reads `[` inside a class as a literal; Rust would open a nested
    // class. This pattern is from a public template.
    let vars = scope(&[(
        "body",
        Value::from("[12-Jan-2024 10:00:00 UTC] PHP Warning"),
    )]);
    assert_eq!(
        evaluate(
            "regex('[[0-9]{2}-[a-zA-Z]{3}-[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} [A-Z]{3}] PHP', body)",
            &vars
        ),
        Ok(Value::Bool(true))
    );
    // Go's `\d` is ASCII-only: an Arabic-Indic digit does not match.
    let arabic = scope(&[("body", Value::from("\u{0663}")), ("p", Value::from("\\d"))]);
    assert_eq!(evaluate("body =~ p", &arabic), Ok(Value::Bool(false)));
    let ascii = scope(&[("body", Value::from("3")), ("p", Value::from("\\d"))]);
    assert_eq!(evaluate("body =~ p", &ascii), Ok(Value::Bool(true)));
}

#[test]
fn in_checks_membership_of_a_list() {
    let vars = scope(&[("status_code", Value::Int(302))]);
    assert_eq!(
        evaluate("status_code in (301, 302, 307)", &vars),
        Ok(Value::Bool(true))
    );
    assert_eq!(
        evaluate("status_code in (200, 204)", &vars),
        Ok(Value::Bool(false))
    );
}

#[test]
fn identifiers_with_digits_and_underscores_are_variables() {
    let vars = scope(&[
        ("body_2", Value::from("second body")),
        ("status_code_1", Value::Int(200)),
        ("content_type", Value::from("text/html")),
        ("foo-bar", Value::from("hyphen")),
    ]);
    assert_eq!(
        evaluate(
            "status_code_1 == 200 && contains(body_2, 'second') && content_type == 'text/html'",
            &vars
        ),
        Ok(Value::Bool(true))
    );
    assert_eq!(
        evaluate("[foo-bar] + '!'", &vars),
        Ok(Value::from("hyphen!"))
    );
}

#[test]
fn undefined_variables_fail_evaluation_with_their_name() {
    assert!(matches!(
        ev_err("contains(nope, 'x')", &NoVars),
        DslError::UndefinedVariable(n) if n == "nope"
    ));
}

#[test]
fn unknown_functions_fail_at_parse_time() {
    assert_eq!(
        Expr::parse("no_such_fn(body)").map(|_| ()),
        Err(DslError::UnknownFunction("no_such_fn".into()))
    );
}

#[test]
fn syntax_errors_carry_a_position() {
    for bad in [
        "1 +",
        "(1",
        "1)",
        "'abc",
        "a b",
        "",
        "contains(body,",
        "1 === 2",
    ] {
        let e = Expr::parse(bad).map(|_| ()).err();
        assert!(matches!(e, Some(DslError::Syntax { .. })), "{bad:?}: {e:?}");
    }
}

#[test]
fn variables_and_functions_are_listed() {
    let e =
        Expr::parse("status_code == 200 && contains(to_lower(body), '{{marker}}') || len(x) > 1")
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.variables(), vec!["body", "marker", "status_code", "x"]);
    assert_eq!(e.functions(), vec!["contains", "len", "to_lower"]);
}

#[test]
fn string_literals_keep_govaluate_escapes() {
    assert_eq!(ev(r#""a\"b""#), Value::from("a\"b"));
    assert_eq!(ev(r#"'it\'s'"#), Value::from("it's"));
    assert_eq!(ev(r#""it's""#), Value::from("it's"));
    // govaluate takes the escaped character literally: '\n' is the letter n.
    assert_eq!(ev(r#"'a\nb'"#), Value::from("anb"));
    assert_eq!(ev(r#"'a\\b'"#), Value::from("a\\b"));
}

#[test]
fn markers_inside_string_literals_resolve_from_the_scope() {
    let vars = scope(&[
        (
            "body",
            Value::from("token=abc123 and 202cb962ac59075b964b07152d234b70"),
        ),
        ("randstr", Value::from("abc123")),
        ("num", Value::from("123")),
    ]);
    assert_eq!(
        evaluate("contains(body, '{{randstr}}')", &vars),
        Ok(Value::Bool(true))
    );
    assert_eq!(
        evaluate("contains(body, 'token={{randstr}}')", &vars),
        Ok(Value::Bool(true))
    );
    assert_eq!(
        evaluate("contains(body, '{{md5(num)}}')", &vars),
        Ok(Value::Bool(true))
    );
    assert_eq!(
        evaluate("contains_all(body, 'token', \"{{md5({{num}})}}\")", &vars),
        Ok(Value::Bool(true))
    );
    // Unresolved markers stay literal, as in Nuclei.
    assert_eq!(
        evaluate("'x{{missing}}y'", &vars),
        Ok(Value::from("x{{missing}}y"))
    );
}

#[test]
fn expressions_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Expr>();
    assert_send_sync::<TemplateString>();
    let e = Expr::parse("contains(body, 'x')").unwrap_or_else(|e| panic!("{e}"));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let e = e.clone();
            std::thread::spawn(move || {
                let body = if i % 2 == 0 { "x" } else { "y" };
                e.eval(&scope(&[("body", Value::from(body))]))
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or(Err(DslError::UnknownFunction("thread panicked".into())))
        })
        .collect();
    assert_eq!(
        results,
        vec![
            Ok(Value::Bool(true)),
            Ok(Value::Bool(false)),
            Ok(Value::Bool(true)),
            Ok(Value::Bool(false))
        ]
    );
}

#[test]
fn evaluating_against_a_large_body_does_not_copy_it() {
    let body = Bytes::from(vec![b'a'; 10 * 1024 * 1024]);
    let vars = scope(&[("body", Value::Str(body.clone()))]);
    let got = vars.get("body");
    match got {
        Some(Value::Str(b)) => assert_eq!(b.as_ptr(), body.as_ptr()),
        other => panic!("unexpected {other:?}"),
    }
    // The lookup above hands out the scope's own buffer (same address), so
    // an expression over the body reads it in place.
    let e = Expr::parse("contains(body, 'b') || len(body) > 5").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.eval(&vars), Ok(Value::Bool(true)));
}

#[test]
fn substr_of_a_body_shares_its_buffer() {
    let body = Bytes::from(b"0123456789".to_vec());
    let vars = scope(&[("body", Value::Str(body.clone()))]);
    let v = evaluate("substr(body, 2, 5)", &vars).unwrap_or_else(|e| panic!("{e}"));
    match v {
        Value::Str(b) => {
            assert_eq!(b.as_ref(), b"234");
            assert_eq!(b.as_ptr(), body[2..].as_ptr());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn chained_scopes_feed_expressions() {
    let response = scope(&[("status_code", Value::Int(200))]);
    let template = scope(&[
        ("status_code", Value::Int(500)),
        ("path", Value::from("/x")),
    ]);
    let vars = Chain(&response, &template);
    assert_eq!(
        evaluate("status_code == 200 && path == '/x'", &vars),
        Ok(Value::Bool(true))
    );
}

// ---- template strings ----

fn render(src: &str, vars: &dyn Vars) -> Rendered {
    TemplateString::parse(src)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .render(vars)
}

#[test]
fn bare_variables_are_substituted() {
    let vars = scope(&[
        ("BaseURL", Value::from("http://h:8080")),
        ("Hostname", Value::from("h:8080")),
    ]);
    let r = render("{{BaseURL}}/admin?host={{Hostname}}", &vars);
    assert_eq!(r.bytes, b"http://h:8080/admin?host=h:8080");
    assert!(r.is_complete());
}

#[test]
fn undefined_bare_variables_stay_verbatim_and_are_reported() {
    let vars = scope(&[("a", Value::from("1"))]);
    let r = render("{{a}}-{{name}}-{{ name }}-{{interactsh-url}}", &vars);
    assert_eq!(r.bytes, b"1-{{name}}-{{ name }}-{{interactsh-url}}");
    assert_eq!(
        r.unresolved,
        vec!["name".to_string(), "interactsh-url".to_string()]
    );
}

#[test]
fn hyphenated_names_resolve_by_exact_key() {
    let vars = scope(&[("interactsh-url", Value::from("abc.oast.fun"))]);
    let r = render("http://{{interactsh-url}}/", &vars);
    assert_eq!(r.bytes, b"http://abc.oast.fun/");
}

#[test]
fn expressions_in_markers_are_evaluated() {
    let vars = scope(&[
        ("username", Value::from("admin")),
        ("num", Value::from("123")),
    ]);
    assert_eq!(
        render("Basic {{base64(username + ':x')}}", &vars).bytes,
        b"Basic YWRtaW46eA=="
    );
    assert_eq!(render("{{base64(username)}}", &vars).bytes, b"YWRtaW4=");
    assert_eq!(
        render("{{md5({{num}})}}", &vars).bytes,
        b"202cb962ac59075b964b07152d234b70"
    );
    assert_eq!(
        render("{{hex_encode('PING')}}\r\n", &vars).bytes,
        b"50494e47\r\n"
    );
    let r = render("{{to_lower(rand_base(5))}}", &vars);
    assert_eq!(r.bytes.len(), 5);
    assert!(r.bytes.iter().all(|b| !b.is_ascii_uppercase()));
}

#[test]
fn markers_with_only_literals_are_left_as_written() {
    // Template-injection probes must reach the target untouched.
    let r = render("q={{7*7}}&r={{'a'+'b'}}&s={{}}", &NoVars);
    assert_eq!(r.bytes, b"q={{7*7}}&r={{'a'+'b'}}&s={{}}");
    assert!(r.is_complete());
}

#[test]
fn text_that_is_not_an_expression_is_left_alone() {
    let src = "{{constructor.constructor('alert(1)')()}} {\"a\":{\"b\":1}}";
    let r = render(src, &NoVars);
    assert_eq!(r.bytes, src.as_bytes());
}

#[test]
fn expressions_with_missing_variables_report_them() {
    let r = render(
        "x={{base64(user + pass)}}",
        &scope(&[("user", Value::from("u"))]),
    );
    assert_eq!(r.bytes, b"x={{base64(user + pass)}}");
    assert_eq!(r.unresolved, vec!["pass".to_string()]);
}

#[test]
fn failing_helpers_are_reported_as_errors() {
    let r = render(
        "a{{base64_decode(v)}}b",
        &scope(&[("v", Value::from("!!"))]),
    );
    assert_eq!(r.bytes, b"a{{base64_decode(v)}}b");
    assert_eq!(r.errors.len(), 1);
    let r = render("{{resolve('example.com')}}", &NoVars);
    assert!(matches!(
        r.errors.first(),
        Some((_, DslError::Unsupported { .. }))
    ));
}

#[test]
fn section_sign_markers_work_like_bare_variables() {
    let vars = scope(&[("payload", Value::from("' OR 1=1"))]);
    let r = render("id=§payload§&x=§missing§&cost=5§", &vars);
    assert_eq!(r.bytes, "id=' OR 1=1&x=§missing§&cost=5§".as_bytes());
    assert_eq!(r.unresolved, vec!["missing".to_string()]);
}

#[test]
fn substituted_values_are_not_read_again_as_markers() {
    let vars = scope(&[
        ("body", Value::from("{{secret}}")),
        ("secret", Value::from("s3cr3t")),
    ]);
    assert_eq!(render("x={{body}}", &vars).bytes, b"x={{secret}}");
    assert_eq!(
        render("{{concat(body, '-x')}}", &vars).bytes,
        b"{{secret}}-x"
    );
}

#[test]
fn braces_inside_marker_strings_do_not_end_the_marker() {
    assert_eq!(
        render("{{concat(\"{{\", 123, \"*\", 123, \"}}\")}}", &NoVars).bytes,
        b"{{123*123}}"
    );
    assert_eq!(render("{{hex_encode('{{')}}", &NoVars).bytes, b"7b7b");
    let vars = scope(&[("Host", Value::from("127.0.0.1"))]);
    assert_eq!(
        render("{{base64('{{Host}}')}}", &vars).bytes,
        b"MTI3LjAuMC4x"
    );
}

#[test]
fn a_stray_opening_marker_before_a_large_json_body_parses_quickly() {
    let src = format!("{{{{ {}", "{\"a\":{\"b\":1}}".repeat(5000));
    let start = std::time::Instant::now();
    let r = render(&src, &NoVars);
    assert_eq!(r.bytes, src.as_bytes());
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn rendering_is_binary_safe() {
    let raw = vec![0u8, 0xff, b'{', 0x80];
    let vars = scope(&[("blob", Value::from(raw.clone()))]);
    let r = render("<{{blob}}>", &vars);
    let mut want = vec![b'<'];
    want.extend_from_slice(&raw);
    want.push(b'>');
    assert_eq!(r.bytes, want);
    let b64 = render("{{base64(blob)}}", &vars).bytes;
    assert_eq!(b64, b"AP97gA==");
}

#[test]
fn template_variables_are_listed() {
    let t = TemplateString::parse("{{BaseURL}}/{{base64(user)}}?{{7*7}}&{{interactsh-url}}§p§")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.variables(),
        vec!["BaseURL", "interactsh-url", "p", "user"]
    );
    assert_eq!(t.functions(), vec!["base64"]);
    assert!(TemplateString::parse("plain")
        .map(|t| t.is_plain())
        .unwrap_or(false));
}

// ---- expressions from real templates ----

/// Representative `dsl:` lines, one per shape seen in the public templates.
const SNIPPETS: &[&str] = &[
    "status_code==200 && (\"116323821\" == mmh3(base64_py(body)))",
    "contains(tolower(header), 'x-guploader-uploadid')",
    "compare_versions(version, '< 5.8.3', '>= 5.0')",
    "contains_all(body, 'A Database Error Occurred', '{{md5({{num}})}}')",
    "status_code_2 == 200 && contains(body_2, \"{{randstr}}\")",
    "regex('(?i)script-src[^;]*(?:\\x27unsafe-inline\\x27|\\*)[^;]*(?:;|$)', header)",
    "len(body) > 0 && !contains(body, '<html')",
    "duration>=6 && status_code == 200",
    "(content_length == 0 || contains(content_type, 'application/json'))",
    "\"Release date: \" + date_time(\"%Y-%M-%D\", extracted_unix_timestamp)",
    "to_number(version) >= 7 ? 'new' : 'old'",
    "status_code in (301, 302)",
];

#[test]
fn representative_template_expressions_parse() {
    for src in SNIPPETS {
        if let Err(e) = Expr::parse(src) {
            panic!("{src}: {e}");
        }
    }
}

#[test]
fn representative_template_expressions_evaluate_sensibly() {
    let vars = scope(&[
        ("status_code", Value::Int(200)),
        ("status_code_2", Value::Int(200)),
        (
            "body",
            Value::from("<html>A Database Error Occurred 202cb962ac59075b964b07152d234b70</html>"),
        ),
        ("body_2", Value::from("echo xyz")),
        ("randstr", Value::from("xyz")),
        ("num", Value::from("123")),
        (
            "header",
            Value::from("HTTP/1.1 200 OK\r\nX-GUploader-UploadID: 1\r\n"),
        ),
        ("version", Value::from("5.8.1")),
        ("duration", Value::Float(6.5)),
        ("content_length", Value::Int(0)),
        ("content_type", Value::from("text/html")),
        ("extracted_unix_timestamp", Value::from("0")),
    ]);
    let expect = [
        (SNIPPETS[1], Value::Bool(true)),
        (SNIPPETS[2], Value::Bool(true)),
        (SNIPPETS[3], Value::Bool(true)),
        (SNIPPETS[4], Value::Bool(true)),
        (SNIPPETS[6], Value::Bool(false)),
        (SNIPPETS[7], Value::Bool(true)),
        (SNIPPETS[8], Value::Bool(true)),
        (SNIPPETS[9], Value::from("Release date: 1970-01-01")),
        (SNIPPETS[11], Value::Bool(false)),
    ];
    for (src, want) in expect {
        assert_eq!(evaluate(src, &vars), Ok(want), "{src}");
    }
}

/// Every `dsl:` expression in a sample of the public template corpus must
/// parse. The corpus is test data kept outside the repository; without it
/// the test says so and passes.
#[test]
fn dsl_expressions_from_the_template_corpus_parse() {
    // The corpus sits in `shared/` beside the repository checkout.
    let beside_repo =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/nuclei-templates/http");
    let candidates = [
        beside_repo,
        Path::new("/work/shared/corpus/nuclei-templates/http").to_path_buf(),
    ];
    let Some(root) = candidates.iter().find(|p| p.is_dir()) else {
        println!("template corpus not found (looked in {candidates:?}); skipping");
        return;
    };
    let mut files = Vec::new();
    collect_yaml(root, &mut files);
    files.sort();
    // Every 5th file keeps the test quick while covering every directory.
    let sample: Vec<_> = files.iter().step_by(5).collect();
    let mut checked = 0usize;
    let mut failures = Vec::new();
    for path in sample {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for expr in dsl_lines(&text) {
            checked += 1;
            if UPSTREAM_SYNTAX_ERRORS.contains(&expr.as_str()) {
                assert!(Expr::parse(&expr).is_err(), "{expr} should not parse");
                continue;
            }
            if let Err(e) = Expr::parse(&expr) {
                failures.push(format!("{}: {expr}: {e}", path.display()));
            }
        }
    }
    println!("parsed {checked} dsl expressions from the corpus sample");
    assert!(checked > 200, "too few expressions found ({checked})");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Expressions in the corpus with mismatched quotes: govaluate rejects them
/// too, so Nuclei never runs them either.
const UPSTREAM_SYNTAX_ERRORS: &[&str] = &[
    r#"contains(body, "{\"event_id\":')"#,
    r#"contains(content_type, "application/json')"#,
];

fn collect_yaml(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_yaml(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

/// The items of every `dsl:` list, read with the YAML parser the scanner
/// uses (only the shape `dsl: [string, ...]` matters here).
fn dsl_lines(text: &str) -> Vec<String> {
    let Ok(doc) = serde_saphyr::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk(&doc, &mut out);
    out
}

fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, child) in map {
                if k == "dsl" {
                    if let serde_json::Value::Array(items) = child {
                        out.extend(items.iter().filter_map(|i| i.as_str().map(String::from)));
                        continue;
                    }
                }
                walk(child, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
        _ => {}
    }
}

#[test]
fn remembered_results_never_leak_between_different_bodies() {
    let e = Expr::parse("mmh3(base64_py(body))").unwrap_or_else(|e| panic!("{e}"));
    let a = Bytes::from(vec![b'a'; 8192]);
    let b = Bytes::from(vec![b'b'; 8192]);
    let hash = |body: &Bytes| {
        e.eval(&scope(&[("body", Value::Str(body.clone()))]))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let ha = hash(&a);
    let hb = hash(&b);
    assert_ne!(ha, hb);
    assert_eq!(hash(&a), ha);
    // The same content in a fresh buffer gives the same answer.
    assert_eq!(hash(&Bytes::from(vec![b'a'; 8192])), ha);
    let direct = helpers::mmh3_hash(&helpers_test_base64_py(&vec![b'b'; 8192]), 0) as i32;
    assert_eq!(hb, Value::from(direct.to_string()));
}

fn helpers_test_base64_py(data: &[u8]) -> Vec<u8> {
    use base64::Engine;
    let enc = base64::engine::general_purpose::STANDARD.encode(data);
    let mut out = Vec::new();
    for line in enc.as_bytes().chunks(76) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}
