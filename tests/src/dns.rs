//! A small authoritative DNS server on 127.0.0.1 (UDP) for ownership-proof
//! tests: it answers TXT and A questions from tables the test fills, NXDOMAIN
//! for names it has nothing for. Apps reach it through
//! `SCANFLEET_SCANNER__DNS_SERVER`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, TXT};
use hickory_proto::rr::{RData, Record, RecordType};
use tokio::net::UdpSocket;

#[derive(Default)]
struct Zone {
    /// Lower-case name without the final dot -> TXT records (one string each).
    txt: HashMap<String, Vec<String>>,
    a: HashMap<String, Ipv4Addr>,
}

pub struct DnsLab {
    pub addr: SocketAddr,
    zone: Arc<Mutex<Zone>>,
    /// TXT questions answered so far.
    pub txt_questions: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DnsLab {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl DnsLab {
    pub async fn start() -> DnsLab {
        let socket = UdpSocket::bind("127.0.0.1:0").await.expect("dns bind");
        let addr = socket.local_addr().expect("dns addr");
        let zone = Arc::new(Mutex::new(Zone::default()));
        let txt_questions = Arc::new(AtomicU64::new(0));
        let (z, counter) = (zone.clone(), txt_questions.clone());
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let answer = answer(&z, &counter, &query);
                if let Ok(bytes) = answer.to_vec() {
                    let _ = socket.send_to(&bytes, peer).await;
                }
            }
        });
        DnsLab {
            addr,
            zone,
            txt_questions,
            task,
        }
    }

    /// Replaces the TXT records of `name`.
    pub fn set_txt(&self, name: &str, records: &[&str]) {
        let mut zone = self.zone.lock().unwrap();
        zone.txt
            .insert(key(name), records.iter().map(|r| r.to_string()).collect());
    }

    pub fn set_a(&self, name: &str, ip: Ipv4Addr) {
        self.zone.lock().unwrap().a.insert(key(name), ip);
    }

    pub fn env(&self) -> (String, String) {
        (
            "SCANFLEET_SCANNER__DNS_SERVER".to_string(),
            self.addr.to_string(),
        )
    }
}

fn answer(zone: &Mutex<Zone>, txt_questions: &AtomicU64, query: &Message) -> Message {
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true)
        .set_authoritative(true);
    let zone = zone.lock().unwrap();
    let mut known = false;
    for q in query.queries() {
        reply.add_query(q.clone());
        let name = key(&q.name().to_ascii());
        let txt = zone.txt.get(&name);
        let a = zone.a.get(&name);
        known |= txt.is_some() || a.is_some();
        match q.query_type() {
            RecordType::TXT => {
                txt_questions.fetch_add(1, Ordering::SeqCst);
                for value in txt.into_iter().flatten() {
                    reply.add_answer(Record::from_rdata(
                        q.name().clone(),
                        60,
                        RData::TXT(TXT::new(vec![value.clone()])),
                    ));
                }
            }
            RecordType::A => {
                if let Some(ip) = a {
                    reply.add_answer(Record::from_rdata(q.name().clone(), 60, RData::A(A(*ip))));
                }
            }
            _ => {}
        }
    }
    if !known {
        reply.set_response_code(ResponseCode::NXDomain);
    }
    reply
}
