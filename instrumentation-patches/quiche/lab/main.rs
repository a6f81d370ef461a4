//! quicsm-quiche: the quicsm lab program for quiche. A server that answers every bidirectional
//! stream carrying "GET <n>\n" with n bytes, and a client that fetches `--objects` objects over
//! one connection with `--parallel` streams at a time and prints one JSON line. quiche is
//! sans-I/O: this program owns the UDP socket, the timers and the pacing (`SendInfo::at`).
//!
//!   quicsm-quiche server --listen HOST:PORT --qlog-dir DIR
//!   quicsm-quiche client --connect HOST:PORT --objects N --object-size BYTES --qlog-dir DIR [--parallel P]
//!
//! The sender's congestion controller comes from QUICSM_CC (reno, cubic, bbr2; default cubic).
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, ErrorKind};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ALPN: &[u8] = b"quicsm-lab";
const CHUNK: usize = 64 * 1024;
const TICK: Duration = Duration::from_millis(50);
/// length of the connection IDs this program issues (short headers carry no length)
const CID_LEN: usize = 16;

fn flags(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    let mut it = args.iter();
    while let Some(key) = it.next() {
        let name = key.strip_prefix("--").ok_or(format!("unexpected argument {key:?}"))?;
        let value = it.next().ok_or(format!("{key} needs a value"))?;
        out.insert(name.to_string(), value.clone());
    }
    Ok(out)
}

fn need<'a>(f: &'a HashMap<String, String>, key: &str) -> Result<&'a str, String> {
    f.get(key).map(String::as_str).ok_or(format!("--{key} is required"))
}

fn number(f: &HashMap<String, String>, key: &str, default: u64) -> Result<u64, String> {
    match f.get(key) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| format!("--{key}: expected a number, got {v:?}")),
    }
}

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Connection IDs need only be unique here, not unpredictable.
fn new_cid(seq: &mut u64) -> Vec<u8> {
    *seq += 1;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    let mut x = nanos ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
    let mut cid = Vec::with_capacity(CID_LEN);
    for _ in 0..2 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cid.extend_from_slice(&x.to_be_bytes());
    }
    cid
}

fn config(server_cert: Option<(&Path, &Path)>) -> Result<quiche::Config, String> {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(err("quiche config"))?;
    if let Some((cert, key)) = server_cert {
        c.load_cert_chain_from_pem_file(&cert.to_string_lossy()).map_err(err("certificate"))?;
        c.load_priv_key_from_pem_file(&key.to_string_lossy()).map_err(err("key"))?;
    }
    c.verify_peer(false); // the lab's certificate is self-signed
    c.set_application_protos(&[ALPN]).map_err(err("alpn"))?;
    let cc = std::env::var("QUICSM_CC").unwrap_or_else(|_| "cubic".into());
    c.set_cc_algorithm_name(&cc)
        .map_err(|_| format!("QUICSM_CC: unknown controller {cc:?} (reno, cubic, bbr2)"))?;
    c.set_max_idle_timeout(30_000);
    c.set_max_recv_udp_payload_size(1350);
    c.set_max_send_udp_payload_size(1350);
    // 32 MB flow-control windows, so that the receiver never limits the sender
    c.set_initial_max_data(64 << 20);
    c.set_initial_max_stream_data_bidi_local(32 << 20);
    c.set_initial_max_stream_data_bidi_remote(32 << 20);
    c.set_initial_max_streams_bidi(10_000);
    c.set_initial_max_streams_uni(100);
    Ok(c)
}

fn attach_qlog(conn: &mut quiche::Connection, path: &Path, title: &str) -> Result<(), String> {
    let file = File::create(path).map_err(err(&path.display().to_string()))?;
    let writer = BufWriter::with_capacity(1 << 16, file);
    conn.set_qlog_with_level(Box::new(writer), title.into(), "quicsm lab".into(), quiche::QlogLevel::Base);
    Ok(())
}

/// Send everything quiche has to send, honouring its pacing times.
fn flush(conn: &mut quiche::Connection, socket: &UdpSocket, out: &mut [u8]) -> Result<(), String> {
    loop {
        match conn.send(out) {
            Ok((len, info)) => {
                let wait = info.at.saturating_duration_since(Instant::now());
                if wait > Duration::from_micros(200) {
                    std::thread::sleep(wait.min(Duration::from_millis(10)));
                }
                match socket.send_to(&out[..len], info.to) {
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(format!("send: {e}")),
                }
            }
            Err(quiche::Error::Done) => return Ok(()),
            Err(e) => {
                conn.close(false, 0x1, b"send failed").ok();
                return Err(format!("send: {e}"));
            }
        }
    }
}

/// Wait up to `timeout` for datagrams; hand each to `handle`.
fn receive(
    socket: &UdpSocket, buf: &mut [u8], timeout: Duration,
    mut handle: impl FnMut(&mut [u8], SocketAddr),
) -> io::Result<()> {
    socket.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
    let mut first = true;
    loop {
        match socket.recv_from(buf) {
            Ok((len, from)) => handle(&mut buf[..len], from),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                break
            }
            Err(e) => return Err(e),
        }
        if first {
            socket.set_nonblocking(true)?;
            first = false;
        }
    }
    socket.set_nonblocking(false)
}

struct Peer {
    conn: quiche::Connection,
    requests: HashMap<u64, Vec<u8>>,
    sending: HashMap<u64, u64>,
}

fn serve_streams(p: &mut Peer, zeros: &[u8]) {
    let mut tmp = [0u8; 4096];
    for s in p.conn.readable() {
        while let Ok((k, fin)) = p.conn.stream_recv(s, &mut tmp) {
            p.requests.entry(s).or_default().extend_from_slice(&tmp[..k]);
            if fin {
                let req = p.requests.remove(&s).unwrap_or_default();
                let req = String::from_utf8_lossy(&req);
                match req.strip_prefix("GET ").and_then(|r| r.trim().parse().ok()) {
                    Some(n) => {
                        p.sending.insert(s, n);
                    }
                    None => eprintln!("stream {s}: bad request {req:?}"),
                }
                break;
            }
        }
    }
    p.sending.retain(|&s, left| loop {
        let k = (*left).min(zeros.len() as u64) as usize;
        match p.conn.stream_send(s, &zeros[..k], k as u64 == *left) {
            Ok(w) => {
                *left -= w as u64;
                if *left == 0 && w == k {
                    return false;
                }
                if w < k {
                    return true;
                }
            }
            Err(quiche::Error::Done) => return true,
            Err(e) => {
                eprintln!("stream {s}: {e}");
                return false;
            }
        }
    });
}

fn server(f: HashMap<String, String>) -> Result<(), String> {
    let listen: SocketAddr = need(&f, "listen")?.parse().map_err(err("--listen"))?;
    let dir = PathBuf::from(need(&f, "qlog-dir")?);
    fs::create_dir_all(&dir).map_err(err(&dir.display().to_string()))?;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(err("certificate"))?;
    let tmp = std::env::temp_dir().join(format!("quicsm-quiche-{}", std::process::id()));
    fs::create_dir_all(&tmp).map_err(err("temp dir"))?;
    let (cert_path, key_path) = (tmp.join("cert.pem"), tmp.join("key.pem"));
    fs::write(&cert_path, cert.cert.pem()).map_err(err("cert.pem"))?;
    fs::write(&key_path, cert.key_pair.serialize_pem()).map_err(err("key.pem"))?;
    let mut cfg = config(Some((&cert_path, &key_path)));
    fs::remove_dir_all(&tmp).ok();
    let cfg = cfg.as_mut().map_err(|e| e.clone())?;

    let socket = UdpSocket::bind(listen).map_err(err(&listen.to_string()))?;
    let local = socket.local_addr().map_err(err("socket"))?;
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone()).map_err(err("signal"))?;
    }
    println!("ready");

    let mut peers: HashMap<Vec<u8>, Peer> = HashMap::new();
    let mut aliases: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let (mut buf, mut out, zeros) = (vec![0u8; 65535], vec![0u8; 1500], vec![0u8; CHUNK]);
    let mut seq = 0u64;
    loop {
        let stopping = term.load(Ordering::Relaxed);
        if stopping {
            for p in peers.values_mut() {
                p.conn.close(true, 0, b"shutdown").ok();
            }
        }
        let timeout = peers.values().filter_map(|p| p.conn.timeout()).min().unwrap_or(TICK).min(TICK);
        let mut problem = None;
        receive(&socket, &mut buf, if stopping { Duration::ZERO } else { timeout }, |pkt, from| {
            let Ok(hdr) = quiche::Header::from_slice(pkt, CID_LEN) else { return };
            let dcid = hdr.dcid.to_vec();
            let key = aliases.get(&dcid).cloned().unwrap_or(dcid.clone());
            if !peers.contains_key(&key) {
                if hdr.ty != quiche::Type::Initial || stopping {
                    return;
                }
                let scid = new_cid(&mut seq);
                let mut conn = match quiche::accept(&quiche::ConnectionId::from_ref(&scid), None, local, from, cfg) {
                    Ok(c) => c,
                    Err(e) => return eprintln!("accept: {e}"),
                };
                let hex: String = scid.iter().map(|b| format!("{b:02x}")).collect();
                if let Err(e) = attach_qlog(&mut conn, &dir.join(format!("{hex}_server.sqlog")), "server") {
                    problem = Some(e);
                }
                aliases.insert(dcid, scid.clone());
                peers.insert(scid.clone(), Peer { conn, requests: HashMap::new(), sending: HashMap::new() });
                return handle_packet(peers.get_mut(&scid), pkt, from, local);
            }
            handle_packet(peers.get_mut(&key), pkt, from, local)
        })
        .map_err(err("receive"))?;
        if let Some(e) = problem {
            return Err(e);
        }
        for p in peers.values_mut() {
            p.conn.on_timeout();
            if p.conn.is_established() {
                serve_streams(p, &zeros);
            }
            if let Err(e) = flush(&mut p.conn, &socket, &mut out) {
                eprintln!("{e}");
            }
        }
        peers.retain(|_, p| !p.conn.is_closed());
        aliases.retain(|_, scid| peers.contains_key(scid));
        if stopping && peers.is_empty() {
            return Ok(());
        }
    }
}

fn handle_packet(p: Option<&mut Peer>, pkt: &mut [u8], from: SocketAddr, to: SocketAddr) {
    if let Some(p) = p {
        if let Err(e) = p.conn.recv(pkt, quiche::RecvInfo { from, to }) {
            if e != quiche::Error::Done {
                eprintln!("recv: {e}");
            }
        }
    }
}

fn client(f: HashMap<String, String>) -> Result<(), String> {
    let connect: SocketAddr = need(&f, "connect")?.parse().map_err(err("--connect"))?;
    let objects = number(&f, "objects", 1)?;
    let size = number(&f, "object-size", 1 << 20)?;
    let parallel = number(&f, "parallel", 1)?;
    if objects < 1 || parallel < 1 {
        return Err("--objects and --parallel must be >= 1".into());
    }
    let dir = PathBuf::from(need(&f, "qlog-dir")?);
    fs::create_dir_all(&dir).map_err(err(&dir.display().to_string()))?;
    let mut cfg = config(None)?;
    let bind = if connect.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" };
    let socket = UdpSocket::bind(bind).map_err(err(bind))?;
    let local = socket.local_addr().map_err(err("socket"))?;
    let mut seq = 0u64;
    let scid = new_cid(&mut seq);
    let start = Instant::now();
    let mut conn = quiche::connect(Some("localhost"), &quiche::ConnectionId::from_ref(&scid), local, connect, &mut cfg)
        .map_err(err("connect"))?;
    let hex: String = scid.iter().map(|b| format!("{b:02x}")).collect();
    attach_qlog(&mut conn, &dir.join(format!("{hex}_client.sqlog")), "client")?;
    let (mut buf, mut out, mut tmp) = (vec![0u8; 65535], vec![0u8; 1500], vec![0u8; CHUNK]);
    let (mut started, mut done, mut total) = (0u64, 0u64, 0u64);
    let mut received: HashMap<u64, u64> = HashMap::new();
    let mut error: Option<String> = None;
    let deadline = start + Duration::from_secs(120);
    let mut finished_at = None;
    while !conn.is_closed() {
        if Instant::now() > deadline && error.is_none() && finished_at.is_none() {
            error = Some("timed out after 120 s".into());
            conn.close(true, 1, b"timeout").ok();
        }
        let timeout = conn.timeout().unwrap_or(TICK).min(TICK);
        receive(&socket, &mut buf, timeout, |pkt, from| {
            handle_packet_conn(&mut conn, pkt, from, local)
        })
        .map_err(err("receive"))?;
        conn.on_timeout();
        if conn.is_established() && finished_at.is_none() {
            while started < objects && started - done < parallel {
                let s = started * 4;
                match conn.stream_send(s, format!("GET {size}\n").as_bytes(), true) {
                    Ok(_) => {
                        received.insert(s, 0);
                        started += 1;
                    }
                    Err(e) => {
                        error = Some(format!("stream {s}: {e}"));
                        break;
                    }
                }
            }
            for s in conn.readable() {
                while let Ok((k, fin)) = conn.stream_recv(s, &mut tmp) {
                    *received.entry(s).or_default() += k as u64;
                    total += k as u64;
                    if fin {
                        let got = received.remove(&s).unwrap_or(0);
                        if got != size && error.is_none() {
                            error = Some(format!("object of {got} bytes, expected {size}"));
                        }
                        done += 1;
                        break;
                    }
                }
            }
            if done == objects || error.is_some() {
                finished_at = Some(Instant::now());
                conn.close(true, 0, b"done").ok();
            }
        }
        if let Err(e) = flush(&mut conn, &socket, &mut out) {
            error.get_or_insert(e);
            break;
        }
    }
    if finished_at.is_none() && error.is_none() {
        error = Some(match conn.peer_error() {
            Some(e) => format!("connection closed by peer: {e:?}"),
            None => "connection closed before the transfer finished".into(),
        });
    }
    let elapsed_ms = finished_at.unwrap_or_else(Instant::now).duration_since(start).as_secs_f64() * 1000.0;
    drop(conn); // writes the rest of the client's qlog
    let error_json = match &error {
        Some(e) => format!("\"{}\"", e.replace('\\', "\\\\").replace('"', "\\\"")),
        None => "null".into(),
    };
    println!(
        "{{\"ok\": {}, \"bytes\": {total}, \"completion_ms\": {elapsed_ms:.3}, \"error\": {error_json}}}",
        error.is_none()
    );
    Ok(())
}

fn handle_packet_conn(conn: &mut quiche::Connection, pkt: &mut [u8], from: SocketAddr, to: SocketAddr) {
    if let Err(e) = conn.recv(pkt, quiche::RecvInfo { from, to }) {
        if e != quiche::Error::Done {
            eprintln!("recv: {e}");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = match (args.get(1).map(String::as_str), flags(args.get(2..).unwrap_or(&[]))) {
        (_, Err(e)) => Err(e),
        (Some("server"), Ok(f)) => server(f),
        (Some("client"), Ok(f)) => client(f),
        _ => Err("usage: quicsm-quiche server|client [--flag value ...]".into()),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
