//! Digests, HMAC and MurmurHash3.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};

use super::CallCtx;
use crate::dsl::error::DslError;
use crate::dsl::value::Value;

type R = Result<Value, DslError>;

fn hex_digest<D: Digest>(data: &[u8]) -> Value {
    Value::from(hex::encode(D::digest(data)))
}

pub(super) fn md5(a: &[Value], _: &CallCtx) -> R {
    Ok(hex_digest::<Md5>(&a[0].as_bytes()))
}

pub(super) fn sha1(a: &[Value], _: &CallCtx) -> R {
    Ok(hex_digest::<Sha1>(&a[0].as_bytes()))
}

pub(super) fn sha256(a: &[Value], _: &CallCtx) -> R {
    Ok(hex_digest::<Sha256>(&a[0].as_bytes()))
}

pub(super) fn sha512(a: &[Value], _: &CallCtx) -> R {
    Ok(hex_digest::<Sha512>(&a[0].as_bytes()))
}

/// MurmurHash3, x86 32-bit variant, as used by Shodan's favicon hash.
pub fn mmh3_hash(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k: u32 = 0;
        for (i, b) in tail.iter().enumerate() {
            k |= u32::from(*b) << (8 * i);
        }
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// `mmh3(s)`: the hash as a *signed* 32-bit decimal string, as Nuclei
/// returns it (templates compare it with `"-1234" == mmh3(...)`).
pub(super) fn mmh3(a: &[Value], _: &CallCtx) -> R {
    let h = mmh3_hash(&a[0].as_bytes(), 0) as i32;
    Ok(Value::from(h.to_string()))
}

pub(crate) fn hmac_digest<D: Digest>(block_size: usize, key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut k = if key.len() > block_size {
        D::digest(key).to_vec()
    } else {
        key.to_vec()
    };
    k.resize(block_size, 0);
    let ipad: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
    let opad: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
    let mut inner = D::new();
    inner.update(&ipad);
    inner.update(msg);
    let inner = inner.finalize();
    let mut outer = D::new();
    outer.update(&opad);
    outer.update(inner);
    outer.finalize().to_vec()
}

/// HMAC by algorithm name, for `hmac` and `generate_jwt`.
pub(crate) fn hmac_named(alg: &str, key: &[u8], msg: &[u8]) -> Option<Vec<u8>> {
    Some(match alg {
        "sha1" | "sha-1" => hmac_digest::<Sha1>(64, key, msg),
        "sha256" | "sha-256" => hmac_digest::<Sha256>(64, key, msg),
        "sha384" | "sha-384" => hmac_digest::<Sha384>(128, key, msg),
        "sha512" | "sha-512" => hmac_digest::<Sha512>(128, key, msg),
        _ => return None,
    })
}

/// `hmac(algorithm, data, secret)`, hex encoded.
pub(super) fn hmac(a: &[Value], _: &CallCtx) -> R {
    let alg = a[0].to_string_lossy();
    hmac_named(&alg, &a[2].as_bytes(), &a[1].as_bytes())
        .map(|mac| Value::from(hex::encode(mac)))
        .ok_or_else(|| DslError::arg("hmac", format!("unsupported hash algorithm: '{alg}'")))
}
