//! HTTP Digest authentication (`digest-username` / `digest-password` on a
//! block), RFC 7616 with RFC 2617's variants: the request goes out as
//! built; when the answer is a 401 with a `Digest` challenge, the same
//! request is sent again with the computed `Authorization`, and that second
//! answer is the one judged, as Nuclei's digest transport does.
//!
//! Algorithms MD5 (the default), MD5-sess, SHA-256 and SHA-256-sess; quality
//! of protection `auth`, `auth-int` when it is the only one offered, or
//! none (RFC 2069 style). The challenge comes from the target itself, so
//! nothing here can send traffic elsewhere.

use std::sync::Arc;

use md5::Md5;
use sha2::{Digest, Sha256};

use super::super::{RunShared, TargetRun};
use super::send_now;
use crate::engine::build::{Built, Outgoing};
use crate::engine::compile::DigestCredentials;
use scanfleet_http::{Response, SendOptions};

/// Sends `built` with digest authentication (never through the shared
/// response cache: the answer depends on the credentials).
pub(super) async fn send(
    shared: &RunShared,
    target: &TargetRun,
    template_id: &str,
    built: &Built,
    options: &SendOptions,
    credentials: &DigestCredentials,
) -> Option<Arc<Response>> {
    let first = send_now(shared, target, template_id, built, options).await?;
    let Outgoing::Normal(request) = &built.outgoing else {
        // Raw bytes go out untouched (`unsafe: true`); nothing to add to.
        return Some(first);
    };
    if first.status != 401 {
        return Some(first);
    }
    let Some(challenge) = first
        .header_values("www-authenticate")
        .find_map(Challenge::parse)
    else {
        return Some(first);
    };
    let uri = String::from_utf8_lossy(&request.target).into_owned();
    let cnonce = hex::encode(rand::random::<[u8; 8]>());
    let Some(authorization) =
        challenge.authorization(credentials, &request.method, &uri, &request.body, &cnonce)
    else {
        // An algorithm or qop this client does not speak.
        return Some(first);
    };
    let mut again = request.clone();
    again
        .headers
        .retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
    again
        .headers
        .push(("Authorization".to_string(), authorization));
    let retry = Built {
        outgoing: Outgoing::Normal(again),
        url: built.url.clone(),
        dump: built.dump.clone(),
        wait: std::time::Duration::ZERO,
        digest: None,
    };
    send_now(shared, target, template_id, &retry, options).await
}

/// The parameters of one `WWW-Authenticate: Digest ...` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Challenge {
    realm: String,
    nonce: String,
    opaque: Option<String>,
    algorithm: String,
    /// Offered qop values, lower case; empty when the server sent none.
    qop: Vec<String>,
}

impl Challenge {
    /// Parses a header value; `None` unless it is a Digest challenge with
    /// a nonce.
    pub(super) fn parse(value: &str) -> Option<Challenge> {
        let value = value.trim();
        let (scheme, rest) = value.split_once(char::is_whitespace)?;
        if !scheme.eq_ignore_ascii_case("digest") {
            return None;
        }
        let params = auth_params(rest);
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        Some(Challenge {
            realm: get("realm").unwrap_or_default(),
            nonce: get("nonce")?,
            opaque: get("opaque"),
            algorithm: get("algorithm").unwrap_or_else(|| "MD5".to_string()),
            qop: get("qop")
                .map(|q| {
                    q.split(',')
                        .map(|s| s.trim().to_ascii_lowercase())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// The `Authorization` header value for one request (nonce count 1).
    pub(super) fn authorization(
        &self,
        credentials: &DigestCredentials,
        method: &str,
        uri: &str,
        body: &[u8],
        cnonce: &str,
    ) -> Option<String> {
        let (hash, session): (fn(&[u8]) -> String, bool) =
            match self.algorithm.to_ascii_uppercase().as_str() {
                "MD5" => (md5_hex, false),
                "MD5-SESS" => (md5_hex, true),
                "SHA-256" => (sha256_hex, false),
                "SHA-256-SESS" => (sha256_hex, true),
                _ => return None,
            };
        let qop = if self.qop.is_empty() {
            None
        } else if self.qop.iter().any(|q| q == "auth") {
            Some("auth")
        } else if self.qop.iter().any(|q| q == "auth-int") {
            Some("auth-int")
        } else {
            return None;
        };
        let nc = "00000001";
        let mut ha1 = hash(
            format!(
                "{}:{}:{}",
                credentials.username, self.realm, credentials.password
            )
            .as_bytes(),
        );
        if session {
            ha1 = hash(format!("{ha1}:{}:{cnonce}", self.nonce).as_bytes());
        }
        let ha2 = match qop {
            Some("auth-int") => hash(format!("{method}:{uri}:{}", hash(body)).as_bytes()),
            _ => hash(format!("{method}:{uri}").as_bytes()),
        };
        let response = match qop {
            Some(qop) => hash(format!("{ha1}:{}:{nc}:{cnonce}:{qop}:{ha2}", self.nonce).as_bytes()),
            None => hash(format!("{ha1}:{}:{ha2}", self.nonce).as_bytes()),
        };
        let mut out = format!(
            "Digest username=\"{}\", realm=\"{}\", nonce=\"{}\", uri=\"{uri}\", algorithm={}, response=\"{response}\"",
            quote(&credentials.username),
            quote(&self.realm),
            quote(&self.nonce),
            self.algorithm,
        );
        if let Some(opaque) = &self.opaque {
            out.push_str(&format!(", opaque=\"{}\"", quote(opaque)));
        }
        if let Some(qop) = qop {
            out.push_str(&format!(", qop={qop}, nc={nc}, cnonce=\"{cnonce}\""));
        }
        Some(out)
    }
}

fn md5_hex(data: &[u8]) -> String {
    hex::encode(Md5::digest(data))
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Escapes a value for a quoted-string.
fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// `name=value` and `name="quoted, value"` pairs separated by commas.
fn auth_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' {
                break;
            }
            name.push(c);
            chars.next();
        }
        if name.trim().is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'=') {
            chars.next();
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            if chars.peek() == Some(&'"') {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    value.push(c);
                    chars.next();
                }
            }
        }
        out.push((name.trim().to_string(), value.trim().to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(username: &str, password: &str) -> DigestCredentials {
        DigestCredentials {
            username: username.into(),
            password: password.into(),
        }
    }

    fn response_field(header: &str) -> &str {
        let at = header.find("response=\"").expect("response") + "response=\"".len();
        &header[at..at + header[at..].find('"').expect("closing quote")]
    }

    #[test]
    fn rfc_2617_example_gives_its_response() {
        let c = Challenge::parse(
            r#"Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41""#,
        )
        .expect("challenge");
        let h = c
            .authorization(
                &creds("Mufasa", "Circle Of Life"),
                "GET",
                "/dir/index.html",
                b"",
                "0a4f113b",
            )
            .expect("authorization");
        assert_eq!(response_field(&h), "6629fae49393a05397450978507c4ef1");
        assert!(
            h.contains(r#"opaque="5ccc069c403ebaf9f0171e9517f40e41""#),
            "{h}"
        );
        assert!(h.contains("qop=auth, nc=00000001"), "{h}");
    }

    #[test]
    fn rfc_7616_examples_give_their_responses_for_md5_and_sha_256() {
        let challenge = |alg: &str| {
            Challenge::parse(&format!(
                r#"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm={alg}, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#
            ))
            .expect("challenge")
        };
        let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
        let who = creds("Mufasa", "Circle of Life");
        let md5 = challenge("MD5")
            .authorization(&who, "GET", "/dir/index.html", b"", cnonce)
            .expect("md5");
        assert_eq!(response_field(&md5), "8ca523f5e9506fed4657c9700eebdbec");
        let sha = challenge("SHA-256")
            .authorization(&who, "GET", "/dir/index.html", b"", cnonce)
            .expect("sha-256");
        assert_eq!(
            response_field(&sha),
            "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"
        );
    }

    #[test]
    fn only_digest_challenges_with_a_nonce_are_taken() {
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse(r#"Digest realm="x""#), None);
        let c = Challenge::parse(r#"digest nonce=abc,realm="a, \"b\"""#).expect("challenge");
        assert_eq!(c.realm, r#"a, "b""#);
        assert_eq!(c.nonce, "abc");
        assert_eq!(c.algorithm, "MD5");
        assert!(c.qop.is_empty());
    }

    #[test]
    fn without_qop_the_response_is_rfc_2069_style_and_unknown_algorithms_are_refused() {
        let c = Challenge::parse(r#"Digest realm="r", nonce="n""#).expect("challenge");
        let h = c
            .authorization(&creds("u", "p"), "GET", "/", b"", "c")
            .expect("authorization");
        let ha1 = md5_hex(b"u:r:p");
        let ha2 = md5_hex(b"GET:/");
        assert_eq!(
            response_field(&h),
            md5_hex(format!("{ha1}:n:{ha2}").as_bytes())
        );
        assert!(!h.contains("qop="), "{h}");
        let odd = Challenge::parse(r#"Digest realm="r", nonce="n", algorithm=SHA-512-256"#)
            .expect("challenge");
        assert_eq!(
            odd.authorization(&creds("u", "p"), "GET", "/", b"", "c"),
            None
        );
    }
}
