//! Known-answer tests for every helper.

use std::collections::HashMap;

use crate::dsl::{evaluate, DslError, Value};

fn vars(pairs: &[(&str, Value)]) -> HashMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn ev(src: &str) -> Value {
    evaluate(src, &HashMap::<String, Value>::new()).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn ev_with(src: &str, pairs: &[(&str, Value)]) -> Value {
    evaluate(src, &vars(pairs)).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn s(src: &str) -> String {
    ev(src).to_string_lossy()
}

fn err(src: &str) -> DslError {
    match evaluate(src, &HashMap::<String, Value>::new()) {
        Ok(v) => panic!("{src} should fail, got {v:?}"),
        Err(e) => e,
    }
}

#[test]
fn digests_match_the_standard_test_vectors() {
    assert_eq!(s("md5('abc')"), "900150983cd24fb0d6963f7d28e17f72");
    assert_eq!(s("sha1('abc')"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    assert_eq!(
        s("sha256('abc')"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        s("sha512('abc')"),
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
         2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
    );
    // Numbers are hashed in their text form, as Nuclei's toString gives.
    assert_eq!(s("md5(123)"), s("md5('123')"));
}

#[test]
fn hmac_matches_rfc_examples() {
    let msg = "'The quick brown fox jumps over the lazy dog'";
    assert_eq!(
        s(&format!("hmac('sha256', {msg}, 'key')")),
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    );
    assert_eq!(
        s(&format!("hmac('sha1', {msg}, 'key')")),
        "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"
    );
    assert!(matches!(
        err("hmac('md4', 'a', 'b')"),
        DslError::Argument { .. }
    ));
}

#[test]
fn a_decoding_error_keeps_the_decoder_error_as_its_source() {
    let e = err("base64_decode('###')");
    let DslError::Argument { function, reason } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(*function, "base64_decode");
    assert!(
        matches!(reason, crate::dsl::ArgumentError::Base64(_)),
        "{reason:?}"
    );
    // The text names what failed; the chain adds the decoder's words once.
    let source = std::error::Error::source(&e).unwrap();
    assert_eq!(e.to_string(), "base64_decode");
    assert_eq!(
        scanfleet_common::chain::Chain(&e).to_string(),
        format!("base64_decode: {source}")
    );
}

#[test]
fn mmh3_gives_the_signed_32_bit_hash_as_text() {
    // Reference values from the Python mmh3 package that Shodan uses.
    assert_eq!(s("mmh3('hello')"), "613153351");
    assert_eq!(s("mmh3('')"), "0");
    assert_eq!(s("mmh3('foo')"), "-156908512");
    assert_eq!(
        s("mmh3('The quick brown fox jumps over the lazy dog')"),
        "776992547"
    );
}

#[test]
fn favicon_hash_of_a_binary_body_matches_shodan() {
    // mmh3(base64.encodebytes(data)) computed with Python for this body.
    let mut body = b"\x89PNG\r\n\x1a\n".to_vec();
    body.extend((0..300u32).map(|i| ((i * 7 + 2) % 256) as u8));
    let v = ev_with(
        "mmh3(base64_py(body))",
        &[("body", Value::from(body.clone()))],
    );
    assert_eq!(v.to_string_lossy(), "-1585541181");
    let m = ev_with(
        "status_code == 200 && ('-1585541181' == mmh3(base64_py(body)))",
        &[
            ("body", Value::from(body)),
            ("status_code", Value::Int(200)),
        ],
    );
    assert_eq!(m, Value::Bool(true));
}

#[test]
fn base64_py_wraps_at_76_characters_with_a_trailing_newline() {
    let out = s(&format!("base64_py('{}')", "a".repeat(100)));
    assert_eq!(
        out,
        "YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh\n\
         YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYQ==\n"
    );
    assert_eq!(s("base64_py('abc')"), "YWJj\n");
    // Nuclei's helper ends even the empty encoding with a newline.
    assert_eq!(s("base64_py('')"), "\n");
    // Exactly one full line: no empty line after it.
    let exact = s(&format!("base64_py('{}')", "b".repeat(57)));
    assert_eq!(exact.len(), 77);
    assert!(exact.ends_with('\n') && !exact.ends_with("\n\n"));
}

#[test]
fn base64_round_trips_and_rejects_garbage() {
    assert_eq!(s("base64('hello')"), "aGVsbG8=");
    assert_eq!(s("base64_decode('aGVsbG8=')"), "hello");
    assert_eq!(s("base64_decode(base64('a\\'b'))"), "a'b");
    assert!(matches!(
        err("base64_decode('###')"),
        DslError::Argument { .. }
    ));
    // Go's decoder skips line breaks, so base64_py output decodes.
    assert_eq!(s("base64_decode(base64_py('hello'))"), "hello");
}

#[test]
fn binary_results_survive_decoding() {
    let v = ev("base64_decode('AP+A')");
    assert_eq!(v.as_bytes().as_ref(), &[0x00, 0xff, 0x80]);
    assert_eq!(s("hex_encode(base64_decode('AP+A'))"), "00ff80");
    assert_eq!(
        ev("hex_decode('00ff80')").as_bytes().as_ref(),
        &[0, 0xff, 0x80]
    );
    assert!(matches!(
        err("hex_decode('abc')"),
        DslError::Argument { .. }
    ));
}

#[test]
fn url_encoding_follows_go_query_escape() {
    assert_eq!(s("url_encode('a b&c/é~')"), "a+b%26c%2F%C3%A9~");
    assert_eq!(s("url_encode('test}aaa')"), "test%7Daaa");
    assert_eq!(s("url_decode('a+b%26c%2F%C3%A9')"), "a b&c/é");
    assert!(matches!(
        err("url_decode('%zz')"),
        DslError::Argument { .. }
    ));
    assert_eq!(s("urlencode('a b')"), "a+b");
}

#[test]
fn html_escaping_follows_go() {
    assert_eq!(
        s(r#"html_escape('<a href="x">\'&\'</a>')"#),
        "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;"
    );
    assert_eq!(
        s("html_unescape('&lt;b&gt; &amp;amp; &#39;x&#x27; &quot;&copy;&unknown;')"),
        "<b> &amp; 'x' \"©&unknown;"
    );
    assert_eq!(
        s("html_unescape('caf&eacute; &amp &ampx &#150; &hellip;')"),
        "café & &x – …"
    );
}

#[test]
fn contains_family_checks_substrings() {
    let body = Value::from("Hello World from nginx");
    let b = |src: &str| ev_with(src, &[("body", body.clone())]);
    assert_eq!(b("contains(body, 'World')"), Value::Bool(true));
    assert_eq!(b("contains(body, 'world')"), Value::Bool(false));
    assert_eq!(b("contains_all(body, 'Hello', 'nginx')"), Value::Bool(true));
    assert_eq!(
        b("contains_all(body, 'Hello', 'apache')"),
        Value::Bool(false)
    );
    assert_eq!(
        b("contains_any(body, 'apache', 'nginx')"),
        Value::Bool(true)
    );
    assert_eq!(b("contains_any(body, 'apache', 'iis')"), Value::Bool(false));
    assert_eq!(b("starts_with(body, 'x', 'Hello')"), Value::Bool(true));
    assert_eq!(b("ends_with(body, 'nginx')"), Value::Bool(true));
    assert_eq!(b("ends_with(body, 'Hello')"), Value::Bool(false));
}

#[test]
fn line_prefix_and_suffix_look_at_every_line() {
    let body = Value::from("first line\nsecond: yes\nthird");
    let b = |src: &str| ev_with(src, &[("body", body.clone())]);
    assert_eq!(b("line_starts_with(body, 'second')"), Value::Bool(true));
    assert_eq!(b("line_starts_with(body, 'line')"), Value::Bool(false));
    assert_eq!(b("line_ends_with(body, 'yes')"), Value::Bool(true));
    assert_eq!(b("line_ends_with(body, 'second')"), Value::Bool(false));
}

#[test]
fn case_helpers_map_ascii_and_unicode() {
    assert_eq!(s("to_lower('HeLLo ÄÖ')"), "hello äö");
    assert_eq!(s("to_upper('abc')"), "ABC");
    assert_eq!(s("tolower('ABC')"), "abc");
    assert_eq!(s("to_title('hello wORLD')"), "Hello World");
}

#[test]
fn trimming_uses_cutsets_like_go() {
    assert_eq!(s("trim('xxhixx', 'x')"), "hi");
    assert_eq!(s("trim_left('xxhixx', 'x')"), "hixx");
    assert_eq!(s("trim_right('xxhixx', 'x')"), "xxhi");
    let padded = Value::from(" \t hi there \r\n");
    assert_eq!(
        ev_with("trim_space(x)", &[("x", padded)]).to_string_lossy(),
        "hi there"
    );
    assert_eq!(s("trim_prefix('prefix-body', 'prefix-')"), "body");
    assert_eq!(s("trim_suffix('body.php', '.php')"), "body");
    assert_eq!(s("trim_prefix('body', 'x')"), "body");
}

#[test]
fn replace_and_replace_regex_rewrite_text() {
    assert_eq!(s("replace('a-b-c', '-', '+')"), "a+b+c");
    assert_eq!(s("replace('ab', '', '-')"), "-a-b-");
    assert_eq!(s("replace_regex('v1.2.3', '[0-9]', 'N')"), "vN.N.N");
    assert_eq!(
        s("replace_regex('key=value', '(\\\\w+)=(\\\\w+)', '$2=$1')"),
        "value=key"
    );
    let v = ev_with(
        "replace_regex(x, pattern, '')",
        &[
            ("x", Value::from("abc123")),
            ("pattern", Value::from("[a-z]+")),
        ],
    );
    assert_eq!(v.to_string_lossy(), "123");
}

#[test]
fn regex_takes_the_pattern_first() {
    assert_eq!(
        ev("regex('^HTTP/1\\\\.[01] 200', 'HTTP/1.1 200 OK')"),
        Value::Bool(true)
    );
    assert_eq!(ev("regex('[0-9]+', 'abc')"), Value::Bool(false));
    assert!(matches!(
        err("regex('(', 'abc')"),
        DslError::InvalidRegex { .. }
    ));
    assert_eq!(ev("regex_any('abc', ('x', 'b'))"), Value::Bool(true));
    assert_eq!(ev("regex_all('abc', ('a', 'x'))"), Value::Bool(false));
}

#[test]
fn regex_works_on_binary_input() {
    let body = Value::from(vec![0xff, 0xfe, b'k', b'e', b'y', b'=', b'1', 0x00]);
    let v = ev_with("regex('key=[0-9]', body)", &[("body", body)]);
    assert_eq!(v, Value::Bool(true));
}

#[test]
fn concat_join_repeat_and_reverse_build_strings() {
    assert_eq!(s("concat('a', 1, true, 'b')"), "a1trueb");
    assert_eq!(s("concat()"), "");
    assert_eq!(s("join('-', 'a', 'b', 3)"), "a-b-3");
    assert_eq!(s("join(',', split('a b c', ' '))"), "a,b,c");
    assert!(matches!(err("join(',', 'a')"), DslError::Argument { .. }));
    assert_eq!(s("repeat('ab', 3)"), "ababab");
    assert!(matches!(err("repeat('ab', -1)"), DslError::Argument { .. }));
    assert_eq!(s("reverse('abc')"), "cba");
    assert_eq!(s("reverse('añb')"), "bña");
}

#[test]
fn split_by_separator_count_or_limit() {
    assert_eq!(ev("len(split('a,b,c', ','))"), Value::Int(3));
    assert_eq!(s("split('a,b,c', ',')"), "[a b c]");
    assert_eq!(s("split('abcdef', 2)"), "[ab cd ef]");
    assert_eq!(s("split('a,b,c', ',', 2)"), "[a b,c]");
}

#[test]
fn len_index_and_substr_slice_values() {
    assert_eq!(ev("len('hello')"), Value::Int(5));
    assert_eq!(ev("len('é')"), Value::Int(2));
    assert_eq!(ev("len(split('a b', ' '))"), Value::Int(2));
    assert_eq!(s("index('hello', 1)"), "e");
    assert_eq!(s("index(split('a b c', ' '), 2)"), "c");
    assert!(matches!(err("index('abc', 5)"), DslError::Argument { .. }));
    assert_eq!(s("substr('hello world', 6)"), "world");
    assert_eq!(s("substr('hello world', 0, 5)"), "hello");
    assert!(matches!(
        err("substr('hello', 3, 2)"),
        DslError::Argument { .. }
    ));
    assert!(matches!(err("substr('', 0)"), DslError::Argument { .. }));
}

#[test]
fn to_number_and_to_string_convert() {
    assert_eq!(ev("to_number('42')"), Value::Int(42));
    assert_eq!(ev("to_number('4.5')"), Value::Float(4.5));
    assert_eq!(ev("10 + to_number('4')"), Value::Int(14));
    assert!(matches!(err("to_number('abc')"), DslError::Argument { .. }));
    assert_eq!(s("to_string(12)"), "12");
    assert_eq!(ev("to_string(12) == '12'"), Value::Bool(true));
}

#[test]
fn random_helpers_respect_length_and_charset() {
    let v = s("rand_base(12)");
    assert_eq!(v.len(), 12);
    assert!(v.bytes().all(|b| b.is_ascii_alphanumeric()));
    assert!(s("rand_base(8, 'ab')")
        .bytes()
        .all(|b| b == b'a' || b == b'b'));
    assert!(s("rand_text_alpha(20)")
        .bytes()
        .all(|b| b.is_ascii_alphabetic()));
    assert!(s("rand_text_alpha(50, 'abcdefghijklmnopqrstuvwxyz')")
        .bytes()
        .all(|b| b.is_ascii_uppercase()));
    assert!(s("rand_text_alphanumeric(20)")
        .bytes()
        .all(|b| b.is_ascii_alphanumeric()));
    let n = s("rand_text_numeric(30, '0')");
    assert_eq!(n.len(), 30);
    assert!(n.bytes().all(|b| (b'1'..=b'9').contains(&b)));
    assert_eq!(s("rand_char('z')"), "z");
    for _ in 0..50 {
        let Value::Int(i) = ev("rand_int(5, 8)") else {
            panic!("rand_int must return an integer")
        };
        assert!((5..8).contains(&i));
    }
    assert!(matches!(err("rand_int(5, 5)"), DslError::Argument { .. }));
    let ip = s("rand_ip('10.1.2.0/24')");
    assert!(ip.starts_with("10.1.2."), "{ip}");
    // Two random markers are (overwhelmingly likely) different.
    assert_ne!(s("rand_base(16)"), s("rand_base(16)"));
}

#[test]
fn compare_versions_follows_go_version_rules() {
    let cv = |src: &str| ev(src);
    assert_eq!(
        cv("compare_versions('5.8.2', '< 5.8.3', '>= 5.0')"),
        Value::Bool(true)
    );
    assert_eq!(
        cv("compare_versions('5.8.3', '< 5.8.3', '>= 5.0')"),
        Value::Bool(false)
    );
    assert_eq!(
        cv("compare_versions('4.9', '< 5.8.3', '>= 5.0')"),
        Value::Bool(false)
    );
    assert_eq!(
        cv("compare_versions('v2.4.49', '>= 2.4.49', '<= 2.4.50')"),
        Value::Bool(true)
    );
    assert_eq!(
        cv("compare_versions('5.8.2', '< 5.8.3, >= 5.0')"),
        Value::Bool(true)
    );
    assert_eq!(cv("compare_versions('5.8', '= 5.8.0')"), Value::Bool(true));
    assert_eq!(cv("compare_versions('5.8', '5.8.0')"), Value::Bool(true));
    assert_eq!(
        cv("compare_versions('1.2.3.4', '> 1.2.3')"),
        Value::Bool(true)
    );
    assert_eq!(
        cv("compare_versions('1.2.3.0', '<= 1.2.3')"),
        Value::Bool(true)
    );
    assert_eq!(
        cv("compare_versions('1.10.0', '> 1.9.9')"),
        Value::Bool(true)
    );
    // A pre-release only satisfies constraints that name a pre-release.
    assert_eq!(
        cv("compare_versions('1.0.0-beta', '>= 0.9')"),
        Value::Bool(false)
    );
    assert_eq!(
        cv("compare_versions('1.0.0-beta', '>= 1.0.0-alpha')"),
        Value::Bool(true)
    );
    assert_eq!(
        cv("compare_versions('1.0.0-rc.2', '> 1.0.0-rc.1')"),
        Value::Bool(true)
    );
    assert_eq!(
        cv("compare_versions('1.0.0', '> 1.0.0-rc.1')"),
        Value::Bool(true)
    );
    // Pessimistic constraints.
    assert_eq!(
        cv("compare_versions('1.2.5', '~> 1.2.3')"),
        Value::Bool(true)
    );
    assert_eq!(
        cv("compare_versions('1.3.0', '~> 1.2.3')"),
        Value::Bool(false)
    );
    assert_eq!(cv("compare_versions('1.9', '~> 1.2')"), Value::Bool(true));
    assert_eq!(cv("compare_versions('2.0', '~> 1.2')"), Value::Bool(false));
    assert_eq!(
        cv("compare_versions('1.0', '!= 1.0.0')"),
        Value::Bool(false)
    );
    assert!(matches!(
        err("compare_versions('not-a-version', '< 1')"),
        DslError::Argument { .. }
    ));
    assert!(matches!(
        err("compare_versions('1.0', '<< 1')"),
        DslError::Argument { .. }
    ));
}

#[test]
fn date_time_formats_percent_directives_and_go_layouts() {
    assert_eq!(
        s("date_time('%Y-%M-%D %H:%m:%s', 0)"),
        "1970-01-01 00:00:00"
    );
    assert_eq!(
        s("date_time('%Y-%M-%DT%H:%m:%sZ', 1700000000)"),
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(s("date_time('2006/01/02', 86400)"), "1970/01/02");
    assert_eq!(s("date_time('Jan 2, 2006', 1700000000)"), "Nov 14, 2023");
    assert_eq!(s("date_time('%Y', '1700000000')"), "2023");
    assert!(matches!(
        err("date_time('%Q', 0)"),
        DslError::Argument { .. }
    ));
    let year = s("date_time('%Y')");
    assert_eq!(year.len(), 4);
}

#[test]
fn unix_time_and_to_unix_time_agree() {
    let Value::Int(now) = ev("unix_time()") else {
        panic!("unix_time must be an integer")
    };
    assert!(now > 1_700_000_000);
    let Value::Int(later) = ev("unix_time(60)") else {
        panic!("unix_time must be an integer")
    };
    assert!(later - now >= 59 && later - now <= 61);
    assert_eq!(
        ev("to_unix_time('2023-11-14 22:13:20')"),
        Value::Int(1_700_000_000)
    );
    assert_eq!(
        ev("to_unix_time('2023-11-14T22:13:20Z')"),
        Value::Int(1_700_000_000)
    );
    assert_eq!(ev("to_unix_time('1700000000')"), Value::Int(1_700_000_000));
    assert_eq!(
        ev("to_unix_time('14/11/2023', '02/01/2006')"),
        Value::Int(1_699_920_000)
    );
}

#[test]
fn compression_helpers_round_trip() {
    assert_eq!(
        s("gzip_decode(gzip('hello hello hello'))"),
        "hello hello hello"
    );
    assert_eq!(s("zlib_decode(zlib('abc'))"), "abc");
    assert_eq!(s("inflate(deflate('abc'))"), "abc");
    assert!(ev("gzip('abc')").as_bytes().starts_with(&[0x1f, 0x8b]));
    assert!(matches!(
        err("gzip_decode('not gzip')"),
        DslError::Argument { .. }
    ));
}

#[test]
fn number_base_helpers_convert() {
    assert_eq!(ev("hex_to_dec('ff')"), Value::Int(255));
    assert_eq!(ev("hex_to_dec('0xff')"), Value::Int(255));
    assert_eq!(ev("oct_to_dec('0o17')"), Value::Int(15));
    assert_eq!(ev("bin_to_dec('101')"), Value::Int(5));
    assert_eq!(s("dec_to_hex(255)"), "ff");
    assert!(matches!(err("hex_to_dec('zz')"), DslError::Argument { .. }));
}

/// Issue 12 (fuzzing): a huge padding length was allocated as asked.
#[test]
fn padding_refuses_a_result_larger_than_64_mib() {
    assert!(matches!(
        err("padding('a', 'b', 100000000000)"),
        DslError::Argument { .. }
    ));
    assert_eq!(s("padding('a', 'b', 3)"), "bba");
}

#[test]
fn misc_helpers_behave_like_nuclei() {
    assert_eq!(s("padding('abc', 'x', 6, 'prefix')"), "xxxabc");
    assert_eq!(s("padding('abc', 'xy', 6, 'suffix')"), "abcxyx");
    assert_eq!(s("padding('abcdef', 'x', 3, 'suffix')"), "abcdef");
    assert_eq!(ev("count('a,b,c', ',')"), Value::Int(2));
    assert_eq!(s("remove_bad_chars('a-b_c', '-_')"), "abc");
    assert_eq!(ev("equals_any('b', 'a', 'b')"), Value::Bool(true));
    assert_eq!(s("sort('cba')"), "abc");
    assert_eq!(s("uniq('aabbc')"), "abc");
    assert_eq!(
        s("json_minify('{ \"b\": 1, \"a\": [1, 2] }')"),
        r#"{"a":[1,2],"b":1}"#
    );
    assert_eq!(hex::encode(ev("xor('ab', 'AB')").as_bytes()), "2020");
    assert_eq!(ev("print_debug('x')"), Value::Bool(true));
    assert_eq!(s("getNetworkPort('', '22')"), "22");
    assert_eq!(s("getNetworkPort('443', '22')"), "22");
    assert_eq!(s("getNetworkPort('2222', '22')"), "2222");
}

#[test]
fn generate_jwt_signs_with_hmac_or_none() {
    let token = s(r#"generate_jwt('{"sub":"admin"}', 'HS256', 'secret')"#);
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0], "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9");
    assert_eq!(parts[1], "eyJzdWIiOiJhZG1pbiJ9");
    // HMAC-SHA256 of the signing input with "secret", checked independently.
    let mac = crate::dsl::helpers::hashing_for_tests(
        "sha256",
        b"secret",
        format!("{}.{}", parts[0], parts[1]).as_bytes(),
    );
    use base64::Engine;
    assert_eq!(
        parts[2],
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac)
    );
    let none = s(r#"generate_jwt('{"a":1}', 'none')"#);
    assert!(none.ends_with('.'));
    assert_eq!(none.matches('.').count(), 2);
}

#[test]
fn network_and_blocking_helpers_are_recognised_but_unsupported() {
    assert!(matches!(
        err("resolve('example.com')"),
        DslError::Unsupported {
            function: "resolve",
            ..
        }
    ));
    assert!(matches!(
        err("generate_java_gadget('dns', 'x', 'base64')"),
        DslError::Unsupported { .. }
    ));
    assert!(crate::dsl::is_helper("resolve"));
    assert!(!crate::dsl::is_supported_helper("resolve"));
    assert!(crate::dsl::is_supported_helper("md5"));
}

#[test]
fn helpers_are_also_known_without_underscores() {
    assert_eq!(s("tolower('A')"), "a");
    assert_eq!(s("base64decode('YQ==')"), "a");
    assert_eq!(s("randbase(3)").len(), 3);
    assert!(crate::dsl::is_helper("contains_all"));
    assert!(crate::dsl::is_helper("containsall"));
    assert!(!crate::dsl::is_helper("no_such_helper"));
}

#[test]
fn wrong_argument_counts_fail_when_run_or_when_parsed_strictly() {
    use crate::dsl::Expr;
    // Nuclei compiles such calls and fails when they run.
    let e = Expr::parse("contains(body, 'a', 'b')").unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(e.problems().as_slice(), [DslError::Arity { .. }]));
    let body = vars(&[("body", Value::from("ab"))]);
    assert!(matches!(e.eval(&body), Err(DslError::Arity { .. })));
    let strict = Expr::parse_strict("md5('a', 'b')").map(|_| ()).err();
    assert!(matches!(strict, Some(DslError::Arity { .. })), "{strict:?}");
    assert!(Expr::parse_strict("md5('a')").is_ok());
}

#[test]
fn a_bad_literal_regex_is_reported_as_a_problem_not_a_parse_error() {
    let e = crate::dsl::Expr::parse("regex('(', body)").unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        e.problems().as_slice(),
        [DslError::InvalidRegex { .. }]
    ));
}

#[test]
fn zip_builds_an_archive_whose_entries_inflate_to_their_content() {
    use std::io::Read;
    let z = ev("zip('a.php', '<?php echo 1; ?>', 'dir/b.txt', 'hello')");
    let z = z.as_bytes().to_vec();
    assert_eq!(&z[..4], b"PK\x03\x04");
    // The end-of-central-directory record counts two entries.
    let eocd = z.len() - 22;
    assert_eq!(&z[eocd..eocd + 4], b"PK\x05\x06");
    assert_eq!(u16::from_le_bytes([z[eocd + 10], z[eocd + 11]]), 2);
    // First entry: name, then deflated data that inflates to the content.
    let name_len = u16::from_le_bytes([z[26], z[27]]) as usize;
    let packed_len = u32::from_le_bytes([z[18], z[19], z[20], z[21]]) as usize;
    assert_eq!(&z[30..30 + name_len], b"a.php");
    let data = &z[30 + name_len..30 + name_len + packed_len];
    let mut plain = String::new();
    flate2::read::DeflateDecoder::new(data)
        .read_to_string(&mut plain)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plain, "<?php echo 1; ?>");
    assert!(matches!(
        err("zip('a', 'b', 'c')"),
        DslError::Argument { .. }
    ));
}

#[test]
fn wait_for_is_true_and_notes_the_time_for_the_request_being_built() {
    use std::time::Duration;
    let waits = crate::dsl::RequestedWait::begin();
    let started = std::time::Instant::now();
    assert_eq!(s("wait_for(2)"), "true");
    assert_eq!(s("wait_for('1')"), "true");
    // Noted, not slept: evaluation must not park the thread.
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(waits.end(), Duration::from_secs(3));
    // A new collection starts from zero; nested ones add to the outer one
    // only through what the outer one sees afterwards.
    let outer = crate::dsl::RequestedWait::begin();
    s("wait_for(1)");
    {
        let inner = crate::dsl::RequestedWait::begin();
        s("wait_for(4)");
        assert_eq!(inner.end(), Duration::from_secs(4));
    }
    s("wait_for(0)");
    assert_eq!(outer.end(), Duration::from_secs(1));
    assert!(matches!(err("wait_for('soon')"), DslError::Argument { .. }));
}
