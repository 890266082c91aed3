//! Which addresses the scanner may connect to.
//!
//! A scan target is untrusted input: without this check a user could point
//! the scanner at the scanner host itself, cloud metadata services or the
//! operator's internal network. The check runs on the resolved address (and
//! again on the peer of the connected socket), so a name that resolves to a
//! private address, or rebinds to one, is refused as well.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not on the public internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Unspecified,
    Loopback,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16.
    Private,
    /// RFC 6598 carrier-grade NAT: 100.64/10.
    SharedCgnat,
    /// 169.254/16 and fe80::/10 (cloud metadata services live here).
    LinkLocal,
    Multicast,
    Broadcast,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32.
    Documentation,
    /// fc00::/7.
    UniqueLocal,
    /// 240/4 and 0/8: not routable on the internet.
    Reserved,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            AddressClass::Unspecified => "unspecified address",
            AddressClass::Loopback => "loopback address",
            AddressClass::Private => "private address",
            AddressClass::SharedCgnat => "carrier-grade NAT address",
            AddressClass::LinkLocal => "link-local address",
            AddressClass::Multicast => "multicast address",
            AddressClass::Broadcast => "broadcast address",
            AddressClass::Documentation => "documentation address",
            AddressClass::UniqueLocal => "unique-local address",
            AddressClass::Reserved => "reserved address",
        };
        f.write_str(text)
    }
}

/// The class of a non-public address, or `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let o = ip.octets();
    if ip.is_unspecified() {
        Some(AddressClass::Unspecified)
    } else if ip.is_broadcast() {
        Some(AddressClass::Broadcast)
    } else if o[0] == 127 {
        Some(AddressClass::Loopback)
    } else if o[0] == 10
        || (o[0] == 172 && (16..=31).contains(&o[1]))
        || (o[0] == 192 && o[1] == 168)
    {
        Some(AddressClass::Private)
    } else if o[0] == 100 && (64..=127).contains(&o[1]) {
        Some(AddressClass::SharedCgnat)
    } else if o[0] == 169 && o[1] == 254 {
        Some(AddressClass::LinkLocal)
    } else if (224..=239).contains(&o[0]) {
        Some(AddressClass::Multicast)
    } else if (o[0] == 192 && o[1] == 0 && o[2] == 2)
        || (o[0] == 198 && o[1] == 51 && o[2] == 100)
        || (o[0] == 203 && o[1] == 0 && o[2] == 113)
    {
        Some(AddressClass::Documentation)
    } else if o[0] == 0 || o[0] >= 240 {
        Some(AddressClass::Reserved)
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    // Addresses that carry an IPv4 address are judged by that address, so
    // ::ffff:127.0.0.1 is as forbidden as 127.0.0.1.
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        Some(AddressClass::Unspecified)
    } else if ip.is_loopback() {
        Some(AddressClass::Loopback)
    } else if s[0] & 0xfe00 == 0xfc00 {
        Some(AddressClass::UniqueLocal)
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some(AddressClass::LinkLocal)
    } else if s[0] & 0xff00 == 0xff00 {
        Some(AddressClass::Multicast)
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        Some(AddressClass::Documentation)
    } else {
        None
    }
}

/// The IPv4 address inside an IPv4-mapped (::ffff:0:0/96) or NAT64
/// (64:ff9b::/96) address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|&x| x == 0) {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        return Some(Ipv4Addr::new(a, b, c, d));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_of(s: &str) -> Option<AddressClass> {
        classify(s.parse().expect("test address parses"))
    }

    #[test]
    fn every_forbidden_ipv4_class_is_recognised() {
        use AddressClass::*;
        let cases = [
            ("0.0.0.0", Unspecified),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("10.1.2.3", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("100.64.0.1", SharedCgnat),
            ("100.127.255.255", SharedCgnat),
            ("169.254.169.254", LinkLocal),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("255.255.255.255", Broadcast),
            ("192.0.2.10", Documentation),
            ("198.51.100.7", Documentation),
            ("203.0.113.99", Documentation),
            ("0.1.2.3", Reserved),
            ("240.0.0.1", Reserved),
        ];
        for (addr, class) in cases {
            assert_eq!(class_of(addr), Some(class), "{addr}");
        }
    }

    #[test]
    fn every_forbidden_ipv6_class_is_recognised() {
        use AddressClass::*;
        let cases = [
            ("::", Unspecified),
            ("::1", Loopback),
            ("fc00::1", UniqueLocal),
            ("fd12:3456::1", UniqueLocal),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("ff02::1", Multicast),
            ("2001:db8::1", Documentation),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:10.0.0.1", Private),
            ("::ffff:169.254.169.254", LinkLocal),
            ("64:ff9b::c0a8:0101", Private),
        ];
        for (addr, class) in cases {
            assert_eq!(class_of(addr), Some(class), "{addr}");
        }
    }

    #[test]
    fn public_addresses_next_to_forbidden_ranges_are_allowed() {
        for addr in [
            "8.8.8.8",
            "1.1.1.1",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "192.0.3.1",
            "198.51.101.1",
            "203.0.114.1",
            "169.253.1.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:db9::1",
            "fec0::1",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class_of(addr), None, "{addr}");
        }
    }
}
