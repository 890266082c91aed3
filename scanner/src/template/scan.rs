//! Light scanning of template text for what the check needs to know: the
//! `{{...}}` markers in request text and the helper functions expressions
//! call. It does not evaluate anything; the DSL module does that at run time.

/// The inner text of each `{{...}}` marker in `s`, in order. A `}}` inside
/// a quoted string does not close the marker (`{{base64('{"a":{}}')}}`).
pub fn markers(s: &str) -> Vec<&str> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = find(bytes, i, b"{{") {
        let start = open + 2;
        let mut j = start;
        let mut quote: Option<u8> = None;
        let mut end = None;
        while j < bytes.len() {
            let b = bytes[j];
            match quote {
                Some(q) => {
                    if b == b'\\' {
                        j += 1;
                    } else if b == q {
                        quote = None;
                    }
                }
                None => {
                    if b == b'"' || b == b'\'' || b == b'`' {
                        quote = Some(b);
                    } else if b == b'}' && bytes.get(j + 1) == Some(&b'}') {
                        end = Some(j);
                        break;
                    } else if b == b'{' && bytes.get(j + 1) == Some(&b'{') {
                        // A new marker opens before this one closed: the
                        // first `{{` was literal text.
                        break;
                    }
                }
            }
            j += 1;
        }
        match end {
            Some(e) => {
                out.push(&s[start..e]);
                i = e + 2;
            }
            None => i = start,
        }
    }
    out
}

fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Names of the functions an expression calls: identifiers followed by `(`,
/// outside string literals.
pub fn called_functions(expr: &str) -> Vec<&str> {
    let bytes = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'"' || b == b'\'' || b == b'`' {
            i += 1;
            while i < bytes.len() && bytes[i] != b {
                if bytes[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let mut k = i;
            while k < bytes.len() && bytes[k].is_ascii_whitespace() {
                k += 1;
            }
            let preceded_by_dot = start > 0 && bytes[start - 1] == b'.';
            if bytes.get(k) == Some(&b'(') && !preceded_by_dot {
                out.push(&expr[start..i]);
            }
            continue;
        }
        if b.is_ascii_digit() {
            // Skip numbers so `1e3` is not read as a name.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    out
}

/// True when a marker is a plain variable reference (`BaseURL`,
/// `interactsh-url`, `username`), not an expression.
pub fn is_plain_variable(marker: &str) -> bool {
    let m = marker.trim();
    !m.is_empty()
        && m.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_in_order_and_quoted_braces_do_not_close_them() {
        let s = "GET /{{path}}?x={{base64('{\"a\":{}}')}}&y={{ rand_int(1, 9) }}";
        assert_eq!(
            markers(s),
            vec!["path", "base64('{\"a\":{}}')", " rand_int(1, 9) "]
        );
    }

    #[test]
    fn an_unclosed_marker_yields_nothing() {
        assert!(markers("{{oops").is_empty());
        assert_eq!(markers("{{ {{x}}"), vec!["x"]);
    }

    #[test]
    fn called_functions_skip_string_literals_and_numbers() {
        let e = r#"contains(body, "md5(x)") && to_lower(header) == 'sha1(' && 1e3 > len(body)"#;
        assert_eq!(called_functions(e), vec!["contains", "to_lower", "len"]);
    }

    #[test]
    fn plain_variables_are_not_expressions() {
        assert!(is_plain_variable("BaseURL"));
        assert!(is_plain_variable(" interactsh-url "));
        assert!(!is_plain_variable("rand_int(1)"));
        assert!(!is_plain_variable("7*7"));
    }
}
