//! The protocol's cryptography: the client's RSA-2048 key pair and its
//! public-key encoding, the per-registration AES-256 key wrapped with
//! RSA-OAEP (SHA-256, empty label), and the data items, each
//! `base64(IV16 || AES-256-CTR(json))`.
//!
//! Both halves live here so the client and our server cannot drift apart:
//! the client unwraps and decrypts, the server wraps and encrypts.
//! Decryption falls back to AES-CFB when the CTR plaintext is not JSON,
//! which is how some older servers encrypted their items.

use aes::cipher::{AsyncStreamCipher, KeyIvInit, StreamCipher};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rand::RngCore;
use rsa::pkcs8::der::pem::{self, LineEnding};
use rsa::pkcs8::{DecodePublicKey, EncodePublicKey};
use rsa::rand_core::OsRng;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use sha2::Sha256;

type Aes256Ctr = ctr::Ctr128BE<aes::Aes256>;
type Aes256CfbDec = cfb_mode::Decryptor<aes::Aes256>;
type Aes256CfbEnc = cfb_mode::Encryptor<aes::Aes256>;

/// The RSA modulus size interactsh clients use.
pub const RSA_BITS: usize = 2048;
/// The PEM label of the public key. Interactsh says `RSA PUBLIC KEY` even
/// though the body is a PKIX SubjectPublicKeyInfo, not PKCS#1; servers
/// parse the body as PKIX, so the label must be kept as it is.
pub const PUBLIC_KEY_PEM_LABEL: &str = "RSA PUBLIC KEY";
/// AES-256 key length.
pub const AES_KEY_LEN: usize = 32;
/// AES block (and IV) length.
const IV_LEN: usize = 16;

/// A per-registration AES-256 key.
pub type AesKey = [u8; AES_KEY_LEN];

/// Everything that can go wrong encoding, wrapping or decrypting.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("generating the RSA key pair")]
    KeyGeneration(#[source] rsa::Error),
    #[error("encoding the public key as PKIX DER")]
    EncodePublicKey(#[source] rsa::pkcs8::spki::Error),
    #[error("the public key is not valid base64")]
    PublicKeyBase64(#[source] base64::DecodeError),
    #[error("the public key is not a PEM block")]
    PublicKeyPem(#[source] rsa::pkcs8::der::Error),
    #[error("the public key's PEM label is {0:?}, not a public key")]
    PublicKeyLabel(String),
    #[error("the public key is not an RSA SubjectPublicKeyInfo")]
    PublicKeyDer(#[source] rsa::pkcs8::spki::Error),
    #[error("wrapping the AES key with RSA-OAEP")]
    Wrap(#[source] rsa::Error),
    #[error("the wrapped AES key is not valid base64")]
    WrappedKeyBase64(#[source] base64::DecodeError),
    #[error("unwrapping the AES key with RSA-OAEP")]
    Unwrap(#[source] rsa::Error),
    #[error("the unwrapped AES key has {0} bytes, not 32")]
    KeyLength(usize),
    #[error("the data item is not valid base64")]
    ItemBase64(#[source] base64::DecodeError),
    #[error("the data item has {0} bytes, shorter than its 16-byte IV")]
    ItemTooShort(usize),
}

/// A client's RSA key pair.
#[derive(Clone)]
pub struct KeyPair {
    private: RsaPrivateKey,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyPair(***)")
    }
}

impl KeyPair {
    /// A fresh RSA-2048 key pair from the operating system's RNG. This is
    /// CPU work (tens of milliseconds optimised, much more in debug builds);
    /// async callers should run it on a blocking thread.
    pub fn generate() -> Result<KeyPair, CryptoError> {
        let private =
            RsaPrivateKey::new(&mut OsRng, RSA_BITS).map_err(CryptoError::KeyGeneration)?;
        Ok(KeyPair { private })
    }

    /// The public key as the `public-key` field of a registration.
    pub fn public_key_field(&self) -> Result<String, CryptoError> {
        encode_public_key(&self.private.to_public_key())
    }

    /// Unwraps the `aes_key` of a poll answer.
    pub fn unwrap_aes_key(&self, wrapped: &str) -> Result<AesKey, CryptoError> {
        let sealed = BASE64
            .decode(wrapped.trim())
            .map_err(CryptoError::WrappedKeyBase64)?;
        let key = self
            .private
            .decrypt(Oaep::new::<Sha256>(), &sealed)
            .map_err(CryptoError::Unwrap)?;
        let len = key.len();
        key.try_into().map_err(|_| CryptoError::KeyLength(len))
    }
}

/// `base64(PEM("RSA PUBLIC KEY", PKIX DER))`, as interactsh clients send it.
pub fn encode_public_key(key: &RsaPublicKey) -> Result<String, CryptoError> {
    let der = key
        .to_public_key_der()
        .map_err(CryptoError::EncodePublicKey)?;
    let block = pem::encode_string(PUBLIC_KEY_PEM_LABEL, LineEnding::LF, der.as_bytes())
        .map_err(|e| CryptoError::PublicKeyPem(e.into()))?;
    Ok(BASE64.encode(block))
}

/// Parses a registration's `public-key` field. Like the Go server, any
/// label naming a public key is taken and the body is read as PKIX.
pub fn parse_public_key(field: &str) -> Result<RsaPublicKey, CryptoError> {
    let block = BASE64
        .decode(field.trim())
        .map_err(CryptoError::PublicKeyBase64)?;
    let (label, der) = pem::decode_vec(&block).map_err(|e| CryptoError::PublicKeyPem(e.into()))?;
    if !label.ends_with("PUBLIC KEY") {
        return Err(CryptoError::PublicKeyLabel(label.to_string()));
    }
    RsaPublicKey::from_public_key_der(&der).map_err(CryptoError::PublicKeyDer)
}

/// A fresh random AES-256 key for one registration.
pub fn generate_aes_key() -> AesKey {
    let mut key = [0u8; AES_KEY_LEN];
    rand::rng().fill_bytes(&mut key);
    key
}

/// Wraps `key` for the holder of `public`: base64 of RSA-OAEP(SHA-256,
/// empty label), the poll answer's `aes_key`.
pub fn wrap_aes_key(public: &RsaPublicKey, key: &AesKey) -> Result<String, CryptoError> {
    let sealed = public
        .encrypt(&mut OsRng, Oaep::new::<Sha256>(), key)
        .map_err(CryptoError::Wrap)?;
    Ok(BASE64.encode(sealed))
}

/// Encrypts one interaction's JSON: `base64(IV || AES-256-CTR(plaintext))`
/// with a random IV, as the interactsh server does.
pub fn encrypt_item(key: &AesKey, plaintext: &[u8]) -> String {
    let mut out = vec![0u8; IV_LEN + plaintext.len()];
    let (iv, body) = out.split_at_mut(IV_LEN);
    rand::rng().fill_bytes(iv);
    body.copy_from_slice(plaintext);
    Aes256Ctr::new(key.into(), (&*iv).into()).apply_keystream(body);
    BASE64.encode(out)
}

/// Like [`encrypt_item`] but with AES-256-CFB, the older servers' mode.
/// Only tests and compatibility checks need it.
pub fn encrypt_item_cfb(key: &AesKey, plaintext: &[u8]) -> String {
    let mut out = vec![0u8; IV_LEN + plaintext.len()];
    let (iv, body) = out.split_at_mut(IV_LEN);
    rand::rng().fill_bytes(iv);
    body.copy_from_slice(plaintext);
    Aes256CfbEnc::new(key.into(), (&*iv).into()).encrypt(body);
    BASE64.encode(out)
}

/// Decrypts one data item: CTR first; when that plaintext is not JSON, the
/// item is taken as CFB (older servers). Returns the CTR plaintext when
/// neither parses, so the caller's JSON error names what it got.
pub fn decrypt_item(key: &AesKey, item: &str) -> Result<Vec<u8>, CryptoError> {
    let raw = BASE64
        .decode(item.trim())
        .map_err(CryptoError::ItemBase64)?;
    if raw.len() < IV_LEN {
        return Err(CryptoError::ItemTooShort(raw.len()));
    }
    let (iv, body) = raw.split_at(IV_LEN);
    let mut ctr_plain = body.to_vec();
    Aes256Ctr::new(key.into(), iv.into()).apply_keystream(&mut ctr_plain);
    if is_json(&ctr_plain) {
        return Ok(ctr_plain);
    }
    let mut cfb_plain = body.to_vec();
    Aes256CfbDec::new(key.into(), iv.into()).decrypt(&mut cfb_plain);
    if is_json(&cfb_plain) {
        return Ok(cfb_plain);
    }
    Ok(ctr_plain)
}

fn is_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_key_pair() -> KeyPair {
        // 1024 bits keeps the unit tests quick; the wire format is the same.
        let private = RsaPrivateKey::new(&mut OsRng, 1024).unwrap();
        KeyPair { private }
    }

    #[test]
    fn a_public_key_round_trips_through_its_field_encoding() {
        let pair = small_key_pair();
        let field = pair.public_key_field().unwrap();
        let pem = String::from_utf8(BASE64.decode(&field).unwrap()).unwrap();
        assert!(pem.starts_with("-----BEGIN RSA PUBLIC KEY-----\n"));
        assert_eq!(
            parse_public_key(&field).unwrap(),
            pair.private.to_public_key()
        );
    }

    #[test]
    fn a_wrapped_aes_key_unwraps_to_the_same_key() {
        let pair = small_key_pair();
        let key = generate_aes_key();
        let wrapped = wrap_aes_key(&pair.private.to_public_key(), &key).unwrap();
        assert_eq!(pair.unwrap_aes_key(&wrapped).unwrap(), key);
    }

    #[test]
    fn ctr_and_cfb_items_both_decrypt_to_their_json() {
        let key = generate_aes_key();
        let json = br#"{"protocol":"dns","unique-id":"x"}"#;
        assert_eq!(decrypt_item(&key, &encrypt_item(&key, json)).unwrap(), json);
        assert_eq!(
            decrypt_item(&key, &encrypt_item_cfb(&key, json)).unwrap(),
            json
        );
    }

    #[test]
    fn an_item_shorter_than_its_iv_is_refused() {
        let key = generate_aes_key();
        let err = decrypt_item(&key, &BASE64.encode([0u8; 5])).unwrap_err();
        assert!(matches!(err, CryptoError::ItemTooShort(5)));
    }
}
