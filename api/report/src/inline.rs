//! Inline code in template texts: names, descriptions and remediations are
//! written in Markdown by template authors, and `` `X-Frame-Options` ``
//! should read as code, not with its backticks. Only this one construct is
//! understood: a single backtick, some text on the same line without a
//! backtick, and a closing backtick. Everything else, an unmatched
//! backtick or an empty pair included, stays as written. The spans say
//! nothing about escaping: each renderer escapes both kinds of text as it
//! escapes any other (finding text comes from scanned sites).

/// A stretch of a text: code (its backticks removed) or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span<'a> {
    pub code: bool,
    pub text: &'a str,
}

/// `text` cut into plain and code spans, in order; the plain spans and the
/// code spans with their backticks put back give `text` again. No span is
/// empty.
pub fn spans(text: &str) -> Vec<Span<'_>> {
    let mut out = Vec::new();
    let mut plain_from = 0;
    let mut at = 0;
    while let Some(open) = text[at..].find('`').map(|i| at + i) {
        let rest = &text[open + 1..];
        let close = rest.find(['`', '\n']).map(|i| open + 1 + i);
        match close {
            Some(close) if text.as_bytes()[close] == b'`' && close > open + 1 => {
                if open > plain_from {
                    out.push(Span {
                        code: false,
                        text: &text[plain_from..open],
                    });
                }
                out.push(Span {
                    code: true,
                    text: &text[open + 1..close],
                });
                plain_from = close + 1;
                at = close + 1;
            }
            // No closing backtick on the line, or an empty pair: this
            // backtick is text, the next one may open a span.
            _ => at = open + 1,
        }
    }
    if plain_from < text.len() {
        out.push(Span {
            code: false,
            text: &text[plain_from..],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(text: &str) -> String {
        spans(text)
            .iter()
            .map(|s| {
                if s.code {
                    format!("[{}]", s.text)
                } else {
                    s.text.to_string()
                }
            })
            .collect()
    }

    #[test]
    fn backtick_pairs_are_code_and_the_rest_is_text() {
        assert_eq!(
            show("Set `X-Frame-Options` to `DENY`."),
            "Set [X-Frame-Options] to [DENY]."
        );
        assert_eq!(show("`a`"), "[a]");
        assert_eq!(show("no code"), "no code");
        assert_eq!(show(""), "");
    }

    #[test]
    fn unmatched_and_empty_backticks_stay_literal() {
        assert_eq!(show("one ` tick"), "one ` tick");
        assert_eq!(show("empty `` pair"), "empty `` pair");
        assert_eq!(show("a ` b `c`"), "a [ b ]c`");
        assert_eq!(show("``x``"), "`[x]`");
    }

    #[test]
    fn a_span_does_not_cross_a_line_break() {
        assert_eq!(show("`a\nb` and `c`"), "`a\nb[ and ]c`");
        assert_eq!(show("`open\n`x`"), "`open\n[x]");
    }

    #[test]
    fn spans_with_their_backticks_give_the_text_back() {
        for text in ["a `b` c ` d", "``", "`", "x`y`z`", "`<script>`"] {
            let back: String = spans(text)
                .iter()
                .map(|s| {
                    assert!(!s.text.is_empty());
                    if s.code {
                        format!("`{}`", s.text)
                    } else {
                        s.text.to_string()
                    }
                })
                .collect();
            assert_eq!(back, text);
        }
    }
}
