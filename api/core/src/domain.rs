//! [`Domain`]: a scan target's hostname, parsed once at the edge.
//!
//! A domain is a bare DNS hostname: trimmed, lower-cased, internationalised
//! names converted to punycode (IDNA/UTS 46), at least two labels of 1 to 63
//! letters, digits or inner hyphens, at most 253 characters. Anything that
//! is a URL rather than a hostname (scheme, user information, port, path),
//! an IP address or a wildcard is refused with a message saying which.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

pub const MAX_LABEL_LEN: usize = 63;
pub const MAX_NAME_LEN: usize = 253;

/// A validated, normalised hostname.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Domain(String);

/// Why a text is not a domain; the message the client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainError {
    Empty,
    Scheme,
    UserInfo,
    Path,
    Port,
    IpAddress,
    Wildcard,
    LabelTooLong,
    NameTooLong,
    InvalidCharacters,
    EmptyLabel,
    Hyphen,
    SingleLabel,
}

impl DomainError {
    pub fn message(self) -> &'static str {
        match self {
            DomainError::Empty => "must not be empty",
            DomainError::Scheme => "must be a bare hostname without a scheme (no http://)",
            DomainError::UserInfo => "must be a bare hostname without user information (no user@)",
            DomainError::Path => "must be a bare hostname without a path, query or fragment",
            DomainError::Port => "must be a bare hostname without a port",
            DomainError::IpAddress => "must be a domain name, not an IP address",
            DomainError::Wildcard => "must not contain a wildcard",
            DomainError::LabelTooLong => "each label must be at most 63 characters",
            DomainError::NameTooLong => "must be at most 253 characters",
            DomainError::InvalidCharacters => "may contain only letters, digits, hyphens and dots",
            DomainError::EmptyLabel => {
                "must not contain empty labels (consecutive or leading dots)"
            }
            DomainError::Hyphen => "labels must not start or end with a hyphen",
            DomainError::SingleLabel => "must have at least two labels, like example.com",
        }
    }
}

impl fmt::Display for DomainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl Domain {
    pub fn try_parse(raw: &str) -> Result<Domain, DomainError> {
        let text = raw.trim();
        reject_non_names(text)?;
        // An absolute name (`example.com.`) is the same host.
        let text = text.strip_suffix('.').unwrap_or(text);
        // Length checks first on the raw labels, so an overlong label gets
        // its own message whatever the IDNA step makes of it.
        if text
            .split('.')
            .any(|l| l.len() > MAX_LABEL_LEN && l.is_ascii())
        {
            return Err(DomainError::LabelTooLong);
        }
        let ascii = idna::domain_to_ascii(text).map_err(|_| DomainError::InvalidCharacters)?;
        if ascii.is_empty() {
            return Err(DomainError::Empty);
        }
        if ascii.len() > MAX_NAME_LEN {
            return Err(DomainError::NameTooLong);
        }
        let labels: Vec<&str> = ascii.split('.').collect();
        labels.iter().try_for_each(|label| check_label(label))?;
        if labels.len() < 2 {
            return Err(DomainError::SingleLabel);
        }
        // `10.1`, `1.2.3.4.5`: numeric top-level labels are address forms
        // (inet_aton accepts shortened IPv4), never registrable names.
        if labels
            .last()
            .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(DomainError::IpAddress);
        }
        Ok(Domain(ascii))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// What is not a bare host name at all: empty, a URL, user info, a path,
/// a wildcard, an address or a port.
fn reject_non_names(text: &str) -> Result<(), DomainError> {
    if text.is_empty() {
        return Err(DomainError::Empty);
    }
    if text.contains("://") || text.starts_with("//") {
        return Err(DomainError::Scheme);
    }
    if text.contains('@') {
        return Err(DomainError::UserInfo);
    }
    if text.contains(['/', '?', '#', '\\']) {
        return Err(DomainError::Path);
    }
    if text.contains('*') {
        return Err(DomainError::Wildcard);
    }
    if let Some(bracketed) = text.strip_prefix('[') {
        // `[::1]` or `[::1]:443`.
        let inner = bracketed.split(']').next().unwrap_or_default();
        if inner.parse::<Ipv6Addr>().is_ok() {
            return Err(DomainError::IpAddress);
        }
        return Err(DomainError::InvalidCharacters);
    }
    if text.parse::<IpAddr>().is_ok() {
        return Err(DomainError::IpAddress);
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Err(colon_kind(host, port)),
        None => Ok(()),
    }
}

/// What a name with a colon is: an address with a port, a name with a
/// port, a scheme without slashes (`http:example.com`), or bad characters.
fn colon_kind(host: &str, port: &str) -> DomainError {
    if host.parse::<IpAddr>().is_ok() {
        return DomainError::IpAddress;
    }
    if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) {
        return DomainError::Port;
    }
    if host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        && !host.contains('.')
    {
        return DomainError::Scheme;
    }
    DomainError::InvalidCharacters
}

/// One label of the ASCII name.
fn check_label(label: &str) -> Result<(), DomainError> {
    if label.is_empty() {
        return Err(DomainError::EmptyLabel);
    }
    if label.len() > MAX_LABEL_LEN {
        return Err(DomainError::LabelTooLong);
    }
    if !label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(DomainError::InvalidCharacters);
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(DomainError::Hyphen);
    }
    Ok(())
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Domain {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> String {
        Domain::try_parse(raw)
            .unwrap_or_else(|e| panic!("{raw:?}: {e}"))
            .into_string()
    }

    fn err(raw: &str) -> DomainError {
        match Domain::try_parse(raw) {
            Ok(d) => panic!("{raw:?} was accepted as {d}"),
            Err(e) => e,
        }
    }

    #[test]
    fn domains_are_trimmed_and_lower_cased() {
        assert_eq!(ok("  Example.COM "), "example.com");
        assert_eq!(ok("a-b.sub.example.co.uk"), "a-b.sub.example.co.uk");
        assert_eq!(ok("example.com."), "example.com");
        assert_eq!(ok("1password.com"), "1password.com");
    }

    #[test]
    fn internationalised_names_become_punycode() {
        assert_eq!(ok("Bücher.example"), "xn--bcher-kva.example");
        assert_eq!(ok("例え.テスト"), "xn--r8jz45g.xn--zckzah");
        assert_eq!(ok("xn--bcher-kva.example"), "xn--bcher-kva.example");
    }

    #[test]
    fn urls_are_refused_with_the_part_at_fault() {
        assert_eq!(err("https://example.com"), DomainError::Scheme);
        assert_eq!(err("ftp://example.com/x"), DomainError::Scheme);
        assert_eq!(err("http:example.com"), DomainError::Scheme);
        assert_eq!(err("example.com/admin"), DomainError::Path);
        assert_eq!(err("example.com?q=1"), DomainError::Path);
        assert_eq!(err("example.com:8080"), DomainError::Port);
        assert_eq!(err("user@example.com"), DomainError::UserInfo);
        assert_eq!(err("user:pw@example.com"), DomainError::UserInfo);
    }

    #[test]
    fn ip_addresses_are_refused() {
        for raw in [
            "127.0.0.1",
            "8.8.8.8",
            "10.1",
            "::1",
            "2001:db8::1",
            "[2001:db8::1]",
            "[::1]:443",
            "1.2.3.4:80",
        ] {
            assert_eq!(err(raw), DomainError::IpAddress, "{raw}");
        }
    }

    #[test]
    fn wildcards_long_labels_and_long_names_are_refused() {
        assert_eq!(err("*.example.com"), DomainError::Wildcard);
        assert_eq!(err("a*b.example.com"), DomainError::Wildcard);
        let label = "a".repeat(64);
        assert_eq!(err(&format!("{label}.com")), DomainError::LabelTooLong);
        assert_eq!(ok(&format!("{}.com", "a".repeat(63))).len(), 67);
        let long = format!("{}.com", vec!["a".repeat(60); 5].join("."));
        assert!(long.len() > 253);
        assert_eq!(err(&long), DomainError::NameTooLong);
        let max = format!("{}.{}", vec!["a".repeat(62); 4].join("."), "a");
        assert_eq!(max.len(), 253);
        assert_eq!(ok(&max), max);
    }

    #[test]
    fn malformed_names_are_refused() {
        assert_eq!(err(""), DomainError::Empty);
        assert_eq!(err("   "), DomainError::Empty);
        assert_eq!(err("localhost"), DomainError::SingleLabel);
        assert_eq!(err("exa mple.com"), DomainError::InvalidCharacters);
        assert_eq!(err("under_score.com"), DomainError::InvalidCharacters);
        assert_eq!(err("a..com"), DomainError::EmptyLabel);
        assert_eq!(err(".example.com"), DomainError::EmptyLabel);
        assert_eq!(err("-a.com"), DomainError::Hyphen);
        assert_eq!(err("a-.com"), DomainError::Hyphen);
    }
}
