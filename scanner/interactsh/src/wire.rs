//! The JSON bodies of the interactsh HTTP API, with the exact field names
//! the Go client and server use (`public-key`, `aes_key`, `q-type`, ...).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

/// The text an unknown or evicted correlation id answers with; clients
/// (nuclei among them) look for it to know that the session is gone.
pub const EVICTED_MESSAGE: &str = "could not get correlation-id from cache";

/// `POST /register`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegisterRequest {
    /// `base64(PEM("RSA PUBLIC KEY", PKIX DER))`.
    #[serde(rename = "public-key")]
    pub public_key: String,
    /// A UUIDv4 chosen by the client; it authorises poll and deregister.
    #[serde(rename = "secret-key")]
    pub secret_key: String,
    #[serde(rename = "correlation-id")]
    pub correlation_id: String,
}

/// `POST /deregister`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeregisterRequest {
    #[serde(rename = "correlation-id")]
    pub correlation_id: String,
    #[serde(rename = "secret-key")]
    pub secret_key: String,
}

/// The answer to `GET /poll?id=&secret=`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PollResponse {
    /// Encrypted interactions: `base64(IV || AES-256-CTR(json))`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub data: Vec<String>,
    /// Plain-JSON interactions the server shares with every holder of its
    /// token (the Go server fills it; ours sends it empty).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub extra: Vec<String>,
    /// The registration's AES key, wrapped with RSA-OAEP to the client.
    #[serde(default)]
    pub aes_key: String,
    /// Plain-JSON interactions with the server's own domain (root TLD).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub tlddata: Vec<String>,
}

/// `{"message": ...}` (success) or `{"error": ...}` (a 400).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatusBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One recorded interaction with the server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Interaction {
    /// `dns`, `http`, `https`, `smtp`, `ldap` (the Go server also knows
    /// `ftp`, `smb` and `responder`).
    pub protocol: String,
    /// The lower-cased 33-character window (id and nonce).
    #[serde(rename = "unique-id")]
    pub unique_id: String,
    /// The name up to and including the label that held the window.
    #[serde(rename = "full-id")]
    pub full_id: String,
    /// The DNS question type (`A`, `AAAA`, `TXT`, ...), DNS only.
    #[serde(rename = "q-type", default, skip_serializing_if = "String::is_empty")]
    pub q_type: String,
    #[serde(
        rename = "raw-request",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub raw_request: String,
    #[serde(
        rename = "raw-response",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub raw_response: String,
    /// The SMTP envelope sender, SMTP only.
    #[serde(
        rename = "smtp-from",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub smtp_from: String,
    /// The peer's IP address, without the port.
    #[serde(rename = "remote-address")]
    pub remote_address: String,
    pub timestamp: DateTime<Utc>,
}

/// Go encodes a nil slice as `null`; read it as empty.
fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_go_poll_answer_with_null_lists_parses_as_empty() {
        let body = r#"{"data":null,"extra":null,"aes_key":"k"}"#;
        let poll: PollResponse = serde_json::from_str(body).unwrap();
        assert!(poll.data.is_empty() && poll.extra.is_empty() && poll.tlddata.is_empty());
        assert_eq!(poll.aes_key, "k");
    }

    #[test]
    fn an_interaction_uses_the_go_field_names() {
        let json = r#"{"protocol":"dns","unique-id":"u","full-id":"f","q-type":"A",
            "raw-request":"q","raw-response":"r","remote-address":"127.0.0.1",
            "timestamp":"2024-05-01T10:00:00.123456789Z"}"#;
        let i: Interaction = serde_json::from_str(json).unwrap();
        assert_eq!(
            (i.q_type.as_str(), i.remote_address.as_str()),
            ("A", "127.0.0.1")
        );
        let back = serde_json::to_value(&i).unwrap();
        for field in [
            "unique-id",
            "full-id",
            "q-type",
            "raw-request",
            "raw-response",
        ] {
            assert!(back.get(field).is_some(), "{field}");
        }
        assert!(back.get("smtp-from").is_none());
    }
}
