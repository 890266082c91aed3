//! Ownership proof of targets (issue 12): users scan only domains they
//! show they control.
//!
//! A target's proof value is `scanfleet-verification=<token>`, published
//! as a DNS TXT record on the domain or on `_scanfleet.<domain>`, or as a
//! line of `/.well-known/scanfleet-verification.txt` served by the domain
//! (HTTPS, then HTTP; redirects only within the domain). [`Checker`] asks
//! both at once and takes the first that holds, DNS before HTTP; when none
//! does, it says what each method found instead.
//!
//! The checks go through the scanner's own HTTP client and DNS settings
//! (hosts map, connect-to overrides, address safety, DNS server), so a
//! proof is looked for exactly where a scan would go.
//!
//! [`ensure_may_scan`] is the gate every scan passes (`POST /scans`,
//! run-now and the scheduler, all through `crate::scans::start_scan`)
//! when `SCANFLEET_TARGETS__REQUIRE_VERIFICATION` is on: the target, or a
//! parent domain the user has proven, must hold a current proof; an expired
//! one is checked again on the spot and renewed silently.

use std::time::Duration;

use chrono::Utc;
use scanfleet_common::chain::Chain;
use scanfleet_common::Settings;
use scanfleet_http::{ClientConfig, HttpClient, HttpError, Request, SendOptions, TargetUrl};
use tokio_postgres::GenericClient;
use uuid::Uuid;

use crate::error::Error;
use crate::error::{FieldError, VerificationHelp};
use crate::store::targets::{self, ProofStatus, TargetRow};

/// What precedes the token in the published value.
pub const PROOF_PREFIX: &str = "scanfleet-verification=";
/// The path of the proof file on the domain.
pub const PROOF_PATH: &str = "/.well-known/scanfleet-verification.txt";
/// The label under which a TXT record may be published instead of the
/// domain itself (for domains whose apex TXT records are crowded).
pub const DNS_LABEL: &str = "_scanfleet";

/// One question's bound (a DNS lookup, one HTTP exchange).
const STEP_TIMEOUT: Duration = Duration::from_secs(5);
/// Redirects followed per scheme.
const MAX_REDIRECTS: usize = 5;
/// Largest proof file read.
const FILE_CAP: usize = 64 * 1024;
/// Found values quoted in a failure, and their length.
const QUOTED_MAX: usize = 5;
const QUOTED_LEN: usize = 120;

/// How a proof was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    DnsTxt,
    HttpFile,
    /// An administrator marked the target verified.
    Admin,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::DnsTxt => "dns_txt",
            Method::HttpFile => "http_file",
            Method::Admin => "admin",
        }
    }
}

pub fn proof_value(token: &str) -> String {
    format!("{PROOF_PREFIX}{token}")
}

/// What a check found: the method that holds, or for each method what was
/// there instead (fields `dns_txt` and `http_file`).
#[derive(Debug, Clone, PartialEq)]
pub enum CheckOutcome {
    Proven(Method),
    NotProven(Vec<FieldError>),
}

/// Looks for a target's proof over the network.
#[derive(Clone)]
pub struct Checker {
    /// The scanner's client with the fleet's network settings, a short
    /// timeout, no retries and a small body cap.
    client: HttpClient,
}

impl Checker {
    pub fn from_settings(settings: &Settings) -> Result<Checker, HttpError> {
        let cfg = ClientConfig {
            timeout: STEP_TIMEOUT,
            body_cap: FILE_CAP,
            retries: 0,
            max_concurrency: 16,
            per_host_rps: None,
            ..ClientConfig::from_settings(&settings.scanner)?
        };
        Ok(Checker {
            client: HttpClient::new(cfg)?,
        })
    }

    /// Checks both methods at once and accepts the first that holds, DNS
    /// before HTTP.
    #[tracing::instrument(skip_all, fields(domain = %domain))]
    pub async fn check(&self, domain: &str, token: &str) -> CheckOutcome {
        let value = proof_value(token);
        let (dns, file) = tokio::join!(
            self.check_dns(domain, &value),
            self.check_file(domain, &value)
        );
        match (dns, file) {
            (Ok(()), _) => CheckOutcome::Proven(Method::DnsTxt),
            (_, Ok(())) => CheckOutcome::Proven(Method::HttpFile),
            (Err(dns), Err(file)) => CheckOutcome::NotProven(vec![
                FieldError {
                    field: Method::DnsTxt.as_str().to_string(),
                    message: dns,
                },
                FieldError {
                    field: Method::HttpFile.as_str().to_string(),
                    message: file,
                },
            ]),
        }
    }

    /// Ok when a TXT record of the domain or of `_scanfleet.<domain>` is
    /// the proof; otherwise what the two names hold.
    async fn check_dns(&self, domain: &str, value: &str) -> Result<(), String> {
        let mut found = Vec::new();
        for name in [domain.to_string(), format!("{DNS_LABEL}.{domain}")] {
            let answer = tokio::time::timeout(STEP_TIMEOUT, self.client.txt_records(&name)).await;
            let text = match answer {
                Err(_) => format!("{name}: no answer within {STEP_TIMEOUT:?}"),
                Ok(Err(e)) => format!("{name}: {}", Chain(&e)),
                Ok(Ok(records)) if records.iter().any(|r| r.trim() == value) => return Ok(()),
                Ok(Ok(records)) if records.is_empty() => format!("{name}: no TXT records"),
                Ok(Ok(records)) => format!(
                    "{name}: {} TXT record(s), none is the proof: {}",
                    records.len(),
                    quote_some(&records)
                ),
            };
            found.push(text);
        }
        Err(format!("no TXT record `{value}` ({})", found.join("; ")))
    }

    /// Ok when the proof file, over HTTPS or else HTTP, has the value as a
    /// line; otherwise what each scheme answered.
    async fn check_file(&self, domain: &str, value: &str) -> Result<(), String> {
        let mut found = Vec::new();
        for scheme in ["https", "http"] {
            match self.fetch_file(scheme, domain).await {
                Ok(body) if body.lines().any(|l| l.trim() == value) => return Ok(()),
                Ok(body) => {
                    let lines: Vec<String> = body
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect();
                    found.push(if lines.is_empty() {
                        format!("{scheme}: the file is empty")
                    } else {
                        format!(
                            "{scheme}: no line is the proof, found {}",
                            quote_some(&lines)
                        )
                    });
                }
                Err(e) => found.push(format!("{scheme}: {}", Chain(&e))),
            }
        }
        Err(format!(
            "no line `{value}` in {PROOF_PATH} ({})",
            found.join("; ")
        ))
    }

    /// The body of the proof file at `scheme://domain`, following
    /// redirects that stay within the domain (itself or its subdomains).
    async fn fetch_file(&self, scheme: &str, domain: &str) -> Result<String, FetchError> {
        let start = format!("{scheme}://{domain}{PROOF_PATH}");
        let mut url = TargetUrl::parse(&start).map_err(FetchError::Http)?;
        let mut target = url.request_target().into_bytes();
        let opts = SendOptions::default();
        for _ in 0..=MAX_REDIRECTS {
            let request = Request::new(&url, "GET", target.clone());
            let shown = request.full_url();
            let response = self
                .client
                .send(&request, &opts)
                .await
                .map_err(FetchError::Http)?;
            match response.status {
                200 => return Ok(String::from_utf8_lossy(&response.body).into_owned()),
                300..=399 => {
                    let Some(location) = response.header("location") else {
                        return Err(FetchError::NoLocation {
                            url: shown,
                            status: response.status,
                        });
                    };
                    let (next, next_target) = url
                        .resolve_location(&target, location)
                        .map_err(FetchError::Http)?;
                    if !within(&next.host, domain) {
                        return Err(FetchError::Outside {
                            url: shown,
                            host: next.host,
                            domain: domain.to_string(),
                        });
                    }
                    url = next;
                    target = next_target;
                }
                status => return Err(FetchError::Status { url: shown, status }),
            }
        }
        Err(FetchError::TooManyRedirects)
    }
}

/// Why the proof file could not be read; its text is what the user sees
/// for the HTTP method in a failed check.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error(transparent)]
    Http(HttpError),
    #[error("{url} answered {status} without a Location")]
    NoLocation { url: String, status: u16 },
    #[error("{url} redirects to {host}, outside {domain}")]
    Outside {
        url: String,
        host: String,
        domain: String,
    },
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
}

/// `host` is `domain` or one of its subdomains.
fn within(host: &str, domain: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == domain || host.ends_with(&format!(".{domain}"))
}

/// Up to [`QUOTED_MAX`] values, quoted and shortened.
fn quote_some(values: &[String]) -> String {
    let mut quoted: Vec<String> = values
        .iter()
        .take(QUOTED_MAX)
        .map(|v| {
            let short: String = v.chars().take(QUOTED_LEN).collect();
            format!("{short:?}")
        })
        .collect();
    if values.len() > QUOTED_MAX {
        quoted.push(format!("and {} more", values.len() - QUOTED_MAX));
    }
    quoted.join(", ")
}

/// How to prove ownership of `target`, for 403s and failed checks.
/// `api_url` is the versioned API's base URL as clients reach it.
pub fn help_for(target: &TargetRow, api_url: &str) -> VerificationHelp {
    let value = proof_value(&target.proof.token);
    VerificationHelp {
        value: value.clone(),
        dns_txt_names: vec![
            target.domain.clone(),
            format!("{DNS_LABEL}.{}", target.domain),
        ],
        file_url: format!("https://{}{PROOF_PATH}", target.domain),
        verify_url: format!("{api_url}/targets/{}/verify", target.id),
        instructions: format!(
            "Publish `{value}` as a DNS TXT record on {d} or {DNS_LABEL}.{d}, or as a line of \
             https://{d}{PROOF_PATH} (HTTP is tried too), then POST {api_url}/targets/{id}/verify.",
            d = target.domain,
            id = target.id,
        ),
    }
}

/// Checks `target` now and records the proof when it holds.
pub async fn verify_target(
    checker: &Checker,
    db: &impl GenericClient,
    target: &TargetRow,
    ttl_days: u32,
) -> Result<Result<TargetRow, Vec<FieldError>>, Error> {
    match checker.check(&target.domain, &target.proof.token).await {
        CheckOutcome::Proven(method) => {
            let expires = Utc::now() + chrono::Duration::days(i64::from(ttl_days));
            let row = targets::set_proof(db, target.id, Some((method.as_str(), Some(expires))))
                .await?
                .ok_or(Error::NotFound("target"))?;
            tracing::info!(target_id = %target.id, method = method.as_str(), "target ownership proven");
            Ok(Ok(row))
        }
        CheckOutcome::NotProven(found) => Ok(Err(found)),
    }
}

/// What the scan gate needs: the checker, the two settings, and where
/// clients reach the API (for the verify link of the help).
#[derive(Clone)]
pub struct Ownership {
    pub checker: Checker,
    pub require: bool,
    pub ttl_days: u32,
    /// The versioned API's base URL as clients reach it.
    pub api_url: String,
}

impl Ownership {
    pub fn from_settings(settings: &Settings, api_url: String) -> Result<Ownership, HttpError> {
        Ok(Ownership {
            checker: Checker::from_settings(settings)?,
            require: settings.targets.require_verification,
            ttl_days: settings.targets.verification_ttl_days,
            api_url,
        })
    }
}

/// Refuses a scan of `target` unless ownership is proven (when required):
/// a current proof of the domain or of a parent domain the user has, or an
/// expired one that still holds when checked again now (and is renewed).
pub async fn ensure_may_scan(
    ownership: &Ownership,
    db: &impl GenericClient,
    user_id: Uuid,
    target: &TargetRow,
) -> Result<(), Error> {
    if !ownership.require {
        return Ok(());
    }
    let now = Utc::now();
    let covering = targets::covering(db, user_id, &target.domain).await?;
    if covering
        .iter()
        .any(|t| t.proof.status_at(now) == ProofStatus::Verified)
    {
        return Ok(());
    }
    let mut why = format!("ownership of {} is not proven", target.domain);
    for expired in covering
        .iter()
        .filter(|t| t.proof.status_at(now) == ProofStatus::Expired)
    {
        match verify_target(&ownership.checker, db, expired, ownership.ttl_days).await? {
            Ok(_) => {
                tracing::info!(target_id = %expired.id, "expired ownership proof renewed before a scan");
                return Ok(());
            }
            Err(found) => {
                why = format!(
                    "the ownership proof of {} expired and no longer holds ({})",
                    expired.domain,
                    found
                        .iter()
                        .map(|f| format!("{}: {}", f.field, f.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
        }
    }
    Err(Error::TargetUnverified {
        detail: format!("{why}; prove it before scanning"),
        help: Box::new(help_for(target, &ownership.api_url)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_within_the_domain_and_its_subdomains() {
        assert!(within("example.com", "example.com"));
        assert!(within("www.Example.com.", "example.com"));
        assert!(!within("badexample.com", "example.com"));
        assert!(!within("example.com.evil.test", "example.com"));
    }

    #[test]
    fn long_lists_of_found_values_are_cut_short() {
        let values: Vec<String> = (0..8).map(|i| format!("v{i}")).collect();
        let text = quote_some(&values);
        assert!(text.starts_with("\"v0\", \"v1\""), "{text}");
        assert!(text.ends_with("and 3 more"), "{text}");
    }
}
