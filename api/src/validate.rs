//! Parsing at the edge: request values are checked and normalised here, and
//! each failure names the request field at fault (422).

use scanfleet_core::domain::Domain;

use crate::error::Error;

/// Parses a target's domain; a failure is a 422 naming `field` (`domain`,
/// or `domains[3]` on import).
pub fn domain(raw: &str, field: &str) -> Result<Domain, Error> {
    Domain::try_parse(raw).map_err(|e| Error::invalid(field, e.message()))
}

/// Lower-cases and checks an email address. Deliberately simple: one `@`, a
/// non-empty local part without spaces, and a dotted domain of valid labels.
pub fn normalize_email(raw: &str) -> Result<String, Error> {
    let email = raw.trim().to_lowercase();
    let bad = |msg: &str| Error::invalid("email", msg.to_string());
    if email.is_empty() {
        return Err(bad("must not be empty"));
    }
    if email.len() > 254 {
        return Err(bad("must be at most 254 characters"));
    }
    let Some((local, domain)) = email.split_once('@') else {
        return Err(bad("must be an email address like name@example.com"));
    };
    if local.is_empty()
        || local.len() > 64
        || domain.contains('@')
        || email.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(bad("must be an email address like name@example.com"));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_alphanumeric() || c == '-')
    };
    if labels.len() < 2 || !labels.iter().all(label_ok) {
        return Err(bad("must have a valid domain like example.com"));
    }
    Ok(email)
}

use crate::contract::bounds::FULL_NAME_MAX;

pub fn validate_full_name(raw: &str) -> Result<String, Error> {
    let name = raw.trim();
    if name.chars().count() > FULL_NAME_MAX {
        return Err(Error::invalid(
            "full_name",
            format!("must be at most {FULL_NAME_MAX} characters"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::invalid(
            "full_name",
            "must not contain control characters",
        ));
    }
    Ok(name.to_string())
}

/// The longest organization a target keeps.
pub const ORGANIZATION_MAX: usize = 200;

/// A target's organization: trimmed, at most [`ORGANIZATION_MAX`]
/// characters, no control characters; empty when absent.
pub fn organization(raw: Option<&str>) -> Result<String, Error> {
    let org = raw.unwrap_or_default().trim();
    if org.chars().count() > ORGANIZATION_MAX {
        return Err(Error::invalid(
            "organization",
            format!("must be at most {ORGANIZATION_MAX} characters"),
        ));
    }
    if org.chars().any(char::is_control) {
        return Err(Error::invalid(
            "organization",
            "must not contain control characters",
        ));
    }
    Ok(org.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_lower_cased_and_trimmed() {
        assert_eq!(
            normalize_email("  Alice@Example.COM ").unwrap(),
            "alice@example.com"
        );
    }

    #[test]
    fn malformed_emails_name_the_email_field() {
        for bad in [
            "",
            "alice",
            "alice@",
            "@example.com",
            "a@b",
            "a b@example.com",
            "a@@example.com",
            "a@-x.com",
            "a@example..com",
        ] {
            match normalize_email(bad) {
                Err(Error::Validation(errs)) => assert_eq!(errs[0].field, "email", "{bad}"),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn a_bad_domain_names_the_field_it_came_in() {
        match domain("http://x.com", "domains[2]") {
            Err(Error::Validation(e)) => assert_eq!(e[0].field, "domains[2]"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn full_names_have_a_length_limit() {
        assert!(validate_full_name(&"x".repeat(200)).is_ok());
        assert!(validate_full_name(&"x".repeat(201)).is_err());
        assert!(validate_full_name("a\u{0}b").is_err());
    }
}
