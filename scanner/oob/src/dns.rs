//! The DNS listener (UDP and TCP, through hickory-server): authoritative
//! for `--domain` only, never recursive, and never answering with much
//! more than was asked, so it cannot be used to amplify traffic.
//!
//! Every name under the zone resolves (A, and AAAA when an IPv6 `--ip` is
//! given) to the server's own address, so a payload host always leads a
//! target on to the HTTP, SMTP or LDAP listener; the apex also has NS and
//! SOA. Other types get an empty answer with the SOA (NODATA), ANY gets
//! the address records alone (RFC 8482), and names outside the zone are
//! REFUSED. Each query for a name whose labels carry a registered id is
//! recorded.

use std::fmt::Write as _;
use std::net::IpAddr;

use hickory_proto::op::{Header, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, NS, SOA};
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_server::authority::MessageResponseBuilder;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use scanfleet_interactsh::find_ids;

use crate::metrics;
use crate::recorder::{Recorder, Seen};

/// TTL of every record: short, since a payload host is asked for once and
/// the records only matter for as long as a scan runs.
const TTL: u32 = 60;

/// Answers queries for one zone.
pub struct DnsHandler {
    zone: LowerName,
    apex: Name,
    ns: Name,
    hostmaster: Name,
    ips: Vec<IpAddr>,
    recorder: Recorder,
}

/// The records of one answer, by section.
#[derive(Default)]
struct Answer {
    answers: Vec<Record>,
    authority: Vec<Record>,
    additionals: Vec<Record>,
}

impl DnsHandler {
    /// A handler for `domain` (lower case, no trailing dot) answering with `ips`.
    pub fn new(
        domain: &str,
        ips: Vec<IpAddr>,
        recorder: Recorder,
    ) -> Result<DnsHandler, hickory_proto::ProtoError> {
        let apex = Name::from_ascii(format!("{domain}."))?;
        Ok(DnsHandler {
            zone: LowerName::new(&apex),
            ns: Name::from_ascii(format!("ns1.{domain}."))?,
            hostmaster: Name::from_ascii(format!("hostmaster.{domain}."))?,
            apex,
            ips,
            recorder,
        })
    }

    fn address_records(&self, name: &Name, qtype: RecordType) -> Vec<Record> {
        self.ips
            .iter()
            .filter_map(|ip| match (ip, qtype) {
                (IpAddr::V4(v4), RecordType::A) => Some(RData::A(A::from(*v4))),
                (IpAddr::V6(v6), RecordType::AAAA) => Some(RData::AAAA(AAAA::from(*v6))),
                _ => None,
            })
            .map(|rdata| Record::from_rdata(name.clone(), TTL, rdata))
            .collect()
    }

    fn soa(&self) -> Record {
        let soa = SOA::new(
            self.ns.clone(),
            self.hostmaster.clone(),
            1,
            3600,
            600,
            86400,
            TTL,
        );
        Record::from_rdata(self.apex.clone(), TTL, RData::SOA(soa))
    }

    /// The records for one in-zone question.
    fn answer(&self, name: &Name, qtype: RecordType) -> Answer {
        let at_apex = LowerName::new(name) == self.zone;
        let mut answer = Answer::default();
        match qtype {
            RecordType::A | RecordType::AAAA => answer.answers = self.address_records(name, qtype),
            RecordType::ANY => {
                answer.answers = self.address_records(name, RecordType::A);
                if answer.answers.is_empty() {
                    answer.answers = self.address_records(name, RecordType::AAAA);
                }
            }
            RecordType::NS if at_apex => {
                let ns = RData::NS(NS(self.ns.clone()));
                answer
                    .answers
                    .push(Record::from_rdata(self.apex.clone(), TTL, ns));
                answer.additionals = self.address_records(&self.ns, RecordType::A);
            }
            RecordType::SOA if at_apex => answer.answers.push(self.soa()),
            _ => {}
        }
        if answer.answers.is_empty() {
            answer.authority.push(self.soa());
        }
        answer
    }
}

#[async_trait::async_trait]
impl RequestHandler for DnsHandler {
    async fn handle_request<R: ResponseHandler>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        let builder = MessageResponseBuilder::from_message_request(request);
        let refuse = |code| {
            MessageResponseBuilder::from_message_request(request).error_msg(request.header(), code)
        };
        if request.message_type() != MessageType::Query || request.op_code() != OpCode::Query {
            return send(&mut response, refuse(ResponseCode::NotImp)).await;
        }
        let Ok(info) = request.request_info() else {
            return send(&mut response, refuse(ResponseCode::FormErr)).await;
        };
        if !self.zone.zone_of(info.query.name()) {
            metrics::dns_query(false);
            return send(&mut response, refuse(ResponseCode::Refused)).await;
        }
        metrics::dns_query(true);
        let name = info.query.original().name().clone();
        let qtype = info.query.query_type();
        let answer = self.answer(&name, qtype);
        let mut header = Header::response_from_request(request.header());
        header.set_authoritative(true);
        header.set_recursion_available(false);
        let matches = find_ids(&name.to_ascii());
        if !matches.is_empty() {
            let seen = Seen {
                protocol: "dns",
                q_type: qtype.to_string(),
                raw_request: describe_request(request, &name, qtype),
                raw_response: describe_response(&header, &answer),
                ..Seen::default()
            };
            self.recorder
                .record(&matches, request.src().ip(), &seen)
                .await;
        }
        let (soa, ns): (Vec<_>, Vec<_>) = answer
            .authority
            .iter()
            .partition(|r| r.record_type() == RecordType::SOA);
        let message = builder.build(
            header,
            answer.answers.iter(),
            ns,
            soa,
            answer.additionals.iter(),
        );
        send(&mut response, message).await
    }
}

async fn send<'a, R: ResponseHandler>(
    response: &mut R,
    message: hickory_server::authority::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
) -> ResponseInfo {
    match response.send_response(message).await {
        Ok(info) => info,
        Err(e) => {
            tracing::debug!(error = %e, "could not send a DNS response");
            let mut header = Header::new();
            header.set_response_code(ResponseCode::ServFail);
            header.into()
        }
    }
}

/// The query in dig's layout, as the Go server's `raw-request` holds it.
fn describe_request(request: &Request, name: &Name, qtype: RecordType) -> String {
    format!(
        ";; opcode: QUERY, status: NOERROR, id: {}\n;; flags:{}; QUERY: 1, ANSWER: 0, AUTHORITY: 0, ADDITIONAL: {}\n\n;; QUESTION SECTION:\n;{}\tIN\t {}\n",
        request.id(),
        if request.recursion_desired() { " rd" } else { "" },
        u8::from(request.edns().is_some()),
        name,
        qtype
    )
}

fn describe_response(header: &Header, answer: &Answer) -> String {
    let mut text = format!(
        ";; opcode: QUERY, status: {}, id: {}\n;; flags: qr aa; ANSWER: {}, AUTHORITY: {}, ADDITIONAL: {}\n",
        header.response_code(),
        header.id(),
        answer.answers.len(),
        answer.authority.len(),
        answer.additionals.len()
    );
    for (title, records) in [
        ("ANSWER", &answer.answers),
        ("AUTHORITY", &answer.authority),
        ("ADDITIONAL", &answer.additionals),
    ] {
        if !records.is_empty() {
            let _ = write!(text, "\n;; {title} SECTION:\n");
            for record in records {
                let _ = writeln!(text, "{record}");
            }
        }
    }
    text
}
