//! A finding's identity across scans (issue 26): its target plus the
//! contract's dedup key `template_id:matched_at`, with `matched_at`
//! normalised so that spellings of one URL meet. The rule, also applied by
//! migration 0014's SQL function for the backfill:
//! - a `scheme://authority...` value has its scheme and host lower-cased
//!   (user information, path, query and fragment are kept as they are) and
//!   the scheme's default port dropped (`:80` for http/ws, `:443` for
//!   https/wss);
//! - any other value (`host:port` of a network service) is kept as it is.

/// How a finding of a scan relates to the target's earlier scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    /// Never seen on this target before.
    New,
    /// Seen before and not fixed since.
    Recurring,
    /// Seen before, then fixed, and found again.
    Regressed,
}

impl Change {
    pub const ALL: [Change; 3] = [Change::New, Change::Recurring, Change::Regressed];

    pub fn as_str(self) -> &'static str {
        match self {
            Change::New => "new",
            Change::Recurring => "recurring",
            Change::Regressed => "regressed",
        }
    }

    pub fn parse(value: &str) -> Option<Change> {
        Change::ALL.into_iter().find(|c| c.as_str() == value)
    }
}

/// `matched_at` in its normal form (see the module's rule).
pub fn normalise_matched_at(raw: &str) -> String {
    let Some((scheme, rest)) = raw.split_once("://") else {
        return raw.to_string();
    };
    let scheme_ok = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'));
    if !scheme_ok {
        return raw.to_string();
    }
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let mut host = host.to_lowercase();
    let default_port = match scheme.as_str() {
        "http" | "ws" => Some(":80"),
        "https" | "wss" => Some(":443"),
        _ => None,
    };
    if let Some(port) = default_port {
        if let Some(bare) = host.strip_suffix(port) {
            host = bare.to_string();
        }
    }
    format!("{scheme}://{userinfo}{host}{tail}")
}

/// The fingerprint of a finding on its target: `template_id:` and the
/// normalised `matched_at`.
pub fn fingerprint(template_id: &str, matched_at: &str) -> String {
    format!("{template_id}:{}", normalise_matched_at(matched_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_and_host_are_lower_cased_and_the_default_port_dropped() {
        assert_eq!(
            normalise_matched_at("HTTP://Shop.Example.TEST:80/.git/Config?A=B"),
            "http://shop.example.test/.git/Config?A=B"
        );
        assert_eq!(
            normalise_matched_at("https://Shop.example.test:443"),
            "https://shop.example.test"
        );
        assert_eq!(
            normalise_matched_at("https://[::1]:443/a"),
            "https://[::1]/a"
        );
        assert_eq!(
            normalise_matched_at("wss://A.test:443/#X"),
            "wss://a.test/#X"
        );
    }

    #[test]
    fn other_ports_paths_and_user_information_are_kept() {
        assert_eq!(
            normalise_matched_at("https://shop.test:8443/X"),
            "https://shop.test:8443/X"
        );
        assert_eq!(
            normalise_matched_at("http://shop.test:443/"),
            "http://shop.test:443/"
        );
        assert_eq!(
            normalise_matched_at("http://User:Pw@Shop.test:80/p"),
            "http://User:Pw@shop.test/p"
        );
        assert_eq!(
            normalise_matched_at("http://shop.test:8080"),
            "http://shop.test:8080"
        );
    }

    #[test]
    fn values_without_a_scheme_are_kept_as_they_are() {
        assert_eq!(normalise_matched_at("Shop.test:22"), "Shop.test:22");
        assert_eq!(normalise_matched_at("1http://x"), "1http://x");
        assert_eq!(normalise_matched_at(""), "");
    }

    #[test]
    fn spellings_of_one_url_share_a_fingerprint() {
        assert_eq!(
            fingerprint("git-config", "HTTP://Shop.test:80/.git/config"),
            fingerprint("git-config", "http://shop.test/.git/config")
        );
        assert_ne!(
            fingerprint("git-config", "http://shop.test/.git/config"),
            fingerprint("git-config", "http://shop.test/.git/Config")
        );
    }

    #[test]
    fn changes_round_trip_through_their_names() {
        for c in Change::ALL {
            assert_eq!(Change::parse(c.as_str()), Some(c));
        }
        assert_eq!(Change::parse("fixed"), None);
    }
}
