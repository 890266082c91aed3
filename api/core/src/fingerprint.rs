//! A finding's identity across scans (issue 26): its target plus the
//! contract's dedup key `template_id:matched_at`, with `matched_at`
//! normalised so that spellings of one URL meet. The rule, also applied by
//! migration 0014's SQL function for the backfill:
//! - a `scheme://authority...` value has its scheme and host lower-cased
//!   (user information, path, query and fragment are kept as they are) and
//!   the scheme's default port dropped (`:80` for http/ws, `:443` for
//!   https/wss);
//! - any other value (`host:port` of a network service) is kept as it is;
//! - then, anywhere in the value, the unique id of an out-of-band payload
//!   host (a 33-character DNS label: a 20-character correlation id in
//!   base32hex, `0-9a-v`, then a 13-character nonce, followed by a dot, as
//!   interactsh servers and our `scanfleet-interactsh` make them) becomes
//!   `{{interactsh-id}}`: every scan sends fresh payload hosts, and the
//!   finding is the same. Migration 0014's backfill predates out-of-band
//!   findings and does not apply this step.

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

// `findings.change` and `fingerprints.last_change` hold the name.
scanfleet_common::text_column!(Change, Change::parse);

/// A finding's triage status, kept on its fingerprint so that it sticks
/// across scans; new findings are `open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FindingStatus {
    Open,
    Confirmed,
    FalsePositive,
    /// Until a day (or for good); past that day the finding reads as open.
    AcceptedRisk,
    Fixed,
}

impl FindingStatus {
    /// Every status, in the order lists and choices show them.
    pub const ALL: [FindingStatus; 5] = [
        FindingStatus::Open,
        FindingStatus::Confirmed,
        FindingStatus::FalsePositive,
        FindingStatus::AcceptedRisk,
        FindingStatus::Fixed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingStatus::Open => "open",
            FindingStatus::Confirmed => "confirmed",
            FindingStatus::FalsePositive => "false_positive",
            FindingStatus::AcceptedRisk => "accepted_risk",
            FindingStatus::Fixed => "fixed",
        }
    }

    pub fn parse(value: &str) -> Option<FindingStatus> {
        FindingStatus::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// The names, for error messages and the contract's lists.
    pub fn names() -> [&'static str; 5] {
        FindingStatus::ALL.map(FindingStatus::as_str)
    }
}

// `fingerprints.status`, `findings.status` and the status history hold the
// name.
scanfleet_common::text_column!(FindingStatus, FindingStatus::parse);

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
    mask_oob_ids(&format!("{scheme}://{userinfo}{host}{tail}"))
}

/// Characters of an out-of-band payload host's unique id.
const OOB_ID_LEN: usize = 33;
/// Of which the correlation id (base32hex).
const OOB_CORRELATION_LEN: usize = 20;
/// What an out-of-band payload host's unique id becomes.
const OOB_ID_MASK: &str = "{{interactsh-id}}";

/// Replaces the unique ids of out-of-band payload hosts (see the module's
/// rule) with [`OOB_ID_MASK`].
fn mask_oob_ids(value: &str) -> String {
    let bytes = value.as_bytes();
    let label = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut out = String::with_capacity(value.len());
    let mut copied = 0;
    let mut i = 0;
    while i + OOB_ID_LEN < bytes.len() {
        let starts_label = i == 0 || !(label(bytes[i - 1]) || bytes[i - 1] == b'-');
        let id = &bytes[i..i + OOB_ID_LEN];
        let is_id = starts_label
            && bytes[i + OOB_ID_LEN] == b'.'
            && id.iter().all(|&b| label(b))
            && id[..OOB_CORRELATION_LEN]
                .iter()
                .all(|&b| b.is_ascii_digit() || (b'a'..=b'v').contains(&b));
        if is_id {
            out.push_str(&value[copied..i]);
            out.push_str(OOB_ID_MASK);
            i += OOB_ID_LEN;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&value[copied..]);
    out
}

/// The fingerprint of a finding on its target: `template_id:` and the
/// normalised `matched_at`.
pub fn fingerprint(template_id: &str, matched_at: &str) -> String {
    fingerprint_of_normalised(template_id, &normalise_matched_at(matched_at))
}

/// [`fingerprint`] of a `matched_at` already normalised.
pub fn fingerprint_of_normalised(template_id: &str, normalised: &str) -> String {
    format!("{template_id}:{normalised}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_band_payload_ids_are_masked_so_each_scans_fresh_hosts_meet() {
        let a = "http://lab.example.test/fetch?url=http://dc3miigjhrnt1e6tgo403kt3k3m9t9tst.oob.example.test/";
        let b = "http://lab.example.test/fetch?url=http://dc3miem0tlb2rskkrog0ymzgsafrmz9yf.oob.example.test/";
        assert_eq!(
            normalise_matched_at(a),
            "http://lab.example.test/fetch?url=http://{{interactsh-id}}.oob.example.test/"
        );
        assert_eq!(fingerprint("t", a), fingerprint("t", b));
        // A payload host as the host itself, and URL-encoded in a query.
        assert_eq!(
            normalise_matched_at("HTTP://DC3MIIGJHRNT1E6TGO403KT3K3M9T9TST.oob.example.test/x"),
            "http://{{interactsh-id}}.oob.example.test/x"
        );
        assert_eq!(
            normalise_matched_at("http://h/l?host=dc3miigjhrnt1e6tgo40d77za56bh6y1d.oob.test&x=1"),
            "http://h/l?host={{interactsh-id}}.oob.test&x=1"
        );
        // Not ids: 33 characters inside a longer label, a correlation part
        // outside base32hex, a label with no dot after it, 32 characters.
        for kept in [
            "http://h/?u=xdc3miigjhrnt1e6tgo403kt3k3m9t9tst.oob.test/",
            "http://h/?u=zz3miigjhrnt1e6tgo403kt3k3m9t9tst.oob.test/",
            "http://h/dc3miigjhrnt1e6tgo403kt3k3m9t9tst",
            "http://h/?u=dc3miigjhrnt1e6tgo403kt3k3m9t9ts.oob.test/",
        ] {
            assert_eq!(normalise_matched_at(kept), kept);
        }
    }

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
