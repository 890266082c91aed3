//! Correlation ids, nonces and the 33-character window that finds them.
//!
//! A payload host is `<correlation-id><nonce>.<domain>`: 20 characters of
//! `0-9a-v` (an xid-like id) followed by a 13-character nonce, 33 in all.
//! The server finds the id by sliding a 33-character window over every
//! lower-cased label of a name; the first 20 characters are the
//! correlation id, and it counts only if that id is registered.

use rand::RngCore;

/// Characters of a correlation id.
pub const CORRELATION_ID_LEN: usize = 20;
/// Characters of the nonce that follows it in a payload host.
pub const NONCE_LEN: usize = 13;
/// The window the server slides over each label.
pub const UNIQUE_ID_LEN: usize = CORRELATION_ID_LEN + NONCE_LEN;

/// The xid alphabet (base32hex, lower case).
const ID_ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
/// The nonce alphabet: z-base-32, as the interactsh client uses.
const NONCE_ALPHABET: &[u8; 32] = b"ybndrfg8ejkmcpqxot1uwisza345h769";

/// A fresh correlation id: like an xid, 4 bytes of Unix seconds then 8
/// random bytes (instead of xid's machine, process and counter, which
/// would need coordination between scanner nodes), as 20 base32hex digits.
pub fn new_correlation_id() -> String {
    let mut bytes = [0u8; 12];
    let seconds = chrono::Utc::now().timestamp() as u32;
    bytes[..4].copy_from_slice(&seconds.to_be_bytes());
    rand::rng().fill_bytes(&mut bytes[4..]);
    base32_digits(&bytes, ID_ALPHABET, CORRELATION_ID_LEN)
}

/// A fresh 13-character nonce.
pub fn new_nonce() -> String {
    let mut bytes = [0u8; 9];
    rand::rng().fill_bytes(&mut bytes);
    base32_digits(&bytes, NONCE_ALPHABET, NONCE_LEN)
}

/// The first `len` 5-bit digits of `bytes`, most significant bit first
/// (the last digit is zero-padded when the bits run out).
fn base32_digits(bytes: &[u8], alphabet: &[u8; 32], len: usize) -> String {
    (0..len)
        .map(|i| {
            let bit = i * 5;
            let hi = u16::from(bytes.get(bit / 8).copied().unwrap_or(0));
            let lo = u16::from(bytes.get(bit / 8 + 1).copied().unwrap_or(0));
            let window = (hi << 8) | lo;
            let digit = (window >> (11 - bit % 8)) & 0x1f;
            char::from(alphabet[usize::from(digit)])
        })
        .collect()
}

/// One 33-character window that looks like an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdMatch {
    /// The lower-cased 33 characters (the interaction's `unique-id`).
    pub unique_id: String,
    /// The name up to and including the label holding the window (the
    /// interaction's `full-id`), in its original case.
    pub full_id: String,
}

impl IdMatch {
    /// The correlation id: the window's first 20 characters.
    pub fn correlation_id(&self) -> &str {
        &self.unique_id[..CORRELATION_ID_LEN]
    }
}

/// Every window of every label of a dotted name that could be an id
/// (33 ASCII letters or digits), in order, without duplicates. Which of
/// them are registered is the server's question.
pub fn find_ids(name: &str) -> Vec<IdMatch> {
    let name = name.trim_end_matches('.');
    let mut found: Vec<IdMatch> = Vec::new();
    let mut end_of_prefix = 0;
    for label in name.split('.') {
        end_of_prefix += label.len();
        for window in label.as_bytes().windows(UNIQUE_ID_LEN) {
            if !window.iter().all(u8::is_ascii_alphanumeric) {
                continue;
            }
            let unique_id = String::from_utf8_lossy(window).to_ascii_lowercase();
            if found.iter().all(|m| m.unique_id != unique_id) {
                found.push(IdMatch {
                    unique_id,
                    full_id: name[..end_of_prefix].to_string(),
                });
            }
        }
        end_of_prefix += 1;
    }
    found
}

/// [`find_ids`] over free text (an SMTP envelope and message, LDAP request
/// bytes): every run of name characters (letters, digits, `-`, `.`) is
/// read as a dotted name.
pub fn find_ids_in_text(text: &[u8]) -> Vec<IdMatch> {
    let mut found: Vec<IdMatch> = Vec::new();
    let is_name_byte = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.';
    for run in text.split(|b| !is_name_byte(b)) {
        if run.len() < UNIQUE_ID_LEN {
            continue;
        }
        // The run is ASCII by construction.
        let name = String::from_utf8_lossy(run);
        for m in find_ids(name.trim_start_matches('.')) {
            if found.iter().all(|f| f.unique_id != m.unique_id) {
                found.push(m);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correlation_id_is_twenty_base32hex_characters() {
        let id = new_correlation_id();
        assert_eq!(id.len(), CORRELATION_ID_LEN);
        assert!(id.bytes().all(|b| ID_ALPHABET.contains(&b)), "{id}");
        assert_ne!(id, new_correlation_id());
    }

    #[test]
    fn a_nonce_is_thirteen_z_base_32_characters() {
        let nonce = new_nonce();
        assert_eq!(nonce.len(), NONCE_LEN);
        assert!(
            nonce.bytes().all(|b| NONCE_ALPHABET.contains(&b)),
            "{nonce}"
        );
    }

    #[test]
    fn the_window_finds_the_id_in_a_mixed_case_host_and_keeps_the_prefix() {
        let unique = format!("{}{}", new_correlation_id(), new_nonce());
        let host = format!("www.{}.OOB.example.com.", unique.to_uppercase());
        let found = find_ids(&host);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].unique_id, unique);
        assert_eq!(found[0].correlation_id(), &unique[..20]);
        assert_eq!(found[0].full_id, format!("www.{}", unique.to_uppercase()));
    }

    #[test]
    fn a_longer_label_yields_every_window_and_short_labels_none() {
        let label = "a".repeat(UNIQUE_ID_LEN + 2);
        assert_eq!(
            find_ids(&format!("{label}.x")).len(),
            1,
            "identical windows collapse"
        );
        let label: String = (0..35).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        assert_eq!(find_ids(&label).len(), 3);
        assert!(find_ids("short.example.com").is_empty());
        assert!(find_ids(&format!("{}_{}", "a".repeat(20), "b".repeat(12))).is_empty());
    }

    #[test]
    fn ids_are_found_in_an_smtp_recipient_and_in_binary_bytes() {
        let unique = format!("{}{}", new_correlation_id(), new_nonce());
        let rcpt = format!("RCPT TO:<user@{unique}.oob.example.com>\r\n");
        assert_eq!(find_ids_in_text(rcpt.as_bytes())[0].unique_id, unique);
        let mut ldap = vec![0x30, 0x25, 0x02, 0x01, 0x02, 0x63, 0x20, 0x04];
        ldap.extend_from_slice(unique.as_bytes());
        ldap.push(0x0a);
        assert_eq!(find_ids_in_text(&ldap)[0].unique_id, unique);
    }
}
